//! Fuzz target: arbitrary bytes through the HTTP request edge (where a head
//! ends, the early check of an incomplete head, the request line and header
//! fields, and the framing rules). Any panic is a bug.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    dialproof_engine::http_exercise::exercise(data);
});
