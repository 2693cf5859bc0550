//! The public API: routing, then for each endpoint the spec's order of
//! checks: authentication, permission, throttling, method, then parsing and
//! validation (so an unauthenticated PUT gets 401, and a 405 uses quota).
//!
//! Not for: HTTP framing (`crate::http`) or business decisions (the engine).

mod auth;
mod create;
mod idempotent;
pub mod key_cache;
pub mod login;
pub mod rate_limiters;
pub mod sessions;
pub mod texts;
mod verifications;

pub use verifications::render;
pub(crate) mod webhook_guard;

use crate::http::{Request, Response};
use crate::shared::clock::Clock;
use crate::shared::leases::Leases;
use crate::shared::metrics::Metrics;
use crate::shared::offload::Offload;
use crate::shared::recent::RecentRows;
use crate::shared::resolve::Resolver;
use dialproof_engine::ratelimit::{throttled_detail, Decision};
use dialproof_engine::time::UnixMillis;
use dialproof_storage::Store;
use key_cache::KeyCache;
use rate_limiters::RateLimiters;
use std::sync::Arc;

/// What the public API's handlers may touch, handed over at start-up: the
/// store, the lease table, the keys and their windows, the resolver for the
/// SSRF guard, the hashing threads, the clock and the counters. Nothing of
/// SIP, the webhook pipeline or the configuration.
pub struct Api {
    pub store: Store,
    pub leases: Arc<Leases>,
    pub keys: Arc<KeyCache>,
    pub limiters: Arc<RateLimiters>,
    pub resolver: Resolver,
    /// Threads for CPU-heavy work (password hashing).
    pub offload: Offload,
    pub clock: Clock,
    pub metrics: Arc<Metrics>,
    /// Recently created verifications' rendered rows (`read` looks here
    /// first; `cancel` updates it before answering).
    pub recent: Arc<RecentRows>,
    /// How far the commit consumer has got (a cancel waits for its own
    /// change's consequences before it answers).
    pub commits: Arc<dialproof_storage::CommitProgress>,
    /// Idempotency keys of creates (see `crate::shared::idempotency`).
    pub idempotency: Arc<crate::shared::idempotency::IdempotencyKeys>,
    /// The database file, for the dashboard's operator connections.
    pub db_path: std::path::PathBuf,
}

impl Api {
    /// Now, on the service's one clock.
    pub fn now(&self) -> UnixMillis {
        self.clock.now()
    }
}

/// The resource a path names.
#[derive(Debug, PartialEq, Eq)]
enum Route<'a> {
    Schema,
    Collection,
    Item(&'a str),
    Cancel(&'a str),
}

/// What routing found for a path.
#[derive(Debug, PartialEq, Eq)]
enum Routed<'a> {
    Api(Route<'a>),
    /// Dashboard login (internal).
    Login,
    /// The explorer page or one of its files (for a key or a session).
    Docs(&'a str),
    /// A dashboard page or form (`crate::dashboard`).
    Dashboard,
    /// The path names a resource but lacks its trailing slash.
    AddSlash,
    NotFound,
}

const COLLECTION: &str = "/api/v1/verifications/";
const SCHEMA: &str = "/api/schema/";
const DOCS: &str = "/api/docs/";
const LOGIN: &str = "/api/dashboard/auth/login";

fn route(path: &str) -> Routed<'_> {
    let with_slash = |p: &str| -> bool {
        let mut s = String::with_capacity(p.len() + 1);
        s.push_str(p);
        s.push('/');
        route_exact(&s).is_some()
    };
    if let Some(file) = path.strip_prefix(DOCS) {
        return Routed::Docs(file);
    }
    if crate::dashboard::owns(path) {
        return Routed::Dashboard;
    }
    // The spec names this path without a slash; both spellings are served
    // (a redirect would lose a POST body in most clients).
    if path == LOGIN || path.strip_suffix('/') == Some(LOGIN) {
        return Routed::Login;
    }
    match route_exact(path) {
        Some(r) => Routed::Api(r),
        None if path == "/api/docs" => Routed::AddSlash,
        None if !path.ends_with('/') && with_slash(path) => Routed::AddSlash,
        None => Routed::NotFound,
    }
}

fn route_exact(path: &str) -> Option<Route<'_>> {
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
    let id = rest.strip_suffix("/cancel")?;
    segment_ok(id).then_some(Route::Cancel(id))
}

