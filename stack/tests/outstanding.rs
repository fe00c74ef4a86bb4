//! Many outstanding operations over real kernel TCP on loopback: RDMA Reads up to the
//! negotiated ORD/IRD (RFC 5040 §6.4, RFC 6581 §5), send and receive queues thousands
//! deep, and a completion queue that overflows under them. Manual progress, so the test
//! decides which side runs and can look at the queues while everything is in flight.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use stack::mpa;
use stack::{
    Access, Cq, Event, MemoryRegion, MrOptions, Pd, PostError, ProgressMode, Qp, QpAttr, RecvWr,
    Rnic, RnicConfig, SendWr, WcOpcode, WcStatus,
};

const T: Duration = Duration::from_secs(60);
const MIB: usize = 1 << 20;

struct Node {
    rnic: Rnic,
    pd: Pd,
    scq: Cq,
    rcq: Cq,
    qp: Qp,
}

impl Node {
    fn new(depth: usize, cq: usize) -> Node {
        let rnic = Rnic::open(RnicConfig {
            progress: ProgressMode::Manual,
            ..RnicConfig::default()
        })
        .unwrap();
        let pd = rnic.alloc_pd();
        let scq = Cq::new(cq);
        let rcq = Cq::new(cq);
        let mut attr = QpAttr::new(pd, scq.clone(), rcq.clone());
        attr.sq_depth = depth;
        attr.rq_depth = depth;
        let qp = rnic.create_qp(attr).unwrap();
        Node {
            rnic,
            pd,
            scq,
            rcq,
            qp,
        }
    }

    fn mr(&self, len: usize) -> MemoryRegion {
        let access = Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE;
        self.rnic
            .mem()
            .register_new(self.pd, len, MrOptions::new(access))
            .unwrap()
    }

    fn tick(&self) {
        self.rnic.advance(Duration::ZERO).unwrap();
    }
}

fn mpa_cfg(ird: u16, ord: u16) -> mpa::Config {
    mpa::Config {
        ird,
        ord,
        ird_max: ird,
        ..mpa::Config::default()
    }
}

/// Connects `a` (initiator) to `b`, driving both RNICs by hand.
fn connect(a: &Node, b: &Node, cfg_a: mpa::Config, cfg_b: mpa::Config) {
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let l = b.rnic.listen(any).unwrap();
    a.rnic.connect(&a.qp, l.local_addr, cfg_a).unwrap();
    let req = wait_event(a, b, b, |e| match e {
        Event::ConnectRequest(r) => Some(r.id),
        _ => None,
    });
    b.rnic.accept(req, &b.qp, cfg_b).unwrap();
    wait_event(a, b, a, |e| {
        matches!(e, Event::Established { .. }).then_some(())
    });
    wait_event(a, b, b, |e| {
        matches!(e, Event::Established { .. }).then_some(())
    });
}

