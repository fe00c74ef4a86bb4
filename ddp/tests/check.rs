//! Receive-side validation tests: one per RFC 5041 §7.1 check with its §7.2 error number,
//! including the boundary cases.

use ddp::error::StagProblem;
use ddp::{
    Access, DdpError, QueueState, TaggedBuffer, TaggedRepr, UntaggedRepr, check_tagged,
    check_untagged,
};

const STAG: u32 = 0x0012_3456;

fn buffer() -> TaggedBuffer {
    TaggedBuffer {
        stag: STAG,
        valid: true,
        associated: true,
        base_to: 0x1000,
        len: 0x100,
        access: Access::REMOTE_WRITE | Access::LOCAL_WRITE,
    }
}

fn seg(stag: u32, to: u64) -> TaggedRepr {
    TaggedRepr {
        last: true,
        rsvd_ulp: 0x40,
        stag,
        to,
    }
}

fn check(stag: u32, to: u64, len: usize, b: Option<&TaggedBuffer>) -> Result<(), DdpError> {
    check_tagged(&seg(stag, to), len, b, Access::REMOTE_WRITE)
}

/// RFC 5041 §7.1 tagged check 1 → §7.2 0x1/0x00 *Invalid STag*: nothing registered under
/// the STag's index.
#[test]
fn rfc5041_7_1_tagged_invalid_stag_unregistered() {
    let e = check(STAG, 0x1000, 1, None).expect_err("unregistered");
    assert_eq!(
        e,
        DdpError::InvalidStag {
            stag: STAG,
            problem: StagProblem::NotRegistered
        }
    );
    assert_eq!(e.layer_etype_ecode(), (0x1, 0x1, 0x00));
}

/// RFC 5041 §7.1 tagged check 1 → *Invalid STag*: same index, different 8-bit key.
#[test]
fn rfc5041_7_1_tagged_invalid_stag_key_mismatch() {
    let b = buffer();
    let e = check(STAG ^ 0x01, 0x1000, 1, Some(&b)).expect_err("key differs");
    assert_eq!(
        e,
        DdpError::InvalidStag {
            stag: STAG ^ 0x01,
            problem: StagProblem::KeyMismatch { registered: STAG }
        }
    );
    assert_eq!(e.layer_etype_ecode(), (0x1, 0x1, 0x00));
}

/// RFC 5041 §7.1 tagged check 1 → *Invalid STag*: the registration was invalidated.
#[test]
fn rfc5041_7_1_tagged_invalid_stag_invalidated() {
    let b = TaggedBuffer {
        valid: false,
        ..buffer()
    };
    let e = check(STAG, 0x1000, 1, Some(&b)).expect_err("invalidated");
    assert!(matches!(
        e,
        DdpError::InvalidStag {
            problem: StagProblem::Invalidated,
            ..
        }
    ));
    assert_eq!(e.layer_etype_ecode(), (0x1, 0x1, 0x00));
}

/// RFC 5041 §7.1 tagged check 2 and §8.2 → 0x1/0x02 *STag not associated with DDP Stream*.
#[test]
fn rfc5041_8_2_tagged_stag_not_associated() {
    let b = TaggedBuffer {
        associated: false,
        ..buffer()
    };
    let e = check(STAG, 0x1000, 1, Some(&b)).expect_err("other PD");
    assert_eq!(e, DdpError::StagNotAssociated { stag: STAG });
    assert_eq!(e.layer_etype_ecode(), (0x1, 0x1, 0x02));
}

/// RFC 5041 §7.1 tagged check 2 ("an associated buffer that allows Placement"): a buffer
/// without the needed right is refused; DDP has no code, so it is reported as RFC 5040
/// §4.8 RDMAP Remote Protection Error *Access rights violation* (0x0/0x1/0x02).
#[test]
fn rfc5040_4_8_tagged_access_rights() {
    let b = TaggedBuffer {
        access: Access::LOCAL_WRITE | Access::REMOTE_READ,
        ..buffer()
    };
    let e = check(STAG, 0x1000, 1, Some(&b)).expect_err("no remote write");
    assert_eq!(
        e,
        DdpError::AccessRights {
            stag: STAG,
            needed: Access::REMOTE_WRITE,
            granted: Access::LOCAL_WRITE | Access::REMOTE_READ
        }
    );
    assert_eq!(e.code(), None);
    assert_eq!(e.layer_etype_ecode(), (0x0, 0x1, 0x02));
}

