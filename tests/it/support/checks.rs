//! What the tests check answers against: the shape of a Verification (the
//! spec's fields and types, its id, UTC timestamps and their arithmetic),
//! timestamps, content types, and a bounded poll.
//!
//! Not for: the values a test expects (see [`super::fixtures`]).

use super::Resp;
use serde_json::Value;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// `ver_` + 26 ASCII alphanumerics.
pub fn is_verification_id(s: &str) -> bool {
    s.strip_prefix("ver_")
        .is_some_and(|r| r.len() == 26 && r.bytes().all(|b| b.is_ascii_alphanumeric()))
}

/// Milliseconds since the epoch of an ISO 8601 UTC timestamp
/// (`YYYY-MM-DDTHH:MM:SS[.frac](Z|+00:00)`); panics on anything else,
/// including a non-UTC offset.
pub fn parse_utc(s: &str) -> i64 {
    let bad = || -> ! { panic!("not an ISO 8601 UTC timestamp: {s:?}") };
    let rest = if let Some(r) = s.strip_suffix('Z') {
        r
    } else if let Some(r) = s.strip_suffix("+00:00") {
        r
    } else {
        bad()
    };
    let (date, time) = rest.split_once('T').unwrap_or_else(|| bad());
    let d: Vec<&str> = date.split('-').collect();
    if d.len() != 3 || d[0].len() != 4 || d[1].len() != 2 || d[2].len() != 2 {
        bad()
    }
    let num = |x: &str| -> i64 {
        if x.is_empty() || !x.bytes().all(|b| b.is_ascii_digit()) {
            bad()
        }
        x.parse().unwrap()
    };
    let (y, m, day) = (num(d[0]), num(d[1]), num(d[2]));
    let (hms, frac) = match time.split_once('.') {
        Some((a, b)) => (a, Some(b)),
        None => (time, None),
    };
    let t: Vec<&str> = hms.split(':').collect();
    if t.len() != 3 || t.iter().any(|x| x.len() != 2) {
        bad()
    }
    let (hh, mm, ss) = (num(t[0]), num(t[1]), num(t[2]));
    if !(1..=12).contains(&m) || !(1..=31).contains(&day) || hh > 23 || mm > 59 || ss > 60 {
        bad()
    }
    let millis = match frac {
        Some(f) => {
            num(f);
            let f3: String = f.chars().chain("000".chars()).take(3).collect();
            f3.parse::<i64>().unwrap()
        }
        None => 0,
    };
    // Howard Hinnant's days_from_civil.
    let y2 = if m <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    ((days * 86_400) + hh * 3600 + mm * 60 + ss) * 1000 + millis
}

pub fn now_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// The Verification fields, in the spec's order, then the additive ones.
pub const VERIFICATION_FIELDS: [&str; 14] = [
    "verification_id",
    "phone",
    "dial_number",
    "client_ref",
    "info",
    "status",
    "ttl_seconds",
    "created_at",
    "expires_at",
    "completed_at",
    "caller_id_received",
    "caller_id_source",
    "caller_id_trust",
    // Live or test mode.
    "livemode",
];

/// Checks a Verification object's shape: exactly the spec's fields with
/// their types, a well-formed id, UTC timestamps and
/// `expires_at - created_at == ttl_seconds`.
pub fn assert_verification(v: &Value) {
    let obj = v
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"));
    let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
    keys.sort_unstable();
    let mut want = VERIFICATION_FIELDS.to_vec();
    want.sort_unstable();
    assert_eq!(keys, want, "fields of {v}");
    let id = v["verification_id"]
        .as_str()
        .expect("verification_id string");
    assert!(is_verification_id(id), "bad id {id:?}");
    for f in [
        "phone",
        "dial_number",
        "client_ref",
        "info",
        "caller_id_received",
    ] {
        assert!(v[f].is_string(), "{f} is not a string in {v}");
    }
    let dial = v["dial_number"].as_str().unwrap();
    assert!(
        dial.starts_with('+') && dial[1..].bytes().all(|b| b.is_ascii_digit()),
        "dial_number {dial:?} is not E.164"
    );
    let status = v["status"].as_str().expect("status string");
    assert!(
        ["pending", "completed", "expired", "failed"].contains(&status),
        "status {status:?}"
    );
    assert!(
        v["livemode"].is_boolean(),
        "livemode is not a boolean in {v}"
    );
    let ttl = v["ttl_seconds"].as_i64().expect("ttl_seconds integer");
    assert!((30..=600).contains(&ttl), "ttl_seconds {ttl}");
    let created = parse_utc(v["created_at"].as_str().expect("created_at string"));
    let expires = parse_utc(v["expires_at"].as_str().expect("expires_at string"));
    assert_eq!(
        expires - created,
        ttl * 1000,
        "expires_at - created_at in {v}"
    );
    if status == "completed" {
        parse_utc(v["completed_at"].as_str().expect("completed_at string"));
        let source = v["caller_id_source"].as_str().unwrap_or("");
        let trust = v["caller_id_trust"].as_str().unwrap_or("");
        assert!(
            ["p_asserted_identity", "remote_party_id", "from"].contains(&source),
            "caller_id_source in {v}"
        );
        assert!(
            ["verified", "failed", "asserted", "unverified"].contains(&trust),
            "caller_id_trust in {v}"
        );
    } else {
        assert!(v["completed_at"].is_null(), "completed_at in {v}");
        assert_eq!(v["caller_id_received"], "", "caller_id_received in {v}");
        assert!(v["caller_id_source"].is_null(), "caller_id_source in {v}");
        assert!(v["caller_id_trust"].is_null(), "caller_id_trust in {v}");
    }
}

/// Polls `f` every 200 ms until it returns `Some` or `timeout` passes.
pub fn poll<T>(timeout: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Asserts `Content-Type: application/json` on a response.
pub fn assert_json_type(r: &Resp) {
    assert_eq!(
        r.header("content-type"),
        Some("application/json"),
        "Content-Type of {} {}",
        r.status,
        r.text()
    );
}
