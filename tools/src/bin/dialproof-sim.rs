//! `dialproof-sim`: a loopback SIP provider for trying Dialproof on one
//! machine.
//!
//! - `call --to NUMBER --from NUMBER [--target ADDR] [--withheld]` places a
//!   simulated inbound call the way a provider's gateway would: an INVITE
//!   to Dialproof's SIP address, then it prints every response, ACKs the
//!   final one and says what the call did. Dialproof rejects every call
//!   (603 by default) without answering it, so the code alone cannot tell a
//!   completed verification from a number with nothing pending; the final
//!   response's `Warning` header names the outcome
//!   (`dialproof_engine::sip::outcome`), and the last line printed is that
//!   outcome in words. Exit status: 0 when the call completed a
//!   verification, 1 when it was rejected without completing one, 2 when
//!   there was no usable answer (or the call was answered, which Dialproof
//!   never does).
//! - `registrar --listen ADDR --user U --password P [--expires S]` acts as
//!   the provider's registrar for `register` lines: it challenges every
//!   REGISTER with a digest (`qop=auth`), checks the answer and grants
//!   `--expires` seconds; it answers OPTIONS with 200.
//!
//! Not for: load (use sipp, see `tools/sip-bench.sh`), media, or anything
//! beyond what the two commands print.

use anyhow::{bail, Context, Result};
use clap::builder::NonEmptyStringValueParser;
use clap::{Parser, Subcommand};
use dialproof_engine::sip::digest::verify;
use dialproof_engine::sip::message::{Message, Method};
use dialproof_engine::sip::outcome::CallOutcome;
use dialproof_engine::sip::response::build_response;
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How long `call` waits for the final response.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// INVITE retransmission interval (RFC 3261 T1); doubled each time.
const T1: Duration = Duration::from_millis(500);

#[derive(Debug, Parser)]
#[command(
    name = "dialproof-sim",
    version,
    about = "A loopback SIP provider: place a simulated inbound call, or act as a registrar"
)]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Call a number as a provider's gateway would, print every response
    /// and what the call did. Exits 0 when it completed a verification, 1
    /// when it was rejected without completing one, 2 on no usable answer.
    Call {
        /// The number to call: a verification's `dial_number` (an empty
        /// value, as from a shell variable that was never set, is refused).
        #[arg(long, value_name = "NUMBER", value_parser = NonEmptyStringValueParser::new())]
        to: String,
        /// The caller's number, in any format a provider sends
        /// (`+79161234567`, `89161234567`, ...).
        #[arg(
            long,
            value_name = "NUMBER",
            required_unless_present = "withheld",
            value_parser = NonEmptyStringValueParser::new()
        )]
        from: Option<String>,
        /// Dialproof's SIP address (its `[sip] listen`).
        #[arg(long, default_value = "127.0.0.1:5060")]
        target: SocketAddr,
        /// Our own address (port 0 picks a free one).
        #[arg(long, default_value = "127.0.0.1:0")]
        bind: SocketAddr,
        /// Call with a hidden number (`Privacy: id`, anonymous From).
        #[arg(long)]
        withheld: bool,
    },
    /// Act as a provider's registrar for a `register` line: challenge each
    /// REGISTER with a digest, grant it when the answer matches.
    Registrar {
        /// Address to listen on (UDP).
        #[arg(long, default_value = "127.0.0.1:5070")]
        listen: SocketAddr,
        /// The line's `username`.
        #[arg(long)]
        user: String,
        /// The line's `password`.
        #[arg(long)]
        password: String,
        /// The longest registration granted, in seconds.
        #[arg(long, default_value_t = 60)]
        expires: u32,
    },
}

fn main() {
    let result = match Args::parse().command {
        Command::Call {
            to,
            from,
            target,
            bind,
            withheld,
        } => call(&to, from.as_deref(), target, bind, withheld),
        Command::Registrar {
            listen,
            user,
            password,
            expires,
        } => registrar(listen, &user, &password, expires).map(|()| 0),
    };
    match result {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("dialproof-sim: {e:#}");
            std::process::exit(2);
        }
    }
}

fn random_hex() -> String {
    // Unique enough for a branch, tag or nonce of a local simulation.
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{:x}{:x}", nanos, std::process::id())
}

/// One outgoing call's fixed parts: who calls whom, and its identifiers.
struct Dialog {
    to: String,
    target: SocketAddr,
    local: SocketAddr,
    branch: String,
    call_id: String,
    from_header: String,
}

