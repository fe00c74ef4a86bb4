//! Fast registration (RDMA Verbs: Allocate STag, Fast-Register work request; the kernel
//! verbs' `ib_alloc_mr`, `ib_map_mr_sg`, `IB_WR_REG_MR`): an STag with no memory behind it
//! gets memory, rights and a new consumer key from a work request in send-queue order; Local
//! Invalidate and a peer's Send with Invalidate (RFC 5040 §5.3) end it; the key rotates on
//! every registration, so the STag of the last use is refused (RFC 5040 §7.2.1, RFC 5041
//! §7.2: Invalid STag) and the memory stays untouched.

mod common;

use common::{Opts, Pair, Side, pattern};
use stack::{
    Access, FastRegRegion, MemError, RecvWr, RegisteredBuf, SendOp, SendWr, WcOpcode, WcStatus,
};

/// Local write, remote write and remote read.
fn remote() -> Access {
    Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ
}

/// Whether every byte of `range` of `buf` is `v`.
fn all_are(buf: &RegisteredBuf, range: std::ops::Range<usize>, v: u8) -> bool {
    buf.read_range(range)
        .expect("range")
        .iter()
        .all(|&b| b == v)
}

/// `stag` with consumer key `key`.
fn with_key(stag: u32, key: u8) -> u32 {
    (stag & !0xFF) | u32::from(key)
}

/// Posts a Fast Register of `stag` with `access` on `side` and runs it; returns its
/// completion.
fn fast_register(p: &mut Pair, on_b: bool, wr_id: u64, stag: u32, access: Access) -> stack::Wc {
    let side: &mut Side = if on_b { &mut p.b } else { &mut p.a };
    side.eng
        .post_send(SendWr::new(
            wr_id,
            SendOp::FastRegister { stag, access },
            vec![],
        ))
        .expect("post Fast Register");
    p.pump();
    let side: &mut Side = if on_b { &mut p.b } else { &mut p.a };
    let w = side.send_wcs();
    assert_eq!(w.len(), 1, "{w:?}");
    w[0]
}

/// A fast-register STag is invalid until the work request runs; then the peer writes and
/// reads through it, within the mapped range only.
#[test]
fn verbs_fast_register_then_the_peer_writes_and_reads() {
    let mut p = Pair::established(&Opts::default());
    let buf = RegisteredBuf::new(8192);
    let stag = p.b.mem.alloc_fast_reg(p.b.pd, 65536).expect("alloc");
    assert!(!p.b.mem.query(stag).expect("allocated").valid);
    let region = FastRegRegion::new(&buf).range(1024..5120);
    let to = region.to_at(0);
    p.b.mem.map_fast_reg(p.b.pd, stag, region).expect("map");
    let w = fast_register(&mut p, true, 7, stag, remote());
    assert_eq!(
        (w.wr_id, w.opcode, w.status),
        (7, WcOpcode::FastRegister, WcStatus::Success)
    );
    let info = p.b.mem.query(stag).expect("registered");
    assert!(info.valid);
    assert_eq!((info.len, info.base_to), (4096, to));
    // The peer writes all 4096 bytes and reads them back.
    let data = pattern(4096, 5);
    let src = p.a.mr(4096);
    src.buf().write_at(0, &data).expect("fits");
    let sink = p.a.mr(4096);
    p.a.eng
        .post_send(SendWr::write(1, vec![src.sge(0, 4096)], stag, to))
        .expect("write");
    p.a.eng
        .post_send(SendWr::read(2, vec![sink.sge(0, 4096)], stag, to))
        .expect("read");
    p.pump();
    let w = p.a.send_wcs();
    assert!(w.iter().all(|w| w.status == WcStatus::Success), "{w:?}");
    assert_eq!(buf.read_range(1024..5120).expect("range"), data);
    assert_eq!(sink.buf().to_vec(), data);
    // Nothing outside the mapped range was touched.
    assert!(all_are(&buf, 0..1024, 0));
    assert!(all_are(&buf, 5120..8192, 0));
}

