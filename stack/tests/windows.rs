//! Memory windows (RDMA Verbs: Allocate Memory Window, Bind Memory Window; ibverbs'
//! `ibv_alloc_mw`, `ibv_bind_mw`, `IBV_WR_BIND_MW`): an STag that exposes a range of a
//! registered region with a subset of its rights. Type 1 is bound by a verb, Type 2 by a
//! work request and belongs to that QP's stream. The peer's access outside the window's
//! range or rights, through an unbound or invalidated window, or from another stream gets
//! the Terminate RFC 5040 §7 / RFC 5041 §7 prescribe, and the memory stays untouched.

mod common;

use common::{Opts, Pair, pattern};
use stack::ddp::{DdpCode, TaggedCode};
use stack::rdmap::{ProtectionCode, TermCause};
use stack::{
    Access, Addressing, MemError, MrOptions, MwType, RecvWr, SendOp, SendWr, StreamOwner, WcOpcode,
    WcStatus,
};

fn region_rights() -> Access {
    Access::LOCAL_WRITE
        | Access::REMOTE_READ
        | Access::REMOTE_WRITE
        | Access::REMOTE_ATOMIC
        | Access::MW_BIND
}

fn rw() -> Access {
    Access::REMOTE_READ | Access::REMOTE_WRITE
}

fn ddp(code: TaggedCode) -> TermCause {
    TermCause::Ddp(DdpCode::Tagged(code))
}

/// A pair whose b has an 8 KiB region (all rights, windows allowed) and a Type 1 window
/// bound to 2000 bytes at offset 1000 of it with `access`, zero-based. Returns the pair,
/// the region and the window's STag.
fn bound_type1(access: Access) -> (Pair, stack::MemoryRegion, u32) {
    let p = Pair::established(&Opts::default());
    let mr = p.b.mr_with(8192, MrOptions::new(region_rights()));
    let mw = p.b.mem.alloc_mw(p.b.pd, MwType::Type1).expect("alloc");
    p.b.mem
        .bind_mw(
            p.b.pd,
            None,
            mw,
            mr.stag(),
            mr.to_at(1000),
            2000,
            access,
            Addressing::ZeroBased,
        )
        .expect("bind");
    (p, mr, mw)
}

/// a writes `len` bytes of 0xAB at `to` of `stag` and pumps.
fn write(p: &mut Pair, stag: u32, to: u64, len: u32) {
    let src = p.a.mr(len as usize);
    src.buf()
        .write_at(0, &vec![0xAB; len as usize])
        .expect("fits");
    p.a.eng
        .post_send(SendWr::write(90, vec![src.sge(0, len)], stag, to))
        .expect("write");
    p.pump();
}

/// The region holds `data` at 1000..3000 and zeros everywhere else.
fn only_window_written(mr: &stack::MemoryRegion, data: Option<&[u8]>) -> bool {
    let v = mr.buf().to_vec();
    let inside_ok = match data {
        Some(d) => &v[1000..3000] == d,
        None => v[1000..3000].iter().all(|&b| b == 0),
    };
    inside_ok && v[..1000].iter().all(|&b| b == 0) && v[3000..].iter().all(|&b| b == 0)
}

/// A Type 1 window: the peer writes and reads its 2000 bytes through it (zero-based TOs);
/// the region's bytes outside the window are untouched.
#[test]
fn verbs_type1_window_peer_writes_and_reads_within_its_range() {
    let (mut p, mr, mw) = bound_type1(rw());
    let data = pattern(2000, 3);
    let src = p.a.mr(2000);
    src.buf().write_at(0, &data).expect("fits");
    let sink = p.a.mr(2000);
    p.a.eng
        .post_send(SendWr::write(1, vec![src.sge(0, 2000)], mw, 0))
        .expect("write");
    p.a.eng
        .post_send(SendWr::read(2, vec![sink.sge(0, 2000)], mw, 0))
        .expect("read");
    p.pump();
    let w = p.a.send_wcs();
    assert!(w.iter().all(|w| w.status == WcStatus::Success), "{w:?}");
    assert!(only_window_written(&mr, Some(&data)));
    assert_eq!(sink.buf().to_vec(), data);
}

