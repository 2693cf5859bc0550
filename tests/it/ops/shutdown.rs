//! SIGTERM under load: the service stops accepting, answers every request
//! already sent on a kept-alive connection (the answer says
//! `Connection: close`), flushes the writer and exits 0; every 201 it gave
//! is there after the restart.
//!
//! Not for: SIGKILL (`resilience::crash::restart`).

use crate::support::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const CLIENTS: usize = 16;

/// What one client saw.
#[derive(Default)]
struct Seen {
    created: Vec<String>,
    answered: usize,
    /// Requests sent whose connection closed without an answer.
    cut: usize,
    closed_by_server: bool,
}

/// Creates on one kept-alive connection until the server says
/// `Connection: close` (or refuses to take the request).
fn client(mut conn: Conn<TlsStream>, token: &str, started: &AtomicBool) -> Seen {
    let auth = format!("Bearer {token}");
    let body = serde_json::json!({"phone": RU_PHONE}).to_string();
    let request = build_request(
        "POST",
        "/api/v1/verifications/",
        &[
            ("Authorization", &auth),
            ("Content-Type", "application/json"),
        ],
        body.as_bytes(),
        true,
    );
    let mut seen = Seen::default();
    loop {
        if conn.send(&request).is_err() {
            // Closed before the request left: nothing was taken.
            return seen;
        }
        started.store(true, Ordering::Release);
        let Ok(resp) = conn.read_response() else {
            seen.cut += 1;
            return seen;
        };
        seen.answered += 1;
        if resp.status == 201 {
            seen.created
                .push(resp.json()["verification_id"].as_str().unwrap().to_owned());
        }
        if resp
            .header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"))
        {
            seen.closed_by_server = true;
            return seen;
        }
    }
}

/// README, "Operations" (Stopping): on SIGTERM the service stops accepting, answers
/// every request already sent, flushes the writer and exits 0.
#[test]
fn sigterm_answers_every_request_in_progress_and_loses_nothing() {
    let mut server = Server::start(&pools(20_000, 0));
    let token = server.new_client("Acme");
    let prefix = token.split('_').nth(2).expect("prefix").to_owned();
    server.cli(&["key", "set-limit", &prefix, "100000"]);
    // The running service picks the new limit up within a second or two.
    std::thread::sleep(Duration::from_secs(3));
    let started = Arc::new(AtomicBool::new(false));
    let results = Arc::new(Mutex::new(Vec::new()));
    let conns: Vec<_> = (0..CLIENTS).map(|_| server.connect()).collect();
    std::thread::scope(|scope| {
        for conn in conns {
            let (token, started, results) = (&token, &started, &results);
            scope.spawn(move || {
                let seen = client(conn, token, started);
                results.lock().unwrap().push(seen);
            });
        }
        poll(Duration::from_secs(10), || {
            started.load(Ordering::Acquire).then_some(())
        })
        .expect("clients started");
        std::thread::sleep(Duration::from_millis(500));
        let status = server.stop();
        assert!(status.success(), "{status:?}");
    });
    let results = results.lock().unwrap();
    let cut: usize = results.iter().map(|s| s.cut).sum();
    let answered: usize = results.iter().map(|s| s.answered).sum();
    let created: Vec<&String> = results.iter().flat_map(|s| &s.created).collect();
    let logs = server.logs();
    assert_eq!(cut, 0, "requests cut off without an answer; logs:\n{logs}");
    assert!(
        answered > CLIENTS,
        "too little load to show anything: {answered}"
    );
    assert!(
        results.iter().all(|s| s.closed_by_server),
        "every connection is closed by the server with a last answer"
    );
    assert!(logs.contains("connections drained"), "{logs}");

    server.restart();
    let token2 = token.clone();
    for id in created {
        let r = server.get(&token2, id);
        assert_eq!(r.status, 200, "{id} lost: {}", r.text());
    }
}
