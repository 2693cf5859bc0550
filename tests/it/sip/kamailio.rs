//! Calls through a real provider registrar: Kamailio authenticates the
//! line's REGISTER and relays sipp's INVITEs to Dialproof the way providers
//! do, either to the registered Contact (the dialled number in `To`, or in
//! `P-Called-Party-ID`) or with the dialled number in the Request-URI. The
//! line is configured as tools/examples/production.toml's: its registration user name
//! is also one of its numbers, so reading the Request-URI of a call routed
//! to the Contact would complete the wrong verification (issue 10).
//!
//! Not for: sipp's scripted registrar (`sip::register`).

use crate::support::kamailio::Kamailio;
use crate::support::sip::*;
use crate::support::*;
use std::time::Duration;

pub(crate) const PASSWORD: &str = "kamailio-secret";
/// The line's numbers: +74960000000 .. +74960000002.
pub(crate) const FIRST: &str = "74960000000";

fn line(provider: std::net::SocketAddr) -> String {
    format!(
        "[[lines]]\nname = \"kam\"\nmode = \"register\"\nprovider = \"{provider}\"\n\
         username = \"{FIRST}\"\npassword = \"{PASSWORD}\"\nregister_expires_seconds = 60\n\
         numbers = [ {{ range_start = \"+{FIRST}\", count = 3, pool = \"domestic\" }} ]\n"
    )
}

/// A registered line behind Kamailio and a client of the service.
struct Setup {
    kamailio: Kamailio,
    server: Server,
    token: String,
}

fn setup(failpoints: Option<&str>) -> Setup {
    let kamailio = Kamailio::start(FIRST, FIRST, PASSWORD);
    let mut server = Server::prepare(&sip_config(&line(kamailio.addr)));
    if let Some(spec) = failpoints {
        server.set_env("DIALPROOF_FAILPOINTS", spec);
    }
    server.launch();
    let token = server.new_client("Acme");
    server
        .wait_for_log(Duration::from_secs(15), |l| {
            l.contains("sip line registered")
        })
        .unwrap_or_else(|| {
            panic!(
                "no registration; logs:\n{}\nkamailio:\n{}",
                server.logs(),
                kamailio.logs()
            )
        });
    Setup {
        kamailio,
        server,
        token,
    }
}

impl Setup {
    /// One call to `dial` (digits, no `+`) through Kamailio, expecting `code`.
    fn call(&self, dial: &str, from: &str, headers: &str, code: u16) {
        let dir = workdir();
        let sf = scenario(
            dir.path(),
            "call.xml",
            &[
                ("FROM_HEADER", &from_user(from)),
                ("HEADERS", headers),
                ("CODE", &code.to_string()),
            ],
        );
        let out = run_uac(dir.path(), &sf, self.kamailio.addr, dial, "127.0.0.1", 1);
        if !out.status.success() {
            eprintln!("kamailio:\n{}", self.kamailio.logs());
        }
        assert_sipp_ok(&out, dir.path(), &self.server);
    }

    fn status(&self, id: &str) -> serde_json::Value {
        self.server.get(&self.token, id).json()
    }

    /// Two verifications, one of them on the registration user's number.
    fn two_pending(&self) -> [(String, String); 2] {
        let mut out = Vec::new();
        for _ in 0..2 {
            let v = self.server.create_ok(&self.token, &body(RU_PHONE));
            out.push((
                v["verification_id"].as_str().unwrap().to_owned(),
                v["dial_number"]
                    .as_str()
                    .unwrap()
                    .trim_start_matches('+')
                    .to_owned(),
            ));
        }
        assert!(
            out.iter().any(|(_, d)| d == FIRST),
            "one lease should be on the user name's number: {out:?}"
        );
        [out[0].clone(), out[1].clone()]
    }
}

fn wait_status(s: &Setup, id: &str, want: &str) -> serde_json::Value {
    poll(Duration::from_secs(5), || {
        let v = s.status(id);
        (v["status"] == want).then_some(v)
    })
    .unwrap_or_else(|| panic!("{id} never {want}; logs:\n{}", s.server.logs()))
}

