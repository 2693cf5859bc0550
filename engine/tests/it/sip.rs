//! "Never panics" for the SIP edge, in the default test run: every datagram
//! of the fuzz corpus (`engine/fuzz/corpus/sip_parse`) plus
//! [`ITERATIONS`] seeded random mutations of them go through
//! `dialproof_engine::sip::exercise::exercise`, the same function the
//! cargo-fuzz target calls. Deterministic: a failure names its iteration
//! and replays with the same seed.
//!
//! Not for: the HTTP request edge and the create body (`crate::edges`).

use dialproof_engine::sip::exercise::exercise;
use dialproof_engine::sip::rng::SplitMix64;

/// Mutated datagrams per run (the brief's ~100k).
const ITERATIONS: usize = 100_000;
/// The seed of the mutation stream.
const SEED: u64 = 0x5EED_D1A1_9000_0001;
/// Bytes that matter to a SIP parser, favoured by the mutator.
const INTERESTING: &[u8] = b"\r\n \t:;,<>\"%@=?[]+-0789\x00\xff\xc3";
/// Longest mutated datagram (a bit over the parser's own limit, so the
/// limit's path runs too).
const MUTANT_BYTES_MAX: usize = 17 * 1024;

fn corpus() -> Vec<Vec<u8>> {
    let mut out = crate::corpus::files("sip_parse");
    // Hand-made nasties beside the files.
    out.push(Vec::new());
    out.push(b"SIP/2.0 200 OK\r\n\r\n".to_vec());
    out.push(vec![b'\n'; 100]);
    out.push(b"INVITE sip:a SIP/2.0\r\nVia: SIP/2.0/UDP [::1\r\n\r\n".to_vec());
    out.push(b"INVITE sip:a SIP/2.0\r\nContent-Length: 18446744073709551616\r\n\r\n".to_vec());
    out.push(
        format!(
            "INVITE sip:a SIP/2.0\r\n{}\r\n",
            "Via: SIP/2.0/UDP h;branch=z9hG4bK, ".repeat(200)
        )
        .into_bytes(),
    );
    out.push(b"INVITE sip:%E2%82 SIP/2.0\r\nVia: SIP/2.0/UDP h;branch=z9hG4bKq\r\nFrom: <sip:%FF@h>\r\nTo: <tel:%>\r\nCall-ID: 1\r\nCSeq: 1 INVITE\r\n\r\n".to_vec());
    out
}

fn mutate(rng: &mut SplitMix64, corpus: &[Vec<u8>]) -> Vec<u8> {
    let pick = |rng: &mut SplitMix64, n: usize| rng.below(n as u64) as usize;
    let mut data = corpus[pick(rng, corpus.len())].clone();
    let rounds = 1 + pick(rng, 8);
    for _ in 0..rounds {
        let len = data.len();
        match rng.below(8) {
            0 if len > 0 => {
                let i = pick(rng, len);
                data[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = pick(rng, len);
                data[i] = INTERESTING[pick(rng, INTERESTING.len())];
            }
            2 if len > 0 => {
                let i = pick(rng, len);
                let n = pick(rng, len - i + 1);
                data.drain(i..i + n);
            }
            3 if len > 0 => {
                let i = pick(rng, len);
                let n = 1 + pick(rng, (len - i).min(64));
                let chunk: Vec<u8> = data[i..i + n].to_vec();
                let at = pick(rng, data.len() + 1);
                for _ in 0..1 + rng.below(4) {
                    data.splice(at..at, chunk.iter().copied());
                }
            }
            4 => {
                let at = pick(rng, len + 1);
                let n = 1 + pick(rng, 16);
                let bytes: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
                data.splice(at..at, bytes);
            }
            5 => {
                // Splice in part of another seed.
                let other = &corpus[pick(rng, corpus.len())];
                if !other.is_empty() {
                    let i = pick(rng, other.len());
                    let at = pick(rng, len + 1);
                    data.splice(at..at, other[i..].iter().copied());
                }
            }
            6 if len > 0 => data.truncate(pick(rng, len)),
            _ => {
                let at = pick(rng, len + 1);
                data.splice(at..at, b"\r\n".iter().copied());
            }
        }
        data.truncate(MUTANT_BYTES_MAX);
    }
    data
}

#[test]
fn the_sip_edge_never_panics_on_corpus_and_mutations() {
    let corpus = corpus();
    for seed in &corpus {
        exercise(seed);
    }
    let mut rng = SplitMix64::new(SEED);
    for i in 0..ITERATIONS {
        let data = mutate(&mut rng, &corpus);
        let outcome = std::panic::catch_unwind(|| exercise(&data));
        assert!(
            outcome.is_ok(),
            "iteration {i} (seed {SEED:#x}) panicked on {:?}",
            String::from_utf8_lossy(&data)
        );
    }
}
