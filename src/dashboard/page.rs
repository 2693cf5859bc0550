//! Building the dashboard's HTML answers: the headers every page carries,
//! redirects, the error page, the navigation bar, and time formatting.
//!
//! Not for: what a page shows (each page's own file and template).

use crate::http::Response;
use askama::Template;
use dialproof_engine::time::UnixMillis;

/// The navigation bar of a signed-in page; `csrf` is the session's form
/// token, which the logout form (and every other form) carries.
pub struct Nav {
    pub email: String,
    pub csrf: String,
    pub active: &'static str,
}

#[derive(Template)]
#[template(path = "error.html", config = "src/dashboard/askama.toml")]
struct ErrorPage<'a> {
    title: &'a str,
    message: &'a str,
}

/// A rendered page with the headers every dashboard page carries: no
/// caching (a new key's token is on one), no framing, and a policy that
/// allows only the page's own inline style and script.
pub fn html(status: u16, body: String) -> Response {
    Response::new(status)
        .with_header("Content-Type", "text/html; charset=utf-8")
        .with_header("Cache-Control", "no-store")
        .with_header("X-Frame-Options", "DENY")
        .with_header("X-Content-Type-Options", "nosniff")
        .with_header("Referrer-Policy", "same-origin")
        .with_header(
            "Content-Security-Policy",
            "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; \
             img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        )
        .with_body(body.into_bytes())
}

/// Renders `t` with `status`; a template that fails to render (it cannot,
/// short of a formatting bug) is the 500 page.
pub fn render(status: u16, t: &impl Template) -> Response {
    match t.render() {
        Ok(body) => html(status, body),
        Err(e) => {
            tracing::error!(error = %e, "dashboard template failed");
            error(500, "Ошибка сервера", "Произошла ошибка сервера.")
        }
    }
}

pub fn error(status: u16, title: &str, message: &str) -> Response {
    let page = ErrorPage { title, message };
    // The error page has no fields that can fail to format.
    html(status, page.render().unwrap_or_else(|_| message.to_owned()))
}

/// The 500 page for a storage failure, logged with what failed.
pub fn storage_failed(what: &str, error: &str) -> Response {
    tracing::error!(%error, "dashboard: {what} failed");
    self::error(
        500,
        "Ошибка сервера",
        "Произошла ошибка сервера. Повторите попытку позже.",
    )
}

/// The 403 page for a form without this session's token.
pub fn csrf_refused() -> Response {
    error(
        403,
        "Форма отклонена",
        "Форма устарела или отправлена не со страницы панели (проверка CSRF не пройдена). \
         Обновите страницу и повторите.",
    )
}

/// `303 See Other` to `location` (after a POST, the browser GETs it).
pub fn see_other(location: &str) -> Response {
    Response::new(303)
        .with_header("Location", location.to_owned())
        .with_header("Cache-Control", "no-store")
}

/// `2026-11-25 09:56:17` (UTC), as the pages show times.
pub fn when(t: UnixMillis) -> String {
    let s = t.to_rfc3339();
    s.get(..19).unwrap_or(&s).replace('T', " ")
}

/// [`when`], or a dash for no time.
pub fn when_opt(t: Option<UnixMillis>) -> String {
    t.map(when).unwrap_or_else(|| "—".to_owned())
}
