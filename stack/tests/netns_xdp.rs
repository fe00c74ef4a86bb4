//! softrnic's own TCP/IP on AF_XDP against the kernel's TCP: in a network namespace of its
//! own, a veth pair joins the kernel's side (10.214.0.1 on `xk`) with an interface that
//! belongs to softrnic (`xs`, no address for the kernel): an AF_XDP socket in copy mode on
//! its queue carries softrnic's stack as 10.214.0.2. Connections both ways, every operation
//! with every byte checked; then DDP over SCTP as raw IPv4 on AF_XDP at both ends. MPA/TCP
//! with AF_XDP at both ends of a veth pair. A third test shares an interface between
//! softrnic and the kernel: softrnic's XDP program steers the RNIC's address to the socket
//! and leaves the host's traffic to the kernel. A fourth makes the veth lossy (nftables drops
//! 1 % of the kernel's TCP packets each way); its capture of the kernel's end decodes with no
//! protocol error. At MTU 9000 (jumbo frames, multi-buffer AF_XDP): every operation against
//! the kernel's TCP both ways, captured, and with AF_XDP at both ends in generic and in native
//! mode; frames above 4 KiB must have crossed both ways.
//!
//! Needs root and the `xdp` feature: `cargo test -p softrnic-stack --features xdp --test
//! netns_xdp -- --ignored`, as `.ci/run` does when it runs as root.

#![cfg(feature = "xdp")]

mod common;

use common::netns::{Capture, Netns, check_capture, ip, tcp_dropped, tcp_loss};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use common::node::{Node, connect_pair, connect_to_listener, every_operation};
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

/// A lossy veth: nftables drops 1 % of the kernel's TCP packets each way while softrnic's
/// TCP/IP on AF_XDP runs every operation against it (1 MiB each, every byte checked); the
/// capture of the kernel's side decodes as MPA (RFC 5044) with no protocol error.
#[test]
#[ignore = "needs root: a network namespace, a veth pair, AF_XDP, nftables and tcpdump (run by .ci/run as root)"]
fn xdp_stack_against_kernel_tcp_with_loss_captured() {
    let ns = Netns::new("xl");
    ns.ip(&["link", "add", "xk", "type", "veth", "peer", "name", "xs"]);
    ns.ip(&["addr", "add", "10.214.0.1/24", "dev", "xk"]);
    ip(&["netns", "exec", &ns.0, "ethtool", "-K", "xk", "tx", "off"]);
    ns.ip(&["link", "set", "xk", "up"]);
    ns.ip(&["link", "set", "xs", "up"]);
    tcp_loss(&ns, 1);
    let cap = Capture::start(&ns, "xk", "softrnic-xdp-loss");
    let name = ns.0.clone();
    let t0 = std::time::Instant::now();
    std::thread::spawn(move || {
        common::netns::enter(&name);
        let xdp = Node::new(ProgressMode::Thread);
        let kernel = Node::new(ProgressMode::Thread);
        connect_pair(&xdp, &kernel, "tcp://10.214.0.1:0", |p| {
            format!("xdp://xs/10.214.0.1:{p}?local=10.214.0.2")
        });
        every_operation(&xdp, &kernel, 1 << 20);
    })
    .join()
    .expect("test body");
    let took = t0.elapsed();
    let dropped = tcp_dropped(&ns);
    let path = cap.finish();
    assert!(dropped > 0, "nothing was dropped");
    let summary = check_capture(&path, 100);
    eprintln!("lossy AF_XDP run: {dropped} TCP packets dropped, {took:?}; capture: {summary}");
    drop(ns);
}

