//! The keys page: a company's API keys (label, 8-character prefix, created
//! and last-used time, limit, revoked state), creating one with a label
//! (its full token shown once, on the answer to the create), revoking and
//! deleting. Every change is scoped to the session's company, and reaches
//! the key cache before the answer, so a revoked key is refused at once.
//!
//! A key is live or, with the form's "test key" box, a test-mode key
//! (`svc_test_`); the list names each key's mode.
//!
//! Creation is `POST /api/dashboard/keys` (the spec's path), limited to 10
//! per hour per user; over it, the DRF 429 body with `Retry-After`.
//!
//! Not for: the label rule, minting and the creation limit
//! (`crate::accounts::keys`, shared with the CLI), the token format
//! (`dialproof_engine::apikey`) or the SQL (`dialproof_storage`'s
//! `dashboard_ops`).

use super::auth::{self, Signed};
use super::page::{self, when, when_opt, Nav};
use super::Dashboard;
use crate::accounts::keys::{self, Label, LabelError, LABEL_CHARS_MAX};
use crate::http::{Request, Response};
use askama::Template;
use dialproof_engine::apikey::KeyKind;
use dialproof_engine::ratelimit::{throttled_detail, LIMIT_PER_MINUTE_DEFAULT};
use dialproof_storage::KeyRow;

pub const CREATE_PATH: &str = "/api/dashboard/keys";

struct KeyView {
    label: String,
    prefix: String,
    created: String,
    last_used: String,
    limit: String,
    revoked: Option<String>,
    /// `live` or `test`.
    mode: &'static str,
}

struct Created {
    label: String,
    token: String,
}

#[derive(Template)]
#[template(path = "keys.html", config = "src/dashboard/askama.toml")]
struct KeysPage {
    nav: Nav,
    keys: Vec<KeyView>,
    created: Option<Created>,
    notice: Option<String>,
    label_max: usize,
}

fn view(k: &KeyRow) -> KeyView {
    KeyView {
        label: k.label.clone(),
        mode: if k.livemode { "live" } else { "test" },
        prefix: k.prefix.clone(),
        created: when(k.created_at),
        last_used: when_opt(k.last_used_at),
        limit: match k.rate_limit_per_minute {
            Some(n) => format!("{n}/мин"),
            None => format!("{LIMIT_PER_MINUTE_DEFAULT}/мин (по умолчанию)"),
        },
        revoked: k.revoked_at.map(when),
    }
}

fn show(
    ctx: &Dashboard,
    signed: &Signed,
    status: u16,
    created: Option<Created>,
    notice: Option<String>,
) -> Response {
    let company = signed.user.company_id;
    let keys = match ctx.read(move |r| r.company_keys(company)) {
        Ok(k) => k,
        Err(e) => return page::storage_failed("key list", &e),
    };
    let page = KeysPage {
        nav: signed.nav("keys"),
        keys: keys.iter().map(view).collect(),
        created,
        notice,
        label_max: LABEL_CHARS_MAX,
    };
    page::render(status, &page)
}

/// `GET /dashboard/keys/`.
pub fn page(ctx: &Dashboard, req: &Request) -> Response {
    match auth::require(ctx, req) {
        Ok(signed) => show(ctx, &signed, 200, None, None),
        Err(resp) => resp,
    }
}

/// `POST /api/dashboard/keys`: a new key with the form's label.
pub fn create(ctx: &Dashboard, req: &Request) -> Response {
    if req.method() != "POST" {
        return Response::detail(405, &crate::api::texts::method_not_allowed(req.method()))
            .with_header("Allow", "POST");
    }
    let (signed, fields) = match auth::require_post(ctx, req) {
        Ok(s) => s,
        Err(resp) => return resp,
    };
    let now = ctx.clock.now();
    if let Err(retry_after_seconds) = keys::count_creation(&ctx.limiters, signed.user.user_id, now)
    {
        return Response::detail(429, &throttled_detail(retry_after_seconds))
            .with_header("Retry-After", retry_after_seconds.to_string());
    }
    let label = match Label::parse(fields.raw("label")) {
        Ok(label) => label,
        Err(e) => return show(ctx, &signed, 400, None, Some(label_refusal(e))),
    };
    let company = signed.user.company_id;
    // A checkbox: present (any value) when ticked.
    let kind = if fields.get("test").is_some() {
        KeyKind::Test
    } else {
        KeyKind::Live
    };
    let created = match ctx.admin(move |a| keys::create(a, company, &label, kind, now)) {
        Some(Ok(created)) => created,
        Some(Err(e)) => return page::storage_failed("key create", &e.to_string()),
        None => return page::storage_failed("key create", "no answer in time"),
    };
    refresh(ctx);
    tracing::info!(company_id = company, prefix = %created.row.prefix, "key created in the dashboard");
    let created = Created {
        label: created.row.label,
        token: created.token,
    };
    show(ctx, &signed, 201, Some(created), None)
}

/// The page's words for a label that breaks the rule.
fn label_refusal(e: LabelError) -> String {
    match e {
        LabelError::Length => format!("Название ключа: от 1 до {LABEL_CHARS_MAX} символов."),
        LabelError::ControlCharacter => {
            "Название ключа не может содержать управляющие символы (перевод строки, табуляцию)."
                .to_owned()
        }
    }
}

/// The key cache follows the change at once, not at its next poll.
fn refresh(ctx: &Dashboard) {
    if let Err(e) = ctx.keys.refresh_if_changed() {
        tracing::warn!(error = %e, "key cache refresh after a dashboard change failed");
    }
}

/// `POST /dashboard/keys/revoke/` and `.../delete/`.
fn change(ctx: &Dashboard, req: &Request, delete: bool) -> Response {
    let (signed, fields) = match auth::require_post(ctx, req) {
        Ok(s) => s,
        Err(resp) => return resp,
    };
    let prefix = fields.get("prefix").unwrap_or("").to_owned();
    let company = signed.user.company_id;
    let now = ctx.clock.now();
    let p = prefix.clone();
    let done = ctx.admin(move |a| {
        if delete {
            a.delete_company_key(company, &p, now)
        } else {
            a.revoke_company_key(company, &p, now)
        }
    });
    let changed = match done {
        Some(Ok(c)) => c,
        Some(Err(e)) => return page::storage_failed("key change", &e.to_string()),
        None => return page::storage_failed("key change", "no answer in time"),
    };
    if !changed {
        let text = format!("Ключ {prefix} не найден.");
        return show(ctx, &signed, 404, None, Some(text));
    }
    refresh(ctx);
    tracing::info!(company_id = company, %prefix, delete, "key changed in the dashboard");
    page::see_other("/dashboard/keys/")
}

pub fn revoke(ctx: &Dashboard, req: &Request) -> Response {
    change(ctx, req, false)
}

pub fn delete(ctx: &Dashboard, req: &Request) -> Response {
    change(ctx, req, true)
}
