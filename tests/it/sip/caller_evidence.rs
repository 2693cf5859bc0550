//! How far the network vouches for a caller ID, over real UDP: sipp plays
//! the provider's gateway, and each completed verification reports the
//! header its caller was read from (`caller_id_source`) and what it is
//! worth (`caller_id_trust`), in the API object, after a restart, and in
//! the dashboard's list. Pins the README's "How much a caller ID is worth".

use crate::support::dashboard::*;
use crate::support::sip::*;
use crate::support::*;

/// A line like [`trusted_line`] (rejecting with the default 603) with
/// extra settings.
fn line_with(count: u64, extra: &str) -> String {
    format!(
        "[[lines]]\nname = \"gw\"\nmode = \"always_up\"\nprovider_addresses = [\"127.0.0.1\"]\n\
         {extra}\n\
         numbers = [ {{ range_start = \"+{LINE_START}\", count = {count}, pool = \"domestic\" }} ]\n"
    )
}

/// One call's headers and what the verification must record.
struct Case {
    name: &'static str,
    from: String,
    headers: &'static str,
    caller: &'static str,
    source: &'static str,
    trust: &'static str,
}

fn case(
    name: &'static str,
    from: String,
    headers: &'static str,
    want: (&'static str, &'static str, &'static str),
) -> Case {
    Case {
        name,
        from,
        headers,
        caller: want.0,
        source: want.1,
        trust: want.2,
    }
}

/// A pending verification, the call `c` to its number (rejected with 603,
/// multi-line `headers` joined as sipp reads them), and the row after it.
fn run_case(server: &Server, token: &str, c: &Case) -> (String, serde_json::Value) {
    let v = server.create_ok(token, &body(RU_PHONE));
    let id = v["verification_id"].as_str().unwrap().to_owned();
    let dial = v["dial_number"].as_str().unwrap().to_owned();
    let dir = workdir();
    let headers = if c.headers.is_empty() {
        "X-Test: evidence"
    } else {
        c.headers
    };
    let sf = scenario(
        dir.path(),
        "call.xml",
        &[
            ("FROM_HEADER", &c.from),
            ("HEADERS", headers),
            ("CODE", "603"),
        ],
    );
    let out = run_uac(dir.path(), &sf, sip_addr(server), &dial, "127.0.0.1", 1);
    assert_sipp_ok(&out, dir.path(), server);
    let got = server.get(token, &id);
    assert_eq!(got.status, 200, "{}", got.text());
    let got = got.json();
    assert_eq!(got["status"], "completed", "case {}: {got}", c.name);
    assert_verification(&got);
    (id, got)
}

fn check(c: &Case, got: &serde_json::Value) {
    assert_eq!(
        (
            got["caller_id_received"].as_str(),
            got["caller_id_source"].as_str(),
            got["caller_id_trust"].as_str()
        ),
        (Some(c.caller), Some(c.source), Some(c.trust)),
        "case {:?}: {got}",
        c.name
    );
}

/// Every source and trust a line that trusts its provider can report.
fn trusted_cases() -> Vec<Case> {
    let plain = from_user("89161234567");
    vec![
        case(
            "bare From",
            plain.clone(),
            "",
            ("+79161234567", "from", "unverified"),
        ),
        case(
            "P-Asserted-Identity without a verdict",
            from_user("gateway"),
            "P-Asserted-Identity: <sip:+79035550102@127.0.0.1;user=phone>",
            ("+79035550102", "p_asserted_identity", "asserted"),
        ),
        case(
            "tel: P-Asserted-Identity with TN-Validation-Passed",
            plain.clone(),
            "P-Asserted-Identity: \"Ivan\" <tel:+7-903-555-01-03;verstat=TN-Validation-Passed>",
            ("+79035550103", "p_asserted_identity", "verified"),
        ),
        case(
            "P-Asserted-Identity with TN-Validation-Failed",
            plain.clone(),
            "P-Asserted-Identity: <sip:+79035550104@127.0.0.1;user=phone;verstat=TN-Validation-Failed>",
            ("+79035550104", "p_asserted_identity", "failed"),
        ),
        case(
            "P-Asserted-Identity with No-TN-Validation",
            plain.clone(),
            "P-Asserted-Identity: <tel:+79035550105;verstat=No-TN-Validation>",
            ("+79035550105", "p_asserted_identity", "asserted"),
        ),
        case(
            "Remote-Party-ID",
            plain.clone(),
            "Remote-Party-ID: <sip:+79035550106@127.0.0.1>;party=calling;screen=yes",
            ("+79035550106", "remote_party_id", "unverified"),
        ),
        case(
            "Remote-Party-ID with TN-Validation-Passed",
            plain.clone(),
            "Remote-Party-ID: <sip:+79035550107@127.0.0.1;verstat=TN-Validation-Passed>;party=calling",
            ("+79035550107", "remote_party_id", "verified"),
        ),
        case(
            "From with TN-Validation-Passed in its URI",
            "<sip:+79161234568@[local_ip]:[local_port];verstat=TN-Validation-Passed>".into(),
            "",
            ("+79161234568", "from", "verified"),
        ),
        case(
            "From with TN-Validation-Failed as a header parameter",
            "<sip:+79161234569@[local_ip]:[local_port]>;verstat=TN-Validation-Failed".into(),
            "",
            ("+79161234569", "from", "failed"),
        ),
    ]
}

#[test]
fn each_source_and_verdict_of_a_trusted_provider_is_recorded_and_survives_a_restart() {
    let cases = trusted_cases();
    let mut server = Server::start(&sip_config(&line_with(cases.len() as u64, "")));
    let company = server.create_company("Acme");
    let token = server.create_key(company);
    let mut done = Vec::new();
    for c in &cases {
        let (id, got) = run_case(&server, &token, c);
        check(c, &got);
        done.push(id);
    }
    // Stored with the row: the same after a restart.
    server.restart();
    for (c, id) in cases.iter().zip(&done) {
        let got = server.get(&token, id).json();
        check(c, &got);
    }
    // And in the dashboard's list, as "trust (source)" in its own column.
    create_user(&server, company, "ann@acme.test");
    let page = Dash::login(&server, "ann@acme.test").get("/dashboard/verifications/");
    assert_eq!(page.status, 200, "{}", page.text());
    let html = page.text();
    for c in &cases {
        let cell = format!(
            "<td class=\"caller-id-trust\">{} ({})</td>",
            c.trust, c.source
        );
        assert!(
            html.contains(&cell),
            "dashboard has no {cell} for case {:?}",
            c.name
        );
    }
}

#[test]
fn a_verdict_from_a_provider_the_line_does_not_trust_is_ignored() {
    // The line does not trust its provider to assert identities: its PAI
    // is not read at all and any verstat is anyone's claim.
    let cases = [
        case(
            "PAI and From both claiming TN-Validation-Passed",
            "<sip:+79161234567@[local_ip]:[local_port];verstat=TN-Validation-Passed>".into(),
            "P-Asserted-Identity: <tel:+79035550103;verstat=TN-Validation-Passed>",
            ("+79161234567", "from", "unverified"),
        ),
        case(
            "Remote-Party-ID claiming TN-Validation-Passed",
            from_user("89161234567"),
            "Remote-Party-ID: <sip:+79035550107@127.0.0.1;verstat=TN-Validation-Passed>;party=calling",
            ("+79035550107", "remote_party_id", "unverified"),
        ),
    ];
    let server = Server::start(&sip_config(&line_with(
        cases.len() as u64,
        "trust_asserted_identity = false",
    )));
    let token = server.new_client("Acme");
    for c in &cases {
        let (_, got) = run_case(&server, &token, c);
        check(c, &got);
    }
}

#[test]
fn a_pending_verification_has_neither_field() {
    let server = Server::start(&sip_config(&line_with(1, "")));
    let token = server.new_client("Acme");
    let v = server.create_ok(&token, &body(RU_PHONE));
    assert!(
        v["caller_id_source"].is_null() && v["caller_id_trust"].is_null(),
        "{v}"
    );
    assert_verification(&v);
}

#[test]
/// Pins tools/deploy/README.md, "SIP lines", "Minimum caller-ID trust" (and
/// the README's `min_caller_id_trust` sentence).
fn a_call_below_the_lines_minimum_trust_is_rejected_and_the_verification_stays_pending() {
    let (server, ops) = start_with_ops(&sip_config(&line_with(
        1,
        "reject_code = 486\nmin_caller_id_trust = \"asserted\"",
    )));
    let token = server.new_client("Acme");
    let v = server.create_ok(&token, &body(RU_PHONE));
    let id = v["verification_id"].as_str().unwrap().to_owned();
    let dial = v["dial_number"].as_str().unwrap().to_owned();
    let dir = workdir();
    let call = |from: &str, headers: &str| {
        let sf = scenario(
            dir.path(),
            "call.xml",
            &[("FROM_HEADER", from), ("HEADERS", headers), ("CODE", "486")],
        );
        let out = run_uac(dir.path(), &sf, sip_addr(&server), &dial, "127.0.0.1", 1);
        assert_sipp_ok(&out, dir.path(), &server);
    };
    // From only: `unverified`, below `asserted`: the line's reject code,
    // and the verification waits for a call the network vouches for.
    call(&from_user("89161234567"), "X-Test: from only");
    let got = server.get(&token, &id).json();
    assert_eq!(
        got["status"], "pending",
        "min_caller_id_trust = asserted: {got}"
    );
    assert!(got["caller_id_source"].is_null(), "{got}");
    assert_eq!(
        count_logs(&server, "caller ID trust below the line's minimum"),
        1
    );
    let rejected = "dialproof_sip_calls_total{outcome=\"caller_id_untrusted\"}";
    assert_eq!(metric(ops, rejected), Some(1.0));
    // A provider's TN-Validation-Failed ranks with unverified: refused too.
    call(
        &from_user("89161234567"),
        "P-Asserted-Identity: <tel:+79161234567;verstat=TN-Validation-Failed>",
    );
    assert_eq!(server.get(&token, &id).json()["status"], "pending");
    assert_eq!(metric(ops, rejected), Some(2.0));
    // An asserted identity meets the minimum and completes it.
    call(
        &from_user("89161234567"),
        "P-Asserted-Identity: <tel:+79161234567>",
    );
    let got = server.get(&token, &id).json();
    assert_eq!(got["status"], "completed", "{got}");
    assert_eq!(got["caller_id_trust"], "asserted");
    assert_eq!(metric(ops, rejected), Some(2.0));
}
