//! softrnic's own TCP/IP on a TAP device against the kernel's TCP: in a network namespace of
//! its own, a TAP device carries the kernel's address 10.213.0.1; one RNIC uses the kernel's
//! TCP there, another runs its own stack on the TAP device as 10.213.0.2. Connections both
//! ways, every operation with every byte checked, at MTU 1500 and 9000 (jumbo frames). The
//! TAP device is captured (when tcpdump is there) and the capture must decode as MPA with no
//! protocol error.
//!
//! Needs root (a network namespace, a TAP device): `cargo test -p softrnic-stack --test
//! netns_tap -- --ignored`, as `.ci/run` does when it runs as root.

mod common;

use common::netns::{Capture, Netns, check_capture};
use common::node::{Node, connect_pair, every_operation};
use stack::ProgressMode;

/// A namespace `tag` holding the TAP device srtap0 with the kernel's address 10.213.0.1,
/// up, at `mtu` (the device's default when `None`).
fn tap_netns(tag: &str, mtu: Option<usize>) -> Netns {
    let ns = Netns::new(tag);
    ns.ip(&["tuntap", "add", "srtap0", "mode", "tap"]);
    if let Some(mtu) = mtu {
        ns.ip(&["link", "set", "srtap0", "mtu", &mtu.to_string()]);
    }
    ns.ip(&["addr", "add", "10.213.0.1/24", "dev", "srtap0"]);
    ns.ip(&["link", "set", "srtap0", "up"]);
    ns
}

/// In the namespace of [`tap_netns`]: an RNIC on the TAP device as 10.213.0.2 (at `mtu` when
/// given) connected to an RNIC on the kernel's TCP; (TAP side, kernel side).
fn tap_connected_to_kernel(mtu: Option<usize>) -> (Node, Node) {
    let tap = Node::new(ProgressMode::Thread);
    let kernel = Node::new(ProgressMode::Thread);
    let mtu = mtu.map(|m| format!("&mtu={m}")).unwrap_or_default();
    connect_pair(&tap, &kernel, "tcp://10.213.0.1:0", |p| {
        format!("tap://srtap0/10.213.0.1:{p}?local=10.213.0.2{mtu}")
    });
    (tap, kernel)
}

fn tap_against_kernel(mtu: usize) {
    let ns = tap_netns(if mtu > 1500 { "tj" } else { "tp" }, Some(mtu));
    let cap = Capture::start_if_available(&ns, "srtap0", &format!("softrnic-tap-{mtu}"));
    let name = ns.0.clone();
    let body = std::thread::spawn(move || {
        common::netns::enter(&name);
        // The TAP side connects to the kernel side.
        let (tap, kernel) = tap_connected_to_kernel(Some(mtu));
        every_operation(&tap, &kernel, 1 << 20);
        let s = tap.rnic.device_stats("srtap0").unwrap();
        assert!(s.rx_frames > 100 && s.tx_frames > 100, "{s:?}");
        // A TAP device has one owner: this RNIC closes it before the next opens it.
        drop(tap);
        drop(kernel);
        // The kernel side connects to a listener on the TAP side.
        let tap2 = Node::new(ProgressMode::Thread);
        let kernel2 = Node::new(ProgressMode::Thread);
        connect_pair(
            &kernel2,
            &tap2,
            &format!("tap://srtap0/10.213.0.2:7174?mtu={mtu}"),
            |p| format!("tcp://10.213.0.2:{p}"),
        );
        every_operation(&kernel2, &tap2, 1 << 20);
    });
    body.join().expect("test body");
    if let Some(cap) = cap {
        let summary = check_capture(&cap.finish(), 100);
        eprintln!("TAP at MTU {mtu}: capture: {summary}");
    }
    drop(ns);
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

/// A TAP device removed under a connected RNIC (`ip link del`, as a NIC unplugged): the
/// device's reads and writes fail, it reports them, goes down once they persist, and the
/// QP on it is disconnected with a reset instead of the stack retrying into a dead device.
#[test]
#[ignore = "needs root: a network namespace and a TAP device (run by .ci/run as root)"]
fn a_removed_tap_device_goes_down() {
    use common::node::wait_event;
    use stack::{CloseReason, Event, SendWr};
    use std::time::{Duration, Instant};
    let ns = tap_netns("td", None);
    let name = ns.0.clone();
    let body = std::thread::spawn(move || {
        common::netns::enter(&name);
        let (tap, kernel) = tap_connected_to_kernel(None);
        let src = tap.mr(8);
        common::netns::ip(&["-n", &name, "link", "del", "srtap0"]);
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut wr = 1;
        while !tap.rnic.device_stats("srtap0").unwrap().link_down {
            assert!(
                Instant::now() < deadline,
                "the device never went down: {:?}",
                tap.rnic.device_stats("srtap0")
            );
            // Each Send makes a segment the removed device refuses.
            let _ = tap.qp.post_send(SendWr::send(wr, vec![src.sge(0, 8)]));
            wr += 1;
            std::thread::sleep(Duration::from_millis(20));
        }
        let s = tap.rnic.device_stats("srtap0").unwrap();
        assert!(s.link_errors >= 3, "{s:?}");
        let e = wait_event(&[&tap, &kernel], &tap, |e| {
            matches!(e, Event::Disconnected { .. })
        });
        assert!(
            matches!(
                e,
                Event::Disconnected {
                    reason: CloseReason::Reset,
                    ..
                }
            ),
            "{e:?}"
        );
    });
    body.join().expect("test body");
    drop(ns);
}
