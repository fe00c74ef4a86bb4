//! Decoder rules: every opcode's buffer model, queue and header (RFC 5040 §4.1–§4.8, RFC 7306
//! §4–§6) and the Terminate each malformation maps to (RFC 5040 §7.2, RFC 7306 §8.2).

use rdmap::ddp::{DdpError, TaggedRepr, UntaggedRepr};
use rdmap::headers::AtomicOp;
use rdmap::{
    AtomicRequest, AtomicResponse, DecodeError, Header, Message, Opcode, OperationCode,
    ReadRequest, TermCause, Terminate,
};

fn untagged(last: bool, ctrl: u8, inv: u32, qn: u32, msn: u32, mo: u32) -> Vec<u8> {
    let i = inv.to_be_bytes();
    UntaggedRepr {
        last,
        rsvd_ulp: [ctrl, i[0], i[1], i[2], i[3]],
        qn,
        msn,
        mo,
    }
    .to_bytes()
    .to_vec()
}

fn tagged(last: bool, ctrl: u8, stag: u32, to: u64) -> Vec<u8> {
    TaggedRepr {
        last,
        rsvd_ulp: ctrl,
        stag,
        to,
    }
    .to_bytes()
    .to_vec()
}

fn ctrl(op: u8) -> u8 {
    0x40 | op
}

fn triple(e: &DecodeError) -> (u8, u8, u8) {
    e.term_cause().layer_etype_ecode()
}

/// RFC 5040 §4.1 Figure 4 / RFC 7306 Figure 2: each opcode's model and queue.
#[test]
fn rfc5040_4_1_opcode_table() {
    let expect: [(Opcode, bool, Option<u32>, bool); 12] = [
        (Opcode::RdmaWrite, true, None, false),
        (Opcode::ReadRequest, false, Some(1), false),
        (Opcode::ReadResponse, true, None, false),
        (Opcode::Send, false, Some(0), false),
        (Opcode::SendInvalidate, false, Some(0), true),
        (Opcode::SendSe, false, Some(0), false),
        (Opcode::SendSeInvalidate, false, Some(0), true),
        (Opcode::Terminate, false, Some(2), false),
        (Opcode::ImmediateData, false, Some(0), false),
        (Opcode::ImmediateDataSe, false, Some(0), false),
        (Opcode::AtomicRequest, false, Some(1), false),
        (Opcode::AtomicResponse, false, Some(3), false),
    ];
    for (i, (op, t, q, inv)) in expect.into_iter().enumerate() {
        assert_eq!(op.code() as usize, i);
        assert_eq!(Opcode::from_code(i as u8), Some(op));
        assert_eq!(op.is_tagged(), t, "{op}");
        assert_eq!(op.queue_number(), q, "{op}");
        assert_eq!(op.has_invalidate_stag(), inv, "{op}");
    }
    for reserved in 0xc..=0xf {
        assert_eq!(Opcode::from_code(reserved), None);
    }
    assert_eq!(rdmap::control_byte(Opcode::Send), 0x43);
    assert_eq!(rdmap::control_byte(Opcode::AtomicResponse), 0x4b);
}

/// RFC 5040 §4.1: RV other than 01b → Remote Operation Error *Invalid RDMAP version*
/// (0x0/0x2/0x05); the reserved bits are ignored on receive.
#[test]
fn rfc5040_4_1_invalid_rdmap_version() {
    for rv in [0u8, 2, 3] {
        let seg = untagged(true, (rv << 6) | 0x3, 0, 0, 1, 0);
        let e = Message::parse(&seg).expect_err("RV must be 1");
        assert_eq!(e, DecodeError::InvalidVersion { version: rv });
        assert_eq!(triple(&e), (0x0, 0x2, 0x05));
        // Nothing after the RDMAP control field is interpreted, so no header is copied.
        let t = e.terminate(&seg);
        assert!(!t.d && !t.m && !t.r);
    }
    let seg = untagged(true, 0x40 | 0x30 | 0x3, 0, 0, 1, 0);
    assert_eq!(
        Message::parse(&seg).expect("Rsv ignored").opcode(),
        Opcode::Send
    );
}

