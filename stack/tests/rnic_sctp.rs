//! The runtime over softrnic's own SCTP (RFC 5043 DDP adaptation, RFC 6951 UDP
//! encapsulation) on loopback: listen / connect / accept / reject through the same calls as
//! over TCP, every operation with data verified, Terminates, disconnect, and the progress
//! thread and manual progress. The transport address picks the lower layer.

mod common;

use std::time::{Duration, Instant};

use common::node::{Node, every_operation, wait_event, wait_wc};
use stack::addr::TransportAddr;
use stack::rdmap::TermCause;
use stack::{CmError, Event, ProgressMode, SendWr, SetupError, WcStatus, mpa};

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

/// RFC 5040 §5 over RFC 5043 through the runtime: Send, RDMA Write, RDMA Read, an
/// atomic and Send with Invalidate, every byte checked, on the progress thread and with
/// manual progress.
#[test]
fn rfc5043_every_operation_through_the_runtime() {
    for progress in [ProgressMode::Thread, ProgressMode::Manual] {
        let (a, b) = connected(progress);
        // Ends with a graceful disconnect (SCTP SHUTDOWN) both sides see.
        every_operation(&a, &b, 200_000);
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

/// Concurrent Multipath Transfer under the RNIC: a QP over an association with two
/// addresses on each side and `cmt=on` (CMT-PF) runs every operation with every byte
/// checked, the transport address keeping the mode.
#[test]
fn every_operation_over_a_two_path_cmt_association() {
    let a = Node::new(ProgressMode::Thread);
    let b = Node::new(ProgressMode::Thread);
    let at: TransportAddr = "sctp+udp://127.0.0.1,127.0.0.2:7177?udp-port=0&cmt=on"
        .parse()
        .unwrap();
    let l = b.rnic.listen_on(&at).unwrap();
    let TransportAddr::Sctp(mut to) = l.transport.clone() else {
        unreachable!()
    };
    assert_eq!(to.multipath, stack::addr::Multipath::CmtPf);
    to.local = vec!["127.0.0.1".parse().unwrap(), "127.0.0.2".parse().unwrap()];
    a.rnic
        .connect_to(&a.qp, &TransportAddr::Sctp(to), mpa::Config::default())
        .unwrap();
    let req = match wait_event(&[&a, &b], &b, |e| matches!(e, Event::ConnectRequest(_))) {
        Event::ConnectRequest(r) => r,
        _ => unreachable!(),
    };
    let peers = req.sctp.clone().expect("an SCTP request").peer_addrs;
    assert_eq!(peers.len(), 2, "the initiator announces both addresses");
    b.rnic
        .accept(req.id, &b.qp, mpa::Config::default())
        .unwrap();
    wait_event(&[&a, &b], &a, |e| matches!(e, Event::Established { .. }));
    every_operation(&a, &b, 300_000);
}