/// RFC 5041 §7.1 tagged check 3 → 0x1/0x01 *Base or bounds violation*: TO one below the
/// base.
#[test]
fn rfc5041_7_1_tagged_to_below_base() {
    let b = buffer();
    assert!(check(STAG, 0x1000, 1, Some(&b)).is_ok());
    let e = check(STAG, 0x0fff, 1, Some(&b)).expect_err("below base");
    assert!(matches!(e, DdpError::BaseOrBounds { to: 0x0fff, .. }));
    assert_eq!(e.layer_etype_ecode(), (0x1, 0x1, 0x01));
}

/// RFC 5041 §7.1 tagged check 4 → *Base or bounds violation*: ending exactly at the end of
/// the buffer is legal, one octet past is not.
#[test]
fn rfc5041_7_1_tagged_end_boundary() {
    let b = buffer();
    assert_eq!(check(STAG, 0x1000, 0x100, Some(&b)), Ok(()));
    assert_eq!(check(STAG, 0x10ff, 1, Some(&b)), Ok(()));
    let e = check(STAG, 0x1000, 0x101, Some(&b)).expect_err("one past");
    assert_eq!(e.layer_etype_ecode(), (0x1, 0x1, 0x01));
    let e = check(STAG, 0x1100, 1, Some(&b)).expect_err("starts at end");
    assert_eq!(e.layer_etype_ecode(), (0x1, 0x1, 0x01));
}

/// RFC 5041 §7.1 tagged check 5 → 0x1/0x03 *TO wrap*: "A 64-bit unsigned sum of the DDP
/// Segment payload length and the TO does not wrap." A sum of exactly 2^64 − 1 is fine, 2^64
/// wraps.
#[test]
fn rfc5041_7_1_tagged_to_wrap_at_u64_max() {
    let b = TaggedBuffer {
        base_to: u64::MAX - 0xff,
        len: 0x100,
        ..buffer()
    };
    // Last octet at 2^64 − 2: sum = 2^64 − 1, no wrap, inside the buffer.
    assert_eq!(check(STAG, u64::MAX - 10, 10, Some(&b)), Ok(()));
    // Sum = 2^64: wraps.
    let e = check(STAG, u64::MAX - 9, 10, Some(&b)).expect_err("wraps");
    assert_eq!(
        e,
        DdpError::ToWrap {
            to: u64::MAX - 9,
            len: 10
        }
    );
    assert_eq!(e.layer_etype_ecode(), (0x1, 0x1, 0x03));
    let e = check(STAG, u64::MAX, 1, Some(&b)).expect_err("wraps");
    assert_eq!(e.layer_etype_ecode(), (0x1, 0x1, 0x03));
    // A huge length wraps without any arithmetic overflow in the checker.
    let e = check(STAG, 1, usize::MAX, Some(&b)).expect_err("wraps or out of bounds");
    assert!(matches!(
        e,
        DdpError::ToWrap { .. } | DdpError::BaseOrBounds { .. }
    ));
}

/// A buffer registered up to the very end of the 64-bit space does not overflow the bounds
/// arithmetic.
#[test]
fn rfc5041_7_1_tagged_buffer_at_top_of_space() {
    let b = TaggedBuffer {
        base_to: u64::MAX - 4,
        len: u64::MAX,
        ..buffer()
    };
    assert_eq!(check(STAG, u64::MAX - 4, 4, Some(&b)), Ok(()));
}

