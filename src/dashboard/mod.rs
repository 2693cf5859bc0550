//! The web dashboard: server-rendered pages for a company's people, on the
//! same HTTPS listener as the API but outside `/api/v1/`. Pages live under
//! `/dashboard/`; the spec names two internal endpoints besides, key
//! creation (`POST /api/dashboard/keys`, the keys page's form target, 10 per
//! hour per user) and the JSON login (`POST /api/dashboard/auth/login`,
//! [`json_login`]).
//!
//! Every page needs a live session (else a redirect to the login form),
//! every POST carries the session's form token (else 403), and every page
//! shows only the session's own company. Errors are HTML pages (or the DRF
//! body for a 429), never internals. Changes go through the service's one
//! operator connection (`crate::shared::admin`), opened at start.
//!
//! Not for: which requests come here (`crate::site`), the account rules it
//! applies (`crate::accounts`, shared with the CLI), the SQL
//! (`dialproof_storage`'s `dashboard_ops`, `verification_list`), or
//! decisions such as the form token (`dialproof_engine::csrf`).

mod auth;
mod chart;
mod form;
mod json_login;
mod keys;
mod page;
mod verifications;
mod webhooks;

pub use json_login::{login as json_login, PATH as LOGIN_ENDPOINT};

use crate::http::{Request, Response};
use crate::shared::admin::AdminConn;
use crate::shared::clock::Clock;
use crate::shared::key_cache::KeyCache;
use crate::shared::offload::Offload;
use crate::shared::rate_limiters::RateLimiters;
use crate::shared::wait::{Committing, Outcome};
use dialproof_storage::{Admin, StorageError, Store};
use std::sync::Arc;
use std::time::Duration;

/// How long a page waits for a storage read or write.
const STORAGE_WAIT: Duration = Duration::from_secs(10);

/// What the dashboard needs from the running service, handed over at
/// start-up.
pub struct Dashboard {
    pub store: Store,
    /// Key changes made here must reach the cache at once (a revoked key is
    /// refused from the next request on).
    pub keys: Arc<KeyCache>,
    pub limiters: Arc<RateLimiters>,
    pub clock: Clock,
    /// Password hashing runs here, off the workers that serve other
    /// connections.
    pub offload: Offload,
    /// The service's one operator connection, for the dashboard's changes.
    pub admin: AdminConn,
}

impl Dashboard {
    /// Runs `f` with the operator connection (on the offload pool).
    /// `None`: no answer in time (or the pool is full).
    fn admin<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Admin) -> Result<T, StorageError> + Send + 'static,
    ) -> Option<Result<T, StorageError>> {
        self.admin.run(STORAGE_WAIT, f)
    }

    /// Runs a read job on the store's readers and waits for it.
    fn read<T: Send + 'static>(
        &self,
        job: impl FnOnce(&dialproof_storage::Reader) -> Result<T, StorageError> + Send + 'static,
    ) -> Result<T, String> {
        match self.store.read_within(STORAGE_WAIT, job) {
            Outcome::Done(v) => Ok(v),
            other => Err(other.to_string()),
        }
    }
}

/// Whether `path` belongs to the dashboard.
pub fn owns(path: &str) -> bool {
    path == "/dashboard"
        || path.starts_with("/dashboard/")
        || path.trim_end_matches('/') == keys::CREATE_PATH
}

/// Answers a dashboard request (a path for which [`owns`] is true).
pub fn handle(ctx: &Dashboard, req: &Request) -> Response {
    let path = req.path();
    if path.trim_end_matches('/') == keys::CREATE_PATH {
        return keys::create(ctx, req);
    }
    let method = req.method();
    match (method, path) {
        (_, "/dashboard" | "/dashboard/") => page::see_other("/dashboard/verifications/"),
        ("GET" | "HEAD", "/dashboard/login/") => auth::login_form(req),
        ("POST", "/dashboard/login/") => auth::login(ctx, req),
        ("POST", "/dashboard/logout/") => auth::logout(ctx, req),
        ("GET" | "HEAD", "/dashboard/keys/") => keys::page(ctx, req),
        ("POST", "/dashboard/keys/revoke/") => keys::revoke(ctx, req),
        ("POST", "/dashboard/keys/delete/") => keys::delete(ctx, req),
        ("GET" | "HEAD", "/dashboard/verifications/") => verifications::page(ctx, req),
        ("GET" | "HEAD", "/dashboard/webhooks/") => webhooks::page(ctx, req),
        (
            "POST",
            "/dashboard/webhooks/rotate/"
            | "/dashboard/webhooks/dev-url/add/"
            | "/dashboard/webhooks/dev-url/remove/"
            | "/dashboard/webhooks/failed/"
            | "/dashboard/webhooks/retry/",
        ) => webhooks::change(ctx, req),
        (
            _,
            "/dashboard/login/"
            | "/dashboard/logout/"
            | "/dashboard/keys/"
            | "/dashboard/keys/revoke/"
            | "/dashboard/keys/delete/"
            | "/dashboard/verifications/"
            | "/dashboard/webhooks/",
        ) => page::error(
            405,
            "Метод не поддерживается",
            "Этот адрес не принимает такой запрос.",
        ),
        _ if !path.ends_with('/') => {
            let mut location = format!("{path}/");
            if let Some(q) = req.query() {
                location.push('?');
                location.push_str(q);
            }
            page::see_other(&location)
        }
        _ => page::error(404, "Страница не найдена", "Такой страницы в панели нет."),
    }
}
