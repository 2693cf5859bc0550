//! The SIP call path in memory, stage by stage, in one run:
//! - `parse`: one INVITE datagram through the parsing edge (the baseline);
//! - `transaction`: parse + the server transaction of a call answered at
//!   once (the 603, the ACK absorbed), as the driver runs it (each
//!   iteration also formats its INVITE and ACK, a unique branch apiece);
//! - `decide`: the above + the routing decision (dialled number, line)
//!   and the caller read and normalised (what `src/sip/calls.rs` adds before the writer).
//!
//! Run: `cargo bench --bench sip_invite`. The socket and the commit are
//! measured end to end by `tools/sip-bench.sh` (sipp against the binary).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use dialproof_engine::sip::identity::caller;
use dialproof_engine::sip::message::Message;
use dialproof_engine::sip::number::Region;
use dialproof_engine::sip::route::{route_invite, CalledFrom, LineRoute};
use dialproof_engine::sip::server::{Endpoint, Event};
use dialproof_engine::sip::Instant;
use std::hint::black_box;
use std::net::SocketAddr;

fn request(method: &str, n: u64) -> Vec<u8> {
    format!(
        "{method} sip:+74950000001@192.0.2.1:5060 SIP/2.0\r\n\
         Via: SIP/2.0/UDP 192.0.2.10:5070;branch=z9hG4bK-bench-{n};rport\r\n\
         Max-Forwards: 70\r\n\
         From: \"Ivan\" <sip:89161234567@192.0.2.10>;tag=f{n}\r\n\
         To: <sip:+74950000001@192.0.2.1>\r\n\
         Call-ID: bench-{n}@192.0.2.10\r\n\
         CSeq: 1 {method}\r\n\
         Contact: <sip:gw@192.0.2.10:5070>\r\n\
         P-Asserted-Identity: <tel:+79161234567>\r\n\
         User-Agent: bench\r\n\
         Content-Length: 0\r\n\r\n"
    )
    .into_bytes()
}

fn bench(c: &mut Criterion) {
    dialproof_engine::validate::warm_up();
    let src: SocketAddr = "192.0.2.10:5070".parse().expect("address");
    let region = Region::parse("RU").expect("RU");
    let invite = request("INVITE", 0);
    let mut g = c.benchmark_group("sip_invite");
    g.throughput(Throughput::Elements(1));

    g.bench_function("parse", |b| {
        b.iter(|| black_box(Message::parse(black_box(&invite)).is_ok()))
    });

    let line = LineRoute {
        line: 0u16,
        region,
        called_from: CalledFrom::Auto,
        contact_user: "dp-0123456789ab",
        aor_user: None,
    };
    let run = |decide: bool| {
        let mut ep = Endpoint::new(1);
        let mut n = 0u64;
        move || {
            n += 1;
            let now = Instant(n);
            let inv = request("INVITE", n);
            if let Ok(Event::Invite { id, message, .. }) = ep.handle_datagram(now, src, &inv) {
                if decide {
                    black_box(route_invite(&message, &[line], |n| {
                        (n == "+74950000001").then_some(0u16)
                    }));
                    black_box(caller(&message, region, true));
                }
                ep.respond(now, id, 603);
            }
            while let Some(t) = ep.poll_transmit() {
                black_box(t);
            }
            let _ = ep.handle_datagram(now, src, &request("ACK", n));
            // Timer I (5 s of virtual time at 1 ms a call) ends the old ones.
            if n.is_multiple_of(1024) {
                ep.handle_timeout(now);
            }
        }
    };
    let mut transaction = run(false);
    g.bench_function("transaction", |b| b.iter(&mut transaction));
    let mut decide = run(true);
    g.bench_function("decide", |b| b.iter(&mut decide));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