/// RFC 5040 §5.3: the peer's Send with Invalidate ends a fast-registered STag; a Fast
/// Register with a new key makes it usable again, and the peer's Write through the STag of
/// the last use is refused with Invalid STag (RFC 5041 §7.2), the memory untouched.
#[test]
fn rfc5040_5_3_send_with_invalidate_ends_it_and_the_stale_stag_is_refused() {
    let mut p = Pair::established(&Opts::default());
    let buf = RegisteredBuf::new(4096);
    let first = p.b.mem.alloc_fast_reg(p.b.pd, 4096).expect("alloc");
    p.b.mem
        .map_fast_reg(p.b.pd, first, FastRegRegion::new(&buf).zero_based())
        .expect("map");
    assert_eq!(
        fast_register(&mut p, true, 1, first, remote()).status,
        WcStatus::Success
    );
    // The peer invalidates it with its Send.
    let rbuf = p.b.mr(16);
    p.b.eng
        .post_recv(RecvWr::new(10, vec![rbuf.sge(0, 16)]))
        .expect("recv");
    let src = p.a.mr(4096);
    src.buf().write_at(0, &[0xAB; 4096]).expect("fits");
    p.a.eng
        .post_send(SendWr::new(
            3,
            SendOp::Send {
                solicited: false,
                invalidate: Some(first),
            },
            vec![src.sge(0, 16)],
        ))
        .expect("send inv");
    p.pump();
    let r = p.b.recv_wcs();
    assert_eq!(r[0].invalidated_stag, Some(first));
    assert!(!p.b.mem.query(first).expect("still allocated").valid);
    // Registered again under a new key: the new STag works.
    let second = with_key(first, (first as u8).wrapping_add(1));
    p.b.mem
        .map_fast_reg(p.b.pd, first, FastRegRegion::new(&buf).zero_based())
        .expect("map again");
    assert_eq!(
        fast_register(&mut p, true, 2, second, remote()).status,
        WcStatus::Success
    );
    assert!(p.b.mem.query(first).is_none(), "the old STag names nothing");
    p.a.eng
        .post_send(SendWr::write(4, vec![src.sge(0, 100)], second, 0))
        .expect("write");
    p.pump();
    assert_eq!(p.a.send_wcs()[0].status, WcStatus::Success);
    assert!(all_are(&buf, 0..100, 0xAB));
    // The STag of the last use is refused; nothing is written.
    src.buf().write_at(0, &[0xCD; 4096]).expect("fits");
    p.a.eng
        .post_send(SendWr::write(5, vec![src.sge(0, 4096)], first, 0))
        .expect("write");
    p.pump();
    let t = p.b.terminate_sent().expect("Terminate");
    assert_eq!(
        t.cause,
        stack::rdmap::TermCause::Ddp(stack::ddp::DdpCode::Tagged(
            stack::ddp::TaggedCode::InvalidStag
        ))
    );
    assert!(all_are(&buf, 0..100, 0xAB));
    assert!(all_are(&buf, 100..4096, 0));
}

