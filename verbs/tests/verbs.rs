//! Every verb over loopback, and the resource rules the verbs impose.

use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use verbs::{
    Access, Addressing, AdoptRole, Event, MpaConfig, ProgressMode, QpCaps, QpState, RecvWr,
    RegisteredBuf, Rnic, RnicConfig, SendOp, SendWr, VerbsError, WcOpcode, WcStatus, empty_wc,
    rnic_open,
};

const T: Duration = Duration::from_secs(5);

fn all() -> Access {
    Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC
}

struct End {
    r: Rnic,
    pd: verbs::Pd,
    cq: verbs::Cq,
    qp: verbs::Qp,
}

fn end(cfg: RnicConfig) -> End {
    let r = rnic_open(cfg).unwrap();
    let pd = r.pd_allocate();
    let cq = r.cq_create(256).unwrap();
    let qp = r.qp_create(pd, &cq, &cq, QpCaps::default()).unwrap();
    End { r, pd, cq, qp }
}

fn pair(cfg: RnicConfig) -> (End, End) {
    pair_on(cfg, "127.0.0.1:0")
}

/// Two connected ends over the transport address `at` (see `verbs::TransportAddr`).
fn pair_on(cfg: RnicConfig, at: &str) -> (End, End) {
    let a = end(cfg.clone());
    let b = end(cfg);
    let at: verbs::TransportAddr = at.parse().unwrap();
    let l = b.r.listen(at).unwrap();
    std::thread::scope(|s| {
        let h = s.spawn(|| {
            b.r.qp_passive_connect(&l, &b.qp, MpaConfig::default(), T)
                .unwrap()
        });
        a.r.qp_active_connect(&a.qp, l.transport.clone(), MpaConfig::default(), T)
            .unwrap();
        let (_, req) = h.join().unwrap();
        assert_eq!(req.listener, l.id);
    });
    (a, b)
}

fn one(e: &End) -> verbs::Wc {
    let mut w = [empty_wc()];
    let n = e.r.cq_poll_block(&e.cq, &mut w, T).unwrap();
    assert_eq!(n, 1);
    w[0]
}

/// qp_post_sq / qp_post_rq with Send, RDMA Write, RDMA Read (RFC 5040 §5.1–5.3) and both
/// RFC 7306 atomics, with memory from nsmr_register, register_sge and create_sgl.
#[test]
fn every_operation_through_the_verbs() {
    every_operation(pair(RnicConfig::default()));
}

/// The same verbs over DDP over softrnic's SCTP (RFC 5043, UDP encapsulation): only the
/// address given to listen / qp_active_connect differs.
#[test]
fn every_operation_through_the_verbs_over_sctp() {
    every_operation(pair_on(
        RnicConfig::default(),
        "sctp+udp://127.0.0.1:7174?udp-port=0",
    ));
}

