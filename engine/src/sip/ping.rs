//! OPTIONS keep-alive of an IP-authenticated line, sans-IO.
//!
//! Such a trunk has no registration to lose, so we ask the provider every
//! `interval` whether it is there: an OPTIONS, retransmitted on Timer E (T1
//! doubling to T2) until [`PING_TIMEOUT`]. Any final response counts as
//! alive (a 404 or 405 still proves the provider answers); a timeout counts
//! as a failure. `failures_max` consecutive failures take the line down; one
//! answer brings it back. The line starts up: an IP trunk works without our
//! asking, and withholding its numbers until the first answer would fail
//! creates for nothing at every start.
//!
//! Not for: registration (see [`super::register`]).

use super::client_tx::ClientRetransmit;
use super::message::{Message, BRANCH_COOKIE};
use super::response::PRODUCT;
use super::rng::SplitMix64;
use super::server::Transmit;
use super::Instant;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

/// How long one ping may go unanswered before it counts as failed.
pub const PING_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PingConfig {
    pub target: SocketAddr,
    /// The provider's domain, for the Request-URI.
    pub domain: String,
    pub local: SocketAddr,
    pub interval: Duration,
    pub failures_max: u32,
}

/// A change of the line's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    Up,
    Down,
}

struct Outstanding {
    cseq: u32,
    retransmit: ClientRetransmit,
}

pub struct Pinger {
    cfg: PingConfig,
    rng: SplitMix64,
    call_id: String,
    cseq: u32,
    up: bool,
    failures: u32,
    outstanding: Option<Outstanding>,
    next_ping: Instant,
    transmits: VecDeque<Transmit>,
}

impl Pinger {
    /// The first ping goes out at `now`.
    pub fn new(cfg: PingConfig, now: Instant, seed: u64) -> Pinger {
        let mut rng = SplitMix64::new(seed);
        let call_id = format!("{}-ping@dialproof", rng.hex());
        Pinger {
            cfg,
            rng,
            call_id,
            cseq: 0,
            up: true,
            failures: 0,
            outstanding: None,
            next_ping: now,
            transmits: VecDeque::new(),
        }
    }

    pub fn call_id(&self) -> &str {
        &self.call_id
    }

