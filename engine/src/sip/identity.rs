//! Who is calling, read from an INVITE (which of our numbers they dialled
//! is [`super::route`]'s).
//!
//! - Caller: the first source that says something, in this order:
//!   `Privacy: id` (or `header`, which hides it too: RFC 3323) means the
//!   caller withheld the number; then P-Asserted-Identity, but only when the
//!   line trusts its provider to assert identities (RFC 3325: a PAI from
//!   anyone else is a claim, not an assertion); then Remote-Party-ID (the
//!   pre-3325 draft many gateways still send, with its own `privacy=`); then
//!   From. A source whose URI is anonymous (`anonymous@anonymous.invalid`,
//!   user `anonymous`, RFC 3323 s4.1.1.3) means withheld; a source present
//!   but without a usable number is skipped. Nothing usable at all is
//!   withheld too.
//!
//! - Evidence: the caller comes with its [`CallerEvidence`]: the header it
//!   was read from and what it is worth, from that header's `verstat`
//!   (a URI parameter, as 3GPP TS 24.229 puts it, or a header parameter,
//!   where some gateways put it) and the line's trust in its provider
//!   ([`crate::caller_evidence::trust`]).
//!
//! Not for: trusting the sender (the caller checks that the datagram came
//! from the line's provider before using anything here).

use super::message::{split_commas, Message};
use super::number::{to_e164, Region};
use super::uri::NameAddr;
pub use crate::caller_evidence::CallerIdSource as Source;
use crate::caller_evidence::{trust, CallerEvidence, Verstat};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Caller {
    /// The caller's number, E.164.
    Number {
        e164: String,
        evidence: CallerEvidence,
    },
    Withheld(Withheld),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Withheld {
    /// `Privacy: id` / `header`, or Remote-Party-ID `privacy=full|uri`.
    PrivacyRequested,
    /// An anonymous URI.
    Anonymous,
    /// No header carried anything that reads as a phone number.
    NoUsableNumber,
}

impl Withheld {
    pub fn as_str(self) -> &'static str {
        match self {
            Withheld::PrivacyRequested => "privacy requested",
            Withheld::Anonymous => "anonymous",
            Withheld::NoUsableNumber => "no usable number",
        }
    }
}

/// The caller of an INVITE, see the module doc for the order.
pub fn caller(msg: &Message, region: Region, trust_asserted_identity: bool) -> Caller {
    let privacy_hides_id = msg.headers_named("Privacy").any(|v| {
        v.split([';', ','])
            .any(|t| matches!(t.trim().to_ascii_lowercase().as_str(), "id" | "header"))
    });
    if privacy_hides_id {
        return Caller::Withheld(Withheld::PrivacyRequested);
    }
    if trust_asserted_identity {
        let pai = first_in(
            msg,
            "P-Asserted-Identity",
            region,
            Source::PAssertedIdentity,
        );
        if let Some(c) = pai {
            return c.with_trust(trust_asserted_identity);
        }
    }
    let rest = [
        ("Remote-Party-ID", Source::RemotePartyId),
        ("From", Source::From),
    ];
    for (header, source) in rest {
        if let Some(c) = first_in(msg, header, region, source) {
            return c.with_trust(trust_asserted_identity);
        }
    }
    Caller::Withheld(Withheld::NoUsableNumber)
}

/// What [`first_in`] found, before the line's trust is applied.
enum Found {
    Number {
        e164: String,
        source: Source,
        verstat: Option<Verstat>,
    },
    Withheld(Withheld),
}

impl Found {
    fn with_trust(self, trusted_provider: bool) -> Caller {
        match self {
            Found::Number {
                e164,
                source,
                verstat,
            } => Caller::Number {
                e164,
                evidence: CallerEvidence {
                    source,
                    trust: trust(source, verstat, trusted_provider),
                },
            },
            Found::Withheld(w) => Caller::Withheld(w),
        }
    }
}

/// The `verstat` of a name-address: the URI's parameter, else the
/// header's. An unknown value is no verdict.
fn verstat_of(addr: &NameAddr) -> Option<Verstat> {
    let uri = addr.uri.param("verstat").flatten();
    uri.or_else(|| addr.param("verstat").flatten())
        .and_then(Verstat::parse)
}