fn every_operation((a, b): (End, End)) {
    let src = a.r.nsmr_register(a.pd, 8192, all()).unwrap();
    src.buf().write_at(0, &[7u8; 8192]).unwrap();
    let buf = RegisteredBuf::new(8192);
    let (dst, dst_sge) = b.r.register_sge(b.pd, &buf, 4096, 1024, all()).unwrap();
    assert_eq!(dst_sge.len, 1024);
    let sgl =
        b.r.create_sgl(b.pd, &[dst_sge], Access::LOCAL_WRITE)
            .unwrap();
    assert_eq!(sgl.len(), 1024);

    b.r.qp_post_rq(&b.qp, RecvWr::new(1, sgl.to_vec())).unwrap();
    a.r.qp_post_sq(&a.qp, SendWr::send(1, vec![src.sge(0, 1000)]))
        .unwrap();
    let wc = one(&b);
    assert_eq!(
        (wc.opcode, wc.byte_len, wc.status),
        (WcOpcode::Recv, 1000, WcStatus::Success)
    );
    assert_eq!(buf.read_range(4096..5096).unwrap(), vec![7u8; 1000]);
    assert_eq!(one(&a).status, WcStatus::Success);

    a.r.qp_post_sq(
        &a.qp,
        SendWr::write(2, vec![src.sge(0, 1024)], dst.stag(), dst.to_at(0)),
    )
    .unwrap();
    assert_eq!(one(&a).opcode, WcOpcode::RdmaWrite);
    let back = a.r.nsmr_register(a.pd, 1024, all()).unwrap();
    a.r.qp_post_sq(
        &a.qp,
        SendWr::read(3, vec![back.sge(0, 1024)], dst.stag(), dst.to_at(0)),
    )
    .unwrap();
    let wc = one(&a);
    assert_eq!(
        (wc.opcode, wc.status),
        (WcOpcode::RdmaRead, WcStatus::Success)
    );
    assert_eq!(back.buf().to_vec(), vec![7u8; 1024]);

    let word = b.r.nsmr_register(b.pd, 8, all()).unwrap();
    a.r.qp_post_sq(
        &a.qp,
        SendWr::new(
            4,
            SendOp::FetchAdd {
                remote_stag: word.stag(),
                remote_to: word.to_at(0),
                add: 3,
                add_mask: 0,
            },
            vec![back.sge(0, 8)],
        ),
    )
    .unwrap();
    assert_eq!(one(&a).opcode, WcOpcode::FetchAdd);
    a.r.qp_post_sq(
        &a.qp,
        SendWr::new(
            5,
            SendOp::CmpSwap {
                remote_stag: word.stag(),
                remote_to: word.to_at(0),
                compare: 3,
                compare_mask: u64::MAX,
                swap: 42,
                swap_mask: u64::MAX,
            },
            vec![back.sge(0, 8)],
        ),
    )
    .unwrap();
    assert_eq!(one(&a).opcode, WcOpcode::CmpSwap);
    let mut v = [0u8; 8];
    word.buf().read_at(0, &mut v).unwrap();
    assert_eq!(u64::from_ne_bytes(v), 42);

    a.r.qp_disconnect(&a.qp).unwrap();
    // The peer sees the connection end (after its Established event).
    let mut events = Vec::new();
    while let Some(e) = b.r.wait_event(T) {
        let done = matches!(e, Event::Disconnected { .. });
        events.push(e);
        if done {
            break;
        }
    }
    assert!(
        matches!(events.last(), Some(Event::Disconnected { qp, .. }) if *qp == b.qp.id()),
        "{events:?}"
    );
}

/// cq_poll_block batches into the slice; cq_poll returns 0 when empty.
#[test]
fn cq_poll_batches() {
    let (a, b) = pair(RnicConfig::default());
    let src = a.r.nsmr_register(a.pd, 64, all()).unwrap();
    let dst = b.r.nsmr_register(b.pd, 64, all()).unwrap();
    for i in 0..5 {
        a.r.qp_post_sq(
            &a.qp,
            SendWr::write(i, vec![src.sge(0, 8)], dst.stag(), dst.to_at(0)),
        )
        .unwrap();
    }
    let mut wcs = [empty_wc(); 8];
    let mut got = 0;
    while got < 5 {
        got += a.r.cq_poll_block(&a.cq, &mut wcs[got..], T).unwrap();
    }
    let ids: Vec<u64> = wcs[..5].iter().map(|w| w.wr_id).collect();
    assert_eq!(ids, vec![0, 1, 2, 3, 4]);
    assert_eq!(a.r.cq_poll(&a.cq, &mut wcs), 0);
    assert!(matches!(
        a.r.cq_poll_block(&a.cq, &mut wcs, Duration::from_millis(20)),
        Err(VerbsError::Timeout(_))
    ));
}

/// rnic_advance: manual-progress mode carries a whole exchange (connect included).
#[test]
fn manual_progress_with_rnic_advance() {
    let cfg = RnicConfig {
        progress: ProgressMode::Manual,
        ..RnicConfig::default()
    };
    let (a, b) = pair(cfg);
    let src = a.r.nsmr_register(a.pd, 64, all()).unwrap();
    src.buf().write_at(0, b"manual").unwrap();
    let dst = b.r.nsmr_register(b.pd, 64, all()).unwrap();
    b.r.qp_post_rq(&b.qp, RecvWr::new(9, vec![dst.sge(0, 64)]))
        .unwrap();
    a.r.qp_post_sq(&a.qp, SendWr::send(9, vec![src.sge(0, 6)]))
        .unwrap();
    // b's blocking poll drives b; a's post already transmitted.
    let wc = one(&b);
    assert_eq!((wc.wr_id, wc.byte_len), (9, 6));
    assert_eq!(dst.buf().read_range(0..6).unwrap(), b"manual");
    assert!(a.r.advance(Duration::ZERO).is_ok());
    let threaded = rnic_open(RnicConfig::default()).unwrap();
    assert!(matches!(
        threaded.advance(Duration::ZERO),
        Err(VerbsError::Rnic(verbs::RnicError::NotManual))
    ));
}

