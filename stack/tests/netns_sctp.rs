//! RDMA over softrnic's multihomed SCTP on real interfaces: two network namespaces joined by
//! two veth pairs (two paths), DDP over SCTP (RFC 5043) with UDP encapsulation. A stream
//! of RDMA Writes runs while the primary path's interface is taken down and, later, brought
//! back; every byte arrives, the QP stays up, and the path changes reach the application as
//! events (RFC 9260 §8.2 failover, SCTP-PF).
//!
//! Needs root (network namespaces, veth): `cargo test -p softrnic-stack --test netns_sctp --
//! --ignored`, as `.ci/run` does when it runs as root.

mod common;

use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::netns::{Netns, ip};

use stack::addr::TransportAddr;
use stack::{
    Access, Cq, Event, MrOptions, PathChange, QpAttr, RecvWr, Rnic, RnicConfig, SendWr, WcStatus,
    mpa,
};

const T: Duration = Duration::from_secs(20);

/// Two namespaces joined by two veth pairs (two paths); removed on drop.
struct Net {
    a: Netns,
    b: Netns,
}

impl Net {
    fn new() -> Net {
        let n = Net {
            a: Netns::new("sa"),
            b: Netns::new("sb"),
        };
        for p in 0..2 {
            let (va, vb) = (format!("sva{p}"), format!("svb{p}"));
            n.a.ip(&[
                "link", "add", &va, "type", "veth", "peer", "name", &vb, "netns", &n.b.0,
            ]);
            n.a.ip(&["addr", "add", &format!("10.201.{p}.1/24"), "dev", &va]);
            n.b.ip(&["addr", "add", &format!("10.201.{p}.2/24"), "dev", &vb]);
            n.a.ip(&["link", "set", &va, "up"]);
            n.b.ip(&["link", "set", &vb, "up"]);
        }
        n
    }

    /// Moves the calling thread into namespace `ns` (threads it starts inherit it).
    fn enter(ns: &str) {
        common::netns::enter(ns);
    }
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(13).wrapping_add(seed) ^ (i >> 9) as u8)
        .collect()
}