/// RFC 5040 §7.2 item 2: reserved opcodes 0xC–0xF → Remote Operation Error *Unexpected
/// OpCode* (0x0/0x2/0x06), on either buffer model.
#[test]
fn rfc5040_7_2_reserved_opcode() {
    for op in 0xc..=0xf {
        let e = Message::parse(&untagged(true, ctrl(op), 0, 0, 1, 0)).expect_err("reserved");
        assert_eq!(e, DecodeError::ReservedOpcode { opcode: op });
        assert_eq!(triple(&e), (0x0, 0x2, 0x06));
        let e = Message::parse(&tagged(true, ctrl(op), 1, 0)).expect_err("reserved");
        assert_eq!(triple(&e), (0x0, 0x2, 0x06));
    }
}

/// RFC 5040 §4.1 Figure 4: an untagged opcode arriving tagged (e.g. a tagged Send), or a
/// tagged opcode arriving untagged, is not a valid opcode for that segment →
/// *Unexpected OpCode*.
#[test]
fn rfc5040_4_1_opcode_on_wrong_buffer_model() {
    for op in Opcode::ALL {
        let seg = if op.is_tagged() {
            untagged(true, ctrl(op.code()), 0, 0, 1, 0)
        } else {
            tagged(true, ctrl(op.code()), 1, 0)
        };
        let e = Message::parse(&seg).expect_err("wrong model");
        assert_eq!(
            e,
            DecodeError::WrongBufferModel {
                opcode: op,
                tagged: !op.is_tagged()
            }
        );
        assert_eq!(triple(&e), (0x0, 0x2, 0x06), "{op}");
    }
}

/// RFC 5040 §5.2.1/§5.3/§5.4 and RFC 7306 §5.2/§6.3: each untagged opcode must name its
/// queue; another QN → DDP *Invalid QN* (0x1/0x2/0x01).
#[test]
fn rfc5040_5_untagged_wrong_queue() {
    for op in Opcode::ALL.into_iter().filter(|o| !o.is_tagged()) {
        let right = op.queue_number().expect("untagged");
        for qn in [0u32, 1, 2, 3, 4, u32::MAX] {
            if qn == right {
                continue;
            }
            let e = Message::parse(&untagged(true, ctrl(op.code()), 0, qn, 1, 0))
                .expect_err("wrong queue");
            assert_eq!(
                e,
                DecodeError::WrongQueue {
                    opcode: op,
                    qn,
                    expected: right
                }
            );
            assert_eq!(triple(&e), (0x1, 0x2, 0x01));
        }
    }
}

/// RFC 5040 §4.4: a Read Request header shorter than 28 octets is truncated; longer is
/// trailing data (no ULP payload is allowed, RFC 5040 Figure 5). Both → *Catastrophic error,
/// localized to RDMAP Stream* (0x0/0x2/0x07).
#[test]
fn rfc5040_4_4_read_request_length() {
    let rr = ReadRequest {
        sink_stag: 1,
        sink_to: 2,
        size: 3,
        source_stag: 4,
        source_to: 5,
    };
    let mut seg = untagged(true, ctrl(1), 0, 1, 1, 0);
    seg.extend_from_slice(&rr.to_bytes());
    assert!(Message::parse(&seg).is_ok());
    for cut in 0..28 {
        let e = Message::parse(&seg[..18 + cut]).expect_err("short");
        assert!(matches!(
            e,
            DecodeError::Truncated {
                opcode: Opcode::ReadRequest,
                ..
            }
        ));
        assert_eq!(triple(&e), (0x0, 0x2, 0x07));
    }
    seg.push(0);
    let e = Message::parse(&seg).expect_err("long");
    assert_eq!(
        e,
        DecodeError::TrailingData {
            opcode: Opcode::ReadRequest,
            header_len: 28,
            extra: 1
        }
    );
    assert_eq!(triple(&e), (0x0, 0x2, 0x07));
}

/// RFC 5040 §4.4/§4.8, RFC 7306 §5.2/§6.2: header-carrying messages are a single segment:
/// MO ≠ 0 → DDP *Invalid MO* (0x1/0x2/0x04); L clear → 0x0/0x2/0x07.
#[test]
fn rfc5040_4_single_segment_messages() {
    for op in [
        Opcode::ReadRequest,
        Opcode::Terminate,
        Opcode::ImmediateData,
        Opcode::ImmediateDataSe,
        Opcode::AtomicRequest,
        Opcode::AtomicResponse,
    ] {
        let qn = op.queue_number().expect("untagged");
        let e = Message::parse(&untagged(true, ctrl(op.code()), 0, qn, 1, 28)).expect_err("MO");
        assert_eq!(e, DecodeError::NotAtOffsetZero { opcode: op, mo: 28 });
        assert_eq!(triple(&e), (0x1, 0x2, 0x04));
        let e = Message::parse(&untagged(false, ctrl(op.code()), 0, qn, 1, 0)).expect_err("L");
        assert_eq!(e, DecodeError::NotLastSegment { opcode: op });
        assert_eq!(triple(&e), (0x0, 0x2, 0x07));
    }
}

