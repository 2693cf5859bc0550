//! Which of our numbers an INVITE dialled, and so which line and which
//! verification it is for: the routing decision of an inbound call.
//!
//! Providers deliver a call to a DID in one of two ways:
//! - **DID in the Request-URI** (SIP trunks with IP authentication, most
//!   carriers' "route the number to this address"): `INVITE
//!   sip:+74960000001@us`, the dialled number is the Request-URI user.
//! - **Routing to the registered Contact** (registrars such as Kamailio's
//!   or Asterisk's `lookup("location")`, hosted PBXs, many consumer SIP
//!   accounts): the provider replaces the Request-URI with the Contact we
//!   registered, so its user is our Contact token, and the dialled number
//!   stays in `To` (or in `P-Called-Party-ID`, RFC 3455, where the provider
//!   sets it).
//!
//! A line says where to read it ([`CalledFrom`]); the default
//! [`CalledFrom::Auto`] takes the Request-URI user unless it is an address
//! of ours rather than a dialled number (our Contact token, or the line's
//! registration user name, which a provider may route by), and then
//! `P-Called-Party-ID` when present, else `To`. Our Contact token is never a
//! dialled number in any mode ([`contact_user`] makes it a token that no
//! phone number can be).
//!
//! [`route_invite`] returns a [`Route`]: the line and number, or why none
//! (with the header and the value read, for the log). A number that is not
//! one of the reading line's numbers is never used: it is a 404 (or a 403
//! when it belongs to another line), never the completion of another
//! number's verification.
//!
//! Not for: trusting the sender (the caller first keeps only the lines that
//! trust the datagram's source), the caller's identity (see
//! [`super::identity`]), or leases (the caller's `owner` closure asks the
//! lease table which line a number belongs to).

use super::message::Message;
use super::number::{to_e164, Region};
use super::uri::{NameAddr, Uri};
use sha2::{Digest, Sha256};

/// The prefix of every Contact token; a letter, so no phone number reader
/// ever takes a token for a number.
pub const CONTACT_USER_PREFIX: &str = "dp-";
/// Hex digits of the line-name hash in a Contact token (48 bits: distinct
/// for any realistic count of lines).
const CONTACT_USER_HASH_HEX: usize = 12;

/// Where a line reads the dialled number of an INVITE.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CalledFrom {
    /// The Request-URI user when it is not an address of ours, else
    /// `P-Called-Party-ID` when present, else `To`.
    #[default]
    Auto,
    RequestUri,
    To,
    PCalledPartyId,
}

impl CalledFrom {
    /// The configuration spelling: `auto`, `request_uri`, `to`,
    /// `p_called_party_id`.
    pub fn parse(text: &str) -> Option<CalledFrom> {
        match text {
            "auto" => Some(CalledFrom::Auto),
            "request_uri" => Some(CalledFrom::RequestUri),
            "to" => Some(CalledFrom::To),
            "p_called_party_id" => Some(CalledFrom::PCalledPartyId),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            CalledFrom::Auto => "auto",
            CalledFrom::RequestUri => "request_uri",
            CalledFrom::To => "to",
            CalledFrom::PCalledPartyId => "p_called_party_id",
        }
    }
}

/// The header a dialled number was read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Header {
    RequestUri,
    To,
    PCalledPartyId,
}

impl Header {
    pub fn as_str(self) -> &'static str {
        match self {
            Header::RequestUri => "request-uri",
            Header::To => "to",
            Header::PCalledPartyId => "p-called-party-id",
        }
    }
}

/// The Contact user a line registers: `dp-` and 12 hex digits of a hash of
/// the line's name. Stable across restarts (a refresh replaces the binding
/// instead of adding one) and never a phone number.
pub fn contact_user(line_name: &str) -> String {
    let digest = Sha256::digest(format!("dialproof-contact:{line_name}").as_bytes());
    let mut token = String::from(CONTACT_USER_PREFIX);
    token.push_str(&hex::encode(digest)[..CONTACT_USER_HASH_HEX]);
    token
}

/// One line that trusts the INVITE's source, as routing sees it.
#[derive(Clone, Copy, Debug)]
pub struct LineRoute<'a, L> {
    /// The caller's name for the line (compared with what `owner` returns).
    pub line: L,
    pub region: Region,
    pub called_from: CalledFrom,
    /// The user part of the Contact this line registers.
    pub contact_user: &'a str,
    /// The registration user name (address-of-record user), if any.
    pub aor_user: Option<&'a str>,
}

