//! `verification.failed` webhooks: sent only to companies that switched them
//! on (`company failed-webhooks ID on`), never to the others. A failure is
//! produced for real: sipp plays the provider's registrar, grants the line's
//! registration, then refuses the refresh; the line goes down and its
//! pending verifications fail.
//!
//! Not for: the line going down itself (`sip::register`).

use crate::support::sip::*;
use crate::support::webhooks::*;
use crate::support::*;
use serde_json::json;
use std::path::Path;
use std::time::Duration;

const USER: &str = "line1";
const PASSWORD: &str = "s3cret";

/// Stops the sipp registrar however the test ends.
struct Kill(std::process::Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn failed_webhooks_go_only_to_companies_that_enabled_them() {
    // The registrar grants 4 s, then refuses the refresh with 403.
    let dir = workdir();
    let port = free_udp_port();
    let grant = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sipp/register_grant.xml.part"),
    )
    .expect("grant fragment")
    .replace("{{EXPIRES}}", "4");
    let sf = scenario(
        dir.path(),
        "register_uas.xml",
        &[
            ("QOP", ""),
            ("USER", USER),
            ("PASSWORD", PASSWORD),
            ("REFRESHES", &grant),
            ("LAST_CHECK", ""),
            ("LAST_CODE", "403"),
        ],
    );
    let _registrar = Kill(spawn_uas(dir.path(), &sf, port));
    std::thread::sleep(Duration::from_millis(300));
    let registrar_addr = format!("127.0.0.1:{port}").parse().unwrap();

    let rx = Receiver::recording(Answer::Status(200));
    let s = Server::start(&format!(
        "{FAST_RETRIES}{}",
        sip_config(&register_line(registrar_addr, 4, USER, PASSWORD))
    ));
    let mut tokens = Vec::new();
    for (name, failed) in [("on", true), ("off", false)] {
        let c = s.create_company(name);
        s.cli(&["company", "dev-urls", &c.to_string(), &rx.base_url()]);
        if failed {
            s.cli(&["company", "failed-webhooks", &c.to_string(), "on"]);
        }
        tokens.push(s.create_key(c));
    }
    s.wait_for_log(Duration::from_secs(10), |l| {
        l.contains("sip line registered")
    })
    .unwrap_or_else(|| panic!("never registered:\n{}", s.logs()));
    let on = s.create_ok(
        &tokens[0],
        &json!({"phone": RU_PHONE, "webhook_url": rx.url("/on"), "client_ref": "c-on"}),
    );
    let off = s.create_ok(
        &tokens[1],
        &json!({"phone": RU_PHONE, "webhook_url": rx.url("/off")}),
    );

    let hit = rx.wait_for("/on", 1, Duration::from_secs(20)).remove(0);
    let p = hit.json();
    assert_eq!(p["type"], "verification.failed");
    assert_eq!(p["verification_id"], on["verification_id"]);
    assert_eq!(p["client_ref"], "c-on");
    assert!(p.get("caller_id").is_none(), "{p}");
    parse_utc(p["completed_at"].as_str().unwrap());
    // The other company's verification failed too, silently.
    let off_id = off["verification_id"].as_str().unwrap();
    let g = poll(Duration::from_secs(5), || {
        let v = s.get(&tokens[1], off_id).json();
        (v["status"] == "failed").then_some(v)
    });
    assert!(g.is_some(), "the other verification failed as well");
    std::thread::sleep(Duration::from_millis(1500));
    assert!(rx.hits_to("/off").is_empty());
    let log = s.cli(&["delivery", "list", "--verification", off_id]);
    assert_eq!(log, json!([]), "no outbox row without the switch");
}
