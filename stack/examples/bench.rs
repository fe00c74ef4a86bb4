//! Data-path benchmark over loopback: RDMA Write bandwidth and latency of the runtime
//! against plain kernel TCP doing the same job.
//!
//! `cargo run --release -p softrnic-stack --example bench [-- --secs S --rounds R --bw-only
//! --crc-only --only TEXT [--exact] --read-chunk BYTES --socket-buffer BYTES --progress-threads N
//! --pin]` (`--only`: just the
//! RDMA rows whose name contains TEXT, e.g. `--only "CRC on,  manual"`, handy under
//! `perf record`; with `--exact` only the row named exactly TEXT; `--read-chunk` and `--socket-buffer` set the RNICs' `RnicConfig` fields
//! of those names, default 256 KiB and kernel autotuning, and `--progress-threads` the
//! progress threads of the RNICs in the bandwidth runs (default 1; the one test QP runs on
//! thread 0 whatever the number, so the rows show what idle extra threads cost); `--pin` runs the benchmark's
//! transmitting threads on CPU 0 and its receiving ones on CPU 1 — the TCP threads and, in
//! manual progress, both RDMA sides; progress threads stay unpinned)
//!
//! * Bandwidth: 64 KiB RDMA Writes, 32 outstanding: CRC off and on, progress threads with
//!   busy polling off and at 50 µs, manual progress; beside them 64 KiB RDMA Reads (32
//!   outstanding, IRD = ORD = 32) and Sends (32 outstanding; the receiver's thread re-posts
//!   each receive as it completes, 1024 posted up front) with CRC on. The send queue is refilled with one
//!   list of work requests (`post_send_batch`, as the verbs' `qp_post_sq` takes a list);
//!   "1 WR/post" rows post them one by one, "copy tx" rows turn zero-copy transmit off;
//!   the "wait for 8" row's sender sleeps until 8 completions are queued
//!   (`Cq::wait_for`) instead of until the first, as a TCP writer blocked on a full socket
//!   is woken only once a third of its buffer is free;
//!   `--crc-only` skips CRC off. The reference is a plain TCP stream writing 64 KiB chunks
//!   from one thread and reading them in another. A second TCP row adds to that stream
//!   exactly the work MPA with CRC makes unavoidable over a kernel socket (CRC32c of every
//!   message at both ends, and at the receiver a copy from the read buffer into place after
//!   the check, RFC 5044 §8): what the iWARP data path costs at TCP's own 64 KiB system
//!   calls; the runtime does better only by moving more per call. Each configuration runs
//!   `R` times (default 5), interleaved, with a plain TCP run between any two; every run is
//!   set against the mean of the TCP runs right before and after it, and the table shows
//!   medians (MB/s and ratio) and the range of the ratios (the machine may be shared: the
//!   neighbouring TCP runs see the same load), plus MB per CPU second of the whole process
//!   (all threads), which shows the data path's cost even when other work shares the
//!   machine (not comparable for busy polling, which burns CPU by design).
//! * DDP over softrnic's SCTP (RFC 5043 over RFC 6951 UDP encapsulation), the same 64 KiB
//!   RDMA Writes at path MTUs 1500, 9000 and 64 KiB (DDP segments sized to fit, §9), set
//!   against the same TCP stream; `--crc-only` keeps these rows (SCTP has its own CRC32c).
//! * Latency: 2-byte RDMA Write ping-pong (arrival detected by polling the target byte)
//!   against plain TCP 2-byte ping-pongs (TCP_NODELAY) that wait the same way: blocking in
//!   `read`, or spinning on a non-blocking socket; half round trip. The RDMA side runs in
//!   manual-progress mode (each side's polling thread drives its own RNIC: two threads,
//!   like the TCP ping-pong; set against the spinning TCP) and with progress threads,
//!   busy polling at 50 µs (against the spinning TCP), with the polling loops calling
//!   `Rnic::assist` (inline progress: the application places and sends, the thread sleeps;
//!   against the spinning TCP) and busy polling off (the thread sleeps in
//!   `epoll_wait`: against the blocking TCP). Each of the `R` rounds runs both TCP
//!   ping-pongs and every RDMA row; every ratio is taken within its round, and the table
//!   shows the medians and the range of the ratios.
//!
//! The README's table is this program's output with the defaults (`--secs 1` aside): every
//! figure a median of `--rounds` runs (default 5), every ratio between runs of one
//! invocation.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use stack::addr::TransportAddr;
use stack::mpa::{self, CrcPolicy};
use stack::{
    Access, Cq, MemoryRegion, MrOptions, ProgressMode, Qp, QpAttr, RecvWr, Rnic, RnicConfig, SendWr,
};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::prelude::*;

