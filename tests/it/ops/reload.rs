//! Reloading the configuration file on SIGHUP (`kill -HUP`): numbers and
//! lines come from the file, leases are never lost, a leased number that
//! left the file keeps its verification, a new line's numbers become
//! issuable, and a file that fails to load (not TOML, or TOML that is not a
//! valid configuration) keeps the old configuration while a later good one
//! still applies.
//!
//! The removal test runs in process on a clock that flows with real time
//! and jumps to the TTL's end (`crate::support::virtual_time`);
//! `Server::reload` is SIGHUP there.
//!
//! Not for: the promoted standby's hold across a reload
//! (`standby::promotion`).

use crate::support::*;
use serde_json::json;
use std::time::Duration;

const EXTRA_NUMBER: &str = "+74960000000";

fn number_line(name: &str, numbers: &[&str]) -> String {
    let entries: Vec<String> = numbers
        .iter()
        .map(|n| format!("  {{ number = \"{n}\", pool = \"domestic\" }},"))
        .collect();
    format!(
        "[[lines]]\nname = \"{name}\"\nmode = \"always_up\"\nnumbers = [\n{}\n]\n",
        entries.join("\n")
    )
}

fn rebuilds(server: &Server) -> usize {
    server
        .logs()
        .lines()
        .filter(|l| l.contains("lease table rebuilt") && l.contains("reload_config=true"))
        .count()
}

fn wait_rebuilds(server: &Server, n: usize) {
    let ok = poll(Duration::from_secs(10), || {
        (rebuilds(server) >= n).then_some(())
    });
    assert!(
        ok.is_some(),
        "reload {n} was not applied:\n{}",
        server.logs()
    );
}

fn dial(v: &serde_json::Value) -> String {
    v["dial_number"].as_str().unwrap().to_owned()
}

fn id(v: &serde_json::Value) -> String {
    v["verification_id"].as_str().unwrap().to_owned()
}

#[test]
fn reload_adds_numbers_and_keeps_every_lease() {
    let server = Server::with_pools(2, 0);
    let token = server.new_client("reload");
    let first = server.create_ok(&token, &body(RU_PHONE));
    let second = server.create_ok(&token, &body(RU_PHONE));
    assert_eq!(server.create(&token, &body(RU_PHONE)).status, 503);

    // Grow the pool from 2 to 4 numbers and reload.
    let config = std::fs::read_to_string(&server.config_path).unwrap();
    let grown = config.replace(&pools(2, 0), &pools(4, 0));
    assert_ne!(config, grown, "the pool section was found and changed");
    std::fs::write(&server.config_path, grown).unwrap();
    server.reload();
    server
        .wait_for_log(Duration::from_secs(10), |l| {
            l.contains("lease table rebuilt") && l.contains("carried=2")
        })
        .unwrap_or_else(|| panic!("no rebuild logged:\n{}", server.logs()));

    // The two leased numbers are still leased: the new creates get the two
    // new numbers, then 503.
    let held = [
        first["dial_number"].as_str().unwrap().to_owned(),
        second["dial_number"].as_str().unwrap().to_owned(),
    ];
    let mut new_numbers = Vec::new();
    for _ in 0..2 {
        let v = server.create_ok(&token, &body(RU_PHONE));
        let n = v["dial_number"].as_str().unwrap().to_owned();
        assert!(!held.contains(&n), "{n} was leased twice");
        new_numbers.push(n);
    }
    let all = domestic_numbers(4);
    assert!(new_numbers.iter().all(|n| all.contains(n)));
    assert_eq!(server.create(&token, &body(RU_PHONE)).status, 503);

    // A carried-over lease is still released by its verification's cancel.
    let id = first["verification_id"].as_str().unwrap();
    assert_eq!(server.cancel(&token, id).status, 200);
    let v = server.create_ok(&token, &body(RU_PHONE));
    assert_eq!(v["dial_number"], first["dial_number"]);
}

#[test]
fn a_broken_config_is_refused_and_the_old_one_kept() {
    let server = Server::with_pools(1, 0);
    let token = server.new_client("broken");
    std::fs::write(&server.config_path, "this is [not toml").unwrap();
    server.reload();
    server
        .wait_for_log(Duration::from_secs(10), |l| {
            l.contains("configuration reload failed")
        })
        .unwrap_or_else(|| panic!("no refusal logged:\n{}", server.logs()));
    server.create_ok(&token, &body(RU_PHONE));
    assert_eq!(server.create(&token, &body(RU_PHONE)).status, 503);
}

