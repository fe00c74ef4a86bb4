//! Responder rules: RDMA Read Request validation (RFC 5040 §5.2.1, §7.2), Send with
//! Invalidate (§5.3), IRD (§5.2.2, §6.1), Atomic Operations (RFC 7306 §5, §8.2) and the
//! Terminate contents of RFC 5040 §4.8 Figure 10 / §7.1.

use rdmap::codes::{DdpCode, UntaggedCode};
use rdmap::ddp::{Access, TaggedBuffer};
use rdmap::{
    AtomicOp, AtomicRequest, Ird, Opcode, OperationCode, ProtectionCode, ReadRequest, TermCause,
    Terminate, sink_access, validate_atomic_request, validate_invalidate, validate_read_request,
};

const SRC: u32 = 0x0000_4501;

fn source() -> TaggedBuffer {
    TaggedBuffer {
        stag: SRC,
        valid: true,
        associated: true,
        base_to: 0x10_0000,
        len: 0x1000,
        access: Access::REMOTE_READ,
    }
}

fn read(to: u64, size: u32) -> ReadRequest {
    ReadRequest {
        sink_stag: 0x77,
        sink_to: 0,
        size,
        source_stag: SRC,
        source_to: to,
    }
}

fn prot(c: ProtectionCode) -> Result<(), TermCause> {
    Err(TermCause::protection(c))
}

/// RFC 5040 §5.2.1: a zero-length Read Request "MUST NOT validate the Data Source STag and
/// Data Source Tagged Offset" — it passes even with nothing registered.
#[test]
fn rfc5040_5_2_1_zero_length_read_not_validated() {
    assert_eq!(validate_read_request(&read(u64::MAX, 0), None), Ok(()));
}

/// RFC 5040 §7.2 item 4a: the Data Source STag must be valid → *Invalid STag* (0x0/0x1/0x00).
#[test]
fn rfc5040_7_2_4a_source_stag_invalid() {
    assert_eq!(
        validate_read_request(&read(0x10_0000, 1), None),
        prot(ProtectionCode::InvalidStag)
    );
    let other_key = TaggedBuffer {
        stag: SRC ^ 0xff,
        ..source()
    };
    assert_eq!(
        validate_read_request(&read(0x10_0000, 1), Some(&other_key)),
        prot(ProtectionCode::InvalidStag)
    );
    let dead = TaggedBuffer {
        valid: false,
        ..source()
    };
    let e = validate_read_request(&read(0x10_0000, 1), Some(&dead)).expect_err("invalidated");
    assert_eq!(e.layer_etype_ecode(), (0x0, 0x1, 0x00));
}

/// RFC 5040 §7.2 item 4b: the STag must be associated with this stream → *STag not
/// associated with RDMAP Stream* (0x0/0x1/0x03).
#[test]
fn rfc5040_7_2_4b_source_not_associated() {
    let b = TaggedBuffer {
        associated: false,
        ..source()
    };
    let e = validate_read_request(&read(0x10_0000, 1), Some(&b)).expect_err("other PD");
    assert_eq!(e.layer_etype_ecode(), (0x0, 0x1, 0x03));
}

/// RFC 5040 §4.8: a Data Source buffer without remote read access → *Access rights
/// violation* (0x0/0x1/0x02).
#[test]
fn rfc5040_4_8_source_needs_remote_read() {
    let b = TaggedBuffer {
        access: Access::REMOTE_WRITE | Access::LOCAL_WRITE,
        ..source()
    };
    assert_eq!(
        validate_read_request(&read(0x10_0000, 1), Some(&b)),
        prot(ProtectionCode::AccessRights)
    );
}

/// RFC 5040 §7.2 items 4c–4d: SrcTO and SrcTO + size within the buffer → else *Base or
/// bounds violation* (0x0/0x1/0x01). Ending exactly at the end is legal.
#[test]
fn rfc5040_7_2_4cd_source_bounds() {
    let b = source();
    assert_eq!(
        validate_read_request(&read(0x10_0000, 0x1000), Some(&b)),
        Ok(())
    );
    assert_eq!(validate_read_request(&read(0x10_0fff, 1), Some(&b)), Ok(()));
    assert_eq!(
        validate_read_request(&read(0x0f_ffff, 1), Some(&b)),
        prot(ProtectionCode::BaseOrBounds)
    );
    assert_eq!(
        validate_read_request(&read(0x10_0000, 0x1001), Some(&b)),
        prot(ProtectionCode::BaseOrBounds)
    );
}

