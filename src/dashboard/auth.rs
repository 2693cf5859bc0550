//! Signing in and out of the dashboard, and the checks every other page
//! makes: a live session (else a redirect to the login form) and, on a
//! POST, the session's form token (else 403).
//!
//! The login form posts email and password; every attempt counts toward
//! the same 10 per minute per address as the JSON login endpoint, and an
//! unknown email costs the same Argon2 verification as a wrong password.
//! Before there is a session the form is protected by a double-submit
//! token: a random value in a short-lived `SameSite=Strict` cookie that the
//! form repeats. Logout deletes the session row, so the cookie stops
//! working even if it was copied elsewhere.
//!
//! Not for: the session cookie's format or password hashing
//! (`crate::api::sessions`), or the form token itself (`dialproof_engine::csrf`).

use super::form::Fields;
use super::page::{self, Nav};
use super::Ctx;
use crate::api::login::{dummy_hash, LOGIN_PER_MINUTE};
use crate::api::sessions::{self, COOKIE_NAME};
use crate::http::{Request, Response};
use crate::shared::wait::wait_for;
use askama::Template;
use dialproof_engine::csrf;
use dialproof_engine::ratelimit::{throttled_detail, Decision};
use dialproof_storage::{NewSession, SessionUser, WriteOp};
use std::time::Duration;

const LOGIN_CSRF_COOKIE: &str = "dialproof_login_csrf";
const LOGIN_CSRF_SECONDS: u32 = 3600;
const HASH_WAIT: Duration = Duration::from_secs(10);
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
pub fn require(ctx: &Ctx<'_>, req: &Request) -> Result<Signed, Response> {
    let Some(token) = sessions::token_from(req) else {
        return Err(page::see_other(LOGIN_PATH));
    };
    let token_hash = sessions::token_hash(token);
    let now = ctx.clock.now();
    let lookup = token_hash.clone();
    match ctx.read(move |r| r.session_user(&lookup, now)) {
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
pub fn require_post(ctx: &Ctx<'_>, req: &Request) -> Result<(Signed, Fields), Response> {
    let signed = require(ctx, req)?;
    let fields = Fields::parse(&req.body);
    if !csrf::matches(&signed.csrf, fields.raw("csrf")) {
        tracing::warn!(peer = %req.peer, path = %req.path, "dashboard form without its token");
        return Err(page::csrf_refused());
    }
    Ok((signed, fields))
}

fn cookie_value<'r>(req: &'r Request, name: &str) -> Option<&'r str> {
    req.headers
        .iter()
        .filter(|(n, _)| n == "cookie")
        .flat_map(|(_, v)| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v.trim())
        .filter(|v| v.len() == 64 && v.bytes().all(|b| b.is_ascii_hexdigit()))
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
pub fn login(ctx: &Ctx<'_>, req: &Request) -> Response {
    let now = ctx.clock.now();
    let bucket = format!("login:{}", req.peer.ip());
    if let Decision::Refuse {
        retry_after_seconds,
        ..
    } = ctx.limiters.check(&bucket, now, LOGIN_PER_MINUTE)
    {
        return Response::detail(429, &throttled_detail(retry_after_seconds))
            .with_header("Retry-After", retry_after_seconds.to_string());
    }
    let fields = Fields::parse(&req.body);
    let expected = cookie_value(req, LOGIN_CSRF_COOKIE).unwrap_or("");
    if !csrf::matches(expected, fields.raw("csrf")) {
        return page::csrf_refused();
    }
    let token = fields.raw("csrf");
    let email = fields.get("email").unwrap_or("").to_lowercase();
    let password = fields.raw("password").to_owned();
    if email.is_empty() || password.is_empty() || password.len() > sessions::PASSWORD_BYTES_MAX {
        return login_page(400, token, &email, Some("Введите email и пароль."));
    }
    let lookup = email.clone();
    let user = match ctx.read(move |r| r.user_by_email(&lookup)) {
        Ok(u) => u,
        Err(e) => return page::storage_failed("user lookup", &e),
    };
    let phc = user
        .as_ref()
        .map(|u| u.password_hash.clone())
        .unwrap_or_else(|| dummy_hash().to_owned());
    let matched = ctx.offload.run(HASH_WAIT, move || {
        sessions::verify_password(&password, &phc)
    });
    let user = match (matched, user) {
        (Some(true), Some(user)) => user,
        (None, _) => {
            return page::error(503, "Сервис занят", "Повторите попытку через секунду.")
                .with_header("Retry-After", "1")
        }
        _ => {
            tracing::info!(%email, peer = %req.peer, "dashboard form login refused");
            return login_page(401, token, &email, Some("Неверный email или пароль."));
        }
    };
    start_session(ctx, user.id, now)
}

fn start_session(ctx: &Ctx<'_>, user_id: i64, now: dialproof_engine::time::UnixMillis) -> Response {
    let (token, token_hash) = sessions::mint_token();
    let session = NewSession {
        token_hash,
        user_id,
        created_at: now,
        expires_at: now.plus_seconds(sessions::SESSION_SECONDS),
    };
    let stored = wait_for(super::STORAGE_WAIT, |reply| {
        if let Err(e) = ctx.store.submit(WriteOp::InsertSession { session, reply }) {
            tracing::error!(error = %e, "session not queued");
        }
    });
    if !matches!(stored, Some(Ok(()))) {
        return page::storage_failed("session insert", "not committed");
    }
    page::see_other("/dashboard/verifications/")
        .with_header("Set-Cookie", sessions::cookie(&token))
        .with_header(
            "Set-Cookie",
            format!("{LOGIN_CSRF_COOKIE}=; Path={LOGIN_PATH}; Max-Age=0; HttpOnly; Secure; SameSite=Strict"),
        )
}

/// `POST /dashboard/logout/`: deletes the session row and the cookie.
pub fn logout(ctx: &Ctx<'_>, req: &Request) -> Response {
    let (signed, _) = match require_post(ctx, req) {
        Ok(s) => s,
        Err(resp) => return resp,
    };
    let hash = signed.token_hash.clone();
    match ctx.admin(move |a| a.delete_session(&hash)) {
        Some(Ok(_)) => {}
        Some(Err(e)) => return page::storage_failed("logout", &e.to_string()),
        None => return page::storage_failed("logout", "no answer in time"),
    }
    tracing::info!(email = %signed.user.email, "dashboard logout");
    page::see_other(LOGIN_PATH).with_header(
        "Set-Cookie",
        format!("{COOKIE_NAME}=; Path=/; Max-Age=0; HttpOnly; Secure; SameSite=Lax"),
    )
}
