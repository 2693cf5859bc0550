//! Automatic failover's decisions, sans-IO: when a node campaigns for the
//! primary's key, when it keeps its lease alive, when it must fence itself,
//! and when it promotes or rejoins as a standby.
//!
//! The coordination store (etcd) grants a lease of `ttl`; the node that puts
//! the cluster's key under its lease first is the primary. etcd expires a
//! lease no sooner than `ttl` after it received the last keep-alive, and it
//! receives a keep-alive no sooner than the node sent it. So a primary that
//! stops serving `ttl - margin` after the SEND of its last successful
//! renewal has stopped before etcd can expire the lease and elect anyone
//! else, whatever happened to the replies ([`Ha::fence_deadline`]). The
//! margin covers the fence's own latency and clock rate differences.
//!
//! A fenced node never serves again from its own database: every win leads
//! to [`Action::StartPromotion`], which restores the newest replica first,
//! so a node that was cut off rejoins as a standby and can only come back
//! through a restore.
//!
//! The shape is the engine's usual one: `handle(now, input)` feeds what
//! happened, `poll(now)` says what to do next, `next_wakeup()` when to poll
//! again. Nothing here talks to etcd or runs a process.
//!
//! Not for: the etcd protocol, the child process or Litestream (the
//! binary's `ha` module), or the promoted start's hold (`crate::promotion`).

use crate::time::UnixMillis;

/// The default lease TTL.
pub const TTL_MS_DEFAULT: i64 = 5_000;

/// Timing of the machine; see [`HaTiming::new`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HaTiming {
    /// The lease's time to live.
    pub ttl_ms: i64,
    /// How long before the lease could expire the primary fences.
    pub margin_ms: i64,
    /// A keep-alive is sent this long after the last successful one's send.
    pub renew_every_ms: i64,
    /// After a failed call to etcd, the next attempt waits this long.
    pub retry_ms: i64,
    /// A standby that lost the election tries again this often even if it
    /// sees no deletion of the key (a missed watch event costs this much).
    pub campaign_every_ms: i64,
}

impl HaTiming {
    /// Timing for `ttl_ms`: renew every third of it, fence a fifth of it
    /// (at least 500 ms) before the lease could expire.
    pub fn new(ttl_ms: i64) -> HaTiming {
        HaTiming {
            ttl_ms,
            margin_ms: (ttl_ms / 5).max(500),
            renew_every_ms: ttl_ms / 3,
            retry_ms: (ttl_ms / 20).max(100),
            campaign_every_ms: (ttl_ms / 5).max(250),
        }
    }
}

/// A lease id as etcd gives it.
pub type LeaseId = i64;

/// What a node is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Not holding the key; campaigns when due.
    Standby,
    /// Won the key; restoring and starting the service.
    Promoting,
    /// Holds the key and serves.
    Primary,
    /// Stopped serving because its lease may be gone; rejoins as a standby
    /// once wound down ([`Input::Stopped`]).
    Fenced,
}

/// What happened, as the binary reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Input {
    /// A lease grant sent at `sent_at` succeeded.
    LeaseGranted { id: LeaseId, sent_at: UnixMillis },
    /// A grant or an attempt to acquire failed (etcd unreachable, no
    /// quorum, a reply that did not parse).
    CallFailed,
    /// The key was put under our lease.
    ElectionWon,
    /// Another node holds the key.
    ElectionLost,
    /// A keep-alive sent at `sent_at` came back with the lease alive.
    Renewed { sent_at: UnixMillis },
    /// A keep-alive failed or timed out; the lease may still be alive.
    RenewFailed,
    /// etcd answered that the lease no longer exists.
    LeaseGone,
    /// The watch saw the key deleted (its holder's lease expired or was
    /// revoked).
    KeyDeleted,
    /// The restored service serves.
    PromotionFinished,
    /// The restore or the start failed.
    PromotionFailed,
    /// The service exited on its own while this node held the key.
    ServiceDied,
    /// The node wound down after a fence or a failed promotion
    /// ([`Action::Stop`]).
    Stopped,
}

