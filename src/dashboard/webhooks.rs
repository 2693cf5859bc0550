//! The webhooks page: rotating the company's signing secret (the new one
//! shown once; the previous one keeps signing for 24 hours, by the same
//! call as the CLI's rotation), the development-URL list (added and removed
//! one at a time, under the CLI's rule), the `verification.failed` switch,
//! and the delivery log: per
//! attempt its HTTP code, number, latency, error, next attempt time,
//! request and response body, with a Retry button that makes the delivery
//! due at once (the same storage call as `dialproof delivery retry`).
//!
//! Every change is scoped to the session's company; a delivery of another
//! company is "not found". The log shows one mode at a time (`?mode=live`,
//! the default, or `?mode=test`: test mode's deliveries), like the
//! verifications page; a change returns to the live log.
//!
//! Not for: the secret and development-URL rules (`crate::accounts::companies`,
//! shared with the CLI), sending webhooks (`crate::webhooks`) or the SQL
//! (the operator calls in `dialproof_storage::Admin`, shared with the CLI).

use super::auth::{self, Signed};
use super::form::Fields;
use super::page::{self, when, when_opt, Nav};
use super::Dashboard;
use crate::accounts::companies;
use crate::http::{Request, Response};
use askama::Template;
use dialproof_engine::time::UnixMillis;
use dialproof_engine::CompanyId;
use dialproof_storage::{DeliveryFilter, DeliveryLogEntry, StorageError};

/// Deliveries shown, newest first.
const LOG_ROWS: usize = 20;

struct AttemptView {
    no: u32,
    started: String,
    http: String,
    latency_ms: i64,
    error: String,
    next: String,
    request: String,
    response: String,
}

struct DeliveryView {
    id: i64,
    verification_id: String,
    event: &'static str,
    url: String,
    state: &'static str,
    attempts: Vec<AttemptView>,
}

#[derive(Template)]
#[template(path = "webhooks.html", config = "src/dashboard/askama.toml")]
struct WebhooksPage {
    nav: Nav,
    /// The delivery log's mode, `live` or `test` (test mode's deliveries
    /// are never listed with live ones).
    mode: &'static str,
    new_secret: Option<String>,
    grace_until: String,
    failed_on: bool,
    dev_urls: Vec<String>,
    deliveries: Vec<DeliveryView>,
    notice: Option<String>,
}

fn delivery_view(e: &DeliveryLogEntry) -> DeliveryView {
    DeliveryView {
        id: e.delivery.id,
        verification_id: e.delivery.verification_id.clone(),
        event: e.delivery.event_type.as_str(),
        url: e.delivery.url.clone(),
        state: e.delivery.state.as_str(),
        attempts: e
            .attempts
            .iter()
            .map(|a| AttemptView {
                no: a.attempt_no,
                started: when(a.started_at),
                http: a
                    .http_status
                    .map(|c| c.to_string())
                    .unwrap_or_else(|| "—".into()),
                latency_ms: a.latency_ms,
                error: a.error.clone().unwrap_or_default(),
                next: when_opt(a.next_attempt_at),
                request: a.request_body.clone(),
                response: a.response_body.clone(),
            })
            .collect(),
    }
}

/// What the page shows besides the company's settings.
struct Showing {
    status: u16,
    livemode: bool,
    new_secret: Option<String>,
    notice: Option<String>,
}

impl Showing {
    /// The page after a change (or a refused one): the live log.
    fn after_change(status: u16, new_secret: Option<String>, notice: Option<String>) -> Self {
        Showing {
            status,
            livemode: true,
            new_secret,
            notice,
        }
    }
}

/// The page's mode from `?mode=` (live by default; anything else is the
/// 400 notice), the same switch as the verifications page.
fn mode_of(req: &Request) -> Result<bool, String> {
    match Fields::query(req.query()).get("mode") {
        None | Some("live") => Ok(true),
        Some("test") => Ok(false),
        Some(other) => Err(format!("Неизвестный режим «{other}»: live или test.")),
    }
}

fn show(ctx: &Dashboard, signed: &Signed, showing: Showing) -> Response {
    let Showing {
        status,
        livemode,
        new_secret,
        notice,
    } = showing;
    let company_id = signed.user.company_id;
    let read = ctx.read(move |r| -> Result<_, StorageError> {
        let company = r.company(company_id)?;
        let filter = DeliveryFilter {
            company_id: Some(company_id),
            verification_id: None,
            livemode: Some(livemode),
            limit: LOG_ROWS,
        };
        Ok((company, r.delivery_log(&filter)?))
    });
    let (company, log) = match read {
        Ok((Some(c), log)) => (c, log),
        Ok((None, _)) => {
            return page::storage_failed("webhooks page", "the user's company is gone")
        }
        Err(e) => return page::storage_failed("webhooks page", &e),
    };
    let page = WebhooksPage {
        nav: signed.nav("webhooks"),
        mode: if livemode { "live" } else { "test" },
        new_secret,
        grace_until: company
            .previous_secret_valid_until
            .filter(|t| *t > ctx.clock.now())
            .map(when)
            .unwrap_or_default(),
        failed_on: company.send_failed_webhooks,
        dev_urls: company.dev_webhook_urls.clone(),
        deliveries: log.iter().map(delivery_view).collect(),
        notice,
    };
    page::render(status, &page)
}

