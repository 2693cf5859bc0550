//! From an INVITE to a decision: which line, which number, which caller,
//! and the writer transition that completes the verification.
//!
//! The order of the checks is the order of trust:
//! 1. the source address must be one of a line's provider addresses (anyone
//!    on the internet can send an INVITE with any From): else 403;
//! 2. the dialled number, read where the line says
//!    (`dialproof_engine::sip::route`), must be one of that line's numbers:
//!    else 404, logged with the header and the value read (another line's
//!    number from this provider is 403: it is not theirs to deliver);
//! 3. the number must be leased now: else the line's reject code, logged
//!    and counted, nothing changes;
//! 4. the caller must be usable: else (withheld) the line's reject code,
//!    logged, the verification stays pending for a call that shows its
//!    number; and the network must vouch for it as far as the line's
//!    `min_caller_id_trust` asks: else the line's reject code, logged and
//!    counted, the verification stays pending;
//! 5. then `TransitionByNumber` with `Event::Call` at the moment the INVITE
//!    arrived; after COMMIT the lease is released and the call rejected
//!    with the line's code. It is never answered: no 200, no media, so the
//!    caller pays nothing.
//!
//! Steps 3 to 5 all answer the line's reject code, so each final response
//! also names its [`CallOutcome`] in a `Warning` header (the provider's
//! logs and `dialproof-sim` read it; any other peer ignores it).
//!
//! Not for: SIP transactions (the engine's endpoint) or sockets (`driver`).

use super::line_info::LineInfo;
use super::Sip;
use super::SipStats;
use dialproof_engine::caller_evidence::CallerEvidence;
use dialproof_engine::lease::Lease;
use dialproof_engine::sip::identity::{caller, Caller};
use dialproof_engine::sip::message::Message;
use dialproof_engine::sip::outcome::CallOutcome;
use dialproof_engine::sip::route::{route_invite, Header, Route};
use dialproof_engine::time::UnixMillis;
use dialproof_engine::verification::Event;
use dialproof_storage::WriteOp;
use std::net::SocketAddr;
use std::sync::Arc;

/// What to do with an INVITE now.
pub enum Verdict {
    /// From an address no line trusts (possibly forged): answer this once,
    /// keep no transaction, never retransmit.
    Untrusted(u16),
    /// Send this final response at once, with the call's outcome when the
    /// INVITE reached one of a line's numbers.
    Reject(u16, Option<CallOutcome>),
    /// A transition was queued; its reply will call the decision callback.
    Pending,
}

/// What a call's commit decided: the final response code, how the call
/// ended, and the call's facts for its log line. The transition's reply
/// builds it on the storage writer's thread; the SIP driver answers and
/// logs it, so the writer (which every write of the service queues for)
/// formats no log line.
pub struct Decided {
    pub code: u16,
    ended: Ended,
    call: Box<CallFacts>,
}

/// What a decided call's log line says about the call itself.
struct CallFacts {
    dial: String,
    header: Header,
    caller: String,
    evidence: CallerEvidence,
    line: String,
}

/// How the call's transition ended.
enum Ended {
    Completed { verification_id: String },
    NoPending,
    Failed(String),
}

impl Decided {
    /// The outcome the final response names in its `Warning`.
    pub fn outcome(&self) -> CallOutcome {
        match self.ended {
            Ended::Completed { .. } => CallOutcome::Completed,
            Ended::NoPending => CallOutcome::NoPendingVerification,
            Ended::Failed(_) => CallOutcome::NotRecorded,
        }
    }

    /// Logs the call's end: info when it completed a verification, a
    /// warning when the lease had ended meanwhile, an error when the
    /// transition failed.
    pub fn log(&self) {
        let c = &self.call;
        match &self.ended {
            Ended::Completed { verification_id } => {
                tracing::info!(dial_number = %c.dial, header = c.header.as_str(),
                    caller = %c.caller, source = c.evidence.source.as_str(), trust = c.evidence.trust.as_str(), line = %c.line,
                    verification_id = verification_id.as_str(),
                    "call completed a verification");
            }
            Ended::NoPending => tracing::warn!(dial_number = %c.dial,
                "call found no pending verification for the lease (ended meanwhile)"),
            Ended::Failed(error) => tracing::error!(dial_number = %c.dial, error = %error,
                "call transition failed"),
        }
    }
}