impl Dialog {
    fn invite(&self, from: &str, privacy: &str) -> String {
        let Dialog {
            to,
            target,
            local,
            branch,
            call_id,
            from_header,
        } = self;
        format!(
            "INVITE sip:{to}@{target} SIP/2.0\r\n\
             Via: SIP/2.0/UDP {local};branch={branch};rport\r\n\
             Max-Forwards: 70\r\n\
             From: {from_header}\r\n\
             To: <sip:{to}@{target}>\r\n\
             Call-ID: {call_id}\r\n\
             CSeq: 1 INVITE\r\n\
             Contact: <sip:{from}@{local}>\r\n\
             {privacy}\
             User-Agent: dialproof-sim\r\n\
             Content-Length: 0\r\n\r\n"
        )
    }

    /// The ACK of a final response whose To header is `to_header`.
    fn ack(&self, to_header: &str) -> String {
        let Dialog {
            to,
            target,
            local,
            branch,
            call_id,
            from_header,
        } = self;
        format!(
            "ACK sip:{to}@{target} SIP/2.0\r\n\
             Via: SIP/2.0/UDP {local};branch={branch};rport\r\n\
             Max-Forwards: 70\r\n\
             From: {from_header}\r\n\
             To: {to_header}\r\n\
             Call-ID: {call_id}\r\n\
             CSeq: 1 ACK\r\n\
             Content-Length: 0\r\n\r\n"
        )
    }
}

/// Places the call; returns the exit status (0: a verification was
/// completed, 1: rejected without completing one).
fn call(
    to: &str,
    from: Option<&str>,
    target: SocketAddr,
    bind: SocketAddr,
    withheld: bool,
) -> Result<i32> {
    let socket = UdpSocket::bind(bind).context("binding the caller socket")?;
    let local = socket.local_addr()?;
    let tag = random_hex();
    let from = from.unwrap_or("anonymous");
    let (from_header, privacy) = if withheld {
        (
            format!("\"Anonymous\" <sip:anonymous@anonymous.invalid>;tag={tag}"),
            "Privacy: id\r\n",
        )
    } else {
        (format!("<sip:{from}@{local}>;tag={tag}"), "")
    };
    let dialog = Dialog {
        to: to.to_owned(),
        target,
        local,
        branch: format!("z9hG4bK{}", random_hex()),
        call_id: format!("{}@dialproof-sim", random_hex()),
        from_header,
    };
    println!(
        "calling {to} from {} via {target}",
        if withheld { "a withheld number" } else { from }
    );
    let resp = final_response(&socket, &dialog, &dialog.invite(from, privacy))?;
    let code = resp.status().unwrap_or(0);
    socket.send_to(
        dialog.ack(resp.header("To").unwrap_or("")).as_bytes(),
        target,
    )?;
    if code < 300 {
        bail!("the call was answered ({code}): Dialproof should never answer");
    }
    let outcome = resp.header("Warning").and_then(CallOutcome::from_warning);
    println!("{}", what_happened(to, code, outcome));
    Ok(if outcome == Some(CallOutcome::Completed) {
        0
    } else {
        1
    })
}

/// The last line `call` prints: what the rejected call did, in words.
fn what_happened(to: &str, code: u16, outcome: Option<CallOutcome>) -> String {
    let rejected = format!("rejected with {code} without being answered: the caller pays nothing");
    match (outcome, code) {
        (Some(CallOutcome::Completed), _) => format!("verification completed; call {rejected}"),
        (Some(CallOutcome::NoPendingVerification), _) => {
            format!("nothing changed: no verification is pending on {to}; call {rejected}")
        }
        (Some(CallOutcome::CallerWithheld), _) => format!(
            "nothing changed: the caller's number is withheld, so the verification stays \
             pending; call {rejected}"
        ),
        (Some(CallOutcome::CallerIdUntrusted), _) => format!(
            "nothing changed: the network vouches for the caller ID less than the line \
             requires (min_caller_id_trust), so the verification stays pending; call {rejected}"
        ),
        (Some(CallOutcome::NotRecorded), _) => {
            format!("nothing changed: the service could not record the call (see its log); call {rejected}")
        }
        (None, 404) => {
            format!("nothing changed: {to} is not one of the line's numbers; call {rejected}")
        }
        (None, 403) => format!(
            "nothing changed: the service takes no calls from this address (or not for {to} \
             from it); call {rejected}"
        ),
        (None, _) => format!("call {rejected}; the answer does not say what the call did"),
    }
}