const MSG: usize = 64 * 1024;
/// Receives the Send rows' receiver posts up front (its RQ holds twice as many). iWARP has
/// no receiver-not-ready retry: a Send with no receive posted ends the connection (RFC 5041
/// §7.2), so the sender sends only into receives the receiver reports posted (credits, as an
/// application over RDMA does).
const RECVS: u64 = 1024;

/// CPU time used so far by the whole process (all threads), from `/proc/self/stat`
/// (utime + stime, in clock ticks of 10 ms); 0 where unavailable.
fn cpu_secs() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the parenthesised command name start at field 3; utime and stime are
    // fields 14 and 15.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|x| x.parse().ok())
        .collect();
    f.iter().sum::<u64>() as f64 / 100.0
}

/// Voluntary context switches so far of the process's live threads (each a sleep that
/// some wake-up ended), from `/proc/self/task/*/status`; 0 where unavailable.
fn sleeps() -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("status")).ok())
        .filter_map(|st| {
            st.lines()
                .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
                .and_then(|v| v.trim().parse::<u64>().ok())
        })
        .sum()
}

/// A bandwidth run: MB/s of wall-clock time, MB per second of CPU time (what the data
/// path costs, which barely depends on what else the machine runs) and sleeps (voluntary
/// context switches of all threads) per MB: the wake-ups the data path needs.
#[derive(Clone, Copy, Default)]
struct Bw {
    wall: f64,
    cpu: f64,
    sleeps: f64,
}

struct Side {
    rnic: Rnic,
    qp: Qp,
    cq: Cq,
    mr: MemoryRegion,
}

fn side(rc: RnicConfig, len: usize) -> Side {
    let rnic = Rnic::open(rc).expect("rnic");
    let pd = rnic.alloc_pd();
    let cq = Cq::new(65536);
    let mut attr = QpAttr::new(pd, cq.clone(), cq.clone());
    attr.sq_depth = 1024;
    attr.rq_depth = 2 * RECVS as usize;
    let qp = rnic.create_qp(attr).expect("qp");
    let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
    let mr = rnic
        .mem()
        .register_new(pd, len, MrOptions::new(access))
        .expect("mr");
    Side { rnic, qp, cq, mr }
}

/// Two RNICs connected over loopback: MPA over kernel TCP, or with `sctp_mtu` DDP over
/// softrnic's SCTP with UDP encapsulation and that path MTU.
fn connect(rc: RnicConfig, crc: bool, len: usize, sctp_mtu: Option<usize>) -> (Side, Side) {
    let a = side(rc.clone(), len);
    let b = side(rc, len);
    let at: TransportAddr = match sctp_mtu {
        None => "127.0.0.1:0".parse().unwrap(),
        Some(m) => format!("sctp+udp://127.0.0.1:7174?udp-port=0&mtu={m}")
            .parse()
            .unwrap(),
    };
    let l = b.rnic.listen_on(&at).unwrap();
    // IRD = ORD = 32: the Read rows keep 32 Reads outstanding, as the other rows do Writes.
    let cfg = mpa::Config {
        crc: if crc {
            CrcPolicy::Require
        } else {
            CrcPolicy::Accept
        },
        ird: 32,
        ord: 32,
        ird_max: 32,
        ..mpa::Config::default()
    };
    let t = Duration::from_secs(10);
    std::thread::scope(|s| {
        let c2 = cfg.clone();
        let h = s.spawn(|| b.rnic.accept_blocking(&l, &b.qp, c2, t).unwrap());
        a.rnic
            .connect_to_blocking(&a.qp, &l.transport, cfg, t)
            .unwrap();
        h.join().unwrap();
    });
    (a, b)
}

/// What a bandwidth row's work requests do, 64 KiB each.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    /// RDMA Write into the peer's region.
    Write,
    /// RDMA Read from the peer's region.
    Read,
    /// Send into a receive the peer posted.
    Send,
}

