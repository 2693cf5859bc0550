//! The registration client of one line (RFC 3261 s10.2), sans-IO.
//!
//! [`Registration::start`] sends the first REGISTER; from then on the
//! driver feeds it the responses whose Call-ID is [`Registration::call_id`]
//! and wakes it at [`Registration::poll_timeout`]. [`Registration::is_up`]
//! says whether the line's numbers may be issued.
//!
//! - REGISTER carries `Expires`; a 401 or 407 is answered once with MD5
//!   digest credentials (with `qop=auth` when offered, counting `nc` on the
//!   reused nonce for refreshes); a second challenge for the same nonce
//!   that is not `stale` means the credentials are wrong.
//! - 423 Interval Too Brief: asked again at once with its `Min-Expires`.
//! - 200: the granted expiry is our Contact's `expires` parameter, else the
//!   `Expires` header, else what we asked; the refresh goes out at half of
//!   it (well before the end, and early enough for a lost refresh to be
//!   retransmitted through Timer F within the remaining half on any expiry
//!   above 64 s).
//! - Any failure (an error response, wrong credentials, no answer within
//!   Timer F = 64*T1) or the granted expiry passing takes the line down at
//!   once: the provider said no, or is unreachable, so calls to our numbers
//!   may not reach us. Retries follow exponential backoff
//!   ([`RETRY_BASE`] doubling to [`RETRY_MAX`]) with jitter (a random
//!   half to whole of the step), so a provider outage does not bring all
//!   our lines back in lockstep.
//! - [`Registration::shutdown`] sends `Expires: 0`.
//!
//! Retransmission is the non-INVITE client transaction's (s17.1.2): Timer
//! E from T1 doubling to T2, T2 after a provisional response.
//!
//! Not for: sockets or clocks (the driver's), or OPTIONS keep-alives
//! (see [`super::ping`]).

use super::client_tx::ClientRetransmit;
use super::digest::{authorization, Challenge};
use super::message::{Message, Via, BRANCH_COOKIE};
use super::response::PRODUCT;
use super::rng::SplitMix64;
use super::server::Transmit;
use super::Instant;
use std::collections::VecDeque;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::Duration;

/// First retry delay after a failure (before jitter).
pub const RETRY_BASE: Duration = Duration::from_secs(2);
/// Longest retry delay.
pub const RETRY_MAX: Duration = Duration::from_secs(300);
/// Timer F: a REGISTER without a final answer by then has failed.
pub const TIMER_F: Duration = Duration::from_millis(64 * 500);
/// Challenges answered per attempt; a third means the server is looping.
pub const AUTH_ROUNDS_MAX: u32 = 2;
/// The largest expiry we ask for or accept (a day); the smallest is 1 s.
pub const EXPIRES_SECONDS_MAX: u32 = 86_400;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegistrationConfig {
    /// Where REGISTERs go (the provider's registrar).
    pub registrar: SocketAddr,
    /// The registrar's domain: the Request-URI and the address-of-record
    /// host (`sip:username@domain`).
    pub domain: String,
    pub username: String,
    /// The digest user name, if it differs from `username`.
    pub auth_username: Option<String>,
    pub password: String,
    pub expires_seconds: u32,
    /// Our address as the provider reaches it (Via and Contact).
    pub local: SocketAddr,
    /// The user part of our Contact: a token of the line's, never a phone
    /// number (see [`super::route::contact_user`]), so an INVITE routed to
    /// the Contact is recognisable as such.
    pub contact_user: String,
}

/// What happened, for logs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Registered {
        expires_seconds: u32,
    },
    Unregistered,
    /// The line is down and the next try is at `retry_at`.
    Failed {
        reason: String,
        retry_at: Instant,
    },
}

struct Outstanding {
    cseq: u32,
    expires: u32,
    retransmit: ClientRetransmit,
}

