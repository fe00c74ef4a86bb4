//! Segmentation tests (RFC 5041 §5.2, §5.3, §4.1) including the RFC's worked examples and
//! the sizes seen from Linux siw.

use std::num::NonZeroU32;

use ddp::{
    INITIAL_MSN, SegmentationError, Span, Spans, TaggedRepr, UntaggedRepr, max_payload, next_msn,
    tagged_segments, untagged_segments,
};
use proptest::prelude::*;

fn nz(n: u32) -> NonZeroU32 {
    NonZeroU32::new(n).expect("test uses non-zero sizes")
}

/// RFC 5041 §5.2 worked example: a 2048-octet untagged message with MULPDU 1500 becomes two
/// segments, MO 0 with 1482 octets and MO 1482 with 566 octets.
#[test]
fn rfc5041_5_2_untagged_example() {
    let segs: Vec<(UntaggedRepr, _)> = untagged_segments([0x43, 0, 0, 0, 0], 0, 5, 2048, 1500)
        .expect("segments")
        .collect();
    assert_eq!(segs.len(), 2);
    assert_eq!(
        (segs[0].0.mo, segs[0].1.len(), segs[0].0.last),
        (0, 1482, false)
    );
    assert_eq!(
        (segs[1].0.mo, segs[1].1.len(), segs[1].0.last),
        (1482, 566, true)
    );
    assert!(segs.iter().all(|(h, _)| h.msn == 5 && h.qn == 0));
}

/// RFC 5041 §5.2 worked example: a 2048-octet tagged message at initial TO 16384 with MULPDU
/// 1500 becomes TO 16384 with 1486 octets and TO 17870 with 562 octets.
#[test]
fn rfc5041_5_2_tagged_example() {
    let segs: Vec<(TaggedRepr, _)> = tagged_segments(0x40, 0x1234, 16384, 2048, 1500)
        .expect("segments")
        .collect();
    assert_eq!(segs.len(), 2);
    assert_eq!((segs[0].0.to, segs[0].1.clone()), (16384, 0..1486));
    assert_eq!((segs[1].0.to, segs[1].1.clone()), (17870, 1486..2048));
    assert!(!segs[0].0.last && segs[1].0.last);
    assert!(
        segs.iter()
            .all(|(h, _)| h.stag == 0x1234 && h.rsvd_ulp == 0x40)
    );
}

/// siw sends ULPDUs of at most 1442 octets (EMSS 1448, no markers): 1428 payload octets per
/// tagged segment and 1424 per untagged one; its 2000-byte RDMA Write splits 1428 + 572.
#[test]
fn rfc5041_5_2_siw_mulpdu_sizes() {
    assert_eq!(max_payload(1442, true).expect("fits").get(), 1428);
    assert_eq!(max_payload(1442, false).expect("fits").get(), 1424);
    let spans: Vec<Span> = Spans::for_mulpdu(2000, 1442, true).expect("ok").collect();
    assert_eq!(
        spans,
        vec![
            Span {
                offset: 0,
                len: 1428,
                last: false
            },
            Span {
                offset: 1428,
                len: 572,
                last: true
            }
        ]
    );
}

/// RFC 5041 §5.2: "A zero-length DDP Message is allowed and MUST consume exactly one DDP
/// Segment", which is also the last (§4.1).
#[test]
fn rfc5041_5_2_zero_length_message_is_one_segment() {
    let spans: Vec<Span> = Spans::new(0, nz(100)).expect("ok").collect();
    assert_eq!(
        spans,
        vec![Span {
            offset: 0,
            len: 0,
            last: true
        }]
    );
    assert_eq!(Spans::new(0, nz(100)).expect("ok").segment_count(), 1);
    let t: Vec<_> = tagged_segments(0, 0, u64::MAX, 0, 64)
        .expect("zero length never wraps")
        .collect();
    assert_eq!(t.len(), 1);
    assert!(t[0].0.last);
}

