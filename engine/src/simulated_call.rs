//! Test mode's simulated call: the body of `simulate-call`, the caller it
//! names read like a line of the pool's kind reads a caller ID, and the
//! decision a real INVITE to the verification's number would get.
//!
//! The decision follows the inbound call path's order (the binary's
//! `sip/calls.rs`): a number no longer leased to the verification is
//! `NoPendingVerification` and changes nothing; a withheld caller is
//! `CallerWithheld` and leaves it pending; otherwise the call becomes the
//! same [`Event::Call`] a real call submits, and the storage writer applies
//! it with [`crate::verification::apply`] in the same transaction, so a
//! call at or after `expires_at` is refused there exactly as a real late
//! call is. The evidence says `simulated` for source and trust: no network
//! vouched for anything. There is no line, so no line's minimum trust.
//!
//! Not for: who may simulate (test keys only: the binary's API), or
//! committing the event (storage).

use crate::caller_evidence::{CallerEvidence, CallerIdSource, CallerIdTrust};
use crate::sip::number::{to_e164, Region};
use crate::sip::outcome::CallOutcome;
use crate::time::UnixMillis;
use crate::verification::Event;

/// The caller a simulated call presents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SimulatedCaller {
    /// `"caller_id": null`: no number, as a call with a withheld caller ID.
    Withheld,
    /// The caller ID as sent (read later, in the pool's region).
    Number(String),
}

/// Why a `simulate-call` body is refused (a 400 naming `caller_id`, or the
/// whole body).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyError {
    /// Not a JSON object.
    NotAnObject,
    /// No `caller_id` member.
    Missing,
    /// `caller_id` is neither a string nor null.
    WrongType,
    /// `caller_id` is a string no line would read as a phone number.
    NotANumber,
}

impl BodyError {
    /// The message the 400 carries.
    pub fn message(self) -> &'static str {
        match self {
            BodyError::NotAnObject => "The request body must be a JSON object.",
            BodyError::Missing => "This field is required.",
            BodyError::WrongType => "Must be a string or null.",
            BodyError::NotANumber => {
                "Not a phone number a line could read (E.164, or a national number of the \
                 pool's country)."
            }
        }
    }

    /// Whether the error is about `caller_id` (else about the whole body).
    pub fn is_field(self) -> bool {
        self != BodyError::NotAnObject
    }
}

/// The caller of a `simulate-call` body: `{"caller_id": "<number>"}` or
/// `{"caller_id": null}`; other members are ignored.
pub fn parse_body(body: &[u8]) -> Result<SimulatedCaller, BodyError> {
    let value: serde_json::Value =
        serde_json::from_slice(body).map_err(|_| BodyError::NotAnObject)?;
    let object = value.as_object().ok_or(BodyError::NotAnObject)?;
    match object.get("caller_id") {
        None => Err(BodyError::Missing),
        Some(serde_json::Value::Null) => Ok(SimulatedCaller::Withheld),
        Some(serde_json::Value::String(s)) => Ok(SimulatedCaller::Number(s.clone())),
        Some(_) => Err(BodyError::WrongType),
    }
}

/// The caller in E.164 as a line of `region` would read it (a withheld one
/// stays withheld), or why it is not a number.
pub fn read_caller(caller: SimulatedCaller, region: Region) -> Result<SimulatedCaller, BodyError> {
    match caller {
        SimulatedCaller::Withheld => Ok(SimulatedCaller::Withheld),
        SimulatedCaller::Number(raw) => to_e164(&raw, region)
            .map(SimulatedCaller::Number)
            .ok_or(BodyError::NotANumber),
    }
}

/// The evidence of a simulated call.
pub const EVIDENCE: CallerEvidence = CallerEvidence {
    source: CallerIdSource::Simulated,
    trust: CallerIdTrust::Simulated,
};

/// What a simulated call at `at` does: the outcome it ends with now, or the
/// event to commit (whose result decides between `Completed` and
/// `NoPendingVerification`). `leased` says whether the verification's
/// number is still leased to it.
pub fn decide(leased: bool, caller: SimulatedCaller, at: UnixMillis) -> Result<Event, CallOutcome> {
    if !leased {
        return Err(CallOutcome::NoPendingVerification);
    }
    match caller {
        SimulatedCaller::Withheld => Err(CallOutcome::CallerWithheld),
        SimulatedCaller::Number(caller) => Ok(Event::Call {
            at,
            caller,
            evidence: EVIDENCE,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ru() -> Region {
        Region::parse("RU").unwrap()
    }

    #[test]
    fn bodies() {
        assert_eq!(
            parse_body(br#"{"caller_id": "89161234567", "x": 1}"#),
            Ok(SimulatedCaller::Number("89161234567".into()))
        );
        assert_eq!(
            parse_body(br#"{"caller_id": null}"#),
            Ok(SimulatedCaller::Withheld)
        );
        assert_eq!(parse_body(b"{}"), Err(BodyError::Missing));
        assert_eq!(
            parse_body(br#"{"caller_id": 7}"#),
            Err(BodyError::WrongType)
        );
        assert_eq!(parse_body(b"[1]"), Err(BodyError::NotAnObject));
        assert_eq!(parse_body(b"{"), Err(BodyError::NotAnObject));
        assert_eq!(parse_body(b""), Err(BodyError::NotAnObject));
    }

    #[test]
    fn a_caller_is_read_like_a_line_of_the_region_reads_it() {
        let read = |s: &str| read_caller(SimulatedCaller::Number(s.into()), ru());
        assert_eq!(
            read("89161234567"),
            Ok(SimulatedCaller::Number("+79161234567".into()))
        );
        assert_eq!(
            read("+7 (916) 123-45-67"),
            Ok(SimulatedCaller::Number("+79161234567".into()))
        );
        assert_eq!(read("anonymous"), Err(BodyError::NotANumber));
        assert_eq!(
            read_caller(SimulatedCaller::Withheld, ru()),
            Ok(SimulatedCaller::Withheld)
        );
    }

    #[test]
    fn the_order_of_a_real_call() {
        let at = UnixMillis(5);
        let number = SimulatedCaller::Number("+79161234567".into());
        assert_eq!(
            decide(false, number.clone(), at),
            Err(CallOutcome::NoPendingVerification),
            "a number no longer leased comes first, as on a line"
        );
        assert_eq!(
            decide(true, SimulatedCaller::Withheld, at),
            Err(CallOutcome::CallerWithheld)
        );
        assert_eq!(
            decide(true, number, at),
            Ok(Event::Call {
                at,
                caller: "+79161234567".into(),
                evidence: EVIDENCE
            })
        );
    }
}
