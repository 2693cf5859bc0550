//! What a line going up or down does.
//!
//! A line going down withholds its numbers at once (`set_line_up` on the
//! lease table) and fails its pending verifications (`Event::Fail`,
//! reason [`LINE_DOWN_REASON`]); their numbers stay withheld until the line
//! is back, since the table only issues numbers of lines that are up. The
//! pending verifications are found through the table's live leases, so a
//! create that leased a number of the line just before it went down, and
//! commits just after the failures were queued, stays pending and expires
//! normally: a window of a commit's length, accepted rather than locking
//! the create path.
//!
//! Not for: registering or pinging (see `driver`), the resolved settings
//! (`line_info`) or where the state is kept (`state`).

use super::Sip;
use dialproof_engine::lease::LineId;
use dialproof_engine::verification::Event;
use dialproof_storage::WriteOp;
use std::sync::Arc;

/// The failure reason of a verification whose line went down.
pub const LINE_DOWN_REASON: &str = "sip line down";

/// Marks line `name` up or down. Going down with `fail_pending` also fails
/// every pending verification on the line. Called by the driver at start
/// (without failing anything) and on every change.
pub fn set_line_up(ctx: &Arc<Sip>, name: &str, up: bool, fail_pending: bool) {
    let states = &ctx.lines;
    let mut guard = states.up.lock();
    if guard.insert(name.to_owned(), up) != Some(up) {
        states.changed_at.lock().insert(name.to_owned(), ctx.now());
    }
    let config = ctx.config.read().clone();
    let Some(index) = config.lines.iter().position(|l| l.name == name) else {
        return;
    };
    let Ok(line) = LineId::try_from(index) else {
        return;
    };
    // The leases of the line as it goes down, taken in the same look.
    let leases: Vec<(String, u32)> = ctx.leases.with_table(|table| {
        table.set_line_up(line, up);
        if up || !fail_pending {
            return Vec::new();
        }
        table
            .leases()
            .into_iter()
            .filter(|(number, _)| {
                table
                    .slot_of(number)
                    .is_some_and(|slot| table.line_of(slot) == line)
            })
            .collect()
    });
    drop(guard);
    if !fail_pending {
        tracing::info!(line = name, up, "sip line starts");
        return;
    }
    tracing::warn!(line = name, up, "sip line state changed");
    if up {
        return;
    }
    fail_leases(ctx, name, leases);
}

/// Every live lease on a line that went down: its verification cannot be
/// completed by a call any more, so it fails now rather than expire
/// silently.
fn fail_leases(ctx: &Sip, name: &str, leases: Vec<(String, u32)>) {
    let now = ctx.now();
    let mut failed = 0usize;
    for (number, generation) in leases {
        let logged = number.clone();
        let op = WriteOp::TransitionByNumber {
            dial_number: number.clone(),
            generation: Some(generation),
            event: Event::Fail {
                at: now,
                reason: LINE_DOWN_REASON.to_owned(),
            },
            // Its consequences are the commit consumer's; only a failure is
            // this line's to report.
            reply: Some(Box::new(move |r| {
                if let Err(e) = r {
                    tracing::error!(number = %logged, error = %e,
                        "failing a verification of a down line");
                }
            })),
        };
        match ctx.store.submit(op) {
            Ok(()) => failed += 1,
            Err(e) => tracing::error!(%number, error = %e, "failing a verification of a down line"),
        }
    }
    if failed > 0 {
        tracing::warn!(
            line = name,
            failed,
            "pending verifications failed: sip line down"
        );
    }
}
