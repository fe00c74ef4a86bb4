//! Wire-format tests: RFC 5041 §4 header layouts, known vectors from Linux siw captures,
//! version handling and truncation.

use ddp::error::{TRUNCATED_TRIPLE, etype};
use ddp::wire::{FLAG_LAST, FLAG_TAGGED, MASK_RESERVED};
use ddp::{
    DdpError, Header, Segment, TAGGED_HEADER_LEN, TaggedPacket, TaggedRepr, UNTAGGED_HEADER_LEN,
    UntaggedPacket, UntaggedRepr,
};

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("test vector is hex"))
        .collect()
}

/// RFC 5041 §4.3: a Send ULPDU captured from Linux siw (`41 43`, QN 0, MSN 1, MO 0, 16 bytes
/// of payload) parses as an untagged, last segment with DV 1.
#[test]
fn rfc5041_4_3_siw_send_vector() {
    let seg = hex("41430000000000000000000000010000000000001000000000001111110000000040");
    assert_eq!(seg.len(), UNTAGGED_HEADER_LEN + 16);
    let (h, payload) = Segment::parse(&seg).expect("siw send parses");
    let Header::Untagged(u) = h else {
        panic!("send must be untagged")
    };
    assert!(u.last);
    assert_eq!(u.rsvd_ulp, [0x43, 0, 0, 0, 0]);
    assert_eq!((u.qn, u.msn, u.mo), (0, 1, 0));
    assert_eq!(payload.len(), 16);
    // Emitting the parsed header gives back the captured bytes.
    assert_eq!(u.to_bytes().as_slice(), &seg[..UNTAGGED_HEADER_LEN]);
}

/// RFC 5041 §4.2: an RDMA Read Response ULPDU captured from siw (`c1 42`, STag 0x32ae6100,
/// TO 0x000056439706eb10).
#[test]
fn rfc5041_4_2_siw_tagged_vector() {
    let seg = hex("c142 32ae6100 000056439706eb10 72646d61");
    let (h, payload) = Segment::parse(&seg).expect("siw read response parses");
    assert_eq!(
        h,
        Header::Tagged(TaggedRepr {
            last: true,
            rsvd_ulp: 0x42,
            stag: 0x32ae_6100,
            to: 0x0000_5643_9706_eb10,
        })
    );
    assert_eq!(payload, b"rdma");
    let p = TaggedPacket::new_checked(&seg[..]).expect("view");
    assert!(p.tagged_flag() && p.last_flag());
    assert_eq!((p.version(), p.reserved()), (1, 0));
    assert_eq!(p.stag(), 0x32ae_6100);
    assert_eq!(p.tagged_offset(), 0x0000_5643_9706_eb10);
    assert_eq!(p.payload(), b"rdma");
}

/// RFC 5041 §4.2: a non-final tagged segment (`81 42`: T=1, L=0) from a multi-FPDU siw Read
/// Response.
#[test]
fn rfc5041_4_1_non_last_segment_has_l_clear() {
    let seg = hex("8142 7ca19900 0000558e7bf0c940 00");
    let (h, _) = Segment::parse(&seg).expect("parses");
    assert!(h.is_tagged());
    assert!(!h.last());
}

/// RFC 5041 §4.1: the control field is `T L Rsvd(4) DV(2)` with T the most significant bit.
#[test]
fn rfc5041_4_1_control_field_bit_positions() {
    let t = TaggedRepr {
        last: true,
        rsvd_ulp: 0,
        stag: 0,
        to: 0,
    };
    assert_eq!(t.to_bytes()[0], 0b1100_0001);
    let u = UntaggedRepr {
        last: false,
        rsvd_ulp: [0; 5],
        qn: 0,
        msn: 0,
        mo: 0,
    };
    assert_eq!(u.to_bytes()[0], 0b0000_0001);
    assert_eq!((FLAG_TAGGED, FLAG_LAST, MASK_RESERVED), (0x80, 0x40, 0x3c));
}

