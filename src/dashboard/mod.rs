//! The web dashboard: server-rendered pages for a company's people, on the
//! same HTTPS listener as the API but outside `/api/v1/`. Pages live under
//! `/dashboard/`; the one form target the spec names, key creation, is
//! `POST /api/dashboard/keys` (10 per hour per user).
//!
//! Every page needs a live session (else a redirect to the login form),
//! every POST carries the session's form token (else 403), and every page
//! shows only the session's own company. Errors are HTML pages (or the DRF
//! body for a 429), never internals.
//!
//! Not for: the JSON login endpoint (`crate::api::login`), the SQL
//! (`dialproof_storage`'s `dashboard_ops`, `verification_list`), or
//! decisions such as the form token (`dialproof_engine::csrf`).

mod auth;
mod chart;
mod form;
mod keys;
mod page;
mod verifications;
mod webhooks;

use crate::api::key_cache::KeyCache;
use crate::api::rate_limiters::RateLimiters;
use crate::http::{Request, Response};
use crate::shared::clock::Clock;
use crate::shared::offload::Offload;
use dialproof_storage::{Admin, StorageError, Store};
use std::path::PathBuf;
use std::time::Duration;

/// How long a page waits for a storage read or write.
const STORAGE_WAIT: Duration = Duration::from_secs(10);

/// What the dashboard needs from the running service, lent per request.
pub struct Ctx<'a> {
    pub store: &'a Store,
    /// Key changes made here must reach the cache at once (a revoked key is
    /// refused from the next request on).
    pub keys: &'a KeyCache,
    pub limiters: &'a RateLimiters,
    pub clock: &'a Clock,
    /// Password hashing and the dashboard's writes run here, off the
    /// workers that serve other connections.
    pub offload: &'a Offload,
    /// The database file, for the dashboard's writes (`Admin`, as the CLI).
    pub db_path: PathBuf,
}

impl Ctx<'_> {
    /// Runs `f` with a fresh operator connection on the offload pool.
    /// `None`: no answer in time (or the pool is full).
    fn admin<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Admin) -> Result<T, StorageError> + Send + 'static,
    ) -> Option<Result<T, StorageError>> {
        let path = self.db_path.clone();
        self.offload
            .run(STORAGE_WAIT, move || Admin::open(&path).and_then(|a| f(&a)))
    }

    /// Runs a read job on the store's readers and waits for it.
    fn read<T: Send + 'static>(
        &self,
        job: impl FnOnce(&dialproof_storage::Reader) -> Result<T, StorageError> + Send + 'static,
    ) -> Result<T, String> {
        let found =
            crate::shared::wait::wait_for(STORAGE_WAIT, |reply| self.store.read(job, reply));
        match found {
            Some(Ok(Ok(v))) => Ok(v),
            other => Err(crate::shared::wait::read_failure_text(other)),
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
pub fn handle(ctx: &Ctx<'_>, req: &Request) -> Response {
    let path = req.path.as_str();
    if path.trim_end_matches('/') == keys::CREATE_PATH {
        return keys::create(ctx, req);
    }
    let method = req.method.as_str();
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
            if let Some(q) = &req.query {
                location.push('?');
                location.push_str(q);
            }
            page::see_other(&location)
        }
        _ => page::error(404, "Страница не найдена", "Такой страницы в панели нет."),
    }
}