/// One RDMA configuration of the bandwidth table.
#[derive(Clone, Copy)]
struct Row {
    name: &'static str,
    op: Op,
    crc: bool,
    /// Progress thread with this busy-poll window; `None`: manual progress.
    busy_poll: Option<Duration>,
    zero_copy: bool,
    /// Refill the send queue with one `post_send_batch` (a list of work requests, as the
    /// verbs' `qp_post_sq` takes) rather than one `post_send` per request.
    list: bool,
    /// DDP over softrnic's SCTP (UDP encapsulation) with this path MTU instead of MPA/TCP.
    sctp_mtu: Option<usize>,
    /// Progress thread: the sender sleeps until this many completions are queued
    /// (`Cq::wait_for`, a low-water mark like a socket's) rather than until the first.
    wait_for: usize,
    /// The log filter is `info` during the run (a subscriber formats the runtime's events to
    /// stderr); every other run has logging off.
    log_info: bool,
}

/// 64 KiB RDMA Writes, Reads or Sends for `secs`; returns MB/s (10^6). `busy_poll: None`
/// runs both RNICs in manual-progress mode, each driven by one thread (two threads in all,
/// like the TCP stream). The Send rows' receiving thread re-posts each receive as it
/// completes (and, in manual progress, drives its RNIC as well).
fn rdma_bw(row: Row, secs: f64, base: &RnicConfig) -> Bw {
    let Row {
        op,
        crc,
        busy_poll,
        zero_copy,
        list,
        sctp_mtu,
        wait_for,
        ..
    } = row;
    let rc = RnicConfig {
        zero_copy_tx: zero_copy,
        busy_poll: busy_poll.unwrap_or_default(),
        progress: if busy_poll.is_some() {
            ProgressMode::Thread
        } else {
            ProgressMode::Manual
        },
        ..base.clone()
    };
    let manual = busy_poll.is_none();
    let (a, b) = connect(rc, crc, MSG, sctp_mtu);
    if op == Op::Send {
        for id in 0..RECVS {
            b.qp.post_recv(RecvWr::new(id, vec![b.mr.sge(0, MSG as u32)]))
                .unwrap();
        }
    }
    let stop = AtomicBool::new(false);
    // Receives posted so far (the Send rows' credits).
    let recvs = AtomicU64::new(RECVS);
    // Named threads, so that `perf report --sort comm` splits the cost by side.
    std::thread::scope(|s| {
        if manual || op == Op::Send {
            named(s, "rdma-rx", || receiver(&b, op, manual, &recvs, &stop));
        }
        let w = named(s, "rdma-tx", || {
            let r = stream(&a, &b, op, &recvs, manual, list, wait_for, secs);
            stop.store(true, Ordering::Relaxed);
            r
        });
        w.join().unwrap()
    })
}

/// The receiving side's thread until `stop`: in manual progress it drives its RNIC; in the
/// Send rows it re-posts every completed receive and counts it in `recvs`.
fn receiver(b: &Side, op: Op, manual: bool, recvs: &AtomicU64, stop: &AtomicBool) {
    let mut wcs = [stack::Wc::new(
        stack::QpId(0),
        0,
        stack::WcOpcode::Recv,
        stack::WcStatus::Success,
    ); 64];
    let mut next = RECVS;
    while !stop.load(Ordering::Relaxed) {
        if manual {
            let _ = b.rnic.advance(Duration::from_millis(1));
        } else {
            b.cq.wait_for(1, Duration::from_millis(10));
        }
        if op != Op::Send {
            continue;
        }
        let n = b.cq.poll(&mut wcs);
        for wc in &wcs[..n] {
            assert!(wc.status.is_success(), "{wc:?}");
            b.qp.post_recv(RecvWr::new(next, vec![b.mr.sge(0, MSG as u32)]))
                .unwrap();
            next += 1;
        }
        recvs.store(next, Ordering::Release);
    }
}

fn named<'s, 'e, T: Send + 's>(
    s: &'s std::thread::Scope<'s, 'e>,
    name: &str,
    f: impl FnOnce() -> T + Send + 's,
) -> std::thread::ScopedJoinHandle<'s, T> {
    let cpu = pin_cpu(name);
    std::thread::Builder::new()
        .name(name.into())
        .spawn_scoped(s, move || {
            pin(cpu);
            f()
        })
        .unwrap()
}

/// With `--pin`: the CPU a benchmark thread runs on (transmitting threads on CPU 0,
/// receiving ones on CPU 1, the same for TCP and RDMA runs; the runtime's progress
/// threads are not the benchmark's and stay unpinned).
fn pin_cpu(name: &str) -> Option<usize> {
    std::env::args()
        .any(|a| a == "--pin")
        .then(|| usize::from(name.ends_with("rx")))
}