pub struct Registration {
    cfg: RegistrationConfig,
    rng: SplitMix64,
    call_id: String,
    from_tag: String,
    cseq: u32,
    /// The challenge we answer with, whether it came in a 407, and the
    /// count of requests that used its nonce.
    challenge: Option<(Challenge, bool, u32)>,
    auth_rounds: u32,
    expires: u32,
    outstanding: Option<Outstanding>,
    /// The next REGISTER (a refresh or a retry).
    next_attempt: Option<Instant>,
    registered_until: Option<Instant>,
    failures: u32,
    shutting_down: bool,
    transmits: VecDeque<Transmit>,
}

impl Registration {
    pub fn new(cfg: RegistrationConfig, seed: u64) -> Registration {
        let mut rng = SplitMix64::new(seed);
        let call_id = format!("{}-reg@dialproof", rng.hex());
        let from_tag = rng.hex();
        let expires = cfg.expires_seconds.clamp(1, EXPIRES_SECONDS_MAX);
        Registration {
            cfg,
            rng,
            call_id,
            from_tag,
            cseq: 0,
            challenge: None,
            auth_rounds: 0,
            expires,
            outstanding: None,
            next_attempt: None,
            registered_until: None,
            failures: 0,
            shutting_down: false,
            transmits: VecDeque::new(),
        }
    }

    pub fn call_id(&self) -> &str {
        &self.call_id
    }

    /// Registered now: the last REGISTER succeeded and its expiry has not
    /// passed.
    pub fn is_up(&self, now: Instant) -> bool {
        self.registered_until.is_some_and(|until| now < until)
    }