#[track_caller]
fn wait_event<R>(a: &Node, b: &Node, who: &Node, pick: impl Fn(&Event) -> Option<R>) -> R {
    let start = Instant::now();
    loop {
        while let Some(e) = who.rnic.poll_event() {
            if let Some(r) = pick(&e) {
                return r;
            }
        }
        assert!(start.elapsed() < T, "event not seen within {T:?}");
        a.tick();
        b.tick();
    }
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| ((i / 251) as u8) ^ (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// RFC 5040 §6.4 (the ORD limits the RDMA Read Requests outstanding at the Data Source's
/// peer, the IRD those it accepts) with the values negotiated by RFC 6581 §5 (IRD/ORD in the
/// enhanced MPA Request and Reply): ORD = IRD = 64 and 64 Reads of 4 MiB are all outstanding
/// at once — the initiator has sent every Read Request before the responder has run at all,
/// and the responder then holds all 64 as accepted and unanswered. A 65th Read waits for a
/// credit instead of exceeding the ORD. All 260 MiB arrive byte for byte, completions in
/// posting order.
#[test]
fn rfc5040_6_4_rfc6581_ord_ird_64_reads_of_4_mib_all_outstanding() {
    const N: usize = 64;
    const LEN: usize = 4 * MIB;
    const STRIDE: usize = 4096;
    let a = Node::new(256, 256);
    let b = Node::new(256, 256);
    connect(
        &a,
        &b,
        mpa_cfg(N as u16, N as u16),
        mpa_cfg(N as u16, N as u16),
    );
    let s = a.qp.session().expect("session");
    assert_eq!((s.ird, s.ord), (N as u16, N as u16), "negotiated IRD/ORD");
    let s = b.qp.session().expect("session");
    assert_eq!((s.ird, s.ord), (N as u16, N as u16), "negotiated IRD/ORD");

    // Read i takes 4 MiB from offset i × 4 KiB of the responder's region: every Read
    // carries different bytes.
    let src_len = LEN + N * STRIDE;
    let data = pattern(src_len, 9);
    let src = b.mr(src_len);
    src.buf().write_at(0, &data).unwrap();
    let dst = a.mr((N + 1) * LEN);
    for i in 0..=N {
        a.qp.post_send(SendWr::read(
            i as u64,
            vec![dst.sge((i * LEN) as u64, LEN as u32)],
            src.stag(),
            src.to_at((i * STRIDE % (N * STRIDE)) as u64),
        ))
        .unwrap();
    }
    // Only the initiator runs: it sends Read Requests until the ORD is used up.
    let start = Instant::now();
    while a.qp.ord_in_use() < N {
        assert!(
            start.elapsed() < T,
            "ORD never filled: {}",
            a.qp.ord_in_use()
        );
        a.tick();
    }
    for _ in 0..20 {
        a.tick();
        assert_eq!(a.qp.ord_in_use(), N, "more Reads outstanding than the ORD");
    }
    // Now only the responder: it accepts every Request (all within its IRD) and starts
    // answering in order. A Request leaves the IRD once its whole response is in the
    // socket; with the initiator not reading, loopback's buffers take at most the first
    // 4 MiB response or two, so nearly all 64 stay accepted and unanswered at once.
    let mut most = 0;
    let mut still = 0;
    let start = Instant::now();
    while still < 200 {
        assert!(start.elapsed() < T, "responder never settled");
        b.tick();
        let now = b.qp.ird_in_use();
        assert!(now <= N, "IRD exceeded: {now}");
        if now == most {
            still += 1;
        } else {
            still = 0;
        }
        most = most.max(now);
    }
    assert!(
        most >= N - 2,
        "only {most} Read Requests outstanding at the responder"
    );
    assert_eq!(a.qp.ord_in_use(), N);
    assert!(a.scq.poll_one().is_none(), "no Read can have completed yet");

    // Both run until every Read has completed, in posting order.
    let mut next = 0u64;
    let start = Instant::now();
    while next <= N as u64 {
        assert!(start.elapsed() < T, "Read {next} not complete within {T:?}");
        a.tick();
        b.tick();
        assert!(a.qp.ord_in_use() <= N);
        assert!(b.qp.ird_in_use() <= N);
        while let Some(wc) = a.scq.poll_one() {
            assert_eq!(
                (wc.wr_id, wc.status, wc.opcode),
                (next, WcStatus::Success, WcOpcode::RdmaRead)
            );
            next += 1;
        }
    }
    let got = dst.buf().to_vec();
    for i in 0..=N {
        let off = i * STRIDE % (N * STRIDE);
        assert!(
            got[i * LEN..(i + 1) * LEN] == data[off..off + LEN],
            "Read {i}: bytes differ"
        );
    }
    assert_eq!((a.qp.ord_in_use(), b.qp.ird_in_use()), (0, 0));
}

/// RFC 6581 §5: IRD and ORD are 14-bit fields, so 16383 is the largest value the enhanced
/// MPA exchange negotiates. Both sides ask for it, get it, and 16383 Reads posted at once
/// (a send queue and a CQ that deep) run with never more than 16383 outstanding
/// (RFC 5040 §6.4), every byte checked.
#[test]
fn rfc6581_5_ird_ord_at_the_14_bit_maximum_16383_reads() {
    const N: usize = 0x3FFF;
    const LEN: usize = 64;
    let a = Node::new(N, N + 1);
    let b = Node::new(16, 16);
    connect(
        &a,
        &b,
        mpa_cfg(N as u16, N as u16),
        mpa_cfg(N as u16, N as u16),
    );
    let s = a.qp.session().expect("session");
    assert_eq!((s.ird, s.ord), (N as u16, N as u16));

    let data = pattern(N * LEN, 5);
    let src = b.mr(N * LEN);
    src.buf().write_at(0, &data).unwrap();
    let dst = a.mr(N * LEN);
    for i in 0..N {
        a.qp.post_send(SendWr::read(
            i as u64,
            vec![dst.sge((i * LEN) as u64, LEN as u32)],
            src.stag(),
            src.to_at((i * LEN) as u64),
        ))
        .unwrap();
    }
    assert_eq!(a.qp.sq_outstanding(), N);
    assert!(matches!(
        a.qp.post_send(SendWr::read(
            0,
            vec![dst.sge(0, 8)],
            src.stag(),
            src.to_at(0)
        )),
        Err(PostError::QueueFull { depth: N })
    ));
    // The initiator alone: Read Requests leave until the socket or the ORD stops them.
    let mut most = 0;
    for _ in 0..50 {
        a.tick();
        most = most.max(a.qp.ord_in_use());
    }
    assert!(most > 1000, "only {most} Reads outstanding at once");
    let mut next = 0u64;
    let start = Instant::now();
    while next < N as u64 {
        assert!(start.elapsed() < T, "Read {next} not complete within {T:?}");
        a.tick();
        b.tick();
        most = most.max(a.qp.ord_in_use());
        assert!(b.qp.ird_in_use() <= N);
        while let Some(wc) = a.scq.poll_one() {
            assert_eq!((wc.wr_id, wc.status), (next, WcStatus::Success));
            next += 1;
        }
    }
    assert!(most <= N);
    assert!(dst.buf().to_vec() == data, "Read bytes differ");
}

/// Send and receive queues 4096 deep: 4096 Receives and 4096 Sends posted before either
/// side runs (the 4097th post of each is refused as queue full), then all 4096 Sends
/// delivered in order (RFC 5040 §5.3: Sends consume Receives in posting order) with their
/// bytes. Then a receive CQ too small for a burst overflows and says so as the
/// asynchronous event it is (the overflow is also on the CQ itself).
#[test]
fn queues_4096_deep_then_cq_overflow_is_an_async_event() {
    const N: usize = 4096;
    const LEN: usize = 16 * 1024;
    let a = Node::new(N, N);
    let b = Node::new(N, N);
    connect(&a, &b, mpa_cfg(1, 1), mpa_cfg(1, 1));
    let data = pattern(N * LEN, 1);
    let src = a.mr(N * LEN);
    src.buf().write_at(0, &data).unwrap();
    let dst = b.mr(N * LEN);
    let slot = |i: usize| ((i % N) * LEN) as u64;
    for i in 0..N {
        b.qp.post_recv(RecvWr::new(i as u64, vec![dst.sge(slot(i), LEN as u32)]))
            .unwrap();
    }
    assert_eq!(b.qp.rq_posted(), N);
    assert!(matches!(
        b.qp.post_recv(RecvWr::new(0, vec![dst.sge(0, 8)])),
        Err(PostError::QueueFull { depth: N })
    ));
    // Sends of 16 KiB (64 MiB in all, more than the sockets hold while b does not run):
    // a post transmits what the socket takes at once, so post until the queue is
    // really full and stays so.
    let mut posted = 0;
    loop {
        match a.qp.post_send(SendWr::send(
            posted as u64,
            vec![src.sge(slot(posted), LEN as u32)],
        )) {
            Ok(()) => posted += 1,
            Err(PostError::QueueFull { depth }) => {
                assert_eq!(depth, N);
                break;
            }
            Err(e) => panic!("post {posted}: {e}"),
        }
        assert!(posted < 2 * N, "the send queue never filled");
    }
    assert_eq!(
        a.qp.sq_outstanding(),
        N,
        "Sends in flight when the queue refuses"
    );
    assert!(posted >= N);

    let (mut sent, mut recvd, mut reposted) = (0usize, 0usize, N);
    let mut got = vec![0u8; LEN];
    let start = Instant::now();
    while sent < posted || recvd < posted {
        assert!(
            start.elapsed() < T,
            "{sent} Sends, {recvd} Receives complete"
        );
        a.tick();
        b.tick();
        while let Some(wc) = a.scq.poll_one() {
            assert_eq!((wc.wr_id, wc.status), (sent as u64, WcStatus::Success));
            sent += 1;
        }
        while let Some(wc) = b.rcq.poll_one() {
            assert_eq!(
                (wc.wr_id, wc.status, wc.byte_len as usize),
                (recvd as u64, WcStatus::Success, LEN)
            );
            let at = slot(recvd) as usize;
            dst.buf().read_at(at, &mut got).unwrap();
            assert!(got == data[at..at + LEN], "Receive {recvd}: bytes differ");
            recvd += 1;
            if reposted < posted {
                b.qp.post_recv(RecvWr::new(
                    reposted as u64,
                    vec![dst.sge(slot(reposted), LEN as u32)],
                ))
                .unwrap();
                reposted += 1;
            }
        }
    }
    assert!(dst.buf().to_vec() == data, "received bytes differ");
    assert!(b.rnic.poll_async_event().is_none());

    // A burst that fills the receive CQ (nobody polls it) and one Send more, whose
    // completion cannot fit.
    for i in 0..N {
        b.qp.post_recv(RecvWr::new(i as u64, vec![dst.sge((i * LEN) as u64, 8)]))
            .unwrap();
    }
    for i in 0..N {
        a.qp.post_send(SendWr::send(i as u64, vec![src.sge(0, 8)]))
            .unwrap();
    }
    let start = Instant::now();
    while b.rcq.len() < N {
        assert!(start.elapsed() < T, "{} completions on b", b.rcq.len());
        a.tick();
        b.tick();
        while a.scq.poll_one().is_some() {}
    }
    assert!(!b.rcq.overflowed());
    b.qp.post_recv(RecvWr::new(N as u64, vec![dst.sge(0, 8)]))
        .unwrap();
    a.qp.post_send(SendWr::send(N as u64, vec![src.sge(0, 8)]))
        .unwrap();
    let start = Instant::now();
    let cq = loop {
        if let Some(Event::CqOverflow { qp, cq }) = b.rnic.poll_async_event() {
            break (qp, cq);
        }
        assert!(start.elapsed() < T, "no CqOverflow event within {T:?}");
        a.tick();
        b.tick();
    };
    assert_eq!(cq, (b.qp.id(), b.rcq.id()));
    assert!(b.rcq.overflowed());
    assert!(matches!(
        b.rcq.poll_async(),
        Some(stack::AsyncEvent::CqOverflow { .. })
    ));
}
