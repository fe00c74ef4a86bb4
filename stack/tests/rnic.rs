//! The runtime over real kernel TCP on loopback: connection management (blocking and
//! event-driven, reject, adopt), every operation, and that protocol errors, disconnects
//! and CQ overflow surface through the runtime. The engine's protocol details are covered
//! in memory by the other test files; these check the plumbing.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use stack::ddp::{DdpCode, TaggedCode};
use stack::mpa::{self, CrcPolicy, RtrSet, RtrType};
use stack::rdmap::TermCause;
use stack::{
    Access, AdoptRole, CloseReason, CmError, Cq, Event, MemoryRegion, MrOptions, Pd, ProgressMode,
    Qp, QpAttr, QpState, RecvWr, Rnic, RnicConfig, RnicError, SendOp, SendWr, TermOrigin, Wc,
    WcOpcode, WcStatus,
};

const T: Duration = Duration::from_secs(5);

fn all_access() -> Access {
    Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC
}

fn any_port() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

struct Node {
    rnic: Rnic,
    pd: Pd,
    scq: Cq,
    rcq: Cq,
    qp: Qp,
}

impl Node {
    fn new(cfg: RnicConfig) -> Node {
        Node::with_cq(cfg, 1024)
    }

    fn with_cq(cfg: RnicConfig, cq: usize) -> Node {
        let rnic = Rnic::open(cfg).unwrap();
        let pd = rnic.alloc_pd();
        let scq = Cq::new(cq);
        let rcq = Cq::new(cq);
        let qp = rnic
            .create_qp(QpAttr::new(pd, scq.clone(), rcq.clone()))
            .unwrap();
        Node {
            rnic,
            pd,
            scq,
            rcq,
            qp,
        }
    }

    fn mr(&self, len: usize) -> MemoryRegion {
        self.rnic
            .mem()
            .register_new(self.pd, len, MrOptions::new(all_access()))
            .unwrap()
    }

    /// Drives progress in manual mode while waiting.
    fn tick(&self) {
        if self.rnic.config().progress == ProgressMode::Manual {
            let _ = self.rnic.advance(Duration::from_millis(1));
        } else {
            std::thread::sleep(Duration::from_micros(20));
        }
    }
}

#[track_caller]
fn wait_wc(nodes: &[&Node], cq: &Cq) -> Wc {
    let start = Instant::now();
    loop {
        if let Some(wc) = cq.poll_one() {
            return wc;
        }
        assert!(start.elapsed() < T, "no completion within {T:?}");
        for n in nodes {
            n.tick();
        }
    }
}

#[track_caller]
fn wait_event(nodes: &[&Node], who: &Node, pred: impl Fn(&Event) -> bool) -> Event {
    let start = Instant::now();
    loop {
        while let Some(e) = who.rnic.poll_event() {
            if pred(&e) {
                return e;
            }
        }
        assert!(start.elapsed() < T, "event not seen within {T:?}");
        for n in nodes {
            n.tick();
        }
    }
}

/// Server (passive, blocking accept on a thread) and client (blocking connect).
fn connected(cfg_a: mpa::Config, cfg_b: mpa::Config, rc: RnicConfig) -> (Node, Node) {
    let a = Node::new(rc.clone());
    let b = Node::new(rc);
    let l = b.rnic.listen(any_port()).unwrap();
    std::thread::scope(|s| {
        let h = s.spawn(|| b.rnic.accept_blocking(&l, &b.qp, cfg_b, T).unwrap());
        a.rnic
            .connect_blocking(&a.qp, l.local_addr, cfg_a, T)
            .unwrap();
        h.join().unwrap();
    });
    (a, b)
}