/// RFC 5040 operations over MPA (RFC 5044) with softrnic's TCP/IP on AF_XDP at both ends of
/// a veth pair (the MPA/TCP bytes never touch the kernel's TCP), both directions of setup.
/// (Not captured: frames that AF_XDP sockets send and receive in copy mode pass no packet
/// tap, so tcpdump on the veth sees none; the tests with a kernel end capture that end.)
#[test]
#[ignore = "needs root: a network namespace, a veth pair and AF_XDP (run by .ci/run as root)"]
fn xdp_stack_against_xdp_stack() {
    let ns = Netns::new("xx");
    ns.ip(&["link", "add", "x1", "type", "veth", "peer", "name", "x2"]);
    ns.ip(&["link", "set", "x1", "up"]);
    ns.ip(&["link", "set", "x2", "up"]);
    let body = std::thread::spawn(move || {
        ns.enter();
        let a = Node::new(ProgressMode::Thread);
        let b = Node::new(ProgressMode::Thread);
        connect_pair(&a, &b, "xdp://x2/10.214.2.2:0", |p| {
            format!("xdp://x1/10.214.2.2:{p}?local=10.214.2.1")
        });
        every_operation(&a, &b, 1 << 20);
        for (node, dev) in [(&a, "x1"), (&b, "x2")] {
            let s = node.rnic.device_stats(dev).unwrap();
            assert!(s.rx_frames > 100 && s.tx_frames > 100, "{dev}: {s:?}");
            assert_eq!(s.tx_dropped, 0, "{dev}: {s:?}");
        }
        drop(a);
        drop(b);
        std::thread::sleep(Duration::from_millis(200));
        // The other way round: x1 listens, x2 connects.
        let a = Node::new(ProgressMode::Thread);
        let b = Node::new(ProgressMode::Thread);
        connect_pair(&b, &a, "xdp://x1/10.214.2.1:0", |p| {
            format!("xdp://x2/10.214.2.1:{p}?local=10.214.2.2")
        });
        every_operation(&b, &a, 1 << 20);
        drop(a);
        drop(b);
        drop(ns);
    });
    body.join().expect("test body");
}

/// Whether the kernel of the calling thread's namespace reaches `to` over TCP and an echo
/// comes back within a second.
fn kernel_tcp_works(to: SocketAddr, server: &TcpListener) -> bool {
    let Ok(mut c) = TcpStream::connect_timeout(&to, Duration::from_secs(1)) else {
        return false;
    };
    let Ok((mut s, _)) = server.accept() else {
        return false;
    };
    c.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    let mut got = [0u8; 5];
    c.write_all(b"hello").is_ok()
        && s.read_exact(&mut got).is_ok()
        && s.write_all(&got).is_ok()
        && c.read_exact(&mut got).is_ok()
        && &got == b"hello"
}

/// One interface, two stacks: the kernel keeps 10.214.1.3 on `xs` while softrnic's stack
/// is 10.214.1.2 on the same interface. With `take=addr` (the default) the XDP program
/// hands the socket only ARP and IPv4 for 10.214.1.2: the RNIC runs every operation while
/// the kernel's own TCP over `xs` goes on working. With `take=all` the socket takes every
/// frame and the kernel's TCP over `xs` stops (what makes the first half a real check).
#[test]
#[ignore = "needs root: network namespaces, a veth pair and AF_XDP (run by .ci/run as root)"]
fn xdp_shares_the_interface_with_the_kernel() {
    let a = Netns::new("xa");
    let b = Netns::new("xb");
    a.ip(&[
        "link", "add", "xk", "type", "veth", "peer", "name", "xs", "netns", &b.0,
    ]);
    a.ip(&["addr", "add", "10.214.1.1/24", "dev", "xk"]);
    ip(&["netns", "exec", &a.0, "ethtool", "-K", "xk", "tx", "off"]);
    a.ip(&["link", "set", "xk", "up"]);
    b.ip(&["addr", "add", "10.214.1.3/24", "dev", "xs"]);
    b.ip(&["link", "set", "xs", "up"]);
    let body = std::thread::spawn(move || {
        for take_all in [false, true] {
            // The kernel side: an RDMA listener and a plain TCP echo server on 10.214.1.1.
            a.enter();
            let kernel = Node::new(ProgressMode::Thread);
            let l = kernel
                .rnic
                .listen_on(&"tcp://10.214.1.1:0".parse().unwrap())
                .unwrap();
            let server = TcpListener::bind("10.214.1.1:0").unwrap();
            let echo = server.local_addr().unwrap();
            // The shared side: softrnic on xs as 10.214.1.2, the kernel as 10.214.1.3.
            b.enter();
            assert!(kernel_tcp_works(echo, &server), "kernel TCP before AF_XDP");
            let xdp = Node::new(ProgressMode::Thread);
            let take = if take_all { "&take=all" } else { "" };
            connect_to_listener(&xdp, &kernel, &l, |p| {
                format!("xdp://xs/10.214.1.1:{p}?local=10.214.1.2{take}")
            });
            let kernel_ok = kernel_tcp_works(echo, &server);
            every_operation(&xdp, &kernel, 1 << 20);
            if take_all {
                assert!(
                    !kernel_ok,
                    "take=all: the kernel's TCP on xs still got its frames"
                );
            } else {
                assert!(
                    kernel_ok,
                    "take=addr: the kernel's TCP on xs lost its frames"
                );
                assert!(
                    kernel_tcp_works(echo, &server),
                    "kernel TCP after the RDMA run"
                );
            }
            drop(xdp);
            drop(kernel);
            std::thread::sleep(Duration::from_millis(200));
            // The program goes with the last socket: the kernel has the interface back.
            assert!(
                kernel_tcp_works(echo, &server),
                "kernel TCP after AF_XDP closed"
            );
        }
        drop(a);
        drop(b);
    });
    body.join().expect("test body");
}

