//! Signing in and out of the dashboard, and the checks every other page
//! makes: a live session (else a redirect to the login form) and, on a
//! POST, the session's form token (else 403).
//!
//! The login form posts email and password, under the same rule as the
//! JSON login (`crate::accounts::login`: one window of attempts per client
//! address, the same Argon2 work for an unknown email). Before there is a
//! session the form is protected by a double-submit token: a random value
//! in a short-lived `SameSite=Strict` cookie that the form repeats. Logout
//! deletes the session row, so the cookie stops working even if it was
//! copied elsewhere.
//!
//! Not for: the session's lifetime, cookie or token
//! (`crate::accounts::sessions`), password hashing
//! (`crate::accounts::passwords`), or the form token itself
//! (`dialproof_engine::csrf`).

use super::form::Fields;
use super::page::{self, Nav};
use super::Dashboard;
use crate::accounts::login::{self, Refused};
use crate::accounts::passwords::PASSWORD_BYTES_MAX;
use crate::accounts::sessions;
use crate::accounts::users::normalise_email;
use crate::http::{Request, Response};
use askama::Template;
use dialproof_engine::csrf;
use dialproof_engine::ratelimit::throttled_detail;
use dialproof_storage::SessionUser;

const LOGIN_CSRF_COOKIE: &str = "dialproof_login_csrf";
const LOGIN_CSRF_SECONDS: u32 = 3600;
pub const LOGIN_PATH: &str = "/dashboard/login/";

/// A request's live session: its user and the form token of its pages.
pub struct Signed {
    pub user: SessionUser,
    token_hash: String,
    pub csrf: String,
}

impl Signed {
    pub fn nav(&self, active: &'static str) -> Nav {
        Nav {
            email: self.user.email.clone(),
            csrf: self.csrf.clone(),
            active,
        }
    }
}

#[derive(Template)]
#[template(path = "login.html", config = "src/dashboard/askama.toml")]
struct LoginPage<'a> {
    csrf: &'a str,
    email: &'a str,
    error: Option<&'a str>,
}

/// The request's live session, or the redirect to the login form.
pub fn require(ctx: &Dashboard, req: &Request) -> Result<Signed, Response> {
    let Some(token) = sessions::token_from(req) else {
        return Err(page::see_other(LOGIN_PATH));
    };
    let token_hash = sessions::token_hash(token);
    match sessions::user(
        &ctx.store,
        token_hash.clone(),
        ctx.clock.now(),
        super::STORAGE_WAIT,
    ) {
        Ok(Some(user)) => Ok(Signed {
            user,
            token_hash,
            csrf: csrf::form_token(token),
        }),
        Ok(None) => Err(page::see_other(LOGIN_PATH)),
        Err(e) => Err(page::storage_failed("session lookup", &e)),
    }
}

/// [`require`], then the form's fields, refused with 403 unless they carry
/// this session's form token.
pub fn require_post(ctx: &Dashboard, req: &Request) -> Result<(Signed, Fields), Response> {
    let signed = require(ctx, req)?;
    let fields = Fields::parse(&req.body);
    if !csrf::matches(&signed.csrf, fields.raw("csrf")) {
        tracing::warn!(peer = %req.peer, path = %req.path(), "dashboard form without its token");
        return Err(page::csrf_refused());
    }
    Ok((signed, fields))
}

fn login_page(status: u16, csrf: &str, email: &str, error: Option<&str>) -> Response {
    page::render(status, &LoginPage { csrf, email, error })
}

/// `GET /dashboard/login/`: the form, with a fresh double-submit token.
pub fn login_form(_req: &Request) -> Response {
    let (value, _) = sessions::mint_token();
    login_page(200, &value, "", None).with_header(
        "Set-Cookie",
        format!(
            "{LOGIN_CSRF_COOKIE}={value}; Path={LOGIN_PATH}; Max-Age={LOGIN_CSRF_SECONDS}; \
             HttpOnly; Secure; SameSite=Strict"
        ),
    )
}

/// `POST /dashboard/login/`: checks the limit, the form token and the
/// password; a session cookie and the verification list on success.
pub fn login(ctx: &Dashboard, req: &Request) -> Response {
    let now = ctx.clock.now();
    if let Err(retry_after_seconds) = login::count_attempt(&ctx.limiters, req.peer.ip(), now) {
        return Response::detail(429, &throttled_detail(retry_after_seconds))
            .with_header("Retry-After", retry_after_seconds.to_string());
    }
    let fields = Fields::parse(&req.body);
    let expected = sessions::token_cookie(req, LOGIN_CSRF_COOKIE).unwrap_or("");
    if !csrf::matches(expected, fields.raw("csrf")) {
        return page::csrf_refused();
    }
    let token = fields.raw("csrf");
    let email = normalise_email(fields.raw("email"));
    let password = fields.raw("password").to_owned();
    if email.is_empty() || password.is_empty() || password.len() > PASSWORD_BYTES_MAX {
        return login_page(400, token, &email, Some("Введите email и пароль."));
    }
    let checked = login::check(
        &ctx.store,
        &ctx.offload,
        &email,
        password,
        super::STORAGE_WAIT,
    );
    let user = match checked {
        Ok(user) => user,
        Err(Refused::Storage(e)) => return page::storage_failed("user lookup", &e),
        Err(Refused::Busy) => {
            return page::error(503, "Сервис занят", "Повторите попытку через секунду.")
                .with_header("Retry-After", "1")
        }
        Err(Refused::Credentials) => {
            tracing::info!(%email, peer = %req.peer, "dashboard form login refused");
            return login_page(401, token, &email, Some("Неверный email или пароль."));
        }
    };
    match sessions::start(&ctx.store, user.id, now, super::STORAGE_WAIT) {
        Ok(started) => page::see_other("/dashboard/verifications/")
            .with_header("Set-Cookie", sessions::cookie(&started.token))
            .with_header(
                "Set-Cookie",
                format!(
                    "{LOGIN_CSRF_COOKIE}=; Path={LOGIN_PATH}; Max-Age=0; HttpOnly; Secure; \
                     SameSite=Strict"
                ),
            ),
        Err(e) => page::storage_failed("session insert", &e),
    }
}

/// `POST /dashboard/logout/`: deletes the session row and the cookie.
pub fn logout(ctx: &Dashboard, req: &Request) -> Response {
    let (signed, _) = match require_post(ctx, req) {
        Ok(s) => s,
        Err(resp) => return resp,
    };
    let hash = signed.token_hash.clone();
    match ctx.admin(move |a| sessions::end(a, &hash)) {
        Some(Ok(_)) => {}
        Some(Err(e)) => return page::storage_failed("logout", &e.to_string()),
        None => return page::storage_failed("logout", "no answer in time"),
    }
    tracing::info!(email = %signed.user.email, "dashboard logout");
    page::see_other(LOGIN_PATH).with_header("Set-Cookie", sessions::removed_cookie())
}
