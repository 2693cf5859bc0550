//! `dialproof-sim`: a loopback SIP provider for trying Dialproof on one
//! machine.
//!
//! - `call --to NUMBER --from NUMBER [--target ADDR] [--withheld]` places a
//!   simulated inbound call the way a provider's gateway would: an INVITE
//!   to Dialproof's SIP address, then it prints every response and ACKs the
//!   final one. Dialproof rejects the call (603 by default) without
//!   answering it; if NUMBER was leased to a pending verification, that
//!   verification is now `completed` with `caller_id_received` = the
//!   `--from` number.
//! - `registrar --listen ADDR --user U --password P [--expires S]` acts as
//!   the provider's registrar for `register` lines: it challenges every
//!   REGISTER with a digest (`qop=auth`), checks the answer and grants
//!   `--expires` seconds; it answers OPTIONS with 200.
//!
//! Not for: load (use sipp, see `tools/sip-bench.sh`), media, or anything
//! beyond what the two commands print.

use anyhow::{bail, Context, Result};
use dialproof_engine::sip::digest::verify;
use dialproof_engine::sip::message::{Message, Method};
use dialproof_engine::sip::response::build_response;
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How long `call` waits for the final response.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// INVITE retransmission interval (RFC 3261 T1); doubled each time.
const T1: Duration = Duration::from_millis(500);

const USAGE: &str = "usage:
  dialproof-sim call --to NUMBER --from NUMBER [--target 127.0.0.1:5060] [--bind 127.0.0.1:0] [--withheld]
  dialproof-sim registrar --listen 127.0.0.1:5070 --user USER --password PASSWORD [--expires 60]";

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e:#}\n{USAGE}");
        std::process::exit(2);
    }
}

fn run() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(command) = args.first() else {
        bail!("no command");
    };
    let opt = |name: &str| -> Option<String> {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let flag = |name: &str| args.iter().any(|a| a == name);
    match command.as_str() {
        "call" => call(
            &opt("--to").context("--to is required")?,
            &opt("--from").context("--from is required")?,
            opt("--target")
                .unwrap_or_else(|| "127.0.0.1:5060".into())
                .parse()
                .context("--target")?,
            opt("--bind")
                .unwrap_or_else(|| "127.0.0.1:0".into())
                .parse()
                .context("--bind")?,
            flag("--withheld"),
        ),
        "registrar" => registrar(
            opt("--listen")
                .unwrap_or_else(|| "127.0.0.1:5070".into())
                .parse()
                .context("--listen")?,
            &opt("--user").context("--user is required")?,
            &opt("--password").context("--password is required")?,
            opt("--expires")
                .unwrap_or_else(|| "60".into())
                .parse()
                .context("--expires")?,
        ),
        other => bail!("unknown command {other:?}"),
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

fn call(to: &str, from: &str, target: SocketAddr, bind: SocketAddr, withheld: bool) -> Result<()> {
    let socket = UdpSocket::bind(bind).context("binding the caller socket")?;
    let local = socket.local_addr()?;
    let tag = random_hex();
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
    println!("call rejected with {code} without being answered: the caller pays nothing");
    Ok(())
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
