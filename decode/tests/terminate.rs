//! A peer's Terminate read as meant (RFC 5040 §4.8): the RFC layout, Linux siw 6.1's
//! low-bit-first layout, and input that is not a Terminate or is cut short.

use ddp::{DdpCode, TaggedCode};
use decode::terminate::{self as term, Layout};
use rdmap::{Header, ProtectionCode, RdmapCode, ReadRequest, TermCause, Terminate};

/// A Terminate ULPDU for `cause` reported on `segment`.
fn terminate_ulpdu(cause: TermCause, segment: &[u8]) -> Vec<u8> {
    Header::Terminate {
        msn: 1,
        terminate: Terminate::for_segment(cause, segment),
    }
    .to_vec()
    .expect("encode")
}

fn read_request_segment() -> (Vec<u8>, ReadRequest) {
    let rr = ReadRequest {
        sink_stag: 0x100,
        sink_to: 0,
        size: 16,
        source_stag: 0x200,
        source_to: 0x1000,
    };
    let seg = Header::ReadRequest {
        msn: 1,
        request: rr,
    }
    .to_vec()
    .expect("encode");
    (seg, rr)
}

/// RFC 5040 §4.8: a conformant Terminate reads with its cause, M/D/R, the segment length and
/// both copied headers.
#[test]
fn rfc5040_4_8_terminate_in_the_rfc_layout() {
    let (seg, rr) = read_request_segment();
    let cause = TermCause::Rdmap(RdmapCode::RemoteProtection(ProtectionCode::InvalidStag));
    let t = term::read(&terminate_ulpdu(cause, &seg)).expect("a Terminate");
    assert_eq!(t.layout, Layout::Rfc);
    assert_eq!(t.cause, cause);
    assert!(t.m && t.d && t.r);
    assert_eq!(t.segment_length, Some(seg.len() as u16));
    assert_eq!(t.ddp_header.as_deref(), seg.get(..ddp::UNTAGGED_HEADER_LEN));
    assert_eq!(t.rdma_header, Some(rr));
}

/// RFC 5040 §4.8 against Linux siw 6.1: the low-bit-first control word (Layer and Error Type
/// exchanged, M/D/R in the low bits of the third octet) is recognised and read as meant.
#[test]
fn rfc5040_4_8_terminate_in_siws_low_bit_first_layout() {
    let seg = Header::RdmaWrite {
        last: true,
        stag: 0x300,
        to: 0,
    }
    .encode(&[0u8; 8])
    .expect("encode");
    let cause = TermCause::Rdmap(RdmapCode::RemoteProtection(ProtectionCode::AccessRights));
    let mut u = terminate_ulpdu(cause, &seg);
    let at = ddp::UNTAGGED_HEADER_LEN;
    // Rewrite the control word as siw lays it out: nibbles exchanged, M (bit 0) and D (bit 1).
    u[at] = u[at].rotate_left(4);
    u[at + 2] = 0x03;
    let t = term::read(&u).expect("a Terminate");
    assert_eq!(t.layout, Layout::LowBitFirst);
    assert_eq!(t.cause, cause);
    assert!(t.m && t.d && !t.r);
    assert_eq!(t.ddp_header.as_deref(), seg.get(..ddp::TAGGED_HEADER_LEN));
    assert!(t.describe().contains("low-bit-first"), "{}", t.describe());
    // Reserved bits set in any other pattern are reported as such.
    u[at + 3] = 0x01;
    assert_eq!(
        term::read(&u).expect("a Terminate").layout,
        Layout::ReservedBitsSet
    );
}

/// RFC 5040 §4.8: only an untagged QN 2 segment with the Terminate opcode is a Terminate, and
/// short or odd input is refused without panicking.
#[test]
fn rfc5040_4_8_non_terminates_and_short_input() {
    let (seg, _) = read_request_segment();
    assert!(term::read(&seg).is_none());
    let cause = TermCause::Ddp(DdpCode::Tagged(TaggedCode::InvalidStag));
    let u = terminate_ulpdu(cause, &seg);
    for n in 0..u.len() {
        let _ = term::read(&u[..n]);
    }
    assert!(term::read(&u[..ddp::UNTAGGED_HEADER_LEN + 3]).is_none());
    assert!(term::read(&[0xff; 64]).is_none());
}