/// RFC 5040 §4.1: the Invalidate STag (RsvdULP octets 1–4) is valid only for Send with
/// Invalidate and Send with SE and Invalidate; for other Sends it is ignored on receive.
#[test]
fn rfc5040_4_1_invalidate_stag_field() {
    let seg = untagged(true, ctrl(4), 0xabcd_ef01, 0, 9, 0);
    let m = Message::parse(&seg).expect("SendInv");
    assert_eq!(
        m.header,
        Header::Send {
            solicited_event: false,
            invalidate_stag: Some(0xabcd_ef01),
            last: true,
            msn: 9,
            mo: 0
        }
    );
    let seg = untagged(true, ctrl(6), 7, 0, 9, 0);
    let m = Message::parse(&seg).expect("SendSeInv");
    assert_eq!(m.opcode(), Opcode::SendSeInvalidate);
    let seg = untagged(false, ctrl(5), 0xffff_ffff, 0, 9, 100);
    let m = Message::parse(&seg).expect("SendSe");
    assert_eq!(
        m.header,
        Header::Send {
            solicited_event: true,
            invalidate_stag: None,
            last: false,
            msn: 9,
            mo: 100
        }
    );
    // Sent as zero for opcodes without it.
    assert_eq!(&m.header.to_vec().expect("encodes")[2..6], &[0, 0, 0, 0]);
}

/// RFC 7306 §6.2–§6.3: Immediate Data carries exactly 8 octets on QN 0; anything else →
/// 0x0/0x2/0x07.
#[test]
fn rfc7306_6_3_immediate_data_exactly_8_octets() {
    let mut seg = untagged(true, ctrl(8), 0, 0, 3, 0);
    seg.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
    let m = Message::parse(&seg).expect("decodes");
    assert_eq!(
        m.header,
        Header::ImmediateData {
            solicited_event: false,
            msn: 3,
            data: [1, 2, 3, 4, 5, 6, 7, 8]
        }
    );
    let e = Message::parse(&seg[..25]).expect_err("7 octets");
    assert_eq!(triple(&e), (0x0, 0x2, 0x07));
    seg.push(9);
    let e = Message::parse(&seg).expect_err("9 octets");
    assert_eq!(triple(&e), (0x0, 0x2, 0x07));
}

/// RFC 7306 §5.2.1: the Atomic Request header is 52 octets on QN 1; the 28 reserved bits
/// are ignored and AOpCode is the low 4 bits.
#[test]
fn rfc7306_5_2_1_atomic_request_layout() {
    let req = AtomicRequest::cmp_swap(7, 0x100, 0x2000, 1, u64::MAX, 2, u64::MAX);
    let mut body = req.to_bytes();
    assert_eq!(body.len(), 52);
    assert_eq!(&body[0..4], &[0, 0, 0, 2]);
    body[0] = 0xff;
    body[2] = 0x30;
    let mut seg = untagged(true, ctrl(0xa), 0, 1, 1, 0);
    seg.extend_from_slice(&body);
    let m = Message::parse(&seg).expect("decodes");
    assert_eq!(
        m.header,
        Header::AtomicRequest {
            msn: 1,
            request: req
        }
    );
    let mut reserved = req;
    reserved.op = AtomicOp::Reserved(1);
    let (back, _) = AtomicRequest::parse(&reserved.to_bytes()).expect("parses");
    assert_eq!(back.op, AtomicOp::Reserved(1));
}

/// RFC 7306 §5.2.2: the Atomic Response header is 12 octets (Original Request Identifier,
/// Original Remote Data Value) on QN 3.
#[test]
fn rfc7306_5_2_2_atomic_response_layout() {
    let resp = AtomicResponse {
        request_id: 0x0102_0304,
        original_value: 0x1122_3344_5566_7788,
    };
    assert_eq!(
        resp.to_bytes(),
        [1, 2, 3, 4, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88]
    );
    let bytes = Header::AtomicResponse {
        msn: 4,
        response: resp,
    }
    .to_vec()
    .expect("encodes");
    assert_eq!(&bytes[..2], &[0x41, 0x4b]);
    assert_eq!(&bytes[6..10], &3u32.to_be_bytes());
    assert_eq!(
        Message::parse(&bytes).expect("decodes").header,
        Header::AtomicResponse {
            msn: 4,
            response: resp
        }
    );
}

