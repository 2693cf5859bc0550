//! The public API: for each endpoint the spec's order of checks:
//! authentication, permission, throttling, method, then parsing and
//! validation (so an unauthenticated PUT gets 401, and a 405 uses quota).
//! It also says who may read the schema, which the explorer shares.
//!
//! Not for: which part a path belongs to (`crate::site`), HTTP framing
//! (`crate::http`), account rules (`crate::accounts`) or business decisions
//! (the engine).

mod auth;
mod create;
pub mod envelope;
mod idempotent;
mod simulate;
pub mod texts;
mod verifications;

pub use verifications::render;
pub(crate) mod webhook_guard;

use crate::http::{Request, Response};
use crate::shared::clock::Clock;
use crate::shared::held_rows::HeldRows;
use crate::shared::key_cache::KeyCache;
use crate::shared::leases::Leases;
use crate::shared::metrics::Metrics;
use crate::shared::rate_limiters::RateLimiters;
use crate::shared::resolve::Resolver;
use dialproof_engine::ratelimit::{throttled_detail, Decision};
use dialproof_engine::time::UnixMillis;
use dialproof_storage::Store;
use std::sync::Arc;

/// What the public API's handlers may touch, handed over at start-up: the
/// store, the lease table, the keys and their windows, the resolver for the
/// SSRF guard, the clock and the counters. Nothing of SIP, the webhook
/// pipeline or the configuration.
pub struct Api {
    pub store: Store,
    pub leases: Arc<Leases>,
    pub keys: Arc<KeyCache>,
    pub limiters: Arc<RateLimiters>,
    /// Keys' last uses, written by the control loop once a minute.
    pub key_uses: Arc<crate::shared::key_uses::KeyUses>,
    pub resolver: Resolver,
    pub clock: Clock,
    pub metrics: Arc<Metrics>,
    /// Recently created verifications' rendered rows (`read` looks here
    /// first; `cancel` updates it before answering).
    pub held: Arc<HeldRows>,
    /// How far the commit consumer has got (a cancel waits for its own
    /// change's consequences before it answers).
    pub commits: Arc<dialproof_storage::CommitProgress>,
    /// Idempotency keys of creates (see `crate::shared::idempotency`).
    pub idempotency: Arc<crate::shared::idempotency::IdempotencyKeys>,
    /// Set once this node may no longer act as the primary.
    pub fence: Arc<crate::shared::fence::Fence>,
    /// The region a simulated call's caller ID is read in, per pool kind
    /// (`Pool::index`): the `default_country` of the first configured line
    /// with numbers of that kind, else Russia (read at start).
    pub test_regions: [dialproof_engine::sip::number::Region; 2],
}

impl Api {
    /// Now, on the service's one clock.
    pub fn now(&self) -> UnixMillis {
        self.clock.now()
    }
}

/// The resource an API path names.
#[derive(Debug, PartialEq, Eq)]
pub enum Route<'a> {
    Schema,
    Collection,
    Item(&'a str),
    Cancel(&'a str),
    /// Test mode's simulated call.
    SimulateCall(&'a str),
}

impl Route<'_> {
    /// The one method the resource answers; every POST one changes state
    /// (create, cancel, a simulated call), every GET one only reads.
    fn method(&self) -> &'static str {
        match self {
            Route::Collection | Route::Cancel(_) | Route::SimulateCall(_) => "POST",
            Route::Item(_) | Route::Schema => "GET",
        }
    }
}

const COLLECTION: &str = "/api/v1/verifications/";
const SCHEMA: &str = "/api/schema/";

/// The API resource `path` names exactly (trailing slash included), if any.
pub fn route(path: &str) -> Option<Route<'_>> {
    if path == SCHEMA {
        return Some(Route::Schema);
    }
    if path == COLLECTION {
        return Some(Route::Collection);
    }
    let rest = path.strip_prefix(COLLECTION)?.strip_suffix('/')?;
    let segment_ok = |s: &str| !s.is_empty() && !s.contains('/');
    if segment_ok(rest) {
        return Some(Route::Item(rest));
    }
    if let Some(id) = rest.strip_suffix("/simulate-call") {
        return segment_ok(id).then_some(Route::SimulateCall(id));
    }
    let id = rest.strip_suffix("/cancel")?;
    segment_ok(id).then_some(Route::Cancel(id))
}

/// Whether the request may read the schema, which the explorer shares: an
/// API key, or (since a browser cannot send a bearer header when it opens
/// a page) a live dashboard session with no Authorization header; else the
/// DRF 401.
pub fn may_read_schema(ctx: &Api, req: &Request) -> Result<(), Response> {
    let now = ctx.now();
    match auth::authenticate(ctx, req, now) {
        Ok(_) => Ok(()),
        Err(_)
            if req.header("authorization").is_none()
                && auth::session_user(ctx, req, now).is_some() =>
        {
            Ok(())
        }
        Err(resp) => {
            Metrics::inc(&ctx.metrics.auth_failures);
            Err(resp)
        }
    }
}

