//! The Prometheus text exposition (format 0.0.4) of the service's figures.
//!
//! Names follow the Prometheus conventions: a `dialproof_` prefix, base
//! units (`_seconds`, `_bytes`), `_total` on counters. Everything is read
//! from atomics and snapshots at scrape time, so a scrape costs the request
//! path nothing.
//!
//! Not for: counting (`crate::shared::metrics`, `crate::sip::state`,
//! `dialproof_storage::StoreStats`).

use super::Ops;
use crate::shared::held_rows::{REREAD_BYTES_MAX, REREAD_COPIES_MAX};
use crate::shared::metrics::{
    Histogram, Metrics, ReplicationMetrics, LATENCY_BUCKETS_SECONDS, ROUTES, WEBHOOK_OUTCOMES,
};
use dialproof_engine::pool::Pool;
use dialproof_storage::{BATCH_OPS_BUCKETS, COMMIT_SECONDS_BUCKETS};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

/// The whole exposition.
pub fn render(ctx: &Ops) -> String {
    let mut out = String::with_capacity(8 * 1024);
    numbers(&mut out, ctx);
    number_health(&mut out, ctx);
    api(&mut out, ctx);
    sip(&mut out, ctx);
    webhooks(&mut out, ctx);
    storage(&mut out, ctx);
    fence(&mut out, ctx);
    replication(&mut out, &ctx.metrics.replication);
    process(&mut out);
    build_info(&mut out);
    out
}

