//! The expiry thread: it drives the schedule (`crate::shared::expiries`).
//!
//! The thread sleeps on a condvar until the next entry is due, an
//! earlier one arrives or the writer reopens room, submits what the queue
//! hands out as `Expire` transitions, and reports each outcome back: done
//! after COMMIT, failed (and due again shortly) when the writer refused or
//! failed it. The state machine ignores an expiry whose verification already
//! ended, so a completion or cancel never has to find and remove its entry.
//!
//! Not for: deciding what is due, how much goes to the writer at once or
//! when a failed expiry is retried (the engine's queue decides), nor
//! applying it (the writer runs the state machine).

use crate::runtime::app::App;
use dialproof_engine::ids::VerificationKey;
use dialproof_engine::verification::Event;
use dialproof_storage::{StorageError, TransitionResult, WriteOp};
use std::sync::Arc;

pub fn spawn(app: Arc<App>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("expiry".into())
        .spawn(move || run(&app))
        .map(|_| ())
}

fn run(app: &Arc<App>) {
    loop {
        let due = app.expiries.next_due(&app.clock, &app.stop);
        if due.is_empty() {
            return;
        }
        submit(app, due);
    }
}

/// Hands `keys` to the writer as `Expire` transitions. At the first refusal
/// (its queue is full, or it is shutting down) the rest would be refused
/// too: they all go back to the schedule to be tried again.
fn submit(app: &Arc<App>, keys: Vec<VerificationKey>) {
    let now = app.now();
    let mut keys = keys.into_iter();
    while let Some(key) = keys.next() {
        let replied = app.clone();
        let op = WriteOp::Transition {
            id: key.id().into_string(),
            owner: None,
            event: Event::Expire { at: now },
            reply: Some(Box::new(move |r| answered(&replied, key, r))),
        };
        if let Err(e) = app.store.submit(op) {
            tracing::warn!(error = %e, refused = 1 + keys.len(),
                "writer refused expiries; retrying shortly");
            app.expiries
                .failed(app.now(), std::iter::once(key).chain(keys));
            return;
        }
    }
}

/// The writer's reply to an expiry (on the writer thread): effects of the
/// commit, or the expiry back in the schedule.
fn answered(app: &App, key: VerificationKey, result: Result<TransitionResult, StorageError>) {
    match result {
        // What the commit means (the number released, the webhook woken)
        // is the commit consumer's (`crate::runtime::commits`).
        Ok(_) => app.expiries.done(),
        Err(e) => {
            tracing::warn!(error = %e, verification_id = %key.id(), "expiry failed; retrying");
            app.expiries.failed(app.now(), [key]);
        }
    }
}
