//! How far the network vouches for a caller ID: which header the caller was
//! read from ([`CallerIdSource`]) and what that header is worth
//! ([`CallerIdTrust`]), decided by [`trust`] from the header's STIR/SHAKEN
//! verdict and whether the line trusts its provider to assert identities.
//!
//! The rule (the README's "How much a caller ID is worth"):
//! - `verified`: the header carries `verstat=TN-Validation-Passed` (3GPP TS
//!   24.229 s7.2A.20) and the line trusts its provider;
//! - `failed`: it carries `verstat=TN-Validation-Failed` and the line
//!   trusts its provider;
//! - `asserted`: a P-Asserted-Identity (RFC 3325) from a trusted provider,
//!   no verdict (or `No-TN-Validation`);
//! - `unverified`: anything else, including any verdict from a provider the
//!   line does not trust (anyone can write `verstat` into a From).
//!
//! A test-mode verification completed by `simulate-call` records
//! `simulated` for both: no network vouched for anything.
//!
//! A line may refuse callers below a minimum ([`CallerIdTrust::meets`]).
//! `failed` ranks with `unverified`: the default minimum accepts both (as
//! the service always did) and reports the verdict; any higher minimum
//! refuses both.
//!
//! Not for: reading the headers (see [`crate::sip::identity`]) or storing
//! the result.

/// The header the caller number was read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CallerIdSource {
    PAssertedIdentity,
    RemotePartyId,
    From,
    /// No header: test mode's simulated call.
    Simulated,
}

impl CallerIdSource {
    /// The API spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            CallerIdSource::PAssertedIdentity => "p_asserted_identity",
            CallerIdSource::RemotePartyId => "remote_party_id",
            CallerIdSource::From => "from",
            CallerIdSource::Simulated => "simulated",
        }
    }

    pub fn parse(text: &str) -> Option<CallerIdSource> {
        match text {
            "p_asserted_identity" => Some(CallerIdSource::PAssertedIdentity),
            "remote_party_id" => Some(CallerIdSource::RemotePartyId),
            "from" => Some(CallerIdSource::From),
            "simulated" => Some(CallerIdSource::Simulated),
            _ => None,
        }
    }
}

/// What the caller ID is worth.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CallerIdTrust {
    Verified,
    Failed,
    Asserted,
    Unverified,
    /// Test mode's simulated call: no network was involved.
    Simulated,
}

impl CallerIdTrust {
    /// The API spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            CallerIdTrust::Verified => "verified",
            CallerIdTrust::Failed => "failed",
            CallerIdTrust::Asserted => "asserted",
            CallerIdTrust::Unverified => "unverified",
            CallerIdTrust::Simulated => "simulated",
        }
    }

    pub fn parse(text: &str) -> Option<CallerIdTrust> {
        match text {
            "verified" => Some(CallerIdTrust::Verified),
            "failed" => Some(CallerIdTrust::Failed),
            "asserted" => Some(CallerIdTrust::Asserted),
            "unverified" => Some(CallerIdTrust::Unverified),
            "simulated" => Some(CallerIdTrust::Simulated),
            _ => None,
        }
    }

    /// A line's `min_caller_id_trust`: `unverified`, `asserted` or
    /// `verified` (`failed` is no minimum anyone would ask for).
    pub fn parse_minimum(text: &str) -> Option<CallerIdTrust> {
        CallerIdTrust::parse(text)
            .filter(|t| !matches!(t, CallerIdTrust::Failed | CallerIdTrust::Simulated))
    }

    /// The order a minimum compares in; `failed` ranks with `unverified`
    /// (see the module doc).
    fn rank(self) -> u8 {
        match self {
            CallerIdTrust::Failed | CallerIdTrust::Unverified | CallerIdTrust::Simulated => 0,
            CallerIdTrust::Asserted => 1,
            CallerIdTrust::Verified => 2,
        }
    }

    /// Whether a caller of this trust is accepted by a line whose minimum
    /// is `minimum`.
    pub fn meets(self, minimum: CallerIdTrust) -> bool {
        self.rank() >= minimum.rank()
    }
}

