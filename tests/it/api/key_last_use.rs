//! A key's last use, as `key list` (and the dashboard's key table) shows
//! it: every request with the key counts, and the time is written once a
//! minute with every key's, and once more at a graceful stop, rather than
//! on each use (each commit empties the SQLite readers' page caches that
//! serve GETs of verifications).
//!
//! On virtual time, so the minute is exact and nobody waits for it.
//!
//! Not for: the rate limit the same requests count against (`rate_limit`).

use crate::support::dashboard::{create_user, Dash};
use crate::support::virtual_time::VirtualClock;
use crate::support::*;
use dialproof_engine::time::UnixMillis;
use std::time::{Duration, Instant};

/// The design choice under test: uses are written once per this interval.
const FLUSH_EVERY: Duration = Duration::from_secs(60);
/// The control loop looks every second of real time; two looks and a
/// margin.
const TICKS: Duration = Duration::from_millis(2500);

fn last_used(server: &Server) -> Option<String> {
    let keys = server.cli(&["key", "list"]);
    let keys = keys.as_array().expect("key list is an array");
    assert_eq!(keys.len(), 1, "{keys:?}");
    keys[0]["last_used_at"].as_str().map(str::to_owned)
}

fn use_key(server: &Server, token: &str) {
    let auth = format!("Bearer {token}");
    let path = format!("{COLLECTION}ver_00000000000000000000000000/");
    let r = server.request("GET", &path, &[("Authorization", &auth)], b"");
    assert_eq!(r.status, 404, "{}", r.text());
}

/// Whether the dashboard's key table shows the key as never used (the
/// last-use cell before the limit's).
fn dashboard_shows_never_used(dash: &Dash) -> bool {
    let page = dash.get("/dashboard/keys/");
    assert_eq!(page.status, 200, "{}", page.text());
    page.text().contains("<td>—</td><td>120/мин")
}

/// Waits (real time) until `key list` shows `want`.
fn wait_for_last_used(server: &Server, want: &str, why: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = last_used(server);
        if got.as_deref() == Some(want) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{why}: last_used_at is {got:?}, expected {want}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn at(clock: &VirtualClock) -> String {
    UnixMillis(clock.now_millis()).to_rfc3339()
}

#[test]
fn last_use_is_written_once_a_minute_and_at_a_graceful_stop() {
    let (mut s, clock) = Server::start_virtual(&pools(2, 0));
    let company = s.create_company("acme");
    let token = s.create_key(company);
    create_user(&s, company, "ann@acme.test");
    let dash = Dash::login(&s, "ann@acme.test");
    assert_eq!(last_used(&s), None, "a new key has no last use");
    assert!(dashboard_shows_never_used(&dash), "a new key is never used");

    use_key(&s, &token);
    let first = at(&clock);
    clock.advance(FLUSH_EVERY + Duration::from_secs(1));
    wait_for_last_used(&s, &first, "the use is written within the minute");
    assert!(
        !dashboard_shows_never_used(&dash),
        "the dashboard shows the written last use"
    );

    // The next minute's use: noted, and not yet written.
    use_key(&s, &token);
    let second = at(&clock);
    clock.advance(FLUSH_EVERY / 2);
    std::thread::sleep(TICKS);
    assert_eq!(
        last_used(&s).as_deref(),
        Some(first.as_str()),
        "a key's last use is written with every key's once a minute \
         (src/shared/key_uses.rs), not on each use: a commit per use would \
         empty the page caches that serve GETs"
    );
    clock.advance(FLUSH_EVERY / 2 + Duration::from_secs(1));
    wait_for_last_used(&s, &second, "the minute's uses are written when it ends");

    // A use in the last seconds before a graceful stop is not lost.
    clock.advance(Duration::from_secs(5));
    use_key(&s, &token);
    let last = at(&clock);
    s.stop_in_process();
    assert_eq!(
        last_used(&s).as_deref(),
        Some(last.as_str()),
        "a graceful stop writes the uses noted since the last minute's write"
    );
}
