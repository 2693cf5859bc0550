//! Who is calling: bearer-key authentication against the in-memory key
//! cache, and the dashboard session a request may carry instead.
//!
//! Not for: what a caller may do (`super`), or what a session is
//! (`crate::accounts::sessions`).

use super::texts;
use super::Api;
use crate::accounts::sessions;
use crate::http::{Request, Response};
use dialproof_engine::apikey::{parse_token, verify_secret};
use dialproof_engine::time::UnixMillis;
use dialproof_storage::{KeyRow, SessionUser};
use std::sync::Arc;
use std::time::Duration;

const SESSION_LOOKUP_WAIT: Duration = Duration::from_secs(10);

fn unauthorized(text: &str) -> Response {
    Response::detail(401, text).with_header("WWW-Authenticate", "Bearer")
}

/// The key a request authenticates with, or the 401 to answer.
///
/// A missing header, or one with another scheme, is "not provided"; a Bearer
/// header whose token is malformed, unknown or revoked is "invalid key". The
/// spec asks for exactly one space after `Bearer`; the scheme name itself is
/// case-insensitive (RFC 7235).
pub fn authenticate(ctx: &Api, req: &Request, now: UnixMillis) -> Result<Arc<KeyRow>, Response> {
    if req.header_count("authorization") > 1 {
        return Err(unauthorized(texts::INVALID_KEY));
    }
    let Some(value) = req.header("authorization") else {
        return Err(unauthorized(texts::NOT_AUTHENTICATED));
    };
    let Some((scheme, token)) = value.split_once(' ') else {
        return Err(if value.eq_ignore_ascii_case("bearer") {
            unauthorized(texts::INVALID_KEY)
        } else {
            unauthorized(texts::NOT_AUTHENTICATED)
        });
    };
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(unauthorized(texts::NOT_AUTHENTICATED));
    }
    let Some(parsed) = parse_token(token) else {
        return Err(unauthorized(texts::INVALID_KEY));
    };
    let Some(key) = ctx.keys.key_or_refresh(parsed.prefix, now) else {
        return Err(unauthorized(texts::INVALID_KEY));
    };
    // A token's kind must be its key's mode: `svc_live_` with a test key's
    // prefix and secret is not that key.
    if key.revoked_at.is_some()
        || parsed.kind.is_live() != key.livemode
        || !verify_secret(parsed.secret, &key.secret_hash)
    {
        return Err(unauthorized(texts::INVALID_KEY));
    }
    Ok(key)
}

/// The user of the request's live dashboard session, if it has one (a
/// failed lookup is logged and counts as none).
pub fn session_user(ctx: &Api, req: &Request, now: UnixMillis) -> Option<SessionUser> {
    let hash = sessions::token_hash(sessions::token_from(req)?);
    match sessions::user(&ctx.store, hash, now, SESSION_LOOKUP_WAIT) {
        Ok(user) => user,
        Err(error) => {
            tracing::warn!(%error, "session lookup failed");
            None
        }
    }
}
