//! softrnic's own TCP/IP on a TAP device against the kernel's TCP: in a network namespace of
//! its own, a TAP device carries the kernel's address 10.213.0.1; one RNIC uses the kernel's
//! TCP there, another runs its own stack on the TAP device as 10.213.0.2. Connections both
//! ways, every operation with every byte checked, at MTU 1500 and 9000 (jumbo frames).
//!
//! Needs root (a network namespace, a TAP device): `cargo test -p softrnic-stack --test
//! netns_tap -- --ignored`, as `.ci/run` does when it runs as root.

mod common;

use std::fs::File;
use std::os::fd::AsFd;
use std::process::Command;

use common::node::{Node, every_operation, wait_event};
use stack::addr::TransportAddr;
use stack::{Event, ProgressMode, mpa};

fn ip(args: &[&str]) {
    let s = Command::new("ip").args(args).status().expect("run ip");
    assert!(s.success(), "ip {args:?} failed");
}

/// A namespace with a TAP device holding the kernel's side; removed on drop.
struct Ns(String);

impl Ns {
    fn new(tag: &str, mtu: usize) -> Ns {
        let ns = format!("srnic-{tag}{}", std::process::id() % 100_000);
        ip(&["netns", "add", &ns]);
        ip(&["-n", &ns, "link", "set", "lo", "up"]);
        ip(&["-n", &ns, "tuntap", "add", "srtap0", "mode", "tap"]);
        ip(&["-n", &ns, "link", "set", "srtap0", "mtu", &mtu.to_string()]);
        ip(&["-n", &ns, "addr", "add", "10.213.0.1/24", "dev", "srtap0"]);
        ip(&["-n", &ns, "link", "set", "srtap0", "up"]);
        Ns(ns)
    }

    /// Moves the calling thread into the namespace (threads it starts inherit it).
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

/// `a` connects to `b` listening on `listen`, through `to`; both see Established.
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

fn tap_against_kernel(mtu: usize) {
    let ns = Ns::new(if mtu > 1500 { "tj" } else { "tp" }, mtu);
    let body = std::thread::spawn(move || {
        ns.enter();
        // The TAP side connects to the kernel side.
        let tap = Node::new(ProgressMode::Thread);
        let kernel = Node::new(ProgressMode::Thread);
        connect(&tap, &kernel, "tcp://10.213.0.1:0", |p| {
            format!("tap://srtap0/10.213.0.1:{p}?local=10.213.0.2&mtu={mtu}")
        });
        every_operation(&tap, &kernel, 1 << 20);
        let s = tap.rnic.device_stats("srtap0").unwrap();
        assert!(s.rx_frames > 100 && s.tx_frames > 100, "{s:?}");
        // A TAP device has one owner: this RNIC closes it before the next opens it.
        drop(tap);
        drop(kernel);
        // The kernel side connects to a listener on the TAP side.
        let tap2 = Node::new(ProgressMode::Thread);
        let kernel2 = Node::new(ProgressMode::Thread);
        connect(
            &kernel2,
            &tap2,
            &format!("tap://srtap0/10.213.0.2:7174?mtu={mtu}"),
            |p| format!("tcp://10.213.0.2:{p}"),
        );
        every_operation(&kernel2, &tap2, 1 << 20);
        drop(ns);
    });
    body.join().expect("test body");
}

#[test]
#[ignore = "needs root: a network namespace and a TAP device (run by .ci/run as root)"]
fn tap_stack_against_kernel_tcp_mtu_1500() {
    tap_against_kernel(1500);
}

#[test]
#[ignore = "needs root: a network namespace and a TAP device (run by .ci/run as root)"]
fn tap_stack_against_kernel_tcp_mtu_9000() {
    tap_against_kernel(9000);
}