/// The callback that receives a call's [`Decided`].
pub type Decide = Box<dyn FnOnce(Decided) + Send>;

/// Decides on an INVITE that arrived at `at` from `src`. When the verdict
/// is [`Verdict::Pending`], `decide` is called exactly once later (on the
/// writer thread) with the call's [`Decided`].
pub fn on_invite(
    ctx: &Arc<Sip>,
    src: SocketAddr,
    msg: &Message,
    at: UnixMillis,
    decide: Decide,
) -> Verdict {
    let stats = &ctx.stats;
    SipStats::inc(&stats.invites);
    let lines = ctx.lines.lines();
    let call_id = msg.call_id();
    let trusted: Vec<&LineInfo> = lines.iter().filter(|l| l.trusts(src.ip())).collect();
    if trusted.is_empty() {
        SipStats::inc(&stats.rejected_untrusted_source);
        tracing::warn!(%src, call_id, "INVITE from an address that is no line's provider; 403");
        return Verdict::Untrusted(403);
    }
    let dialled = match dialled(ctx, msg, &trusted) {
        Ok(d) => d,
        Err(verdict) => {
            log_misroute(ctx, src, call_id, &verdict);
            return verdict.answer();
        }
    };
    if ctx.fence.is_fenced() {
        SipStats::inc(&stats.rejected_fenced);
        tracing::warn!(%src, call_id, dial_number = %dialled.number,
            "INVITE to a fenced node: 503, nothing recorded (the new primary takes the call)");
        return Verdict::Reject(503, None);
    }
    let code = dialled.line.reject_code;
    ctx.health
        .on_invite(&dialled.number, dialled.lease.is_some());
    let Some(lease) = dialled.lease else {
        SipStats::inc(&stats.rejected_no_lease);
        tracing::warn!(%src, call_id, dial_number = %dialled.number, header = dialled.header.as_str(),
            line = %dialled.line.name, "call to a number with no active lease; rejected, nothing changed");
        return Verdict::Reject(code, Some(CallOutcome::NoPendingVerification));
    };
    let generation = lease.generation;
    on_caller(ctx, src, msg, dialled, generation, at, decide)
}

/// Step 4 and 5: the caller of an INVITE to a leased number, and the
/// transition it submits if the caller may complete the verification.
fn on_caller(
    ctx: &Arc<Sip>,
    src: SocketAddr,
    msg: &Message,
    dialled: Dialled<'_>,
    generation: u32,
    at: UnixMillis,
    decide: Decide,
) -> Verdict {
    let (stats, call_id) = (&ctx.stats, msg.call_id());
    let line = dialled.line;
    let code = line.reject_code;
    match caller(msg, line.region, line.trust_asserted_identity) {
        Caller::Number { evidence, .. } if !evidence.trust.meets(line.min_caller_id_trust) => {
            SipStats::inc(&stats.rejected_untrusted_caller_id);
            tracing::warn!(%src, call_id, dial_number = %dialled.number,
                source = evidence.source.as_str(), trust = evidence.trust.as_str(),
                min_caller_id_trust = line.min_caller_id_trust.as_str(), line = %line.name,
                "caller ID trust below the line's minimum; rejected, verification left pending");
            Verdict::Reject(code, Some(CallOutcome::CallerIdUntrusted))
        }
        Caller::Number { e164, evidence } => {
            let call = Call {
                number: dialled.number,
                header: dialled.header,
                generation,
                caller: e164,
                evidence,
                line: line.name.clone(),
                code,
            };
            submit_call(ctx, call, at, decide)
        }
        Caller::Withheld(why) => {
            SipStats::inc(&stats.rejected_withheld);
            tracing::warn!(%src, call_id, dial_number = %dialled.number, reason = why.as_str(),
                "call with a withheld caller number; rejected, verification left pending");
            Verdict::Reject(code, Some(CallOutcome::CallerWithheld))
        }
    }
}

/// The line and number an INVITE dialled, and the number's live lease.
struct Dialled<'a> {
    line: &'a LineInfo,
    number: String,
    header: Header,
    lease: Option<Lease>,
}