    pub fn start(&mut self, now: Instant) {
        self.send_register(now, self.expires);
    }

    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.transmits.pop_front()
    }

    pub fn poll_timeout(&self) -> Option<Instant> {
        [
            self.outstanding.as_ref().map(|o| o.retransmit.deadline()),
            self.next_attempt,
            self.registered_until,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Whether the client is done after a shutdown (answered or given up).
    pub fn is_finished(&self) -> bool {
        self.shutting_down && self.outstanding.is_none()
    }

    pub fn handle_timeout(&mut self, now: Instant) -> Option<Outcome> {
        let mut outcome = None;
        if self.registered_until.is_some_and(|until| now >= until) {
            self.registered_until = None;
            outcome = Some(Outcome::Unregistered);
        }
        if let Some(o) = &mut self.outstanding {
            if o.retransmit.timed_out(now) {
                self.outstanding = None;
                if self.shutting_down {
                    return outcome;
                }
                return Some(self.fail(now, "no answer from the registrar (Timer F)".into()));
            }
            if let Some(bytes) = o.retransmit.due(now) {
                self.transmits.push_back(Transmit {
                    to: self.cfg.registrar,
                    bytes,
                });
            }
        }
        if self.next_attempt.is_some_and(|at| now >= at) && !self.shutting_down {
            self.next_attempt = None;
            self.send_register(now, self.expires);
        }
        outcome
    }

    /// Feeds a response with our Call-ID. Stale or foreign responses are
    /// ignored.
    pub fn handle_response(&mut self, now: Instant, msg: &Message) -> Option<Outcome> {
        let code = msg.status()?;
        if msg.call_id() != self.call_id {
            return None;
        }
        let o = self.outstanding.as_mut()?;
        if msg.cseq.0 != o.cseq {
            return None;
        }
        if code < 200 {
            // Provisional: the server has it; retransmit at T2 only.
            o.retransmit.provisional(now);
            return None;
        }
        let asked = o.expires;
        self.outstanding = None;
        match code {
            200..=299 => self.on_success(now, msg, asked),
            401 | 407 => self.on_challenge(now, msg, code, asked),
            423 => {
                let min = msg
                    .header("Min-Expires")
                    .and_then(|v| v.trim().parse::<u32>().ok());
                match min {
                    Some(min) if min > asked && min <= EXPIRES_SECONDS_MAX => {
                        self.expires = min;
                        self.send_register(now, min);
                        None
                    }
                    _ => self.fail_unless_shutting(now, "423 without a usable Min-Expires".into()),
                }
            }
            _ => {
                let reason = format!("registrar answered {code}");
                self.fail_unless_shutting(now, reason)
            }
        }
    }

    /// A 2xx to a REGISTER that asked for `asked` seconds.
    fn on_success(&mut self, now: Instant, msg: &Message, asked: u32) -> Option<Outcome> {
        self.auth_rounds = 0;
        if asked == 0 || self.shutting_down {
            self.registered_until = None;
            return Some(Outcome::Unregistered);
        }
        let granted = self.granted_expiry(msg).unwrap_or(asked);
        if granted == 0 {
            return Some(self.fail(now, "registrar granted no expiry".into()));
        }
        self.failures = 0;
        let granted = granted.min(EXPIRES_SECONDS_MAX);
        self.registered_until = Some(now.plus(Duration::from_secs(granted.into())));
        // Half the granted time, in milliseconds so 1 s still works.
        self.next_attempt = Some(now.plus(Duration::from_millis(u64::from(granted) * 500)));
        Some(Outcome::Registered {
            expires_seconds: granted,
        })
    }

    /// A 401 or 407: answer the digest challenge, unless it repeats a nonce
    /// we already answered (the credentials were refused) or the rounds
    /// run out.
    fn on_challenge(
        &mut self,
        now: Instant,
        msg: &Message,
        code: u16,
        asked: u32,
    ) -> Option<Outcome> {
        let header = if code == 401 {
            "WWW-Authenticate"
        } else {
            "Proxy-Authenticate"
        };
        let Some(ch) = msg.headers_named(header).find_map(Challenge::parse) else {
            return self
                .fail_unless_shutting(now, format!("{code} without a usable digest challenge"));
        };
        let same_nonce = self
            .challenge
            .as_ref()
            .is_some_and(|(old, _, _)| old.nonce == ch.nonce);
        self.auth_rounds += 1;
        if (same_nonce && !ch.stale) || self.auth_rounds > AUTH_ROUNDS_MAX {
            self.challenge = None;
            return self.fail_unless_shutting(now, format!("{code}: credentials refused"));
        }
        self.challenge = Some((ch, code == 407, 0));
        self.send_register(now, asked);
        None
    }

    /// Unregisters (`Expires: 0`). The line is down from now on.
    pub fn shutdown(&mut self, now: Instant) {
        let was_registered = self.registered_until.take().is_some();
        self.shutting_down = true;
        self.next_attempt = None;
        if was_registered || self.outstanding.is_some() {
            self.send_register(now, 0);
        }
    }

    fn fail_unless_shutting(&mut self, now: Instant, reason: String) -> Option<Outcome> {
        if self.shutting_down {
            return Some(Outcome::Unregistered);
        }
        Some(self.fail(now, reason))
    }

    fn fail(&mut self, now: Instant, reason: String) -> Outcome {
        self.registered_until = None;
        self.auth_rounds = 0;
        self.failures = self.failures.saturating_add(1);
        let step = RETRY_BASE
            .saturating_mul(1u32 << self.failures.saturating_sub(1).min(16))
            .min(RETRY_MAX);
        let step_ms = u64::try_from(step.as_millis()).unwrap_or(u64::MAX);
        let delay = step_ms / 2 + self.rng.below(step_ms / 2 + 1);
        let retry_at = now.plus(Duration::from_millis(delay));
        self.next_attempt = Some(retry_at);
        Outcome::Failed { reason, retry_at }
    }

    /// The expiry granted to our Contact, else the Expires header.
    fn granted_expiry(&self, msg: &Message) -> Option<u32> {
        let ours = self.cfg.local.to_string();
        let mut any_contact = None;
        for value in msg.headers_named("Contact") {
            for part in super::message::split_commas(value) {
                let Some(addr) = super::uri::NameAddr::parse(part) else {
                    continue;
                };
                let Some(Some(exp)) = addr.param("expires") else {
                    continue;
                };
                let Ok(exp) = exp.parse::<u32>() else {
                    continue;
                };
                if part.contains(&ours) {
                    return Some(exp);
                }
                any_contact.get_or_insert(exp);
            }
        }
        msg.header("Expires")
            .and_then(|v| v.trim().parse::<u32>().ok())
            .or(any_contact)
    }

    fn send_register(&mut self, now: Instant, expires: u32) {
        self.cseq = self.cseq.wrapping_add(1);
        let uri = format!("sip:{}", self.cfg.domain);
        let aor = format!("sip:{}@{}", self.cfg.username, self.cfg.domain);
        let mut out = String::with_capacity(600);
        let _ = write!(
            out,
            "REGISTER {uri} SIP/2.0\r\n\
             Via: SIP/2.0/UDP {};branch={BRANCH_COOKIE}{};rport\r\n\
             Max-Forwards: 70\r\n\
             From: <{aor}>;tag={}\r\n\
             To: <{aor}>\r\n\
             Call-ID: {}\r\n\
             CSeq: {} REGISTER\r\n\
             Contact: <sip:{}@{}>\r\n\
             Expires: {expires}\r\n",
            self.cfg.local,
            self.rng.hex(),
            self.from_tag,
            self.call_id,
            self.cseq,
            self.cfg.contact_user,
            self.cfg.local,
        );
        if let Some((ch, proxy, uses)) = &mut self.challenge {
            *uses += 1;
            let cnonce = self.rng.hex();
            let user = self
                .cfg
                .auth_username
                .as_deref()
                .unwrap_or(&self.cfg.username);
            let value = authorization(
                ch,
                user,
                &self.cfg.password,
                "REGISTER",
                &uri,
                *uses,
                &cnonce,
            );
            let name = if *proxy {
                "Proxy-Authorization"
            } else {
                "Authorization"
            };
            let _ = write!(out, "{name}: {value}\r\n");
        }
        let _ = write!(out, "User-Agent: {PRODUCT}\r\nContent-Length: 0\r\n\r\n");
        let bytes = out.into_bytes();
        self.transmits.push_back(Transmit {
            to: self.cfg.registrar,
            bytes: bytes.clone(),
        });
        self.outstanding = Some(Outstanding {
            cseq: self.cseq,
            expires,
            retransmit: ClientRetransmit::new(now, bytes, TIMER_F),
        });
    }
}

/// Whether a response is for a request we sent with `Via` branch cookie
/// (a cheap pre-filter for the driver; the Call-ID decides).
pub fn is_ours(msg: &Message) -> bool {
    msg.top_via()
        .and_then(|v: Via| v.branch().map(|b| b.starts_with(BRANCH_COOKIE)))
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::super::digest::verify;
    use super::super::response::build_response;
    use super::*;

    fn cfg() -> RegistrationConfig {
        RegistrationConfig {
            registrar: "192.0.2.1:5060".parse().unwrap(),
            domain: "sip.example".into(),
            username: "line1".into(),
            auth_username: None,
            password: "secret".into(),
            expires_seconds: 600,
            local: "192.0.2.50:5062".parse().unwrap(),
            contact_user: "dp-0123456789ab".into(),
        }
    }

    fn sent(r: &mut Registration) -> Message {
        let t = r.poll_transmit().expect("a REGISTER");
        assert_eq!(t.to, cfg().registrar);
        assert!(r.poll_transmit().is_none());
        Message::parse(&t.bytes).unwrap()
    }

    fn answer(req: &Message, code: u16, extra: &[(&str, &str)]) -> Message {
        let vias: Vec<String> = req.headers_named("Via").map(str::to_owned).collect();
        Message::parse(&build_response(req, &vias, code, Some("srv"), extra)).unwrap()
    }

    fn registered(r: &mut Registration, now: Instant, req: &Message, expires: &str) -> Outcome {
        r.handle_response(now, &answer(req, 200, &[("Expires", expires)]))
            .unwrap()
    }

    #[test]
    fn digest_with_qop_then_refresh_at_half_the_grant() {
        let mut r = Registration::new(cfg(), 9);
        let t0 = Instant(0);
        r.start(t0);
        let first = sent(&mut r);
        assert_eq!(first.header("Expires"), Some("600"));
        assert!(first.header("Authorization").is_none());
        let ch = "Digest realm=\"sip.example\", nonce=\"n1\", qop=\"auth\"";
        assert_eq!(
            r.handle_response(t0, &answer(&first, 401, &[("WWW-Authenticate", ch)])),
            None
        );
        let second = sent(&mut r);
        let auth = second.header("Authorization").unwrap();
        assert!(verify(auth, "secret", "REGISTER", "n1"), "{auth}");
        assert!(auth.contains("nc=00000001"));
        assert_eq!(second.cseq.0, first.cseq.0 + 1);
        assert_eq!(second.call_id(), first.call_id());

        // Granted 120 s through our Contact's expires (Expires says 600).
        let contact = "<sip:line1@192.0.2.50:5062>;expires=120";
        let ok = answer(&second, 200, &[("Contact", contact), ("Expires", "600")]);
        assert_eq!(
            r.handle_response(t0, &ok),
            Some(Outcome::Registered {
                expires_seconds: 120
            })
        );
        assert!(r.is_up(t0));
        assert_eq!(r.poll_timeout(), Some(Instant(60_000)));
        r.handle_timeout(Instant(60_000));
        let refresh = sent(&mut r);
        // The refresh reuses the nonce with the next nc.
        let auth = refresh.header("Authorization").unwrap();
        assert!(auth.contains("nc=00000002"));
        assert!(verify(auth, "secret", "REGISTER", "n1"));
        registered(&mut r, Instant(60_010), &refresh, "120");
        assert!(r.is_up(Instant(150_000)));
    }

    #[test]
    fn digest_without_qop_and_407() {
        let mut r = Registration::new(cfg(), 1);
        r.start(Instant(0));
        let first = sent(&mut r);
        let ch = "Digest realm=\"sip.example\", nonce=\"n2\"";
        r.handle_response(
            Instant(0),
            &answer(&first, 407, &[("Proxy-Authenticate", ch)]),
        );
        let second = sent(&mut r);
        let auth = second.header("Proxy-Authorization").unwrap();
        assert!(!auth.contains("qop"));
        assert!(verify(auth, "secret", "REGISTER", "n2"));
    }

    #[test]
    fn wrong_credentials_fail_with_backoff_and_jitter() {
        let mut r = Registration::new(cfg(), 3);
        let mut now = Instant(0);
        r.start(now);
        let ch = "Digest realm=\"sip.example\", nonce=\"n3\"";
        let mut delays = Vec::new();
        for _ in 0..10 {
            let req = sent(&mut r);
            assert!(r
                .handle_response(now, &answer(&req, 401, &[("WWW-Authenticate", ch)]))
                .is_none());
            let req = sent(&mut r);
            match r.handle_response(now, &answer(&req, 401, &[("WWW-Authenticate", ch)])) {
                Some(Outcome::Failed { retry_at, .. }) => {
                    delays.push(retry_at.since(now).as_millis() as u64);
                    assert!(!r.is_up(now));
                    now = retry_at;
                    r.handle_timeout(now);
                }
                other => panic!("{other:?}"),
            }
        }
        for (i, d) in delays.iter().enumerate() {
            let step = (2_000u64 << i).min(300_000);
            assert!(
                (step / 2..=step).contains(d),
                "retry {i}: {d} ms vs step {step}"
            );
        }
    }

    #[test]
    fn stale_nonce_is_answered_again() {
        let mut r = Registration::new(cfg(), 1);
        r.start(Instant(0));
        let first = sent(&mut r);
        let ch = "Digest realm=\"sip.example\", nonce=\"n4\"";
        r.handle_response(
            Instant(0),
            &answer(&first, 401, &[("WWW-Authenticate", ch)]),
        );
        let second = sent(&mut r);
        let stale = "Digest realm=\"sip.example\", nonce=\"n5\", stale=true";
        r.handle_response(
            Instant(0),
            &answer(&second, 401, &[("WWW-Authenticate", stale)]),
        );
        let third = sent(&mut r);
        assert!(verify(
            third.header("Authorization").unwrap(),
            "secret",
            "REGISTER",
            "n5"
        ));
    }

    #[test]
    fn interval_too_brief_is_honoured() {
        let mut r = Registration::new(cfg(), 1);
        r.start(Instant(0));
        let first = sent(&mut r);
        r.handle_response(Instant(0), &answer(&first, 423, &[("Min-Expires", "1800")]));
        let second = sent(&mut r);
        assert_eq!(second.header("Expires"), Some("1800"));
        assert_eq!(
            registered(&mut r, Instant(0), &second, "1800"),
            Outcome::Registered {
                expires_seconds: 1800
            }
        );
        // A 423 that does not raise the floor is a failure, not a loop.
        r.handle_timeout(Instant(900_000));
        let refresh = sent(&mut r);
        assert!(matches!(
            r.handle_response(
                Instant(900_000),
                &answer(&refresh, 423, &[("Min-Expires", "60")])
            ),
            Some(Outcome::Failed { .. })
        ));
    }

    #[test]
    fn retransmits_on_timer_e_and_fails_on_timer_f() {
        let mut r = Registration::new(cfg(), 1);
        r.start(Instant(0));
        let first = sent(&mut r);
        let mut now = Instant(0);
        let mut gaps = Vec::new();
        loop {
            let next = r.poll_timeout().unwrap();
            gaps.push(next.since(now).as_millis() as u64);
            now = next;
            if let Some(outcome) = r.handle_timeout(now) {
                assert!(matches!(outcome, Outcome::Failed { .. }), "{outcome:?}");
                break;
            }
            let again = sent(&mut r);
            assert_eq!(again.cseq, first.cseq);
        }
        assert_eq!(now.since(Instant(0)), TIMER_F);
        assert_eq!(&gaps[..5], &[500, 1000, 2000, 4000, 4000]);
    }

    #[test]
    fn expiry_without_refresh_answer_takes_the_line_down_and_errors_do_too() {
        let mut r = Registration::new(cfg(), 1);
        r.start(Instant(0));
        let first = sent(&mut r);
        registered(&mut r, Instant(0), &first, "2");
        assert!(r.is_up(Instant(1_999)));
        // Refresh at 1 s gets no answer; the registration lapses at 2 s.
        r.handle_timeout(Instant(1_000));
        let _refresh = sent(&mut r);
        assert_eq!(
            r.handle_timeout(Instant(2_000)),
            Some(Outcome::Unregistered)
        );
        assert!(!r.is_up(Instant(2_000)));

        let mut r = Registration::new(cfg(), 1);
        r.start(Instant(0));
        let first = sent(&mut r);
        registered(&mut r, Instant(0), &first, "60");
        r.handle_timeout(Instant(30_000));
        let refresh = sent(&mut r);
        assert!(matches!(
            r.handle_response(Instant(30_000), &answer(&refresh, 403, &[])),
            Some(Outcome::Failed { .. })
        ));
        assert!(!r.is_up(Instant(30_000)));
    }

    #[test]
    fn shutdown_sends_expires_zero_and_foreign_responses_are_ignored() {
        let mut r = Registration::new(cfg(), 1);
        r.start(Instant(0));
        let first = sent(&mut r);
        // An old CSeq or another Call-ID changes nothing.
        let mut foreign = answer(&first, 200, &[]);
        foreign.set_header("Call-ID", "other");
        assert_eq!(r.handle_response(Instant(0), &foreign), None);
        registered(&mut r, Instant(0), &first, "60");
        assert_eq!(
            r.handle_response(Instant(0), &answer(&first, 200, &[])),
            None
        );

        r.shutdown(Instant(5));
        let bye = sent(&mut r);
        assert_eq!(bye.header("Expires"), Some("0"));
        assert!(!r.is_up(Instant(5)));
        assert!(!r.is_finished());
        assert_eq!(
            r.handle_response(Instant(6), &answer(&bye, 200, &[])),
            Some(Outcome::Unregistered)
        );
        assert!(r.is_finished());
        assert!(is_ours(&bye));
    }
}
