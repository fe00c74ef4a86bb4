//! Several progress threads ([`RnicConfig::progress_threads`]) over kernel TCP on loopback:
//! many QP pairs spread over the threads run RDMA Write (RFC 5040 §4.3), Send (§4.4) and
//! RDMA Read (§4.5) with every byte verified, completing into CQs shared by QPs on different
//! threads; connections are torn down (RFC 5044 §7.1, graceful disconnect) and made again,
//! and a QP whose peer stops reading does not hold up the QPs of another thread. Active
//! SCTP associations (RFC 5043) are spread the same way, and kernel SCTP associations on
//! both sides where the kernel has SCTP (the interop lab's ksctp-loopback runs that test).

mod common;

use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use common::sctp::kernel_sctp_for_test;

use stack::addr::TransportAddr;
use stack::device::{DeviceConfig, Link};
use stack::mpa::{self, Role, Session};
use stack::{
    Access, AdoptRole, Cq, Listener, MemoryRegion, MrOptions, Pd, Qp, QpAttr, QpState, RecvWr,
    Rnic, RnicConfig, SendWr, Wc, WcOpcode, WcStatus,
};

const T: Duration = Duration::from_secs(30);
const PAIRS: usize = 64;
const WRITE_LEN: usize = 8192;
const SEND_LEN: usize = 4096;
const READ_LEN: usize = 8192;

fn open(threads: usize) -> Rnic {
    Rnic::open(RnicConfig {
        progress_threads: threads,
        ..RnicConfig::default()
    })
    .unwrap()
}

fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn mr(rnic: &Rnic, pd: Pd, len: usize) -> MemoryRegion {
    let access = Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE;
    rnic.mem()
        .register_new(pd, len, MrOptions::new(access))
        .unwrap()
}

/// One side of the test: an RNIC whose QPs all complete into one send CQ and one receive CQ.
struct Node {
    rnic: Rnic,
    pd: Pd,
    scq: Cq,
    rcq: Cq,
}

impl Node {
    fn new(threads: usize) -> Node {
        let rnic = open(threads);
        let pd = rnic.alloc_pd();
        Node {
            rnic,
            pd,
            scq: Cq::new(4096),
            rcq: Cq::new(4096),
        }
    }

    fn qp(&self) -> Qp {
        self.rnic
            .create_qp(QpAttr::new(self.pd, self.scq.clone(), self.rcq.clone()))
            .unwrap()
    }
}

/// The memory of one pair: what A writes and sends, where B's Write and Send land, what A
/// reads back from B.
struct PairMem {
    a_src: MemoryRegion,
    a_sink: MemoryRegion,
    b_write: MemoryRegion,
    b_recv: MemoryRegion,
    b_read_src: MemoryRegion,
}

struct Pair {
    qa: Qp,
    qb: Qp,
    mem: PairMem,
}

fn connect(a: &Node, b: &Node, listen: SocketAddr) -> Pair {
    let l = b.rnic.listen(listen).unwrap();
    let pair = connect_to(a, b, &l);
    b.rnic.close_listener(&l);
    pair
}

/// A QP pair connected through `b`'s listener `l` (TCP or SCTP).
fn connect_to(a: &Node, b: &Node, l: &Listener) -> Pair {
    let (qa, qb) = (a.qp(), b.qp());
    std::thread::scope(|s| {
        let h = s.spawn(|| b.rnic.accept_blocking(l, &qb, mpa::Config::default(), T));
        a.rnic
            .connect_to_blocking(&qa, &l.transport, mpa::Config::default(), T)
            .unwrap();
        h.join().unwrap().unwrap();
    });
    let mem = PairMem {
        a_src: mr(&a.rnic, a.pd, WRITE_LEN + SEND_LEN),
        a_sink: mr(&a.rnic, a.pd, READ_LEN),
        b_write: mr(&b.rnic, b.pd, WRITE_LEN),
        b_recv: mr(&b.rnic, b.pd, SEND_LEN),
        b_read_src: mr(&b.rnic, b.pd, READ_LEN),
    };
    Pair { qa, qb, mem }
}