/// RFC 5041 §4.2/§4.3: header lengths are 14 (tagged) and 18 (untagged) octets and every
/// field sits at its figure's offset, big-endian.
#[test]
fn rfc5041_4_field_offsets() {
    let t = TaggedRepr {
        last: false,
        rsvd_ulp: 0xab,
        stag: 0x0102_0304,
        to: 0x0506_0708_090a_0b0c,
    };
    let b = t.to_bytes();
    assert_eq!(b.len(), TAGGED_HEADER_LEN);
    assert_eq!(b, [0x81, 0xab, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);

    let u = UntaggedRepr {
        last: true,
        rsvd_ulp: [0x43, 0xde, 0xad, 0xbe, 0xef],
        qn: 0x1122_3344,
        msn: 0x5566_7788,
        mo: 0x99aa_bbcc,
    };
    let b = u.to_bytes();
    assert_eq!(b.len(), UNTAGGED_HEADER_LEN);
    assert_eq!(
        b,
        [
            0x41, 0x43, 0xde, 0xad, 0xbe, 0xef, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,
            0x99, 0xaa, 0xbb, 0xcc
        ]
    );
}

/// RFC 5041 §4.1 / §7.2: a DV other than 1 is *Invalid DDP version*, of the Tagged Buffer
/// type (0x1/0x1/0x04) or the Untagged Buffer type (0x1/0x2/0x06) by the T bit.
#[test]
fn rfc5041_7_2_invalid_ddp_version() {
    for dv in [0u8, 2, 3] {
        let mut t = TaggedRepr {
            last: true,
            rsvd_ulp: 0x40,
            stag: 1,
            to: 0,
        }
        .to_bytes();
        t[0] = (t[0] & !0x03) | dv;
        let e = Segment::parse(&t).expect_err("wrong DV rejected");
        assert_eq!(
            e,
            DdpError::InvalidVersion {
                tagged: true,
                version: dv
            }
        );
        assert_eq!(e.layer_etype_ecode(), (1, etype::TAGGED, 0x04));

        let mut u = UntaggedRepr {
            last: true,
            rsvd_ulp: [0x43, 0, 0, 0, 0],
            qn: 0,
            msn: 1,
            mo: 0,
        }
        .to_bytes();
        u[0] = (u[0] & !0x03) | dv;
        let e = Segment::parse(&u).expect_err("wrong DV rejected");
        assert_eq!(
            e,
            DdpError::InvalidVersion {
                tagged: false,
                version: dv
            }
        );
        assert_eq!(e.layer_etype_ecode(), (1, etype::UNTAGGED, 0x06));
    }
}

/// RFC 5041 §4.1: the version is checked before the length, since another version's
/// header layout is unknown: a one-byte segment with DV 2 is a version error, not a truncation.
#[test]
fn rfc5041_4_1_version_checked_before_length() {
    assert_eq!(
        Segment::parse(&[0x82]),
        Err(DdpError::InvalidVersion {
            tagged: true,
            version: 2
        })
    );
}

/// RFC 5041 §4.1: the reserved bits are "not checked on receive"; they do not change what
/// parses, and emit sends them as zero.
#[test]
fn rfc5041_4_1_reserved_bits_ignored_on_receive() {
    let mut b = UntaggedRepr {
        last: true,
        rsvd_ulp: [0x43, 0, 0, 0, 0],
        qn: 0,
        msn: 7,
        mo: 0,
    }
    .to_bytes();
    let clean = Segment::parse(&b).expect("parses").0;
    b[0] |= MASK_RESERVED;
    let p = UntaggedPacket::new_checked(&b[..]).expect("view");
    assert_eq!(p.reserved(), 0xf);
    let dirty = Segment::parse(&b)
        .expect("reserved bits do not fail parsing")
        .0;
    assert_eq!(clean, dirty);
    let Header::Untagged(u) = dirty else {
        panic!("untagged")
    };
    assert_eq!(u.to_bytes()[0] & MASK_RESERVED, 0);
}

/// RFC 5041 §4.2/§4.3: segments shorter than their header are a typed truncation error at
/// every length, never a panic.
#[test]
fn truncated_headers_are_errors() {
    let t = TaggedRepr {
        last: true,
        rsvd_ulp: 0,
        stag: 9,
        to: 9,
    }
    .to_bytes();
    for n in 1..TAGGED_HEADER_LEN {
        assert_eq!(
            Segment::parse(&t[..n]),
            Err(DdpError::Truncated {
                tagged: true,
                needed: TAGGED_HEADER_LEN,
                got: n
            })
        );
    }
    let u = UntaggedRepr {
        last: true,
        rsvd_ulp: [0; 5],
        qn: 0,
        msn: 1,
        mo: 0,
    }
    .to_bytes();
    for n in 1..UNTAGGED_HEADER_LEN {
        assert_eq!(
            Segment::parse(&u[..n]),
            Err(DdpError::Truncated {
                tagged: false,
                needed: UNTAGGED_HEADER_LEN,
                got: n
            })
        );
    }
    let e = Segment::parse(&[]).expect_err("empty");
    assert!(matches!(e, DdpError::Truncated { got: 0, .. }));
    assert_eq!(e.layer_etype_ecode(), TRUNCATED_TRIPLE);
}

/// The typed views refuse the other buffer model.
#[test]
fn typed_views_check_the_t_bit() {
    let t = TaggedRepr {
        last: true,
        rsvd_ulp: 0,
        stag: 9,
        to: 9,
    }
    .to_bytes();
    assert_eq!(
        UntaggedPacket::new_checked(&t[..]).map(|_| ()),
        Err(DdpError::WrongModel { tagged: true })
    );
    let mut buf = [0u8; 32];
    UntaggedRepr {
        last: false,
        rsvd_ulp: [0; 5],
        qn: 0,
        msn: 1,
        mo: 0,
    }
    .emit(&mut buf)
    .expect("fits");
    assert_eq!(
        TaggedPacket::new_checked(&buf[..]).map(|_| ()),
        Err(DdpError::WrongModel { tagged: false })
    );
}

/// Setters of the mutable views write the same bytes `emit` would.
#[test]
fn mutable_views_round_trip() {
    let mut buf = [0u8; TAGGED_HEADER_LEN + 4];
    TaggedRepr {
        last: false,
        rsvd_ulp: 0,
        stag: 0,
        to: 0,
    }
    .emit(&mut buf)
    .expect("fits");
    let mut p = TaggedPacket::new_checked(&mut buf[..]).expect("view");
    p.set_last_flag(true);
    p.set_rsvd_ulp(0x40);
    p.set_stag(0xdead_beef);
    p.set_tagged_offset(0x1234_5678_9abc_def0);
    p.payload_mut().copy_from_slice(b"abcd");
    let (h, payload) = Segment::parse(&buf).expect("parses");
    assert_eq!(
        h,
        Header::Tagged(TaggedRepr {
            last: true,
            rsvd_ulp: 0x40,
            stag: 0xdead_beef,
            to: 0x1234_5678_9abc_def0
        })
    );
    assert_eq!(payload, b"abcd");

    let mut buf = [0u8; UNTAGGED_HEADER_LEN];
    UntaggedRepr {
        last: true,
        rsvd_ulp: [0; 5],
        qn: 0,
        msn: 0,
        mo: 0,
    }
    .emit(&mut buf)
    .expect("fits");
    let mut p = UntaggedPacket::new_checked(&mut buf[..]).expect("view");
    p.set_last_flag(false);
    p.set_rsvd_ulp([1, 2, 3, 4, 5]);
    p.set_queue_number(3);
    p.set_msn(u32::MAX);
    p.set_message_offset(1442);
    assert_eq!(
        UntaggedRepr::parse(&buf).expect("parses").0,
        UntaggedRepr {
            last: false,
            rsvd_ulp: [1, 2, 3, 4, 5],
            qn: 3,
            msn: u32::MAX,
            mo: 1442
        }
    );
}

/// `emit` reports a too-small output buffer instead of writing out of bounds.
#[test]
fn emit_into_short_buffer_fails() {
    let mut short = [0u8; 13];
    let e = TaggedRepr {
        last: true,
        rsvd_ulp: 0,
        stag: 0,
        to: 0,
    }
    .emit(&mut short)
    .expect_err("too small");
    assert_eq!((e.needed, e.got), (14, 13));
    let mut short = [0u8; 17];
    assert!(
        UntaggedRepr {
            last: true,
            rsvd_ulp: [0; 5],
            qn: 0,
            msn: 0,
            mo: 0
        }
        .emit(&mut short)
        .is_err()
    );
}
