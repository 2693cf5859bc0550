//! A number the provider "lost": one number of a pool of four is never
//! called while sipp calls the other three every time they are leased. On
//! the virtual clock (each round's TTL passes in a jump), the dead number
//! is quarantined once its last K leases expired uncalled, with K from the
//! pool's completion share and lease rate; no healthy number is; the
//! quarantine is withheld from leasing, shown by `dialproof number health`,
//! survives in the database, and `dialproof number release` brings the
//! number back. Pins tools/deploy/README.md, "Number health".

use crate::support::sip::*;
use crate::support::*;
use serde_json::json;
use std::time::Duration;

const POOL_SIZE: u64 = 4;
/// Far more rounds than the rule can need at a 3-in-4 completion share.
const ROUNDS_MAX: usize = 30;

/// `number health --json`, by number.
fn health(s: &Server) -> std::collections::HashMap<String, serde_json::Value> {
    let v = s.cli(&["number", "health"]);
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|r| (r["number"].as_str().unwrap().to_owned(), r.clone()))
        .collect()
}

/// The `key=value` field of a log line.
fn field<'a>(line: &'a str, key: &str) -> &'a str {
    let at = line
        .find(&format!(" {key}="))
        .unwrap_or_else(|| panic!("no {key} in {line}"));
    line[at + key.len() + 2..].split(' ').next().unwrap_or("")
}

#[test]
fn a_number_that_never_rings_is_quarantined_after_k_leases_and_released() {
    let (s, clock) = Server::start_flowing(&sip_config(&trusted_line(POOL_SIZE, 603)));
    let token = s.new_client("Acme");
    let dead = format!("+{}", LINE_START + 3);
    let create = || {
        s.create(
            &token,
            &json!({"phone": RU_PHONE, "webhook_url": WEBHOOK, "ttl_seconds": 30}),
        )
    };
    let mut rounds = 0;
    while count_logs(&s, "number quarantined") == 0 {
        rounds += 1;
        assert!(
            rounds <= ROUNDS_MAX,
            "not quarantined after {ROUNDS_MAX} rounds:\n{}",
            s.logs()
        );
        let mut dead_id = None;
        let mut expires = 0;
        for _ in 0..POOL_SIZE {
            let v = create();
            assert_eq!(v.status, 201, "round {rounds}: {}", v.text());
            let v = v.json();
            let dial = v["dial_number"].as_str().unwrap().to_owned();
            expires = expires.max(parse_utc(v["expires_at"].as_str().unwrap()));
            if dial == dead {
                dead_id = Some(v["verification_id"].as_str().unwrap().to_owned());
            } else {
                call_once(&s, &dial);
            }
        }
        let dead_id = dead_id.expect("the rotation leases every free number once a round");
        clock.advance_to(expires + 1000);
        let expired = poll(Duration::from_secs(10), || {
            (s.get(&token, &dead_id).json()["status"] == "expired").then_some(())
        });
        assert!(
            expired.is_some(),
            "round {rounds}: the dead number's lease did not expire"
        );
    }
    // One quarantine, the dead number's, at exactly K uncalled leases.
    let logs = s.logs();
    let warned: Vec<&str> = logs
        .lines()
        .filter(|l| l.contains("number quarantined"))
        .collect();
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert!(warned[0].contains("WARN"), "{}", warned[0]);
    assert_eq!(field(warned[0], "dial_number"), dead);
    let k: usize = field(warned[0], "k").parse().unwrap();
    assert_eq!(field(warned[0], "uncalled_in_a_row"), k.to_string());
    assert_eq!(
        rounds, k,
        "quarantined at the K-th uncalled lease, not before or after"
    );
    assert!((8..=60).contains(&k), "K {k} within its bounds");

    // Stored, and shown by the operator command; every healthy number is.
    let shown = poll(Duration::from_secs(10), || {
        let h = health(&s);
        (h[&dead]["state"] == "quarantined").then_some(h)
    })
    .expect("number health shows the quarantine");
    for (number, row) in &shown {
        if *number != dead {
            assert_eq!(row["state"], "healthy", "{row}");
            assert_eq!(row["completed"], json!(rounds), "{row}");
            assert_eq!(row["uncalled_in_a_row"], 0, "{row}");
            assert!(row["last_completion"].is_string(), "{row}");
        }
    }
    assert_eq!(shown[&dead]["expired_uncalled"], json!(rounds));
    assert_eq!(shown[&dead]["completed"], 0);

    // Withheld: three creates get the three healthy numbers, the fourth
    // finds none (once the control loop rebuilt the table).
    poll(Duration::from_secs(10), || {
        count_logs(&s, "lease table rebuilt").gt(&0).then_some(())
    })
    .expect("the lease table is rebuilt without the dead number");
    for _ in 1..POOL_SIZE {
        let v = create();
        assert_eq!(v.status, 201, "{}", v.text());
        assert_ne!(
            v.json()["dial_number"],
            dead.as_str(),
            "a quarantined number was leased"
        );
    }
    assert_eq!(create().status, 503, "the quarantined number is withheld");

    // Released by the operator: issued again within a tick or two.
    s.cli(&["number", "release", &dead]);
    let back = poll(Duration::from_secs(10), || {
        let v = create();
        (v.status == 201).then(|| v.json()["dial_number"].as_str().unwrap().to_owned())
    });
    assert_eq!(
        back.as_deref(),
        Some(dead.as_str()),
        "number release brings it back"
    );
    assert_eq!(health(&s)[&dead]["state"], "healthy");
}