/// RFC 5040 §4.8: a Terminate with only the control word (Local Catastrophic, no flags)
/// decodes; octets after the announced fields (zero-filled header fields, RFC 5040 §7.1
/// case 1) are returned as payload.
#[test]
fn rfc5040_4_8_bare_terminate_and_padding() {
    let mut seg = untagged(true, ctrl(7), 0, 2, 1, 0);
    seg.extend_from_slice(&[0x00, 0x00, 0x00, 0x00]);
    let m = Message::parse(&seg).expect("bare");
    let Header::Terminate { terminate, .. } = m.header else {
        panic!("terminate")
    };
    assert!(terminate.cause.is_local_catastrophic());
    assert!(m.payload.is_empty());
    seg.extend_from_slice(&[0u8; 46]);
    let m = Message::parse(&seg).expect("padded");
    assert_eq!(m.payload.len(), 46);
}

/// RFC 5040 §4.8: Linux siw sets R with only the DDP header attached for errors on Send with
/// Invalidate; such a Terminate decodes with no RDMA header.
#[test]
fn rfc5040_4_8_terminate_r_without_rdma_header() {
    let mut seg = untagged(true, ctrl(7), 0, 2, 1, 0);
    seg.extend_from_slice(&[0x01, 0x09, 0xe0, 0x00, 0x00, 0x10]);
    seg.extend_from_slice(&untagged(true, ctrl(4), 0x55, 0, 3, 0));
    let m = Message::parse(&seg).expect("decodes");
    let Header::Terminate { terminate, .. } = m.header else {
        panic!("terminate")
    };
    assert!(terminate.r);
    assert_eq!(terminate.rdma_header, None);
    assert_eq!(
        terminate.ddp_header.and_then(|h| h.opcode()),
        Some(Opcode::SendInvalidate)
    );
    assert_eq!(m.header.to_vec().expect("encodes"), seg);
}

/// RFC 5040 §4.8: fields announced by M/D/R that are cut short are truncation errors.
#[test]
fn rfc5040_4_8_truncated_terminate() {
    let t = Terminate::for_segment(
        TermCause::operation(OperationCode::UnexpectedOpcode),
        &untagged(true, ctrl(3), 0, 0, 1, 0),
    );
    let full = Header::Terminate {
        msn: 1,
        terminate: t,
    }
    .to_vec()
    .expect("encodes");
    for cut in 18..full.len() {
        let e = Message::parse(&full[..cut]).expect_err("cut");
        assert!(
            matches!(
                e,
                DecodeError::Truncated {
                    opcode: Opcode::Terminate,
                    ..
                }
            ),
            "{cut}: {e:?}"
        );
    }
}

/// RFC 5041 errors surface through the RDMAP decoder with their DDP codes.
#[test]
fn rfc5041_7_2_ddp_errors_pass_through() {
    let mut seg = untagged(true, ctrl(3), 0, 0, 1, 0);
    seg[0] = (seg[0] & !3) | 2;
    let e = Message::parse(&seg).expect_err("DV 2");
    assert_eq!(
        e,
        DecodeError::Ddp(DdpError::InvalidVersion {
            tagged: false,
            version: 2
        })
    );
    assert_eq!(triple(&e), (0x1, 0x2, 0x06));
    assert!(!e.terminate(&seg).d, "layout unknown: no header copied");
    let e = Message::parse(&[0xc1, 0x40, 0]).expect_err("short");
    assert!(matches!(e, DecodeError::Ddp(DdpError::Truncated { .. })));
}

/// The messages a user sees name the problem.
#[test]
fn decode_errors_are_readable() {
    let e = DecodeError::WrongBufferModel {
        opcode: Opcode::Send,
        tagged: true,
    };
    assert_eq!(e.to_string(), "Send arrived tagged but must be untagged");
    let e = DecodeError::WrongQueue {
        opcode: Opcode::ReadRequest,
        qn: 0,
        expected: 1,
    };
    assert_eq!(
        e.to_string(),
        "RDMA Read Request arrived on queue 0 but belongs on queue 1"
    );
}
