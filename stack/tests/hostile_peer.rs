//! Property test: a hostile peer against an established QP engine (`stack::fuzz`), over MPA
//! (CRC on and off, markers, any chunking) and over SCTP (RFC 5043; any PPID, ordered or
//! not, with DDP-SSNs and STags made right where asked so input reaches placement). Never a
//! panic, never a byte outside a granted buffer, never leaving RTS without a Terminate.

use proptest::prelude::*;

/// An SCTP message of the harness's format: flags, length, data (a DDP segment after its
/// DDP-SSN, often with a plausible DDP/RDMAP control byte).
fn message() -> impl Strategy<Value = Vec<u8>> {
    (
        any::<u8>(),
        prop_oneof![Just(0x41u8), Just(0xc0u8), Just(0xc1u8), any::<u8>()],
        prop_oneof![
            Just(0x40u8),
            Just(0x41u8),
            Just(0x43u8),
            Just(0x46u8),
            any::<u8>()
        ],
        prop::collection::vec(any::<u8>(), 0..200),
    )
        .prop_map(|(flags, ddp, rdmap, body)| {
            let mut data = vec![0, 0, ddp, rdmap];
            data.extend_from_slice(&body);
            let mut m = vec![flags];
            m.extend_from_slice(&(data.len() as u16).to_be_bytes());
            m.extend_from_slice(&data);
            m
        })
}

proptest! {
    /// RFC 5040 §7, RFC 5041 §7, RFC 5044 §8: arbitrary MPA streams.
    #[test]
    fn hostile_mpa_stream(mode in any::<u8>(), stream in prop::collection::vec(any::<u8>(), 0..3000)) {
        let mut data = vec![mode & !4];
        data.extend_from_slice(&stream);
        stack::fuzz::hostile_peer(&data);
    }

    /// RFC 5043 §5-§10 with RFC 5040/5041 §7: arbitrary SCTP message sequences.
    #[test]
    fn hostile_sctp_messages(msgs in prop::collection::vec(message(), 0..40)) {
        let mut data = vec![4u8];
        for m in msgs {
            data.extend_from_slice(&m);
        }
        stack::fuzz::hostile_peer(&data);
    }
}

/// RFC 5043 §6.2: the peer's own DDP Stream Session Terminate (found by the fuzzer) closes
/// the QP like a peer's close of the stream, reported as the transport closing.
#[test]
fn rfc5043_6_2_peer_session_terminate_closes_the_qp() {
    // Mode: SCTP; one message, flags 0xff (unordered, PPID 17, next DDP-SSN), 4 bytes:
    // DDP-SSN (rewritten to 1) and function 4 (Terminate).
    stack::fuzz::hostile_peer(&[0x75, 0xff, 0xc7, 0x3d, 0x08, 0x00, 0x00, 0x04]);
}