/// The first value of `header` that says something about the caller.
fn first_in(msg: &Message, header: &str, region: Region, source: Source) -> Option<Found> {
    for value in msg.headers_named(header) {
        for part in split_commas(value) {
            let Some(addr) = NameAddr::parse(part) else {
                continue;
            };
            if source == Source::RemotePartyId {
                let party = addr.param("party").flatten().unwrap_or("calling");
                if !party.eq_ignore_ascii_case("calling") {
                    continue;
                }
                let privacy = addr.param("privacy").flatten().unwrap_or("off");
                if privacy.eq_ignore_ascii_case("full") || privacy.eq_ignore_ascii_case("uri") {
                    return Some(Found::Withheld(Withheld::PrivacyRequested));
                }
            }
            if is_anonymous(&addr) {
                return Some(Found::Withheld(Withheld::Anonymous));
            }
            if let Some(e164) = addr.uri.user().and_then(|u| to_e164(u, region)) {
                let verstat = verstat_of(&addr);
                return Some(Found::Number {
                    e164,
                    source,
                    verstat,
                });
            }
        }
    }
    None
}

fn is_anonymous(addr: &NameAddr) -> bool {
    let user_anonymous = addr.uri.user().is_some_and(|u| {
        u.eq_ignore_ascii_case("anonymous") || u.eq_ignore_ascii_case("restricted")
    });
    let host_anonymous = addr
        .uri
        .host()
        .is_some_and(|h| h.eq_ignore_ascii_case("anonymous.invalid"));
    user_anonymous || host_anonymous
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::caller_evidence::CallerIdTrust;

    fn ru() -> Region {
        Region::parse("RU").unwrap()
    }

    fn invite(ruri: &str, extra: &str) -> Message {
        let text = format!(
            "INVITE {ruri} SIP/2.0\r\nVia: SIP/2.0/UDP 10.0.0.1;branch=z9hG4bK1\r\n\
             To: <sip:84950000001@gw>\r\nCall-ID: c\r\nCSeq: 1 INVITE\r\n{extra}\r\n"
        );
        Message::parse(text.as_bytes()).unwrap()
    }

    /// A caller without a verdict (its trust follows from the source).
    fn number(e164: &str, source: Source) -> Caller {
        with_trust(e164, source, trust(source, None, true))
    }

    fn with_trust(e164: &str, source: Source, trust: CallerIdTrust) -> Caller {
        Caller::Number {
            e164: e164.to_owned(),
            evidence: CallerEvidence { source, trust },
        }
    }

    #[test]
    fn verstat_on_the_header_the_caller_was_read_from() {
        use CallerIdTrust::*;
        let cases = [
            // A tel: PAI carrying the verdict as a URI parameter.
            (
                "From: <sip:89000000001@h>;tag=1\r\n\
                 P-Asserted-Identity: <tel:+79000000003;verstat=TN-Validation-Passed>\r\n",
                "+79000000003",
                Source::PAssertedIdentity,
                Verified,
            ),
            (
                "From: <sip:89000000001@h>;tag=1\r\n\
                 P-Asserted-Identity: <sip:+79000000003@h;user=phone;verstat=TN-Validation-Failed>\r\n",
                "+79000000003",
                Source::PAssertedIdentity,
                Failed,
            ),
            (
                "From: <sip:89000000001@h>;tag=1\r\n\
                 P-Asserted-Identity: <sip:+79000000003@h;verstat=No-TN-Validation>\r\n",
                "+79000000003",
                Source::PAssertedIdentity,
                Asserted,
            ),
            // On From, as a URI parameter and as a header parameter.
            (
                "From: <sip:+79000000001@h;verstat=TN-Validation-Passed>;tag=1\r\n",
                "+79000000001",
                Source::From,
                Verified,
            ),
            (
                "From: <tel:+79000000001>;tag=1;verstat=TN-Validation-Failed\r\n",
                "+79000000001",
                Source::From,
                Failed,
            ),
            // The verdict of a header the caller was not read from counts
            // for nothing.
            (
                "From: <sip:+79000000001@h;verstat=TN-Validation-Passed>;tag=1\r\n\
                 P-Asserted-Identity: <sip:+79000000003@h>\r\n",
                "+79000000003",
                Source::PAssertedIdentity,
                Asserted,
            ),
        ];
        for (headers, e164, source, trusted) in cases {
            let m = invite("sip:1@us", headers);
            assert_eq!(
                caller(&m, ru(), true),
                with_trust(e164, source, trusted),
                "{headers}"
            );
            // Without trust in the provider its PAI is not read at all, and
            // a verdict is ignored.
            let want = match source {
                Source::PAssertedIdentity => with_trust("+79000000001", Source::From, Unverified),
                _ => with_trust(e164, source, Unverified),
            };
            assert_eq!(caller(&m, ru(), false), want, "untrusted: {headers}");
        }
    }

    #[test]
    fn caller_order_pai_rpid_from() {
        let all = "From: <sip:89000000001@h>;tag=1\r\n\
                   Remote-Party-ID: <sip:89000000002@h>;party=calling;screen=yes\r\n\
                   P-Asserted-Identity: \"X\" <sip:+79000000003@h>, <tel:+79000000004>\r\n";
        let m = invite("sip:1@us", all);
        assert_eq!(
            caller(&m, ru(), true),
            number("+79000000003", Source::PAssertedIdentity)
        );
        // An untrusted provider's PAI is ignored.
        assert_eq!(
            caller(&m, ru(), false),
            number("+79000000002", Source::RemotePartyId)
        );
        let m = invite("sip:1@us", "From: \"Ivan\" <sip:89000000001@h>;tag=1\r\n");
        assert_eq!(caller(&m, ru(), true), number("+79000000001", Source::From));
        let m = invite("sip:1@us", "From: <tel:+7-900-000-00-05>;tag=1\r\n");
        assert_eq!(caller(&m, ru(), true), number("+79000000005", Source::From));
        let m = invite("sip:1@us", "From: <sips:9000000006@h>;tag=1\r\n");
        assert_eq!(caller(&m, ru(), true), number("+79000000006", Source::From));
        // A PAI without a number falls through to the next source.
        let m = invite(
            "sip:1@us",
            "From: <sip:89000000001@h>;tag=1\r\nP-Asserted-Identity: <sip:gw@h>\r\n",
        );
        assert_eq!(caller(&m, ru(), true), number("+79000000001", Source::From));
        // Remote-Party-ID of another party is not the caller.
        let m = invite(
            "sip:1@us",
            "From: <sip:89000000001@h>;tag=1\r\nRemote-Party-ID: <sip:89000000009@h>;party=called\r\n",
        );
        assert_eq!(caller(&m, ru(), true), number("+79000000001", Source::From));
    }

    #[test]
    fn withheld_callers() {
        let cases = [
            ("From: \"Anonymous\" <sip:anonymous@anonymous.invalid>;tag=1\r\n", Withheld::Anonymous),
            ("From: <sip:Anonymous@h>;tag=1\r\n", Withheld::Anonymous),
            ("From: <sip:89000000001@h>;tag=1\r\nPrivacy: id\r\n", Withheld::PrivacyRequested),
            ("From: <sip:89000000001@h>;tag=1\r\nPrivacy: user;Header\r\n", Withheld::PrivacyRequested),
            (
                "From: <sip:89000000001@h>;tag=1\r\nRemote-Party-ID: <sip:89000000002@h>;privacy=full\r\n",
                Withheld::PrivacyRequested,
            ),
            ("From: <sip:unknown@h>;tag=1\r\n", Withheld::NoUsableNumber),
            ("From: <sip:12@h>;tag=1\r\n", Withheld::NoUsableNumber),
            ("From: garbage\r\n", Withheld::NoUsableNumber),
        ];
        for (headers, want) in cases {
            let m = invite("sip:1@us", headers);
            assert_eq!(caller(&m, ru(), true), Caller::Withheld(want), "{headers}");
        }
        // `Privacy: none` hides nothing.
        let m = invite(
            "sip:1@us",
            "From: <sip:89000000001@h>;tag=1\r\nPrivacy: none\r\n",
        );
        assert_eq!(caller(&m, ru(), true), number("+79000000001", Source::From));
    }
}
