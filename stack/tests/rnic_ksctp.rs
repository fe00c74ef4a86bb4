//! The runtime over the kernel's SCTP (`ksctp://`): on a kernel without SCTP every call that
//! needs a kernel SCTP socket fails at once with an error that says so and how to get it; on
//! a kernel with SCTP, listen / connect / accept on loopback and every operation with data
//! verified. The host that builds softrnic may have no SCTP: the interop lab's ksctp-loopback
//! scenario runs this binary in a guest with `SOFTRNIC_REQUIRE_KERNEL_SCTP=1`, under which a
//! kernel without SCTP fails the loopback test instead of leaving it to the other one.

mod common;

use common::node::{Node, every_operation, wait_event};
use common::sctp::{kernel_has_sctp, kernel_sctp_for_test};
use stack::addr::TransportAddr;
use stack::{Event, ProgressMode, mpa};

/// Without SCTP in the kernel, listening and connecting over `ksctp://` fail on the spot
/// with "this kernel has no SCTP (modprobe sctp)"; the QP stays free for another transport.
#[test]
fn ksctp_on_a_kernel_without_sctp_says_so() {
    if kernel_has_sctp() {
        // The loopback test below covers such a kernel.
        return;
    }
    let a = Node::new(ProgressMode::Thread);
    let at: TransportAddr = "ksctp://127.0.0.1:7190".parse().unwrap();
    let e = a.rnic.listen_on(&at).unwrap_err();
    assert!(
        e.to_string()
            .contains("this kernel has no SCTP (modprobe sctp)"),
        "{e}"
    );
    let e = a
        .rnic
        .connect_to(&a.qp, &at, mpa::Config::default())
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("this kernel has no SCTP (modprobe sctp)"),
        "{e}"
    );
    // Nothing was claimed: the QP still connects over softrnic's own SCTP.
    let b = Node::new(ProgressMode::Thread);
    let own: TransportAddr = "sctp+udp://127.0.0.1:7191?udp-port=0".parse().unwrap();
    let l = b.rnic.listen_on(&own).unwrap();
    a.rnic
        .connect_to(&a.qp, &l.transport, mpa::Config::default())
        .unwrap();
    let req = match wait_event(&[&a, &b], &b, |e| matches!(e, Event::ConnectRequest(_))) {
        Event::ConnectRequest(r) => r,
        _ => unreachable!(),
    };
    b.rnic
        .accept(req.id, &b.qp, mpa::Config::default())
        .unwrap();
    wait_event(&[&a, &b], &a, |e| matches!(e, Event::Established { .. }));
}

/// RFC 5043 over the kernel's SCTP on loopback, where the kernel has SCTP: the DDP Stream
/// Session Initiate / Accept with private data, then Send, RDMA Write, RDMA Read, an atomic
/// and Send with Invalidate with every byte checked, ending in a graceful disconnect.
#[test]
fn rfc5043_every_operation_over_kernel_sctp() {
    if !kernel_sctp_for_test() {
        // ksctp_on_a_kernel_without_sctp_says_so covers such a kernel.
        return;
    }
    let a = Node::new(ProgressMode::Thread);
    let b = Node::new(ProgressMode::Thread);
    let at: TransportAddr = "ksctp://127.0.0.1:0".parse().unwrap();
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
    assert_eq!(req.sctp.as_ref().map(|s| s.scheme), Some("ksctp"));
    b.rnic
        .accept(req.id, &b.qp, mpa::Config::default())
        .unwrap();
    wait_event(&[&a, &b], &a, |e| matches!(e, Event::Established { .. }));
    wait_event(&[&a, &b], &b, |e| matches!(e, Event::Established { .. }));
    every_operation(&a, &b, 200_000);
}
