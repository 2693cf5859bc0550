//! `number health` and `number release`: what the service counted for each
//! number (it adds what it counted to the stored counters about every
//! second) and the end of a
//! quarantine (the running service notices the deleted row within a second
//! and issues the number again).
//!
//! Not for: deciding anything (`dialproof_engine::number_health`).

use super::{storage, Output};
use crate::shared::config::ConfiguredNumber;
use anyhow::{bail, Result};
use dialproof_engine::time::UnixMillis;
use dialproof_storage::{Admin, NumberHealthRow};
use serde_json::json;
use std::collections::HashMap;

/// `number health`: every configured number, with its state and counters
/// (zeros for a number the service never leased nor heard).
pub fn health(admin: &Admin, configured: &[ConfiguredNumber], out: &Output) -> Result<()> {
    let stored: HashMap<String, NumberHealthRow> = storage(admin.number_health())?
        .into_iter()
        .map(|r| (r.number.clone(), r))
        .collect();
    let rows: Vec<serde_json::Value> = configured
        .iter()
        .map(|n| {
            let h = stored.get(&n.number).cloned().unwrap_or_default();
            let state = if h.quarantined_since.is_some() {
                "quarantined"
            } else {
                "healthy"
            };
            json!({
                "number": n.number,
                "pool": n.pool.as_str(),
                "state": state,
                "quarantined_since": h.quarantined_since.map(UnixMillis::to_rfc3339),
                "leases": h.leases,
                "completed": h.completed,
                "expired_uncalled": h.expired_uncalled,
                "uncalled_in_a_row": h.uncalled_in_a_row,
                "stray_calls": h.stray_calls,
                "last_completion": h.last_completion_at.map(UnixMillis::to_rfc3339),
            })
        })
        .collect();
    out.print(json!(rows), || table(&rows));
    Ok(())
}

fn table(rows: &[serde_json::Value]) -> String {
    let mut s = format!(
        "{:<17}  {:<13}  {:<11}  {:>7}  {:>9}  {:>8}  {:>6}  {:>5}  {}",
        "NUMBER",
        "POOL",
        "STATE",
        "LEASES",
        "COMPLETED",
        "UNCALLED",
        "IN ROW",
        "STRAY",
        "LAST COMPLETION"
    );
    for r in rows {
        s.push_str(&format!(
            "\n{:<17}  {:<13}  {:<11}  {:>7}  {:>9}  {:>8}  {:>6}  {:>5}  {}",
            r["number"].as_str().unwrap_or(""),
            r["pool"].as_str().unwrap_or(""),
            r["state"].as_str().unwrap_or(""),
            r["leases"],
            r["completed"],
            r["expired_uncalled"],
            r["uncalled_in_a_row"],
            r["stray_calls"],
            r["last_completion"].as_str().unwrap_or("never"),
        ));
    }
    s
}

/// `number release NUMBER`: ends its quarantine.
pub fn release(admin: &Admin, number: &str, out: &Output) -> Result<()> {
    if !storage(admin.release_number(number))? {
        bail!("{number} is not quarantined");
    }
    out.print(json!({"number": number, "state": "healthy"}), || {
        format!("{number} released from quarantine; the service issues it again within a second")
    });
    Ok(())
}
