//! `dialproof key ...`: API keys created (the token shown once, only its
//! hash stored), listed, revoked, and given a limit of their own.
//!
//! Not for: the label rule, minting and the limit's range
//! (`crate::accounts::keys`, which the dashboard calls too), or checking a
//! key on a request (`crate::api`).

use super::{now, storage, KeyCmd, Output};
use crate::accounts::keys::{self, Label};
use anyhow::{bail, Result};
use dialproof_engine::apikey::KeyKind;
use dialproof_engine::time::UnixMillis;
use dialproof_storage::{Admin, KeyRow};
use serde_json::json;

fn key_json(k: &KeyRow) -> serde_json::Value {
    json!({
        "id": k.id,
        "company_id": k.company_id,
        "label": k.label,
        "prefix": k.prefix,
        "created_at": k.created_at.to_rfc3339(),
        "last_used_at": k.last_used_at.map(UnixMillis::to_rfc3339),
        "revoked_at": k.revoked_at.map(UnixMillis::to_rfc3339),
        "rate_limit_per_minute": k.rate_limit_per_minute
            .unwrap_or(dialproof_engine::ratelimit::LIMIT_PER_MINUTE_DEFAULT),
        "rate_limit_is_default": k.rate_limit_per_minute.is_none(),
        "livemode": k.livemode,
    })
}

pub(super) fn run(admin: &Admin, cmd: KeyCmd, out: &Output) -> Result<()> {
    match cmd {
        KeyCmd::Create {
            company,
            label,
            test,
        } => {
            let kind = if test { KeyKind::Test } else { KeyKind::Live };
            key_create(admin, company, &label, kind, out)?
        }
        KeyCmd::List { company } => {
            let all = storage(admin.list_keys(company))?;
            out.print(json!(all.iter().map(key_json).collect::<Vec<_>>()), || {
                key_table(&all)
            });
        }
        KeyCmd::Revoke { prefix } => {
            if !storage(admin.revoke_key(&prefix, now()))? {
                bail!("no active key with prefix {prefix:?}");
            }
            out.print(json!({"prefix": prefix, "revoked": true}), || {
                format!("key {prefix} revoked")
            });
        }
        KeyCmd::SetLimit { prefix, limit } => key_set_limit(admin, &prefix, &limit, out)?,
    }
    Ok(())
}

/// A new key for `company`: the token is printed once, only its hash kept.
fn key_create(admin: &Admin, company: i64, label: &str, kind: KeyKind, out: &Output) -> Result<()> {
    let label = Label::parse(label)?;
    let keys::NewKey { row: k, token } =
        storage(keys::create(admin, company, &label, kind, now()))?;
    let mut v = key_json(&k);
    v["token"] = json!(token);
    let mode = if k.livemode { "live" } else { "test" };
    out.print(v, || {
        format!(
            "{mode} key {} created for company {} (label {:?})\ntoken (shown once): {}",
            k.prefix, k.company_id, k.label, token
        )
    });
    Ok(())
}

/// The keys as a text table.
fn key_table(all: &[KeyRow]) -> String {
    let mut s = format!(
        "{:<8}  {:>7}  {:<4}  {:<24}  {:>9}  {:<24}  {}",
        "PREFIX", "COMPANY", "MODE", "LABEL", "LIMIT/MIN", "LAST USED", "REVOKED"
    );
    for k in all {
        let limit = match k.rate_limit_per_minute {
            Some(l) => l.to_string(),
            None => format!(
                "{} (default)",
                dialproof_engine::ratelimit::LIMIT_PER_MINUTE_DEFAULT
            ),
        };
        s.push_str(&format!(
            "\n{:<8}  {:>7}  {:<4}  {:<24}  {:>9}  {:<24}  {}",
            k.prefix,
            k.company_id,
            if k.livemode { "live" } else { "test" },
            k.label,
            limit,
            k.last_used_at.map(|t| t.to_rfc3339()).unwrap_or("-".into()),
            k.revoked_at.map(|t| t.to_rfc3339()).unwrap_or("-".into()),
        ));
    }
    s
}

/// A key's own limit per minute, or `default` for the service's.
fn key_set_limit(admin: &Admin, prefix: &str, limit: &str, out: &Output) -> Result<()> {
    let value = keys::parse_limit(limit).map_err(anyhow::Error::msg)?;
    if !storage(admin.set_key_limit(prefix, value))? {
        bail!("no key with prefix {prefix:?}");
    }
    let shown = value.unwrap_or(dialproof_engine::ratelimit::LIMIT_PER_MINUTE_DEFAULT);
    out.print(
        json!({"prefix": prefix, "rate_limit_per_minute": shown, "rate_limit_is_default": value.is_none()}),
        || format!("key {prefix}: {shown} requests per minute"),
    );
    Ok(())
}
