//! `POST /api/dashboard/auth/login`: a dashboard user trades email and
//! password for a session cookie (the login for scripts; people use the
//! form, `super::auth`). Internal (not part of the public API), so it
//! answers in the spec's envelope for new endpoints:
//! `{error: {code, message, fields?}}`.
//!
//! The rule is the login form's (`crate::accounts::login`): every attempt
//! counts toward 10 per minute per client address, in the same window as
//! the form's; an unknown email costs the same Argon2 verification as a
//! wrong password.
//!
//! Not for: recognising sessions on later requests (`crate::api`'s
//! `auth`, `super::auth`).

use super::Dashboard;
use crate::accounts::login::{self, Refused};
use crate::accounts::passwords::PASSWORD_BYTES_MAX;
use crate::accounts::sessions;
use crate::accounts::users::{normalise_email, EMAIL_CHARS_MAX};
use crate::api::envelope::envelope;
use crate::api::texts;
use crate::http::{Request, Response};
use dialproof_engine::ratelimit::throttled_detail;
use dialproof_engine::time::UnixMillis;
use dialproof_storage::UserRow;
use serde_json::{json, Value};
use std::time::Duration;

/// The endpoint's path as the spec names it (the site serves it with a
/// trailing slash too).
pub const PATH: &str = "/api/dashboard/auth/login";
const STORAGE_WAIT: Duration = Duration::from_secs(30);

pub fn login(ctx: &Dashboard, req: &Request) -> Response {
    let now = ctx.clock.now();
    if let Err(retry_after_seconds) = login::count_attempt(&ctx.limiters, req.peer.ip(), now) {
        return envelope(
            429,
            "rate_limited",
            &throttled_detail(retry_after_seconds),
            None,
        )
        .with_header("Retry-After", retry_after_seconds.to_string());
    }
    if req.method() != "POST" {
        let text = texts::method_not_allowed(req.method());
        return envelope(405, "method_not_allowed", &text, None).with_header("Allow", "POST");
    }
    let (email, password) = match credentials(&req.body) {
        Ok(c) => c,
        Err(fields) => {
            return envelope(400, "invalid_request", "Некорректный запрос.", Some(fields))
        }
    };
    match checked_user(ctx, req, email, password) {
        Ok(user) => start_session(ctx, &user, now),
        Err(answer) => answer,
    }
}

/// The user whose password this is, or the answer: 401 for a wrong email
/// or password, 503 when the hashing threads are saturated, 500 when
/// storage fails.
fn checked_user(
    ctx: &Dashboard,
    req: &Request,
    email: String,
    password: String,
) -> Result<UserRow, Response> {
    match login::check(&ctx.store, &ctx.offload, &email, password, STORAGE_WAIT) {
        Ok(user) => Ok(user),
        Err(Refused::Storage(error)) => {
            tracing::error!(%error, "user lookup failed");
            Err(envelope(500, "internal_error", texts::SERVER_ERROR, None))
        }
        Err(Refused::Busy) => {
            Err(
                envelope(503, "service_unavailable", "Повторите попытку позже.", None)
                    .with_header("Retry-After", "1"),
            )
        }
        Err(Refused::Credentials) => {
            tracing::info!(%email, peer = %req.peer, "dashboard login refused");
            Err(envelope(
                401,
                "authentication_failed",
                "Неверный email или пароль.",
                None,
            ))
        }
    }
}

/// Stores a new session for `user` and answers 200 with its cookie.
fn start_session(ctx: &Dashboard, user: &UserRow, now: UnixMillis) -> Response {
    let started = match sessions::start(&ctx.store, user.id, now, STORAGE_WAIT) {
        Ok(s) => s,
        Err(error) => {
            tracing::error!(%error, "session not stored");
            return envelope(500, "internal_error", texts::SERVER_ERROR, None);
        }
    };
    tracing::info!(email = %user.email, company_id = user.company_id, "dashboard login");
    let body = json!({
        "email": user.email,
        "company_id": user.company_id,
        "expires_at": started.expires_at.to_rfc3339(),
    });
    Response::json(200, body.to_string())
        .with_header("Set-Cookie", sessions::cookie(&started.token))
}

/// `{"email": ..., "password": ...}`, or the field errors.
fn credentials(body: &[u8]) -> Result<(String, String), Value> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|_| json!({ "non_field_errors": ["Ожидался JSON-объект."] }))?;
    let mut fields = serde_json::Map::new();
    let mut text = |name: &str, max_len: usize| -> Option<String> {
        match value.get(name).and_then(Value::as_str) {
            Some(s) if !s.is_empty() && s.len() <= max_len => Some(s.to_owned()),
            Some(s) if !s.is_empty() => {
                fields.insert(name.into(), json!(["Слишком длинное значение."]));
                None
            }
            _ => {
                fields.insert(name.into(), json!(["Обязательное поле."]));
                None
            }
        }
    };
    let email = text("email", EMAIL_CHARS_MAX);
    let password = text("password", PASSWORD_BYTES_MAX);
    match (email, password) {
        (Some(e), Some(p)) => Ok((normalise_email(&e), p)),
        _ => Err(Value::Object(fields)),
    }
}
