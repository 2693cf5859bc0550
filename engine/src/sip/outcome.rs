//! What an inbound call did, as the final response tells the provider.
//!
//! Every call we accept for routing gets the line's reject code (603 by
//! default) whatever it did: completed a verification, found no pending
//! verification on the number, or came from a withheld caller. The code
//! cannot tell these apart, so the final response carries a
//! `Warning: 399 dialproof "<text>"` header (RFC 3261 s20.43; warn-code 399
//! is "miscellaneous", free text for people and logs). A peer that does not
//! know it ignores it, as RFC 3261 lets every peer do with a Warning; the
//! provider's logs and `dialproof-sim` show what happened without access
//! to the service's own log.
//!
//! Not for: choosing the outcome (the binary's call path does) or the
//! status code (the line's `reject_code`).

/// The outcome of a call that reached one of a line's numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallOutcome {
    /// The call completed the verification leased on the number.
    Completed,
    /// No verification is pending on the number (never leased, expired,
    /// cancelled, or ended while the call was decided): nothing changed.
    NoPendingVerification,
    /// The caller's number is withheld: the verification stays pending.
    CallerWithheld,
    /// The caller ID's trust is below the line's `min_caller_id_trust`:
    /// the verification stays pending.
    CallerIdUntrusted,
    /// The call could not be recorded (a storage error): nothing changed.
    NotRecorded,
}

/// Every outcome, for parsing and tests.
const ALL: [CallOutcome; 5] = [
    CallOutcome::Completed,
    CallOutcome::NoPendingVerification,
    CallOutcome::CallerWithheld,
    CallOutcome::CallerIdUntrusted,
    CallOutcome::NotRecorded,
];

impl CallOutcome {
    /// The warning's text (no quote or backslash, so it needs no escape).
    pub fn text(self) -> &'static str {
        match self {
            CallOutcome::Completed => "verification completed",
            CallOutcome::NoPendingVerification => "no verification pending on this number",
            CallOutcome::CallerWithheld => "caller number withheld, verification still pending",
            CallOutcome::CallerIdUntrusted => {
                "caller ID below the line's minimum trust, verification still pending"
            }
            CallOutcome::NotRecorded => "call not recorded",
        }
    }

    /// The API's name of the outcome (test mode's `simulate-call` answers
    /// with it).
    pub fn code(self) -> &'static str {
        match self {
            CallOutcome::Completed => "completed",
            CallOutcome::NoPendingVerification => "no_pending_verification",
            CallOutcome::CallerWithheld => "caller_withheld",
            CallOutcome::CallerIdUntrusted => "caller_id_untrusted",
            CallOutcome::NotRecorded => "not_recorded",
        }
    }

    /// The whole `Warning` header value.
    pub fn warning(self) -> &'static str {
        match self {
            CallOutcome::Completed => "399 dialproof \"verification completed\"",
            CallOutcome::NoPendingVerification => {
                "399 dialproof \"no verification pending on this number\""
            }
            CallOutcome::CallerWithheld => {
                "399 dialproof \"caller number withheld, verification still pending\""
            }
            CallOutcome::CallerIdUntrusted => {
                "399 dialproof \"caller ID below the line's minimum trust, verification still pending\""
            }
            CallOutcome::NotRecorded => "399 dialproof \"call not recorded\"",
        }
    }

    /// The outcome a `Warning` header value names, if it is one of ours.
    pub fn from_warning(value: &str) -> Option<CallOutcome> {
        ALL.into_iter().find(|o| o.warning() == value.trim())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sip::response::PRODUCT;

    #[test]
    fn each_warning_is_code_399_our_agent_and_its_quoted_text() {
        for o in ALL {
            assert_eq!(
                o.warning(),
                format!("399 {PRODUCT} \"{}\"", o.text()),
                "the Warning header (RFC 3261 s20.43) of {o:?}"
            );
            assert!(!o.text().contains(['"', '\\']), "{o:?} needs no escape");
            assert_eq!(CallOutcome::from_warning(o.warning()), Some(o));
        }
        assert_eq!(CallOutcome::from_warning("399 other \"x\""), None);
    }
}