/// qp_register_fd: adopt connected sockets on both sides.
#[test]
fn register_fd_adopts_sockets() {
    let a = end(RnicConfig::default());
    let b = end(RnicConfig::default());
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let sa = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (sb, _) = l.accept().unwrap();
    b.r.qp_register_fd(&b.qp, sb, AdoptRole::Responder(MpaConfig::default()))
        .unwrap();
    a.r.qp_register_fd(&a.qp, sa, AdoptRole::Initiator(MpaConfig::default()))
        .unwrap();
    let s = a.r.wait_established(&a.qp, T).unwrap();
    assert_eq!(s.mpa().map(|m| m.revision), Some(2));
    b.r.wait_established(&b.qp, T).unwrap();
}

/// pd_deallocate and cq_destroy refuse while resources use them; deregister_mem and
/// deallocate_stag follow the verbs rules; handles of another RNIC are refused.
#[test]
fn resource_rules() {
    let e = end(RnicConfig::default());
    let mr = e.r.nsmr_register(e.pd, 64, all()).unwrap();
    assert!(matches!(
        e.r.pd_deallocate(e.pd),
        Err(VerbsError::PdInUse {
            regions: 1,
            qps: 1,
            ..
        })
    ));
    assert!(matches!(
        e.r.cq_destroy(&e.cq),
        Err(VerbsError::CqInUse { qps: 1, .. })
    ));
    // A valid STag cannot be deallocated; invalidated, it can.
    assert!(matches!(
        e.r.deallocate_stag(mr.stag()),
        Err(VerbsError::StagValid(_))
    ));
    e.r.invalidate_stag(e.pd, mr.stag()).unwrap();
    e.r.deallocate_stag(mr.stag()).unwrap();
    assert!(matches!(
        e.r.deallocate_stag(mr.stag()),
        Err(VerbsError::UnknownStag(_))
    ));
    let mr2 =
        e.r.nsmr_register_buf(
            e.pd,
            &RegisteredBuf::new(128),
            64..128,
            Access::LOCAL_WRITE,
            Addressing::ZeroBased,
        )
        .unwrap();
    assert_eq!(mr2.base_to(), 0);
    e.r.deregister_mem(&mr2).unwrap();
    assert!(e.r.as_stack().mem().query(mr2.stag()).is_none());
    // An SGE beyond its region is refused by create_sgl.
    let mr3 = e.r.nsmr_register(e.pd, 16, all()).unwrap();
    assert!(matches!(
        e.r.create_sgl(e.pd, &[mr3.sge(8, 16)], Access::NONE),
        Err(VerbsError::Sgl(_))
    ));
    e.r.deregister_mem(&mr3).unwrap();
    e.r.qp_destroy(&e.qp).unwrap();
    e.r.cq_destroy(&e.cq).unwrap();
    e.r.pd_deallocate(e.pd).unwrap();
    assert!(matches!(
        e.r.pd_deallocate(e.pd),
        Err(VerbsError::UnknownPd(_))
    ));
    let other = rnic_open(RnicConfig::default()).unwrap();
    let cq = other.cq_create(4).unwrap();
    let pd = e.r.pd_allocate();
    assert!(matches!(
        e.r.qp_create(pd, &cq, &cq, QpCaps::default()),
        Err(VerbsError::UnknownCq(_))
    ));
    assert!(matches!(
        other.nsmr_register(pd, 8, all()),
        Err(VerbsError::UnknownPd(_))
    ));
}

