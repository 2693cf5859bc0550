//! The end-of-run report: one serialisable structure (written with
//! `--json`) and its text rendering (printed). Latencies are milliseconds
//! with microsecond resolution.
//!
//! Not for: measuring (see [`super::stats`]).

use super::ops::Op;
use super::stats::Stats;
use hdrhistogram::Histogram;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Percentiles of one histogram, in milliseconds.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Latency {
    pub count: u64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p99_9: f64,
    pub max: f64,
    pub mean: f64,
}

impl Latency {
    /// From a histogram of microseconds.
    pub fn of(h: &Histogram<u64>) -> Latency {
        let ms = |us: u64| us as f64 / 1000.0;
        if h.is_empty() {
            return Latency {
                count: 0,
                p50: 0.0,
                p90: 0.0,
                p99: 0.0,
                p99_9: 0.0,
                max: 0.0,
                mean: 0.0,
            };
        }
        Latency {
            count: h.len(),
            p50: ms(h.value_at_quantile(0.50)),
            p90: ms(h.value_at_quantile(0.90)),
            p99: ms(h.value_at_quantile(0.99)),
            p99_9: ms(h.value_at_quantile(0.999)),
            max: ms(h.max()),
            mean: h.mean() / 1000.0,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct OpReport {
    pub sent: u64,
    pub ok: u64,
    pub errors: u64,
    pub ok_per_second: f64,
    /// Every status answered, as `"201": n`.
    pub statuses: BTreeMap<String, u64>,
    /// Of successful answers.
    pub latency_ms: Latency,
}

#[derive(Debug, Clone, Serialize)]
pub struct CallsReport {
    pub placed: u64,
    /// Final response codes, as `"603": n`.
    pub finals: BTreeMap<String, u64>,
    pub timeouts: u64,
    pub not_queued: u64,
    pub invite_to_final_ms: Latency,
}

#[derive(Debug, Clone, Serialize)]
pub struct WebhooksReport {
    pub received: u64,
    pub by_type: BTreeMap<String, u64>,
    /// Signature verdicts: `valid`, `mismatch`, `stale`, `unchecked`...
    pub signatures: BTreeMap<String, u64>,
    /// From the call's first INVITE to its `verification.completed`.
    pub call_to_webhook_ms: Latency,
    /// Calls answered with a final response whose webhook did not come
    /// within the drain time.
    pub calls_without_webhook: u64,
}

/// The run as configured.
#[derive(Debug, Clone, Serialize)]
pub struct RunInfo {
    pub target: String,
    /// `open` (fixed rate) or `closed` (fixed concurrency).
    pub mode: &'static str,
    pub rate_requested: Option<f64>,
    pub connections: usize,
    pub threads: usize,
    pub keys: usize,
    pub mix: BTreeMap<String, u32>,
    /// What latencies are measured from.
    pub latency_from: &'static str,
}

/// The server's CPU time during the timed run (`--server-pid`).
#[derive(Debug, Clone, Serialize)]
pub struct ServerCpu {
    pub seconds: f64,
    /// Microseconds of server CPU per HTTP answer.
    pub per_answer_us: f64,
}

/// What `--prefill` created before the run.
#[derive(Debug, Clone, Serialize)]
pub struct Prefill {
    pub created: u64,
    pub failed: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub run: RunInfo,
    /// From the start until the last answer (requests in flight at the end
    /// of sending included).
    pub elapsed_seconds: f64,
    pub sent: u64,
    pub answered: u64,
    pub ok: u64,
    pub errors: u64,
    /// HTTP answers of any status per second.
    pub throughput_per_second: f64,
    pub ok_per_second: f64,
    pub substituted_creates: u64,
    pub unsent_at_end: u64,
    /// `--prefill`: the verifications created before the run (the reads'
    /// working set) and the creates that failed.
    pub prefill: Option<Prefill>,
    /// `--server-pid`: the server's CPU time during the timed run.
    pub server_cpu: Option<ServerCpu>,
    pub operations: BTreeMap<String, OpReport>,
    /// Every HTTP answer, whatever its status (wrk's view).
    pub all_responses_ms: Latency,
    /// Open loop: how late requests left after they were due (already
    /// part of every latency above; a high value means no connection was
    /// free, because answers were slow, or the generator fell behind).
    pub send_lag_ms: Option<Latency>,
    pub errors_by_kind: BTreeMap<String, u64>,
    pub calls: Option<CallsReport>,
    pub webhooks: Option<WebhooksReport>,
}

impl Report {
    pub fn new(run: RunInfo, stats: &Stats, elapsed_seconds: f64) -> Report {
        let per_second = |n: u64| {
            if elapsed_seconds > 0.0 {
                n as f64 / elapsed_seconds
            } else {
                0.0
            }
        };
        let operations = Op::COUNTED
            .iter()
            .filter(|op| stats.ops[op.index()].sent > 0)
            .map(|op| {
                let s = &stats.ops[op.index()];
                let r = OpReport {
                    sent: s.sent,
                    ok: s.ok,
                    errors: s.errors(),
                    ok_per_second: per_second(s.ok),
                    statuses: s
                        .statuses
                        .iter()
                        .map(|(k, v)| (k.to_string(), *v))
                        .collect(),
                    latency_ms: Latency::of(&s.latency_us),
                };
                (op.as_str().to_owned(), r)
            })
            .collect();
        Report {
            run,
            elapsed_seconds,
            sent: stats.sent(),
            answered: stats.answered_total(),
            ok: stats.ok(),
            errors: stats.errors(),
            throughput_per_second: per_second(stats.answered_total()),
            ok_per_second: per_second(stats.ok()),
            substituted_creates: stats.substituted,
            unsent_at_end: stats.unsent_at_end,
            prefill: (stats.prefill_created + stats.prefill_failed > 0).then_some(Prefill {
                created: stats.prefill_created,
                failed: stats.prefill_failed,
            }),
            server_cpu: None,
            operations,
            all_responses_ms: Latency::of(&stats.all_responses_us),
            send_lag_ms: (!stats.send_lag_us.is_empty()).then(|| Latency::of(&stats.send_lag_us)),
            errors_by_kind: stats.errors_by_kind(),
            calls: None,
            webhooks: None,
        }
    }

    /// The report as text for a terminal.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let r = &self.run;
        let how = match r.rate_requested {
            Some(rate) => format!("open loop at {rate}/s over {} connections", r.connections),
            None => format!("closed loop, {} in flight", r.connections),
        };
        let mix: Vec<String> = r.mix.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let _ = writeln!(s, "target {}: {how}, {} threads", r.target, r.threads);
        let _ = writeln!(s, "mix {} over {} keys", mix.join(","), r.keys);
        let _ = writeln!(
            s,
            "{:.2} s: {} sent, {} answered, {} ok, {} errors; {:.0} answers/s, {:.0} ok/s",
            self.elapsed_seconds,
            self.sent,
            self.answered,
            self.ok,
            self.errors,
            self.throughput_per_second,
            self.ok_per_second
        );
        if let Some(c) = &self.server_cpu {
            let _ = writeln!(
                s,
                "server CPU: {:.2} s in the run, {:.1} us per answer",
                c.seconds, c.per_answer_us
            );
        }
        if let Some(p) = &self.prefill {
            let _ = writeln!(
                s,
                "prefill: {} verifications created before the run ({} failed)",
                p.created, p.failed
            );
        }
        if self.substituted_creates > 0 || self.unsent_at_end > 0 {
            let _ = writeln!(
                s,
                "{} reads/cancels sent as creates (no id yet); {} due but never sent",
                self.substituted_creates, self.unsent_at_end
            );
        }
        let _ = writeln!(
            s,
            "latency in ms from the {}:\n  {:<12} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
            r.latency_from, "", "count", "p50", "p90", "p99", "p99.9", "max"
        );
        for (name, op) in &self.operations {
            latency_row(&mut s, name, &op.latency_ms);
        }
        latency_row(&mut s, "all answers", &self.all_responses_ms);
        if let Some(lag) = &self.send_lag_ms {
            latency_row(&mut s, "(send lag)", lag);
        }
        let errors: Vec<String> = self
            .errors_by_kind
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        let shown = if errors.is_empty() {
            "none".to_owned()
        } else {
            errors.join(", ")
        };
        let _ = writeln!(s, "errors by kind: {shown}");
        self.render_calls(&mut s);
        s
    }

    fn render_calls(&self, s: &mut String) {
        if let Some(c) = &self.calls {
            let finals: Vec<String> = c.finals.iter().map(|(k, v)| format!("{k} x{v}")).collect();
            let _ = writeln!(
                s,
                "calls: {} placed, finals {}, {} timeouts, {} not queued",
                c.placed,
                finals.join(" "),
                c.timeouts,
                c.not_queued
            );
            latency_row(s, "INVITE->final", &c.invite_to_final_ms);
        }
        if let Some(w) = self.webhooks.as_ref().filter(|w| w.received > 0) {
            let kinds: Vec<String> = w.by_type.iter().map(|(k, v)| format!("{k} {v}")).collect();
            let sigs: Vec<String> = w
                .signatures
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect();
            let _ = writeln!(
                s,
                "webhooks: {} received ({}); signatures: {}",
                w.received,
                kinds.join(", "),
                sigs.join(", "),
            );
            if self.calls.is_some() {
                let _ = writeln!(s, "  {} calls without a webhook", w.calls_without_webhook);
                latency_row(s, "call->hook", &w.call_to_webhook_ms);
            }
        }
    }
}

fn latency_row(s: &mut String, name: &str, l: &Latency) {
    let _ = writeln!(
        s,
        "  {:<12} {:>9} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3}",
        name, l.count, l.p50, l.p90, l.p99, l.p99_9, l.max
    );
}
