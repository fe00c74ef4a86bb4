//! RNICs in tests: a node (RNIC, PD, CQs, one QP), waits that drive manual progress, and an
//! exchange of every operation with every byte checked, over whatever transport connects
//! two nodes.

#![allow(dead_code)]

use std::time::{Duration, Instant};

use stack::{
    Access, CloseReason, Cq, Event, MemoryRegion, MrOptions, Pd, ProgressMode, Qp, QpAttr, RecvWr,
    Rnic, RnicConfig, SendOp, SendWr, Wc, WcStatus,
};

/// How long a wait may take before the test fails (generous: loss recovery takes seconds).
pub const T: Duration = Duration::from_secs(60);

pub fn all_access() -> Access {
    Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC
}

pub struct Node {
    pub rnic: Rnic,
    pub pd: Pd,
    pub scq: Cq,
    pub rcq: Cq,
    pub qp: Qp,
}

impl Node {
    pub fn new(progress: ProgressMode) -> Node {
        let rnic = Rnic::open(RnicConfig {
            progress,
            ..RnicConfig::default()
        })
        .unwrap();
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

    pub fn mr(&self, len: usize) -> MemoryRegion {
        self.rnic
            .mem()
            .register_new(self.pd, len, MrOptions::new(all_access()))
            .unwrap()
    }

    pub fn tick(&self) {
        if self.rnic.config().progress == ProgressMode::Manual {
            let _ = self.rnic.advance(Duration::from_millis(1));
        } else {
            std::thread::sleep(Duration::from_micros(50));
        }
    }
}

pub fn drive(nodes: &[&Node]) {
    for n in nodes {
        n.tick();
    }
}

#[track_caller]
pub fn wait_wc(nodes: &[&Node], cq: &Cq) -> Wc {
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
pub fn wait_event(nodes: &[&Node], n: &Node, f: impl Fn(&Event) -> bool) -> Event {
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

pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// Send, RDMA Write, RDMA Read, an atomic and Send with Invalidate from a to b;
/// every byte checked; then a graceful disconnect both sides see.
pub fn every_operation(a: &Node, b: &Node, len: usize) {
    let n = &[a, b];
    let data = pattern(len, 9);
    let src = a.mr(len);
    src.buf().write_at(0, &data).unwrap();
    let rbuf = b.mr(len);
    b.qp.post_recv(RecvWr::new(1, vec![rbuf.sge(0, len as u32)]))
        .unwrap();
    a.qp.post_send(SendWr::send(10, vec![src.sge(0, len as u32)]))
        .unwrap();
    let wdst = b.mr(len);
    a.qp.post_send(SendWr::write(
        11,
        vec![src.sge(0, len as u32)],
        wdst.stag(),
        wdst.to_at(0),
    ))
    .unwrap();
    let rsrc = b.mr(len);
    let rdata = pattern(len, 77);
    rsrc.buf().write_at(0, &rdata).unwrap();
    let sink = a.mr(len);
    a.qp.post_send(SendWr::read(
        12,
        vec![sink.sge(0, len as u32)],
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
        assert_eq!((w.wr_id, w.status), (id, WcStatus::Success));
    }
    let r = wait_wc(n, &b.rcq);
    assert_eq!((r.wr_id, r.byte_len as usize), (1, len));
    let r = wait_wc(n, &b.rcq);
    assert_eq!((r.wr_id, r.invalidated_stag), (2, Some(victim.stag())));
    assert!(rbuf.buf().to_vec() == data, "Send payload");
    assert!(wdst.buf().to_vec() == data, "Write payload");
    assert!(sink.buf().to_vec() == rdata, "Read payload");
    assert_eq!(orig.buf().to_vec(), 40u64.to_ne_bytes());
    assert_eq!(word.buf().to_vec(), 42u64.to_ne_bytes());
    a.rnic.disconnect(&a.qp).unwrap();
    let e = wait_event(n, b, |e| matches!(e, Event::Disconnected { .. }));
    assert!(
        matches!(
            e,
            Event::Disconnected {
                reason: CloseReason::PeerClosed,
                ..
            }
        ),
        "{e:?}"
    );
}

/// `b` listens on `listen`; `a` connects to `to(the listener's port)`; both accept the
/// defaults and wait until established.
pub fn connect_pair(a: &Node, b: &Node, listen: &str, to: impl Fn(u16) -> String) {
    let l = b.rnic.listen_on(&listen.parse().unwrap()).unwrap();
    connect_to_listener(a, b, &l, to);
}

/// `a` connects to `to(the port of b's listener l)`; both accept the defaults and wait
/// until established.
pub fn connect_to_listener(a: &Node, b: &Node, l: &stack::Listener, to: impl Fn(u16) -> String) {
    let to: stack::addr::TransportAddr = to(l.local_addr.port()).parse().unwrap();
    a.rnic
        .connect_to(&a.qp, &to, stack::mpa::Config::default())
        .unwrap();
    let req = match wait_event(&[a, b], b, |e| matches!(e, Event::ConnectRequest(_))) {
        Event::ConnectRequest(r) => r,
        _ => unreachable!(),
    };
    b.rnic
        .accept(req.id, &b.qp, stack::mpa::Config::default())
        .unwrap();
    wait_event(&[a, b], a, |e| matches!(e, Event::Established { .. }));
    wait_event(&[a, b], b, |e| matches!(e, Event::Established { .. }));
}