/// smr_register and nsmr_reregister keep the protection domains' books: a shared region
/// counts in its own PD, a re-registration to another PD moves the count, and a PD is free
/// once its last registration has left.
#[test]
fn shared_and_reregistered_regions_follow_their_pd() {
    let e = end(RnicConfig::default());
    let other = e.r.pd_allocate();
    let mr = e.r.nsmr_register(e.pd, 64, all()).unwrap();
    let shared =
        e.r.smr_register(&mr, other, Access::REMOTE_READ, Addressing::ZeroBased)
            .unwrap();
    assert_eq!(shared.pd(), other);
    assert_eq!(shared.base_to(), 0);
    assert!(matches!(
        e.r.pd_deallocate(other),
        Err(VerbsError::PdInUse { regions: 1, .. })
    ));
    e.r.deregister_mem(&shared).unwrap();
    let moved =
        e.r.nsmr_reregister(
            &mr,
            verbs::Rereg {
                pd: Some(other),
                ..verbs::Rereg::default()
            },
        )
        .unwrap();
    assert_eq!(moved.pd(), other);
    assert!(matches!(
        e.r.pd_deallocate(other),
        Err(VerbsError::PdInUse { regions: 1, .. })
    ));
    e.r.deregister_mem(&moved).unwrap();
    e.r.pd_deallocate(other).unwrap();
    assert!(matches!(
        e.r.nsmr_reregister(&moved, verbs::Rereg::default()),
        Err(VerbsError::UnknownStag(_))
    ));
    // `other` is gone now.
    let mr2 = e.r.nsmr_register(e.pd, 64, all()).unwrap();
    assert!(matches!(
        e.r.smr_register(&mr2, other, all(), Addressing::ZeroBased),
        Err(VerbsError::UnknownPd(_))
    ));
}

/// qp_destroy flushes posted receives (verbs: destroy moves the QP to Error).
#[test]
fn qp_destroy_flushes() {
    let (a, _b) = pair(RnicConfig::default());
    let m = a.r.nsmr_register(a.pd, 64, all()).unwrap();
    a.r.qp_post_rq(&a.qp, RecvWr::new(77, vec![m.sge(0, 64)]))
        .unwrap();
    a.r.qp_destroy(&a.qp).unwrap();
    let wc = one(&a);
    assert_eq!((wc.wr_id, wc.status), (77, WcStatus::Flushed));
    a.r.close();
}

/// Fast registration through the verbs over loopback: `allocate_stag`, `fast_reg_map`, a
/// Fast Register work request; the peer writes through the STag; Local Invalidate ends it;
/// a second Fast Register under a rotated key; `deallocate_stag` once it is invalid, and the
/// PD is free again.
#[test]
fn fast_registration_through_the_verbs() {
    let (a, b) = pair(RnicConfig::default());
    // The MPA responder sends (and runs work requests) once the initiator's first FPDU
    // arrived (RFC 5044 §7.1.2): a Send from a first.
    let hello = b.r.nsmr_register(b.pd, 8, all()).unwrap();
    b.r.qp_post_rq(&b.qp, RecvWr::new(9, vec![hello.sge(0, 8)]))
        .unwrap();
    let first = a.r.nsmr_register(a.pd, 8, all()).unwrap();
    a.r.qp_post_sq(&a.qp, SendWr::send(9, vec![first.sge(0, 8)]))
        .unwrap();
    assert_eq!(one(&a).wr_id, 9);
    assert_eq!(one(&b).wr_id, 9);
    let buf = RegisteredBuf::new(4096);
    let stag = b.r.allocate_stag(b.pd, 4096).unwrap();
    let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
    let src = a.r.nsmr_register(a.pd, 4096, all()).unwrap();
    let mut current = stag;
    for round in 0..2u8 {
        if round == 1 {
            current = (stag & !0xFF) | u32::from((stag as u8).wrapping_add(1));
        }
        b.r.fast_reg_map(b.pd, stag, verbs::FastRegRegion::new(&buf).zero_based())
            .unwrap();
        b.r.qp_post_sq(
            &b.qp,
            SendWr::new(
                1,
                SendOp::FastRegister {
                    stag: current,
                    access,
                },
                vec![],
            ),
        )
        .unwrap();
        let w = one(&b);
        assert_eq!(
            (w.opcode, w.status),
            (WcOpcode::FastRegister, WcStatus::Success)
        );
        src.buf().write_at(0, &[round + 1; 4096]).unwrap();
        // The Write, then a Send behind it that completes at b once both arrived.
        let rbuf = b.r.nsmr_register(b.pd, 8, all()).unwrap();
        b.r.qp_post_rq(&b.qp, RecvWr::new(2, vec![rbuf.sge(0, 8)]))
            .unwrap();
        a.r.qp_post_sq(&a.qp, SendWr::write(3, vec![src.sge(0, 4096)], current, 0))
            .unwrap();
        a.r.qp_post_sq(&a.qp, SendWr::send(4, vec![src.sge(0, 8)]))
            .unwrap();
        assert_eq!(one(&a).status, WcStatus::Success);
        assert_eq!(one(&a).status, WcStatus::Success);
        assert_eq!(one(&b).wr_id, 2);
        assert!(buf.to_vec().iter().all(|&x| x == round + 1));
        b.r.qp_post_sq(
            &b.qp,
            SendWr::new(5, SendOp::LocalInvalidate { stag: current }, vec![]),
        )
        .unwrap();
        assert_eq!(one(&b).opcode, WcOpcode::LocalInvalidate);
    }
    b.r.deallocate_stag(current).unwrap();
    assert!(b.r.as_stack().mem().query(current).is_none());
}

