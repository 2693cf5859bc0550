//! Line state over real UDP, with sipp as the provider: registration with
//! digest authentication (with and without `qop=auth`), refreshes, the
//! loss of registration (503 on create, pending verifications `failed`),
//! `Expires: 0` at shutdown, and an IP-authenticated line whose OPTIONS
//! pings stop being answered.
//!
//! Not for: a registrar that falls silent mid-registration
//! (`resilience::fault::registrar`).

use crate::support::sip::*;
use crate::support::*;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

const USER: &str = "line1";
const PASSWORD: &str = "s3cret";

/// `refreshes` 200 answers after the authenticated REGISTER (the first one
/// answers it; each further one answers a refresh), granting `expires`.
fn grants(refreshes: usize, expires: u32) -> String {
    let part = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sipp/register_grant.xml.part"),
    )
    .expect("grant fragment")
    .replace("{{EXPIRES}}", &expires.to_string());
    let mut out = part.clone();
    for _ in 1..refreshes {
        out.push_str("\n  <recv request=\"REGISTER\" />\n");
        out.push_str(&part);
    }
    out
}

struct Registrar {
    dir: tempfile::TempDir,
    child: Option<std::process::Child>,
    addr: SocketAddr,
}

impl Registrar {
    fn start(qop: bool, refreshes: usize, expires: u32, last_check: &str, last_code: u16) -> Self {
        let dir = workdir();
        let port = free_udp_port();
        let refreshes = grants(refreshes, expires);
        let last_code = last_code.to_string();
        let sf = scenario(
            dir.path(),
            "register_uas.xml",
            &[
                ("QOP", if qop { ", qop=\"auth\"" } else { "" }),
                ("USER", USER),
                ("PASSWORD", PASSWORD),
                ("REFRESHES", &refreshes),
                ("LAST_CHECK", last_check),
                ("LAST_CODE", &last_code),
            ],
        );
        let child = spawn_uas(dir.path(), &sf, port);
        // sipp binds at once; give it a moment before the first REGISTER.
        std::thread::sleep(Duration::from_millis(300));
        Registrar {
            dir,
            child: Some(child),
            addr: format!("127.0.0.1:{port}").parse().unwrap(),
        }
    }

    fn finish(&mut self, server: &Server) {
        let child = self.child.take().expect("sipp running");
        let out = wait_output(child, SIPP_TIMEOUT);
        assert_sipp_ok(&out, self.dir.path(), server);
    }
}

impl Drop for Registrar {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[test]
fn registers_with_qop_digest_refreshes_then_loses_the_registration() {
    // Granted 4 s: refreshed at 2 s (granted again), at 4 s refused (403).
    let mut registrar = Registrar::start(true, 2, 4, "", 403);
    let server = Server::start(&sip_config(&register_line(
        registrar.addr,
        3,
        USER,
        PASSWORD,
    )));
    let token = server.new_client("Acme");
    wait_log_line(&server, "sip line registered", Duration::from_secs(10));
    let v = server.create_ok(&token, &body(RU_PHONE));
    let id = v["verification_id"].as_str().unwrap().to_owned();

    // The refresh is granted, then refused: the line goes down.
    wait_log_line(&server, "registrar answered 403", Duration::from_secs(15));
    registrar.finish(&server);
    assert_eq!(
        count_logs(&server, "sip line registered"),
        2,
        "one registration, one refresh"
    );

    let failed = poll(Duration::from_secs(5), || {
        let v = server.get(&token, &id).json();
        (v["status"] == "failed").then_some(v)
    })
    .unwrap_or_else(|| panic!("verification not failed; logs:\n{}", server.logs()));
    assert_eq!(failed["caller_id_received"], "");
    // Its numbers are withheld: nothing else qualifies, so 503.
    let r = server.create(&token, &body(RU_PHONE));
    assert_eq!(r.status, 503, "{}", r.text());
    assert_eq!(r.header("Retry-After"), Some("60"));
}

#[test]
fn registers_without_qop_and_unregisters_at_shutdown() {
    let check = "    <action>\n      <ereg regexp=\"Expires: 0\" search_in=\"msg\" check_it=\"true\" \
                 assign_to=\"unreg\" />\n      <log message=\"unregister seen: [$unreg]\" />\n    </action>";
    let mut registrar = Registrar::start(false, 1, 60, check, 200);
    let mut server = Server::start(&sip_config(&register_line(
        registrar.addr,
        2,
        USER,
        PASSWORD,
    )));
    let token = server.new_client("Acme");
    wait_log_line(&server, "sip line registered", Duration::from_secs(10));
    server.create_ok(&token, &body(RU_PHONE));
    let status = server.stop();
    assert!(status.success(), "{status:?}");
    registrar.finish(&server);
}

#[test]
fn a_line_that_never_registers_withholds_its_numbers() {
    // Nobody listens at the provider's address.
    let provider: SocketAddr = format!("127.0.0.1:{}", free_udp_port()).parse().unwrap();
    let server = Server::start(&sip_config(&register_line(provider, 2, USER, PASSWORD)));
    let token = server.new_client("Acme");
    let r = server.create(&token, &body(RU_PHONE));
    assert_eq!(r.status, 503, "{}", r.text());
}

#[test]
fn an_ip_auth_line_goes_down_when_its_pings_go_unanswered() {
    let dir = workdir();
    let port = free_udp_port();
    let sf = scenario(dir.path(), "options_uas.xml", &[]);
    let provider = spawn_uas(dir.path(), &sf, port);
    std::thread::sleep(Duration::from_millis(300));
    let line = format!(
        "[[lines]]\nname = \"ip\"\nmode = \"ip_auth\"\nprovider = \"127.0.0.1:{port}\"\n\
         ping_interval_seconds = 1\nping_failures_max = 1\n\
         numbers = [ {{ range_start = \"+{LINE_START}\", count = 2, pool = \"domestic\" }} ]\n"
    );
    let server = Server::start(&sip_config(&line));
    let token = server.new_client("Acme");
    // Up from the start: an IP trunk needs no registration.
    let v = server.create_ok(&token, &body(RU_PHONE));
    let id = v["verification_id"].as_str().unwrap().to_owned();
    // Two pings answered, then the provider is gone.
    let out = wait_output(provider, SIPP_TIMEOUT);
    assert_sipp_ok(&out, dir.path(), &server);
    wait_log_line(
        &server,
        "provider stopped answering pings",
        Duration::from_secs(15),
    );
    let failed = poll(Duration::from_secs(5), || {
        let v = server.get(&token, &id).json();
        (v["status"] == "failed").then_some(v)
    })
    .unwrap_or_else(|| panic!("verification not failed; logs:\n{}", server.logs()));
    assert_eq!(failed["status"], "failed");
    let r = server.create(&token, &body(RU_PHONE));
    assert_eq!(r.status, 503, "{}", r.text());
}
