//! GET /api/v1/verifications/{id}/ and POST .../{id}/cancel/: company
//! scoping, 404s, cancel releasing the number at once, idempotent cancel.
//!
//! Not for: the end of a verification at its TTL (`api::ttl`) or by a call
//! (`sip::calls`).

use crate::support::*;
use serde_json::json;

#[track_caller]
fn assert_404(r: &Resp, what: &str) {
    assert_eq!(r.status, 404, "{what}: {}", r.text());
    assert_json_type(r);
    assert_eq!(r.json(), json!({ "detail": NOT_FOUND }), "{what}");
}

#[test]
fn read_returns_the_verification_and_unknown_ids_404() {
    let s = Server::with_pools(1, 1);
    let token = s.new_client("acme");
    let v = s.create_ok(
        &token,
        &json!({"phone": UK_PHONE, "webhook_url": WEBHOOK, "client_ref": "r1", "info": "i"}),
    );
    let id = v["verification_id"].as_str().unwrap();
    for _ in 0..2 {
        let r = s.get(&token, id);
        assert_eq!(r.status, 200, "{}", r.text());
        assert_json_type(&r);
        let g = r.json();
        assert_verification(&g);
        assert_eq!(g, v);
    }

    // A well-formed id that does not exist (same time part, other random).
    let mut unknown = id.to_owned();
    let last = if unknown.ends_with('0') { "1" } else { "0" };
    unknown.replace_range(unknown.len() - 1.., last);
    let malformed = [
        "abc",
        "ver_",
        "ver_123",
        &id[..id.len() - 1],
        &*format!("{id}0"),
        &*id.replace("ver_", "vex_"),
        &*format!("{}-", &id[..id.len() - 1]),
        "ver_00000000000000000000000000",
        "%20",
    ];
    assert_404(&s.get(&token, &unknown), "unknown id");
    assert_404(&s.cancel(&token, &unknown), "cancel unknown id");
    for m in malformed {
        assert_404(&s.get(&token, m), m);
        assert_404(&s.cancel(&token, m), m);
    }
    // Still pending: the 404 cancels touched nothing.
    assert_eq!(s.get(&token, id).json(), v);
}

#[test]
fn another_companys_verification_is_404() {
    let s = Server::with_pools(1, 1);
    let a = s.new_client("alpha");
    let b = s.new_client("beta");
    let v = s.create_ok(&a, &body(RU_PHONE));
    let id = v["verification_id"].as_str().unwrap();
    assert_404(&s.get(&b, id), "other company GET");
    assert_404(&s.cancel(&b, id), "other company cancel");
    // B's cancel did nothing: A still sees it pending, the number still held.
    assert_eq!(s.get(&a, id).json(), v);
    assert_eq!(s.create(&b, &body(RU_PHONE)).status, 503);
    // B's own verification is invisible to A as well.
    let w = s.create_ok(&b, &body(UK_PHONE));
    let wid = w["verification_id"].as_str().unwrap();
    assert_404(&s.get(&a, wid), "reverse GET");
    assert_404(&s.cancel(&a, wid), "reverse cancel");
    assert_eq!(s.get(&b, wid).json(), w);
}