/// RFC 5040 §7.2 item 4e: SrcTO + size must not wrap → *TO wrap* (0x0/0x1/0x04).
#[test]
fn rfc5040_7_2_4e_source_to_wrap() {
    let b = TaggedBuffer {
        base_to: u64::MAX - 0xff,
        len: 0x100,
        ..source()
    };
    assert_eq!(
        validate_read_request(&read(u64::MAX - 0x10, 0x10), Some(&b)),
        Ok(())
    );
    let e = validate_read_request(&read(u64::MAX - 0xf, 0x10), Some(&b)).expect_err("wraps");
    assert_eq!(e.layer_etype_ecode(), (0x0, 0x1, 0x04));
}

/// RFC 5040 §5.3: Send with Invalidate — an STag not associated with the stream → Remote
/// Protection *STag cannot be Invalidated* (0x0/0x1/0x09); an STag that is not valid →
/// Remote Operation *STag cannot be Invalidated* (0x0/0x2/0x09).
#[test]
fn rfc5040_5_3_send_with_invalidate() {
    let b = TaggedBuffer {
        access: Access::REMOTE_WRITE,
        ..source()
    };
    assert_eq!(validate_invalidate(SRC, Some(&b)), Ok(()));
    let foreign = TaggedBuffer {
        associated: false,
        ..b
    };
    assert_eq!(
        validate_invalidate(SRC, Some(&foreign)).map_err(|c| c.layer_etype_ecode()),
        Err((0x0, 0x1, 0x09))
    );
    for t in [
        None,
        Some(&TaggedBuffer { valid: false, ..b }),
        Some(&TaggedBuffer { stag: 1, ..b }),
    ] {
        assert_eq!(
            validate_invalidate(SRC, t),
            Err(TermCause::operation(OperationCode::CannotInvalidate))
        );
    }
}

/// RFC 5040 §5.2.2/§6.1: inbound Read Requests beyond the IRD target an MSN past the last
/// Read Request buffer → DDP *Invalid MSN - MSN range is not valid* (0x1/0x2/0x03).
#[test]
fn rfc5040_6_1_ird_exceeded() {
    let mut ird = Ird::new(2);
    assert_eq!(ird.admit(), Ok(()));
    assert_eq!(ird.admit(), Ok(()));
    assert_eq!(
        ird.admit(),
        Err(TermCause::Ddp(DdpCode::Untagged(UntaggedCode::MsnRange)))
    );
    assert_eq!(ird.outstanding(), 2);
    ird.complete();
    assert_eq!(ird.admit(), Ok(()));
    let mut zero = Ird::new(0);
    assert!(zero.admit().is_err());
    zero.complete();
    assert_eq!(zero.outstanding(), 0);
}

/// RFC 5040 §4.4/§5.2.2: RDMA Write and RDMA Read Response sinks need remote write access;
/// untagged messages have no tagged sink.
#[test]
fn rfc5040_5_sink_access() {
    assert_eq!(sink_access(Opcode::RdmaWrite), Some(Access::REMOTE_WRITE));
    assert_eq!(
        sink_access(Opcode::ReadResponse),
        Some(Access::REMOTE_WRITE)
    );
    assert_eq!(sink_access(Opcode::Send), None);
}

fn atomic_target() -> TaggedBuffer {
    TaggedBuffer {
        stag: 0x99,
        valid: true,
        associated: true,
        base_to: 0x1000,
        len: 64,
        access: Access::REMOTE_ATOMIC,
    }
}

/// RFC 7306 §5.2.1 item 4 and §1.1: an unsupported Atomic Operation Code → Remote Operation
/// Error *Unexpected OpCode* (0x0/0x2/0x06).
#[test]
fn rfc7306_5_2_1_unsupported_atomic_op() {
    let mut req = AtomicRequest::fetch_add(1, 0x99, 0x1000, 1, 0);
    req.op = AtomicOp::Reserved(0x1);
    let t = atomic_target();
    assert_eq!(
        validate_atomic_request(&req, Some(&t), 0x1000),
        Err(TermCause::operation(OperationCode::UnexpectedOpcode))
    );
}

