//! SCTP packet codec (common header, every chunk, parameter and error cause) on arbitrary
//! bytes: never panics; whatever parses re-emits and parses back equal.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sctp::fuzz::packet(data));
