//! Fuzz target: arbitrary bytes as a create request's body through the
//! validator (JSON parsing with Python's messages, every field's rules).
//! Any panic is a bug.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = dialproof_engine::validate::parse_create(data);
});