/// RFC 5040 §7.2 (Remote Protection Error, access rights violation): a Write through a
/// read-only window is refused; nothing is placed.
#[test]
fn rfc5040_7_2_write_through_a_read_only_window_is_refused() {
    let (mut p, mr, mw) = bound_type1(Access::REMOTE_READ);
    write(&mut p, mw, 0, 100);
    let t = p.b.terminate_sent().expect("Terminate");
    assert_eq!(t.cause, TermCause::protection(ProtectionCode::AccessRights));
    assert!(only_window_written(&mr, None));
}

/// RFC 5041 §7.2: a Write that runs past the window's end (though inside the region) is a
/// base or bounds violation; nothing is placed.
#[test]
fn rfc5041_7_2_write_past_the_window_is_refused() {
    let (mut p, mr, mw) = bound_type1(rw());
    write(&mut p, mw, 1990, 20);
    let t = p.b.terminate_sent().expect("Terminate");
    assert_eq!(t.cause, ddp(TaggedCode::BaseOrBounds));
    assert!(only_window_written(&mr, None));
}

/// A Type 1 window unbound by a bind of length 0 names no memory: Invalid STag.
#[test]
fn rfc5041_7_2_unbound_window_is_an_invalid_stag() {
    let (mut p, mr, mw) = bound_type1(rw());
    let next = (mw & !0xFF) | u32::from((mw as u8).wrapping_add(1));
    p.b.mem
        .bind_mw(
            p.b.pd,
            None,
            next,
            mr.stag(),
            mr.to_at(0),
            0,
            rw(),
            Addressing::ZeroBased,
        )
        .expect("unbind");
    write(&mut p, next, 0, 10);
    let t = p.b.terminate_sent().expect("Terminate");
    assert_eq!(t.cause, ddp(TaggedCode::InvalidStag));
    assert!(only_window_written(&mr, None));
}

/// The verbs' bind rules: rights beyond the region's, a region without window binds, a
/// range outside the region, the wrong kind of window for the operation, a window of
/// another PD; a region with a bound window cannot be deregistered; a Type 1 window cannot
/// be invalidated, locally or by the peer; a window is no local SGE. Each error changes
/// nothing.
#[test]
fn verbs_window_bind_errors_change_nothing() {
    let p = Pair::established(&Opts::default());
    let (mem, pd) = (&p.b.mem, p.b.pd);
    let ro =
        p.b.mr_with(4096, MrOptions::new(Access::REMOTE_READ | Access::MW_BIND));
    let no_bind = p.b.mr_with(
        4096,
        MrOptions::new(Access::LOCAL_WRITE | Access::REMOTE_WRITE),
    );
    let mr = p.b.mr_with(4096, MrOptions::new(region_rights()));
    let t1 = mem.alloc_mw(pd, MwType::Type1).expect("alloc");
    let t2 = mem.alloc_mw(pd, MwType::Type2).expect("alloc");
    let bind = |mw, region, to, len, access| {
        mem.bind_mw(
            pd,
            None,
            mw,
            region,
            to,
            len,
            access,
            Addressing::VirtualAddress,
        )
    };
    assert!(matches!(
        bind(t1, ro.stag(), ro.to_at(0), 10, Access::REMOTE_WRITE),
        Err(MemError::WindowRights { .. })
    ));
    assert!(matches!(
        bind(
            t1,
            no_bind.stag(),
            no_bind.to_at(0),
            10,
            Access::REMOTE_WRITE
        ),
        Err(MemError::WindowRights { .. })
    ));
    assert!(matches!(
        bind(t1, mr.stag(), mr.to_at(4000), 100, rw()),
        Err(MemError::WindowBounds { .. })
    ));
    assert!(matches!(
        bind(t2, mr.stag(), mr.to_at(0), 100, rw()),
        Err(MemError::NotAWindow { .. })
    ));
    assert!(matches!(
        bind(mr.stag(), mr.stag(), mr.to_at(0), 100, rw()),
        Err(MemError::NotAWindow { .. })
    ));
    let other = mem.alloc_pd();
    assert!(matches!(
        mem.bind_mw(
            other,
            None,
            t1,
            mr.stag(),
            mr.to_at(0),
            10,
            rw(),
            Addressing::ZeroBased
        ),
        Err(MemError::PdMismatch { .. })
    ));
    assert!(!mem.query(t1).expect("allocated").valid);
    bind(t1, mr.stag(), mr.to_at(0), 100, rw()).expect("bind");
    assert_eq!(
        mem.deregister(mr.stag()),
        Err(MemError::WindowsBound {
            stag: mr.stag(),
            windows: 1
        })
    );
    assert_eq!(
        mem.invalidate(pd, t1),
        Err(MemError::NotInvalidatable { stag: t1 })
    );
    assert_eq!(
        mem.check_remote_invalidate(pd, t1),
        Err(TermCause::protection(ProtectionCode::CannotInvalidate))
    );
    assert!(
        mem.resolve_local(
            pd,
            &stack::Sge {
                stag: t1,
                to: mr.to_at(0),
                len: 10
            },
            Access::NONE
        )
        .is_err(),
        "a window is no local SGE"
    );
    // Unbound (length 0), the region can go.
    let next = (t1 & !0xFF) | u32::from((t1 as u8).wrapping_add(1));
    bind(next, mr.stag(), mr.to_at(0), 0, rw()).expect("unbind");
    mem.deregister(mr.stag()).expect("deregister");
}