/// Who is calling: an API key, or a dashboard user's session (the spec's
/// "authenticated by another mechanism").
enum Caller {
    Key(std::sync::Arc<dialproof_storage::KeyRow>),
    Session(dialproof_storage::SessionUser),
}

/// Answers a request for an API resource ([`route`] found it).
pub fn handle(ctx: &Api, req: &Request, route: Route<'_>) -> Response {
    let now = ctx.now();
    let caller = match caller(ctx, req, now) {
        Ok(caller) => caller,
        Err(answer) => return answer,
    };
    let key = match admitted(ctx, caller, &route, now) {
        Ok(key) => key,
        Err(answer) => return answer,
    };
    let allowed = route.method();
    if req.method() != allowed {
        return Response::detail(405, &texts::method_not_allowed(req.method()))
            .with_header("Allow", allowed);
    }
    if route == Route::Schema {
        return Response::json(200, crate::openapi::schema_json());
    }
    // Only a key gets this far for the verification endpoints (above).
    let Some(key) = key else {
        return Response::detail(403, texts::KEY_REQUIRED);
    };
    // Every write, a simulated call included (it completes a verification
    // as a real call does): a fenced node refuses them all.
    if ctx.fence.is_fenced() && route.method() == "POST" {
        return fenced();
    }
    match route {
        Route::Collection => create::create(ctx, req, &key, now),
        Route::Item(id) => verifications::read(ctx, &key, id),
        Route::Cancel(id) => verifications::cancel(ctx, &key, id, now),
        Route::SimulateCall(id) => simulate::simulate(ctx, req, &key, id, now),
        Route::Schema => Response::json(200, crate::openapi::schema_json()),
    }
}

/// Who is calling, or the 401: a bearer key, else (with no Authorization
/// header at all) a live dashboard session; a bad bearer header is a 401
/// whatever the cookies.
fn caller(ctx: &Api, req: &Request, now: UnixMillis) -> Result<Caller, Response> {
    match auth::authenticate(ctx, req, now) {
        Ok(k) => Ok(Caller::Key(k)),
        Err(resp) => match req
            .header("authorization")
            .is_none()
            .then(|| auth::session_user(ctx, req, now))
            .flatten()
        {
            Some(user) => Ok(Caller::Session(user)),
            None => {
                Metrics::inc(&ctx.metrics.auth_failures);
                tracing::debug!(peer = %req.peer, path = %req.path(), "authentication failed");
                Err(resp)
            }
        },
    }
}

/// Permission, then the caller's window: the verification endpoints take
/// API keys only (a session gets 403); a logged-in dashboard user may read
/// the schema. Returns the key, if the caller is one, or the 403 or 429.
fn admitted(
    ctx: &Api,
    caller: Caller,
    route: &Route<'_>,
    now: UnixMillis,
) -> Result<Option<std::sync::Arc<dialproof_storage::KeyRow>>, Response> {
    let limit_default = dialproof_engine::ratelimit::LIMIT_PER_MINUTE_DEFAULT;
    let (bucket, limit, key) = match caller {
        Caller::Key(key) => {
            let limit = key.rate_limit_per_minute.unwrap_or(limit_default);
            (key.prefix.clone(), limit, Some(key))
        }
        Caller::Session(user) if *route == Route::Schema => {
            (format!("user:{}", user.user_id), limit_default, None)
        }
        Caller::Session(_) => return Err(Response::detail(403, texts::KEY_REQUIRED)),
    };
    if let Decision::Refuse {
        retry_after_seconds,
        blocked,
    } = ctx.limiters.check(&bucket, now, limit)
    {
        Metrics::inc(&ctx.metrics.throttled);
        if blocked {
            tracing::warn!(caller = %bucket, retry_after_seconds, "request from a blocked caller");
        }
        return Err(
            Response::detail(429, &throttled_detail(retry_after_seconds))
                .with_header("Retry-After", retry_after_seconds.to_string()),
        );
    }
    if let Some(key) = &key {
        if ctx.limiters.should_touch(&key.prefix, now) {
            ctx.key_uses.note(key.id, now);
        }
    }
    Ok(key)
}

/// A write refused by a fenced node: 503 `service_unavailable` in the
/// spec's envelope, with `Retry-After` (the client retries and reaches the
/// new primary through its load balancer or floating address).
fn fenced() -> Response {
    use crate::shared::fence::{FENCED_MESSAGE, FENCED_RETRY_AFTER_SECONDS};
    envelope::envelope(503, "service_unavailable", FENCED_MESSAGE, None)
        .with_header("Retry-After", FENCED_RETRY_AFTER_SECONDS.to_string())
}