/// A STIR/SHAKEN verification verdict as a terminating network passes it
/// on: the `verstat` parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verstat {
    Passed,
    Failed,
    NoValidation,
}

impl Verstat {
    /// `TN-Validation-Passed`, `TN-Validation-Failed`, `No-TN-Validation`
    /// (case-insensitive); anything else is no verdict.
    pub fn parse(text: &str) -> Option<Verstat> {
        let t = text.trim();
        if t.eq_ignore_ascii_case("TN-Validation-Passed") {
            Some(Verstat::Passed)
        } else if t.eq_ignore_ascii_case("TN-Validation-Failed") {
            Some(Verstat::Failed)
        } else if t.eq_ignore_ascii_case("No-TN-Validation") {
            Some(Verstat::NoValidation)
        } else {
            None
        }
    }
}

/// Source and trust together: what a completed verification records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CallerEvidence {
    pub source: CallerIdSource,
    pub trust: CallerIdTrust,
}

/// The trust of a caller read from `source`, whose header carried
/// `verstat` (if any), on a line that does or does not trust its provider
/// to assert identities.
pub fn trust(
    source: CallerIdSource,
    verstat: Option<Verstat>,
    trusted_provider: bool,
) -> CallerIdTrust {
    if !trusted_provider {
        return CallerIdTrust::Unverified;
    }
    match (verstat, source) {
        (Some(Verstat::Passed), _) => CallerIdTrust::Verified,
        (Some(Verstat::Failed), _) => CallerIdTrust::Failed,
        (_, CallerIdSource::PAssertedIdentity) => CallerIdTrust::Asserted,
        _ => CallerIdTrust::Unverified,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use CallerIdSource::*;
    use CallerIdTrust::*;

    #[test]
    fn the_decision_table() {
        let verdicts = [
            None,
            Some(Verstat::Passed),
            Some(Verstat::Failed),
            Some(Verstat::NoValidation),
        ];
        // (source, verdict index) -> trust, for a trusted provider.
        let trusted = [
            (PAssertedIdentity, [Asserted, Verified, Failed, Asserted]),
            (RemotePartyId, [Unverified, Verified, Failed, Unverified]),
            (From, [Unverified, Verified, Failed, Unverified]),
        ];
        for (source, want) in trusted {
            for (v, w) in verdicts.iter().zip(want) {
                assert_eq!(trust(source, *v, true), w, "{source:?} {v:?}");
                // An untrusted provider's verdict is ignored: anyone can
                // write one.
                assert_eq!(trust(source, *v, false), Unverified, "{source:?} {v:?}");
            }
        }
    }

    #[test]
    fn minimum_order_failed_ranks_with_unverified() {
        for t in [Verified, Failed, Asserted, Unverified] {
            assert!(
                t.meets(Unverified),
                "the default minimum accepts every caller"
            );
        }
        assert!(!Failed.meets(Asserted) && !Unverified.meets(Asserted));
        assert!(Asserted.meets(Asserted) && Verified.meets(Asserted));
        assert!(!Asserted.meets(Verified) && Verified.meets(Verified));
        assert_eq!(CallerIdTrust::parse_minimum("failed"), None);
        assert_eq!(CallerIdTrust::parse_minimum("asserted"), Some(Asserted));
    }

    #[test]
    fn spellings_round_trip() {
        for s in [PAssertedIdentity, RemotePartyId, From] {
            assert_eq!(CallerIdSource::parse(s.as_str()), Some(s));
        }
        for t in [Verified, Failed, Asserted, Unverified] {
            assert_eq!(CallerIdTrust::parse(t.as_str()), Some(t));
        }
        assert_eq!(
            Verstat::parse("tn-validation-passed"),
            Some(Verstat::Passed)
        );
        assert_eq!(Verstat::parse("TN-Validation-Maybe"), None);
    }
}