/// Memory windows through the verbs: a Type 1 window bound with `bind_window` lets the peer
/// read only its range; the region cannot be deregistered while it is bound; unbound, the
/// window is deallocated and the region can go.
#[test]
fn memory_windows_through_the_verbs() {
    let (a, b) = pair(RnicConfig::default());
    let region =
        b.r.nsmr_register(b.pd, 8192, all() | Access::MW_BIND)
            .unwrap();
    region.buf().write_at(4096, &[7; 4096]).unwrap();
    let mw = b.r.allocate_window(b.pd, verbs::MwType::Type1).unwrap();
    b.r.bind_window(
        b.pd,
        mw,
        &region,
        region.to_at(4096),
        4096,
        Access::REMOTE_READ,
        Addressing::ZeroBased,
    )
    .unwrap();
    let sink = a.r.nsmr_register(a.pd, 4096, all()).unwrap();
    a.r.qp_post_sq(&a.qp, SendWr::read(1, vec![sink.sge(0, 4096)], mw, 0))
        .unwrap();
    assert_eq!(one(&a).status, WcStatus::Success);
    assert!(sink.buf().to_vec().iter().all(|&x| x == 7));
    assert!(matches!(
        b.r.deregister_mem(&region),
        Err(VerbsError::Mem(verbs::MemError::WindowsBound { .. }))
    ));
    let next = (mw & !0xFF) | u32::from((mw as u8).wrapping_add(1));
    b.r.bind_window(
        b.pd,
        next,
        &region,
        region.to_at(0),
        0,
        Access::REMOTE_READ,
        Addressing::ZeroBased,
    )
    .unwrap();
    b.r.deallocate_window(next).unwrap();
    b.r.deregister_mem(&region).unwrap();
}

/// Completion events through the verbs: a CQ attached to a completion channel and armed
/// signals the channel's eventfd for its next completion; the consumer sleeps on it
/// instead of polling, then polls the CQ.
#[test]
fn completion_events_through_the_verbs() {
    let r = rnic_open(RnicConfig::default()).unwrap();
    let ch = r.channel_create().unwrap();
    let pd = r.pd_allocate();
    let cq = r.cq_create_with_channel(64, &ch).unwrap();
    let scq = r.cq_create(64).unwrap();
    let qp = r.qp_create(pd, &scq, &cq, QpCaps::default()).unwrap();
    let b = end(RnicConfig::default());
    let l = r
        .listen("127.0.0.1:0".parse::<verbs::TransportAddr>().unwrap())
        .unwrap();
    let mr = r.nsmr_register(pd, 64, all()).unwrap();
    r.qp_post_rq(&qp, RecvWr::new(7, vec![mr.sge(0, 64)]))
        .unwrap();
    std::thread::scope(|s| {
        let h = s.spawn(|| {
            r.qp_passive_connect(&l, &qp, MpaConfig::default(), T)
                .unwrap()
        });
        b.r.qp_active_connect(&b.qp, l.transport.clone(), MpaConfig::default(), T)
            .unwrap();
        h.join().unwrap();
    });
    r.cq_arm(&cq, verbs::Arm::NextCompletion);
    assert!(!ch.wait(Duration::from_millis(20)), "nothing completed yet");
    let src = b.r.nsmr_register(b.pd, 64, all()).unwrap();
    b.r.qp_post_sq(&b.qp, SendWr::send(1, vec![src.sge(0, 64)]))
        .unwrap();
    assert!(ch.wait(T), "the armed CQ signalled its channel");
    assert_eq!(ch.get_events(), vec![cq.id()]);
    let mut w = [empty_wc()];
    assert_eq!(r.cq_poll(&cq, &mut w), 1);
    assert_eq!((w[0].wr_id, w[0].opcode), (7, WcOpcode::Recv));
}