/// Why an INVITE names none of the trusting lines' numbers.
enum Misroute {
    /// Another line's number from this provider: not theirs to deliver.
    OtherLine { number: String, header: Header },
    /// Nothing that is one of our numbers.
    NotOurs { header: Header, value: String },
    /// `route_invite` named a line it was not given (it never does).
    Impossible,
}

impl Misroute {
    fn answer(&self) -> Verdict {
        match self {
            Misroute::OtherLine { .. } => Verdict::Reject(403, None),
            Misroute::NotOurs { .. } => Verdict::Reject(404, None),
            Misroute::Impossible => Verdict::Reject(500, None),
        }
    }
}

/// Which of our numbers was dialled, as each trusting line reads it (their
/// regions and headers may differ), and its live lease if any.
fn dialled<'a>(
    ctx: &Sip,
    msg: &Message,
    trusted: &[&'a LineInfo],
) -> Result<Dialled<'a>, Misroute> {
    let routes: Vec<_> = trusted.iter().map(|l| l.route()).collect();
    let (route, lease) = ctx.leases.with_table(|table| {
        let route = route_invite(msg, &routes, |number| {
            table.slot_of(number).map(|slot| table.line_of(slot))
        });
        let lease = match &route {
            Route::Line { number, .. } => table.slot_of(number).and_then(|s| table.current(s)),
            _ => None,
        };
        (route, lease)
    });
    match route {
        Route::Line {
            line,
            number,
            header,
        } => match trusted.iter().find(|l| l.id == line) {
            Some(info) => Ok(Dialled {
                line: info,
                number,
                header,
                lease,
            }),
            None => Err(Misroute::Impossible),
        },
        Route::OtherLine { number, header } => Err(Misroute::OtherLine { number, header }),
        Route::NotOurs { header, value } => Err(Misroute::NotOurs { header, value }),
    }
}

fn log_misroute(ctx: &Sip, src: SocketAddr, call_id: &str, why: &Misroute) {
    match why {
        Misroute::OtherLine { number, header } => {
            SipStats::inc(&ctx.stats.rejected_unknown_number);
            tracing::warn!(%src, call_id, header = header.as_str(), dial_number = %number,
                code = 403, "INVITE for another line's number from this provider; 403");
        }
        Misroute::NotOurs { header, value } => {
            SipStats::inc(&ctx.stats.rejected_unknown_number);
            tracing::warn!(%src, call_id, header = header.as_str(), value = %value,
                code = 404, "INVITE for a number that is not one of the line's; 404");
        }
        Misroute::Impossible => {
            tracing::error!(%src, call_id, "INVITE routed to a line that was not offered; 500");
        }
    }
}

/// A call that will complete the verification leased on `number`.
struct Call {
    number: String,
    header: Header,
    generation: u32,
    caller: String,
    evidence: CallerEvidence,
    line: String,
    /// The final response once the transition is decided.
    code: u16,
}

/// Submits the call's transition; its reply counts a completion and calls
/// `decide` with the call's [`Decided`].
fn submit_call(ctx: &Arc<Sip>, call: Call, at: UnixMillis, decide: Decide) -> Verdict {
    let replied = ctx.clone();
    let Call {
        number,
        header,
        generation,
        caller,
        evidence,
        line,
        code,
    } = call;
    let facts = Box::new(CallFacts {
        dial: number.clone(),
        header,
        caller: caller.clone(),
        evidence,
        line,
    });
    let event = Event::Call {
        at,
        caller,
        evidence,
    };
    let op = WriteOp::call(
        number,
        generation,
        event,
        Box::new(move |result| {
            let ended = match result {
                Ok(t) if t.changed => {
                    SipStats::inc(&replied.stats.completed);
                    let verification_id = t.row.map(|r| r.id).unwrap_or_default();
                    Ended::Completed { verification_id }
                }
                Ok(_) => Ended::NoPending,
                Err(e) => Ended::Failed(e.to_string()),
            };
            decide(Decided {
                code,
                ended,
                call: facts,
            });
        }),
    );
    if let Err(e) = ctx.store.submit(op) {
        tracing::error!(error = %e, "call transition not queued");
        return Verdict::Reject(500, Some(CallOutcome::NotRecorded));
    }
    Verdict::Pending
}
