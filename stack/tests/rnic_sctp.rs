//! The runtime over softrnic's own SCTP (RFC 5043 DDP adaptation, RFC 6951 UDP
//! encapsulation) on loopback: listen / connect / accept / reject through the same calls as
//! over TCP, every operation with data verified, Terminates, disconnect, and the progress
//! thread and manual progress. The transport address picks the lower layer.

use std::time::{Duration, Instant};

use stack::addr::TransportAddr;
use stack::rdmap::TermCause;
use stack::{
    Access, CloseReason, CmError, Cq, Event, MemoryRegion, MrOptions, Pd, ProgressMode, Qp, QpAttr,
    RecvWr, Rnic, RnicConfig, SendOp, SendWr, SetupError, Wc, WcOpcode, WcStatus, mpa,
};

const T: Duration = Duration::from_secs(10);

fn all_access() -> Access {
    Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC
}

struct Node {
    rnic: Rnic,
    pd: Pd,
    scq: Cq,
    rcq: Cq,
    qp: Qp,
}

impl Node {
    fn new(progress: ProgressMode) -> Node {
        let cfg = RnicConfig {
            progress,
            ..RnicConfig::default()
        };
        let rnic = Rnic::open(cfg).unwrap();
        let pd = rnic.alloc_pd();
        let scq = Cq::new(1024);
        let rcq = Cq::new(1024);
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

    fn tick(&self) {
        if self.rnic.config().progress == ProgressMode::Manual {
            let _ = self.rnic.advance(Duration::from_millis(1));
        } else {
            std::thread::sleep(Duration::from_micros(50));
        }
    }
}

fn drive(nodes: &[&Node]) {
    for n in nodes {
        n.tick();
    }
}

#[track_caller]
fn wait_wc(nodes: &[&Node], cq: &Cq) -> Wc {
    let start = Instant::now();
    loop {
        if let Some(wc) = cq.poll_one() {
            return wc;
        }
        assert!(start.elapsed() < T, "no completion");
        drive(nodes);
    }
}

#[track_caller]
fn wait_event(nodes: &[&Node], n: &Node, f: impl Fn(&Event) -> bool) -> Event {
    let start = Instant::now();
    loop {
        while let Some(e) = n.rnic.poll_event() {
            if f(&e) {
                return e;
            }
        }
        assert!(start.elapsed() < T, "no such event");
        drive(nodes);
    }
}

/// A listening node b and a connecting node a, connected over `sctp+udp` on loopback.
fn connected(progress: ProgressMode) -> (Node, Node) {
    let a = Node::new(progress);
    let b = Node::new(progress);
    let at: TransportAddr = "sctp+udp://127.0.0.1:7174?udp-port=0".parse().unwrap();
    let l = b.rnic.listen_on(&at).unwrap();
    let cfg = mpa::Config {
        private_data: b"from-a".to_vec(),
        ..mpa::Config::default()
    };
    a.rnic.connect_to(&a.qp, &l.transport, cfg).unwrap();
    let req = match wait_event(&[&a, &b], &b, |e| matches!(e, Event::ConnectRequest(_))) {
        Event::ConnectRequest(r) => r,
        _ => unreachable!(),
    };
    assert_eq!(req.private_data(), b"from-a");
    let s = req.sctp.clone().expect("an SCTP request");
    assert_eq!(s.scheme, "sctp+udp");
    assert!(s.enhanced.is_some(), "RFC 6581 enhanced Initiate");
    let bcfg = mpa::Config {
        private_data: b"from-b".to_vec(),
        ..mpa::Config::default()
    };
    b.rnic.accept(req.id, &b.qp, bcfg).unwrap();
    wait_event(&[&a, &b], &a, |e| matches!(e, Event::Established { .. }));
    wait_event(&[&a, &b], &b, |e| matches!(e, Event::Established { .. }));
    let sa = a.qp.session().expect("session");
    assert_eq!(sa.peer_private_data, b"from-b");
    assert!(sa.sctp().is_some());
    (a, b)
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// RFC 5040 §5 over RFC 5043 through the runtime: Send, RDMA Write, RDMA Read, both
/// atomics and Send with Invalidate, every byte checked, on the progress thread and with
/// manual progress.
#[test]
fn rfc5043_every_operation_through_the_runtime() {
    for progress in [ProgressMode::Thread, ProgressMode::Manual] {
        let (a, b) = connected(progress);
        let n = &[&a, &b];
        let data = pattern(200_000, 9);
        let src = a.mr(data.len());
        src.buf().write_at(0, &data).unwrap();
        let rbuf = b.mr(data.len());
        b.qp.post_recv(RecvWr::new(1, vec![rbuf.sge(0, data.len() as u32)]))
            .unwrap();
        a.qp.post_send(SendWr::send(10, vec![src.sge(0, data.len() as u32)]))
            .unwrap();
        let wdst = b.mr(data.len());
        a.qp.post_send(SendWr::write(
            11,
            vec![src.sge(0, data.len() as u32)],
            wdst.stag(),
            wdst.to_at(0),
        ))
        .unwrap();
        let rsrc = b.mr(100_000);
        let rdata = pattern(100_000, 77);
        rsrc.buf().write_at(0, &rdata).unwrap();
        let sink = a.mr(100_000);
        a.qp.post_send(SendWr::read(
            12,
            vec![sink.sge(0, 100_000)],
            rsrc.stag(),
            rsrc.to_at(0),
        ))
        .unwrap();
        let word = b.mr(8);
        word.buf().write_at(0, &40u64.to_ne_bytes()).unwrap();
        let orig = a.mr(8);
        a.qp.post_send(SendWr::new(
            13,
            SendOp::FetchAdd {
                remote_stag: word.stag(),
                remote_to: word.to_at(0),
                add: 2,
                add_mask: 0,
            },
            vec![orig.sge(0, 8)],
        ))
        .unwrap();
        let victim = b.mr(64);
        let r2 = b.mr(8);
        b.qp.post_recv(RecvWr::new(2, vec![r2.sge(0, 8)])).unwrap();
        a.qp.post_send(SendWr::new(
            14,
            SendOp::Send {
                solicited: false,
                invalidate: Some(victim.stag()),
            },
            vec![src.sge(0, 8)],
        ))
        .unwrap();
        for id in 10..=14 {
            let w = wait_wc(n, &a.scq);
            assert_eq!((w.wr_id, w.status), (id, WcStatus::Success), "{progress:?}");
        }
        let r = wait_wc(n, &b.rcq);
        assert_eq!((r.wr_id, r.byte_len as usize), (1, data.len()));
        let r = wait_wc(n, &b.rcq);
        assert_eq!((r.wr_id, r.invalidated_stag), (2, Some(victim.stag())));
        assert_eq!(r.opcode, WcOpcode::Recv);
        assert_eq!(rbuf.buf().to_vec(), data);
        assert_eq!(wdst.buf().to_vec(), data);
        assert_eq!(sink.buf().to_vec(), rdata);
        assert_eq!(orig.buf().to_vec(), 40u64.to_ne_bytes());
        assert_eq!(word.buf().to_vec(), 42u64.to_ne_bytes());
        // Graceful disconnect: SCTP SHUTDOWN; both see the end.
        a.rnic.disconnect(&a.qp).unwrap();
        let e = wait_event(n, &b, |e| matches!(e, Event::Disconnected { .. }));
        assert!(matches!(
            e,
            Event::Disconnected {
                reason: CloseReason::PeerClosed,
                ..
            }
        ));
    }
}

/// RFC 5040 §7 over RFC 5043 through the runtime: an RDMA Read of an STag the peer does not
/// have draws the peer's Terminate; the Read completes with a remote access error and both
/// sides report the Terminate.
#[test]
fn rfc5040_7_read_of_invalid_stag_terminates_over_sctp() {
    let (a, b) = connected(ProgressMode::Thread);
    let n = &[&a, &b];
    let sink = a.mr(4096);
    a.qp.post_send(SendWr::read(1, vec![sink.sge(0, 4096)], 0xdead_be00, 0))
        .unwrap();
    let w = wait_wc(n, &a.scq);
    assert_eq!(w.status, WcStatus::RemoteAccess);
    let t = match wait_event(n, &b, |e| matches!(e, Event::TerminateSent { .. })) {
        Event::TerminateSent { terminate, .. } => terminate,
        _ => unreachable!(),
    };
    assert!(matches!(t.cause, TermCause::Rdmap(_)), "{t:?}");
    wait_event(n, &a, |e| matches!(e, Event::TerminateReceived { .. }));
}

/// RFC 5043 §6.3 through the runtime: the listener's reject reaches the connecting side as a
/// rejected connection with the listener's private data.
#[test]
fn rfc5043_6_3_reject_through_the_runtime() {
    let a = Node::new(ProgressMode::Thread);
    let b = Node::new(ProgressMode::Thread);
    let at: TransportAddr = "sctp+udp://127.0.0.1:7175?udp-port=0".parse().unwrap();
    let l = b.rnic.listen_on(&at).unwrap();
    a.rnic
        .connect_to(&a.qp, &l.transport, mpa::Config::default())
        .unwrap();
    let req = match wait_event(&[&a, &b], &b, |e| matches!(e, Event::ConnectRequest(_))) {
        Event::ConnectRequest(r) => r,
        _ => unreachable!(),
    };
    b.rnic.reject(req.id, b"busy").unwrap();
    let e = wait_event(&[&a, &b], &a, |e| {
        matches!(e, Event::ConnectFailed { .. } | Event::Rejected { .. })
    });
    match e {
        Event::Rejected { private_data, .. } => assert_eq!(private_data, b"busy"),
        Event::ConnectFailed {
            error: CmError::Setup(SetupError::Sctp(e)),
            ..
        } => panic!("expected a reject, got {e}"),
        other => panic!("expected a reject, got {other:?}"),
    }
}

/// A connect to an SCTP port nobody listens on fails once the session setup timer runs out
/// (10 s) instead of hanging while SCTP retransmits its INIT.
#[test]
fn connect_to_a_closed_sctp_port_fails() {
    let b = Node::new(ProgressMode::Thread);
    let at: TransportAddr = "sctp+udp://127.0.0.1:7176?udp-port=0".parse().unwrap();
    let l = b.rnic.listen_on(&at).unwrap();
    let TransportAddr::Sctp(mut s) = l.transport.clone() else {
        unreachable!()
    };
    s.port = 7999;
    let a = Node::new(ProgressMode::Thread);
    a.rnic
        .connect_to(&a.qp, &TransportAddr::Sctp(s), mpa::Config::default())
        .unwrap();
    let start = Instant::now();
    let e = loop {
        if let Some(e) = a.rnic.poll_event() {
            break e;
        }
        assert!(start.elapsed() < Duration::from_secs(15), "no outcome");
        std::thread::sleep(Duration::from_millis(5));
    };
    assert!(
        matches!(
            e,
            Event::ConnectFailed {
                error: CmError::Setup(SetupError::Timeout(_)),
                ..
            }
        ),
        "{e:?}"
    );
}
