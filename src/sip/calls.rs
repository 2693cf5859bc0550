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
//!    number;
//! 5. then `TransitionByNumber` with `Event::Call` at the moment the INVITE
//!    arrived; after COMMIT the lease is released and the call rejected
//!    with the line's code. It is never answered: no 200, no media, so the
//!    caller pays nothing.
//!
//! Not for: SIP transactions (the engine's endpoint) or sockets (`driver`).

use super::line_info::LineInfo;
use super::SipStats;
use crate::runtime::app::App;
use dialproof_engine::sip::identity::{caller, Caller};
use dialproof_engine::sip::message::Message;
use dialproof_engine::sip::route::{route_invite, Route};
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
    /// Send this final response at once.
    Reject(u16),
    /// A transition was queued; its reply will call the decision callback.
    Pending,
}

/// Decides on an INVITE that arrived at `at` from `src`. When the verdict
/// is [`Verdict::Pending`], `decide` is called exactly once later (on the
/// writer thread) with the final response code.
pub fn on_invite(
    app: &Arc<App>,
    src: SocketAddr,
    msg: &Message,
    at: UnixMillis,
    decide: Box<dyn FnOnce(u16) + Send>,
) -> Verdict {
    let stats = &app.sip_stats;
    SipStats::inc(&stats.invites);
    let lines = app.sip_lines.lines();
    let call_id = msg.call_id();
    let trusted: Vec<&LineInfo> = lines.iter().filter(|l| l.trusts(src.ip())).collect();
    if trusted.is_empty() {
        SipStats::inc(&stats.rejected_untrusted_source);
        tracing::warn!(%src, call_id, "INVITE from an address that is no line's provider; 403");
        return Verdict::Untrusted(403);
    }
    // Which of our numbers was dialled, as each trusting line reads it
    // (their regions and headers may differ), and its live lease if any.
    let routes: Vec<_> = trusted.iter().map(|l| l.route()).collect();
    let (route, lease) = app.leases.with_table(|table| {
        let route = route_invite(msg, &routes, |number| {
            table.slot_of(number).map(|slot| table.line_of(slot))
        });
        let lease = match &route {
            Route::Line { number, .. } => table.slot_of(number).and_then(|s| table.current(s)),
            _ => None,
        };
        (route, lease)
    });
    let (line, number, header) = match route {
        Route::Line {
            line,
            number,
            header,
        } => match trusted.iter().find(|l| l.id == line) {
            Some(info) => (*info, number, header),
            // `route_invite` only names lines it was given.
            None => return Verdict::Reject(500),
        },
        Route::OtherLine { number, header } => {
            SipStats::inc(&stats.rejected_unknown_number);
            tracing::warn!(%src, call_id, header = header.as_str(), dial_number = %number,
                code = 403, "INVITE for another line's number from this provider; 403");
            return Verdict::Reject(403);
        }
        Route::NotOurs { header, value } => {
            SipStats::inc(&stats.rejected_unknown_number);
            tracing::warn!(%src, call_id, header = header.as_str(), value = %value,
                code = 404, "INVITE for a number that is not one of the line's; 404");
            return Verdict::Reject(404);
        }
    };
    let code = line.reject_code;
    let Some(lease) = lease else {
        SipStats::inc(&stats.rejected_no_lease);
        tracing::warn!(%src, call_id, dial_number = %number, header = header.as_str(),
            line = %line.name, "call to a number with no active lease; rejected, nothing changed");
        return Verdict::Reject(code);
    };
    let (caller_number, source) = match caller(msg, line.region, line.trust_asserted_identity) {
        Caller::Number { e164, source } => (e164, source),
        Caller::Withheld(why) => {
            SipStats::inc(&stats.rejected_withheld);
            tracing::warn!(%src, call_id, dial_number = %number, reason = why.as_str(),
                "call with a withheld caller number; rejected, verification left pending");
            return Verdict::Reject(code);
        }
    };
    let app2 = app.clone();
    let dial = number.clone();
    let caller_for_log = caller_number.clone();
    let line_name = line.name.clone();
    let op = WriteOp::TransitionByNumber {
        dial_number: number,
        generation: Some(lease.generation),
        event: Event::Call {
            at,
            caller: caller_number,
        },
        reply: Some(Box::new(move |result| {
            match &result {
                Ok(t) if t.changed => {
                    SipStats::inc(&app2.sip_stats.completed);
                    tracing::info!(dial_number = %dial, header = header.as_str(),
                        caller = %caller_for_log, source = source.as_str(), line = %line_name,
                        verification_id = t.row.as_ref().map_or("", |r| r.id.as_str()),
                        "call completed a verification");
                }
                Ok(_) => tracing::warn!(dial_number = %dial,
                    "call found no pending verification for the lease (ended meanwhile)"),
                Err(e) => tracing::error!(dial_number = %dial, error = %e,
                    "call transition failed"),
            }
            decide(code);
        })),
    };
    if let Err(e) = app.store.submit(op) {
        tracing::error!(error = %e, "call transition not queued");
        return Verdict::Reject(500);
    }
    Verdict::Pending
}
