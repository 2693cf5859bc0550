//! The operators' listener: `/metrics` in the Prometheus text format (read
//! back by an independent parser, Python's `prometheus_client`), `/healthz`
//! and `/readyz`, on its own plain-HTTP address.
//!
//! Not for: the figures the metrics would show under load (`benches/`).

use crate::support::ops::add_ops_listen;
use crate::support::tools::pyenv_bin;
use crate::support::*;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;

/// A server with `ops_listen` on an ephemeral loopback port, and its address.
fn start(extra: &str) -> (Server, SocketAddr) {
    let mut server = Server::prepare(extra);
    add_ops_listen(&server, |c| c);
    server.launch();
    let ops = server.ops_addr(1);
    (server, ops)
}

/// A plain GET; returns status and body.
fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let r = plain_get(addr, path);
    (r.status, r.text())
}

fn python() -> PathBuf {
    pyenv_bin("python")
}

/// Parses the exposition with prometheus_client and prints
/// `name{labels} value` per sample, sorted, so the test reads what an
/// independent scraper reads.
fn parse_independently(text: &str) -> Vec<String> {
    let script =
        "import sys\nfrom prometheus_client.parser import text_string_to_metric_families\n\
        for fam in text_string_to_metric_families(sys.stdin.read()):\n\
        \x20   for s in fam.samples:\n\
        \x20       labels = ','.join(f'{k}={v}' for k, v in sorted(s.labels.items()))\n\
        \x20       print(f'{fam.type} {s.name}{{{labels}}} {s.value}')\n";
    let mut child = Command::new(python())
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().expect("python output");
    assert!(
        out.status.success(),
        "parser refused the exposition: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn value(samples: &[String], prefix: &str) -> f64 {
    let line = samples
        .iter()
        .find(|l| l.contains(prefix))
        .unwrap_or_else(|| panic!("no sample {prefix}:\n{}", samples.join("\n")));
    line.rsplit(' ').next().unwrap().parse().expect("value")
}

/// README, "Operations" (Metrics, health and readiness; the series in
/// tools/deploy/README.md): `/metrics` is the Prometheus
/// text format, read back by an independent parser, and counts what happened.
#[test]
fn metrics_parse_and_count_what_happened() {
    let (server, ops) = start(&pools(3, 0));
    let token = server.new_client("Acme");
    let v = server.create_ok(&token, &body(RU_PHONE));
    let id = v["verification_id"].as_str().unwrap();
    assert_eq!(server.get(&token, id).status, 200);
    let held = parse_independently(&get(ops, "/metrics").1);
    assert_eq!(
        value(&held, "dialproof_verification_reads_total{from=memory}"),
        1.0,
        "design choice: a pending verification's GET is answered from the held rows"
    );
    assert_eq!(value(&held, "dialproof_verifications_held"), 1.0);
    assert_eq!(server.cancel(&token, id).status, 200);
    // Ended, it is no longer held: SQLite answers.
    assert_eq!(server.get(&token, id).status, 200);
    let bad = server.create(&token, &serde_json::json!({"phone": "x"}));
    assert_eq!(bad.status, 400);

    let (status, text) = get(ops, "/metrics");
    assert_eq!(status, 200);
    let samples = parse_independently(&text);
    assert_eq!(
        value(&samples, "dialproof_creates_total{outcome=created}"),
        1.0
    );
    assert_eq!(
        value(&samples, "dialproof_creates_total{outcome=invalid}"),
        1.0
    );
    assert_eq!(
        value(
            &samples,
            "dialproof_request_duration_seconds_count{route=create}"
        ),
        2.0
    );
    assert_eq!(
        value(
            &samples,
            "dialproof_request_duration_seconds_count{route=read}"
        ),
        2.0
    );
    assert_eq!(
        value(&samples, "dialproof_verification_reads_total{from=sqlite}"),
        1.0
    );
    assert_eq!(value(&samples, "dialproof_verifications_held"), 0.0);
    assert!(samples
        .iter()
        .any(|l| l.starts_with("histogram dialproof_request_duration_seconds_bucket")));
    // The cancel's release happens in the commit consumer: wait for it.
    let free = poll(std::time::Duration::from_secs(5), || {
        let samples = parse_independently(&get(ops, "/metrics").1);
        let free = value(
            &samples,
            "dialproof_numbers{pool=domestic,state=free,sub_pool=shared}",
        );
        let ended = value(
            &samples,
            "dialproof_verifications_ended_total{status=expired}",
        );
        (free == 3.0 && ended == 1.0).then_some(free)
    });
    assert!(free.is_some(), "{}", get(ops, "/metrics").1);
    assert!(value(&samples, "process_resident_memory_bytes") > 0.0);
    assert!(
        value(
            &samples,
            "dialproof_storage_batches_total{outcome=committed}"
        ) >= 1.0
    );
}

/// README, "Operations" (Metrics, health and readiness; the checks in full in
/// tools/deploy/README.md): `/healthz` and `/readyz`, and `/readyz` saying
/// why when storage fails.
#[test]
fn health_and_readiness() {
    let (mut server, ops) = start(&pools(1, 0));
    assert_eq!(get(ops, "/healthz"), (200, "ok\n".to_owned()));
    assert_eq!(get(ops, "/readyz"), (200, "ready\n".to_owned()));
    assert_eq!(get(ops, "/nope").0, 404);
    // Storage that fails every write: not ready, and the body says why.
    server.stop();
    server.set_env("DIALPROOF_FAILPOINTS", "writer.begin=error");
    server.restart();
    let ops = server.ops_addr(2);
    let token = server.new_client("Acme");
    assert_eq!(server.create(&token, &body(RU_PHONE)).status, 500);
    assert_eq!(get(ops, "/healthz").0, 200);
    assert_eq!(
        get(ops, "/readyz"),
        (503, "not ready: storage is failing writes\n".to_owned())
    );
}

#[test]
fn webhook_metrics_follow_a_delivery_and_a_failing_receiver() {
    use crate::support::sip::*;
    use crate::support::webhooks::*;
    let good = Receiver::recording(Answer::Status(200));
    let bad = Receiver::recording(Answer::Status(500));
    let (server, ops) = start(&format!(
        "{FAST_RETRIES}{}",
        sip_config(&trusted_line(5, 603))
    ));
    let v = server.cli(&["company", "create", "--name", "acme"]);
    let company = v["id"].as_i64().unwrap().to_string();
    for rx in [&good, &bad] {
        server.cli(&["company", "dev-url", "add", &company, &rx.base_url()]);
    }
    let token = server.create_key(v["id"].as_i64().unwrap());
    let dir = workdir();
    let sf = scenario(
        dir.path(),
        "call.xml",
        &[
            ("FROM_HEADER", &from_user("89161234567")),
            ("HEADERS", "X-Test: metrics"),
            ("CODE", "603"),
        ],
    );
    for rx in [&good, &bad] {
        let created = server.create_ok(
            &token,
            &serde_json::json!({"phone": RU_PHONE, "webhook_url": rx.url("/hook")}),
        );
        let dial = created["dial_number"].as_str().unwrap();
        let out = run_uac(dir.path(), &sf, sip_addr(&server), dial, "127.0.0.1", 1);
        assert_sipp_ok(&out, dir.path(), &server);
    }
    good.wait_for("/hook", 1, std::time::Duration::from_secs(10));
    // The failing receiver gets the schedule's three attempts (0, 1, 2 s),
    // then the delivery is given up; the pending count is refreshed every
    // 5 s.
    bad.wait_for("/hook", 3, std::time::Duration::from_secs(15));
    let settled = poll(std::time::Duration::from_secs(15), || {
        let samples = parse_independently(&get(ops, "/metrics").1);
        // The gauges follow the driver's turns: wait for the one after the
        // last attempt was recorded.
        let done = value(&samples, "dialproof_webhook_deliveries_dead_total") == 1.0
            && value(&samples, "dialproof_webhook_undelivered{}") == 0.0
            && value(&samples, "dialproof_webhook_in_flight{}") == 0.0
            && value(&samples, "dialproof_webhook_queued{}") == 0.0;
        done.then_some(samples)
    });
    let samples = settled.unwrap_or_else(|| panic!("{}", get(ops, "/metrics").1));
    let attempts = |outcome: &str| {
        value(
            &samples,
            &format!("dialproof_webhook_attempts_total{{outcome={outcome}}}"),
        )
    };
    assert_eq!(attempts("delivered"), 1.0);
    assert_eq!(attempts("failed_answer"), 3.0);
    assert_eq!(attempts("no_answer"), 0.0);
    assert_eq!(
        value(
            &samples,
            "dialproof_webhook_attempt_duration_seconds_count{}"
        ),
        4.0
    );
    assert_eq!(
        value(
            &samples,
            "dialproof_webhook_delivery_latency_seconds_count{}"
        ),
        1.0
    );
    assert_eq!(value(&samples, "dialproof_webhook_queued{}"), 0.0);
    assert_eq!(value(&samples, "dialproof_webhook_in_flight{}"), 0.0);
    assert_eq!(
        value(
            &samples,
            "dialproof_webhook_oldest_undelivered_age_seconds{}"
        ),
        0.0
    );
    // Per line: both calls released their numbers; one more create leases
    // one of the line's five.
    server.create_ok(&token, &body(RU_PHONE));
    let samples = parse_independently(&get(ops, "/metrics").1);
    let line = |state: &str| {
        value(
            &samples,
            &format!("dialproof_line_numbers{{line=gw,state={state}}}"),
        )
    };
    assert_eq!(
        (line("free"), line("leased"), line("withheld")),
        (4.0, 1.0, 0.0)
    );
    assert_eq!(value(&samples, "dialproof_sip_line_up{line=gw}"), 1.0);
    // The line came up at start: its last change is a moment of this run;
    // both calls' transactions were answered (held until their ACK + T4).
    let changed = value(
        &samples,
        "dialproof_sip_line_last_change_timestamp_seconds{line=gw}",
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!(
        changed > now - 120.0 && changed <= now + 1.0,
        "{changed} vs {now}"
    );
    assert!(value(&samples, "dialproof_sip_invite_transactions{}") <= 2.0);
}

/// README, "Test mode" and the alert rules: a test-mode webhook that is
/// given up counts in `dialproof_test_mode_webhook_deliveries_dead_total`,
/// not in the live counter the dead-delivery alert reads, and leaves the
/// live backlog gauges at zero (design choice: operators are paged for
/// live deliveries only; a client's CI receiver that went away is not
/// theirs to fix).
#[test]
fn a_dead_test_mode_webhook_is_counted_apart_from_live_ones() {
    use crate::support::webhooks::*;
    let bad = Receiver::recording(Answer::Status(500));
    let (server, ops) = start(FAST_RETRIES);
    let company = server.create_company("acme");
    server.cli(&[
        "company",
        "dev-url",
        "add",
        &company.to_string(),
        &bad.base_url(),
    ]);
    let token = crate::testmode::test_key(&server, company);
    let created = server.create_ok(
        &token,
        &serde_json::json!({"phone": RU_PHONE, "webhook_url": bad.url("/hook")}),
    );
    let id = created["verification_id"].as_str().expect("an id");
    let call = serde_json::json!({"caller_id": "+79161234567"});
    let r = crate::testmode::simulate(&server, &token, id, &call);
    assert_eq!(r.status, 200, "{}", r.text());
    bad.wait_for("/hook", 3, std::time::Duration::from_secs(15));
    let settled = poll(std::time::Duration::from_secs(15), || {
        let samples = parse_independently(&get(ops, "/metrics").1);
        let dead = value(
            &samples,
            "dialproof_test_mode_webhook_deliveries_dead_total",
        );
        (dead == 1.0 && value(&samples, "dialproof_webhook_in_flight{}") == 0.0).then_some(samples)
    });
    let samples = settled.unwrap_or_else(|| panic!("{}", get(ops, "/metrics").1));
    for live in [
        "dialproof_webhook_deliveries_dead_total",
        "dialproof_webhook_undelivered{}",
        "dialproof_webhook_oldest_undelivered_age_seconds{}",
    ] {
        assert_eq!(
            value(&samples, live),
            0.0,
            "{live} counts a test-mode delivery"
        );
    }
    assert_eq!(
        value(&samples, "dialproof_test_mode_webhook_undelivered{}"),
        0.0
    );
}

/// The metric names (`dialproof_*`, `process_*`) in a PromQL expression.
fn metric_names(expr: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = expr;
    while let Some(at) = ["dialproof_", "process_"]
        .iter()
        .filter_map(|p| rest.find(p))
        .min()
    {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        names.push(tail[..end].to_owned());
        rest = &tail[end..];
    }
    names
}

/// README, "Operations" (Metrics, health and readiness): the bundled Grafana dashboard
/// charts only series the service exposes.
#[test]
fn the_grafana_dashboard_charts_only_metrics_the_service_exposes() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/grafana/dialproof.json");
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("dashboard")).expect("JSON");
    // With a SIP line, so the per-line series exist too.
    let (_server, ops) = start(&crate::support::sip::sip_config(
        &crate::support::sip::trusted_line(2, 603),
    ));
    let samples = parse_independently(&get(ops, "/metrics").1);
    let exposed = |name: &str| {
        samples.iter().any(|l| {
            l.split_whitespace()
                .nth(1)
                .is_some_and(|s| s.starts_with(&format!("{name}{{")))
        })
    };
    let mut charted = 0;
    for panel in dashboard["panels"].as_array().expect("panels") {
        if panel["type"] == "row" {
            continue;
        }
        let targets = panel["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{} has no query", panel["title"]);
        for t in targets {
            let expr = t["expr"].as_str().expect("expr");
            let names = metric_names(expr);
            assert!(!names.is_empty(), "{expr}");
            for name in names {
                assert!(
                    exposed(&name),
                    "{} charts {name}, not exposed",
                    panel["title"]
                );
                charted += 1;
            }
        }
    }
    assert!(charted >= 20, "{charted}");
}