/// `query_rnic` reports what the RNIC offers; `qp_query` a QP's attributes and state.
#[test]
fn query_rnic_and_qp() {
    let (a, _b) = pair(RnicConfig::default());
    let attr = a.r.query_rnic();
    assert_eq!(attr.vendor, "softrnic");
    assert_eq!((attr.max_ird, attr.max_ord), (0x3FFF, 0x3FFF));
    assert_eq!(attr.max_cq_depth, verbs::MAX_CQ_DEPTH);
    assert!(attr.fast_registration && attr.memory_windows.len() == 2);
    let q = a.r.qp_query(&a.qp);
    assert_eq!((q.id, q.state, q.pd), (a.qp.id(), QpState::Rts, a.pd));
    assert_eq!(q.max_sge, QpCaps::default().max_sge);
    assert!(q.mulpdu > 0 && q.session.is_some());
    assert_eq!((q.sq_outstanding, q.rq_posted), (0, 0));
}

/// `qp_modify` to Terminate: a Terminate (RDMAP Local Catastrophic Error, RFC 5040 §7.1)
/// reaches the peer, the QP's posted receive is flushed, and it ends in Error.
#[test]
fn qp_modify_to_terminate_sends_a_terminate_and_flushes() {
    let (a, b) = pair(RnicConfig::default());
    // Let the initiator's first FPDU go first (the responder may send only then).
    let mr = a.r.nsmr_register(a.pd, 64, all()).unwrap();
    a.r.qp_post_rq(&a.qp, RecvWr::new(5, vec![mr.sge(0, 64)]))
        .unwrap();
    a.r.qp_modify(&a.qp, QpState::Terminate).unwrap();
    let w = one(&a);
    assert_eq!((w.wr_id, w.status), (5, WcStatus::Flushed));
    let got = wait_for(&b.r, |e| match e {
        Event::TerminateReceived { terminate, .. } => Some(terminate.cause),
        _ => None,
    });
    assert_eq!(
        got,
        stack::rdmap::TermCause::Rdmap(stack::rdmap::RdmapCode::LOCAL_CATASTROPHIC)
    );
    let t0 = std::time::Instant::now();
    while a.qp.state() != QpState::Error && t0.elapsed() < T {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(a.qp.state(), QpState::Error);
    // From Error, nothing but Error.
    assert!(matches!(
        a.r.qp_modify(&a.qp, QpState::Closing),
        Err(VerbsError::Rnic(verbs::RnicError::Modify(_)))
    ));
    a.r.qp_modify(&a.qp, QpState::Error).unwrap();
}

/// `qp_modify` to Error: abortive; the posted receive is flushed and the peer sees its
/// connection end. A QP that is not connected cannot be closed or terminated.
#[test]
fn qp_modify_to_error_is_abortive() {
    let (a, b) = pair(RnicConfig::default());
    let mr = b.r.nsmr_register(b.pd, 64, all()).unwrap();
    b.r.qp_post_rq(&b.qp, RecvWr::new(6, vec![mr.sge(0, 64)]))
        .unwrap();
    b.r.qp_modify(&b.qp, QpState::Error).unwrap();
    let w = one(&b);
    assert_eq!((w.wr_id, w.status), (6, WcStatus::Flushed));
    wait_for(&a.r, |e| match e {
        Event::Disconnected { .. } | Event::QpError { .. } => Some(()),
        _ => None,
    });
    let idle = end(RnicConfig::default());
    for to in [QpState::Closing, QpState::Terminate, QpState::Rts] {
        assert!(matches!(
            idle.r.qp_modify(&idle.qp, to),
            Err(VerbsError::Rnic(verbs::RnicError::Modify(_)))
        ));
    }
}

/// Waits for the first event `pick` takes.
fn wait_for<T>(r: &Rnic, mut pick: impl FnMut(&Event) -> Option<T>) -> T {
    let t0 = std::time::Instant::now();
    while t0.elapsed() < T {
        if let Some(e) = r.wait_event(Duration::from_millis(50))
            && let Some(v) = pick(&e)
        {
            return v;
        }
    }
    panic!("no such event within {T:?}");
}

/// A shared receive queue over loopback: three QPs of one RNIC take their receives from
/// one SRQ; Sends from three peers all land, each completion on its own QP; the armed limit
/// is reported once when the SRQ runs low; a QP of the SRQ refuses receives of its own and
/// an SRQ of another PD is refused. When the SRQ is empty, the next Send gets the DDP
/// Terminate for a missing buffer (RFC 5041 §7.2).
#[test]
fn shared_receive_queue_feeds_three_qps() {
    let r = rnic_open(RnicConfig::default()).unwrap();
    let pd = r.pd_allocate();
    let cq = r.cq_create(64).unwrap();
    let srq = r.srq_create(pd, 16, 1).unwrap();
    let mr = r.nsmr_register(pd, 6 * 64, all()).unwrap();
    for i in 0..4u64 {
        r.srq_post_recv(&srq, RecvWr::new(100 + i, vec![mr.sge(i * 64, 64)]))
            .unwrap();
    }
    r.srq_arm_limit(&srq, 2);
    let other = r.pd_allocate();
    assert!(
        r.qp_create_with_srq(other, &cq, &cq, QpCaps::default(), &srq)
            .is_err()
    );
    let l = r
        .listen("127.0.0.1:0".parse::<verbs::TransportAddr>().unwrap())
        .unwrap();
    let mut qps = Vec::new();
    let mut peers = Vec::new();
    for _ in 0..3 {
        let qp = r
            .qp_create_with_srq(pd, &cq, &cq, QpCaps::default(), &srq)
            .unwrap();
        assert!(r.qp_post_rq(&qp, RecvWr::new(1, vec![])).is_err());
        let p = end(RnicConfig::default());
        std::thread::scope(|s| {
            let h = s.spawn(|| {
                r.qp_passive_connect(&l, &qp, MpaConfig::default(), T)
                    .unwrap()
            });
            p.r.qp_active_connect(&p.qp, l.transport.clone(), MpaConfig::default(), T)
                .unwrap();
            h.join().unwrap();
        });
        qps.push(qp);
        peers.push(p);
    }
    for (i, p) in peers.iter().enumerate() {
        let src = p.r.nsmr_register(p.pd, 64, all()).unwrap();
        src.buf().write_at(0, &[i as u8 + 1; 64]).unwrap();
        p.r.qp_post_sq(&p.qp, SendWr::send(1, vec![src.sge(0, 64)]))
            .unwrap();
        assert_eq!(one(p).status, WcStatus::Success);
    }
    let mut got = Vec::new();
    for _ in 0..3 {
        let mut w = [empty_wc()];
        assert_eq!(r.cq_poll_block(&cq, &mut w, T).unwrap(), 1);
        assert_eq!(
            (w[0].opcode, w[0].status),
            (WcOpcode::Recv, WcStatus::Success)
        );
        got.push((w[0].qp, w[0].wr_id));
    }
    // Receives were taken oldest first, one per QP that needed one.
    let mut ids: Vec<u64> = got.iter().map(|g| g.1).collect();
    ids.sort_unstable();
    assert_eq!(ids, vec![100, 101, 102]);
    let mut from: Vec<_> = got.iter().map(|g| g.0).collect();
    from.sort_unstable();
    let mut want: Vec<_> = qps.iter().map(|q| q.id()).collect();
    want.sort_unstable();
    assert_eq!(from, want);
    for (qp, wr_id) in &got {
        let i = (wr_id - 100) as usize;
        let slot = mr.buf().read_range(i * 64..i * 64 + 64).unwrap();
        let sender = qps.iter().position(|q| q.id() == *qp).unwrap();
        assert!(slot.iter().all(|&b| b == sender as u8 + 1));
    }
    // Fewer than 2 left after the second take: reported once.
    let mut limits = 0;
    while let Some(e) = r.wait_event(Duration::from_millis(100)) {
        if matches!(e, Event::SrqLimitReached { srq: s, .. } if s == srq.id()) {
            limits += 1;
        }
    }
    assert_eq!(limits, 1);
    assert_eq!(srq.len(), 1);
    // Peer 0 takes the last receive, then finds the SRQ empty.
    let p = &peers[0];
    let src = p.r.nsmr_register(p.pd, 64, all()).unwrap();
    for id in [2, 3] {
        p.r.qp_post_sq(&p.qp, SendWr::send(id, vec![src.sge(0, 64)]))
            .unwrap();
    }
    let mut w = [empty_wc()];
    assert_eq!(r.cq_poll_block(&cq, &mut w, T).unwrap(), 1);
    assert_eq!((w[0].wr_id, w[0].status), (103, WcStatus::Success));
    let t0 = std::time::Instant::now();
    let mut cause = None;
    while cause.is_none() && t0.elapsed() < T {
        if let Some(Event::TerminateSent { terminate, .. }) =
            r.wait_event(Duration::from_millis(50))
        {
            cause = Some(terminate.cause);
        }
    }
    assert_eq!(
        cause,
        Some(stack::rdmap::TermCause::Ddp(stack::ddp::DdpCode::Untagged(
            stack::ddp::UntaggedCode::NoBuffer
        )))
    );
}

/// Polls `e`'s CQ (empty) until its progress thread sleeps leaving the sockets to this
/// polling thread (`RnicConfig::inline_progress`): a listener's commands wake it while the
/// polls' lease holds, and nothing rings it after. The two commands may wake it twice (the
/// second after it counted its first leased sleep), so the polls go on until its sleep
/// counts have stood still for [`SETTLED`].
fn poll_until_leased(e: &End) {
    const SETTLED: Duration = Duration::from_millis(100);
    let stats = || {
        let s = e.r.as_stack().progress_stats();
        (s.thread_sleeps, s.thread_leased_sleeps)
    };
    let before = stats().1;
    let mut w = [empty_wc()];
    assert_eq!(e.r.cq_poll(&e.cq, &mut w), 0);
    assert_eq!(e.r.cq_poll(&e.cq, &mut w), 0);
    let l =
        e.r.listen("127.0.0.1:0".parse::<std::net::SocketAddr>().unwrap())
            .unwrap();
    e.r.as_stack().close_listener(&l);
    let start = std::time::Instant::now();
    let mut last = stats();
    let mut still = std::time::Instant::now();
    while last.1 == before || still.elapsed() < SETTLED {
        assert!(
            start.elapsed() < T,
            "the progress thread never took the lease and stayed asleep"
        );
        assert_eq!(e.r.cq_poll(&e.cq, &mut w), 0);
        std::thread::sleep(Duration::from_millis(1));
        let now = stats();
        if now != last {
            (last, still) = (now, std::time::Instant::now());
        }
    }
}

/// cq_poll with a progress thread: an empty poll runs the sleeping thread's pass in the
/// polling thread (the thread leaves the sockets to it), so a spinning application places
/// its message itself; cq_arm hands the sockets back (the lease here, 10 s, outlasts the
/// 5 s wait), and polls of the armed CQ take no lease.
#[test]
fn cq_poll_assists_a_sleeping_progress_thread_until_armed() {
    let (a, b) = pair(RnicConfig {
        busy_poll: Duration::ZERO,
        assist_lease: Duration::from_secs(10),
        ..RnicConfig::default()
    });
    let src = a.r.nsmr_register(a.pd, 64, all()).unwrap();
    let dst = b.r.nsmr_register(b.pd, 64, all()).unwrap();
    let spin = |wr_id: u64| {
        b.r.qp_post_rq(&b.qp, RecvWr::new(wr_id, vec![dst.sge(0, 64)]))
            .unwrap();
        a.r.qp_post_sq(&a.qp, SendWr::send(wr_id, vec![src.sge(0, 8)]))
            .unwrap();
        let mut w = [empty_wc()];
        let start = std::time::Instant::now();
        while b.r.cq_poll(&b.cq, &mut w) == 0 {
            assert!(start.elapsed() < T, "message {wr_id} did not arrive");
        }
        assert_eq!((w[0].wr_id, w[0].status), (wr_id, WcStatus::Success));
        assert_eq!(one(&a).wr_id, wr_id);
    };
    // A progress thread woken just then (a command rung late, a timer) may serve the
    // arrival first: a few tries allow for that, as the stack's doorbell tests do.
    let mut tries = 0;
    let (s0, s1) = loop {
        tries += 1;
        poll_until_leased(&b);
        let s0 = b.r.as_stack().progress_stats();
        spin(tries);
        let s1 = b.r.as_stack().progress_stats();
        if s1.assisted_work > s0.assisted_work || tries == 3 {
            break (s0, s1);
        }
    };
    assert!(s1.assisted_work > s0.assisted_work, "{s0:?} -> {s1:?}");
    b.r.cq_arm(&b.cq, verbs::Arm::NextCompletion);
    spin(10);
    assert_eq!(
        b.r.as_stack().progress_stats().assisted_work,
        s1.assisted_work
    );
}