/// Entry point for every HTTPS request: routes it and times it per route.
pub fn handle(ctx: &Api, req: &Request) -> Response {
    Metrics::inc(&ctx.metrics.http_requests);
    let started = std::time::Instant::now();
    let routed = route(&req.path);
    let timed = route_index(&routed);
    let response = dispatch(ctx, req, routed);
    ctx.metrics.latency[timed].observe(started.elapsed());
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
    }
}

fn dispatch(ctx: &Api, req: &Request, routed: Routed<'_>) -> Response {
    match routed {
        Routed::Api(r) => endpoint(ctx, req, r),
        Routed::AddSlash => {
            let mut location = format!("{}/", req.path);
            if let Some(q) = &req.query {
                location.push('?');
                location.push_str(q);
            }
            Response::json(301, "{}").with_header("Location", location)
        }
        Routed::Login => login::login(ctx, req),
        Routed::Dashboard => {
            // The dashboard takes only the handles it uses.
            let dashboard = crate::dashboard::Ctx {
                store: &ctx.store,
                keys: &ctx.keys,
                limiters: &ctx.limiters,
                clock: &ctx.clock,
                offload: &ctx.offload,
                db_path: ctx.db_path.clone(),
            };
            crate::dashboard::handle(&dashboard, req)
        }
        Routed::Docs(file) => match docs_caller(ctx, req) {
            Ok(()) => crate::openapi::docs::serve(file)
                .unwrap_or_else(|| Response::detail(404, texts::NOT_FOUND)),
            Err(resp) => resp,
        },
        Routed::NotFound => Response::detail(404, texts::NOT_FOUND),
    }
}

/// The explorer has the schema's protection: an API key, or (since a
/// browser cannot send a bearer header when it opens a page) a live
/// dashboard session with no Authorization header; else the DRF 401.
fn docs_caller(ctx: &Api, req: &Request) -> Result<(), Response> {
    let now = ctx.now();
    match auth::authenticate(ctx, req, now) {
        Ok(_) => Ok(()),
        Err(_)
            if req.header("authorization").is_none()
                && sessions::session_user(ctx, req, now).is_some() =>
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
    Key(dialproof_storage::KeyRow),
    Session(dialproof_storage::SessionUser),
}

fn endpoint(ctx: &Api, req: &Request, route: Route<'_>) -> Response {
    let now = ctx.now();
    let caller = match caller(ctx, req, now) {
        Ok(caller) => caller,
        Err(answer) => return answer,
    };
    let key = match admitted(ctx, caller, &route, now) {
        Ok(key) => key,
        Err(answer) => return answer,
    };
    let allowed = match route {
        Route::Collection | Route::Cancel(_) => "POST",
        Route::Item(_) | Route::Schema => "GET",
    };
    if req.method != allowed {
        return Response::detail(405, &texts::method_not_allowed(&req.method))
            .with_header("Allow", allowed);
    }
    if route == Route::Schema {
        return Response::json(200, crate::openapi::schema_json());
    }
    // Only a key gets this far for the verification endpoints (above).
    let Some(key) = key else {
        return Response::detail(403, texts::KEY_REQUIRED);
    };
    match route {
        Route::Collection => create::create(ctx, req, &key, now),
        Route::Item(id) => verifications::read(ctx, &key, id),
        Route::Cancel(id) => verifications::cancel(ctx, &key, id, now),
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
            .then(|| sessions::session_user(ctx, req, now))
            .flatten()
        {
            Some(user) => Ok(Caller::Session(user)),
            None => {
                Metrics::inc(&ctx.metrics.auth_failures);
                tracing::debug!(peer = %req.peer, path = %req.path, "authentication failed");
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
) -> Result<Option<dialproof_storage::KeyRow>, Response> {
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
            let _ = ctx.store.submit(dialproof_storage::WriteOp::TouchKey {
                key_id: key.id,
                at: now,
            });
        }
    }
    Ok(key)
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
        assert_eq!(route("/dashboard/keys/"), Routed::Dashboard);
        assert_eq!(route("/api/dashboard/keys"), Routed::Dashboard);
        assert_eq!(route("/dashboardx"), Routed::NotFound);
    }
}