/// The routing decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route<L> {
    /// `number` (E.164) is one of `line`'s numbers.
    Line {
        line: L,
        number: String,
        header: Header,
    },
    /// The number read belongs to a line that does not trust this source:
    /// not this provider's to deliver (403).
    OtherLine { number: String, header: Header },
    /// Nothing that is one of our numbers (404). `header` and `value` say
    /// what was read (`value` is empty when the header was missing).
    NotOurs { header: Header, value: String },
}

/// Decides which of `lines` (those that trust the source, in configuration
/// order) an INVITE is for. `owner` names the line a number (E.164)
/// belongs to, if any.
pub fn route_invite<L: Copy + PartialEq>(
    msg: &Message,
    lines: &[LineRoute<'_, L>],
    owner: impl Fn(&str) -> Option<L>,
) -> Route<L> {
    let mut miss: Option<(Header, String)> = None;
    let mut other: Option<(String, Header)> = None;
    for line in lines {
        let (header, value) = read_called(msg, line);
        let Some(value) = value.filter(|v| v != line.contact_user) else {
            miss.get_or_insert((header, String::new()));
            continue;
        };
        for number in candidates(&value, line.region) {
            match owner(&number) {
                Some(l) if l == line.line => {
                    return Route::Line {
                        line: line.line,
                        number,
                        header,
                    }
                }
                Some(_) => {
                    other.get_or_insert((number, header));
                }
                None => {}
            }
        }
        miss.get_or_insert((header, value));
    }
    match (other, miss) {
        (Some((number, header)), _) => Route::OtherLine { number, header },
        (None, Some((header, value))) => Route::NotOurs { header, value },
        (None, None) => Route::NotOurs {
            header: Header::RequestUri,
            value: String::new(),
        },
    }
}

/// The header `line` reads and the user part found there, if any.
fn read_called(msg: &Message, line: &LineRoute<'_, impl Copy>) -> (Header, Option<String>) {
    match line.called_from {
        CalledFrom::RequestUri => (Header::RequestUri, request_uri_user(msg)),
        CalledFrom::To => (Header::To, name_addr_user(msg, "To")),
        CalledFrom::PCalledPartyId => (
            Header::PCalledPartyId,
            name_addr_user(msg, "P-Called-Party-ID"),
        ),
        CalledFrom::Auto => {
            let ruri = request_uri_user(msg);
            let ours = |u: &String| u == line.contact_user || Some(u.as_str()) == line.aor_user;
            if ruri.as_ref().is_some_and(|u| !ours(u)) {
                return (Header::RequestUri, ruri);
            }
            if let Some(v) = name_addr_user(msg, "P-Called-Party-ID") {
                return (Header::PCalledPartyId, Some(v));
            }
            match name_addr_user(msg, "To") {
                Some(v) => (Header::To, Some(v)),
                // Routed by the registration user name and no To user: the
                // name itself is all there is (a number of the line or not).
                None => (Header::RequestUri, ruri),
            }
        }
    }
}

/// The ways a dialled user part can name one of our numbers: as the line's
/// region reads it, and (for digits without `+`) as international digits
/// that left out the `+`, which many providers send. A candidate counts
/// only if it is one of our numbers, so the second reading never routes a
/// call to a number that was not configured.
fn candidates(value: &str, region: Region) -> Vec<String> {
    let mut out = Vec::with_capacity(2);
    if let Some(n) = to_e164(value, region) {
        out.push(n);
    }
    if !value.starts_with('+') {
        if let Some(n) = to_e164(&format!("+{value}"), region) {
            if !out.contains(&n) {
                out.push(n);
            }
        }
    }
    out
}

fn request_uri_user(msg: &Message) -> Option<String> {
    let uri = Uri::parse(msg.request_uri()?)?;
    uri.user().map(str::to_owned)
}

fn name_addr_user(msg: &Message, header: &str) -> Option<String> {
    let addr = NameAddr::parse(msg.header(header)?)?;
    addr.uri.user().map(str::to_owned)
}

#[cfg(test)]
#[path = "route_tests.rs"]
mod tests;