/// How many QPs of `qps` each progress thread serves.
fn per_thread(qps: &[&Qp], threads: usize) -> Vec<usize> {
    let mut n = vec![0; threads];
    for q in qps {
        let t = q.progress_thread();
        assert!(t < threads, "QP on thread {t} of {threads}");
        n[t] += 1;
    }
    n
}

/// Polls `get` until `ok` holds of what it returns, for up to [`T`]; then fails with the
/// value last seen and what was `want`ed.
fn wait_until<V: std::fmt::Debug>(get: impl Fn() -> V, ok: impl Fn(&V) -> bool, want: &str) {
    let start = Instant::now();
    loop {
        let got = get();
        if ok(&got) {
            return;
        }
        assert!(start.elapsed() < T, "{got:?}, {want} expected");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Checks that the QPs are spread as `want` says. A QP is placed right after the pass of
/// thread 0 that reported it established, so the last one may need a moment.
fn assert_spread(qps: &[&Qp], want: &[usize]) {
    wait_until(
        || per_thread(qps, want.len()),
        |got| got == want,
        &format!("QPs per progress thread {want:?}"),
    );
}

/// Drains `n` completions from `cq`.
fn take(cq: &Cq, n: usize) -> Vec<Wc> {
    let start = Instant::now();
    let mut out = Vec::new();
    while out.len() < n {
        assert!(
            start.elapsed() < T,
            "{} of {n} completions after {T:?}",
            out.len()
        );
        if !cq.wait(Duration::from_millis(100)) {
            continue;
        }
        while let Some(wc) = cq.poll_one() {
            out.push(wc);
        }
    }
    assert_eq!(out.len(), n, "more completions than work");
    out
}

/// Runs a Write, a Send and a Read on every pair (wr_id = round × 1000 + pair × 4 + op)
/// and checks every completion and every byte.
fn run_ops(a: &Node, b: &Node, pairs: &[Pair], round: u64) {
    for (i, p) in pairs.iter().enumerate() {
        let seed = round * 1000 + i as u64;
        let m = &p.mem;
        m.a_src
            .buf()
            .write_at(0, &pattern(WRITE_LEN + SEND_LEN, seed))
            .unwrap();
        m.b_read_src
            .buf()
            .write_at(0, &pattern(READ_LEN, seed + 500))
            .unwrap();
        let id = round * 1000 + i as u64 * 4;
        p.qb.post_recv(RecvWr::new(id + 1, vec![m.b_recv.sge(0, SEND_LEN as u32)]))
            .unwrap();
    }
    for (i, p) in pairs.iter().enumerate() {
        let m = &p.mem;
        let id = round * 1000 + i as u64 * 4;
        let wrs = vec![
            SendWr::write(
                id,
                vec![m.a_src.sge(0, WRITE_LEN as u32)],
                m.b_write.stag(),
                m.b_write.to_at(0),
            ),
            SendWr::send(id + 1, vec![m.a_src.sge(WRITE_LEN as u64, SEND_LEN as u32)]),
            SendWr::read(
                id + 2,
                vec![m.a_sink.sge(0, READ_LEN as u32)],
                m.b_read_src.stag(),
                m.b_read_src.to_at(0),
            ),
        ];
        assert_eq!(p.qa.post_send_batch(wrs).unwrap(), 3);
    }
    let mut sent = take(&a.scq, 3 * pairs.len());
    let mut recvd = take(&b.rcq, pairs.len());
    sent.sort_by_key(|w| w.wr_id);
    recvd.sort_by_key(|w| w.wr_id);
    for (i, p) in pairs.iter().enumerate() {
        let id = round * 1000 + i as u64 * 4;
        let ops: Vec<_> = sent
            .iter()
            .filter(|w| w.wr_id >= id && w.wr_id < id + 4)
            .map(|w| (w.wr_id - id, w.opcode, w.status, w.qp))
            .collect();
        assert_eq!(
            ops,
            vec![
                (0, WcOpcode::RdmaWrite, WcStatus::Success, p.qa.id()),
                (1, WcOpcode::Send, WcStatus::Success, p.qa.id()),
                (2, WcOpcode::RdmaRead, WcStatus::Success, p.qa.id()),
            ],
            "pair {i}"
        );
        let r = recvd.iter().find(|w| w.wr_id == id + 1).unwrap();
        assert_eq!(
            (r.opcode, r.status, r.byte_len as usize, r.qp),
            (WcOpcode::Recv, WcStatus::Success, SEND_LEN, p.qb.id()),
            "pair {i}"
        );
        let seed = round * 1000 + i as u64;
        let src = pattern(WRITE_LEN + SEND_LEN, seed);
        let m = &p.mem;
        assert_eq!(
            m.b_write.buf().read_range(0..WRITE_LEN).unwrap(),
            src[..WRITE_LEN],
            "pair {i}: RDMA Write data"
        );
        assert_eq!(
            m.b_recv.buf().read_range(0..SEND_LEN).unwrap(),
            src[WRITE_LEN..],
            "pair {i}: Send data"
        );
        assert_eq!(
            m.a_sink.buf().read_range(0..READ_LEN).unwrap(),
            pattern(READ_LEN, seed + 500),
            "pair {i}: RDMA Read data"
        );
    }
}

/// Waits until `n`'s count of established connections per progress thread
/// ([`Rnic::progress_thread_loads`]) is as `ok` wants. A connection is counted in the pass
/// that reports it established and uncounted in the one that reports it closed, so either
/// may need a moment.
fn wait_loads(n: &Node, ok: impl Fn(&[usize]) -> bool, want: &str) {
    wait_until(
        || n.rnic.progress_thread_loads(),
        |l| ok(l),
        &format!("connections per thread {want}"),
    );
}

/// Disconnects the pairs whose initiator runs on progress thread `thread` (graceful close),
/// from A's side; both sides see the close and destroy their QPs. Returns the other pairs.
fn disconnect_thread(a: &Node, b: &Node, pairs: Vec<Pair>, thread: usize) -> Vec<Pair> {
    let (gone, kept): (Vec<Pair>, Vec<Pair>) = pairs
        .into_iter()
        .partition(|p| p.qa.progress_thread() == thread);
    for p in &gone {
        a.rnic.disconnect(&p.qa).unwrap();
    }
    for p in &gone {
        a.rnic.wait_disconnected(&p.qa, T).unwrap();
        b.rnic.wait_disconnected(&p.qb, T).unwrap();
        a.rnic.destroy_qp(&p.qa).unwrap();
        b.rnic.destroy_qp(&p.qb).unwrap();
    }
    // A closed connection leaves its thread's count right after it reports the close: wait
    // for that on both sides, so that the next connection finds the thread as expected.
    for (n, qps) in [
        (a, kept.iter().map(|p| &p.qa).collect::<Vec<_>>()),
        (b, kept.iter().map(|p| &p.qb).collect()),
    ] {
        let on = qps.iter().filter(|q| q.progress_thread() == thread).count();
        wait_loads(n, |l| l[thread] == on, &format!("{on} on thread {thread}"));
    }
    kept
}

fn many_pairs(threads: usize) {
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let (a, b) = (Node::new(threads), Node::new(threads));
    let mut pairs: Vec<Pair> = (0..PAIRS).map(|_| connect(&a, &b, any)).collect();

    // Least-loaded placement of connections established one after another: every thread
    // serves the same number of QPs, on both RNICs.
    let even = vec![PAIRS / threads; threads];
    assert_spread(&pairs.iter().map(|p| &p.qa).collect::<Vec<_>>(), &even);
    assert_spread(&pairs.iter().map(|p| &p.qb).collect::<Vec<_>>(), &even);

    // CQs shared by QPs on every thread.
    run_ops(&a, &b, &pairs, 1);
    run_ops(&a, &b, &pairs, 2);

    // Disconnect the pairs whose initiator runs on the last thread (graceful close), from
    // A's side; both sides see the close.
    let last = threads - 1;
    let before = pairs.len();
    pairs = disconnect_thread(&a, &b, pairs, last);
    assert_eq!(before - pairs.len(), PAIRS / threads);

    // New connections go to the thread that lost its QPs (the least loaded one).
    let fresh: Vec<Pair> = (0..PAIRS / threads).map(|_| connect(&a, &b, any)).collect();
    let mut last_only = vec![0; threads];
    last_only[last] = PAIRS / threads;
    assert_spread(&fresh.iter().map(|p| &p.qa).collect::<Vec<_>>(), &last_only);
    assert_spread(&fresh.iter().map(|p| &p.qb).collect::<Vec<_>>(), &last_only);
    pairs.extend(fresh);
    run_ops(&a, &b, &pairs, 3);
    assert!(a.scq.poll_one().is_none() && b.rcq.poll_one().is_none());
}

/// Connects six pairs through `b`'s listener `l` (both RNICs with two progress threads) and
/// checks what placement promises on every transport: both sides spread 3 / 3 and counted
/// so, Write/Send/Read verified on every pair, the pairs on thread 1 disconnected from A's
/// side, and a new pair placed on thread 1 on both sides, all verified again. Returns the
/// pairs still connected.
fn placed_pairs(a: &Node, b: &Node, l: &Listener) -> Vec<Pair> {
    const N: usize = 6;
    let mut pairs: Vec<Pair> = (0..N).map(|_| connect_to(a, b, l)).collect();
    for side in [
        pairs.iter().map(|p| &p.qa).collect::<Vec<_>>(),
        pairs.iter().map(|p| &p.qb).collect::<Vec<_>>(),
    ] {
        assert_spread(&side, &[N / 2, N / 2]);
    }
    for n in [a, b] {
        wait_loads(n, |l| l == [N / 2, N / 2], "[3, 3]");
    }
    run_ops(a, b, &pairs, 1);

    pairs = disconnect_thread(a, b, pairs, 1);
    assert_eq!(pairs.len(), N / 2);
    let fresh = connect_to(a, b, l);
    assert_spread(&[&fresh.qa], &[0, 1]);
    assert_spread(&[&fresh.qb], &[0, 1]);
    pairs.push(fresh);
    run_ops(a, b, &pairs, 2);
    pairs
}

/// Several progress threads over softrnic's own SCTP (RFC 5043, UDP encapsulation on
/// loopback): an active association has an endpoint of its own, which moves with it to the
/// least-loaded thread once established, as a TCP connection does. The associations a
/// listener accepted move too, each to an endpoint of its own on that thread: the listener's
/// endpoint on thread 0 reads the shared sockets and passes their packets on. The thread-1
/// pairs disconnect with SCTP SHUTDOWN (RFC 5043 §6.4) ([`placed_pairs`]). The closed
/// listener answers a new association with ABORT (RFC 9260 §8.4) while the ones it accepted
/// go on; those on thread 0 are destroyed (ABORT), the listener's endpoint still serves
/// those on thread 1, and they close from the passive side.
#[test]
fn sctp_associations_are_placed_on_further_progress_threads() {
    let (a, b) = (Node::new(2), Node::new(2));
    let at: TransportAddr = "sctp+udp://127.0.0.1:7179?udp-port=0".parse().unwrap();
    let l = b.rnic.listen_on(&at).unwrap();
    let pairs = placed_pairs(&a, &b, &l);

    b.rnic.close_listener(&l);
    let refused = a.qp();
    let err = a
        .rnic
        .connect_to_blocking(&refused, &l.transport, mpa::Config::default(), T)
        .expect_err("connected to a closed listener");
    // The ABORT ends the setup as a reset (a listener that stayed open would have
    // accepted; a lost INIT would have timed out).
    assert!(err.to_string().contains("Reset"), "closed listener: {err}");
    run_ops(&a, &b, &pairs, 3);
    // The accepted associations thread 0 kept are destroyed (ABORT): the closed listener's
    // endpoint then has none of its own, but still reads the packets of those it passed to
    // thread 1, whose pairs go on.
    let (kept, pairs): (Vec<Pair>, Vec<Pair>) =
        pairs.into_iter().partition(|p| p.qb.progress_thread() == 0);
    assert!(
        !kept.is_empty() && !pairs.is_empty(),
        "accepted associations on both threads"
    );
    for p in &kept {
        b.rnic.destroy_qp(&p.qb).unwrap();
        a.rnic.wait_disconnected(&p.qa, T).unwrap();
    }
    wait_loads(&b, |l| l[0] == 0, "none on thread 0");
    run_ops(&a, &b, &pairs, 4);
    for p in &pairs {
        b.rnic.disconnect(&p.qb).unwrap();
    }
    for p in &pairs {
        b.rnic.wait_disconnected(&p.qb, T).unwrap();
        a.rnic.wait_disconnected(&p.qa, T).unwrap();
    }
    for n in [&a, &b] {
        wait_loads(n, |l| l == [0, 0], "[0, 0]");
    }
}

/// Several progress threads over softrnic's own TCP/IP on a raw-Ethernet device (a datagram
/// cable between the two RNICs): the device, its frames and its TCP stay with thread 0,
/// which wakes the thread a connection was placed on when the device has something for it;
/// the connection's MPA/DDP/RDMAP work runs there. The thread-1 pairs close gracefully
/// (RFC 5044 §7.1) ([`placed_pairs`]).
#[test]
fn device_connections_are_placed_on_further_progress_threads() {
    let (la, lb) = Link::datagram_pair().unwrap();
    let (a, b) = (Node::new(2), Node::new(2));
    for (n, link, ip) in [(&a, la, [10, 9, 0, 1]), (&b, lb, [10, 9, 0, 2])] {
        n.rnic
            .attach_device("cable0", link, &DeviceConfig::new(ip.into(), 24))
            .unwrap();
    }
    let at: TransportAddr = "dev://cable0/10.9.0.2:7174".parse().unwrap();
    let l = b.rnic.listen_on(&at).unwrap();
    let pairs = placed_pairs(&a, &b, &l);
    run_ops(&a, &b, &pairs, 3);
    b.rnic.close_listener(&l);
}

/// Kernel SCTP associations (`ksctp://`, one-to-one sockets) move to the least-loaded
/// thread once established on both sides, the accepted ones too (each is a socket of its
/// own); the thread-1 pairs disconnect with SCTP SHUTDOWN (RFC 5043 §6.4)
/// ([`placed_pairs`]). Runs where the kernel has SCTP (the interop lab's ksctp-loopback
/// scenario); elsewhere it returns.
#[test]
fn kernel_sctp_associations_are_placed_on_further_progress_threads() {
    if !kernel_sctp_for_test() {
        return;
    }
    let (a, b) = (Node::new(2), Node::new(2));
    let at: TransportAddr = "ksctp://127.0.0.1:7189".parse().unwrap();
    let l = b.rnic.listen_on(&at).unwrap();
    placed_pairs(&a, &b, &l);
    b.rnic.close_listener(&l);
}

/// Two progress threads: 64 QP pairs, half on each thread, Write/Send/Read verified into
/// shared CQs, disconnect and reconnect.
#[test]
fn two_threads_many_qps() {
    many_pairs(2);
}

/// Four progress threads: the same with 16 QP pairs per thread.
#[test]
fn four_threads_many_qps() {
    many_pairs(4);
}

/// One progress thread (the default) runs everything on thread 0, with the thread named as
/// before.
#[test]
fn one_thread_keeps_every_qp_on_thread_0() {
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let (a, b) = (Node::new(1), Node::new(1));
    let pairs: Vec<Pair> = (0..4).map(|_| connect(&a, &b, any)).collect();
    for p in &pairs {
        assert_eq!((p.qa.progress_thread(), p.qb.progress_thread()), (0, 0));
    }
    run_ops(&a, &b, &pairs, 1);
}

/// Each progress thread has a name of its own as the kernel shows it (15 bytes), so that
/// `perf` and `top -H` tell them apart.
#[test]
fn progress_threads_are_named_apart() {
    let _rnic = open(3);
    let names = || -> Vec<String> {
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
            .map(|n| n.trim_end().to_string())
            .collect()
    };
    let want = ["softrnic-prog0", "softrnic-prog1", "softrnic-prog2"];
    // A thread names itself once it runs.
    let start = Instant::now();
    while !want.iter().all(|w| names().iter().any(|n| n == w)) && start.elapsed() < T {
        std::thread::sleep(Duration::from_millis(1));
    }
    let names = names();
    for w in want {
        assert!(names.iter().any(|n| n == w), "{w} not in {names:?}");
    }
}

/// A QP on one thread whose peer never reads (its socket fills, its work stays outstanding)
/// does not hold up the QPs of the other thread, which run their work to completion; once
/// the peer reads, the stalled QP's work completes as well.
#[test]
fn stalled_qp_does_not_hold_up_another_thread() {
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let (a, b) = (Node::new(2), Node::new(2));

    // The stalled QP: a connection in full operation from the start, whose peer is a plain
    // TCP socket nobody reads from.
    let raw = TcpListener::bind(any).unwrap();
    let stream = TcpStream::connect(raw.local_addr().unwrap()).unwrap();
    let (mut peer, _) = raw.accept().unwrap();
    let scq = Cq::new(1024);
    let stalled = a
        .rnic
        .create_qp(QpAttr::new(a.pd, scq.clone(), scq.clone()))
        .unwrap();
    let session = Session {
        role: Role::Initiator,
        revision: 2,
        crc: true,
        markers_tx: false,
        markers_rx: false,
        enhanced: true,
        ird: 16,
        ord: 16,
        p2p: false,
        rtr: None,
        peer_private_data: Vec::new(),
    };
    a.rnic
        .adopt(&stalled, stream, AdoptRole::Established(session))
        .unwrap();
    let t0 = Instant::now();
    while stalled.state() != QpState::Rts {
        assert!(t0.elapsed() < T, "adopted connection not in full operation");
        std::thread::sleep(Duration::from_millis(1));
    }
    // The first established connection goes to thread 0 (all threads empty: the lowest).
    assert_spread(&[&stalled], &[1, 0]);

    // Far more than the socket buffers hold.
    const BIG: usize = 1 << 20;
    const STALL_WRS: u64 = 64;
    let big = mr(&a.rnic, a.pd, BIG);
    for i in 0..STALL_WRS {
        stalled
            .post_send(SendWr::write(
                9_000_000 + i,
                vec![big.sge(0, BIG as u32)],
                0x1234,
                0,
            ))
            .unwrap();
    }
    // Let its socket fill.
    let t0 = Instant::now();
    let mut done = 0;
    while t0.elapsed() < Duration::from_millis(300) {
        while scq.poll_one().is_some() {
            done += 1;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        stalled.sq_outstanding() > 0,
        "the peer reads nothing, yet all {STALL_WRS} MiB went out"
    );

    // Pairs on thread 1 meanwhile run their work to the end (set up by thread 0, where
    // the stalled QP is). Placement alternates: thread 1, then 0, then 1 ...
    let all: Vec<Pair> = (0..16).map(|_| connect(&a, &b, any)).collect();
    assert_spread(&all.iter().map(|p| &p.qa).collect::<Vec<_>>(), &[8, 8]);
    let pairs: Vec<Pair> = all
        .into_iter()
        .filter(|p| p.qa.progress_thread() == 1)
        .collect();
    assert_eq!(pairs.len(), 8);
    for round in 1..=3 {
        run_ops(&a, &b, &pairs, round);
    }
    assert!(
        stalled.sq_outstanding() > 0,
        "the stalled QP is still stalled"
    );

    // The peer reads: the stalled QP's work completes.
    let reader = std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 16];
        let mut total = 0usize;
        while let Ok(n) = peer.read(&mut buf) {
            if n == 0 {
                break;
            }
            total += n;
        }
        total
    });
    let rest = take(&scq, STALL_WRS as usize - done);
    assert!(
        rest.iter()
            .all(|w| w.status == WcStatus::Success && w.qp == stalled.id())
    );
    assert_eq!(stalled.sq_outstanding(), 0);
    a.rnic.destroy_qp(&stalled).unwrap();
    let total = reader.join().unwrap();
    assert!(total >= STALL_WRS as usize * BIG, "{total} bytes read");
}
