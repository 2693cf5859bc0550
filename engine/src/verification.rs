//! The verification state machine: every transition of the spec's table.
//!
//! States: `pending` and the terminal `completed`, `expired`, `failed`; a
//! terminal status never changes. [`apply`] is a pure function from the
//! current state and an event to a [`Decision`]; the storage writer calls it
//! inside the transaction that persists the result, which is what makes the
//! call-versus-cancel race safe: whichever event the single writer applies
//! first wins, and the loser sees the winner's state.
//!
//! Not for: persisting, releasing leases or sending webhooks; the decision
//! only says which of those must happen.

use crate::caller_evidence::CallerEvidence;
use crate::time::UnixMillis;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    Pending,
    Completed,
    Expired,
    Failed,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Completed => "completed",
            Status::Expired => "expired",
            Status::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<Status> {
        match s {
            "pending" => Some(Status::Pending),
            "completed" => Some(Status::Completed),
            "expired" => Some(Status::Expired),
            "failed" => Some(Status::Failed),
            _ => None,
        }
    }

    pub fn is_terminal(self) -> bool {
        self != Status::Pending
    }
}

/// The webhook event a transition produces, if any.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventType {
    Completed,
    Expired,
    Failed,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Completed => "verification.completed",
            EventType::Expired => "verification.expired",
            EventType::Failed => "verification.failed",
        }
    }

    pub fn parse(s: &str) -> Option<EventType> {
        match s {
            "verification.completed" => Some(EventType::Completed),
            "verification.expired" => Some(EventType::Expired),
            "verification.failed" => Some(EventType::Failed),
            _ => None,
        }
    }
}

/// Something that happens to a verification after it was created.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// An inbound call to the leased number, at the moment the INVITE arrived,
    /// from `caller` (E.164), read with `evidence`.
    Call {
        at: UnixMillis,
        caller: String,
        evidence: CallerEvidence,
    },
    /// `POST .../cancel/` at `at`.
    Cancel { at: UnixMillis },
    /// The TTL ran out. `at` is the moment the expiry was processed; the
    /// recorded moment of the event is always `expires_at`.
    Expire { at: UnixMillis },
    /// An internal error, such as the loss of the SIP trunk before the call.
    Fail { at: UnixMillis, reason: String },
}

/// The current state of a verification, as the writer holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct State {
    pub status: Status,
    pub expires_at: UnixMillis,
}

/// What [`apply`] decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// The status after the event (unchanged if `changed` is false).
    pub status: Status,
    /// Whether anything must be written.
    pub changed: bool,
    /// Set for a completion: the call moment, the caller number and how
    /// far the network vouched for it.
    pub completion: Option<(UnixMillis, String, CallerEvidence)>,
    /// The leased number goes back to the pool (after the commit).
    pub release_lease: bool,
    /// The webhook the transition emits (subject to company settings for
    /// `Failed`), and the moment it reports as `completed_at`.
    pub webhook: Option<(EventType, UnixMillis)>,
    /// Why a `failed` verification failed.
    pub failure_reason: Option<String>,
}

impl Decision {
    fn unchanged(status: Status) -> Self {
        Decision {
            status,
            changed: false,
            completion: None,
            release_lease: false,
            webhook: None,
            failure_reason: None,
        }
    }
}

/// Applies `event` to a verification in `state`.
///
/// - A call before `expires_at` completes a pending verification; a call at
///   or after `expires_at` is not accepted (the number is no longer leased to
///   it), even if the expiry has not been processed yet.
/// - A cancel of a pending verification expires it, releases the number and
///   sends no webhook; of a terminal one changes nothing (idempotent).
/// - An expiry is applied only once `at >= expires_at`; the webhook reports
///   `expires_at` as the moment of the event.
/// - A failure of a pending verification fails it and releases the number.
pub fn apply(state: State, event: &Event) -> Decision {
    if state.status.is_terminal() {
        return Decision::unchanged(state.status);
    }
    match event {
        Event::Call {
            at,
            caller,
            evidence,
        } => {
            if *at >= state.expires_at {
                return Decision::unchanged(state.status);
            }
            Decision {
                status: Status::Completed,
                changed: true,
                completion: Some((*at, caller.clone(), *evidence)),
                release_lease: true,
                webhook: Some((EventType::Completed, *at)),
                failure_reason: None,
            }
        }
        Event::Cancel { .. } => Decision {
            status: Status::Expired,
            changed: true,
            completion: None,
            release_lease: true,
            webhook: None,
            failure_reason: None,
        },
        Event::Expire { at } => {
            if *at < state.expires_at {
                return Decision::unchanged(state.status);
            }
            Decision {
                status: Status::Expired,
                changed: true,
                completion: None,
                release_lease: true,
                webhook: Some((EventType::Expired, state.expires_at)),
                failure_reason: None,
            }
        }
        Event::Fail { at, reason } => Decision {
            status: Status::Failed,
            changed: true,
            completion: None,
            release_lease: true,
            webhook: Some((EventType::Failed, *at)),
            failure_reason: Some(reason.clone()),
        },
    }
}

