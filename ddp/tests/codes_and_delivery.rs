//! RFC 5041 §7.2 error numbers, in-order delivery (§4.1, §5.4) and property tests of the
//! wire format.

use ddp::error::etype;
use ddp::{
    DdpCode, DdpError, Header, Progress, Reassembly, Segment, TaggedCode, TaggedRepr, UntaggedCode,
    UntaggedRepr, ulp_message_length,
};
use proptest::prelude::*;

/// RFC 5041 §7.2: the numeric values and names of every error number, checked against the
/// RFC's table.
#[test]
fn rfc5041_7_2_error_number_table() {
    let table: [(DdpCode, u8, u8, &str); 12] = [
        (DdpCode::LocalCatastrophic, 0x0, 0x00, "Local Catastrophic"),
        (
            DdpCode::Tagged(TaggedCode::InvalidStag),
            0x1,
            0x00,
            "Invalid STag",
        ),
        (
            DdpCode::Tagged(TaggedCode::BaseOrBounds),
            0x1,
            0x01,
            "Base or bounds violation",
        ),
        (
            DdpCode::Tagged(TaggedCode::StagNotAssociated),
            0x1,
            0x02,
            "STag not associated with DDP Stream",
        ),
        (DdpCode::Tagged(TaggedCode::ToWrap), 0x1, 0x03, "TO wrap"),
        (
            DdpCode::Tagged(TaggedCode::InvalidVersion),
            0x1,
            0x04,
            "Invalid DDP version",
        ),
        (
            DdpCode::Untagged(UntaggedCode::InvalidQn),
            0x2,
            0x01,
            "Invalid QN",
        ),
        (
            DdpCode::Untagged(UntaggedCode::NoBuffer),
            0x2,
            0x02,
            "Invalid MSN - no buffer available",
        ),
        (
            DdpCode::Untagged(UntaggedCode::MsnRange),
            0x2,
            0x03,
            "Invalid MSN - MSN range is not valid",
        ),
        (
            DdpCode::Untagged(UntaggedCode::InvalidMo),
            0x2,
            0x04,
            "Invalid MO",
        ),
        (
            DdpCode::Untagged(UntaggedCode::TooLong),
            0x2,
            0x05,
            "DDP Message too long for available buffer",
        ),
        (
            DdpCode::Untagged(UntaggedCode::InvalidVersion),
            0x2,
            0x06,
            "Invalid DDP version",
        ),
    ];
    for (code, t, c, name) in table {
        assert_eq!(code.layer_etype_ecode(), (0x1, t, c), "{name}");
        assert_eq!(DdpCode::from_wire(t, c), Some(code));
        assert!(code.to_string().ends_with(name), "{code} vs {name}");
    }
    assert_eq!(
        TaggedCode::ALL.len() + UntaggedCode::ALL.len() + 1,
        table.len()
    );
}

/// RFC 5041 §7.2: Error Type 0x3 is reserved for the LLP (any code); undefined pairs are not
/// codes.
#[test]
fn rfc5041_7_2_reserved_and_undefined() {
    assert_eq!(
        DdpCode::from_wire(etype::LLP_RESERVED, 0x42),
        Some(DdpCode::LlpReserved(0x42))
    );
    assert_eq!(DdpCode::LlpReserved(0x42).layer_etype_ecode(), (1, 3, 0x42));
    assert_eq!(DdpCode::from_wire(0x1, 0x05), None);
    assert_eq!(DdpCode::from_wire(0x2, 0x00), None);
    assert_eq!(DdpCode::from_wire(0x2, 0x07), None);
    assert_eq!(DdpCode::from_wire(0x0, 0x01), None);
    assert_eq!(DdpCode::from_wire(0x4, 0x00), None);
}

/// Every [`DdpError`] says what it is and maps to a triple consistent with its code.
#[test]
fn errors_display_and_map() {
    let e = DdpError::NoBuffer { qn: 0, msn: 7 };
    assert_eq!(
        e.to_string(),
        "no buffer is posted on queue 0 for message sequence number 7"
    );
    assert_eq!(e.code(), Some(DdpCode::Untagged(UntaggedCode::NoBuffer)));
    let e = DdpError::ToWrap {
        to: u64::MAX,
        len: 1,
    };
    assert!(e.to_string().contains("wraps"));
}

fn tseg(last: bool, stag: u32, to: u64) -> Header {
    Header::Tagged(TaggedRepr {
        last,
        rsvd_ulp: 0x40,
        stag,
        to,
    })
}

fn useg(last: bool, msn: u32, mo: u32) -> Header {
    Header::Untagged(UntaggedRepr {
        last,
        rsvd_ulp: [0x43, 0, 0, 0, 0],
        qn: 0,
        msn,
        mo,
    })
}

/// RFC 5041 §5.4: the ULP Message Length is the MO plus the payload length of the last
/// segment.
#[test]
fn rfc5041_5_4_ulp_message_length() {
    let last = UntaggedRepr {
        last: true,
        rsvd_ulp: [0; 5],
        qn: 0,
        msn: 1,
        mo: 1424,
    };
    assert_eq!(ulp_message_length(&last, 576), Some(2000));
    let last = UntaggedRepr {
        mo: u32::MAX,
        ..last
    };
    assert_eq!(ulp_message_length(&last, 0), Some(u32::MAX));
    assert_eq!(ulp_message_length(&last, 1), None);
}

