//! CANCEL over real UDP. The server's storage is slowed by a fail point
//! (`writer.before_commit=delay(..)`, a slow disk), so the call's commit,
//! and with it the final response, comes after the CANCEL deterministically.
//!
//! Not for: cancelling a verification over the API (`api::read_cancel`).

use crate::support::sip::*;
use crate::support::*;

#[test]
fn cancel_before_the_final_gets_200_and_487_and_the_call_still_counts() {
    let mut server = Server::prepare(&sip_config(&trusted_line(3, 603)));
    server.set_env("DIALPROOF_FAILPOINTS", "writer.before_commit=delay(1500)");
    server.launch();
    let token = server.new_client("Acme");
    let v = server.create_ok(&token, &body(RU_PHONE));
    let id = v["verification_id"].as_str().unwrap();
    let dial = v["dial_number"].as_str().unwrap();
    let dir = workdir();
    let sf = scenario(
        dir.path(),
        "cancel.xml",
        &[("FROM_HEADER", &from_user("89161234567"))],
    );
    let out = run_uac(dir.path(), &sf, sip_addr(&server), dial, "127.0.0.1", 1);
    assert_sipp_ok(&out, dir.path(), &server);
    wait_log_line(&server, "487 sent", std::time::Duration::from_secs(5));
    assert_eq!(count_logs(&server, "487 sent"), 1);
    // The INVITE carried the caller's number before the caller hung up:
    // the phone did call, so the verification completes.
    let done = poll(std::time::Duration::from_secs(5), || {
        let v = server.get(&token, id).json();
        (v["status"] == "completed").then_some(v)
    })
    .unwrap_or_else(|| panic!("not completed; logs:\n{}", server.logs()));
    assert_eq!(done["caller_id_received"], "+79161234567");
}
