//! A live SCTP association fed arbitrary packets (ports, verification tag and CRC32c repaired so
//! they reach the state machine): never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sctp::fuzz::association(data));