#[test]
fn cancel_expires_and_releases_the_number_at_once() {
    let s = Server::with_pools(1, 0);
    let token = s.new_client("acme");
    let v = s.create_ok(&token, &body(RU_PHONE));
    let id = v["verification_id"].as_str().unwrap();
    let dial = v["dial_number"].clone();
    assert_eq!(s.create(&token, &body(RU_PHONE)).status, 503);

    let r = s.cancel(&token, id);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_json_type(&r);
    let c = r.json();
    assert_verification(&c);
    assert_eq!(c["status"], "expired");
    assert_eq!(c["completed_at"], serde_json::Value::Null);
    assert_eq!(c["caller_id_received"], "");
    for f in [
        "verification_id",
        "phone",
        "dial_number",
        "client_ref",
        "info",
        "ttl_seconds",
        "created_at",
        "expires_at",
    ] {
        assert_eq!(c[f], v[f], "{f} changed by cancel");
    }

    // The number is free at once.
    let n = s.create_ok(&token, &body(RU_PHONE));
    assert_eq!(n["dial_number"], dial);
    assert_ne!(n["verification_id"], v["verification_id"]);

    // Idempotent: the same answer again, and GET agrees.
    for _ in 0..2 {
        let again = s.cancel(&token, id);
        assert_eq!(again.status, 200, "{}", again.text());
        assert_eq!(again.json(), c);
    }
    assert_eq!(s.get(&token, id).json(), c);
    // Cancelling the old one again did not release the new one's number.
    assert_eq!(s.create(&token, &body(RU_PHONE)).status, 503);
    assert_eq!(
        s.get(&token, n["verification_id"].as_str().unwrap()).json(),
        n
    );
}

/// GETs of live verifications are answered from memory (the commit
/// consumer holds recently created rows): a GET right after a cancel, or
/// right after an expiry, must show the terminal row, never the pending
/// one it replaced; another company still gets 404.
#[test]
fn a_get_right_after_a_change_shows_the_change() {
    let (s, clock) = Server::start_virtual(&pools(2, 0));
    let token = s.new_client("acme");
    let other = s.new_client("beta");
    let auth = format!("Bearer {token}");
    let mut conn = s.connect();
    for round in 0..40 {
        // Four requests a round: three virtual seconds keep the key under
        // its 120 a minute.
        clock.advance(std::time::Duration::from_secs(3));
        let v = s.create_ok(&token, &body(RU_PHONE));
        let id = v["verification_id"].as_str().unwrap();
        let path = format!("{COLLECTION}{id}/");
        let g = conn.request("GET", &path, &[("Authorization", &auth)], b"");
        assert_eq!(g.json(), v, "round {round}: GET after create");
        assert_404(&s.get(&other, id), "another company's live verification");
        let c = conn.request(
            "POST",
            &format!("{path}cancel/"),
            &[("Authorization", &auth)],
            b"",
        );
        assert_eq!(c.json()["status"], "expired", "round {round}");
        let g = conn.request("GET", &path, &[("Authorization", &auth)], b"");
        assert_eq!(
            g.json(),
            c.json(),
            "round {round}: GET right after the cancel"
        );
    }
    // An expiry: the GET that follows the change shows it.
    clock.advance(std::time::Duration::from_secs(61));
    let v = s.create_ok(
        &token,
        &serde_json::json!({"phone": RU_PHONE, "webhook_url": WEBHOOK, "ttl_seconds": 30}),
    );
    let id = v["verification_id"].as_str().unwrap();
    assert_eq!(s.get(&token, id).json()["status"], "pending");
    clock.advance(std::time::Duration::from_secs(31));
    let expired = poll(std::time::Duration::from_secs(10), || {
        let g = s.get(&token, id).json();
        (g["status"] != "pending").then_some(g)
    })
    .expect("expired within 10 s of its TTL");
    assert_eq!(expired["status"], "expired");
    // Once seen terminal, never pending again.
    for _ in 0..20 {
        assert_eq!(s.get(&token, id).json(), expired);
    }
}

/// GETs of one verification answered `from` "memory" or "sqlite" since the
/// latest start (its ops address: a restart binds a new port).
fn reads(s: &Server, from: &str) -> Option<f64> {
    series(
        s,
        &format!("dialproof_verification_reads_total{{from=\"{from}\"}}"),
    )
}

/// A series of the running server's /metrics.
fn series(s: &Server, name: &str) -> Option<f64> {
    metric(s.ops_addr(s.ready_lines().len()), name)
}