/// tools/deploy/README.md, "Configuration" (Reload): after `kill -HUP` a
/// leased number that left
/// the file keeps its verification (still readable, still expires) and is
/// no longer issued; a line added to the file makes its numbers issuable.
#[test]
fn a_removed_leased_number_keeps_its_verification_and_a_new_line_is_issuable() {
    let (server, clock) = Server::start_flowing(&pools(2, 0));
    let token = server.new_client("reload");
    let short = json!({"phone": RU_PHONE, "webhook_url": WEBHOOK, "ttl_seconds": 30});
    let removed = server.create_ok(&token, &short);
    let kept = server.create_ok(&token, &body(RU_PHONE));
    assert_eq!(server.create(&token, &body(RU_PHONE)).status, 503);

    // The new file: the first verification's number is gone, the second's
    // stays, and a new line brings one more number.
    let config = std::fs::read_to_string(&server.config_path).unwrap();
    let new_lines = format!(
        "{}\n{}",
        number_line("test", &[&dial(&kept)]),
        number_line("extra", &[EXTRA_NUMBER])
    );
    let changed = config.replace(&pools(2, 0), &new_lines);
    assert_ne!(config, changed, "the line section was found and replaced");
    std::fs::write(&server.config_path, changed).unwrap();
    server.reload();
    wait_rebuilds(&server, 1);

    // The added line's number is issued, and nothing else is free: the
    // removed number is not issued although its lease could be dropped.
    let fresh = server.create_ok(&token, &body(RU_PHONE));
    assert_eq!(dial(&fresh), EXTRA_NUMBER, "{fresh}");
    let r = server.create(&token, &body(RU_PHONE));
    assert_eq!(r.status, 503, "{}", r.text());

    // The verification of the removed number is still there and expires
    // on time (30 s after its creation).
    let r = server.get(&token, &id(&removed));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["status"], "pending");
    assert_eq!(r.json()["dial_number"], removed["dial_number"]);
    let expires_at = parse_utc(removed["expires_at"].as_str().unwrap());
    clock.advance_to(expires_at + 100);
    let expired = poll(Duration::from_secs(10), || {
        std::thread::sleep(Duration::from_millis(200));
        let r = server.get(&token, &id(&removed));
        assert_eq!(r.status, 200, "{}", r.text());
        let v = r.json();
        (v["status"] != "pending").then_some(v)
    })
    .expect("the removed number's verification expired");
    assert_eq!(expired["status"], "expired", "{expired}");
    assert!(
        clock.now_millis() >= expires_at,
        "expired before its expires_at: {expired}"
    );

    // Its expiry did not put the removed number back into the pool.
    let r = server.create(&token, &body(RU_PHONE));
    assert_eq!(r.status, 503, "{}", r.text());

    // The number that stayed in the file keeps its lease and is released
    // normally.
    assert_eq!(server.cancel(&token, &id(&kept)).status, 200);
    let again = server.create_ok(&token, &body(RU_PHONE));
    assert_eq!(dial(&again), dial(&kept));
}

/// tools/deploy/README.md, "Configuration" (Reload): a file that is TOML but
/// not a valid
/// configuration is not applied on SIGHUP (the old one stays), and a later
/// good reload still applies.
#[test]
fn an_invalid_configuration_is_not_applied_and_a_later_good_one_is() {
    let server = Server::with_pools(1, 0);
    let token = server.new_client("invalid");
    let config = std::fs::read_to_string(&server.config_path).unwrap();

    // Valid TOML, invalid configuration: the line name appears twice. The
    // second copy brings a number that must not become issuable.
    let broken = format!("{config}\n{}", number_line("test", &[EXTRA_NUMBER]));
    std::fs::write(&server.config_path, &broken).unwrap();
    server.reload();
    server
        .wait_for_log(Duration::from_secs(10), |l| {
            l.contains("configuration reload failed") && l.contains("appears twice")
        })
        .unwrap_or_else(|| panic!("no failed reload logged:\n{}", server.logs()));
    assert_eq!(rebuilds(&server), 0, "{}", server.logs());

    // The old configuration: its single number, then 503.
    let first = server.create_ok(&token, &body(RU_PHONE));
    assert_eq!(dial(&first), format!("+{DOMESTIC_START}"));
    let r = server.create(&token, &body(RU_PHONE));
    assert_eq!(r.status, 503, "{}", r.text());

    // Fixed: the extra line under its own name. The reload after a failed
    // one applies, and the old lease is carried over.
    let fixed = format!("{config}\n{}", number_line("extra", &[EXTRA_NUMBER]));
    std::fs::write(&server.config_path, fixed).unwrap();
    server.reload();
    wait_rebuilds(&server, 1);
    let second = server.create_ok(&token, &body(RU_PHONE));
    assert_eq!(dial(&second), EXTRA_NUMBER);
    let r = server.create(&token, &body(RU_PHONE));
    assert_eq!(r.status, 503, "{}", r.text());
}