/// A Type 2 window: bound by a work request of b's QP, used by the peer, invalidated by the
/// peer's Send with Invalidate (RFC 5040 §5.3); the next Write through it is an Invalid
/// STag and places nothing.
#[test]
fn rfc5040_5_3_type2_window_bound_by_work_request_invalidated_by_the_peer() {
    let mut p = Pair::established(&Opts::default());
    let mr = p.b.mr_with(8192, MrOptions::new(region_rights()));
    let mw = p.b.mem.alloc_mw(p.b.pd, MwType::Type2).expect("alloc");
    p.b.eng
        .post_send(SendWr::new(
            1,
            SendOp::BindWindow {
                mw,
                region: mr.stag(),
                to: mr.to_at(1000),
                len: 2000,
                access: rw(),
                zero_based: true,
            },
            vec![],
        ))
        .expect("post bind");
    p.pump();
    let w = p.b.send_wcs();
    assert_eq!(
        (w[0].opcode, w[0].status),
        (WcOpcode::BindWindow, WcStatus::Success)
    );
    // Another QP's stream may not use it (RFC 5040 §7.2: STag not associated).
    let hdr = stack::ddp::TaggedRepr {
        last: true,
        rsvd_ulp: 0x40,
        stag: mw,
        to: 0,
    };
    let foreign = StreamOwner {
        pd: p.b.pd,
        qp: Some(999),
    };
    assert!(matches!(
        p.b.mem.check_sink(foreign, &hdr, 10, Access::REMOTE_WRITE),
        Err(stack::ddp::DdpError::StagNotAssociated { .. })
    ));
    // Its own stream may.
    let own = StreamOwner {
        pd: p.b.pd,
        qp: Some(2),
    };
    assert!(
        p.b.mem
            .check_sink(own, &hdr, 10, Access::REMOTE_WRITE)
            .is_ok()
    );
    let data = pattern(2000, 9);
    let src = p.a.mr(2000);
    src.buf().write_at(0, &data).expect("fits");
    p.a.eng
        .post_send(SendWr::write(2, vec![src.sge(0, 2000)], mw, 0))
        .expect("write");
    let rbuf = p.b.mr(16);
    p.b.eng
        .post_recv(RecvWr::new(10, vec![rbuf.sge(0, 16)]))
        .expect("recv");
    p.a.eng
        .post_send(SendWr::new(
            3,
            SendOp::Send {
                solicited: false,
                invalidate: Some(mw),
            },
            vec![src.sge(0, 16)],
        ))
        .expect("send inv");
    p.pump();
    assert!(only_window_written(&mr, Some(&data)));
    assert_eq!(p.b.recv_wcs()[0].invalidated_stag, Some(mw));
    assert!(!p.b.mem.query(mw).expect("allocated").valid);
    // The region is free of windows again.
    assert_eq!(p.b.mem.query(mr.stag()).map(|i| i.valid), Some(true));
    src.buf().write_at(0, &[0xEE; 2000]).expect("fits");
    p.a.eng
        .post_send(SendWr::write(4, vec![src.sge(0, 2000)], mw, 0))
        .expect("write");
    p.pump();
    let t = p.b.terminate_sent().expect("Terminate");
    assert_eq!(t.cause, ddp(TaggedCode::InvalidStag));
    assert!(only_window_written(&mr, Some(&data)));
    p.b.mem.deregister(mr.stag()).expect("no window bound");
}

