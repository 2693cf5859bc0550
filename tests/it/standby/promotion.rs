//! A promoted start's parts that a failover run cannot show in seconds
//! the heartbeat gauge under replication, the hold's gauges
//! and its effect (only the numbers outside it are issued, also after a
//! reload), and its end once the longest TTL has passed since the lost
//! window. The failover itself is `standby::failover`.
//!
//! Not for: the failover itself (`standby::failover`).

use crate::support::ops::add_ops_listen;
use crate::support::*;
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

fn id(v: &Value) -> &str {
    v["verification_id"].as_str().expect("verification_id")
}

/// One gauge's value from the ops listener's exposition.
fn gauge(server: &Server, start: usize, name: &str) -> f64 {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(server.ops_addr(start)).expect("connect");
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: ops\r\nConnection: close\r\n\r\n"
    )
    .expect("send");
    let mut text = String::new();
    s.read_to_string(&mut text).expect("read");
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {name} in:\n{text}"))
        .parse()
        .expect("a number")
}

/// Moves every stored moment `ms` into the past (a stopped server's file).
fn move_back(db: &Path, ms: i64) {
    let db = rusqlite::Connection::open(db).expect("db");
    db.execute_batch(&format!(
        "UPDATE verifications SET created_at = created_at - {ms}, \
           expires_at = expires_at - {ms}, completed_at = completed_at - {ms}; \
         UPDATE meta SET value = value - {ms} WHERE key = 'heartbeat_at';"
    ))
    .expect("moving moments back");
}

fn now_seconds() -> f64 {
    now_millis() as f64 / 1000.0
}

/// The parts a failover run cannot show in seconds: the heartbeat gauge
/// under replication, the hold's gauges and its effect (only the numbers
/// outside the hold are issued, also after a reload), and the hold's end (a lost window that
/// ended more than the longest TTL ago holds nothing after the first
/// control-loop pass).
#[test]
fn the_heartbeat_and_the_hold_show_and_the_hold_ends() {
    let mut s = Server::prepare(&format!("replication = \"litestream\"\n\n{}", pools(20, 0)));
    add_ops_listen(&s, |c| c);
    s.launch();
    let token = s.new_client("acme");
    let created: Vec<Value> = (0..5)
        .map(|_| s.create_ok(&token, &body(RU_PHONE)))
        .collect();
    let heartbeat = poll(Duration::from_secs(5), || {
        let at = gauge(
            &s,
            1,
            "dialproof_replication_heartbeat_committed_timestamp_seconds",
        );
        (at > now_seconds() - 2.0).then_some(at)
    })
    .expect("a heartbeat committed within the last 2 s");
    assert!(heartbeat <= now_seconds());
    assert_eq!(gauge(&s, 1, "dialproof_promotion_held_numbers"), 0.0);
    for v in &created {
        assert_eq!(s.cancel(&token, id(v)).status, 200);
    }
    assert!(s.stop().success());

    // Promoted, the window ending now: 5 creates in the history, so
    // 2 x 5 + 8 = 18 of the 20 numbers are held for 600 s.
    s.set_serve_args(&["--promoted"]);
    s.launch();
    assert_eq!(gauge(&s, 2, "dialproof_promotion_held_numbers"), 18.0);
    let until = gauge(&s, 2, "dialproof_promotion_hold_until_timestamp_seconds");
    assert!((until - (now_seconds() + 600.0)).abs() < 10.0, "{until}");
    // A reload rebuilds the lease table: the holds are carried over.
    let hup = Command::new("kill")
        .args(["-HUP", &s.pid().to_string()])
        .status()
        .expect("kill -HUP");
    assert!(hup.success());
    s.wait_for_log(Duration::from_secs(10), |l| {
        l.contains("lease table rebuilt") && l.contains("carried=18")
    })
    .expect("the table rebuilt with the holds");
    let issued: Vec<Value> = (0..2)
        .map(|_| s.create_ok(&token, &body(RU_PHONE)))
        .collect();
    assert_eq!(s.create(&token, &body(RU_PHONE)).status, 503);
    for v in &issued {
        assert_eq!(s.cancel(&token, id(v)).status, 200);
    }
    assert!(s.stop().success());

    // Everything the database holds moved 700 s into the past, and the
    // operator says the old primary stopped 650 s ago: 7 creates in the
    // history hold all 20 numbers (2 x 7 + 8, capped), but the hold ends
    // 600 s after the window, so it is released at once and all 20 are
    // issued.
    move_back(&s.data_dir.join("dialproof.db"), 700_000);
    let lost_until = (now_millis() / 1000 - 650).to_string();
    s.set_serve_args(&["--promoted", "--lost-until", &lost_until]);
    s.launch();
    s.wait_for_log(Duration::from_secs(5), |l| {
        l.contains("promotion: held numbers released") && l.contains("released=20")
    })
    .expect("the hold released");
    assert_eq!(gauge(&s, 3, "dialproof_promotion_held_numbers"), 0.0);
    for _ in 0..20 {
        s.create_ok(&token, &body(RU_PHONE));
    }
}
