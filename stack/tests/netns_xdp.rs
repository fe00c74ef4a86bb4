//! softrnic's own TCP/IP on AF_XDP against the kernel's TCP: in a network namespace of its
//! own, a veth pair joins the kernel's side (10.214.0.1 on `xk`) with an interface that
//! belongs to softrnic (`xs`, no address for the kernel): an AF_XDP socket in copy mode on
//! its queue carries softrnic's stack as 10.214.0.2. Connections both ways, every operation
//! with every byte checked.
//!
//! Needs root and the `xdp` feature: `cargo test -p softrnic-stack --features xdp --test
//! netns_xdp -- --ignored`, as `.ci/run` does when it runs as root.

#![cfg(feature = "xdp")]

mod common;

use std::fs::File;
use std::os::fd::AsFd;
use std::process::Command;

use common::node::{Node, every_operation, wait_event};
use stack::addr::TransportAddr;
use stack::{Event, ProgressMode, mpa};

fn run(cmd: &str, args: &[&str]) {
    let s = Command::new(cmd).args(args).status().expect(cmd);
    assert!(s.success(), "{cmd} {args:?} failed");
}

/// A namespace with a veth pair: the kernel's end and softrnic's; removed on drop.
struct Ns(String);

impl Ns {
    fn new(tag: &str) -> Ns {
        let ns = format!("srnic-{tag}{}", std::process::id() % 100_000);
        run("ip", &["netns", "add", &ns]);
        run("ip", &["-n", &ns, "link", "set", "lo", "up"]);
        run(
            "ip",
            &[
                "-n", &ns, "link", "add", "xk", "type", "veth", "peer", "name", "xs",
            ],
        );
        run(
            "ip",
            &["-n", &ns, "addr", "add", "10.214.0.1/24", "dev", "xk"],
        );
        // The kernel's frames must carry full checksums: the device stack checks them.
        run(
            "ip",
            &["netns", "exec", &ns, "ethtool", "-K", "xk", "tx", "off"],
        );
        run("ip", &["-n", &ns, "link", "set", "xk", "up"]);
        run("ip", &["-n", &ns, "link", "set", "xs", "up"]);
        Ns(ns)
    }

    fn enter(&self) {
        let f = File::open(format!("/var/run/netns/{}", self.0)).expect("netns");
        rustix::thread::move_into_link_name_space(
            f.as_fd(),
            Some(rustix::thread::LinkNameSpaceType::Network),
        )
        .expect("setns");
    }
}

impl Drop for Ns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

fn connect(a: &Node, b: &Node, listen: &str, to: impl Fn(u16) -> String) {
    let l = b.rnic.listen_on(&listen.parse().unwrap()).unwrap();
    let to: TransportAddr = to(l.local_addr.port()).parse().unwrap();
    a.rnic
        .connect_to(&a.qp, &to, mpa::Config::default())
        .unwrap();
    let req = match wait_event(&[a, b], b, |e| matches!(e, Event::ConnectRequest(_))) {
        Event::ConnectRequest(r) => r,
        _ => unreachable!(),
    };
    b.rnic
        .accept(req.id, &b.qp, mpa::Config::default())
        .unwrap();
    wait_event(&[a, b], a, |e| matches!(e, Event::Established { .. }));
    wait_event(&[a, b], b, |e| matches!(e, Event::Established { .. }));
}

/// RFC 5040 operations over MPA (RFC 5044) on softrnic's TCP/IP on AF_XDP, against the
/// kernel's TCP, both directions of connection setup.
#[test]
#[ignore = "needs root: a network namespace, a veth pair and AF_XDP (run by .ci/run as root)"]
fn xdp_stack_against_kernel_tcp() {
    let ns = Ns::new("xd");
    let body = std::thread::spawn(move || {
        ns.enter();
        let xdp = Node::new(ProgressMode::Thread);
        let kernel = Node::new(ProgressMode::Thread);
        connect(&xdp, &kernel, "tcp://10.214.0.1:0", |p| {
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
        connect(&kernel2, &xdp2, "xdp://xs/10.214.0.2:7174", |p| {
            format!("tcp://10.214.0.2:{p}")
        });
        every_operation(&kernel2, &xdp2, 1 << 20);
        drop(ns);
    });
    body.join().expect("test body");
}