/// Largest Ethernet frame at MTU 9000.
const JUMBO_FRAME: u64 = 9000 + 14;
/// A frame larger than this spans several 4 KiB UMEM frames (3840 bytes each after the
/// kernel's headroom) on an AF_XDP socket.
const UMEM_FRAME: u64 = 4096;

/// What a capture shows of jumbo frames: per direction (from `ip`, to `ip`) the TCP frames
/// larger than a UMEM frame and the largest frame, and the MSS options of the SYNs `ip`
/// sent.
#[derive(Debug, Default)]
struct Jumbo {
    big_from: u64,
    big_to: u64,
    largest_from: u64,
    largest_to: u64,
    mss_from: Vec<u16>,
}

fn jumbo_frames(path: &std::path::Path, ip: [u8; 4]) -> Jumbo {
    let mut j = Jumbo::default();
    for f in decode::capture::read_file(path).expect("capture") {
        let len = u64::from(f.orig_len);
        let Ok(p) = etherparse::SlicedPacket::from_ethernet(&f.data) else {
            continue;
        };
        let (Some(etherparse::NetSlice::Ipv4(v4)), Some(etherparse::TransportSlice::Tcp(t))) =
            (&p.net, &p.transport)
        else {
            continue;
        };
        if v4.header().source() == ip {
            j.largest_from = j.largest_from.max(len);
            j.big_from += u64::from(len > UMEM_FRAME);
            if t.syn() {
                j.mss_from
                    .extend(t.options_iterator().filter_map(|o| match o {
                        Ok(etherparse::TcpOptionElement::MaximumSegmentSize(m)) => Some(m),
                        _ => None,
                    }));
            }
        } else if v4.header().destination() == ip {
            j.largest_to = j.largest_to.max(len);
            j.big_to += u64::from(len > UMEM_FRAME);
        }
    }
    j
}

/// The device stack's counters show frames above a UMEM frame both ways, none above the MTU.
fn assert_jumbo_stats(node: &Node, dev: &str) {
    assert_big_frames(node, dev, JUMBO_FRAME);
}

/// The device stack's counters show frames above a UMEM frame both ways, none above
/// `largest`.
fn assert_big_frames(node: &Node, dev: &str, largest: u64) {
    let s = node.rnic.device_stats(dev).unwrap();
    assert!(
        s.rx_largest > UMEM_FRAME && s.rx_largest <= largest,
        "{dev}: no multi-buffer frame received: {s:?}"
    );
    assert!(
        s.tx_largest > UMEM_FRAME && s.tx_largest <= largest,
        "{dev}: no multi-buffer frame sent: {s:?}"
    );
    assert_eq!(s.tx_dropped, 0, "{dev}: {s:?}");
}

