//! Property tests: every header and message round-trips, random bytes never panic the
//! decoder, truncations are reported as truncations; plus segmentation of Writes, Read
//! Responses and Sends (RFC 5041 §5.2 applied to RDMAP, RFC 5040 §4.1).

use proptest::prelude::*;
use rdmap::headers::AtomicOp;
use rdmap::{
    AtomicRequest, AtomicResponse, DecodeError, Header, Message, ReadRequest, TermCause, Terminate,
    TerminatedDdpHeader, segments,
};

fn read_request() -> impl Strategy<Value = ReadRequest> {
    (
        any::<u32>(),
        any::<u64>(),
        any::<u32>(),
        any::<u32>(),
        any::<u64>(),
    )
        .prop_map(
            |(sink_stag, sink_to, size, source_stag, source_to)| ReadRequest {
                sink_stag,
                sink_to,
                size,
                source_stag,
                source_to,
            },
        )
}

fn atomic_request() -> impl Strategy<Value = AtomicRequest> {
    (
        0u8..16,
        any::<u32>(),
        any::<u32>(),
        any::<u64>(),
        any::<[u64; 4]>(),
    )
        .prop_map(|(op, request_id, stag, to, [a, b, c, d])| AtomicRequest {
            op: AtomicOp::from_code(op),
            request_id,
            stag,
            to,
            add_swap_data: a,
            add_swap_mask: b,
            compare_data: c,
            compare_mask: d,
        })
}

fn ddp_copy() -> impl Strategy<Value = TerminatedDdpHeader> {
    prop_oneof![
        any::<[u8; 14]>().prop_map(|mut b| {
            b[0] |= 0x80;
            TerminatedDdpHeader::Tagged(b)
        }),
        any::<[u8; 18]>().prop_map(|mut b| {
            b[0] &= 0x7f;
            TerminatedDdpHeader::Untagged(b)
        }),
    ]
}

fn terminate() -> impl Strategy<Value = Terminate> {
    (
        (0u8..16, 0u8..16, any::<u8>()),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        any::<u16>(),
        ddp_copy(),
        proptest::option::of(read_request()),
    )
        .prop_map(|((l, t, c), m, d, r, len, copy, rr)| Terminate {
            cause: TermCause::from_wire(l, t, c),
            m,
            d,
            r,
            ddp_segment_length: if m || d { len } else { 0 },
            ddp_header: d.then_some(copy),
            rdma_header: if r { rr } else { None },
        })
}

fn header() -> impl Strategy<Value = Header> {
    prop_oneof![
        (any::<bool>(), any::<u32>(), any::<u64>())
            .prop_map(|(last, stag, to)| Header::RdmaWrite { last, stag, to }),
        (any::<bool>(), any::<u32>(), any::<u64>())
            .prop_map(|(last, stag, to)| Header::ReadResponse { last, stag, to }),
        (any::<u32>(), read_request())
            .prop_map(|(msn, request)| Header::ReadRequest { msn, request }),
        (
            any::<bool>(),
            proptest::option::of(any::<u32>()),
            any::<bool>(),
            any::<u32>(),
            any::<u32>()
        )
            .prop_map(
                |(solicited_event, invalidate_stag, last, msn, mo)| Header::Send {
                    solicited_event,
                    invalidate_stag,
                    last,
                    msn,
                    mo
                }
            ),
        (any::<u32>(), terminate())
            .prop_map(|(msn, terminate)| Header::Terminate { msn, terminate }),
        (any::<bool>(), any::<u32>(), any::<[u8; 8]>()).prop_map(|(solicited_event, msn, data)| {
            Header::ImmediateData {
                solicited_event,
                msn,
                data,
            }
        }),
        (any::<u32>(), atomic_request())
            .prop_map(|(msn, request)| Header::AtomicRequest { msn, request }),
        (any::<u32>(), any::<u32>(), any::<u64>()).prop_map(|(msn, request_id, original_value)| {
            Header::AtomicResponse {
                msn,
                response: AtomicResponse {
                    request_id,
                    original_value,
                },
            }
        }),
    ]
}