/// README "Performance": a pending verification's GET is answered from the
/// rows held in memory, packed; after a restart nothing is held and SQLite
/// answers. Both must be the same bytes, texts in any script included.
#[test]
fn a_held_verification_reads_byte_for_byte_as_stored() {
    let (mut s, _) = start_with_ops(&pools(2, 0));
    let token = s.new_client("acme");
    let bodies = [
        json!({"phone": RU_PHONE, "webhook_url": WEBHOOK}),
        json!({"phone": RU_PHONE, "webhook_url": WEBHOOK, "ttl_seconds": 77,
               "client_ref": "user-42 ✓", "info": "Ünïcode, \"quotes\" and \\ backslash"}),
    ];
    let ids: Vec<String> = bodies
        .iter()
        .map(|b| {
            s.create_ok(&token, b)["verification_id"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    let held: Vec<Vec<u8>> = ids.iter().map(|id| s.get(&token, id).body).collect();
    assert_eq!(
        reads(&s, "memory"),
        Some(2.0),
        "design choice: a pending verification's GET is answered from the held rows"
    );
    s.restart();
    for (id, before) in ids.iter().zip(&held) {
        let after = s.get(&token, id);
        assert_eq!(after.status, 200);
        assert_eq!(
            String::from_utf8_lossy(&after.body),
            String::from_utf8_lossy(before),
            "the held row and the stored row render differently"
        );
    }
    assert_eq!(
        reads(&s, "sqlite"),
        Some(2.0),
        "after a restart SQLite answers"
    );
    assert_eq!(reads(&s, "memory"), Some(0.0));
}

/// README "Performance": a pending verification read from SQLite (here
/// made before the last start, so not among the held rows) is kept in
/// memory for the client's next poll, byte for byte what SQLite showed;
/// a cancel takes it out at once, so the next GET shows the cancel.
#[test]
fn a_verification_polled_again_after_a_restart_is_answered_from_memory_until_it_ends() {
    let (mut s, _) = start_with_ops(&pools(2, 0));
    let token = s.new_client("acme");
    let body = json!({"phone": RU_PHONE, "webhook_url": WEBHOOK, "client_ref": "poll ✓",
                      "info": "Ünïcode and \"quotes\""});
    let id = s.create_ok(&token, &body)["verification_id"]
        .as_str()
        .unwrap()
        .to_owned();
    s.restart();
    let first = s.get(&token, &id);
    assert_eq!(first.status, 200, "{}", first.text());
    assert_eq!(
        reads(&s, "sqlite"),
        Some(1.0),
        "the first GET after a start reads SQLite"
    );
    for poll in 1..=3 {
        let again = s.get(&token, &id);
        assert_eq!(
            String::from_utf8_lossy(&again.body),
            String::from_utf8_lossy(&first.body),
            "poll {poll}: the copy kept from SQLite renders differently"
        );
    }
    assert_eq!(
        (reads(&s, "sqlite"), reads(&s, "memory")),
        (Some(1.0), Some(3.0)),
        "design choice: a pending verification read from SQLite is kept for the next polls"
    );
    assert_eq!(copies_held(&s), Some(1.0), "the copy in /metrics");
    // Another company's key finds nothing, kept copy or not.
    let other = s.new_client("globex");
    assert_404(&s.get(&other, &id), "another company's verification");

    let cancelled = s.cancel(&token, &id);
    assert_eq!(cancelled.status, 200, "{}", cancelled.text());
    let after = s.get(&token, &id);
    assert_eq!(after.status, 200);
    assert_eq!(after.json()["status"], "expired", "{}", after.text());
    assert_eq!(after.json(), cancelled.json(), "the GET after a cancel");
    assert_eq!(
        reads(&s, "memory"),
        Some(3.0),
        "the ended verification was answered from memory"
    );
    assert_eq!(copies_held(&s), Some(0.0), "the ended copy in /metrics");
}

fn copies_held(s: &Server) -> Option<f64> {
    series(s, "dialproof_verification_copies_held")
}