/// What to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    GrantLease,
    /// Put the key under `lease` if nobody holds it.
    TryAcquire {
        lease: LeaseId,
    },
    KeepAlive {
        lease: LeaseId,
    },
    /// Restore the newest replica, start the service promoted, register
    /// the lines, replicate. Never from the node's own database.
    StartPromotion,
    /// Stop serving now: writes refused, readiness failed, lines
    /// un-registered.
    Fence,
    /// Wind down after the fence: revoke `revoke` (best effort: if etcd
    /// still has the lease, the key frees at once). The fenced service
    /// may go on answering 503 until a promotion replaces it; it writes
    /// nothing that matters (its replication ended with the fence).
    Stop {
        revoke: Option<LeaseId>,
    },
}

/// What the binary counts and logs, taken with [`Ha::take_events`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    ElectionWon,
    ElectionLost,
    /// The promotion took `took_ms` from the win.
    Promoted {
        took_ms: i64,
    },
    /// Fenced; `lease_age_ms` since the last successful renewal's send.
    Fenced {
        lease_age_ms: i64,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// Nothing in flight; the next campaign at `at`.
    Idle {
        at: UnixMillis,
    },
    Granting,
    /// `sent`: the attempt went out.
    Acquiring {
        lease: LeaseId,
        sent: bool,
    },
    /// Promoting or primary with `lease`; a keep-alive in flight or not.
    Holding {
        lease: LeaseId,
        renewing: bool,
    },
    /// The fence is to be (or was) issued; then the stop.
    Fencing {
        fence_sent: bool,
        stop_sent: bool,
    },
}

/// One node's election, lease and fence.
#[derive(Debug)]
pub struct Ha {
    timing: HaTiming,
    role: Role,
    step: Step,
    /// The send moment of the last grant or keep-alive that succeeded.
    last_ok_send: Option<UnixMillis>,
    /// When a failed keep-alive may be retried.
    retry_at: Option<UnixMillis>,
    won_at: Option<UnixMillis>,
    /// The lease the stop after a fence hands back.
    revoke_on_stop: Option<LeaseId>,
    /// A win whose promotion is still to be asked for.
    start_pending: bool,
    events: Vec<Event>,
}

impl Ha {
    /// A node starts as a standby that campaigns at once.
    pub fn new(timing: HaTiming, now: UnixMillis) -> Ha {
        Ha {
            timing,
            role: Role::Standby,
            step: Step::Idle { at: now },
            last_ok_send: None,
            retry_at: None,
            won_at: None,
            revoke_on_stop: None,
            start_pending: false,
            events: Vec::new(),
        }
    }

    pub fn role(&self) -> Role {
        self.role
    }

    pub fn timing(&self) -> HaTiming {
        self.timing
    }

    /// When a node holding the key must have stopped serving: `ttl - margin`
    /// after the send of its last successful grant or keep-alive.
    pub fn fence_deadline(&self) -> Option<UnixMillis> {
        match self.step {
            Step::Holding { .. } => self
                .last_ok_send
                .map(|s| s.plus_millis(self.timing.ttl_ms - self.timing.margin_ms)),
            _ => None,
        }
    }

    /// How old the lease is: since the last successful renewal's send.
    pub fn lease_age_ms(&self, now: UnixMillis) -> Option<i64> {
        match self.step {
            Step::Holding { .. } => self.last_ok_send.map(|s| now.0 - s.0),
            _ => None,
        }
    }

    /// The lease this node holds the key under, if it does.
    pub fn held_lease(&self) -> Option<LeaseId> {
        match self.step {
            Step::Holding { lease, .. } => Some(lease),
            _ => None,
        }
    }

    /// The counted moments since the last call.
    pub fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }
}

mod transitions;

#[cfg(test)]
mod tests;