/// RFC 5041 §5.2: "The ULP Message Length MUST be less than 2^32."
#[test]
fn rfc5041_5_2_message_length_limit() {
    assert!(Spans::new(u64::from(u32::MAX), nz(u32::MAX)).is_ok());
    assert_eq!(
        Spans::new(1 << 32, nz(1000)).map(|_| ()),
        Err(SegmentationError::MessageTooLong { len: 1 << 32 })
    );
}

/// RFC 5041 §5.2: each segment must be no larger than the MULPDU, so a MULPDU not larger
/// than the header cannot carry a message.
#[test]
fn rfc5041_5_2_mulpdu_must_exceed_header() {
    assert_eq!(
        max_payload(14, true),
        Err(SegmentationError::MulpduTooSmall {
            mulpdu: 14,
            header_len: 14
        })
    );
    assert_eq!(max_payload(15, true).map(NonZeroU32::get), Ok(1));
    assert!(max_payload(18, false).is_err());
    assert!(max_payload(0, false).is_err());
    assert_eq!(max_payload(19, false).map(NonZeroU32::get), Ok(1));
}

/// RFC 5041 §7.1 check 5 seen from the Data Source: a tagged message whose last octet would
/// lie past TO 2^64 − 1 is refused rather than sent to be rejected with "TO wrap".
#[test]
fn rfc5041_7_1_source_refuses_to_wrap() {
    assert!(tagged_segments(0, 1, u64::MAX - 9, 9, 64).is_ok());
    assert!(tagged_segments(0, 1, u64::MAX - 9, 10, 64).is_err());
    assert_eq!(
        tagged_segments(0, 1, u64::MAX, 1, 64).map(|_| ()).err(),
        Some(SegmentationError::ToWrap {
            to: u64::MAX,
            len: 1
        })
    );
}

/// RFC 5041 §4.3: the MSN starts at one and wraps to zero after 0xFFFFFFFF.
#[test]
fn rfc5041_4_3_msn_sequence() {
    assert_eq!(INITIAL_MSN, 1);
    assert_eq!(next_msn(1), 2);
    assert_eq!(next_msn(u32::MAX), 0);
}

proptest! {
    /// RFC 5041 §5.2/§5.3/§4.1: segments cover the message exactly once, in increasing
    /// order, each fits the MULPDU, and only the final one has L set.
    #[test]
    fn rfc5041_5_2_spans_cover_message(len in 0u64..200_000, mulpdu in 19usize..9000, tagged: bool) {
        let spans: Vec<Span> = Spans::for_mulpdu(len, mulpdu, tagged).expect("valid").collect();
        let max = (mulpdu - ddp::wire::header_len(tagged)) as u32;
        let mut next = 0u64;
        for (i, s) in spans.iter().enumerate() {
            prop_assert_eq!(u64::from(s.offset), next);
            prop_assert!(s.len <= max);
            prop_assert!(s.len > 0 || len == 0);
            prop_assert_eq!(s.last, i == spans.len() - 1);
            next += u64::from(s.len);
        }
        prop_assert_eq!(next, len);
        prop_assert_eq!(spans.len() as u64, Spans::for_mulpdu(len, mulpdu, tagged).expect("valid").segment_count());
    }

    /// RFC 5041 §5.2: TO advances by the offset and STag stays constant; MO is the offset and
    /// QN, MSN stay constant; every emitted segment fits the MULPDU.
    #[test]
    fn rfc5041_5_2_headers_follow_offsets(len in 0u64..20_000, mulpdu in 19usize..3000,
                                          to in 0u64..u64::MAX / 2, stag: u32, qn: u32, msn: u32) {
        for (h, r) in tagged_segments(0x40, stag, to, len, mulpdu).expect("valid") {
            prop_assert_eq!(h.to, to + r.start as u64);
            prop_assert_eq!(h.stag, stag);
            prop_assert!(h.header_len() + r.len() <= mulpdu);
        }
        for (h, r) in untagged_segments([0x43, 0, 0, 0, 0], qn, msn, len, mulpdu).expect("valid") {
            prop_assert_eq!(h.mo as usize, r.start);
            prop_assert_eq!((h.qn, h.msn), (qn, msn));
            prop_assert!(h.header_len() + r.len() <= mulpdu);
        }
    }
}
