//! Every header combination of [`route_invite`], for each [`CalledFrom`].

use super::*;

/// Line 1 owns +7496000000x, line 2 owns +7497000000x; +441234567890 is
/// line 1's too (a foreign-country DID on a Russian line).
fn owner(number: &str) -> Option<u8> {
    if number.starts_with("+7496") || number == "+441234567890" {
        Some(1)
    } else if number.starts_with("+7497") {
        Some(2)
    } else {
        None
    }
}

fn ru() -> Region {
    Region::parse("RU").unwrap()
}

fn line(called_from: CalledFrom, contact: &str) -> LineRoute<'_, u8> {
    LineRoute {
        line: 1,
        region: ru(),
        called_from,
        contact_user: contact,
        aor_user: Some("74960000009"),
    }
}

fn invite(ruri: &str, to: &str, extra: &str) -> Message {
    let text = format!(
        "INVITE {ruri} SIP/2.0\r\nVia: SIP/2.0/UDP 10.0.0.1;branch=z9hG4bK1\r\n\
         From: <sip:89000000001@gw>;tag=1\r\nTo: {to}\r\nCall-ID: c\r\nCSeq: 1 INVITE\r\n{extra}\r\n"
    );
    Message::parse(text.as_bytes()).unwrap()
}

fn on_line(number: &str, header: Header) -> Route<u8> {
    Route::Line {
        line: 1,
        number: number.to_owned(),
        header,
    }
}

fn not_ours(header: Header, value: &str) -> Route<u8> {
    Route::NotOurs {
        header,
        value: value.to_owned(),
    }
}

const CONTACT: &str = "dp-0123456789ab";

#[test]
fn contact_token_is_stable_distinct_and_never_a_number() {
    let a = contact_user("reg");
    assert_eq!(a, contact_user("reg"));
    assert_ne!(a, contact_user("reg2"));
    assert!(a.starts_with(CONTACT_USER_PREFIX));
    assert_eq!(a.len(), CONTACT_USER_PREFIX.len() + 12);
    assert_eq!(to_e164(&a, ru()), None);
}

#[test]
fn auto_reads_the_request_uri_when_it_is_a_did() {
    let l = [line(CalledFrom::Auto, CONTACT)];
    let m = invite(
        "sip:74960000001@us",
        "<sip:74960000002@us>",
        "P-Called-Party-ID: <sip:74960000003@us>\r\n",
    );
    assert_eq!(
        route_invite(&m, &l, owner),
        on_line("+74960000001", Header::RequestUri)
    );
    // tel: and national format in the Request-URI.
    let m = invite("tel:8-496-000-00-04", "<sip:x@us>", "");
    assert_eq!(
        route_invite(&m, &l, owner),
        on_line("+74960000004", Header::RequestUri)
    );
}

#[test]
fn auto_routed_to_our_contact_reads_pcpi_then_to() {
    let l = [line(CalledFrom::Auto, CONTACT)];
    let ruri = format!("sip:{CONTACT}@127.0.0.1:5070");
    // The defect of issue 10: the Request-URI is our Contact, the DID in To.
    let m = invite(&ruri, "<sip:74960000001@127.0.0.1:5070>", "");
    assert_eq!(
        route_invite(&m, &l, owner),
        on_line("+74960000001", Header::To)
    );
    let m = invite(
        &ruri,
        "<sip:74960000001@us>",
        "P-Called-Party-ID: <tel:+74960000005>\r\n",
    );
    assert_eq!(
        route_invite(&m, &l, owner),
        on_line("+74960000005", Header::PCalledPartyId)
    );
    // Nothing readable besides our Contact: the Contact is never a number.
    let m = invite(&ruri, "<sip:trunk@us>", "");
    assert_eq!(route_invite(&m, &l, owner), not_ours(Header::To, "trunk"));
}

#[test]
fn auto_routed_by_the_registration_user_name_reads_to() {
    // tools/examples/production.toml's line: the user name is also one of
    // the line's numbers.
    let l = [line(CalledFrom::Auto, CONTACT)];
    let m = invite("sip:74960000009@us", "<sip:74960000001@us>", "");
    assert_eq!(
        route_invite(&m, &l, owner),
        on_line("+74960000001", Header::To)
    );
    // A call to the user name's own number still reaches it.
    let m = invite("sip:74960000009@us", "<sip:74960000009@us>", "");
    assert_eq!(
        route_invite(&m, &l, owner),
        on_line("+74960000009", Header::To)
    );
}

