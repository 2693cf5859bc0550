//! SIP on the service's side: the UDP socket, the registration and ping
//! clients of the lines, and what an inbound call does to a verification.
//!
//! Files in the order a call travels: `driver` (the socket, the coroutines
//! and the engine's state machines), `calls` (from an INVITE to a writer
//! transition and a final response), `lines` (each line's resolved SIP
//! settings, its up/down state and what going down does).
//!
//! The protocol itself lives in `dialproof_engine::sip` (sans-IO); this
//! module only moves bytes, reads the clock and turns decisions into
//! effects. Not for: parsing SIP, timers' arithmetic, or deciding a
//! verification's state (the engine's state machine does, in the writer).

mod calls;
mod driver;
mod line_info;
mod lines;
pub mod state;

pub use driver::spawn;
pub use state::SipStats;

/// After the control loop swapped in a rebuilt lease table and the new
/// configuration: re-resolves the lines and re-applies their up/down state
/// (a change that raced the rebuild is applied again here). Registration
/// and ping clients keep the settings they started with until a restart.
pub fn on_table_rebuilt(app: &crate::runtime::app::App) {
    let config = app.config.read().clone();
    match line_info::resolve_lines(&config) {
        Ok(resolved) => app.sip_lines.set_lines(resolved),
        Err(e) => tracing::error!(error = %e, "sip lines not re-resolved; keeping the old ones"),
    }
    app.sip_lines.reapply(&app.leases, &config);
}
