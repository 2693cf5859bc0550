//! Starting SIP: the socket bound with its buffers, a registration or ping
//! client per line, and the SIP thread (`super::driver`).
//!
//! Not for: what happens once it runs (`super::driver`, `super::calls`).

use super::driver::{Client, ClientKind, Clock, Driver, SipHandle, SOCKET_BUFFER_BYTES};
use super::inbox::Inbox;
use super::line_info::{resolve_lines, LineInfo};
use super::lines::set_line_up;
use super::Sip;
use crate::shared::config::{Config, LineConfig, LineMode};
use anyhow::{Context, Result};
use dialproof_engine::sip::ping::{PingConfig, Pinger};
use dialproof_engine::sip::register::{Registration, RegistrationConfig};
use dialproof_engine::sip::server::Endpoint;
use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::Duration;

/// Binds `[sip] listen`, starts the clients and the coroutines. `None` when
/// the configuration has no `[sip]` section.
pub fn spawn(ctx: &Arc<Sip>, config: &Config) -> Result<Option<SipHandle>> {
    let lines = resolve_lines(config)?;
    ctx.lines.set_lines(lines.clone());
    let Some(sip) = &config.sip else {
        return Ok(None);
    };
    let socket = bind(sip.listen)?;
    let addr = socket.local_addr()?;
    let clock = Clock::new(ctx.clock.clone());
    let seed: u64 = rand::random();
    let mut clients = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let line_seed = seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let local = |provider| local_address(addr, sip.public_address, provider);
        let Some(kind) = client_for(line, &config.lines[i], local, &clock, line_seed) else {
            if line.mode == LineMode::AlwaysUp {
                // Up from the start and for good; recorded so that the
                // metrics list it with the others.
                set_line_up(ctx, &line.name, true, false);
            }
            continue;
        };
        let up = matches!(kind, ClientKind::Ping(_));
        // Record the starting state so a table rebuild sees it. Nothing is
        // failed at start: a restarted service's lines come up in
        // milliseconds, and the pending verifications they hold expire
        // normally if one does not.
        set_line_up(ctx, &line.name, up, false);
        clients.push(Client {
            line: line.name.clone(),
            kind,
            up,
        });
    }
    let done = start_thread(ctx, socket, clients, clock, seed)?;
    tracing::info!(%addr, "sip listening (udp)");
    Ok(Some(SipHandle { addr, done }))
}

/// The SIP socket, non-blocking (the SIP thread waits in `poll`), with the
/// buffers `SOCKET_BUFFER_BYTES` asks for.
fn bind(listen: SocketAddr) -> Result<UdpSocket> {
    let socket = UdpSocket::bind(listen).with_context(|| format!("binding SIP on {listen}"))?;
    socket.set_nonblocking(true)?;
    let sock = socket2::SockRef::from(&socket);
    // Best effort: a smaller buffer only means drops under bursts.
    let _ = sock.set_recv_buffer_size(SOCKET_BUFFER_BYTES);
    let _ = sock.set_send_buffer_size(SOCKET_BUFFER_BYTES);
    tracing::debug!(
        recv = sock.recv_buffer_size().unwrap_or(0),
        send = sock.send_buffer_size().unwrap_or(0),
        "sip socket buffers"
    );
    Ok(socket)
}

/// The registration or ping client a line runs, started at `clock`'s now;
/// `None` for a line without a provider or one that is always up.
fn client_for(
    line: &LineInfo,
    cfg: &LineConfig,
    local: impl Fn(SocketAddr) -> SocketAddr,
    clock: &Clock,
    seed: u64,
) -> Option<ClientKind> {
    let (Some(provider), Some(host)) = (line.provider, line.provider_host.clone()) else {
        return None;
    };
    let local = local(provider);
    let kind = match line.mode {
        LineMode::Register => {
            let mut reg = Registration::new(
                RegistrationConfig {
                    registrar: provider,
                    domain: cfg.domain.clone().unwrap_or(host),
                    username: cfg.username.clone().unwrap_or_default(),
                    auth_username: cfg.auth_username.clone(),
                    password: cfg.password.clone().unwrap_or_default(),
                    expires_seconds: cfg.register_expires_seconds,
                    local,
                    contact_user: line.contact_user.clone(),
                },
                seed,
            );
            reg.start(clock.now());
            ClientKind::Register(Box::new(reg))
        }
        LineMode::IpAuth => ClientKind::Ping(Box::new(Pinger::new(
            PingConfig {
                target: provider,
                domain: cfg.domain.clone().unwrap_or(host),
                local,
                interval: Duration::from_secs(cfg.ping_interval_seconds.into()),
                failures_max: cfg.ping_failures_max,
            },
            clock.now(),
            seed,
        ))),
        LineMode::AlwaysUp => return None,
    };
    tracing::info!(line = %line.name, %provider, %local, mode = line.mode.as_str(), "sip line started");
    Some(kind)
}

/// The SIP thread; the returned channel says when it has ended (after its
/// un-REGISTERs).
fn start_thread(
    ctx: &Arc<Sip>,
    socket: UdpSocket,
    clients: Vec<Client>,
    clock: Clock,
    seed: u64,
) -> Result<may::sync::mpsc::Receiver<()>> {
    let (inbox, decisions) = Inbox::new().context("creating the SIP eventfd")?;
    let (done_tx, done_rx) = may::sync::mpsc::channel();
    let driver = Driver {
        ctx: ctx.clone(),
        socket,
        endpoint: Endpoint::new(seed.rotate_left(17)),
        clients,
        clock,
        inbox,
        decisions,
        inbound: VecDeque::new(),
        spares: Vec::new(),
        fence_unregistered: false,
    };
    std::thread::Builder::new()
        .name("sip".into())
        .spawn(move || {
            driver.run();
            let _ = done_tx.send(());
        })
        .context("starting the SIP thread")?;
    Ok(done_rx)
}

/// Our address as `provider` reaches it: the configured public address,
/// else the bound address, else (bound to 0.0.0.0) the source address the
/// kernel picks toward the provider.
fn local_address(bound: SocketAddr, public: Option<IpAddr>, provider: SocketAddr) -> SocketAddr {
    if let Some(ip) = public {
        return SocketAddr::new(ip, bound.port());
    }
    if !bound.ip().is_unspecified() {
        return bound;
    }
    let probe = std::net::UdpSocket::bind(SocketAddr::new(bound.ip(), 0))
        .and_then(|s| s.connect(provider).and_then(|()| s.local_addr()));
    match probe {
        Ok(a) => SocketAddr::new(a.ip(), bound.port()),
        Err(_) => bound,
    }
}
