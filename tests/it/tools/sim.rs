//! `dialproof-sim` (tools/src/bin/dialproof-sim.rs) against the real
//! service: `call` completes a leased verification with the caller as
//! given and says so, says "nothing changed" (and exits 1) for a number
//! with no pending verification and for a withheld caller, as the README's
//! "A first verification" shows; `registrar` accepts a `register` line's
//! digest REGISTER (and refuses a wrong password).
//!
//! Not for: SIP with sipp or Kamailio (`sip`).

use crate::support::sip::*;
use crate::support::tools::tool;
use crate::support::*;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

fn sim() -> PathBuf {
    tool("dialproof-sim")
}

/// Kills the registrar when the test ends, however it ends.
struct Registrar(Child);

impl Drop for Registrar {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn registrar(port: u16, user: &str, password: &str) -> Registrar {
    Registrar(
        Command::new(sim())
            .args(["registrar", "--listen", &format!("127.0.0.1:{port}")])
            .args(["--user", user, "--password", password, "--expires", "60"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawning dialproof-sim registrar"),
    )
}

/// README, "A first verification": `dialproof-sim call` completes
/// the leased verification with the caller as given.
#[test]
fn sim_call_completes_a_leased_verification_with_the_given_caller() {
    let server = Server::start(&sip_config(&trusted_line(2, 603)));
    let token = server.new_client("sim");
    let v = server.create_ok(&token, &body(RU_PHONE));
    let id = v["verification_id"].as_str().unwrap();
    let dial = v["dial_number"].as_str().unwrap();

    let (code, stdout) = run_sim_call(&server, &["--to", dial, "--from", "+79161234567"]);
    assert_eq!(code, 0, "a completing call exits 0:\n{stdout}");
    assert!(stdout.contains("<- 603"), "{stdout}");
    assert!(
        last_line(&stdout).starts_with("verification completed; call rejected with 603"),
        "{stdout}"
    );

    let r = server.get(&token, id);
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["status"], "completed", "{v}");
    assert_eq!(v["caller_id_received"], "+79161234567", "{v}");
    assert_verification(&v);
}

/// Runs `dialproof-sim call ARGS` against the server; its exit code and
/// its stdout and stderr together.
fn run_sim_call(server: &Server, args: &[&str]) -> (i32, String) {
    let out = sim_call_with(server, args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), format!("{stdout}{stderr}"))
}

fn last_line(out: &str) -> &str {
    out.lines().last().unwrap_or("")
}

/// The design choice: every call to a line's number is answered with the
/// line's reject code, so the service names what the call did in a
/// `Warning` header and the simulator reports that, not the code.
#[test]
fn sim_call_to_a_cancelled_number_says_nothing_changed() {
    let server = Server::start(&sip_config(&trusted_line(2, 603)));
    let token = server.new_client("sim");
    let v = server.create_ok(&token, &body(RU_PHONE));
    let id = v["verification_id"].as_str().unwrap();
    let dial = v["dial_number"].as_str().unwrap();
    let r = server.cancel(&token, id);
    assert_eq!(r.json()["status"], "expired", "{}", r.text());

    let (code, stdout) = run_sim_call(&server, &["--to", dial, "--from", "+79161234567"]);
    assert_eq!(code, 1, "a call that completes nothing exits 1:\n{stdout}");
    assert!(stdout.contains("<- 603"), "{stdout}");
    assert_eq!(
        last_line(&stdout),
        format!(
            "nothing changed: no verification is pending on {dial}; call rejected with 603 \
             without being answered: the caller pays nothing"
        ),
        "the simulator must not report a call to a number with no lease as a completion \
         (the service names the outcome in its Warning header)"
    );
    assert_eq!(server.get(&token, id).json()["status"], "expired");
}

#[test]
fn sim_withheld_call_says_the_verification_stays_pending() {
    let server = Server::start(&sip_config(&trusted_line(2, 603)));
    let token = server.new_client("sim");
    let v = server.create_ok(&token, &body(RU_PHONE));
    let id = v["verification_id"].as_str().unwrap();
    let dial = v["dial_number"].as_str().unwrap();

    let (code, stdout) = run_sim_call(&server, &["--to", dial, "--withheld"]);
    assert_eq!(code, 1, "{stdout}");
    assert!(
        last_line(&stdout).starts_with(
            "nothing changed: the caller's number is withheld, so the verification stays pending"
        ),
        "{stdout}"
    );
    assert_eq!(server.get(&token, id).json()["status"], "pending");
}

/// README, "A first verification": `dialproof-sim registrar`
/// accepts a `register` line's digest REGISTER.
#[test]
fn sim_registrar_accepts_the_lines_digest_register() {
    let port = free_udp_port();
    let _registrar = registrar(port, "74950000001", "s3cret-pass");
    let addr = format!("127.0.0.1:{port}").parse().unwrap();
    let server = Server::start(&sip_config(&register_line(
        addr,
        2,
        "74950000001",
        "s3cret-pass",
    )));
    server
        .wait_for_log(Duration::from_secs(15), |l| {
            l.contains("sip line registered") && l.contains("line=\"reg\"")
        })
        .unwrap_or_else(|| panic!("the line did not register:\n{}", server.logs()));
    // Registered, so its numbers are issued.
    let token = server.new_client("reg");
    server.create_ok(&token, &body(RU_PHONE));
}

#[test]
fn sim_registrar_refuses_a_wrong_password() {
    let port = free_udp_port();
    let _registrar = registrar(port, "74950000001", "s3cret-pass");
    let addr = format!("127.0.0.1:{port}").parse().unwrap();
    let server = Server::start(&sip_config(&register_line(
        addr,
        2,
        "74950000001",
        "wrong-pass",
    )));
    server
        .wait_for_log(Duration::from_secs(15), |l| {
            l.contains("sip registration failed")
        })
        .unwrap_or_else(|| panic!("no failed registration logged:\n{}", server.logs()));
    assert!(
        !server.logs().contains("sip line registered"),
        "{}",
        server.logs()
    );
    // Not registered, so its numbers are withheld.
    let token = server.new_client("reg");
    let r = server.create(&token, &body(RU_PHONE));
    assert_eq!(r.status, 503, "{}", r.text());
}