fn pin(cpu: Option<usize>) {
    if let Some(c) = cpu {
        let mut set = rustix::thread::CpuSet::new();
        set.set(c);
        let _ = rustix::thread::sched_setaffinity(None, &set);
    }
}

/// The sending side's loop: keeps 32 work requests outstanding (Sends also no more than the
/// receives `recvs` counts) for `secs` after a 0.2 s warm-up.
#[allow(clippy::too_many_arguments)]
fn stream(
    a: &Side,
    b: &Side,
    op: Op,
    recvs: &AtomicU64,
    manual: bool,
    list: bool,
    wait_for: usize,
    secs: f64,
) -> Bw {
    let depth = 32u64;
    let (stag, to) = (b.mr.stag(), b.mr.to_at(0));
    let mut posted = 0u64;
    let mut done = 0u64;
    let mut wcs = [stack::Wc::new(
        stack::QpId(0),
        0,
        stack::WcOpcode::Send,
        stack::WcStatus::Success,
    ); 64];
    // Warm up, then measure.
    let mut start = Instant::now();
    let mut warm = true;
    let mut base = 0u64;
    let mut cpu0 = 0.0;
    let mut sleeps0 = 0;
    loop {
        let wr = |id: u64| {
            let sgl = vec![a.mr.sge(0, MSG as u32)];
            match op {
                Op::Write => SendWr::write(id, sgl, stag, to),
                Op::Read => SendWr::read(id, sgl, stag, to),
                Op::Send => SendWr::send(id, sgl),
            }
        };
        let limit = match op {
            Op::Send => recvs.load(Ordering::Acquire),
            _ => u64::MAX,
        };
        if list {
            let n = (depth - (posted - done)).min(limit - posted);
            a.qp.post_send_batch((posted..posted + n).map(wr)).unwrap();
            posted += n;
        }
        while posted - done < depth && posted < limit {
            a.qp.post_send(wr(posted)).unwrap();
            posted += 1;
        }
        if posted == done {
            // Nothing outstanding: waiting for the receiver's credits.
            std::thread::yield_now();
        } else if manual {
            // Posting transmits inline and may complete work: block only on an empty CQ.
            if a.cq.is_empty() {
                let _ = a.rnic.advance(Duration::from_millis(1));
            }
        } else if a.cq.is_empty() {
            a.cq.wait_for(wait_for, Duration::from_millis(100));
        }
        let n = a.cq.poll(&mut wcs);
        for wc in wcs.iter().take(n) {
            assert!(wc.status.is_success(), "{wc:?}");
        }
        done += n as u64;
        let el = start.elapsed().as_secs_f64();
        if warm && el > 0.2 {
            warm = false;
            start = Instant::now();
            base = done;
            cpu0 = cpu_secs();
            sleeps0 = sleeps();
        } else if !warm && el > secs {
            let mb = (done - base) as f64 * MSG as f64 / 1e6;
            return Bw {
                wall: mb / el,
                cpu: mb / (cpu_secs() - cpu0).max(0.01),
                sleeps: (sleeps() - sleeps0) as f64 / mb.max(1.0),
            };
        }
    }
}

