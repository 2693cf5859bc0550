//! The transitions of [`Ha`]: what each input changes and what `poll`
//! asks for next. Every action that calls etcd is answered by exactly one
//! input (the binary turns a timeout into a failure), so at most one call
//! of each kind is in flight.
//!
//! Not for: the rule's explanation (the parent module's doc).

use super::{Action, Event, Ha, Input, Role, Step};
use crate::time::UnixMillis;

impl Ha {
    /// Feeds what happened at `now`. Inputs that do not fit the current
    /// step (a late reply to an abandoned call) change nothing.
    pub fn handle(&mut self, now: UnixMillis, input: Input) {
        match self.step {
            Step::Holding { lease, renewing } => self.handle_holding(now, lease, renewing, input),
            Step::Fencing {
                stop_sent: true, ..
            } if input == Input::Stopped => {
                self.role = Role::Standby;
                self.campaign_at(now);
            }
            _ => self.handle_campaign(now, input),
        }
    }

    /// A standby's inputs: the grant, the attempt, a deletion seen.
    fn handle_campaign(&mut self, now: UnixMillis, input: Input) {
        match (self.step, input) {
            (Step::Granting, Input::LeaseGranted { id, sent_at }) => {
                self.last_ok_send = Some(sent_at);
                self.step = Step::Acquiring {
                    lease: id,
                    sent: false,
                };
            }
            (Step::Granting | Step::Acquiring { .. }, Input::CallFailed) => {
                self.campaign_at(now.plus_millis(self.timing.retry_ms));
            }
            (Step::Acquiring { lease, sent: true }, Input::ElectionWon) => {
                self.role = Role::Promoting;
                self.won_at = Some(now);
                self.start_pending = true;
                self.retry_at = None;
                self.step = Step::Holding {
                    lease,
                    renewing: false,
                };
                self.events.push(Event::ElectionWon);
            }
            (Step::Acquiring { sent: true, .. }, Input::ElectionLost) => {
                self.events.push(Event::ElectionLost);
                self.campaign_at(now.plus_millis(self.timing.campaign_every_ms));
            }
            (Step::Idle { .. }, Input::KeyDeleted) => self.campaign_at(now),
            _ => {}
        }
    }

    /// The key holder's inputs: renewals, the promotion, losses.
    fn handle_holding(&mut self, now: UnixMillis, lease: i64, renewing: bool, input: Input) {
        let promoting = self.role == Role::Promoting;
        match input {
            Input::KeyDeleted | Input::LeaseGone => self.begin_fence(now, lease, true),
            Input::Renewed { sent_at } if renewing => {
                let last = self.last_ok_send.map_or(sent_at, |l| l.max(sent_at));
                self.last_ok_send = Some(last);
                self.retry_at = None;
                self.step = Step::Holding {
                    lease,
                    renewing: false,
                };
            }
            Input::RenewFailed if renewing => {
                self.retry_at = Some(now.plus_millis(self.timing.retry_ms));
                self.step = Step::Holding {
                    lease,
                    renewing: false,
                };
            }
            Input::PromotionFinished if promoting => {
                self.role = Role::Primary;
                let took_ms = self.won_at.map_or(0, |w| now.0 - w.0);
                self.events.push(Event::Promoted { took_ms });
            }
            Input::PromotionFailed if promoting => self.begin_fence(now, lease, false),
            Input::ServiceDied => self.begin_fence(now, lease, false),
            _ => {}
        }
    }

    /// The next thing to do at `now`, if any; call until `None`.
    pub fn poll(&mut self, now: UnixMillis) -> Option<Action> {
        match self.step {
            Step::Idle { at } if now >= at => {
                self.step = Step::Granting;
                Some(Action::GrantLease)
            }
            Step::Acquiring { lease, sent: false } => {
                self.step = Step::Acquiring { lease, sent: true };
                Some(Action::TryAcquire { lease })
            }
            Step::Holding { lease, renewing } => {
                if self.fence_deadline().is_some_and(|d| now >= d) {
                    self.begin_fence(now, lease, true);
                    return self.poll(now);
                }
                if self.start_pending {
                    self.start_pending = false;
                    return Some(Action::StartPromotion);
                }
                if !renewing && self.renew_due().is_some_and(|d| now >= d) {
                    self.step = Step::Holding {
                        lease,
                        renewing: true,
                    };
                    return Some(Action::KeepAlive { lease });
                }
                None
            }
            Step::Fencing {
                fence_sent: false,
                stop_sent,
            } => {
                self.step = Step::Fencing {
                    fence_sent: true,
                    stop_sent,
                };
                Some(Action::Fence)
            }
            Step::Fencing {
                fence_sent: true,
                stop_sent: false,
            } => {
                self.step = Step::Fencing {
                    fence_sent: true,
                    stop_sent: true,
                };
                Some(Action::Stop {
                    revoke: self.revoke_on_stop,
                })
            }
            _ => None,
        }
    }

    /// When `poll` has something to do next without a new input.
    pub fn next_wakeup(&self) -> Option<UnixMillis> {
        match self.step {
            Step::Idle { at } => Some(at),
            Step::Holding { renewing, .. } => {
                let renew = if renewing { None } else { self.renew_due() };
                match (self.fence_deadline(), renew) {
                    (Some(f), Some(r)) => Some(f.min(r)),
                    (f, r) => f.or(r),
                }
            }
            _ => None,
        }
    }

    fn renew_due(&self) -> Option<UnixMillis> {
        let due = self.last_ok_send?.plus_millis(self.timing.renew_every_ms);
        Some(self.retry_at.map_or(due, |r| r.max(due)))
    }

    fn campaign_at(&mut self, at: UnixMillis) {
        self.role = Role::Standby;
        self.step = Step::Idle { at };
        self.last_ok_send = None;
        self.retry_at = None;
        self.won_at = None;
        self.start_pending = false;
    }

    /// Fences (the lease is in doubt, or the promotion failed) and then
    /// stops, handing the lease back in case etcd still has it.
    fn begin_fence(&mut self, now: UnixMillis, lease: i64, lease_in_doubt: bool) {
        if lease_in_doubt {
            let lease_age_ms = self.last_ok_send.map_or(0, |s| now.0 - s.0);
            self.events.push(Event::Fenced { lease_age_ms });
        }
        self.role = Role::Fenced;
        self.revoke_on_stop = Some(lease);
        self.start_pending = false;
        self.step = Step::Fencing {
            fence_sent: false,
            stop_sent: false,
        };
    }
}
