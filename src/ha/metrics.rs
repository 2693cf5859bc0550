//! `dialproof ha`'s own counters and gauges, and the small listener that
//! serves them as Prometheus text on `[ha] metrics_listen`: the role, the
//! lease's age, elections won and lost, the time to promote, fences.
//!
//! Not for: the service's metrics (its own ops listener, `crate::ops`).

use dialproof_engine::ha::Role;
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(Default)]
pub struct HaMetrics {
    role: AtomicU8,
    /// Milliseconds since the last successful renewal's send; -1 without
    /// a lease.
    lease_age_ms: AtomicI64,
    pub elections_won: AtomicU64,
    pub elections_lost: AtomicU64,
    pub promotions: AtomicU64,
    pub promote_ms_last: AtomicI64,
    pub fences: AtomicU64,
    pub fenced_at_ms: AtomicI64,
}

const ROLES: [(Role, &str); 4] = [
    (Role::Standby, "standby"),
    (Role::Promoting, "promoting"),
    (Role::Primary, "primary"),
    (Role::Fenced, "fenced"),
];

pub fn role_name(role: Role) -> &'static str {
    ROLES
        .iter()
        .find(|(r, _)| *r == role)
        .map_or("standby", |(_, n)| n)
}

impl HaMetrics {
    pub fn set(&self, role: Role, lease_age_ms: Option<i64>) {
        let i = ROLES.iter().position(|(r, _)| *r == role).unwrap_or(0);
        self.role.store(i as u8, Ordering::Relaxed);
        self.lease_age_ms
            .store(lease_age_ms.unwrap_or(-1), Ordering::Relaxed);
    }

    pub fn render(&self) -> String {
        let mut out = self.render_role();
        self.render_rest(&mut out);
        out
    }

    fn render_role(&self) -> String {
        let mut out = String::new();
        let role = self.role.load(Ordering::Relaxed) as usize;
        let _ = writeln!(
            out,
            "# HELP dialproof_ha_role 1 for this node's role.\n# TYPE dialproof_ha_role gauge"
        );
        for (i, (_, name)) in ROLES.iter().enumerate() {
            let _ = writeln!(
                out,
                "dialproof_ha_role{{role=\"{name}\"}} {}",
                u8::from(i == role)
            );
        }
        out
    }

    fn render_rest(&self, out: &mut String) {
        let age = self.lease_age_ms.load(Ordering::Relaxed);
        let gauges = [
            (
                "dialproof_ha_lease_age_seconds",
                "Since the send of the last successful renewal (-1: no lease).",
                if age < 0 { -1.0 } else { age as f64 / 1000.0 },
            ),
            (
                "dialproof_ha_promote_seconds",
                "The last promotion's time from the win to serving.",
                self.promote_ms_last.load(Ordering::Relaxed) as f64 / 1000.0,
            ),
            (
                "dialproof_ha_fenced_timestamp_seconds",
                "When this node last fenced itself (0: never).",
                self.fenced_at_ms.load(Ordering::Relaxed) as f64 / 1000.0,
            ),
        ];
        for (name, help, v) in gauges {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {v}");
        }
        let counters = [
            (
                "dialproof_ha_elections_won_total",
                "Elections this node won.",
                &self.elections_won,
            ),
            (
                "dialproof_ha_elections_lost_total",
                "Elections this node lost.",
                &self.elections_lost,
            ),
            (
                "dialproof_ha_promotions_total",
                "Promotions that reached serving.",
                &self.promotions,
            ),
            (
                "dialproof_ha_fences_total",
                "Times this node fenced itself with its lease in doubt.",
                &self.fences,
            ),
        ];
        for (name, help, c) in counters {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}",
                c.load(Ordering::Relaxed)
            );
        }
    }
}

/// Serves `GET /metrics` (any path) on `addr`, one connection at a time.
pub fn serve(addr: SocketAddr, metrics: Arc<HaMetrics>) -> anyhow::Result<SocketAddr> {
    let listener = TcpListener::bind(addr)?;
    let bound = listener.local_addr()?;
    std::thread::Builder::new()
        .name("ha-metrics".into())
        .spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut s) = stream else { continue };
                let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                // The request itself does not matter (one page is served),
                // but it is read to its end: closing on unread bytes
                // would reset the connection under the answer.
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 8192 {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let body = metrics.render();
                let _ = write!(
                    s,
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n\
                     Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        })?;
    Ok(bound)
}