#[test]
fn a_call_routed_to_our_contact_completes_the_dialled_numbers_verification() {
    let s = setup(None);
    // Our Contact is a token of the line's, never its user name or a number.
    s.kamailio.wait_log("registered", Duration::from_secs(5));
    let logs = s.kamailio.logs();
    assert!(logs.contains("contact <sip:dp-"), "{logs}");
    let [a, b] = s.two_pending();
    // Call the number that is NOT the user name's: the Request-URI Kamailio
    // sends carries our Contact, the dialled number is in To.
    let (called, other) = if a.1 == FIRST { (b, a) } else { (a, b) };
    s.call(&called.1, "89161234567", "X-Route: contact", 603);
    let done = wait_status(&s, &called.0, "completed");
    assert_eq!(done["caller_id_received"], "+79161234567");
    assert_eq!(s.status(&other.0)["status"], "pending");
    // The other one, on the user name's number, by P-Called-Party-ID.
    s.call(&other.1, "89161234568", "X-Route: pcpi", 603);
    let done = wait_status(&s, &other.0, "completed");
    assert_eq!(done["caller_id_received"], "+79161234568");
    let logs = s.server.logs();
    let completions: Vec<&str> = logs
        .lines()
        .filter(|l| l.contains("call completed a verification"))
        .collect();
    assert_eq!(completions.len(), 2, "{logs}");
    assert!(completions[0].contains("to"), "{}", completions[0]);
    assert!(
        completions[1].contains("p-called-party-id"),
        "{}",
        completions[1]
    );
}

#[test]
fn a_did_in_the_request_uri_and_an_asserted_identity() {
    let s = setup(None);
    let [a, b] = s.two_pending();
    let pai = "X-Route: did\r\n      P-Asserted-Identity: <sip:+79035550101@127.0.0.1>";
    s.call(&b.1, "89161234567", pai, 603);
    let done = wait_status(&s, &b.0, "completed");
    // The provider asserts the identity: PAI wins over From.
    assert_eq!(done["caller_id_received"], "+79035550101");
    assert_eq!(s.status(&a.0)["status"], "pending");
}

#[test]
fn a_number_that_is_not_the_lines_gets_404_and_changes_nothing() {
    let s = setup(None);
    let [a, b] = s.two_pending();
    s.call("74950000009", "89161234567", "X-Route: contact", 404);
    s.call("74950000009", "89161234567", "X-Route: did", 404);
    for id in [&a.0, &b.0] {
        assert_eq!(s.status(id)["status"], "pending");
    }
    let logs = s.server.logs();
    let denied: Vec<&str> = logs
        .lines()
        .filter(|l| l.contains("not one of the line's; 404"))
        .collect();
    assert_eq!(denied.len(), 2, "{logs}");
    assert!(
        denied[0].contains("header=\"to\"") && denied[0].contains("74950000009"),
        "{}",
        denied[0]
    );
    assert!(
        denied[1].contains("header=\"request-uri\"") && denied[1].contains("74950000009"),
        "{}",
        denied[1]
    );
}

#[test]
fn the_unregister_at_shutdown_is_answered_and_read() {
    let mut s = setup(None);
    let status = s.server.stop();
    assert!(status.success(), "{status:?}");
    // Kamailio answered `Expires: 0`, and the service read the answer
    // before it stopped receiving.
    let logs = s.server.logs();
    assert!(logs.contains("sip line registration ended"), "{logs}");
}

#[test]
fn a_cancel_through_the_registrar() {
    // A slow disk (fail point) holds the call's commit, so the CANCEL that
    // Kamailio relays arrives before the final response.
    let s = setup(Some("writer.before_commit=delay(1500)"));
    let v = s.server.create_ok(&s.token, &body(RU_PHONE));
    let id = v["verification_id"].as_str().unwrap().to_owned();
    let dial = v["dial_number"]
        .as_str()
        .unwrap()
        .trim_start_matches('+')
        .to_owned();
    let dir = workdir();
    let sf = scenario(
        dir.path(),
        "cancel_via_proxy.xml",
        &[("FROM_HEADER", &from_user("89161234567"))],
    );
    let out = run_uac(dir.path(), &sf, s.kamailio.addr, &dial, "127.0.0.1", 1);
    if !out.status.success() {
        eprintln!("kamailio:\n{}", s.kamailio.logs());
    }
    assert_sipp_ok(&out, dir.path(), &s.server);
    wait_log_line(&s.server, "487 sent", Duration::from_secs(5));
    assert_eq!(count_logs(&s.server, "487 sent"), 1, "{}", s.server.logs());
    // The INVITE carried the caller before the caller hung up: it counts.
    let done = wait_status(&s, &id, "completed");
    assert_eq!(done["caller_id_received"], "+79161234567");
}