fn pair() -> (Node, Node) {
    connected(
        mpa::Config::default(),
        mpa::Config::default(),
        RnicConfig::default(),
    )
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// RFC 5040 §5.3 Send / §5.1 RDMA Write / §5.2 RDMA Read over kernel TCP, with a message
/// much larger than the MULPDU (segmented per RFC 5041 §5.2), bytes verified.
#[test]
fn send_write_read_over_loopback() {
    let (a, b) = pair();
    assert_eq!(a.qp.state(), QpState::Rts);
    assert_eq!(b.qp.state(), QpState::Rts);
    let len = 1 << 20;
    let src = a.mr(len);
    let data = pattern(len, 7);
    src.buf().write_at(0, &data).unwrap();
    let dst = b.mr(len);

    // Send / Receive.
    b.qp.post_recv(RecvWr::new(1, vec![dst.sge(0, len as u32)]))
        .unwrap();
    a.qp.post_send(SendWr::send(10, vec![src.sge(0, len as u32)]))
        .unwrap();
    let wc = wait_wc(&[&a, &b], &b.rcq);
    assert_eq!(
        (wc.wr_id, wc.status, wc.opcode),
        (1, WcStatus::Success, WcOpcode::Recv)
    );
    assert_eq!(wc.byte_len as usize, len);
    assert_eq!(dst.buf().to_vec(), data);
    let wc = wait_wc(&[&a, &b], &a.scq);
    assert_eq!((wc.wr_id, wc.status), (10, WcStatus::Success));

    // RDMA Write into a fresh region.
    let sink = b.mr(len);
    a.qp.post_send(SendWr::write(
        11,
        vec![src.sge(0, len as u32)],
        sink.stag(),
        sink.to_at(0),
    ))
    .unwrap();
    let wc = wait_wc(&[&a, &b], &a.scq);
    assert_eq!(
        (wc.wr_id, wc.status, wc.opcode),
        (11, WcStatus::Success, WcOpcode::RdmaWrite)
    );
    // Write completion follows the transport accepting the bytes; a Send behind it orders
    // the placement check.
    let flag = b.mr(8);
    let one = a.mr(8);
    b.qp.post_recv(RecvWr::new(2, vec![flag.sge(0, 8)]))
        .unwrap();
    a.qp.post_send(SendWr::send(12, vec![one.sge(0, 8)]))
        .unwrap();
    wait_wc(&[&a, &b], &b.rcq);
    assert_eq!(sink.buf().to_vec(), data);

    // RDMA Read back, into two SGEs (two Read Requests).
    let back = a.mr(len);
    let half = (len / 2) as u32;
    a.qp.post_send(SendWr::read(
        13,
        vec![back.sge(0, half), back.sge(u64::from(half), half)],
        sink.stag(),
        sink.to_at(0),
    ))
    .unwrap();
    let mut wc = wait_wc(&[&a, &b], &a.scq);
    if wc.wr_id == 12 {
        wc = wait_wc(&[&a, &b], &a.scq);
    }
    assert_eq!(
        (wc.wr_id, wc.status, wc.opcode),
        (13, WcStatus::Success, WcOpcode::RdmaRead)
    );
    assert_eq!(back.buf().to_vec(), data);
}

/// RFC 7306 §5.1.1 Fetch and Add and §5.1.2 Compare and Swap through the runtime.
#[test]
fn atomics_over_loopback() {
    let (a, b) = pair();
    let target = b.mr(64);
    target.buf().write_at(8, &100u64.to_ne_bytes()).unwrap();
    let result = a.mr(8);
    a.qp.post_send(SendWr::new(
        1,
        SendOp::FetchAdd {
            remote_stag: target.stag(),
            remote_to: target.to_at(8),
            add: 5,
            add_mask: 0,
        },
        vec![result.sge(0, 8)],
    ))
    .unwrap();
    let wc = wait_wc(&[&a, &b], &a.scq);
    assert_eq!(
        (wc.status, wc.opcode),
        (WcStatus::Success, WcOpcode::FetchAdd)
    );
    let mut v = [0u8; 8];
    result.buf().read_at(0, &mut v).unwrap();
    assert_eq!(u64::from_ne_bytes(v), 100);
    target.buf().read_at(8, &mut v).unwrap();
    assert_eq!(u64::from_ne_bytes(v), 105);

    a.qp.post_send(SendWr::new(
        2,
        SendOp::CmpSwap {
            remote_stag: target.stag(),
            remote_to: target.to_at(8),
            compare: 105,
            compare_mask: u64::MAX,
            swap: 7,
            swap_mask: u64::MAX,
        },
        vec![result.sge(0, 8)],
    ))
    .unwrap();
    let wc = wait_wc(&[&a, &b], &a.scq);
    assert_eq!(
        (wc.status, wc.opcode),
        (WcStatus::Success, WcOpcode::CmpSwap)
    );
    result.buf().read_at(0, &mut v).unwrap();
    assert_eq!(u64::from_ne_bytes(v), 105);
    target.buf().read_at(8, &mut v).unwrap();
    assert_eq!(u64::from_ne_bytes(v), 7);
}

/// RFC 5040 §5.3 Send with Invalidate invalidates the STag; a later RDMA Write to it is
/// refused with a DDP Tagged Buffer "Invalid STag" Terminate (RFC 5041 §7.2 / RFC 5040
/// §7.3): the writer's request completes with a remote access error carrying the received
/// Terminate, the target reports the Terminate it sent, and both QPs go to Error with
/// `QpError` events.
#[test]
fn invalid_stag_write_terminates_both_sides() {
    let (a, b) = pair();
    let sink = b.mr(4096);
    let src = a.mr(4096);
    let rbuf = b.mr(64);
    b.qp.post_recv(RecvWr::new(1, vec![rbuf.sge(0, 64)]))
        .unwrap();
    b.qp.post_recv(RecvWr::new(2, vec![rbuf.sge(0, 64)]))
        .unwrap();
    a.qp.post_send(SendWr::new(
        1,
        SendOp::Send {
            solicited: false,
            invalidate: Some(sink.stag()),
        },
        vec![src.sge(0, 16)],
    ))
    .unwrap();
    let wc = wait_wc(&[&a, &b], &b.rcq);
    assert_eq!(wc.status, WcStatus::Success);
    assert_eq!(wc.invalidated_stag, Some(sink.stag()));
    assert!(!b.rnic.mem().query(sink.stag()).unwrap().valid);
    assert_eq!(wait_wc(&[&a, &b], &a.scq).status, WcStatus::Success);

    // The Write completes when the transport has taken its bytes, which may be before the
    // peer's Terminate arrives; the Read behind it cannot complete successfully.
    a.qp.post_send(SendWr::write(
        2,
        vec![src.sge(0, 4096)],
        sink.stag(),
        sink.to_at(0),
    ))
    .unwrap();
    let back = a.mr(16);
    let ok = b.mr(16);
    a.qp.post_send(SendWr::read(
        3,
        vec![back.sge(0, 16)],
        ok.stag(),
        ok.to_at(0),
    ))
    .unwrap();
    let expected = TermCause::Ddp(DdpCode::Tagged(TaggedCode::InvalidStag));
    let wc = wait_wc(&[&a, &b], &a.scq);
    assert_eq!(wc.wr_id, 2);
    if wc.status != WcStatus::Success {
        assert_eq!(wc.status, WcStatus::RemoteAccess);
        let term = wc.term.expect("terminate attached");
        assert_eq!((term.cause, term.origin), (expected, TermOrigin::Received));
    }
    let wc = wait_wc(&[&a, &b], &a.scq);
    assert_eq!(wc.wr_id, 3);
    assert!(!wc.status.is_success(), "{wc:?}");
    // The target's posted receive is flushed.
    let wc = wait_wc(&[&a, &b], &b.rcq);
    assert_eq!((wc.wr_id, wc.status), (2, WcStatus::Flushed));

    let ev = wait_event(&[&a, &b], &b, |e| matches!(e, Event::TerminateSent { .. }));
    let Event::TerminateSent { terminate, qp } = ev else {
        unreachable!()
    };
    assert_eq!((qp, terminate.cause), (b.qp.id(), expected));
    let ev = wait_event(&[&a, &b], &a, |e| {
        matches!(e, Event::TerminateReceived { .. })
    });
    let Event::TerminateReceived { terminate, .. } = ev else {
        unreachable!()
    };
    assert_eq!(terminate.cause, expected);
    wait_event(&[&a, &b], &a, |e| matches!(e, Event::QpError { .. }));
    wait_event(&[&a, &b], &b, |e| matches!(e, Event::QpError { .. }));
    wait_event(&[&a, &b], &a, |e| matches!(e, Event::Disconnected { .. }));
    assert_eq!(a.qp.state(), QpState::Error);
    assert_eq!(b.qp.state(), QpState::Error);
}

/// Graceful disconnect: outstanding sends complete first; the peer sees the TCP close and
/// its posted receives are flushed; posting afterwards flushes at once (verbs Error state).
#[test]
fn disconnect_flushes_posted_receives() {
    let (a, b) = pair();
    let buf = b.mr(4096);
    for i in 0..4 {
        b.qp.post_recv(RecvWr::new(i, vec![buf.sge(0, 1024)]))
            .unwrap();
    }
    let src = a.mr(64);
    let abuf = a.mr(64);
    a.qp.post_recv(RecvWr::new(99, vec![abuf.sge(0, 64)]))
        .unwrap();
    a.qp.post_send(SendWr::send(7, vec![src.sge(0, 64)]))
        .unwrap();
    a.rnic.disconnect(&a.qp).unwrap();
    let wc = wait_wc(&[&a, &b], &a.scq);
    assert_eq!((wc.wr_id, wc.status), (7, WcStatus::Success));
    let wc = wait_wc(&[&a, &b], &b.rcq);
    assert_eq!((wc.wr_id, wc.status), (0, WcStatus::Success));
    let mut flushed = Vec::new();
    for _ in 0..3 {
        let wc = wait_wc(&[&a, &b], &b.rcq);
        assert_eq!(wc.status, WcStatus::Flushed);
        flushed.push(wc.wr_id);
    }
    assert_eq!(flushed, vec![1, 2, 3]);
    // a's own receive is flushed too once the connection is down.
    let wc = wait_wc(&[&a, &b], &a.rcq);
    assert_eq!((wc.wr_id, wc.status), (99, WcStatus::Flushed));
    let ev = wait_event(&[&a, &b], &b, |e| matches!(e, Event::Disconnected { .. }));
    assert_eq!(
        ev,
        Event::Disconnected {
            qp: b.qp.id(),
            reason: CloseReason::PeerClosed
        }
    );
    assert_eq!(
        b.rnic.wait_disconnected(&b.qp, T).unwrap(),
        CloseReason::PeerClosed
    );
    assert_eq!(
        a.rnic.wait_disconnected(&a.qp, T).unwrap(),
        CloseReason::Local
    );
    b.qp.post_recv(RecvWr::new(50, vec![buf.sge(0, 8)]))
        .unwrap();
    let wc = wait_wc(&[&a, &b], &b.rcq);
    assert_eq!((wc.wr_id, wc.status), (50, WcStatus::Flushed));
}

/// Destroying a connected QP aborts the connection and flushes its receives; the peer sees
/// the connection end.
#[test]
fn destroy_qp_flushes_and_peer_sees_close() {
    let (a, b) = pair();
    let buf = a.mr(64);
    a.qp.post_recv(RecvWr::new(5, vec![buf.sge(0, 64)]))
        .unwrap();
    a.rnic.destroy_qp(&a.qp).unwrap();
    let wc = wait_wc(&[&a, &b], &a.rcq);
    assert_eq!((wc.wr_id, wc.status), (5, WcStatus::Flushed));
    wait_event(&[&a, &b], &b, |e| matches!(e, Event::Disconnected { .. }));
    assert!(matches!(
        a.rnic.destroy_qp(&a.qp),
        Err(RnicError::UnknownQp(_))
    ));
}

/// A full receive CQ: the completion that does not fit is reported as a `CqOverflow`
/// event (and on the CQ), and the QP fails.
#[test]
fn cq_overflow_surfaces_as_event() {
    let a = Node::new(RnicConfig::default());
    let b = Node::with_cq(RnicConfig::default(), 2);
    let l = b.rnic.listen(any_port()).unwrap();
    std::thread::scope(|s| {
        let h = s.spawn(|| {
            b.rnic
                .accept_blocking(&l, &b.qp, mpa::Config::default(), T)
                .unwrap()
        });
        a.rnic
            .connect_blocking(&a.qp, l.local_addr, mpa::Config::default(), T)
            .unwrap();
        h.join().unwrap();
    });
    let buf = b.mr(64);
    for i in 0..3 {
        b.qp.post_recv(RecvWr::new(i, vec![buf.sge(0, 64)]))
            .unwrap();
    }
    let src = a.mr(8);
    for i in 0..3 {
        a.qp.post_send(SendWr::send(i, vec![src.sge(0, 8)]))
            .unwrap();
    }
    let ev = wait_event(&[&a, &b], &b, |e| matches!(e, Event::CqOverflow { .. }));
    assert_eq!(
        ev,
        Event::CqOverflow {
            qp: b.qp.id(),
            cq: b.rcq.id()
        }
    );
    assert!(b.rcq.overflowed());
    assert!(matches!(
        b.rcq.poll_async(),
        Some(stack::AsyncEvent::CqOverflow { .. })
    ));
    wait_event(&[&a, &b], &b, |e| matches!(e, Event::QpError { .. }));
}

/// Manual progress (`rnic_advance`): no thread; the application drives both RNICs,
/// including the event-driven (non-blocking) connection setup.
#[test]
fn manual_progress_mode() {
    let rc = RnicConfig {
        progress: ProgressMode::Manual,
        ..RnicConfig::default()
    };
    let a = Node::new(rc.clone());
    let b = Node::new(rc);
    let l = b.rnic.listen(any_port()).unwrap();
    a.rnic
        .connect(&a.qp, l.local_addr, mpa::Config::default())
        .unwrap();
    let ev = wait_event(&[&a, &b], &b, |e| matches!(e, Event::ConnectRequest(_)));
    let Event::ConnectRequest(req) = ev else {
        unreachable!()
    };
    assert_eq!(req.listener, l.id);
    assert_eq!(req.request.as_ref().expect("MPA Request").revision, 2);
    b.rnic
        .accept(req.id, &b.qp, mpa::Config::default())
        .unwrap();
    wait_event(&[&a, &b], &a, |e| matches!(e, Event::Established { .. }));
    wait_event(&[&a, &b], &b, |e| matches!(e, Event::Established { .. }));

    let src = a.mr(100_000);
    let data = pattern(100_000, 3);
    src.buf().write_at(0, &data).unwrap();
    let dst = b.mr(100_000);
    a.qp.post_send(SendWr::write(
        1,
        vec![src.sge(0, 100_000)],
        dst.stag(),
        dst.to_at(0),
    ))
    .unwrap();
    let wc = wait_wc(&[&a, &b], &a.scq);
    assert_eq!(wc.status, WcStatus::Success);
    // Without advancing b nothing could have been placed; drive b until it is.
    let start = Instant::now();
    while dst.buf().to_vec() != data {
        assert!(start.elapsed() < T);
        b.tick();
    }
    assert!(matches!(
        Rnic::open(RnicConfig::default())
            .unwrap()
            .advance(Duration::ZERO),
        Err(RnicError::NotManual)
    ));
}

/// Non-blocking CM with private data both ways (RFC 5044 §7.1 Private Data) and a reject:
/// the initiator gets `Rejected` with the responder's private data.
#[test]
fn reject_with_private_data() {
    let a = Node::new(RnicConfig::default());
    let b = Node::new(RnicConfig::default());
    let l = b.rnic.listen(any_port()).unwrap();
    let cfg = mpa::Config {
        private_data: b"hello responder".to_vec(),
        ..mpa::Config::default()
    };
    a.rnic.connect(&a.qp, l.local_addr, cfg).unwrap();
    let req = b.rnic.wait_request(&l, T).unwrap();
    assert_eq!(req.private_data(), b"hello responder");
    assert_eq!(req.peer.ip(), l.local_addr.ip());
    let enh = req
        .request
        .as_ref()
        .expect("MPA Request")
        .enhanced
        .expect("RFC 6581 enhanced data");
    assert_eq!((enh.ird, enh.ord), (1, 1));
    b.rnic.reject(req.id, b"go away").unwrap();
    let err = a.rnic.wait_established(&a.qp, T).unwrap_err();
    assert!(
        matches!(&err, RnicError::Cm(CmError::Rejected { private_data }) if private_data == b"go away"),
        "{err:?}"
    );
    let ev = wait_event(&[&a, &b], &a, |e| matches!(e, Event::Rejected { .. }));
    assert_eq!(
        ev,
        Event::Rejected {
            qp: a.qp.id(),
            private_data: b"go away".to_vec()
        }
    );
    assert!(matches!(
        b.rnic.reject(req.id, b""),
        Err(RnicError::UnknownRequest(_))
    ));
}

/// Accepted private data reaches the initiator in the Reply (RFC 5044 §7.1).
#[test]
fn accept_private_data_reaches_initiator() {
    let a = Node::new(RnicConfig::default());
    let b = Node::new(RnicConfig::default());
    let l = b.rnic.listen(any_port()).unwrap();
    let cfg_a = mpa::Config {
        private_data: b"req".to_vec(),
        ..mpa::Config::default()
    };
    let cfg_b = mpa::Config {
        private_data: b"rep-pd".to_vec(),
        ..mpa::Config::default()
    };
    std::thread::scope(|s| {
        let h = s.spawn(|| b.rnic.accept_blocking(&l, &b.qp, cfg_b, T).unwrap());
        let sa = a
            .rnic
            .connect_blocking(&a.qp, l.local_addr, cfg_a, T)
            .unwrap();
        assert_eq!(sa.peer_private_data, b"rep-pd");
        let (sb, req) = h.join().unwrap();
        assert_eq!(sb.peer_private_data, b"req");
        assert_eq!(req.private_data(), b"req");
    });
}

/// TCP connect to a closed port fails with `ConnectFailed`.
#[test]
fn connect_refused() {
    let a = Node::new(RnicConfig::default());
    // Bind then drop to find a port nobody listens on.
    let port = TcpListener::bind(any_port()).unwrap().local_addr().unwrap();
    let err = a
        .rnic
        .connect_blocking(&a.qp, port, mpa::Config::default(), T)
        .unwrap_err();
    assert!(matches!(err, RnicError::Cm(CmError::Tcp(_))), "{err:?}");
    // A second connect on the same QP is refused.
    assert!(matches!(
        a.rnic.connect(&a.qp, port, mpa::Config::default()),
        Err(RnicError::QpBusy(_))
    ));
}

/// A disconnect while MPA setup is under way (the TCP connection is up, the peer never
/// answers the MPA Request) ends the QP at once, not at the 10 s Reply timeout.
#[test]
fn disconnect_during_mpa_setup_ends_it() {
    let a = Node::new(RnicConfig::default());
    let silent = TcpListener::bind(any_port()).unwrap();
    a.rnic
        .connect(&a.qp, silent.local_addr().unwrap(), mpa::Config::default())
        .unwrap();
    let (_peer, _) = silent.accept().unwrap();
    // Let the MPA Request go out: the QP is connected at the TCP level and awaits the Reply.
    std::thread::sleep(Duration::from_millis(200));
    let t0 = Instant::now();
    a.rnic.disconnect(&a.qp).unwrap();
    while a.qp.state() != QpState::Error && t0.elapsed() < Duration::from_secs(5) {
        a.tick();
    }
    assert_eq!(a.qp.state(), QpState::Error, "after {:?}", t0.elapsed());
}

/// Adopting connected sockets (`qp_register_fd`): MPA runs over them as initiator and
/// responder.
#[test]
fn adopt_connected_sockets() {
    let a = Node::new(RnicConfig::default());
    let b = Node::new(RnicConfig::default());
    let l = TcpListener::bind(any_port()).unwrap();
    let ca = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (cb, _) = l.accept().unwrap();
    b.rnic
        .adopt(&b.qp, cb, AdoptRole::Responder(mpa::Config::default()))
        .unwrap();
    a.rnic
        .adopt(&a.qp, ca, AdoptRole::Initiator(mpa::Config::default()))
        .unwrap();
    a.rnic.wait_established(&a.qp, T).unwrap();
    b.rnic.wait_established(&b.qp, T).unwrap();
    let src = a.mr(32);
    src.buf()
        .write_at(0, b"adopted socket carries rdma ok!!")
        .unwrap();
    let dst = b.mr(32);
    b.qp.post_recv(RecvWr::new(1, vec![dst.sge(0, 32)]))
        .unwrap();
    a.qp.post_send(SendWr::send(1, vec![src.sge(0, 32)]))
        .unwrap();
    assert_eq!(wait_wc(&[&a, &b], &b.rcq).status, WcStatus::Success);
    assert_eq!(dst.buf().to_vec(), b"adopted socket carries rdma ok!!");
}

/// RFC 6581 peer-to-peer mode with each RTR type, CRC required (RFC 5044 §7.1 C flag) and
/// markers both ways (RFC 5044 §5): the RTR is exchanged over real sockets before the
/// application's first message.
#[test]
fn p2p_rtr_crc_markers_over_loopback() {
    for rtr in [RtrType::Write, RtrType::Read, RtrType::Send] {
        let cfg = mpa::Config {
            crc: CrcPolicy::Require,
            markers_rx: true,
            markers_tx: true,
            p2p: true,
            rtr_supported: RtrSet::only(rtr),
            rtr_preferred: Some(rtr),
            ird: 4,
            ord: 4,
            ird_max: 4,
            ..mpa::Config::default()
        };
        let (a, b) = connected(cfg.clone(), cfg, RnicConfig::default());
        let s = a.qp.session().and_then(|s| s.mpa().cloned()).unwrap();
        assert!(s.crc && s.markers_tx && s.markers_rx && s.p2p);
        assert_eq!(s.rtr, Some(rtr));
        // Data flows responder → initiator first: the responder has waited for the RTR.
        let src = b.mr(5000);
        let data = pattern(5000, 9);
        src.buf().write_at(0, &data).unwrap();
        let dst = a.mr(5000);
        a.qp.post_recv(RecvWr::new(1, vec![dst.sge(0, 5000)]))
            .unwrap();
        b.qp.post_send(SendWr::send(1, vec![src.sge(0, 5000)]))
            .unwrap();
        assert_eq!(wait_wc(&[&a, &b], &a.rcq).status, WcStatus::Success);
        assert_eq!(dst.buf().to_vec(), data);
    }
}

/// The MULPDU follows the socket's TCP_MAXSEG, capped by `max_emss` (RFC 5044 §6: FPDUs
/// sized to the EMSS).
#[test]
fn emss_from_socket_and_cap() {
    let rc = RnicConfig {
        max_emss: Some(1448),
        ..RnicConfig::default()
    };
    let (a, _b) = connected(mpa::Config::default(), mpa::Config::default(), rc);
    assert_eq!(a.qp.mulpdu() as u32, mpa::mulpdu(1448, false));
    let (c, _d) = pair();
    // Loopback's MSS is far larger than Ethernet's.
    assert!(c.qp.mulpdu() > 1442, "mulpdu {}", c.qp.mulpdu());
}

/// Posting before a connection exists: receives wait, sends are refused; destroying the
/// unconnected QP flushes the receives.
#[test]
fn posting_before_connect() {
    let a = Node::new(RnicConfig::default());
    let buf = a.mr(64);
    a.qp.post_recv(RecvWr::new(3, vec![buf.sge(0, 64)]))
        .unwrap();
    assert_eq!(a.qp.rq_posted(), 1);
    assert!(
        a.qp.post_send(SendWr::send(1, vec![buf.sge(0, 8)]))
            .is_err()
    );
    a.rnic.destroy_qp(&a.qp).unwrap();
    let wc = wait_wc(&[&a], &a.rcq);
    assert_eq!((wc.wr_id, wc.status), (3, WcStatus::Flushed));
}

/// Closing the RNIC aborts its connections (the peer sees the close) and joins the thread.
#[test]
fn rnic_close_aborts_connections() {
    let (a, b) = pair();
    let buf = a.mr(64);
    a.qp.post_recv(RecvWr::new(8, vec![buf.sge(0, 64)]))
        .unwrap();
    let rcq = a.rcq.clone();
    a.rnic.close();
    let wc = rcq.poll_one().expect("flushed at close");
    assert_eq!((wc.wr_id, wc.status), (8, WcStatus::Flushed));
    wait_event(&[&b], &b, |e| matches!(e, Event::Disconnected { .. }));
}

/// Many unsignaled Writes back and forth (a ping-pong) in both progress modes: the send
/// queue is recycled without completions and nothing stalls.
#[test]
fn unsignaled_write_ping_pong() {
    for progress in [ProgressMode::Manual, ProgressMode::Thread] {
        let rc = RnicConfig {
            progress,
            ..RnicConfig::default()
        };
        let (a, b) = connected(mpa::Config::default(), mpa::Config::default(), rc);
        let ma = a.mr(64);
        let mb = b.mr(64);
        let post = |from: &Node, mr: &MemoryRegion, to: &MemoryRegion, v: u8| {
            mr.buf().write_at(33, &[v]).unwrap();
            from.qp
                .post_send(
                    SendWr::write(0, vec![mr.sge(32, 2)], to.stag(), to.to_at(0)).unsignaled(),
                )
                .unwrap();
        };
        let wait = |mr: &MemoryRegion, v: u8| {
            let start = Instant::now();
            let mut x = [0u8];
            loop {
                mr.buf().read_at(1, &mut x).unwrap();
                if x[0] == v {
                    return;
                }
                assert!(
                    start.elapsed() < T,
                    "{progress:?}: want {v} have {} (a sq {} b sq {}, states {:?} {:?})",
                    x[0],
                    a.qp.sq_outstanding(),
                    b.qp.sq_outstanding(),
                    a.qp.state(),
                    b.qp.state()
                );
                a.tick();
                b.tick();
            }
        };
        for i in 0..300u32 {
            let v = (i % 250) as u8 + 1;
            post(&a, &ma, &mb, v);
            wait(&mb, v);
            post(&b, &mb, &ma, v);
            wait(&ma, v);
        }
        assert!(a.scq.is_empty() && b.scq.is_empty());
    }
}

/// MPA negotiation failing over real sockets (RFC 5044 §7.1.2: a responder that cannot do
/// CRC rejects an initiator that requires it): the initiator sees `Rejected`, the responder
/// a `ConnectFailed` naming the reason, and both QPs are unusable.
#[test]
fn mpa_negotiation_failure_over_sockets() {
    let a = Node::new(RnicConfig::default());
    let b = Node::new(RnicConfig::default());
    let l = b.rnic.listen(any_port()).unwrap();
    let want_crc = mpa::Config {
        crc: CrcPolicy::Require,
        ..mpa::Config::default()
    };
    let no_crc = mpa::Config {
        crc: CrcPolicy::Off,
        ..mpa::Config::default()
    };
    a.rnic.connect(&a.qp, l.local_addr, want_crc).unwrap();
    let req = b.rnic.wait_request(&l, T).unwrap();
    assert!(
        req.request.as_ref().is_some_and(|r| r.crc),
        "C flag set in the Request"
    );
    b.rnic.accept(req.id, &b.qp, no_crc).unwrap();
    let err = b.rnic.wait_established(&b.qp, T).unwrap_err();
    assert!(
        matches!(
            &err,
            RnicError::Cm(CmError::Setup(stack::SetupError::Rejected(
                mpa::RejectReason::CrcRefused
            )))
        ),
        "{err:?}"
    );
    let err = a.rnic.wait_established(&a.qp, T).unwrap_err();
    assert!(
        matches!(err, RnicError::Cm(CmError::Rejected { .. })),
        "{err:?}"
    );
    wait_event(&[&a, &b], &a, |e| matches!(e, Event::Rejected { .. }));
    let buf = a.mr(8);
    a.qp.post_recv(RecvWr::new(1, vec![buf.sge(0, 8)])).unwrap();
    let wc = wait_wc(&[&a, &b], &a.rcq);
    assert_eq!(wc.status, WcStatus::Flushed);
}
