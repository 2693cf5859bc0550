//! Spawning may coroutines: the one place that says why may's unsafe spawn
//! is sound in this service, and the stack every coroutine gets. The HTTP
//! listeners, the SIP socket and the thread pool's tests all spawn here.
//!
//! Not for: configuring may's workers (`crate::runtime::service`) or waiting
//! for another thread's answer (`crate::shared::wait`).

/// Stack of each coroutine. rustls needs about 12 KiB of stack, and
/// coroutines that log overflowed may's 32 KiB default in 2 of 4 debug runs
/// when this was measured, so give ample room.
pub const STACK_BYTES: usize = 128 * 1024;

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
    if let Err(e) = spawned {
        tracing::error!(error = %e, "could not spawn a coroutine");
    }
}
