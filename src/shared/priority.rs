//! The CPU priority of threads whose work can wait a few milliseconds for
//! work that cannot: the webhook pipeline runs [`BACKGROUND_NICE_STEP`]
//! nice steps below the rest of the service.
//!
//! Why: a leased call is answered only after its commit, so the SIP
//! workers and the storage writer are on the caller's path, while a
//! webhook is a durable row that the driver and its senders deliver
//! within seconds. When the two cores are busy, Linux shares them by
//! weight, and at equal weight the senders (one thread per connection in
//! flight) and the driver take their turns between a call's INVITE and
//! its final response. Measured with sipp at about 60 % of the saturated
//! rate (`tools/sip-bench.sh`, benches/README.md "Background threads at a
//! lower priority"): the leased p99 fell from 28-48 ms to 24-32 ms with
//! the pipeline's threads ten steps lower; at 1,000 calls a second a
//! webhook leaves about 0.4 ms later. Weights share, never starve: a
//! nice-10 thread still gets about a tenth of a core against one busy
//! nice-0 thread, and the senders are many.
//!
//! On Linux a thread's nice value is its own (the system call names the
//! process, but NPTL applies it to the calling thread), so this lowers
//! only the thread that calls it. The step is relative: an operator's
//! `Nice=` in the unit lowers the whole service and the pipeline stays
//! the same steps below it (up to nice 19).
//!
//! Not for: real-time scheduling, or capping the service's CPU (the
//! unit's `CPUWeight=` and `CPUQuota=` do that).

/// How many nice steps the webhook pipeline's threads run below the rest.
pub const BACKGROUND_NICE_STEP: i32 = 10;

/// Lowers the calling thread's CPU priority by [`BACKGROUND_NICE_STEP`]
/// nice steps (capped at 19). Lowering needs no privilege; if the system
/// refuses anyway, the thread keeps its priority and a warning says so.
pub fn lower_this_thread() {
    // SAFETY: errno is thread-local; clearing it tells nice()'s
    // legitimate -1 (a nice value of -1) from a failure, as nice(2) asks.
    unsafe { *libc::__errno_location() = 0 };
    // SAFETY: nice() takes a plain integer and touches only this thread's
    // scheduling attributes.
    let now = unsafe { libc::nice(BACKGROUND_NICE_STEP) };
    let error = std::io::Error::last_os_error();
    if now == -1 && error.raw_os_error().is_some_and(|code| code != 0) {
        let thread = std::thread::current();
        tracing::warn!(
            thread = thread.name().unwrap_or("unnamed"),
            error = %error,
            "could not lower this thread's CPU priority; it competes with calls at equal weight"
        );
    }
}