/// A plain TCP stream of 64 KiB writes for `secs`; returns MB/s.
///
/// With `mpa_work`, each end also does the work MPA with CRC cannot avoid over a kernel
/// socket, and nothing else: the sender computes the CRC32c of every message, the receiver
/// reads whole messages, computes their CRC32c and then copies each into a separate
/// destination (RFC 5044 §8: an FPDU is verified before its ULPDU goes to DDP, so a
/// receiver places from its read buffer after the check): the cost of an iWARP data path
/// over kernel TCP at the same 64 KiB system calls.
fn tcp_bw(secs: f64, mpa_work: bool) -> Bw {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    let side = |end: &str| format!("{}-{end}", if mpa_work { "ceil" } else { "tcp" });
    let (rx_cpu, tx_cpu) = (pin_cpu("rx"), pin_cpu("tx"));
    let reader = std::thread::Builder::new().name(side("rx")).spawn(move || {
        pin(rx_cpu);
        let (mut s, _) = l.accept().unwrap();
        let mut buf = vec![0u8; MSG];
        let mut dst = vec![0u8; MSG];
        let mut total = 0u64;
        let mut start = Instant::now();
        let mut cpu0 = 0.0;
        let mut sleeps0 = 0;
        let mut warm = true;
        loop {
            if mpa_work {
                if s.read_exact(&mut buf).is_err() {
                    break;
                }
                std::hint::black_box(mpa::crc::crc32c(&buf));
                dst.copy_from_slice(&buf);
                std::hint::black_box(&mut dst);
                total += MSG as u64;
            } else {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => total += n as u64,
                }
            }
            if warm && start.elapsed().as_secs_f64() > 0.2 {
                warm = false;
                start = Instant::now();
                total = 0;
                cpu0 = cpu_secs();
                sleeps0 = sleeps();
            }
            if !warm && start.elapsed().as_secs_f64() > secs {
                st.store(true, Ordering::SeqCst);
                let mb = total as f64 / 1e6;
                return Bw {
                    wall: mb / start.elapsed().as_secs_f64(),
                    cpu: mb / (cpu_secs() - cpu0).max(0.01),
                    sleeps: (sleeps() - sleeps0) as f64 / mb.max(1.0),
                };
            }
        }
        Bw::default()
    });
    let writer = std::thread::Builder::new().name(side("tx")).spawn(move || {
        pin(tx_cpu);
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_nodelay(true).unwrap();
        let buf = vec![0xa5u8; MSG];
        while !stop.load(Ordering::SeqCst) {
            if mpa_work {
                std::hint::black_box(mpa::crc::crc32c(std::hint::black_box(&buf)));
            }
            if s.write_all(&buf).is_err() {
                break;
            }
        }
    });
    writer.unwrap().join().unwrap();
    reader.unwrap().join().unwrap()
}

/// 2-byte RDMA Write ping-pong; returns the median half round trip in µs. `assist`: with
/// progress threads, the polling loops call `Rnic::assist` (inline progress).
fn rdma_write_lat(rc: RnicConfig, iters: usize, sctp_mtu: Option<usize>, assist: bool) -> f64 {
    let (a, b) = connect(rc, false, 64, sctp_mtu);
    let manual = a.rnic.config().progress == ProgressMode::Manual;
    let (sa, ta) = (a.mr.stag(), a.mr.to_at(0));
    let (sb, tb) = (b.mr.stag(), b.mr.to_at(0));
    // Bytes 0..2 receive, bytes 32..34 are the source.
    let wait = |s: &Side, want: u8| {
        let mut x = [0u8];
        let start = Instant::now();
        loop {
            if manual {
                let _ = s.rnic.advance(Duration::ZERO);
            } else if assist {
                s.rnic.assist();
            }
            s.mr.buf().read_at(1, &mut x).unwrap();
            if x[0] == want {
                return;
            }
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "ping lost: want {want} have {} sq {} state {:?} ord {:?}",
                x[0],
                s.qp.sq_outstanding(),
                s.qp.state(),
                s.qp.session().map(|x| (x.ird, x.ord))
            );
            std::thread::yield_now();
        }
    };
    let send = |s: &Side, stag: u32, to: u64, v: u8| {
        s.mr.buf().write_at(33, &[v]).unwrap();
        s.qp.post_send(SendWr::write(0, vec![s.mr.sge(32, 2)], stag, to).unsignaled())
            .unwrap();
    };
    let total = iters + iters / 10;
    let mut samples = Vec::with_capacity(total);
    std::thread::scope(|sc| {
        sc.spawn(|| {
            for i in 0..total {
                let v = (i % 250) as u8 + 1;
                wait(&b, v);
                send(&b, sa, ta, v);
            }
        });
        for i in 0..total {
            let v = (i % 250) as u8 + 1;
            let t0 = Instant::now();
            send(&a, sb, tb, v);
            wait(&a, v);
            samples.push(t0.elapsed().as_secs_f64() * 1e6 / 2.0);
        }
    });
    let mut s = samples.split_off(iters / 10);
    s.sort_by(f64::total_cmp);
    s[s.len() / 2]
}