/// RFC 5041 §4.1/§5.4: a message completes (may be Delivered) exactly at the segment with L
/// set; an untagged message's length is its last MO plus payload.
#[test]
fn rfc5041_5_4_delivery_on_last_segment() {
    let mut r = Reassembly::new();
    assert_eq!(r.accept(&useg(false, 1, 0), 1424), Ok(Progress::Partial));
    assert!(r.in_progress(false));
    // A tagged message may interleave with the untagged one.
    assert_eq!(
        r.accept(&tseg(true, 5, 100), 10),
        Ok(Progress::Complete { len: 10 })
    );
    assert_eq!(
        r.accept(&useg(true, 1, 1424), 576),
        Ok(Progress::Complete { len: 2000 })
    );
    assert!(!r.in_progress(false));
    // Zero-length message: one segment, complete at once.
    assert_eq!(
        r.accept(&useg(true, 2, 0), 0),
        Ok(Progress::Complete { len: 0 })
    );
}

/// RFC 5041 §5.2: a new untagged message starts at MO 0, and (in order) each segment
/// continues at the previous MO plus its payload; otherwise *Invalid MO*.
#[test]
fn rfc5041_5_2_untagged_mo_continuity() {
    let mut r = Reassembly::new();
    let e = r.accept(&useg(true, 1, 5), 1).expect_err("must start at 0");
    assert_eq!(e.layer_etype_ecode(), (1, 2, 0x04));
    r.accept(&useg(false, 1, 0), 100).expect("first");
    let e = r.accept(&useg(true, 1, 99), 1).expect_err("gap");
    assert_eq!(e.layer_etype_ecode(), (1, 2, 0x04));
    let e = r
        .accept(&useg(true, 2, 100), 1)
        .expect_err("MSN changed mid-message");
    assert_eq!(e.layer_etype_ecode(), (1, 2, 0x03));
    assert_eq!(
        r.accept(&useg(true, 1, 100), 1),
        Ok(Progress::Complete { len: 101 })
    );
}

/// RFC 5041 §4.2/§5.2: every segment of a tagged message carries the same STag and the TO
/// of its first octet.
#[test]
fn rfc5041_5_2_tagged_continuity() {
    let mut r = Reassembly::new();
    r.accept(&tseg(false, 7, 1000), 100).expect("first");
    let e = r.accept(&tseg(true, 8, 1100), 1).expect_err("STag changed");
    assert_eq!(e.layer_etype_ecode(), (1, 1, 0x00));
    let e = r.accept(&tseg(true, 7, 1101), 1).expect_err("TO gap");
    assert_eq!(e.layer_etype_ecode(), (1, 1, 0x01));
    assert_eq!(
        r.accept(&tseg(true, 7, 1100), 1),
        Ok(Progress::Complete { len: 101 })
    );
}

fn any_header() -> impl Strategy<Value = Header> {
    prop_oneof![
        (any::<bool>(), any::<u8>(), any::<u32>(), any::<u64>())
            .prop_map(|(last, rsvd_ulp, stag, to)| tseg_full(last, rsvd_ulp, stag, to)),
        (
            any::<bool>(),
            any::<[u8; 5]>(),
            any::<u32>(),
            any::<u32>(),
            any::<u32>()
        )
            .prop_map(
                |(last, rsvd_ulp, qn, msn, mo)| Header::Untagged(UntaggedRepr {
                    last,
                    rsvd_ulp,
                    qn,
                    msn,
                    mo
                })
            ),
    ]
}

fn tseg_full(last: bool, rsvd_ulp: u8, stag: u32, to: u64) -> Header {
    Header::Tagged(TaggedRepr {
        last,
        rsvd_ulp,
        stag,
        to,
    })
}

proptest! {
    /// RFC 5041 §4: every header round-trips through emit and parse, with its payload.
    #[test]
    fn rfc5041_4_header_round_trip(h in any_header(), payload in proptest::collection::vec(any::<u8>(), 0..64)) {
        let mut buf = vec![0u8; h.header_len()];
        prop_assert_eq!(h.emit(&mut buf), Ok(h.header_len()));
        buf.extend_from_slice(&payload);
        let (back, p) = Segment::parse(&buf).expect("emitted header parses");
        prop_assert_eq!(back, h);
        prop_assert_eq!(p, &payload[..]);
    }

    /// Random bytes never panic the parser; every failure is a typed error with a triple.
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
        match Segment::parse(&bytes) {
            Ok((h, p)) => prop_assert_eq!(h.header_len() + p.len(), bytes.len()),
            Err(e) => {
                let (layer, _, _) = e.layer_etype_ecode();
                prop_assert!(layer <= 1);
            }
        }
    }

    /// Truncating an emitted header anywhere gives a truncation error.
    #[test]
    fn truncation_is_reported(h in any_header(), cut in 1usize..18) {
        let mut buf = vec![0u8; h.header_len()];
        h.emit(&mut buf).expect("fits");
        let cut = cut.min(h.header_len() - 1);
        let is_truncated = matches!(Segment::parse(&buf[..cut]), Err(DdpError::Truncated { .. }));
        prop_assert!(is_truncated);
    }
}
