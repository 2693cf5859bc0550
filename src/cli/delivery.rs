//! The operator's `delivery` commands: the webhook delivery log and the
//! manual retry.
//!
//! `delivery list` shows, per delivery, every attempt's number, start time,
//! HTTP code, latency, error, next attempt time, request body and (the start
//! of) the response body. `delivery retry ID` makes a delivery pending and
//! due now; the running service notices within its poll interval (half a
//! second) and sends it at once, signed afresh, with the same body bytes.
//!
//! Not for: sending anything itself (only the service sends webhooks), or
//! the dashboard's view of the same log (later, from the same storage calls).

use anyhow::Result;
use clap::Subcommand;
use dialproof_engine::time::UnixMillis;
use dialproof_storage::{
    Admin, AttemptRow, DeliveryFilter, DeliveryLogEntry, DELIVERY_LOG_LIMIT_MAX,
};
use serde_json::json;

/// Deliveries listed when `--limit` is not given.
pub const LIST_LIMIT_DEFAULT: usize = 20;
/// Characters of a body shown per attempt in the text listing (`--json`
/// shows what is stored).
const TEXT_BODY_CHARS_MAX: usize = 300;

#[derive(Debug, Subcommand)]
pub enum DeliveryCmd {
    /// The delivery log, newest first: every attempt with its HTTP code,
    /// number, request and response body, latency, error and next attempt.
    List {
        #[arg(long)]
        company: Option<i64>,
        #[arg(long)]
        verification: Option<String>,
        /// Most deliveries shown (1..=1000).
        #[arg(long, default_value_t = LIST_LIMIT_DEFAULT)]
        limit: usize,
    },
    /// Send a delivery again at once (whatever its state).
    Retry { id: i64 },
}

pub fn run(admin: &Admin, cmd: DeliveryCmd, json_output: bool, now: UnixMillis) -> Result<()> {
    match cmd {
        DeliveryCmd::List {
            company,
            verification,
            limit,
        } => {
            if limit == 0 || limit > DELIVERY_LOG_LIMIT_MAX {
                anyhow::bail!("--limit must be 1..={DELIVERY_LOG_LIMIT_MAX}, got {limit}");
            }
            let filter = DeliveryFilter {
                company_id: company,
                verification_id: verification,
                // The operator's log shows both modes (each row says which).
                livemode: None,
                limit,
            };
            let log = admin
                .delivery_log(&filter)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            if json_output {
                println!("{}", json!(log.iter().map(entry_json).collect::<Vec<_>>()));
            } else {
                println!("{}", entries_text(&log));
            }
        }
        DeliveryCmd::Retry { id } => {
            let row = admin
                .retry_delivery(id, now)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            if json_output {
                println!(
                    "{}",
                    json!({"id": row.id, "verification_id": row.verification_id,
                           "state": row.state.as_str(),
                           "next_attempt_at": row.next_attempt_at.map(UnixMillis::to_rfc3339)})
                );
            } else {
                println!(
                    "delivery {} ({}) queued to be sent again now",
                    row.id, row.verification_id
                );
            }
        }
    }
    Ok(())
}

fn attempt_json(a: &AttemptRow) -> serde_json::Value {
    json!({
        "attempt": a.attempt_no,
        "started_at": a.started_at.to_rfc3339(),
        "latency_ms": a.latency_ms,
        "http_status": a.http_status,
        "error": a.error,
        "request_body": a.request_body,
        "response_body": a.response_body,
        "next_attempt_at": a.next_attempt_at.map(UnixMillis::to_rfc3339),
    })
}

fn entry_json(e: &DeliveryLogEntry) -> serde_json::Value {
    let d = &e.delivery;
    json!({
        "id": d.id,
        "verification_id": d.verification_id,
        "company_id": d.company_id,
        "livemode": d.livemode,
        "type": d.event_type.as_str(),
        "url": d.url,
        "state": d.state.as_str(),
        "attempts_made": d.attempts,
        "next_attempt_at": d.next_attempt_at.map(UnixMillis::to_rfc3339),
        "created_at": d.created_at.to_rfc3339(),
        "updated_at": d.updated_at.to_rfc3339(),
        "attempts": e.attempts.iter().map(attempt_json).collect::<Vec<_>>(),
    })
}

fn short(s: &str) -> String {
    if s.is_empty() {
        return "-".to_owned();
    }
    let mut out: String = s.chars().take(TEXT_BODY_CHARS_MAX).collect();
    if out.len() < s.len() {
        out.push('…');
    }
    out.replace('\n', " ")
}

fn entries_text(log: &[DeliveryLogEntry]) -> String {
    if log.is_empty() {
        return "no deliveries".to_owned();
    }
    let mut s = String::new();
    for e in log {
        let d = &e.delivery;
        s.push_str(&format!(
            "delivery {}  {}  {}  company {}  {}  attempts {}  next {}\n  url {}\n",
            d.id,
            d.verification_id,
            d.event_type.as_str(),
            d.company_id,
            d.state.as_str(),
            d.attempts,
            d.next_attempt_at
                .map(|t| t.to_rfc3339())
                .unwrap_or("-".into()),
            d.url
        ));
        for a in &e.attempts {
            s.push_str(&format!(
                "  #{} {}  HTTP {}  {} ms  next {}  error {}\n    request  {}\n    response {}\n",
                a.attempt_no,
                a.started_at,
                a.http_status.map(|c| c.to_string()).unwrap_or("-".into()),
                a.latency_ms,
                a.next_attempt_at
                    .map(|t| t.to_rfc3339())
                    .unwrap_or("-".into()),
                a.error.as_deref().unwrap_or("-"),
                short(&a.request_body),
                short(&a.response_body),
            ));
        }
    }
    s.trim_end().to_owned()
}
