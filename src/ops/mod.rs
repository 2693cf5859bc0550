//! The operators' listener: plain HTTP on its own address (`[server]
//! ops_listen`, off unless configured; keep it on loopback or a private
//! network), serving
//! - `GET /metrics`: Prometheus text exposition (`exposition`);
//! - `GET /healthz`: 200 while the process runs;
//! - `GET /readyz`: 200 when recovery is done, the listeners are bound and
//!   storage takes writes; else 503 naming the check that failed.
//!
//! It uses the service's own hardened HTTP/1.1 layer (`crate::http`), not
//! may_minihttp: that one panics on a malformed Content-Length and has no
//! header limits (DESIGN.md), and this port is reachable by whatever can
//! reach the host's internal network.
//!
//! Not for: the public API (`crate::api`) or anything that changes state.

mod exposition;

use crate::http::{Request, Response};
use crate::runtime::app::App;
use std::sync::atomic::Ordering;

/// One request on the ops listener.
pub fn handle(app: &App, req: &Request) -> Response {
    if req.method != "GET" && req.method != "HEAD" {
        return text(405, "method not allowed\n");
    }
    match req.path.as_str() {
        "/metrics" => Response::new(200)
            .with_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            .with_body(exposition::render(app).into_bytes()),
        "/healthz" => text(200, "ok\n"),
        "/readyz" => match not_ready(app) {
            None => text(200, "ready\n"),
            Some(why) => text(503, &format!("not ready: {why}\n")),
        },
        _ => text(404, "not found\n"),
    }
}

/// The first readiness check that fails, in the order a start passes them.
fn not_ready(app: &App) -> Option<&'static str> {
    if !app.readiness.recovered.load(Ordering::Acquire) {
        return Some("recovery not done");
    }
    if !app.readiness.listening.load(Ordering::Acquire) {
        return Some("listeners not bound");
    }
    if app.stopping() {
        return Some("stopping");
    }
    if app.store.stats().last_batch_failed {
        return Some("storage is failing writes");
    }
    None
}

fn text(status: u16, body: &str) -> Response {
    Response::new(status)
        .with_header("Content-Type", "text/plain; charset=utf-8")
        .with_body(body.as_bytes().to_vec())
}
