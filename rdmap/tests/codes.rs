//! Terminate error codes of every layer: RFC 5040 §4.8 Figure 9 (RDMAP), RFC 5041 §7.2
//! (DDP), RFC 5044 §8 and RFC 6581 §8 (MPA), as registered by RFC 6580 §3.

use proptest::prelude::*;
use rdmap::codes::{DdpCode, TaggedCode, UntaggedCode};
use rdmap::{MpaCode, OperationCode, ProtectionCode, RdmapCode, TermCause};

/// RFC 5040 §4.8 Figure 9: the RDMAP Remote Protection Error codes.
#[test]
fn rfc5040_4_8_remote_protection_codes() {
    let table = [
        (0x00, "Invalid STag"),
        (0x01, "Base or bounds violation"),
        (0x02, "Access rights violation"),
        (0x03, "STag not associated with RDMAP Stream"),
        (0x04, "TO wrap"),
        (0x09, "STag cannot be Invalidated"),
        (0xff, "Unspecified Error"),
    ];
    assert_eq!(ProtectionCode::ALL.len(), table.len());
    for (code, name) in table {
        let c = ProtectionCode::from_code(code).expect("defined");
        assert_eq!((c.code(), c.name()), (code, name));
        let cause = TermCause::from_wire(0x0, 0x1, code);
        assert_eq!(cause, TermCause::protection(c));
        assert_eq!(cause.layer_etype_ecode(), (0x0, 0x1, code));
    }
    for undefined in [0x05, 0x06, 0x07, 0x08, 0x0a, 0xfe] {
        assert_eq!(ProtectionCode::from_code(undefined), None);
    }
}

/// RFC 5040 §4.8 Figure 9: the RDMAP Remote Operation Error codes.
#[test]
fn rfc5040_4_8_remote_operation_codes() {
    let table = [
        (0x05, "Invalid RDMAP version"),
        (0x06, "Unexpected OpCode"),
        (0x07, "Catastrophic error, localized to RDMAP Stream"),
        (0x08, "Catastrophic error, global"),
        (0x09, "STag cannot be Invalidated"),
        (0xff, "Unspecified Error"),
    ];
    assert_eq!(OperationCode::ALL.len(), table.len());
    for (code, name) in table {
        let c = OperationCode::from_code(code).expect("defined");
        assert_eq!((c.code(), c.name()), (code, name));
        assert_eq!(
            TermCause::from_wire(0x0, 0x2, code),
            TermCause::operation(c)
        );
    }
    assert_eq!(OperationCode::from_code(0x00), None);
}

/// RFC 5040 §4.8 Figure 9: Local Catastrophic Error "does not have an error code. Any value
/// in this field is acceptable" — every code decodes to it and re-encodes unchanged.
#[test]
fn rfc5040_4_8_local_catastrophic_any_code() {
    for code in [0x00, 0x01, 0x7f, 0xff] {
        let cause = TermCause::from_wire(0x0, 0x0, code);
        assert_eq!(
            cause,
            TermCause::Rdmap(RdmapCode::LocalCatastrophic { ecode: code })
        );
        assert!(cause.is_local_catastrophic());
        assert_eq!(cause.layer_etype_ecode(), (0, 0, code));
    }
}

/// RFC 5041 §7.2 via RFC 5040 §4.8 ("See DDP Specification"): layer 0x1 decodes to the DDP
/// codes.
#[test]
fn rfc5041_7_2_ddp_layer_codes() {
    assert_eq!(
        TermCause::from_wire(1, 0, 0),
        TermCause::Ddp(DdpCode::LocalCatastrophic)
    );
    for c in TaggedCode::ALL {
        assert_eq!(
            TermCause::from_wire(1, 1, c.code()),
            TermCause::Ddp(DdpCode::Tagged(c))
        );
    }
    for c in UntaggedCode::ALL {
        assert_eq!(
            TermCause::from_wire(1, 2, c.code()),
            TermCause::Ddp(DdpCode::Untagged(c))
        );
    }
    assert_eq!(
        TermCause::from_wire(1, 3, 9),
        TermCause::Ddp(DdpCode::LlpReserved(9))
    );
}