/// RFC 5041 §5.2: "The STag and TO fields MUST NOT be checked for a zero-length Tagged DDP
/// Message" — even STag 0 with nothing registered and a wrapping TO passes.
#[test]
fn rfc5041_5_2_zero_length_tagged_not_checked() {
    assert_eq!(check(0, u64::MAX, 0, None), Ok(()));
    let b = TaggedBuffer {
        valid: false,
        associated: false,
        access: Access::NONE,
        ..buffer()
    };
    assert_eq!(check(STAG, 0, 0, Some(&b)), Ok(()));
}

fn useg(qn: u32, msn: u32, mo: u32) -> UntaggedRepr {
    UntaggedRepr {
        last: true,
        rsvd_ulp: [0x43, 0, 0, 0, 0],
        qn,
        msn,
        mo,
    }
}

const RECV: [u64; 2] = [100, 50];

fn queues() -> [QueueState<'static>; 3] {
    [
        QueueState::new(1, &RECV),
        QueueState {
            granted: Some(4),
            ..QueueState::new(7, &[28, 28])
        },
        QueueState {
            granted: Some(1),
            ..QueueState::new(1, &[])
        },
    ]
}

/// RFC 5041 §7.1 untagged check 1 → 0x2/0x01 *Invalid QN*.
#[test]
fn rfc5041_7_1_untagged_invalid_qn() {
    let q = queues();
    // QN 2 exists (the error is about its buffers, not the QN).
    assert!(matches!(
        check_untagged(&useg(2, 1, 0), 0, &q),
        Err(DdpError::NoBuffer { .. })
    ));
    let e = check_untagged(&useg(3, 1, 0), 1, &q).expect_err("no queue 3");
    assert_eq!(e, DdpError::InvalidQn { qn: 3, queues: 3 });
    assert_eq!(e.layer_etype_ecode(), (0x1, 0x2, 0x01));
    let e = check_untagged(&useg(u32::MAX, 1, 0), 1, &q).expect_err("huge QN");
    assert_eq!(e.layer_etype_ecode(), (0x1, 0x2, 0x01));
}

/// RFC 5041 §7.1 untagged check 2 → 0x2/0x02 *Invalid MSN - no buffer available*: the
/// message right after the last posted receive buffer (QN 0 has no grant).
#[test]
fn rfc5041_7_1_untagged_no_buffer_available() {
    let q = queues();
    assert_eq!(check_untagged(&useg(0, 2, 0), 50, &q), Ok(()));
    let e = check_untagged(&useg(0, 3, 0), 1, &q).expect_err("no third buffer");
    assert_eq!(e, DdpError::NoBuffer { qn: 0, msn: 3 });
    assert_eq!(e.layer_etype_ecode(), (0x1, 0x2, 0x02));
    // An empty queue with a grant: the one granted message has no buffer → local fault.
    let e = check_untagged(&useg(2, 1, 0), 1, &q).expect_err("terminate queue empty");
    assert_eq!(e, DdpError::NoBuffer { qn: 2, msn: 1 });
}

/// RFC 5041 §7.1 untagged check 5 → 0x2/0x03 *Invalid MSN - MSN range is not valid*: an MSN
/// already completed (below the first available buffer), one skipping ahead, and one beyond
/// the peer's grant (an RDMA Read Request past the IRD).
#[test]
fn rfc5041_7_1_untagged_msn_range() {
    let q = queues();
    let e = check_untagged(&useg(0, 0, 0), 1, &q).expect_err("already completed");
    assert_eq!(
        e,
        DdpError::MsnRange {
            qn: 0,
            msn: 0,
            first_msn: 1
        }
    );
    assert_eq!(e.layer_etype_ecode(), (0x1, 0x2, 0x03));
    let e = check_untagged(&useg(0, 4, 0), 1, &q).expect_err("skips ahead");
    assert_eq!(e.layer_etype_ecode(), (0x1, 0x2, 0x03));
    // QN 1: two buffers posted, four granted: MSN 9 and 10 lack a buffer (local fault),
    // MSN 11 exceeds the grant.
    assert_eq!(check_untagged(&useg(1, 8, 0), 28, &q), Ok(()));
    assert!(matches!(
        check_untagged(&useg(1, 10, 0), 28, &q),
        Err(DdpError::NoBuffer { .. })
    ));
    let e = check_untagged(&useg(1, 11, 0), 28, &q).expect_err("beyond grant");
    assert_eq!(e.layer_etype_ecode(), (0x1, 0x2, 0x03));
}

