//! Spawning may coroutines: the one place that says why may's unsafe spawn
//! is sound in this service, the stack every coroutine gets, and the
//! keeping of each finished coroutine's handle for a while (see below). The
//! HTTP listeners and the thread pool's tests spawn here (SIP runs on a
//! thread of its own, `crate::sip`).
//!
//! Why finished coroutines' handles are kept: in may 0.3.51, an event
//! source that parks a coroutine (a sleep, a park, an IO wait) first hands
//! the coroutine to another thread (the timer thread, an unparker, the
//! event loop), then writes the coroutine's cancel data, which lives in the
//! coroutine's handle (`Sleep::subscribe`: `add_timer`, then
//! `cancel.set_co`). If the thread that subscribes is descheduled between
//! the two, the other thread can resume the coroutine, run it to its end
//! and free its handle, and the write lands in freed memory. valgrind
//! showed the write in this service's tests (`Sleep::subscribe`, 96 bytes
//! inside a 104-byte block freed by the timer thread's
//! `Done::drop_coroutine`); it is the likely cause, not a proven one, of
//! two test servers that aborted with `malloc(): unaligned fastbin chunk
//! detected`. Every spawn here keeps the coroutine's join
//! handle, which holds a reference to that handle, until [`HANDLE_GRACE`]
//! after the coroutine ended, so the late write lands in live memory unless
//! a thread stays descheduled inside those few instructions for that long.
//! The test `resilience::coroutines` runs coroutines that sleep and end
//! under valgrind.
//!
//! Not for: configuring may's workers (`crate::runtime::service`) or waiting
//! for another thread's answer (`crate::shared::wait`).

use may::coroutine::JoinHandle;
use parking_lot::Mutex;
use std::sync::Once;
use std::time::{Duration, Instant};

/// Stack of each coroutine. rustls needs about 12 KiB of stack, and
/// coroutines that log overflowed may's 32 KiB default in 2 of 4 debug runs
/// when this was measured, so give ample room.
pub const STACK_BYTES: usize = 128 * 1024;

/// How long a finished coroutine's handle is kept (see the module doc):
/// far beyond any time a running thread is descheduled on a loaded host.
pub const HANDLE_GRACE: Duration = Duration::from_secs(5);
/// How often the keeper looks for coroutines that ended.
const KEEPER_INTERVAL: Duration = Duration::from_millis(500);

/// A spawned coroutine's join handle, and when it was first seen ended.
struct Kept {
    handle: JoinHandle<()>,
    ended: Option<Instant>,
}

/// Handles of coroutines spawned since the keeper last looked.
static NEW: Mutex<Vec<Kept>> = Mutex::new(Vec::new());
static KEEPER: Once = Once::new();

/// Spawns a may coroutine with [`STACK_BYTES`] of stack.
pub fn spawn<F>(f: F)
where
    F: FnOnce() + Send + 'static,
{
    let builder = may::coroutine::Builder::new().stack_size(STACK_BYTES);
    // SAFETY: may marks spawning unsafe because a coroutine may migrate
    // between threads, which breaks code that keeps thread-local state across
    // a yield. Our coroutines hold no thread-local borrows across blocking
    // calls: no entered tracing span is held across IO, a sleep or a channel
    // call (an entered span held across a yield was measured to attribute
    // about half of the events to the wrong span), so this holds.
    let spawned = unsafe { builder.spawn(f) };
    match spawned {
        Ok(handle) => keep(handle),
        Err(e) => tracing::error!(error = %e, "could not spawn a coroutine"),
    }
}

/// Hands `handle` to the keeper, starting it on first use.
fn keep(handle: JoinHandle<()>) {
    KEEPER.call_once(|| {
        let started = std::thread::Builder::new()
            .name("coroutine-keeper".into())
            .spawn(keeper);
        if let Err(e) = started {
            // Without the keeper the handles pile up in NEW: memory, not
            // safety, so the service goes on and says so.
            tracing::error!(error = %e, "could not start the coroutine handle keeper");
        }
    });
    NEW.lock().push(Kept {
        handle,
        ended: None,
    });
}

/// The keeper thread: drops each handle [`HANDLE_GRACE`] after its
/// coroutine was first seen ended. The lock on [`NEW`] is held only to take
/// the new handles, so a spawn never waits for a scan.
fn keeper() {
    let mut kept: Vec<Kept> = Vec::new();
    loop {
        std::thread::sleep(KEEPER_INTERVAL);
        kept.append(&mut NEW.lock());
        let now = Instant::now();
        kept.retain_mut(|k| {
            if k.ended.is_none() && k.handle.is_done() {
                k.ended = Some(now);
            }
            k.ended
                .is_none_or(|ended| now.duration_since(ended) < HANDLE_GRACE)
        });
        // A burst of connections leaves a large vector behind; give it back
        // once it is mostly empty.
        if kept.capacity() > 4 * kept.len().max(1024) {
            kept.shrink_to(2 * kept.len());
        }
    }
}
