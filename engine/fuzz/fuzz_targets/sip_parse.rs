//! Fuzz target: arbitrary datagrams through the SIP edge (parser, URI and
//! caller extraction, number normalisation, digest challenges, the server
//! endpoint and the registration client). Any panic is a bug.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    dialproof_engine::sip::exercise::exercise(data);
});
