//! A hostile peer against an established QP engine, over MPA or SCTP (see
//! `stack::fuzz::hostile_peer`): never panics, never writes outside a granted buffer, never
//! leaves RTS without the Terminate the RFCs prescribe.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    stack::fuzz::hostile_peer(data);
});
