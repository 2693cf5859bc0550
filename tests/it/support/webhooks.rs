//! Webhook tests' side: the kit's receiver ([`Receiver`], scripted with
//! [`Answer`]s, recording every [`Hit`]), the independent signature check
//! (the Stripe scheme computed by Python's `hmac` module in a subprocess, so
//! a bug shared by our signer and a Rust re-implementation cannot hide), and
//! a fast retry schedule.
//!
//! Not for: the receiver itself (`dialproof_kit::webhook`, shared with the
//! tools).

use super::virtual_time::VirtualClock;
use super::{poll, Server};
pub use dialproof_kit::webhook::{Answer, Hit, Receiver};
use serde_json::Value;
use std::io::Write;
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::Duration;

/// A loopback port that was free a moment ago (for a receiver that starts
/// later, at a URL known in advance).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("binding an ephemeral port")
        .local_addr()
        .expect("its address")
        .port()
}

/// The Stripe scheme, verified by Python's standard library: `t=` within
/// 300 s of now and at least one `v1=` equal to HMAC-SHA256(secret,
/// "<t>.<raw body>") in lowercase hex.
const PYTHON_VERIFY: &str = r#"
import hashlib, hmac, sys, time
header, secret = sys.argv[1], sys.argv[2]
body = sys.stdin.buffer.read()
pairs = [p.split("=", 1) for p in header.split(",")]
ts = [v for k, v in pairs if k == "t"]
sigs = [v for k, v in pairs if k == "v1"]
if len(ts) != 1 or not sigs:
    print("malformed"); sys.exit(0)
expected = hmac.new(secret.encode(), ts[0].encode() + b"." + body, hashlib.sha256).hexdigest()
fresh = abs(time.time() - int(ts[0])) <= 300
print("valid" if fresh and any(hmac.compare_digest(expected, s) for s in sigs) else "invalid")
"#;

/// Whether `secret` verifies `header` over `body`, per Python.
pub fn python_verifies(header: &str, body: &[u8], secret: &str) -> bool {
    let mut child = Command::new("python3")
        .arg("-c")
        .arg(PYTHON_VERIFY)
        .arg(header)
        .arg(secret)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 is needed for the independent signature check");
    child.stdin.take().unwrap().write_all(body).unwrap();
    let out = child.wait_with_output().unwrap();
    let verdict = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert!(
        verdict == "valid" || verdict == "invalid",
        "python said {verdict:?}"
    );
    verdict == "valid"
}

/// The `[webhooks]` section for fast tests: attempts at once, +1 s, +2 s,
/// no jitter.
pub const FAST_RETRIES: &str =
    "[webhooks]\nretry_schedule_seconds = [0, 1, 2]\njitter_percent = 0\n\n";

/// Moves the virtual clock past verification `id`'s 30 s TTL (its expiry,
/// and its webhook, come at once instead of in 30 s), then a virtual second
/// per look until its delivery is `dead` (the schedule of
/// [`FAST_RETRIES`]); returns the delivery as `delivery list` shows it.
pub fn expire_until_dead(s: &Server, clock: &VirtualClock, id: &str) -> Value {
    clock.advance(Duration::from_secs(31));
    poll(Duration::from_secs(30), || {
        clock.advance(Duration::from_secs(1));
        let list = s.cli(&["delivery", "list", "--verification", id]);
        let d = list.as_array()?.first().cloned()?;
        (d["state"] == "dead").then_some(d)
    })
    .unwrap_or_else(|| panic!("never dead; logs:\n{}", s.logs()))
}
