//! `POST /api/dashboard/auth/login`: a dashboard user trades email and
//! password for a session cookie. Internal (not part of the public API), so
//! it answers in the spec's envelope for new endpoints:
//! `{error: {code, message, fields?}}`.
//!
//! Every attempt counts toward 10 per minute per client address (the
//! spec's Limits table); a client that keeps trying while refused is blocked
//! like a key. An unknown email costs the same Argon2 verification as a
//! wrong password, so timing does not tell which emails exist.
//!
//! Not for: recognising sessions on later requests (`crate::api::sessions`).

use super::Api;
use crate::api::sessions;
use crate::http::{Request, Response};
use crate::shared::wait::wait_for;
use dialproof_engine::ratelimit::{throttled_detail, Decision};
use dialproof_engine::time::UnixMillis;
use dialproof_storage::{NewSession, UserRow, WriteOp};
use serde_json::{json, Value};
use std::sync::OnceLock;
use std::time::Duration;

/// Login attempts per client address per sliding minute.
pub const LOGIN_PER_MINUTE: u32 = 10;
/// Longest email accepted (RFC 5321's path limit).
pub const EMAIL_CHARS_MAX: usize = 254;
const HASH_WAIT: Duration = Duration::from_secs(10);
const STORAGE_WAIT: Duration = Duration::from_secs(30);

/// A response in the spec's envelope for new behaviour.
pub(crate) fn envelope(status: u16, code: &str, message: &str, fields: Option<Value>) -> Response {
    let mut error = json!({ "code": code, "message": message });
    if let Some(f) = fields {
        error["fields"] = f;
    }
    Response::json(status, json!({ "error": error }).to_string())
}

/// A hash of a password nobody knows, verified against for unknown emails.
pub(crate) fn dummy_hash() -> &'static str {
    static HASH: OnceLock<String> = OnceLock::new();
    HASH.get_or_init(|| {
        let (random, _) = sessions::mint_token();
        sessions::hash_password(&random).unwrap_or_default()
    })
}

pub fn login(ctx: &Api, req: &Request) -> Response {
    let now = ctx.now();
    let bucket = format!("login:{}", req.peer.ip());
    if let Decision::Refuse {
        retry_after_seconds,
        ..
    } = ctx.limiters.check(&bucket, now, LOGIN_PER_MINUTE)
    {
        return envelope(
            429,
            "rate_limited",
            &throttled_detail(retry_after_seconds),
            None,
        )
        .with_header("Retry-After", retry_after_seconds.to_string());
    }
    if req.method != "POST" {
        let text = super::texts::method_not_allowed(&req.method);
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
/// or password (the same work either way, against a dummy hash when there
/// is no such user), 503 when the hashing threads are saturated, 500 when
/// storage fails.
fn checked_user(
    ctx: &Api,
    req: &Request,
    email: String,
    password: String,
) -> Result<UserRow, Response> {
    let user = wait_for(STORAGE_WAIT, |reply| {
        let email = email.clone();
        ctx.store.read(move |r| r.user_by_email(&email), reply)
    });
    let user = match user {
        Some(Ok(Ok(u))) => u,
        other => {
            let error = crate::shared::wait::read_failure_text(other);
            tracing::error!(%error, "user lookup failed");
            return Err(envelope(
                500,
                "internal_error",
                super::texts::SERVER_ERROR,
                None,
            ));
        }
    };
    let phc = user
        .as_ref()
        .map(|u| u.password_hash.clone())
        .unwrap_or_else(|| dummy_hash().to_owned());
    let matches = ctx.offload.run(HASH_WAIT, move || {
        sessions::verify_password(&password, &phc)
    });
    match (matches, user) {
        (Some(true), Some(user)) => Ok(user),
        (None, _) => Err(
            envelope(503, "service_unavailable", "Повторите попытку позже.", None)
                .with_header("Retry-After", "1"),
        ),
        _ => {
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
fn start_session(ctx: &Api, user: &UserRow, now: UnixMillis) -> Response {
    let (token, token_hash) = sessions::mint_token();
    let expires_at = now.plus_seconds(sessions::SESSION_SECONDS);
    let session = NewSession {
        token_hash,
        user_id: user.id,
        created_at: now,
        expires_at,
    };
    let stored = wait_for(STORAGE_WAIT, |reply| {
        if let Err(e) = ctx.store.submit(WriteOp::InsertSession { session, reply }) {
            tracing::error!(error = %e, "session not queued");
        }
    });
    if !matches!(stored, Some(Ok(()))) {
        return envelope(500, "internal_error", super::texts::SERVER_ERROR, None);
    }
    tracing::info!(email = %user.email, company_id = user.company_id, "dashboard login");
    let body = json!({
        "email": user.email,
        "company_id": user.company_id,
        "expires_at": expires_at.to_rfc3339(),
    });
    Response::json(200, body.to_string()).with_header("Set-Cookie", sessions::cookie(&token))
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
    let password = text("password", sessions::PASSWORD_BYTES_MAX);
    match (email, password) {
        (Some(e), Some(p)) => Ok((e.trim().to_lowercase(), p)),
        _ => Err(Value::Object(fields)),
    }
}