#[test]
fn auto_without_a_request_uri_user_reads_to() {
    let l = [line(CalledFrom::Auto, CONTACT)];
    let m = invite("sip:us.example", "<sip:84960000001@us>", "");
    assert_eq!(
        route_invite(&m, &l, owner),
        on_line("+74960000001", Header::To)
    );
}

#[test]
fn a_number_that_is_not_the_lines_is_404_with_header_and_value() {
    let l = [line(CalledFrom::Auto, CONTACT)];
    let m = invite("sip:74950000001@us", "<sip:74960000001@us>", "");
    // The Request-URI is a number, just not ours: never fall back to To.
    assert_eq!(
        route_invite(&m, &l, owner),
        not_ours(Header::RequestUri, "74950000001")
    );
    let ruri = format!("sip:{CONTACT}@us");
    let m = invite(&ruri, "<sip:74950000001@us>", "");
    assert_eq!(
        route_invite(&m, &l, owner),
        not_ours(Header::To, "74950000001")
    );
}

#[test]
fn another_lines_number_is_other_line() {
    let l = [line(CalledFrom::Auto, CONTACT)];
    let m = invite("sip:74970000001@us", "<sip:x@us>", "");
    assert_eq!(
        route_invite(&m, &l, owner),
        Route::OtherLine {
            number: "+74970000001".into(),
            header: Header::RequestUri
        }
    );
}

#[test]
fn fixed_modes_read_only_their_header() {
    let ruri = format!("sip:{CONTACT}@us");
    let m = invite(
        &ruri,
        "<sip:74960000001@us>",
        "P-Called-Party-ID: <sip:74960000002@us>\r\n",
    );
    let by = |c| route_invite(&m, &[line(c, CONTACT)], owner);
    // Our Contact is never a number, even where the line says to read it.
    assert_eq!(by(CalledFrom::RequestUri), not_ours(Header::RequestUri, ""));
    assert_eq!(by(CalledFrom::To), on_line("+74960000001", Header::To));
    assert_eq!(
        by(CalledFrom::PCalledPartyId),
        on_line("+74960000002", Header::PCalledPartyId)
    );
    let m = invite("sip:74960000003@us", "<sip:74960000001@us>", "");
    let by = |c| route_invite(&m, &[line(c, CONTACT)], owner);
    assert_eq!(
        by(CalledFrom::RequestUri),
        on_line("+74960000003", Header::RequestUri)
    );
    assert_eq!(by(CalledFrom::To), on_line("+74960000001", Header::To));
    assert_eq!(
        by(CalledFrom::PCalledPartyId),
        not_ours(Header::PCalledPartyId, "")
    );
}

#[test]
fn international_digits_without_plus_match_a_foreign_did() {
    let l = [line(CalledFrom::Auto, CONTACT)];
    let m = invite("sip:441234567890@us", "<sip:x@us>", "");
    assert_eq!(
        route_invite(&m, &l, owner),
        on_line("+441234567890", Header::RequestUri)
    );
    let m = invite("sip:+441234567890@us", "<sip:x@us>", "");
    assert_eq!(
        route_invite(&m, &l, owner),
        on_line("+441234567890", Header::RequestUri)
    );
}

#[test]
fn the_first_trusting_line_that_owns_the_number_wins() {
    let second = LineRoute {
        line: 2,
        region: ru(),
        called_from: CalledFrom::To,
        contact_user: "dp-ffffffffffff",
        aor_user: None,
    };
    let l = [line(CalledFrom::RequestUri, CONTACT), second];
    let m = invite("sip:74960000001@us", "<sip:74970000002@us>", "");
    assert_eq!(
        route_invite(&m, &l, owner),
        on_line("+74960000001", Header::RequestUri)
    );
    let m = invite("sip:74950000001@us", "<sip:74970000002@us>", "");
    assert_eq!(
        route_invite(&m, &l, owner),
        Route::Line {
            line: 2,
            number: "+74970000002".into(),
            header: Header::To
        }
    );
}

#[test]
fn no_lines_is_not_ours() {
    let m = invite("sip:74960000001@us", "<sip:x@us>", "");
    assert_eq!(
        route_invite::<u8>(&m, &[], owner),
        not_ours(Header::RequestUri, "")
    );
}
