//! Issue 2: numbers and lines come from the config file and are reloaded on
//! SIGHUP without losing leases.

mod common;

use common::*;
use std::time::Duration;

fn sighup(server: &Server) {
    let status = std::process::Command::new("kill")
        .args(["-HUP", &server.pid().to_string()])
        .status()
        .expect("running kill");
    assert!(status.success());
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
    sighup(&server);
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
    sighup(&server);
    server
        .wait_for_log(Duration::from_secs(10), |l| {
            l.contains("configuration reload failed")
        })
        .unwrap_or_else(|| panic!("no refusal logged:\n{}", server.logs()));
    server.create_ok(&token, &body(RU_PHONE));
    assert_eq!(server.create(&token, &body(RU_PHONE)).status, 503);
}
