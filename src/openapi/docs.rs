//! The interactive API explorer at `/api/docs/`: Swagger UI served from
//! files embedded in the binary (the `utoipa-swagger-ui` crate's vendored
//! copy), so it works with no internet access.
//!
//! The page and its static files are served to the same callers as the
//! schema: an API key, or a signed-in dashboard user's session cookie (a
//! browser cannot send a bearer token on navigation; see `crate::api`). The
//! page asks for the API key, keeps it in the tab's session storage, and
//! sends it as `Authorization: Bearer` both when it loads `/api/schema/`
//! (which requires it, like the API) and for "Try it out".
//!
//! Not for: the document itself (see the parent module).

use crate::http::Response;
use std::sync::{Arc, OnceLock};

/// The page: Swagger UI's assets plus a key field and our initializer.
/// `validatorUrl: null` keeps Swagger UI from calling its online validator.
const INDEX_HTML: &str = r##"<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>Dialproof API explorer</title>
  <link rel="stylesheet" href="./swagger-ui.css">
  <style>
    body { margin: 0; font-family: sans-serif; }
    #keybar { padding: 12px 20px; background: #1b1b1b; color: #fff; display: flex; gap: 8px; align-items: center; }
    #keybar input { flex: 1; max-width: 560px; padding: 6px; font-family: monospace; }
    #keybar .note { color: #bbb; font-size: 13px; }
  </style>
</head>
<body>
  <form id="keybar">
    <label for="api-key">API key</label>
    <input id="api-key" name="api-key" type="password" autocomplete="off" placeholder="svc_live_…">
    <button id="load" type="submit">Load</button>
    <span class="note" id="status">The schema is served to API keys only.</span>
  </form>
  <div id="swagger-ui"></div>
  <script src="./swagger-ui-bundle.js"></script>
  <script src="./swagger-ui-standalone-preset.js"></script>
  <script>
    (function () {
      var KEY = "dialproof_api_key";
      var input = document.getElementById("api-key");
      var status = document.getElementById("status");
      function start(token) {
        var ui = SwaggerUIBundle({
          url: "/api/schema/",
          dom_id: "#swagger-ui",
          deepLinking: true,
          validatorUrl: null,
          presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset],
          layout: "BaseLayout",
          persistAuthorization: true,
          requestInterceptor: function (req) {
            var t = sessionStorage.getItem(KEY);
            if (t && !req.headers.Authorization) { req.headers.Authorization = "Bearer " + t; }
            return req;
          },
          onComplete: function () {
            ui.preauthorizeApiKey("bearerAuth", token);
            status.textContent = "Schema loaded; requests are sent with this key.";
          }
        });
        window.ui = ui;
      }
      document.getElementById("keybar").addEventListener("submit", function (e) {
        e.preventDefault();
        var t = input.value.trim();
        if (!t) { status.textContent = "Enter an API key first."; return; }
        sessionStorage.setItem(KEY, t);
        start(t);
      });
      var saved = sessionStorage.getItem(KEY);
      if (saved) { input.value = saved; start(saved); }
    })();
  </script>
</body>
</html>
"##;

/// Serves `/api/docs/` and the files below it; `None` for unknown files.
pub fn serve(path_below_docs: &str) -> Option<Response> {
    if path_below_docs.is_empty() || path_below_docs == "index.html" {
        return Some(
            Response::new(200)
                .with_header("Content-Type", "text/html; charset=utf-8")
                .with_header("Cache-Control", "no-cache")
                .with_body(INDEX_HTML.as_bytes().to_vec()),
        );
    }
    // Only Swagger UI's own static files; its default index and initializer
    // are replaced by the page above.
    if path_below_docs == "swagger-initializer.js" || path_below_docs.contains("..") {
        return None;
    }
    static CONFIG: OnceLock<Arc<utoipa_swagger_ui::Config<'static>>> = OnceLock::new();
    let config = CONFIG
        .get_or_init(|| Arc::new(utoipa_swagger_ui::Config::from("/api/schema/")))
        .clone();
    match utoipa_swagger_ui::serve(path_below_docs, config) {
        Ok(Some(file)) => Some(
            Response::new(200)
                .with_header("Content-Type", file.content_type)
                .with_header("Cache-Control", "public, max-age=3600")
                .with_body(file.bytes.into_owned()),
        ),
        Ok(None) => None,
        Err(e) => {
            tracing::error!(error = %e, file = path_below_docs, "explorer asset failed");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_and_assets_are_embedded() {
        let index = serve("").unwrap();
        assert!(String::from_utf8(index.body)
            .unwrap()
            .contains("/api/schema/"));
        for asset in [
            "swagger-ui.css",
            "swagger-ui-bundle.js",
            "swagger-ui-standalone-preset.js",
        ] {
            let r = serve(asset).unwrap_or_else(|| panic!("{asset} embedded"));
            assert!(r.body.len() > 1000, "{asset} has content");
        }
        assert!(serve("nope.js").is_none());
        assert!(serve("swagger-initializer.js").is_none());
    }
}
