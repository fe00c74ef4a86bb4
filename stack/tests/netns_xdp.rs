//! softrnic's own TCP/IP on AF_XDP against the kernel's TCP: in a network namespace of its
//! own, a veth pair joins the kernel's side (10.214.0.1 on `xk`) with an interface that
//! belongs to softrnic (`xs`, no address for the kernel): an AF_XDP socket in copy mode on
//! its queue carries softrnic's stack as 10.214.0.2. Connections both ways, every operation
//! with every byte checked; then DDP over SCTP as raw IPv4 on AF_XDP at both ends.
//!
//! Needs root and the `xdp` feature: `cargo test -p softrnic-stack --features xdp --test
//! netns_xdp -- --ignored`, as `.ci/run` does when it runs as root.

#![cfg(feature = "xdp")]

mod common;

use common::netns::{Netns, ip};
use common::node::{Node, connect_pair, every_operation};
use stack::ProgressMode;

/// RFC 5040 operations over MPA (RFC 5044) on softrnic's TCP/IP on AF_XDP, against the
/// kernel's TCP, both directions of connection setup.
#[test]
#[ignore = "needs root: a network namespace, a veth pair and AF_XDP (run by .ci/run as root)"]
fn xdp_stack_against_kernel_tcp() {
    let ns = Netns::new("xd");
    ns.ip(&["link", "add", "xk", "type", "veth", "peer", "name", "xs"]);
    ns.ip(&["addr", "add", "10.214.0.1/24", "dev", "xk"]);
    // The kernel's frames must carry full checksums: the device stack checks them.
    ip(&["netns", "exec", &ns.0, "ethtool", "-K", "xk", "tx", "off"]);
    ns.ip(&["link", "set", "xk", "up"]);
    ns.ip(&["link", "set", "xs", "up"]);
    let body = std::thread::spawn(move || {
        ns.enter();
        let xdp = Node::new(ProgressMode::Thread);
        let kernel = Node::new(ProgressMode::Thread);
        connect_pair(&xdp, &kernel, "tcp://10.214.0.1:0", |p| {
            format!("xdp://xs/10.214.0.1:{p}?local=10.214.0.2")
        });
        every_operation(&xdp, &kernel, 1 << 20);
        let s = xdp.rnic.device_stats("xs").unwrap();
        assert!(s.rx_frames > 100 && s.tx_frames > 100, "{s:?}");
        assert_eq!(s.tx_dropped, 0, "{s:?}");
        // The queue has one owner: this RNIC lets it go before the next takes it (the
        // kernel may refuse an immediate rebind once: EBUSY).
        drop(xdp);
        drop(kernel);
        std::thread::sleep(std::time::Duration::from_millis(200));
        let xdp2 = Node::new(ProgressMode::Thread);
        let kernel2 = Node::new(ProgressMode::Thread);
        connect_pair(&kernel2, &xdp2, "xdp://xs/10.214.0.2:7174", |p| {
            format!("tcp://10.214.0.2:{p}")
        });
        every_operation(&kernel2, &xdp2, 1 << 20);
        drop(xdp2);
        drop(kernel2);
        std::thread::sleep(std::time::Duration::from_millis(200));
        // RFC 5043 with SCTP as raw IPv4 on AF_XDP at both ends (the kernel here has no
        // SCTP): softrnic's stack takes xk as well, as 10.214.0.11.
        let s1 = Node::new(ProgressMode::Thread);
        let s2 = Node::new(ProgressMode::Thread);
        connect_pair(&s1, &s2, "sctp://10.214.0.11:7180?dev=xdp:xk", |p| {
            format!("sctp://10.214.0.11:{p}?dev=xdp:xs&local=10.214.0.2")
        });
        assert!(s1.qp.session().unwrap().sctp().is_some());
        every_operation(&s1, &s2, 1 << 20);
        drop(ns);
    });
    body.join().expect("test body");
}