/// RFC 5041 §4.3: MSNs wrap modulo 2^32, so a queue whose first MSN is 0xFFFFFFFF serves MSN
/// 0 with its second buffer.
#[test]
fn rfc5041_4_3_msn_range_wraps() {
    let q = [QueueState::new(u32::MAX, &[10, 10])];
    assert_eq!(check_untagged(&useg(0, u32::MAX, 0), 10, &q), Ok(()));
    assert_eq!(check_untagged(&useg(0, 0, 0), 10, &q), Ok(()));
    assert!(matches!(
        check_untagged(&useg(0, 1, 0), 1, &q),
        Err(DdpError::NoBuffer { .. })
    ));
}

/// RFC 5041 §7.1 untagged check 3 → 0x2/0x04 *Invalid MO*: an offset past the end of the
/// buffer, and (with in-order tracking) an offset that does not continue the message.
#[test]
fn rfc5041_7_1_untagged_invalid_mo() {
    let q = queues();
    let e = check_untagged(&useg(0, 1, 101), 1, &q).expect_err("past the buffer");
    assert!(matches!(e, DdpError::InvalidMo { mo: 101, .. }));
    assert_eq!(e.layer_etype_ecode(), (0x1, 0x2, 0x04));
    let tracked = [QueueState {
        next_mo: Some(40),
        ..QueueState::new(1, &RECV)
    }];
    assert_eq!(check_untagged(&useg(0, 1, 40), 10, &tracked), Ok(()));
    let e = check_untagged(&useg(0, 1, 30), 10, &tracked).expect_err("gap");
    assert_eq!(e.layer_etype_ecode(), (0x1, 0x2, 0x04));
}

/// RFC 5041 §7.1 untagged check 4 → 0x2/0x05 *DDP Message too long for available buffer*:
/// filling the buffer exactly is fine, one octet more is not.
#[test]
fn rfc5041_7_1_untagged_too_long() {
    let q = queues();
    assert_eq!(check_untagged(&useg(0, 1, 0), 100, &q), Ok(()));
    assert_eq!(check_untagged(&useg(0, 1, 60), 40, &q), Ok(()));
    let e = check_untagged(&useg(0, 1, 60), 41, &q).expect_err("one octet over");
    assert_eq!(
        e,
        DdpError::TooLong {
            qn: 0,
            msn: 1,
            mo: 60,
            len: 41,
            buffer_len: 100
        }
    );
    assert_eq!(e.layer_etype_ecode(), (0x1, 0x2, 0x05));
    let e = check_untagged(&useg(0, 1, 100), 1, &q).expect_err("starts at the end");
    assert_eq!(e.layer_etype_ecode(), (0x1, 0x2, 0x05));
    let e = check_untagged(&useg(0, 1, u32::MAX), usize::MAX, &q).expect_err("huge");
    assert_eq!(e.layer_etype_ecode(), (0x1, 0x2, 0x04));
    // MO inside the buffer plus a length near 2^64 must not overflow the arithmetic.
    let e = check_untagged(&useg(0, 1, 1), usize::MAX, &q).expect_err("huge length");
    assert_eq!(e.layer_etype_ecode(), (0x1, 0x2, 0x05));
}

/// RFC 5041 §7.1 exempts zero-length segments from Placement checks, but a zero-length
/// message still consumes a buffer (RFC 5040 §5.3): QN and MSN are checked, MO is not.
#[test]
fn rfc5041_7_1_zero_length_untagged() {
    let q = queues();
    assert_eq!(check_untagged(&useg(0, 1, 9999), 0, &q), Ok(()));
    assert!(matches!(
        check_untagged(&useg(0, 3, 0), 0, &q),
        Err(DdpError::NoBuffer { .. })
    ));
    assert!(matches!(
        check_untagged(&useg(9, 1, 0), 0, &q),
        Err(DdpError::InvalidQn { .. })
    ));
}