/// The release and commit this binary was built from, as the usual
/// always-1 info gauge (an alert or a dashboard joins on its labels).
fn build_info(out: &mut String) {
    let name = "dialproof_build_info";
    header(
        out,
        name,
        "gauge",
        "The running binary's version and git commit.",
    );
    let labels = format!(
        "version=\"{}\",commit=\"{}\"",
        escape(crate::build_info::VERSION),
        escape(crate::build_info::COMMIT)
    );
    sample(out, name, &labels, 1);
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

fn sample(out: &mut String, name: &str, labels: &str, value: impl std::fmt::Display) {
    if labels.is_empty() {
        let _ = writeln!(out, "{name} {value}");
    } else {
        let _ = writeln!(out, "{name}{{{labels}}} {value}");
    }
}

fn get(c: &AtomicU64) -> u64 {
    c.load(Ordering::Relaxed)
}

/// Quarantined numbers per pool (every pool, zero included, so an alert
/// has a series to watch) and stray calls.
fn number_health(out: &mut String, ctx: &Ops) {
    let name = "dialproof_numbers_quarantined";
    header(
        out,
        name,
        "gauge",
        "Numbers quarantined because their leases expired without a single INVITE.",
    );
    let per_pool = ctx.health.quarantined_per_pool();
    for pool in Pool::ALL {
        let n = per_pool.get(&pool).copied().unwrap_or(0);
        sample(out, name, &format!("pool=\"{}\"", pool.as_str()), n);
    }
    let name = "dialproof_number_stray_calls_total";
    header(
        out,
        name,
        "counter",
        "INVITEs to one of our numbers while it was not leased.",
    );
    sample(out, name, "", get(&ctx.health.stray_calls));
}

/// Free, leased and withheld numbers per pool and sub-pool.
fn numbers(out: &mut String, ctx: &Ops) {
    let name = "dialproof_numbers";
    header(out, name, "gauge", "Configured dial numbers by state.");
    for s in ctx.leases.with_table(|t| t.stats()) {
        let sub_pool = match s.dedicated_to {
            None => "shared".to_owned(),
            Some(company) => format!("company-{company}"),
        };
        let free = s.issuable.saturating_sub(s.leased.min(s.issuable));
        let withheld = s.total.saturating_sub(s.issuable);
        for (state, n) in [("free", free), ("leased", s.leased), ("withheld", withheld)] {
            let labels = format!(
                "pool=\"{}\",sub_pool=\"{sub_pool}\",state=\"{state}\"",
                s.pool.as_str()
            );
            sample(out, name, &labels, n);
        }
    }
    let name = "dialproof_line_numbers";
    header(
        out,
        name,
        "gauge",
        "Configured dial numbers by line and state.",
    );
    let config = ctx.config.read().clone();
    for s in ctx.leases.with_table(|t| t.line_stats()) {
        let Some(line) = config.lines.get(s.line as usize) else {
            continue;
        };
        let free = s.issuable.saturating_sub(s.leased.min(s.issuable));
        let withheld = s.total.saturating_sub(s.issuable);
        for (state, n) in [("free", free), ("leased", s.leased), ("withheld", withheld)] {
            let labels = format!("line=\"{}\",state=\"{state}\"", escape(&line.name));
            sample(out, name, &labels, n);
        }
    }
}

fn api(out: &mut String, ctx: &Ops) {
    let m = &ctx.metrics;
    let name = "dialproof_creates_total";
    header(
        out,
        name,
        "counter",
        "Create requests by outcome (503s by pool).",
    );
    sample(out, name, "outcome=\"created\"", get(&m.creates_ok));
    sample(out, name, "outcome=\"replayed\"", get(&m.creates_replayed));
    sample(out, name, "outcome=\"invalid\"", get(&m.creates_invalid));
    for pool in Pool::ALL {
        let labels = format!("outcome=\"no_number\",pool=\"{}\"", pool.as_str());
        sample(
            out,
            name,
            &labels,
            get(&m.creates_rejected_no_number[pool.index()]),
        );
    }
    let name = "dialproof_test_mode_creates_total";
    header(
        out,
        name,
        "counter",
        "Test-mode (svc_test_ key) create requests by outcome: apart from the live ones.",
    );
    sample(out, name, "outcome=\"created\"", get(&m.test_creates_ok));
    let no_number = get(&m.test_creates_rejected_no_number);
    sample(out, name, "outcome=\"no_number\"", no_number);
    request_counters(out, m);
    idempotency(out, ctx);
    reads(out, ctx);
    let name = "dialproof_verifications_ended_total";
    header(
        out,
        name,
        "counter",
        "Verifications that left pending, by status.",
    );
    for (status, c) in [
        ("completed", &m.completed),
        ("expired", &m.expired),
        ("failed", &m.failed),
    ] {
        sample(out, name, &format!("status=\"{status}\""), get(c));
    }
    let name = "dialproof_request_duration_seconds";
    header(
        out,
        name,
        "histogram",
        "HTTPS request handling time by route.",
    );
    for (route, h) in ROUTES.iter().zip(m.latency.iter()) {
        histogram(out, name, &format!("route=\"{route}\""), h);
    }
}

/// The counters of answers that are no route's own (429, 401, 500, reaped
/// connections).
/// GETs of one verification by where they were answered from, and how
/// many pending verifications memory holds for them.
fn reads(out: &mut String, ctx: &Ops) {
    let m = &ctx.metrics;
    let name = "dialproof_verification_reads_total";
    header(
        out,
        name,
        "counter",
        "GETs of one verification found, by where the answer came from: memory (pending, held) or sqlite.",
    );
    sample(out, name, "from=\"memory\"", get(&m.reads_held));
    sample(out, name, "from=\"sqlite\"", get(&m.reads_stored));
    let name = "dialproof_verifications_held";
    header(
        out,
        name,
        "gauge",
        "Pending verifications held in memory for GETs (bounded; the oldest are left to SQLite).",
    );
    sample(out, name, "", ctx.held.count() as u64);
    let name = "dialproof_verification_copies_held";
    header(
        out,
        name,
        "gauge",
        &format!(
            "Of the verifications held, those a GET read from SQLite and kept for the next polls \
             (at most {REREAD_COPIES_MAX}, about {} MiB).",
            REREAD_BYTES_MAX >> 20
        ),
    );
    sample(out, name, "", ctx.held.copies() as u64);
}

/// Idempotency keys of creates: the two 409s, the purge, and what memory
/// holds of stored answers.
fn idempotency(out: &mut String, ctx: &Ops) {
    let m = &ctx.metrics;
    let name = "dialproof_idempotency_conflicts_total";
    header(
        out,
        name,
        "counter",
        "Creates answered 409 for their Idempotency-Key: reused with another body \
         (idempotency_conflict) or while its first create ran (in_flight).",
    );
    sample(
        out,
        name,
        "kind=\"idempotency_conflict\"",
        get(&m.idempotency_mismatches),
    );
    sample(
        out,
        name,
        "kind=\"in_flight\"",
        get(&m.idempotency_in_flight),
    );
    let name = "dialproof_idempotency_keys_purged_total";
    header(
        out,
        name,
        "counter",
        "Stored idempotency keys purged after their retention.",
    );
    sample(out, name, "", get(&m.idempotency_keys_purged));
    let held = ctx.idempotency.stats();
    for (name, help, value) in [
        (
            "dialproof_idempotency_answers_held",
            "Stored answers of idempotency keys held in memory for fast replays.",
            held.answers,
        ),
        (
            "dialproof_idempotency_answer_bytes_held",
            "Bytes of those answers' bodies.",
            held.answer_bytes,
        ),
        (
            "dialproof_idempotency_creates_in_flight",
            "Creates with a key between their claim and their commit.",
            held.in_flight,
        ),
    ] {
        header(out, name, "gauge", help);
        sample(out, name, "", value);
    }
}

fn request_counters(out: &mut String, m: &Metrics) {
    for (name, help, c) in [
        (
            "dialproof_http_requests_total",
            "HTTPS requests read.",
            &m.http_requests,
        ),
        (
            "dialproof_throttled_total",
            "Requests answered 429.",
            &m.throttled,
        ),
        (
            "dialproof_auth_failures_total",
            "Requests answered 401.",
            &m.auth_failures,
        ),
        (
            "dialproof_storage_errors_total",
            "Requests answered 500 for storage.",
            &m.storage_errors,
        ),
        (
            "dialproof_http_connections_reaped_total",
            "Client connections the watchdog closed, blocked past their timeout.",
            &crate::http::watchdog::REAPED,
        ),
    ] {
        header(out, name, "counter", help);
        sample(out, name, "", get(c));
    }
}

fn histogram(out: &mut String, name: &str, labels: &str, h: &Histogram) {
    let (counts, sum) = h.snapshot();
    for (i, count) in counts.iter().enumerate() {
        let le = LATENCY_BUCKETS_SECONDS
            .get(i)
            .map_or("+Inf".to_owned(), |b| b.to_string());
        let labels = if labels.is_empty() {
            format!("le=\"{le}\"")
        } else {
            format!("{labels},le=\"{le}\"")
        };
        sample(out, &format!("{name}_bucket"), &labels, count);
    }
    sample(out, &format!("{name}_sum"), labels, sum);
    let total = counts.last().copied().unwrap_or(0);
    sample(out, &format!("{name}_count"), labels, total);
}

fn webhooks(out: &mut String, ctx: &Ops) {
    let m = &ctx.metrics.webhooks;
    let name = "dialproof_webhook_attempts_total";
    header(out, name, "counter", "Webhook attempts by outcome.");
    for (outcome, c) in WEBHOOK_OUTCOMES.iter().zip(m.attempts.iter()) {
        sample(out, name, &format!("outcome=\"{outcome}\""), get(c));
    }
    let name = "dialproof_webhook_deliveries_dead_total";
    header(
        out,
        name,
        "counter",
        "Live deliveries given up after the last attempt.",
    );
    sample(out, name, "", get(&m.dead));
    let name = "dialproof_test_mode_webhook_deliveries_dead_total";
    header(
        out,
        name,
        "counter",
        "Test-mode deliveries given up after the last attempt.",
    );
    sample(out, name, "", get(&m.test_dead));
    let name = "dialproof_webhook_attempt_duration_seconds";
    header(
        out,
        name,
        "histogram",
        "One webhook attempt's HTTP exchange.",
    );
    histogram(out, name, "", &m.attempt_duration);
    let name = "dialproof_webhook_delivery_latency_seconds";
    header(
        out,
        name,
        "histogram",
        "From the event's commit to the 2xx that delivered it.",
    );
    histogram(out, name, "", &m.delivery_latency);
    webhook_gauges(out, ctx);
}

/// The webhook queue's and outbox's gauges.
fn webhook_gauges(out: &mut String, ctx: &Ops) {
    let m = &ctx.metrics.webhooks;
    for (name, help, g) in [
        (
            "dialproof_webhook_queued",
            "Attempts queued for the sender threads.",
            &m.queued,
        ),
        (
            "dialproof_webhook_in_flight",
            "Attempts dispatched and not yet recorded.",
            &m.in_flight,
        ),
        (
            "dialproof_webhook_undelivered",
            "Live outbox rows still pending (refreshed every 5 s).",
            &m.undelivered,
        ),
        (
            "dialproof_test_mode_webhook_undelivered",
            "Test-mode outbox rows still pending (refreshed every 5 s).",
            &m.test_undelivered,
        ),
    ] {
        header(out, name, "gauge", help);
        sample(out, name, "", get(g));
    }
    let oldest = get(&m.oldest_undelivered_at_ms);
    let age = if oldest == 0 {
        0.0
    } else {
        (ctx.now().0 - oldest as i64).max(0) as f64 / 1000.0
    };
    let name = "dialproof_webhook_oldest_undelivered_age_seconds";
    header(
        out,
        name,
        "gauge",
        "Age of the oldest pending live outbox row; 0 when none.",
    );
    sample(out, name, "", age);
}

fn sip(out: &mut String, ctx: &Ops) {
    let s = &ctx.sip_stats;
    header(
        out,
        "dialproof_sip_invites_total",
        "counter",
        "INVITEs that started a transaction.",
    );
    sample(out, "dialproof_sip_invites_total", "", get(&s.invites));
    let name = "dialproof_sip_calls_total";
    header(out, name, "counter", "INVITEs by outcome.");
    for (outcome, c) in [
        ("completed", &s.completed),
        ("untrusted_source", &s.rejected_untrusted_source),
        ("unknown_number", &s.rejected_unknown_number),
        ("no_lease", &s.rejected_no_lease),
        ("withheld", &s.rejected_withheld),
        ("caller_id_untrusted", &s.rejected_untrusted_caller_id),
        ("fenced", &s.rejected_fenced),
        ("cancelled", &s.cancelled),
    ] {
        sample(out, name, &format!("outcome=\"{outcome}\""), get(c));
    }
    let name = "dialproof_sip_datagrams_dropped_total";
    header(out, name, "counter", "Datagrams dropped, by reason.");
    for (reason, c) in [
        ("malformed", &s.malformed),
        ("overloaded", &s.overloaded),
        ("stale", &s.stale),
    ] {
        sample(out, name, &format!("reason=\"{reason}\""), get(c));
    }
    let name = "dialproof_sip_line_up";
    header(
        out,
        name,
        "gauge",
        "1 while a line is registered or answering pings.",
    );
    let mut lines: Vec<(String, bool)> = ctx.sip_lines.snapshot().into_iter().collect();
    lines.sort();
    for (line, up) in &lines {
        sample(
            out,
            name,
            &format!("line=\"{}\"", escape(line)),
            u8::from(*up),
        );
    }
    let name = "dialproof_sip_line_last_change_timestamp_seconds";
    header(
        out,
        name,
        "gauge",
        "When the line last went up or down (Unix time).",
    );
    let changed = ctx.sip_lines.changed_at();
    for (line, _) in &lines {
        let at = changed.get(line).map_or(0.0, |t| t.0 as f64 / 1000.0);
        sample(out, name, &format!("line=\"{}\"", escape(line)), at);
    }
    let name = "dialproof_sip_invite_transactions";
    header(out, name, "gauge", "INVITE server transactions held now.");
    sample(out, name, "", get(&s.invite_transactions));
}

fn storage(out: &mut String, ctx: &Ops) {
    let s = ctx.store.stats();
    let name = "dialproof_storage_batches_total";
    header(
        out,
        name,
        "counter",
        "Writer transactions (group commits) by outcome.",
    );
    sample(out, name, "outcome=\"committed\"", s.batches_committed);
    sample(out, name, "outcome=\"failed\"", s.batches_failed);
    let name = "dialproof_storage_ops_total";
    header(out, name, "counter", "Write operations by outcome.");
    sample(out, name, "outcome=\"committed\"", s.ops_committed);
    sample(out, name, "outcome=\"failed\"", s.ops_failed);
    let (queued, in_flight) = ctx.expiries.counts();
    for (name, help, v) in [
        (
            "dialproof_storage_checkpoints_total",
            "WAL checkpoints run (beside the writer, by the storage checkpoint thread).",
            s.checkpoints,
        ),
        (
            "dialproof_storage_write_queue",
            "Operations waiting for the writer.",
            s.write_queue_len as u64,
        ),
        (
            "dialproof_storage_read_queue",
            "Jobs waiting for a reader.",
            s.read_queue_len as u64,
        ),
        (
            "dialproof_storage_commit_events_queued",
            "Committed batches the commit consumer has not taken.",
            s.committed_batches_queued,
        ),
        (
            "dialproof_expiries_scheduled",
            "Pending verifications whose expiry is scheduled.",
            queued as u64,
        ),
        (
            "dialproof_expiries_in_flight",
            "Expiries submitted to the writer, unanswered.",
            in_flight as u64,
        ),
    ] {
        let kind = if name.ends_with("_total") {
            "counter"
        } else {
            "gauge"
        };
        header(out, name, kind, help);
        sample(out, name, "", v);
    }
    wal_size(out, ctx);
    group_commit(out, &s);
}

/// The write-ahead log's size on disk (0 when there is none).
fn wal_size(out: &mut String, ctx: &Ops) {
    let wal = ctx.config.read().database_path().with_extension("db-wal");
    let name = "dialproof_storage_wal_bytes";
    header(out, name, "gauge", "Size of the SQLite write-ahead log.");
    sample(out, name, "", std::fs::metadata(wal).map_or(0, |m| m.len()));
}

/// The group commit's shape: ops per transaction and its time.
fn group_commit(out: &mut String, s: &dialproof_storage::StoreStats) {
    let name = "dialproof_storage_batch_ops";
    header(
        out,
        name,
        "histogram",
        "Write operations per committed transaction.",
    );
    let bounds: Vec<String> = BATCH_OPS_BUCKETS.iter().map(u64::to_string).collect();
    cumulative(out, name, &bounds, &s.batch_ops, s.batch_ops_sum as f64);
    let name = "dialproof_storage_commit_duration_seconds";
    header(
        out,
        name,
        "histogram",
        "Time of a committed transaction, BEGIN to COMMIT.",
    );
    let bounds: Vec<String> = COMMIT_SECONDS_BUCKETS.iter().map(f64::to_string).collect();
    let sum = s.commit_micros_sum as f64 / 1e6;
    cumulative(out, name, &bounds, &s.commit_seconds, sum);
}

/// A histogram from cumulative counts per bound (the last is `+Inf`).
fn cumulative(out: &mut String, name: &str, bounds: &[String], counts: &[u64], sum: f64) {
    for (i, count) in counts.iter().enumerate() {
        let le = bounds.get(i).map_or("+Inf", String::as_str);
        sample(
            out,
            &format!("{name}_bucket"),
            &format!("le=\"{le}\""),
            *count,
        );
    }
    sample(out, &format!("{name}_sum"), "", sum);
    sample(
        out,
        &format!("{name}_count"),
        "",
        counts.last().copied().unwrap_or(0),
    );
}

/// The heartbeat a replica carries and a promotion's hold
/// (tools/deploy/README.md, "Standby with Litestream": the replica's lag is
/// this heartbeat minus the one a restored replica holds).
fn replication(out: &mut String, r: &ReplicationMetrics) {
    let seconds = |ms: &AtomicU64| get(ms) as f64 / 1000.0;
    for (name, help, v) in [
        (
            "dialproof_replication_heartbeat_committed_timestamp_seconds",
            "Newest heartbeat committed for the replica (0 without replication).",
            seconds(&r.heartbeat_committed_ms),
        ),
        (
            "dialproof_promotion_held_numbers",
            "Numbers held back after a promotion (the lost tail may have leased them).",
            get(&r.held_numbers) as f64,
        ),
        (
            "dialproof_promotion_hold_until_timestamp_seconds",
            "When the promotion's held numbers are released (0 for none).",
            seconds(&r.hold_until_ms),
        ),
    ] {
        header(out, name, "gauge", help);
        sample(out, name, "", v);
    }
}

/// The standard process figures, from /proc (Linux).
fn process(out: &mut String) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let fds = std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count());
    for (name, help, v) in [
        (
            "process_resident_memory_bytes",
            "Resident memory size in bytes.",
            field("VmRSS:") * 1024,
        ),
        (
            "process_open_fds",
            "Number of open file descriptors.",
            fds as u64,
        ),
        (
            "process_threads",
            "Number of OS threads.",
            field("Threads:"),
        ),
    ] {
        header(out, name, "gauge", help);
        sample(out, name, "", v);
    }
}

/// A label value as the exposition format quotes it.
/// The fence of automatic failover (`crate::shared::fence`).
fn fence(out: &mut String, ctx: &Ops) {
    let name = "dialproof_fenced";
    header(
        out,
        name,
        "gauge",
        "1 once this node may no longer act as the primary (dialproof ha).",
    );
    let at = ctx.fence.fenced_at();
    sample(out, name, "", u8::from(at.is_some()));
    if let Some(at) = at {
        let name = "dialproof_fenced_timestamp_seconds";
        header(out, name, "gauge", "When the fence was set (Unix time).");
        sample(out, name, "", at.0 as f64 / 1000.0);
    }
}

fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