/// RFC 5043 over a multihomed association (RFC 9260 §6.4, §8.2, SCTP-PF RFC 7829): 256
/// RDMA Writes of 256 KiB stream over two veth paths; the primary path's interface goes
/// down after the first quarter and up again after the third. Every Write completes, every
/// byte is in place, and the application sees the path events.
#[test]
#[ignore = "needs root: network namespaces and veth (run by .ci/run as root)"]
fn rdma_writes_survive_a_path_going_down_and_up() {
    const LEN: usize = 256 << 10;
    const N: usize = 256;
    let net = Net::new();
    let (b_name, a_name) = (net.b.0.clone(), net.a.0.clone());
    let (tx_ready, rx_ready) = mpsc::channel::<(u32, u64)>();
    let (tx_done, rx_done) = mpsc::channel::<()>();
    let data = pattern(LEN * N / 16, 5);
    let expect = data.clone();
    // The target: listens on both of its addresses, exposes one region, checks it at the end.
    let target = std::thread::spawn(move || {
        Net::enter(&b_name);
        let rnic = Rnic::open(RnicConfig::default()).unwrap();
        let pd = rnic.alloc_pd();
        let cq = Cq::new(64);
        let qp = rnic
            .create_qp(QpAttr::new(pd, cq.clone(), cq.clone()))
            .unwrap();
        let mr = rnic
            .mem()
            .register_new(
                pd,
                LEN * N / 16,
                MrOptions::new(Access::LOCAL_WRITE | Access::REMOTE_WRITE),
            )
            .unwrap();
        let at: TransportAddr = "sctp+udp://10.201.0.2,10.201.1.2:7174".parse().unwrap();
        let l = rnic.listen_on(&at).unwrap();
        let done_buf = rnic
            .mem()
            .register_new(pd, 8, MrOptions::new(Access::LOCAL_WRITE))
            .unwrap();
        qp.post_recv(RecvWr::new(1, vec![done_buf.sge(0, 8)]))
            .unwrap();
        let (_, req) = rnic
            .accept_blocking(&l, &qp, mpa::Config::default(), T)
            .unwrap();
        let peers = req.sctp.expect("SCTP request").peer_addrs;
        assert_eq!(peers.len(), 2, "the initiator announces both addresses");
        tx_ready.send((mr.stag(), mr.to_at(0))).unwrap();
        // The writer's final Send says it is done.
        let start = Instant::now();
        loop {
            if let Some(w) = cq.poll_one() {
                assert_eq!(w.status, WcStatus::Success);
                break;
            }
            assert!(start.elapsed() < Duration::from_secs(120), "no final Send");
            cq.wait(Duration::from_millis(50));
        }
        assert!(mr.buf().to_vec() == expect, "target memory differs");
        tx_done.send(()).unwrap();
        std::thread::sleep(Duration::from_millis(200));
    });
    Net::enter(&a_name);
    let rnic = Rnic::open(RnicConfig::default()).unwrap();
    let pd = rnic.alloc_pd();
    let cq = Cq::new(4096);
    let mut attr = QpAttr::new(pd, cq.clone(), cq.clone());
    attr.sq_depth = 64;
    let qp = rnic.create_qp(attr).unwrap();
    let src = rnic
        .mem()
        .register_new(pd, data.len(), MrOptions::new(Access::LOCAL_WRITE))
        .unwrap();
    src.buf().write_at(0, &data).unwrap();
    let to: TransportAddr = "sctp+udp://10.201.0.2,10.201.1.2:7174?local=10.201.0.1,10.201.1.1"
        .parse()
        .unwrap();
    rnic.connect_to_blocking(&qp, &to, mpa::Config::default(), T)
        .unwrap();
    let (stag, base) = rx_ready.recv_timeout(T).unwrap();
    // The region is a sixteenth of the stream: Writes cycle through it with the same data,
    // so the target's memory equals the source whatever the order of completion.
    let per = data.len() / LEN;
    let mut posted = 0;
    let mut done = 0;
    let mut events = Vec::new();
    let start = Instant::now();
    while done < N {
        while posted < N && posted - done < 16 {
            let off = (posted % per) * LEN;
            qp.post_send(SendWr::write(
                posted as u64,
                vec![src.sge(off as u64, LEN as u32)],
                stag,
                base + off as u64,
            ))
            .unwrap();
            posted += 1;
        }
        if let Some(w) = cq.poll_one() {
            assert_eq!(w.status, WcStatus::Success, "{w:?}");
            done += 1;
            if done == N / 4 {
                ip(&["-n", &net.a.0, "link", "set", "sva0", "down"]);
            }
            if done == 3 * N / 4 {
                ip(&["-n", &net.a.0, "link", "set", "sva0", "up"]);
            }
        } else {
            cq.wait(Duration::from_millis(10));
        }
        while let Some(e) = rnic.poll_event() {
            events.push(e);
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "stalled at {done}/{N}"
        );
    }
    // The QP stayed up through the failure (the end of the test closes it later).
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, Event::Disconnected { .. } | Event::QpError { .. })),
        "{events:?}"
    );
    let fin = rnic
        .mem()
        .register_new(pd, 8, MrOptions::new(Access::NONE))
        .unwrap();
    qp.post_send(SendWr::send(9999, vec![fin.sge(0, 8)]))
        .unwrap();
    rx_done.recv_timeout(Duration::from_secs(60)).unwrap();
    target.join().unwrap();
    let changes: Vec<PathChange> = events
        .iter()
        .filter_map(|e| match e {
            Event::Path { change, .. } => Some(*change),
            _ => None,
        })
        .collect();
    assert!(
        changes
            .iter()
            .any(|c| matches!(c, PathChange::Down | PathChange::PotentiallyFailed)),
        "no path failure reported: {events:?}"
    );
    assert!(changes.contains(&PathChange::Primary), "{events:?}");
    eprintln!(
        "netns failover: {N} x {} KiB Writes in {:.1} s, path events {changes:?}",
        LEN >> 10,
        start.elapsed().as_secs_f64()
    );
}