/// RFC 7306 §5.1: atomics use the RDMA remote addressing checks, needing remote atomic
/// access, reported as Remote Protection Errors.
#[test]
fn rfc7306_5_1_atomic_stag_checks() {
    let t = atomic_target();
    let ok = AtomicRequest::fetch_add(1, 0x99, 0x1038, 1, 0);
    assert_eq!(validate_atomic_request(&ok, Some(&t), 0x1000), Ok(()));
    let past = AtomicRequest::fetch_add(1, 0x99, 0x1040, 1, 0);
    assert_eq!(
        validate_atomic_request(&past, Some(&t), 0x1000),
        prot(ProtectionCode::BaseOrBounds)
    );
    let no_right = TaggedBuffer {
        access: Access::REMOTE_WRITE | Access::REMOTE_READ,
        ..t
    };
    assert_eq!(
        validate_atomic_request(&ok, Some(&no_right), 0x1000),
        prot(ProtectionCode::AccessRights)
    );
    assert_eq!(
        validate_atomic_request(&ok, None, 0),
        prot(ProtectionCode::InvalidStag)
    );
    let wrap = AtomicRequest::fetch_add(1, 0x99, u64::MAX - 3, 1, 0);
    let top = TaggedBuffer {
        base_to: u64::MAX - 63,
        ..t
    };
    assert_eq!(
        validate_atomic_request(&wrap, Some(&top), 0),
        prot(ProtectionCode::ToWrap)
    );
}

/// RFC 7306 §8.2: a target that is not 64-bit aligned → Remote Operation Error *Catastrophic
/// error, localized to RDMAP Stream* (0x0/0x2/0x07). Alignment is of the ULP Buffer address.
#[test]
fn rfc7306_8_2_atomic_alignment() {
    let t = atomic_target();
    let req = AtomicRequest::cmp_swap(1, 0x99, 0x1004, 0, u64::MAX, 1, u64::MAX);
    let e = validate_atomic_request(&req, Some(&t), 0x1000).expect_err("misaligned");
    assert_eq!(e.layer_etype_ecode(), (0x0, 0x2, 0x07));
    // The same TO is aligned when the buffer's base address sits 4 octets off alignment.
    assert_eq!(validate_atomic_request(&req, Some(&t), 0x7ffc), Ok(()));
}

/// RFC 7306 §5.1.1: FetchAdd with Add Mask zero is a plain 64-bit add (wrapping); each set
/// mask bit ends a field whose carry-out is discarded.
#[test]
fn rfc7306_5_1_1_fetch_add() {
    let add = |orig: u64, data: u64, mask: u64| {
        AtomicRequest::fetch_add(0, 0, 0, data, mask)
            .apply(orig)
            .expect("defined")
    };
    assert_eq!(add(5, 7, 0), 12);
    assert_eq!(add(u64::MAX, 1, 0), 0);
    // Two 32-bit fields: bit 31 ends the low field, so its carry does not reach bit 32.
    let mask = (1u64 << 31) | (1u64 << 63);
    assert_eq!(add(0x0000_0001_ffff_ffff, 1, mask), 0x0000_0001_0000_0000);
    // Eight byte-wide counters.
    let bytes = 0x8080_8080_8080_8080;
    assert_eq!(
        add(0x01ff_0203_0405_0607, 0x0101_0101_0101_0101, bytes),
        0x0200_0304_0506_0708
    );
}

/// RFC 7306 §5.1.2: masked CmpSwap swaps the Swap-Mask bits when the Compare-Mask bits
/// match, and leaves the target unchanged otherwise.
#[test]
fn rfc7306_5_1_2_cmp_swap() {
    let cs = |orig, cmp, cmask, swap, smask| {
        AtomicRequest::cmp_swap(0, 0, 0, cmp, cmask, swap, smask)
            .apply(orig)
            .expect("defined")
    };
    assert_eq!(cs(10, 10, u64::MAX, 99, u64::MAX), 99);
    assert_eq!(cs(10, 11, u64::MAX, 99, u64::MAX), 10);
    // Only the low byte is compared; only the high byte is swapped.
    assert_eq!(
        cs(
            0xaa00_0000_0000_0011,
            0x11,
            0xff,
            0xbb00_0000_0000_0000,
            0xff00_0000_0000_0000
        ),
        0xbb00_0000_0000_0011
    );
    let mut reserved = AtomicRequest::fetch_add(0, 0, 0, 0, 0);
    reserved.op = AtomicOp::Reserved(3);
    assert_eq!(reserved.apply(1), None);
}

/// RFC 7306 §5.2.1: the fields FetchAdd does not use are sent as Compare Data zero and
/// Compare Mask all ones.
#[test]
fn rfc7306_5_2_1_fetch_add_unused_fields() {
    let r = AtomicRequest::fetch_add(3, 4, 8, 1, 0);
    assert_eq!((r.compare_data, r.compare_mask), (0, u64::MAX));
    assert_eq!(r.op.code(), 0x0);
    assert_eq!(AtomicRequest::cmp_swap(0, 0, 0, 0, 0, 0, 0).op.code(), 0x2);
}