/// RFC 5044 §8 (codes 1–4) and RFC 6581 §8 (codes 5–7): the MPA errors, Layer 0x2 Error Type
/// 0x0.
#[test]
fn rfc5044_8_and_rfc6581_8_mpa_codes() {
    let table = [
        (0x01, "TCP connection closed, terminated, or lost"),
        (0x02, "MPA CRC Error"),
        (0x03, "MPA Marker and ULPDU Length field mismatch"),
        (0x04, "Invalid MPA Request Frame or MPA Response Frame"),
        (0x05, "Local catastrophic"),
        (0x06, "Insufficient IRD resources"),
        (0x07, "No matching RTR option"),
    ];
    assert_eq!(MpaCode::ALL.len(), table.len());
    for (code, name) in table {
        let c = MpaCode::from_code(code).expect("defined");
        assert_eq!(c.name(), name);
        assert_eq!(TermCause::from_wire(0x2, 0x0, code), TermCause::Mpa(c));
        assert_eq!(TermCause::Mpa(c).layer_etype_ecode(), (0x2, 0x0, code));
    }
    assert_eq!(MpaCode::from_code(0), None);
    assert_eq!(MpaCode::from_code(8), None);
}

/// RFC 5043 (SCTP adaptation) defines no LLP error codes (RFC 6581 §8 says so), so any other
/// LLP error type, and any undefined combination, is `Unknown` with the raw values.
#[test]
fn unknown_combinations_are_kept() {
    for (l, t, c) in [
        (2, 1, 1),
        (2, 0, 0),
        (3, 0, 0),
        (0, 3, 0),
        (1, 2, 0),
        (0xf, 0xf, 0xff),
    ] {
        let cause = TermCause::from_wire(l, t, c);
        assert_eq!(
            cause,
            TermCause::Unknown {
                layer: l,
                etype: t,
                ecode: c
            }
        );
        assert_eq!(cause.layer_etype_ecode(), (l, t, c));
    }
}

/// What a user sees for a cause names the layer, the error and the raw numbers.
#[test]
fn causes_display_rfc_names() {
    assert_eq!(
        TermCause::protection(ProtectionCode::AccessRights).to_string(),
        "RDMAP Remote Protection Error: Access rights violation (layer 0x0, type 0x1, code 0x02)"
    );
    assert_eq!(
        TermCause::Mpa(MpaCode::CrcError).to_string(),
        "LLP (MPA) Error: MPA CRC Error (layer 0x2, type 0x0, code 0x02)"
    );
    assert_eq!(
        TermCause::Ddp(DdpCode::Untagged(UntaggedCode::NoBuffer)).to_string(),
        "DDP Untagged Buffer Error: Invalid MSN - no buffer available (layer 0x1, type 0x2, code 0x02)"
    );
    assert!(
        TermCause::from_wire(5, 5, 5)
            .to_string()
            .starts_with("unknown Terminate cause")
    );
}

proptest! {
    /// `TermCause::from_wire` never fails and always gives the triple back (4-bit layer and
    /// error type, as on the wire).
    #[test]
    fn from_wire_round_trips(layer in 0u8..16, etype in 0u8..16, ecode: u8) {
        let cause = TermCause::from_wire(layer, etype, ecode);
        prop_assert_eq!(cause.layer_etype_ecode(), (layer, etype, ecode));
        prop_assert!(!cause.to_string().is_empty());
    }
}

/// RFC 5040 §4.8: the Terminate Control word is Layer (high 4 bits of the first octet),
/// EType, Error Code, then Hdrct M/D/R in the top three bits of the third octet and 13
/// reserved bits. A word laid out from the low bits (Linux siw 6.1 on x86 sends
/// `10 00 07 00` for an RDMAP Remote Protection "Invalid STag" with M, D and R set) is
/// recognised by its reserved bits and read back; conformant words are left alone.
#[test]
fn rfc5040_4_8_low_bit_first_terminate_control() {
    use rdmap::low_bit_first_reading;
    let invalid_stag = TermCause::protection(ProtectionCode::InvalidStag);
    assert_eq!(
        low_bit_first_reading([0x10, 0x00, 0x07, 0x00]),
        Some((invalid_stag, true, true, true))
    );
    // A DDP tagged error (layer 1, type 1) reads the same both ways; only M set.
    let (c, m, d, r) = low_bit_first_reading([0x11, 0x01, 0x01, 0x00]).expect("reserved bits");
    assert_eq!(c.layer_etype_ecode(), (0x1, 0x1, 0x01));
    assert!(m && !d && !r);
    // Conformant words: reserved bits clear (M/D/R in the high bits or none).
    for ctrl in [
        [0x01, 0x00, 0xe0, 0x00],
        [0x11, 0x00, 0x00, 0x00],
        [0x10, 0x00, 0xc0, 0x00],
    ] {
        assert_eq!(low_bit_first_reading(ctrl), None, "{ctrl:02x?}");
    }
    // Other reserved patterns are not this layout.
    for ctrl in [
        [0x10, 0x00, 0x08, 0x00],
        [0x10, 0x00, 0x01, 0x01],
        [0x10, 0x00, 0xe1, 0x00],
    ] {
        assert_eq!(low_bit_first_reading(ctrl), None, "{ctrl:02x?}");
    }
}
