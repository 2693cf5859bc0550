//! The site: every HTTPS request's first stop. It decides which part a path
//! belongs to (the public API, the API explorer, the dashboard and its JSON
//! login) and hands the request to it, answers the slash redirect and the
//! 404 that belong to no part, and times each request per route.
//!
//! Routing sits here, above the parts, so that no part calls another: the
//! API (`crate::api`) and the dashboard (`crate::dashboard`) share only the
//! handles and rules below them (`crate::shared`, `crate::accounts`).
//!
//! Not for: what a part answers (each part checks its own callers), or HTTP
//! framing (`crate::http`).

use crate::api::{self, texts, Api, Route};
use crate::dashboard::{self, Dashboard};
use crate::http::{Request, Response};
use crate::shared::metrics::Metrics;

/// What the site's parts are handed, built once at start-up.
pub struct Site {
    pub api: Api,
    pub dashboard: Dashboard,
}

/// What routing found for a path.
#[derive(Debug, PartialEq, Eq)]
enum Routed<'a> {
    Api(Route<'a>),
    /// The dashboard's JSON login (internal).
    Login,
    /// The explorer page or one of its files (for a key or a session).
    Docs(&'a str),
    /// A dashboard page or form.
    Dashboard,
    /// The path names a resource but lacks its trailing slash.
    AddSlash,
    NotFound,
}

const DOCS: &str = "/api/docs/";

fn route(path: &str) -> Routed<'_> {
    if let Some(file) = path.strip_prefix(DOCS) {
        return Routed::Docs(file);
    }
    if dashboard::owns(path) {
        return Routed::Dashboard;
    }
    // The spec names this path without a slash; both spellings are served
    // (a redirect would lose a POST body in most clients).
    if path == dashboard::LOGIN_ENDPOINT
        || path.strip_suffix('/') == Some(dashboard::LOGIN_ENDPOINT)
    {
        return Routed::Login;
    }
    let with_slash = |p: &str| -> bool {
        let mut s = String::with_capacity(p.len() + 1);
        s.push_str(p);
        s.push('/');
        api::route(&s).is_some()
    };
    match api::route(path) {
        Some(r) => Routed::Api(r),
        None if path == "/api/docs" => Routed::AddSlash,
        None if !path.ends_with('/') && with_slash(path) => Routed::AddSlash,
        None => Routed::NotFound,
    }
}

/// Entry point for every HTTPS request: routes it and times it per route.
pub fn handle(site: &Site, req: &Request) -> Response {
    let metrics = &site.api.metrics;
    Metrics::inc(&metrics.http_requests);
    let started = std::time::Instant::now();
    let routed = route(req.path());
    let timed = route_index(&routed);
    let response = dispatch(site, req, routed);
    metrics.latency[timed].observe(started.elapsed());
    response
}

/// The index in `Metrics::latency` (see `metrics::ROUTES`).
fn route_index(routed: &Routed<'_>) -> usize {
    match routed {
        Routed::Api(Route::Collection) => 0,
        Routed::Api(Route::Item(_)) => 1,
        Routed::Api(Route::Cancel(_)) => 2,
        Routed::Api(Route::Schema) => 3,
        Routed::Login => 4,
        Routed::Docs(_) => 5,
        Routed::Dashboard | Routed::AddSlash | Routed::NotFound => 6,
        Routed::Api(Route::SimulateCall(_)) => 7,
    }
}

fn dispatch(site: &Site, req: &Request, routed: Routed<'_>) -> Response {
    match routed {
        Routed::Api(r) => api::handle(&site.api, req, r),
        Routed::AddSlash => {
            let mut location = format!("{}/", req.path());
            if let Some(q) = req.query() {
                location.push('?');
                location.push_str(q);
            }
            Response::json(301, "{}").with_header("Location", location)
        }
        Routed::Login => dashboard::json_login(&site.dashboard, req),
        Routed::Dashboard => dashboard::handle(&site.dashboard, req),
        // The explorer has the schema's protection (see `api::may_read_schema`).
        Routed::Docs(file) => match api::may_read_schema(&site.api, req) {
            Ok(()) => crate::openapi::docs::serve(file)
                .unwrap_or_else(|| Response::detail(404, texts::NOT_FOUND)),
            Err(resp) => resp,
        },
        Routed::NotFound => Response::detail(404, texts::NOT_FOUND),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_and_slash_redirects() {
        assert_eq!(
            route("/api/v1/verifications/"),
            Routed::Api(Route::Collection)
        );
        assert_eq!(
            route("/api/v1/verifications/abc/"),
            Routed::Api(Route::Item("abc"))
        );
        assert_eq!(
            route("/api/v1/verifications/abc/cancel/"),
            Routed::Api(Route::Cancel("abc"))
        );
        assert_eq!(route("/api/v1/verifications"), Routed::AddSlash);
        assert_eq!(route("/api/v1/verifications/abc"), Routed::AddSlash);
        assert_eq!(route("/api/v1/verifications/abc/cancel"), Routed::AddSlash);
        assert_eq!(route("/api/v1/verifications//"), Routed::NotFound);
        assert_eq!(route("/api/v1/verifications/a/b/"), Routed::NotFound);
        assert_eq!(route("/"), Routed::NotFound);
        assert_eq!(route("/api/schema/"), Routed::Api(Route::Schema));
        assert_eq!(route("/api/schema"), Routed::AddSlash);
        assert_eq!(route("/api/docs/"), Routed::Docs(""));
        assert_eq!(
            route("/api/docs/swagger-ui.css"),
            Routed::Docs("swagger-ui.css")
        );
        assert_eq!(route("/api/docs"), Routed::AddSlash);
        assert_eq!(route("/api/v2/verifications/"), Routed::NotFound);
        assert_eq!(route("/api/dashboard/auth/login"), Routed::Login);
        assert_eq!(route("/api/dashboard/auth/login/"), Routed::Login);
        assert_eq!(route("/dashboard/keys/"), Routed::Dashboard);
        assert_eq!(route("/api/dashboard/keys"), Routed::Dashboard);
        assert_eq!(route("/dashboardx"), Routed::NotFound);
    }
}