/// RFC 5040 §4.8 "Terminated RDMA Header": after 2048 octets were sent, both TOs advance by
/// 2048 and the size is what is left.
#[test]
fn rfc5040_4_8_read_request_after_progress() {
    let rr = ReadRequest {
        sink_stag: 1,
        sink_to: 0x1000,
        size: 4096,
        source_stag: 2,
        source_to: 0x8000,
    };
    assert_eq!(
        rr.advanced_by(2048),
        ReadRequest {
            sink_stag: 1,
            sink_to: 0x1800,
            size: 2048,
            source_stag: 2,
            source_to: 0x8800
        }
    );
    assert_eq!(rr.advanced_by(5000).size, 0);
}

/// RFC 5040 Figure 10 and §7.1: which headers a Terminate carries per layer and error type.
#[test]
fn rfc5040_figure_10_terminate_contents() {
    let send = rdmap::Header::Send {
        solicited_event: false,
        invalidate_stag: None,
        last: true,
        msn: 1,
        mo: 0,
    }
    .encode(b"payload")
    .expect("encodes");
    let rr = rdmap::Header::ReadRequest {
        msn: 1,
        request: read(0, 8),
    }
    .to_vec()
    .expect("encodes");

    // LLP and Local Catastrophic: nothing copied.
    for cause in [
        TermCause::Mpa(rdmap::MpaCode::CrcError),
        TermCause::Rdmap(rdmap::RdmapCode::LOCAL_CATASTROPHIC),
        TermCause::Ddp(DdpCode::LocalCatastrophic),
    ] {
        assert_eq!(Terminate::for_segment(cause, &send), Terminate::bare(cause));
    }
    // DDP error: DDP header and segment length.
    let t = Terminate::for_segment(
        TermCause::Ddp(DdpCode::Untagged(UntaggedCode::TooLong)),
        &send,
    );
    assert!(t.m && t.d && !t.r);
    assert_eq!(t.ddp_segment_length as usize, send.len());
    // Remote Operation Error: DDP header, no RDMA header even for a Read Request.
    let t = Terminate::for_segment(TermCause::operation(OperationCode::CatastrophicStream), &rr);
    assert!(t.d && !t.r);
    // Remote Protection Error on a Read Request: RDMA header too.
    let t = Terminate::for_segment(TermCause::protection(ProtectionCode::InvalidStag), &rr);
    assert!(t.d && t.r);
    assert_eq!(t.rdma_header, Some(read(0, 8)));
    // Remote Protection Error on a Send with Invalidate: no RDMA header to copy.
    let t = Terminate::for_segment(
        TermCause::protection(ProtectionCode::CannotInvalidate),
        &send,
    );
    assert!(t.d && !t.r);
    // A segment too short for a DDP header: nothing can be copied.
    let t = Terminate::for_segment(
        TermCause::operation(OperationCode::CatastrophicStream),
        &send[..5],
    );
    assert!(!t.d && !t.m);
}

/// RFC 5040 §5.2.2: the Data Sink MAY check a Read Response against its Read Request — same
/// Sink STag, TO continuing from the Sink TO, total length equal to the request's size.
#[test]
fn rfc5040_5_2_2_read_response_matches_request() {
    use rdmap::check_read_response;
    let rr = ReadRequest {
        sink_stag: 0x32ae_6100,
        sink_to: 0x5000,
        size: 2000,
        source_stag: 9,
        source_to: 0,
    };
    assert_eq!(
        check_read_response(&rr, 0, 0x32ae_6100, 0x5000, 1428, false),
        Ok(())
    );
    assert_eq!(
        check_read_response(&rr, 1428, 0x32ae_6100, 0x5000 + 1428, 572, true),
        Ok(())
    );
    let bounds = Err(TermCause::Ddp(DdpCode::Tagged(
        rdmap::codes::TaggedCode::BaseOrBounds,
    )));
    assert_eq!(
        check_read_response(&rr, 0, 0x32ae_6101, 0x5000, 1, false),
        Err(TermCause::Ddp(DdpCode::Tagged(
            rdmap::codes::TaggedCode::InvalidStag
        )))
    );
    assert_eq!(
        check_read_response(&rr, 0, 0x32ae_6100, 0x5001, 1, false),
        bounds
    );
    assert_eq!(
        check_read_response(&rr, 1428, 0x32ae_6100, 0x5000 + 1428, 573, true),
        bounds
    );
    assert_eq!(
        check_read_response(&rr, 1428, 0x32ae_6100, 0x5000 + 1428, 571, true),
        bounds
    );
    let zero = ReadRequest { size: 0, ..rr };
    assert_eq!(
        check_read_response(&zero, 0, 0x32ae_6100, 0x5000, 0, true),
        Ok(())
    );
}
