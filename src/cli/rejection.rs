//! The operator's `rejection list`: the create requests refused with 503
//! ('all lines busy'), newest first. The same rows appear in a company's
//! dashboard as failed verifications without a dial number.
//!
//! Not for: recording them (the API's create path does, through the writer).

use anyhow::Result;
use clap::Subcommand;
use dialproof_storage::{Admin, RejectionRow, REJECTIONS_LISTED_MAX};
use serde_json::json;

/// Rows listed when `--limit` is not given.
pub const LIST_LIMIT_DEFAULT: usize = 20;

#[derive(Debug, Subcommand)]
pub enum RejectionCmd {
    /// Refused creates, newest first: time, company, key, phone, pool, reason.
    List {
        #[arg(long)]
        company: Option<i64>,
        /// Most rows shown (1..=1000).
        #[arg(long, default_value_t = LIST_LIMIT_DEFAULT)]
        limit: usize,
    },
}

fn row_json(r: &RejectionRow) -> serde_json::Value {
    json!({
        "id": r.id,
        "company_id": r.company_id,
        "api_key_id": r.api_key_id,
        "phone": r.phone,
        "pool": r.pool.as_str(),
        "status": "failed",
        "reason": r.reason,
        "created_at": r.created_at.to_rfc3339(),
    })
}

pub fn run(admin: &Admin, cmd: RejectionCmd, json_output: bool) -> Result<()> {
    let RejectionCmd::List { company, limit } = cmd;
    if limit == 0 || limit > REJECTIONS_LISTED_MAX {
        anyhow::bail!("--limit must be 1..={REJECTIONS_LISTED_MAX}, got {limit}");
    }
    let rows = admin
        .list_rejections(company, limit)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    if json_output {
        println!("{}", json!(rows.iter().map(row_json).collect::<Vec<_>>()));
        return Ok(());
    }
    println!(
        "{:>8}  {:<25}  {:>7}  {:<16}  {:<13}  REASON",
        "ID", "AT", "COMPANY", "PHONE", "POOL"
    );
    for r in &rows {
        println!(
            "{:>8}  {:<25}  {:>7}  {:<16}  {:<13}  {}",
            r.id,
            r.created_at.to_rfc3339(),
            r.company_id,
            r.phone,
            r.pool.as_str(),
            r.reason
        );
    }
    Ok(())
}