/// Plain TCP 2-byte ping-pong; median half round trip in µs. `spin`: both ends wait for
/// the answer by polling a non-blocking socket (yielding between reads), as the RDMA rows
/// poll memory; otherwise they block in `read`.
fn tcp_lat(iters: usize, spin: bool) -> f64 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr: SocketAddr = l.local_addr().unwrap();
    let total = iters + iters / 10;
    let read2 = move |s: &mut TcpStream, b: &mut [u8; 2]| {
        let mut got = 0;
        while got < 2 {
            match s.read(&mut b[got..]) {
                Ok(0) => panic!("ping-pong peer closed"),
                Ok(n) => got += n,
                Err(e) if spin && e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::yield_now();
                }
                Err(e) => panic!("ping-pong read: {e}"),
            }
        }
    };
    let echo = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        s.set_nodelay(true).unwrap();
        s.set_nonblocking(spin).unwrap();
        let mut b = [0u8; 2];
        for _ in 0..total {
            read2(&mut s, &mut b);
            s.write_all(&b).unwrap();
        }
    });
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_nodelay(true).unwrap();
    s.set_nonblocking(spin).unwrap();
    let mut b = [1u8; 2];
    let mut samples = Vec::with_capacity(total);
    for _ in 0..total {
        let t0 = Instant::now();
        s.write_all(&b).unwrap();
        read2(&mut s, &mut b);
        samples.push(t0.elapsed().as_secs_f64() * 1e6 / 2.0);
    }
    echo.join().unwrap();
    let mut v = samples.split_off(iters / 10);
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The median of `v` (the mean of the middle two for an even count).
fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The range of the ratios `v`, as "lo-hi".
fn range(v: &[f64]) -> String {
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(0.0, f64::max);
    format!("{lo:.2}-{hi:.2}")
}

/// The latency table: every round measures both TCP ping-pongs and every RDMA row, and
/// each RDMA row's ratio is taken against the TCP ping-pong of the same round that waits
/// the same way (spinning against spinning: the manual-progress and busy-polling rows,
/// whose threads never sleep; blocking against blocking: the progress thread without busy
/// polling, which sleeps in `epoll_wait`). Medians of the rounds.
/// One row of the latency table.
struct LatRow {
    name: &'static str,
    cfg: RnicConfig,
    iters: usize,
    /// DDP over SCTP/UDP at this path MTU (kernel TCP when `None`).
    sctp_mtu: Option<usize>,
    /// Compared with the spinning TCP ping-pong (else the blocking one).
    spinning: bool,
    /// The polling loops call `Rnic::assist`.
    assist: bool,
}

fn latency_table(iters: usize, rounds: usize) {
    let manual_cfg = RnicConfig {
        progress: ProgressMode::Manual,
        ..RnicConfig::default()
    };
    let sleepy_cfg = RnicConfig {
        busy_poll: Duration::ZERO,
        ..RnicConfig::default()
    };
    let rows = [
        LatRow {
            name: "RDMA Write ping-pong, manual progress",
            cfg: manual_cfg.clone(),
            iters,
            sctp_mtu: None,
            spinning: true,
            assist: false,
        },
        LatRow {
            name: "RDMA Write, progress thread, polls assist",
            cfg: RnicConfig::default(),
            iters,
            sctp_mtu: None,
            spinning: true,
            assist: true,
        },
        LatRow {
            name: "RDMA Write, progress thread, busy poll 50us",
            cfg: RnicConfig::default(),
            iters: iters / 4,
            sctp_mtu: None,
            spinning: true,
            assist: false,
        },
        LatRow {
            name: "RDMA Write, progress thread, no busy poll",
            cfg: sleepy_cfg,
            iters: iters / 4,
            sctp_mtu: None,
            spinning: false,
            assist: false,
        },
        LatRow {
            name: "RDMA Write over SCTP/UDP, manual progress",
            cfg: manual_cfg,
            iters,
            sctp_mtu: Some(1500),
            spinning: true,
            assist: false,
        },
    ];
    let (mut block, mut spin) = (Vec::new(), Vec::new());
    let mut us = vec![Vec::new(); rows.len()];
    let mut ratio = vec![Vec::new(); rows.len()];
    for _ in 0..rounds {
        let (b, s) = (tcp_lat(iters, false), tcp_lat(iters, true));
        block.push(b);
        spin.push(s);
        for (i, r) in rows.iter().enumerate() {
            let t = rdma_write_lat(r.cfg.clone(), r.iters, r.sctp_mtu, r.assist);
            us[i].push(t);
            ratio[i].push(t / if r.spinning { s } else { b });
        }
    }
    println!(
        "{:<44} {:>10} {:>13} {:>10}",
        format!("latency, 2 bytes, half round trip ({rounds})"),
        "median us",
        "vs TCP",
        "range"
    );
    println!(
        "{:<44} {:>10.2} {:>13} {:>10}",
        "plain TCP ping-pong, blocking",
        median(&block),
        "1.00",
        ""
    );
    println!(
        "{:<44} {:>10.2} {:>13} {:>10}",
        "plain TCP ping-pong, spinning",
        median(&spin),
        "1.00",
        ""
    );
    for (i, r) in rows.iter().enumerate() {
        println!(
            "{:<44} {:>10.2} {:>13} {:>10}",
            r.name,
            median(&us[i]),
            format!(
                "{:.2} ({})",
                median(&ratio[i]),
                if r.spinning { "spin" } else { "block" }
            ),
            range(&ratio[i])
        );
    }
}