    pub fn is_up(&self) -> bool {
        self.up
    }

    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.transmits.pop_front()
    }

    pub fn poll_timeout(&self) -> Option<Instant> {
        Some(match &self.outstanding {
            Some(o) => o.retransmit.deadline(),
            None => self.next_ping,
        })
    }

    pub fn handle_timeout(&mut self, now: Instant) -> Option<Change> {
        if let Some(o) = &mut self.outstanding {
            if o.retransmit.timed_out(now) {
                self.outstanding = None;
                self.next_ping = now.plus(self.cfg.interval);
                self.failures = self.failures.saturating_add(1);
                if self.up && self.failures >= self.cfg.failures_max.max(1) {
                    self.up = false;
                    return Some(Change::Down);
                }
                return None;
            }
            if let Some(bytes) = o.retransmit.due(now) {
                self.transmits.push_back(Transmit {
                    to: self.cfg.target,
                    bytes,
                });
            }
            return None;
        }
        if now >= self.next_ping {
            self.send(now);
        }
        None
    }

    pub fn handle_response(&mut self, now: Instant, msg: &Message) -> Option<Change> {
        let code = msg.status()?;
        if code < 200 || msg.call_id() != self.call_id {
            return None;
        }
        let o = self.outstanding.as_ref()?;
        if o.cseq != msg.cseq.0 {
            return None;
        }
        self.outstanding = None;
        self.next_ping = now.plus(self.cfg.interval);
        self.failures = 0;
        if self.up {
            None
        } else {
            self.up = true;
            Some(Change::Up)
        }
    }

    fn send(&mut self, now: Instant) {
        self.cseq = self.cseq.wrapping_add(1);
        let bytes = format!(
            "OPTIONS sip:{domain} SIP/2.0\r\n\
             Via: SIP/2.0/UDP {local};branch={BRANCH_COOKIE}{branch};rport\r\n\
             Max-Forwards: 70\r\n\
             From: <sip:dialproof@{local}>;tag={tag}\r\n\
             To: <sip:{domain}>\r\n\
             Call-ID: {call_id}\r\n\
             CSeq: {cseq} OPTIONS\r\n\
             User-Agent: {PRODUCT}\r\n\
             Content-Length: 0\r\n\r\n",
            domain = self.cfg.domain,
            local = self.cfg.local,
            branch = self.rng.hex(),
            tag = self.rng.hex(),
            call_id = self.call_id,
            cseq = self.cseq,
        )
        .into_bytes();
        self.transmits.push_back(Transmit {
            to: self.cfg.target,
            bytes: bytes.clone(),
        });
        self.outstanding = Some(Outstanding {
            cseq: self.cseq,
            retransmit: ClientRetransmit::new(now, bytes, PING_TIMEOUT),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::super::response::build_response;
    use super::*;

    fn pinger() -> Pinger {
        Pinger::new(
            PingConfig {
                target: "192.0.2.1:5060".parse().unwrap(),
                domain: "sip.example".into(),
                local: "192.0.2.50:5062".parse().unwrap(),
                interval: Duration::from_secs(30),
                failures_max: 3,
            },
            Instant(0),
            5,
        )
    }

    fn take(p: &mut Pinger) -> Vec<Message> {
        std::iter::from_fn(|| p.poll_transmit())
            .map(|t| Message::parse(&t.bytes).unwrap())
            .collect()
    }

    /// Runs the pinger until the outstanding ping times out.
    fn lose_one(p: &mut Pinger, now: &mut Instant) -> Option<Change> {
        loop {
            *now = p.poll_timeout().unwrap();
            let change = p.handle_timeout(*now);
            take(p);
            if p.outstanding.is_none() {
                return change;
            }
        }
    }

    #[test]
    fn answers_keep_it_up_failures_take_it_down_one_answer_brings_it_back() {
        let mut p = pinger();
        let mut now = Instant(0);
        p.handle_timeout(now);
        let ping = take(&mut p).pop().unwrap();
        assert_eq!(ping.method().unwrap().as_str(), "OPTIONS");
        // A 404 still proves the provider is there.
        let vias: Vec<String> = ping.headers_named("Via").map(str::to_owned).collect();
        let resp = Message::parse(&build_response(&ping, &vias, 404, Some("x"), &[])).unwrap();
        assert_eq!(p.handle_response(now, &resp), None);
        assert!(p.is_up());
        assert_eq!(p.poll_timeout(), Some(Instant(30_000)));

        now = Instant(30_000);
        p.handle_timeout(now);
        take(&mut p);
        assert_eq!(lose_one(&mut p, &mut now), None);
        assert_eq!(now.since(Instant(30_000)), PING_TIMEOUT);
        now = p.poll_timeout().unwrap();
        p.handle_timeout(now);
        take(&mut p);
        assert_eq!(lose_one(&mut p, &mut now), None);
        now = p.poll_timeout().unwrap();
        p.handle_timeout(now);
        take(&mut p);
        assert_eq!(lose_one(&mut p, &mut now), Some(Change::Down));
        assert!(!p.is_up());

        now = p.poll_timeout().unwrap();
        p.handle_timeout(now);
        let ping = take(&mut p).pop().unwrap();
        let vias: Vec<String> = ping.headers_named("Via").map(str::to_owned).collect();
        let ok = Message::parse(&build_response(&ping, &vias, 200, Some("x"), &[])).unwrap();
        assert_eq!(p.handle_response(now, &ok), Some(Change::Up));
        // A stale answer (old CSeq) changes nothing.
        assert_eq!(p.handle_response(now, &resp), None);
    }
}
