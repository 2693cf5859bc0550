//! What an operator's database and logs hold of the secrets, against the
//! real binary:
//!
//! - API key secrets, dashboard passwords and session tokens are stored
//!   only as hashes: after a run that made each, no table of the database
//!   holds any of them (the webhook secret is the exception by design: the
//!   service signs with it, so it is stored as given);
//! - no token, key secret, password, session cookie or webhook secret ever
//!   reaches the service's log, through a run that creates, reads, cancels,
//!   logs in, fails to log in, sends a bad token and delivers a webhook.
//!
//! Not for: the SSRF guard (`api::create`, and at delivery
//! `webhooks::rebinding`), constant-time comparison of key secrets
//! (`engine/src/apikey.rs`), cross-company reads and cancels
//! (`api::read_cancel`), or the docs and schema access rule (`api::schema`,
//! `dashboard::sessions`).

use crate::support::sip::{call_once, sip_config, trusted_line};
use crate::support::webhooks::{Answer, Receiver};
use crate::support::*;
use serde_json::json;
use std::time::Duration;

const PASSWORD: &str = "correct-horse-battery-staple-91";
const EMAIL: &str = "ops@acme.example";
const LOGIN: &str = "/api/dashboard/auth/login";

fn create_user(s: &Server, company: i64) {
    let company = company.to_string();
    let args = ["user", "create", "--company", &company, "--email", EMAIL];
    let out = s.cli_output_with_input(&args, &format!("{PASSWORD}\n"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn login(s: &Server, password: &str) -> Resp {
    let body = json!({ "email": EMAIL, "password": password }).to_string();
    s.request(
        "POST",
        LOGIN,
        &[("Content-Type", "application/json")],
        body.as_bytes(),
    )
}

/// Every text and blob value of every table, as one string.
fn database_text(s: &Server) -> String {
    let db = rusqlite::Connection::open(s.data_dir.join("dialproof.db")).expect("opening the db");
    let tables: Vec<String> = db
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let mut out = String::new();
    for t in tables {
        let mut stmt = db.prepare(&format!("SELECT * FROM \"{t}\"")).unwrap();
        let n = stmt.column_count();
        let mut rows = stmt.query([]).unwrap();
        while let Some(row) = rows.next().unwrap() {
            for i in 0..n {
                match row.get_ref(i).unwrap() {
                    rusqlite::types::ValueRef::Text(b) | rusqlite::types::ValueRef::Blob(b) => {
                        out.push_str(&String::from_utf8_lossy(b));
                        out.push('\n');
                    }
                    _ => {}
                }
            }
        }
    }
    out
}

#[test]
fn secrets_are_stored_only_as_hashes_and_never_logged() {
    let rx = Receiver::recording(Answer::Status(200));
    let s = Server::start(&format!(
        "[webhooks]\nretry_schedule_seconds = [0, 1, 2]\njitter_percent = 0\n\n{}",
        sip_config(&trusted_line(3, 603))
    ));
    let company = s.cli(&["company", "create", "--name", "acme"]);
    let company_id = company["id"].as_i64().unwrap();
    let webhook_secret = company["webhook_secret"].as_str().unwrap().to_owned();
    s.cli(&[
        "company",
        "dev-urls",
        &company_id.to_string(),
        &rx.base_url(),
    ]);
    let token = s.create_key(company_id);
    // svc_live_<prefix>_<secret>: the prefix is an identifier (shown in
    // lists and logs), the secret is what must never be stored or logged.
    let secret = token.rsplit('_').next().unwrap().to_owned();
    assert!(secret.len() >= 16, "{token}");
    create_user(&s, company_id);

    // Use all of them.
    let v = s.create_ok(
        &token,
        &json!({"phone": RU_PHONE, "webhook_url": rx.url("/hook"), "ttl_seconds": 30}),
    );
    let id = v["verification_id"].as_str().unwrap();
    assert_eq!(s.get(&token, id).status, 200);
    let v2 = s.create_ok(&token, &body(RU_PHONE));
    assert_eq!(
        s.cancel(&token, v2["verification_id"].as_str().unwrap())
            .status,
        200
    );
    let wrong = format!("{token}x");
    assert_eq!(s.get(&wrong, id).status, 401);
    assert_eq!(login(&s, "not-the-password").status, 401);
    let ok = login(&s, PASSWORD);
    assert_eq!(ok.status, 200, "{}", ok.text());
    let cookie = ok
        .header("set-cookie")
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let session = cookie.split_once('=').unwrap().1.to_owned();
    let r = s.request("GET", "/api/schema/", &[("Cookie", &cookie)], b"");
    assert_eq!(r.status, 200);
    // A webhook signed with the secret: a real call completes the first.
    call_once(&s, v["dial_number"].as_str().unwrap());
    rx.wait_for("/hook", 1, Duration::from_secs(10));

    let stored = database_text(&s);
    for (what, value) in [
        ("the API token", token.as_str()),
        ("the key secret", secret.as_str()),
        ("the password", PASSWORD),
        ("the session token", session.as_str()),
    ] {
        assert!(!stored.contains(value), "{what} is stored in clear");
    }
    assert!(
        stored.contains("$argon2id$"),
        "no Argon2id password hash stored"
    );

    let logs = s.logs();
    for (what, value) in [
        ("the API token", token.as_str()),
        ("the key secret", secret.as_str()),
        ("the password", PASSWORD),
        ("the session token", session.as_str()),
        ("the webhook secret", webhook_secret.as_str()),
        (
            "the webhook secret's body",
            webhook_secret.trim_start_matches("whsec_"),
        ),
    ] {
        assert!(!logs.contains(value), "{what} is in the log:\n{logs}");
    }
}
