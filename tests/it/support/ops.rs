//! Starting the service with its operators' listener (`ops_listen`) and
//! reading `/metrics` from it, for the tests of metrics, alerts and number
//! health.
//!
//! Not for: parsing the exposition format as a whole (`crate::ops::metrics`
//! checks it with an independent parser).

use super::{poll, Server, IO_TIMEOUT};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// Starts a [`Server::prepare`]d server with `ops_listen` on an ephemeral
/// loopback port added to `[server]`, after `edit` has changed the rest of
/// its configuration text; returns the server and the ops address.
pub fn start_with_ops_edited(extra: &str, edit: impl FnOnce(String) -> String) -> (Server, String) {
    let mut server = Server::prepare(extra);
    add_ops_listen(&server, edit);
    server.launch();
    // The harness may learn of the READY line before it is in the logs.
    let ready = poll(Duration::from_secs(5), || {
        let logs = server.logs();
        let line = logs
            .lines()
            .rfind(|l| l.contains("READY ") && l.contains(" ops="))?;
        Some(line.to_owned())
    })
    .unwrap_or_else(|| panic!("no READY line with ops= in:\n{}", server.logs()));
    let ops = ready
        .split_whitespace()
        .find_map(|p| p.strip_prefix("ops=").map(str::to_owned))
        .unwrap_or_else(|| panic!("no ops= in {ready}"));
    (server, ops)
}

/// Adds `ops_listen` on an ephemeral loopback port to the `[server]` of a
/// [`Server::prepare`]d server's configuration, then lets `edit` change
/// the whole text; the READY line of its start names the address.
pub fn add_ops_listen(server: &Server, edit: impl FnOnce(String) -> String) {
    let config = std::fs::read_to_string(&server.config_path).expect("config");
    assert!(
        config.contains("workers = 2\n"),
        "add_ops_listen puts ops_listen after the [server] section's `workers = 2` line \
         (the harness's config), which this config lacks:\n{config}"
    );
    let config = config.replacen(
        "workers = 2\n",
        "workers = 2\nops_listen = \"127.0.0.1:0\"\n",
        1,
    );
    std::fs::write(&server.config_path, edit(config)).expect("config");
}

/// Like [`Server::start`] with `ops_listen` on an ephemeral loopback port;
/// returns the server and that port's address (from the READY line).
pub fn start_with_ops(config_extra: &str) -> (Server, SocketAddr) {
    let (server, ops) = start_with_ops_edited(config_extra, |c| c);
    let ops = ops.parse().expect("ops address");
    (server, ops)
}

/// The body of `GET /metrics` from the ops listener at `addr`.
pub fn scrape_metrics(addr: &str) -> String {
    let mut s = TcpStream::connect(addr).expect("connect to ops");
    s.set_read_timeout(Some(IO_TIMEOUT)).expect("read timeout");
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: ops\r\nConnection: close\r\n\r\n")
        .expect("send");
    let mut text = String::new();
    s.read_to_string(&mut text).expect("read /metrics");
    text.split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_owned()
}

/// The value of one Prometheus sample, `series` written exactly as the
/// exposition writes it (`name{label="value"}`), from `GET /metrics` at
/// `ops`; `None` when the series is absent.
pub fn metric(ops: SocketAddr, series: &str) -> Option<f64> {
    let text = scrape_metrics(&ops.to_string());
    text.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}