#[test]
fn a_stored_quarantine_is_withheld_from_the_start_after_a_restart() {
    let mut s = Server::start(&sip_config(&trusted_line(2, 603)));
    let token = s.new_client("Acme");
    s.stop();
    // What a running service wrote before it stopped.
    let quarantined = format!("+{}", LINE_START + 1);
    let db = rusqlite::Connection::open(s.data_dir.join("dialproof.db")).expect("db");
    db.execute(
        "INSERT INTO number_quarantine (number, pool, since) VALUES (?1, 'domestic', 0)",
        [&quarantined],
    )
    .expect("insert quarantine");
    drop(db);
    s.restart();
    let create = || s.create(&token, &body(RU_PHONE));
    let first = create();
    assert_eq!(first.status, 201, "{}", first.text());
    assert_ne!(first.json()["dial_number"], quarantined.as_str());
    assert_eq!(
        create().status,
        503,
        "the stored quarantine is withheld at start"
    );
    assert_eq!(health(&s)[&quarantined]["state"], "quarantined");
    s.cli(&["number", "release", &quarantined]);
    let back = poll(Duration::from_secs(10), || {
        let v = create();
        (v.status == 201).then(|| v.json()["dial_number"].as_str().unwrap().to_owned())
    });
    assert_eq!(back.as_deref(), Some(quarantined.as_str()));
    // Releasing what is not quarantined is an error that changes nothing.
    let out = s.cli_output(&["number", "release", &quarantined]);
    assert!(!out.status.success(), "a second release must fail");
}

/// More numbers change between two ticks than one write of the sync
/// carries (256 rows, `SAVE_CHUNK_ROWS` in src/shared/number_health.rs: the
/// writer then commits calls between the writes): every one of them is
/// in the database after the tick, as `dialproof number health` reads it.
#[test]
fn a_tick_with_more_changed_numbers_than_one_write_carries_saves_them_all() {
    const NUMBERS: u64 = 600;
    // Each key may create 120 a minute (the default limit).
    const PER_KEY: u64 = 120;
    let s = Server::start(&sip_config(&trusted_line(NUMBERS, 603)));
    let tokens: Vec<String> = (0..NUMBERS.div_ceil(PER_KEY))
        .map(|i| s.new_client(&format!("Client {i}")))
        .collect();
    for i in 0..NUMBERS {
        let token = &tokens[usize::try_from(i / PER_KEY).unwrap()];
        let r = s.create(token, &body(&format!("+7912{i:07}")));
        assert_eq!(r.status, 201, "create {i}: {}", r.text());
    }
    let mut last = Default::default();
    let saved = poll(Duration::from_secs(15), || {
        last = health(&s);
        let all = last.len() as u64 == NUMBERS && last.values().all(|r| r["leases"] == 1);
        all.then_some(())
    });
    let with_a_lease = last.values().filter(|r| r["leases"] == 1).count();
    assert!(
        saved.is_some(),
        "{with_a_lease} of {NUMBERS} numbers stored with their one lease ({} rows)",
        last.len()
    );
}

/// A graceful stop writes what number health counted since its last
/// write (the control loop writes about once a second): a lease made just
/// before SIGTERM is in `dialproof number health` after the stop.
#[test]
fn a_graceful_stop_stores_the_counts_since_the_last_tick() {
    let mut s = Server::start(&sip_config(&trusted_line(2, 603)));
    let token = s.new_client("Acme");
    let created = s.create(&token, &body(RU_PHONE));
    assert_eq!(created.status, 201, "{}", created.text());
    let number = created.json()["dial_number"].as_str().unwrap().to_owned();
    assert!(s.stop().success(), "a graceful stop");
    let shown = health(&s);
    assert_eq!(shown[&number]["leases"], 1, "{}", shown[&number]);
}