/// Local Invalidate ends a fast-registered STag in send-queue order; a Fast Register of a
/// valid STag, one that keeps the key of its last registration, and one with no memory
/// mapped each fail with a local protection error and leave the STag as it was.
#[test]
fn verbs_fast_register_errors_leave_the_stag_unchanged() {
    let p = Pair::established(&Opts::default());
    let mem = &p.b.mem;
    let pd = p.b.pd;
    let buf = RegisteredBuf::new(4096);
    let stag = mem.alloc_fast_reg(pd, 4096).expect("alloc");
    // No memory mapped yet.
    assert_eq!(
        mem.fast_register(pd, stag, remote()),
        Err(MemError::NotMapped { stag })
    );
    // More than the STag was allocated for.
    let big = RegisteredBuf::new(8192);
    assert!(matches!(
        mem.map_fast_reg(pd, stag, FastRegRegion::new(&big)),
        Err(MemError::FastRegTooLong {
            len: 8192,
            max: 4096,
            ..
        })
    ));
    // Another PD.
    let other = mem.alloc_pd();
    assert!(matches!(
        mem.map_fast_reg(other, stag, FastRegRegion::new(&buf)),
        Err(MemError::PdMismatch { .. })
    ));
    mem.map_fast_reg(pd, stag, FastRegRegion::new(&buf))
        .expect("map");
    // Remote write without local write.
    assert!(matches!(
        mem.fast_register(pd, stag, Access::REMOTE_WRITE),
        Err(MemError::RemoteNeedsLocalWrite { .. })
    ));
    mem.fast_register(pd, stag, remote())
        .expect("first registration");
    // Valid: no second registration.
    let next = with_key(stag, (stag as u8).wrapping_add(1));
    assert_eq!(
        mem.fast_register(pd, next, remote()),
        Err(MemError::StillValid { stag: next })
    );
    mem.invalidate(pd, stag).expect("invalidate");
    // The same key again is refused: the last use's STag would come back.
    assert_eq!(
        mem.fast_register(pd, stag, remote()),
        Err(MemError::KeyNotRotated {
            stag,
            key: stag as u8
        })
    );
    assert!(!mem.query(stag).expect("allocated").valid);
    // A regular region is not a fast-register STag.
    let mr = p.b.mr(64);
    assert_eq!(
        mem.map_fast_reg(pd, mr.stag(), FastRegRegion::new(&buf)),
        Err(MemError::NotFastReg { stag: mr.stag() })
    );
}

/// The work request's failure: a Fast Register of a valid STag completes with a local
/// protection error (and, as every failed work request, takes the QP to Error).
#[test]
fn verbs_fast_register_of_a_valid_stag_fails_the_work_request() {
    let mut p = Pair::established(&Opts::default());
    let buf = RegisteredBuf::new(4096);
    let stag = p.b.mem.alloc_fast_reg(p.b.pd, 4096).expect("alloc");
    p.b.mem
        .map_fast_reg(p.b.pd, stag, FastRegRegion::new(&buf))
        .expect("map");
    assert_eq!(
        fast_register(&mut p, true, 1, stag, remote()).status,
        WcStatus::Success
    );
    let next = with_key(stag, (stag as u8).wrapping_add(1));
    let w = fast_register(&mut p, true, 2, next, remote());
    assert_eq!((w.wr_id, w.status), (2, WcStatus::LocalProtection));
    assert!(p.b.mem.query(stag).expect("unchanged").valid);
}

/// Local Invalidate as a work request ends the fast-registered STag in order.
#[test]
fn verbs_local_invalidate_ends_a_fast_registered_stag() {
    let mut p = Pair::established(&Opts::default());
    let buf = RegisteredBuf::new(4096);
    let stag = p.b.mem.alloc_fast_reg(p.b.pd, 4096).expect("alloc");
    p.b.mem
        .map_fast_reg(p.b.pd, stag, FastRegRegion::new(&buf))
        .expect("map");
    p.b.eng
        .post_send(SendWr::new(
            1,
            SendOp::FastRegister {
                stag,
                access: remote(),
            },
            vec![],
        ))
        .expect("post");
    p.b.eng
        .post_send(SendWr::new(2, SendOp::LocalInvalidate { stag }, vec![]))
        .expect("post");
    p.pump();
    let w = p.b.send_wcs();
    assert_eq!(
        w.iter()
            .map(|w| (w.wr_id, w.opcode, w.status))
            .collect::<Vec<_>>(),
        vec![
            (1, WcOpcode::FastRegister, WcStatus::Success),
            (2, WcOpcode::LocalInvalidate, WcStatus::Success)
        ]
    );
    assert!(!p.b.mem.query(stag).expect("allocated").valid);
}