/// A bind of a Type 2 window that is in use fails the work request with a local
/// protection error and leaves the window as it was.
#[test]
fn verbs_bind_of_a_type2_window_in_use_fails() {
    let mut p = Pair::established(&Opts::default());
    let mr = p.b.mr_with(4096, MrOptions::new(region_rights()));
    let mw = p.b.mem.alloc_mw(p.b.pd, MwType::Type2).expect("alloc");
    let next = (mw & !0xFF) | u32::from((mw as u8).wrapping_add(1));
    for (id, stag) in [(1, mw), (2, next)] {
        p.b.eng
            .post_send(SendWr::new(
                id,
                SendOp::BindWindow {
                    mw: stag,
                    region: mr.stag(),
                    to: mr.to_at(0),
                    len: 100,
                    access: rw(),
                    zero_based: false,
                },
                vec![],
            ))
            .expect("post bind");
    }
    p.pump();
    let w = p.b.send_wcs();
    assert_eq!(w[0].status, WcStatus::Success);
    assert_eq!((w[1].wr_id, w[1].status), (2, WcStatus::LocalProtection));
    let info = p.b.mem.query(mw).expect("unchanged");
    assert!(info.valid && info.len == 100 && info.base_to == mr.to_at(0));
}

/// a sends a Send with Invalidate of `stag` into a posted receive of b and pumps.
fn send_invalidate(p: &mut Pair, stag: u32) {
    let rbuf = p.b.mr(16);
    p.b.eng
        .post_recv(RecvWr::new(20, vec![rbuf.sge(0, 16)]))
        .expect("recv");
    let src = p.a.mr(16);
    p.a.eng
        .post_send(SendWr::new(
            21,
            SendOp::Send {
                solicited: false,
                invalidate: Some(stag),
            },
            vec![src.sge(0, 16)],
        ))
        .expect("send inv");
    p.pump();
}

/// A peer's Send with Invalidate of a Type 1 window, or of a region registered as not
/// invalidatable, is refused with the RDMAP Remote Protection Terminate "STag cannot be
/// Invalidated" (RFC 5040 §7.2); no receive completes with an invalidated STag, the STag
/// stays valid and its memory untouched. (The lab scenario siw-send-invalidate shows the
/// same against Linux siw.)
#[test]
fn rfc5040_7_2_send_with_invalidate_of_a_type1_window_or_a_fixed_region_is_refused() {
    let want = TermCause::protection(ProtectionCode::CannotInvalidate);
    // The Type 1 window.
    let (mut p, mr, mw) = bound_type1(rw());
    send_invalidate(&mut p, mw);
    let t = p.b.terminate_sent().expect("Terminate");
    assert_eq!(t.cause, want);
    assert!(
        p.b.recv_wcs()
            .iter()
            .all(|w| w.invalidated_stag.is_none() && w.status != WcStatus::Success)
    );
    assert!(p.b.mem.query(mw).expect("allocated").valid);
    assert!(only_window_written(&mr, None));
    // A region registered as not invalidatable.
    let mut p = Pair::established(&Opts::default());
    let fixed = p.b.mr_with(
        4096,
        MrOptions::new(Access::LOCAL_WRITE | rw()).not_invalidatable(),
    );
    send_invalidate(&mut p, fixed.stag());
    let t = p.b.terminate_sent().expect("Terminate");
    assert_eq!(t.cause, want);
    assert!(
        p.b.recv_wcs()
            .iter()
            .all(|w| w.invalidated_stag.is_none() && w.status != WcStatus::Success)
    );
    assert_eq!(p.b.mem.query(fixed.stag()).map(|i| i.valid), Some(true));
    assert!(fixed.buf().to_vec().iter().all(|&b| b == 0));
}