/// Jumbo frames on AF_XDP (multi-buffer: XDP_USE_SG, an `xdp.frags` program, descriptors
/// chained with XDP_PKT_CONTD) against the kernel's TCP at MTU 9000, both directions of
/// setup, every operation of RFC 5040 over MPA (RFC 5044) with every byte checked. The
/// kernel's side is captured (frames the kernel sends and receives pass its packet taps):
/// the capture decodes with no protocol error, the stack's SYNs announce the MSS of a
/// 9000-byte MTU (RFC 9293 §3.7.1: MTU less 40), and 9014-byte frames crossed both ways.
#[test]
#[ignore = "needs root: a network namespace, a veth pair, AF_XDP and tcpdump (run by .ci/run as root)"]
fn xdp_jumbo_mtu_9000_against_kernel_tcp_rfc9293_3_7_1_mss() {
    let ns = Netns::new("xj");
    ns.ip(&["link", "add", "xk", "type", "veth", "peer", "name", "xs"]);
    ns.ip(&["link", "set", "xk", "mtu", "9000"]);
    ns.ip(&["link", "set", "xs", "mtu", "9000"]);
    ns.ip(&["addr", "add", "10.214.0.1/24", "dev", "xk"]);
    // Full checksums (the device stack checks them), and no TSO: the capture shows the
    // frames on the wire, not the kernel's 64 KiB super-segments.
    ip(&[
        "netns", "exec", &ns.0, "ethtool", "-K", "xk", "tx", "off", "tso", "off", "gso", "off",
        "gro", "off",
    ]);
    ns.ip(&["link", "set", "xk", "up"]);
    ns.ip(&["link", "set", "xs", "up"]);
    let cap = Capture::start(&ns, "xk", "softrnic-xdp-jumbo");
    let name = ns.0.clone();
    std::thread::spawn(move || {
        common::netns::enter(&name);
        let xdp = Node::new(ProgressMode::Thread);
        let kernel = Node::new(ProgressMode::Thread);
        connect_pair(&xdp, &kernel, "tcp://10.214.0.1:0", |p| {
            format!("xdp://xs/10.214.0.1:{p}?local=10.214.0.2")
        });
        every_operation(&xdp, &kernel, 1 << 20);
        assert_jumbo_stats(&xdp, "xs");
        drop(xdp);
        drop(kernel);
        std::thread::sleep(Duration::from_millis(200));
        let xdp = Node::new(ProgressMode::Thread);
        let kernel = Node::new(ProgressMode::Thread);
        connect_pair(&kernel, &xdp, "xdp://xs/10.214.0.2:7174", |p| {
            format!("tcp://10.214.0.2:{p}")
        });
        every_operation(&kernel, &xdp, 1 << 20);
        assert_jumbo_stats(&xdp, "xs");
    })
    .join()
    .expect("test body");
    let path = cap.finish();
    let j = jumbo_frames(&path, [10, 214, 0, 2]);
    assert!(j.big_from > 100 && j.big_to > 100, "{j:?}");
    assert_eq!(
        (j.largest_from, j.largest_to),
        (JUMBO_FRAME, JUMBO_FRAME),
        "{j:?}"
    );
    assert!(
        !j.mss_from.is_empty() && j.mss_from.iter().all(|&m| m == 8960),
        "{j:?}"
    );
    let summary = check_capture(&path, 100);
    eprintln!("AF_XDP at MTU 9000 against the kernel: {j:?}; capture: {summary}");
    drop(ns);
}

/// Jumbo frames with AF_XDP at both ends of a veth pair at `mtu`, `mode` generic (copy) or
/// the veth driver's native XDP: every operation both directions of setup, every byte
/// checked, frames above 4 KiB (and none above the MTU) sent and received at both ends. (Frames AF_XDP sockets send and
/// receive pass no packet tap: there is nothing to capture.)
fn jumbo_xdp_at_both_ends(mode: &'static str, mtu: u64) {
    let ns = Netns::new(if mode == "native" { "xn" } else { "xy" });
    ns.ip(&["link", "add", "x1", "type", "veth", "peer", "name", "x2"]);
    for dev in ["x1", "x2"] {
        ns.ip(&["link", "set", dev, "mtu", &mtu.to_string()]);
        ns.ip(&["link", "set", dev, "up"]);
    }
    let body = std::thread::spawn(move || {
        ns.enter();
        for flip in [false, true] {
            let a = Node::new(ProgressMode::Thread);
            let b = Node::new(ProgressMode::Thread);
            let (la, lb) = if flip { ("x1", "x2") } else { ("x2", "x1") };
            connect_pair(
                &a,
                &b,
                &format!("xdp://{la}/10.214.2.2:0?mode={mode}"),
                |p| format!("xdp://{lb}/10.214.2.2:{p}?local=10.214.2.1&mode={mode}"),
            );
            every_operation(&a, &b, 1 << 20);
            assert_big_frames(&a, lb, mtu + 14);
            assert_big_frames(&b, la, mtu + 14);
            drop(a);
            drop(b);
            std::thread::sleep(Duration::from_millis(200));
        }
        drop(ns);
    });
    body.join().expect("test body");
}

#[test]
#[ignore = "needs root: a network namespace, a veth pair and AF_XDP (run by .ci/run as root)"]
fn xdp_jumbo_mtu_9000_xdp_at_both_ends_generic() {
    jumbo_xdp_at_both_ends("skb", 9000);
}

#[test]
#[ignore = "needs root: a network namespace, a veth pair and AF_XDP (run by .ci/run as root)"]
fn xdp_jumbo_mtu_9000_xdp_at_both_ends_native() {
    jumbo_xdp_at_both_ends("native", 9000);
}

/// The largest MTU a veth takes (65535): a frame spans 18 UMEM frames, the most a copy-mode
/// AF_XDP socket sends as one (MAX_SKB_FRAGS + 1).
#[test]
#[ignore = "needs root: a network namespace, a veth pair and AF_XDP (run by .ci/run as root)"]
fn xdp_jumbo_mtu_65535_xdp_at_both_ends_generic() {
    jumbo_xdp_at_both_ends("skb", 65_535);
}