/// `GET /dashboard/webhooks/`.
pub fn page(ctx: &Dashboard, req: &Request) -> Response {
    match auth::require(ctx, req) {
        Ok(signed) => match mode_of(req) {
            Ok(livemode) => {
                let showing = Showing {
                    livemode,
                    ..Showing::after_change(200, None, None)
                };
                show(ctx, &signed, showing)
            }
            Err(text) => show(ctx, &signed, Showing::after_change(400, None, Some(text))),
        },
        Err(resp) => resp,
    }
}

/// What a POST on this page asks for.
enum Action {
    Rotate,
    AddUrl(String),
    RemoveUrl(String),
    Failed(bool),
    Retry(i64),
}

fn action(path: &str, f: &Fields) -> Result<Action, String> {
    let url = || -> Result<String, String> {
        match companies::dev_url(f.raw("url")) {
            Ok(u) => Ok(u.to_owned()),
            Err(_) => Err("Адрес должен начинаться с http:// или https://.".into()),
        }
    };
    match path {
        "/dashboard/webhooks/rotate/" => Ok(Action::Rotate),
        "/dashboard/webhooks/dev-url/add/" => Ok(Action::AddUrl(url()?)),
        "/dashboard/webhooks/dev-url/remove/" => Ok(Action::RemoveUrl(url()?)),
        "/dashboard/webhooks/failed/" => match f.get("state") {
            Some("on") => Ok(Action::Failed(true)),
            Some("off") => Ok(Action::Failed(false)),
            _ => Err("Ожидалось on или off.".into()),
        },
        _ => f
            .get("delivery")
            .and_then(|d| d.parse().ok())
            .map(Action::Retry)
            .ok_or_else(|| "Неверный номер доставки.".into()),
    }
}

/// Carries out one change for `company`: the storage's answer (`None`
/// when none came in time) and, for a rotation, the new secret to show
/// once.
fn apply(
    ctx: &Dashboard,
    act: Action,
    company: CompanyId,
    now: UnixMillis,
) -> (Option<Result<(), StorageError>>, Option<String>) {
    let mut secret = None;
    let done = match act {
        Action::Rotate => match ctx.admin(move |a| companies::rotate_secret(a, company, now)) {
            Some(Ok(rotated)) => {
                secret = Some(rotated.secret);
                Some(Ok(()))
            }
            other => other.map(|r| r.map(|_| ())),
        },
        Action::AddUrl(u) => ctx.admin(move |a| a.add_dev_webhook_url(company, &u).map(|_| ())),
        Action::RemoveUrl(u) => {
            ctx.admin(move |a| a.remove_dev_webhook_url(company, &u).map(|_| ()))
        }
        Action::Failed(on) => ctx.admin(move |a| a.set_send_failed_webhooks(company, on)),
        Action::Retry(id) => ctx.admin(move |a| {
            // Only this company's deliveries: another's is "not found".
            match a.delivery_company(id)? {
                Some(owner) if owner == company => a.retry_delivery(id, now).map(|_| ()),
                _ => Err(StorageError::NotFound(format!(
                    "webhook delivery {id} does not exist"
                ))),
            }
        }),
    };
    (done, secret)
}

/// Every POST of the page (the paths [`super::handle`] routes here).
pub fn change(ctx: &Dashboard, req: &Request) -> Response {
    let (signed, fields) = match auth::require_post(ctx, req) {
        Ok(s) => s,
        Err(resp) => return resp,
    };
    let act = match action(req.path(), &fields) {
        Ok(a) => a,
        Err(text) => return show(ctx, &signed, Showing::after_change(400, None, Some(text))),
    };
    let company = signed.user.company_id;
    let now = ctx.clock.now();
    let (done, secret) = apply(ctx, act, company, now);
    match done {
        Some(Ok(())) => {}
        Some(Err(
            StorageError::NotFound(_) | StorageError::Invalid(_) | StorageError::Conflict(_),
        )) => {
            let notice = Some("Не найдено или недопустимо.".into());
            return show(ctx, &signed, Showing::after_change(404, None, notice));
        }
        Some(Err(e)) => return page::storage_failed("webhooks change", &e.to_string()),
        None => return page::storage_failed("webhooks change", "no answer in time"),
    }
    if let Err(e) = ctx.keys.refresh_if_changed() {
        tracing::warn!(error = %e, "cache refresh after a dashboard change failed");
    }
    tracing::info!(company_id = company, path = %req.path(), "webhook settings changed in the dashboard");
    match secret {
        Some(s) => show(ctx, &signed, Showing::after_change(200, Some(s), None)),
        None => page::see_other("/dashboard/webhooks/"),
    }
}