/// Sends `invite` and retransmits it on Timer A (T1, doubling) until a
/// provisional answer; returns the final response, printing each answer.
fn final_response(socket: &UdpSocket, dialog: &Dialog, invite: &str) -> Result<Message> {
    socket.send_to(invite.as_bytes(), dialog.target)?;
    let start = Instant::now();
    let mut interval = T1;
    let mut next_send = start + interval;
    let mut proceeding = false;
    let mut buf = vec![0u8; 65_536];
    loop {
        let now = Instant::now();
        if now >= start + CALL_TIMEOUT {
            bail!("no final response within {CALL_TIMEOUT:?}");
        }
        if !proceeding && now >= next_send {
            socket.send_to(invite.as_bytes(), dialog.target)?;
            interval *= 2;
            next_send = now + interval;
        }
        let wait = if proceeding {
            start + CALL_TIMEOUT - now
        } else {
            next_send.saturating_duration_since(now)
        };
        socket.set_read_timeout(Some(wait.max(Duration::from_millis(1))))?;
        let (n, _) = match socket.recv_from(&mut buf) {
            Ok(r) => r,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue
            }
            Err(e) => return Err(e).context("receiving"),
        };
        let Ok(resp) = Message::parse(&buf[..n]) else {
            continue;
        };
        let (Some(code), true) = (resp.status(), resp.call_id() == dialog.call_id) else {
            continue;
        };
        let reason = match &resp.start {
            dialproof_engine::sip::message::StartLine::Response { reason, .. } => reason.clone(),
            _ => String::new(),
        };
        println!("<- {code} {reason} ({} ms)", start.elapsed().as_millis());
        if code < 200 {
            proceeding = true;
            continue;
        }
        return Ok(resp);
    }
}

fn registrar(listen: SocketAddr, user: &str, password: &str, expires: u32) -> Result<()> {
    let socket = UdpSocket::bind(listen).with_context(|| format!("binding {listen}"))?;
    println!(
        "registrar on {} for user {user:?}, granting {expires} s",
        socket.local_addr()?
    );
    let mut registrar = Registrar {
        user,
        password,
        expires,
        nonces: Default::default(),
    };
    let mut buf = vec![0u8; 65_536];
    loop {
        let (n, src) = socket.recv_from(&mut buf)?;
        let Ok(req) = Message::parse(&buf[..n]) else {
            continue;
        };
        let Some(method) = req.method().cloned() else {
            continue;
        };
        let vias: Vec<String> = req.headers_named("Via").map(str::to_owned).collect();
        let target = req.top_via().map_or(src, |v| v.response_target(src));
        let tag = random_hex();
        let reply = match method {
            Method::Register => registrar.register(&req, &vias, &tag, src),
            Method::Options => build_response(&req, &vias, 200, Some(&tag), &[]),
            Method::Ack => continue,
            _ => build_response(&req, &vias, 405, Some(&tag), &[]),
        };
        socket.send_to(&reply, target)?;
    }
}

/// The simulated registrar's state: one user, and the nonces it issued
/// lately (64 at most).
struct Registrar<'a> {
    user: &'a str,
    password: &'a str,
    expires: u32,
    nonces: std::collections::VecDeque<String>,
}

impl Registrar<'_> {
    /// 200 with the granted expiry for a REGISTER whose digest answers one
    /// of our nonces; else 401 with a fresh challenge.
    fn register(&mut self, req: &Message, vias: &[String], tag: &str, src: SocketAddr) -> Vec<u8> {
        let authorized = req.header("Authorization").is_some_and(|auth| {
            self.nonces
                .iter()
                .any(|nonce| verify(auth, self.password, "REGISTER", nonce))
                && auth.contains(&format!("username=\"{}\"", self.user))
        });
        if authorized {
            let asked = req
                .header("Expires")
                .and_then(|e| e.parse::<u32>().ok())
                .unwrap_or(self.expires);
            let granted = asked.min(self.expires);
            let contact = req.header("Contact").unwrap_or("");
            println!("REGISTER from {src}: authorized, expires {granted}");
            return build_response(
                req,
                vias,
                200,
                Some(tag),
                &[
                    ("Contact", &format!("{contact};expires={granted}")),
                    ("Expires", &granted.to_string()),
                ],
            );
        }
        let nonce = random_hex();
        self.nonces.push_back(nonce.clone());
        if self.nonces.len() > 64 {
            self.nonces.pop_front();
        }
        println!("REGISTER from {src}: challenged");
        let challenge = format!(
            "Digest realm=\"dialproof-sim\", nonce=\"{nonce}\", qop=\"auth\", algorithm=MD5"
        );
        build_response(
            req,
            vias,
            401,
            Some(tag),
            &[("WWW-Authenticate", &challenge)],
        )
    }
}