/// Effective TTL bounds: the spec accepts 1..3600 and clamps into 30..600.
pub const TTL_SECONDS_MIN: u32 = 30;
pub const TTL_SECONDS_MAX: u32 = 600;
pub const TTL_SECONDS_DEFAULT: u32 = 60;

/// Clamps an accepted TTL into the effective range.
pub fn effective_ttl_seconds(requested: u32) -> u32 {
    requested.clamp(TTL_SECONDS_MIN, TTL_SECONDS_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::caller_evidence::{CallerIdSource, CallerIdTrust};

    const EVIDENCE: CallerEvidence = CallerEvidence {
        source: CallerIdSource::From,
        trust: CallerIdTrust::Unverified,
    };

    const T0: UnixMillis = UnixMillis(1_000_000);

    fn pending() -> State {
        State {
            status: Status::Pending,
            expires_at: T0.plus_seconds(60),
        }
    }

    #[test]
    fn call_before_expiry_completes_with_webhook_and_release() {
        let d = apply(
            pending(),
            &Event::Call {
                at: T0.plus_seconds(20),
                caller: "+79990001122".into(),
                evidence: EVIDENCE,
            },
        );
        assert_eq!(d.status, Status::Completed);
        assert!(d.changed && d.release_lease);
        assert_eq!(
            d.completion,
            Some((T0.plus_seconds(20), "+79990001122".into(), EVIDENCE))
        );
        assert_eq!(d.webhook, Some((EventType::Completed, T0.plus_seconds(20))));
    }

    #[test]
    fn call_at_or_after_expiry_is_not_accepted() {
        let at = pending().expires_at;
        let d = apply(
            pending(),
            &Event::Call {
                at,
                caller: "+1".into(),
                evidence: EVIDENCE,
            },
        );
        assert_eq!(d, Decision::unchanged(Status::Pending));
    }

    #[test]
    fn cancel_expires_without_webhook_and_is_idempotent() {
        let d = apply(pending(), &Event::Cancel { at: T0 });
        assert_eq!(d.status, Status::Expired);
        assert!(d.release_lease && d.webhook.is_none());
        let again = apply(
            State {
                status: Status::Expired,
                expires_at: pending().expires_at,
            },
            &Event::Cancel { at: T0 },
        );
        assert!(!again.changed && !again.release_lease);
        assert_eq!(again.status, Status::Expired);
    }

    #[test]
    fn call_wins_the_race_with_cancel_when_applied_first() {
        let after_call = apply(
            pending(),
            &Event::Call {
                at: T0.plus_seconds(1),
                caller: "+79990001122".into(),
                evidence: EVIDENCE,
            },
        );
        let state = State {
            status: after_call.status,
            expires_at: pending().expires_at,
        };
        let cancel = apply(
            state,
            &Event::Cancel {
                at: T0.plus_seconds(1),
            },
        );
        assert_eq!(cancel.status, Status::Completed);
        assert!(!cancel.changed);
    }

    #[test]
    fn expiry_applies_only_once_due_and_reports_expires_at() {
        let early = apply(
            pending(),
            &Event::Expire {
                at: T0.plus_seconds(59),
            },
        );
        assert!(!early.changed);
        let late = apply(
            pending(),
            &Event::Expire {
                at: T0.plus_seconds(3600),
            },
        );
        assert_eq!(late.status, Status::Expired);
        assert_eq!(
            late.webhook,
            Some((EventType::Expired, pending().expires_at))
        );
    }

    #[test]
    fn terminal_states_never_change() {
        for status in [Status::Completed, Status::Expired, Status::Failed] {
            let s = State {
                status,
                expires_at: T0,
            };
            for e in [
                Event::Call {
                    at: UnixMillis(0),
                    caller: "+1".into(),
                    evidence: EVIDENCE,
                },
                Event::Cancel { at: T0 },
                Event::Expire { at: T0 },
                Event::Fail {
                    at: T0,
                    reason: "x".into(),
                },
            ] {
                assert_eq!(apply(s, &e), Decision::unchanged(status));
            }
        }
    }

    #[test]
    fn failure_releases_and_names_the_reason() {
        let d = apply(
            pending(),
            &Event::Fail {
                at: T0,
                reason: "line down".into(),
            },
        );
        assert_eq!(d.status, Status::Failed);
        assert_eq!(d.failure_reason.as_deref(), Some("line down"));
        assert!(d.release_lease);
    }

    #[test]
    fn ttl_clamps_into_the_effective_range() {
        assert_eq!(effective_ttl_seconds(1), 30);
        assert_eq!(effective_ttl_seconds(30), 30);
        assert_eq!(effective_ttl_seconds(61), 61);
        assert_eq!(effective_ttl_seconds(600), 600);
        assert_eq!(effective_ttl_seconds(3600), 600);
    }
}