fn main() {
    let secs: f64 = std::env::args()
        .skip_while(|a| a != "--secs")
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(2.0);
    let iters = 20_000;
    // Logging is off (the filter `off`) except in the rows marked "log info", which switch
    // the filter to `info` for their run: the cost of having the runtime's events on.
    let (filter, log) = tracing_subscriber::reload::Layer::new(EnvFilter::new("off"));
    tracing_subscriber::registry()
        .with(filter)
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr())),
        )
        .init();
    let set_log = |f: &str| {
        if let Err(e) = log.reload(EnvFilter::new(f)) {
            eprintln!("log filter {f}: {e}");
        }
    };
    println!("softrnic data-path benchmark (loopback, {secs} s per bandwidth run)");
    println!();
    // The machine may be shared: every configuration runs `rounds` times, interleaved,
    // with a TCP stream run between any two; every run is set against the mean of the TCP
    // runs on either side of it. The table shows the median MB/s and the median of those
    // ratios (not the best run), and the range of the ratios.
    let rounds: usize = std::env::args()
        .skip_while(|a| a != "--rounds")
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(5)
        .max(1);
    let arg = |name: &str| -> Option<usize> {
        std::env::args()
            .skip_while(|a| a != name)
            .nth(1)
            .and_then(|s| s.parse().ok())
    };
    // Runtime knobs for the bandwidth runs (defaults: the runtime's).
    let mut base = RnicConfig::default();
    if let Some(n) = arg("--read-chunk") {
        base.read_chunk = n;
    }
    if let Some(n) = arg("--socket-buffer") {
        base.socket_buffer = Some(n);
    }
    if let Some(n) = arg("--progress-threads") {
        base.progress_threads = n;
    }
    let bp = Duration::from_micros(50);
    let zero = Some(Duration::ZERO);
    let row = |name, crc, busy_poll, zero_copy, list| Row {
        name,
        op: Op::Write,
        crc,
        busy_poll,
        zero_copy,
        list,
        sctp_mtu: None,
        wait_for: 1,
        log_info: false,
    };
    let sctp = |name, busy_poll, mtu| Row {
        name,
        op: Op::Write,
        crc: false,
        busy_poll,
        zero_copy: false,
        list: true,
        sctp_mtu: Some(mtu),
        wait_for: 1,
        log_info: false,
    };
    let configs = [
        row("RDMA Write, CRC off, busy poll 0", false, zero, true, true),
        row("RDMA Write, CRC on,  busy poll 0", true, zero, true, true),
        row(
            "RDMA Write, CRC on,  busy poll 0, 1 WR/post",
            true,
            zero,
            true,
            false,
        ),
        Row {
            wait_for: 8,
            ..row(
                "RDMA Write, CRC on,  busy poll 0, wait for 8",
                true,
                zero,
                true,
                true,
            )
        },
        row(
            "RDMA Write, CRC on,  busy poll 50us",
            true,
            Some(bp),
            true,
            true,
        ),
        row(
            "RDMA Write, CRC off, manual progress",
            false,
            None,
            true,
            true,
        ),
        row(
            "RDMA Write, CRC on,  manual progress",
            true,
            None,
            true,
            true,
        ),
        row(
            "RDMA Write, CRC on,  manual, 1 WR/post",
            true,
            None,
            true,
            false,
        ),
        row(
            "RDMA Write, CRC on,  manual, copy tx",
            true,
            None,
            false,
            true,
        ),
        Row {
            op: Op::Read,
            ..row("RDMA Read,  CRC on,  busy poll 0", true, zero, true, true)
        },
        Row {
            op: Op::Read,
            ..row(
                "RDMA Read,  CRC on,  manual progress",
                true,
                None,
                true,
                true,
            )
        },
        Row {
            op: Op::Send,
            ..row("Send,       CRC on,  busy poll 0", true, zero, true, true)
        },
        Row {
            op: Op::Send,
            ..row(
                "Send,       CRC on,  manual progress",
                true,
                None,
                true,
                true,
            )
        },
        sctp("RDMA Write, SCTP/UDP MTU 1500, manual", None, 1500),
        sctp("RDMA Write, SCTP/UDP MTU 9000, manual", None, 9000),
        sctp("RDMA Write, SCTP/UDP MTU 64K, manual", None, 65535),
        sctp("RDMA Write, SCTP/UDP MTU 9000, busy poll 0", zero, 9000),
        Row {
            log_info: true,
            ..row(
                "RDMA Write, CRC on,  busy poll 0, log info",
                true,
                zero,
                true,
                true,
            )
        },
        Row {
            log_info: true,
            ..sctp(
                "RDMA Write, SCTP/UDP MTU 9000, manual, log info",
                None,
                9000,
            )
        },
    ];
    let only_crc = std::env::args().any(|a| a == "--crc-only");
    let only: Option<String> = std::env::args().skip_while(|a| a != "--only").nth(1);
    let exact = std::env::args().any(|a| a == "--exact");
    let configs: Vec<Row> = configs
        .into_iter()
        .filter(|c| !only_crc || c.crc || c.sctp_mtu.is_some())
        .filter(|c| {
            only.as_ref()
                .is_none_or(|o| c.name.contains(o.as_str()) && (!exact || c.name == o))
        })
        .collect();
    let n = configs.len() + 2;
    let (mut mbs, mut ratios, mut cpu, mut cpu_ratios, mut sleeps) = (
        vec![Vec::new(); n],
        vec![Vec::new(); n],
        vec![Vec::new(); n],
        vec![Vec::new(); n],
        vec![Vec::new(); n],
    );
    for _ in 0..rounds {
        // TCP, row 1, TCP, row 2, TCP, ...: each row is set against the mean of the TCP
        // runs right before and right after it.
        let mut before = tcp_bw(secs, false);
        let mut record = |i: usize, r: Bw, tcp: Bw| {
            mbs[i].push(r.wall);
            ratios[i].push(r.wall / tcp.wall);
            cpu[i].push(r.cpu);
            cpu_ratios[i].push(r.cpu / tcp.cpu);
            sleeps[i].push(r.sleeps);
        };
        record(0, before, before);
        for i in 1..n {
            let r = match configs.get(i - 2) {
                None => tcp_bw(secs, true),
                Some(&r) if r.log_info => {
                    set_log("info");
                    let bw = rdma_bw(r, secs, &base);
                    set_log("off");
                    bw
                }
                Some(&r) => rdma_bw(r, secs, &base),
            };
            let after = tcp_bw(secs, false);
            record(0, after, after);
            let tcp = Bw {
                wall: (before.wall + after.wall) / 2.0,
                cpu: (before.cpu + after.cpu) / 2.0,
                sleeps: (before.sleeps + after.sleeps) / 2.0,
            };
            record(i, r, tcp);
            before = after;
        }
    }
    // Wall-clock MB/s is what the target is about; MB per CPU second (all threads
    // of the process) shows the data path's cost even when other work shares the machine.
    // Busy polling burns CPU by design, so its CPU figures are not comparable. Sleeps per
    // MB count the wake-ups (voluntary context switches of every thread).
    println!(
        "{:<44} {:>8} {:>7} {:>10} {:>9} {:>7} {:>10} {:>9}",
        format!("bandwidth, 64 KiB messages (median of {rounds})"),
        "MB/s",
        "vs TCP",
        "range",
        "MB/cpu-s",
        "vs TCP",
        "range",
        "sleeps/MB"
    );
    let names: Vec<&str> = ["plain TCP stream", "TCP + CRC32c both ends + rx copy"]
        .into_iter()
        .chain(configs.iter().map(|c| c.name))
        .collect();
    for (i, name) in names.iter().enumerate() {
        println!(
            "{:<44} {:>8.0} {:>7.2} {:>10} {:>9.0} {:>7.2} {:>10} {:>9.1}",
            name,
            median(&mbs[i]),
            median(&ratios[i]),
            range(&ratios[i]),
            median(&cpu[i]),
            median(&cpu_ratios[i]),
            range(&cpu_ratios[i]),
            median(&sleeps[i])
        );
    }
    println!();
    if std::env::args().any(|a| a == "--bw-only") {
        return;
    }
    latency_table(iters, rounds);
}
