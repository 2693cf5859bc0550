//! "Never panics" for the HTTP request edge and the create body validator,
//! in the default test run (the cargo-fuzz targets `http_request` and
//! `create_body` explore further with a nightly toolchain, `tools/fuzz.sh`):
//! every seed of their corpora (`engine/fuzz/corpus/`) plus seeded random
//! mutations of them go through the same functions the targets call.
//! Deterministic: a failure names its iteration and replays with the seed.
//!
//! Not for: the SIP edge (`crate::sip`).

use dialproof_engine::http_exercise;
use dialproof_engine::sip::rng::SplitMix64;
use dialproof_engine::validate::parse_create;

/// Mutated inputs per edge.
const ITERATIONS: usize = 50_000;
const SEED: u64 = 0x5EED_0E06_E500_0002;
/// Bytes that matter to HTTP and JSON parsers, favoured by the mutator.
const INTERESTING: &[u8] = b"\r\n \t:;,{}[]\"\\0123456789-+eE.\x00\xff\xc3\x80";
/// Longest mutated input (past both edges' limits, so those paths run).
const MUTANT_BYTES_MAX: usize = 70 * 1024;

fn corpus(name: &str) -> Vec<Vec<u8>> {
    let mut out = crate::corpus::files(name);
    out.push(Vec::new());
    out.push(vec![b'['; 20_000]);
    out.push(format!("{}1", "{\"a\":".repeat(5_000)).into_bytes());
    out
}

fn mutate(rng: &mut SplitMix64, corpus: &[Vec<u8>]) -> Vec<u8> {
    let pick = |rng: &mut SplitMix64, n: usize| rng.below(n.max(1) as u64) as usize;
    let mut data = corpus[pick(rng, corpus.len())].clone();
    for _ in 0..1 + pick(rng, 8) {
        let len = data.len();
        match rng.below(6) {
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
                // Repeat a slice (deep nesting, long lines, many headers).
                let i = pick(rng, len);
                let n = 1 + pick(rng, (len - i).min(32));
                let chunk = data[i..i + n].to_vec();
                let at = pick(rng, len + 1);
                for _ in 0..1 + rng.below(64) {
                    data.splice(at..at, chunk.iter().copied());
                }
            }
            4 => {
                let other = &corpus[pick(rng, corpus.len())];
                let at = pick(rng, len + 1);
                data.splice(at..at, other.iter().copied());
            }
            _ if len > 0 => data.truncate(pick(rng, len)),
            _ => data.extend_from_slice(b"\r\n"),
        }
        data.truncate(MUTANT_BYTES_MAX);
    }
    data
}

fn never_panics(name: &str, f: impl Fn(&[u8]) + std::panic::RefUnwindSafe) {
    let corpus = corpus(name);
    for seed in &corpus {
        f(seed);
    }
    let mut rng = SplitMix64::new(SEED);
    for i in 0..ITERATIONS {
        let data = mutate(&mut rng, &corpus);
        let outcome = std::panic::catch_unwind(|| f(&data));
        assert!(
            outcome.is_ok(),
            "{name}: iteration {i} (seed {SEED:#x}) panicked on {:?}",
            String::from_utf8_lossy(&data[..data.len().min(2000)])
        );
    }
}

#[test]
fn the_http_request_edge_never_panics_on_corpus_and_mutations() {
    never_panics("http_request", http_exercise::exercise);
}

#[test]
fn the_create_body_validator_never_panics_on_corpus_and_mutations() {
    never_panics("create_body", |b| {
        let _ = parse_create(b);
    });
}