proptest! {
    /// RFC 5040 §4 / RFC 7306 §4: every message header round-trips through emit and
    /// `Message::parse`, with the payload of the messages that carry one.
    #[test]
    fn every_header_round_trips(h in header(), payload in proptest::collection::vec(any::<u8>(), 0..48)) {
        let payload: &[u8] = if h.opcode().carries_ulp_payload() { &payload } else { &[] };
        let bytes = h.encode(payload).expect("encodes");
        prop_assert_eq!(bytes.len(), h.header_len() + payload.len());
        let m = Message::parse(&bytes).expect("decodes what was encoded");
        prop_assert_eq!(m.header, h);
        prop_assert_eq!(m.payload, payload);
        prop_assert_eq!(m.ddp_header(), h.ddp_header());
    }

    /// RFC 5040 §4.4, RFC 7306 §5.2: the fixed headers round-trip on their own.
    #[test]
    fn fixed_headers_round_trip(rr in read_request(), ar in atomic_request(), id: u32, v: u64) {
        prop_assert_eq!(ReadRequest::parse(&rr.to_bytes()).expect("parses").0, rr);
        prop_assert_eq!(AtomicRequest::parse(&ar.to_bytes()).expect("parses").0, ar);
        let resp = AtomicResponse { request_id: id, original_value: v };
        prop_assert_eq!(AtomicResponse::parse(&resp.to_bytes()).expect("parses").0, resp);
    }

    /// Random bytes never panic the decoder; a failure always maps to a Terminate whose
    /// encoding decodes back.
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..120)) {
        if let Err(e) = Message::parse(&bytes) {
            let t = e.terminate(&bytes);
            let term = Header::Terminate { msn: 1, terminate: t }.to_vec().expect("encodes");
            let back = Message::parse(&term).expect("our Terminate decodes");
            prop_assert_eq!(back.header, Header::Terminate { msn: 1, terminate: t });
        }
    }

    /// Random bytes behind a valid DDP + RDMAP control prefix exercise every opcode's header
    /// decoder without panicking.
    #[test]
    fn random_bodies_never_panic(op in 0u8..16, qn in 0u32..5, mo in 0u32..3, last: bool,
                                  body in proptest::collection::vec(any::<u8>(), 0..100)) {
        let mut seg = rdmap::ddp::UntaggedRepr {
            last,
            rsvd_ulp: [0x40 | op, 0, 0, 0, 0],
            qn,
            msn: 1,
            mo,
        }
        .to_bytes()
        .to_vec();
        seg.extend_from_slice(&body);
        let _ = Message::parse(&seg);
    }

    /// Cutting an encoded header short gives a truncation error (DDP or RDMAP).
    #[test]
    fn truncation_is_reported(h in header(), cut in 0usize..200) {
        let bytes = h.to_vec().expect("encodes");
        let cut = cut % bytes.len();
        match Message::parse(&bytes[..cut]) {
            Err(DecodeError::Truncated { .. }) | Err(DecodeError::Ddp(rdmap::ddp::DdpError::Truncated { .. })) => {}
            // The one accepted cut: a Terminate with R set cut exactly before its RDMA header
            // decodes under the R-without-header tolerance (see `rdmap::terminate`).
            Ok(m) => {
                let r_tolerance = matches!(m.header, Header::Terminate { terminate, .. } if terminate.r);
                prop_assert!(r_tolerance);
            }
            Err(e) => prop_assert!(false, "cut at {} gave {:?}", cut, e),
        }
    }

    /// RFC 5041 §5.2 for RDMAP: a Send split by `segments` decodes segment by segment with the
    /// same MSN, MO advancing, L only on the last, each ULPDU within the MULPDU.
    #[test]
    fn segmented_send_decodes(len in 0u64..5000, mulpdu in 19usize..1500, msn: u32, inv in proptest::option::of(any::<u32>())) {
        let first = Header::Send { solicited_event: true, invalidate_stag: inv, last: false, msn, mo: 0 };
        let payload: Vec<u8> = (0..len).map(|i| i as u8).collect();
        let segs = segments(&first, len, mulpdu).expect("segments");
        let mut next = 0usize;
        for (i, (h, r)) in segs.iter().enumerate() {
            let ulpdu = h.encode(&payload[r.clone()]).expect("encodes");
            prop_assert!(ulpdu.len() <= mulpdu);
            let m = Message::parse(&ulpdu).expect("decodes");
            prop_assert_eq!(m.header, Header::Send { solicited_event: true, invalidate_stag: inv, last: i + 1 == segs.len(), msn, mo: next as u32 });
            next += m.payload.len();
        }
        prop_assert_eq!(next as u64, len);
    }
}

/// RFC 5041 §5.2 for RDMAP: siw's 2000-octet RDMA Write with MULPDU 1442 is 1428 + 572
/// octets, TO advancing, STag constant.
#[test]
fn rfc5041_5_2_segmented_write() {
    let first = Header::RdmaWrite {
        last: false,
        stag: 0x2222_2200,
        to: 0x2000_0000_0000,
    };
    let segs = segments(&first, 2000, 1442).expect("segments");
    assert_eq!(
        segs,
        vec![
            (
                Header::RdmaWrite {
                    last: false,
                    stag: 0x2222_2200,
                    to: 0x2000_0000_0000
                },
                0..1428
            ),
            (
                Header::RdmaWrite {
                    last: true,
                    stag: 0x2222_2200,
                    to: 0x2000_0000_0594
                },
                1428..2000
            ),
        ]
    );
    let rr = Header::ReadResponse {
        last: true,
        stag: 1,
        to: u64::MAX,
    };
    assert!(segments(&rr, 1, 100).is_err(), "TO wrap refused");
    assert!(
        segments(
            &Header::ReadRequest {
                msn: 1,
                request: ReadRequest {
                    sink_stag: 0,
                    sink_to: 0,
                    size: 0,
                    source_stag: 0,
                    source_to: 0
                }
            },
            0,
            100
        )
        .is_err()
    );
}
