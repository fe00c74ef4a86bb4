//! Data-path benchmark over loopback: RDMA Write bandwidth and latency of the runtime
//! against plain kernel TCP doing the same job.
//!
//! `cargo run --release -p softrnic-stack --example bench [-- --secs S --rounds R --bw-only]`
//!
//! * Bandwidth: 64 KiB RDMA Writes (CRC off and on, 32 outstanding, progress threads with
//!   busy polling off and at 50 µs) against a plain TCP stream writing 64 KiB chunks from one
//!   thread and reading them in another. Each configuration runs `R` times (default 3),
//!   interleaved, and the best run counts (the machine may be shared).
//! * Latency: 2-byte RDMA Write ping-pong (arrival detected by polling the target byte)
//!   against a plain TCP 2-byte ping-pong (blocking sockets, TCP_NODELAY); half round trip.
//!   The RDMA side runs in manual-progress mode (each side's polling thread drives its own
//!   RNIC: two threads, like the TCP ping-pong) and with progress threads, busy polling on
//!   and off.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use stack::mpa::{self, CrcPolicy};
use stack::{
    Access, Cq, MemoryRegion, MrOptions, ProgressMode, Qp, QpAttr, Rnic, RnicConfig, SendWr,
};

const MSG: usize = 64 * 1024;

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
    let qp = rnic.create_qp(attr).expect("qp");
    let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
    let mr = rnic
        .mem()
        .register_new(pd, len, MrOptions::new(access))
        .expect("mr");
    Side { rnic, qp, cq, mr }
}

fn connect(rc: RnicConfig, crc: bool, len: usize) -> (Side, Side) {
    let a = side(rc.clone(), len);
    let b = side(rc, len);
    let l = b.rnic.listen("127.0.0.1:0".parse().unwrap()).unwrap();
    let cfg = mpa::Config {
        crc: if crc {
            CrcPolicy::Require
        } else {
            CrcPolicy::Accept
        },
        ..mpa::Config::default()
    };
    let t = Duration::from_secs(10);
    std::thread::scope(|s| {
        let c2 = cfg.clone();
        let h = s.spawn(|| b.rnic.accept_blocking(&l, &b.qp, c2, t).unwrap());
        a.rnic
            .connect_blocking(&a.qp, l.local_addr, cfg, t)
            .unwrap();
        h.join().unwrap();
    });
    (a, b)
}

/// 64 KiB RDMA Writes for `secs`; returns MB/s (10^6). `busy_poll: None` runs both RNICs
/// in manual-progress mode, each driven by one thread (two threads in all, like the TCP
/// stream).
fn rdma_write_bw(crc: bool, busy_poll: Option<Duration>, secs: f64) -> f64 {
    let rc = RnicConfig {
        busy_poll: busy_poll.unwrap_or_default(),
        progress: if busy_poll.is_some() {
            ProgressMode::Thread
        } else {
            ProgressMode::Manual
        },
        ..RnicConfig::default()
    };
    let manual = busy_poll.is_none();
    let (a, b) = connect(rc, crc, MSG);
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        if manual {
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    let _ = b.rnic.advance(Duration::from_millis(1));
                }
            });
        }
        let r = write_stream(&a, &b, manual, secs);
        stop.store(true, Ordering::Relaxed);
        r
    })
}

fn write_stream(a: &Side, b: &Side, manual: bool, secs: f64) -> f64 {
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
    loop {
        while posted - done < depth {
            a.qp.post_send(SendWr::write(
                posted,
                vec![a.mr.sge(0, MSG as u32)],
                stag,
                to,
            ))
            .unwrap();
            posted += 1;
        }
        if manual {
            // Posting transmits inline and may complete work: block only on an empty CQ.
            if a.cq.is_empty() {
                let _ = a.rnic.advance(Duration::from_millis(1));
            }
        } else if a.cq.is_empty() {
            a.cq.wait(Duration::from_millis(100));
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
        } else if !warm && el > secs {
            return (done - base) as f64 * MSG as f64 / el / 1e6;
        }
    }
}

/// A plain TCP stream of 64 KiB writes for `secs`; returns MB/s.
fn tcp_bw(secs: f64) -> f64 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    let reader = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut buf = vec![0u8; MSG];
        let mut total = 0u64;
        let mut start = Instant::now();
        let mut warm = true;
        loop {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => total += n as u64,
            }
            if warm && start.elapsed().as_secs_f64() > 0.2 {
                warm = false;
                start = Instant::now();
                total = 0;
            }
            if !warm && start.elapsed().as_secs_f64() > secs {
                st.store(true, Ordering::SeqCst);
                return total as f64 / start.elapsed().as_secs_f64() / 1e6;
            }
        }
        0.0
    });
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_nodelay(true).unwrap();
    let buf = vec![0xa5u8; MSG];
    while !stop.load(Ordering::SeqCst) {
        if s.write_all(&buf).is_err() {
            break;
        }
    }
    drop(s);
    reader.join().unwrap()
}

/// 2-byte RDMA Write ping-pong; returns the median half round trip in µs.
fn rdma_write_lat(rc: RnicConfig, iters: usize) -> f64 {
    let (a, b) = connect(rc, false, 64);
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

/// Plain TCP 2-byte ping-pong; median half round trip in µs.
fn tcp_lat(iters: usize) -> f64 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr: SocketAddr = l.local_addr().unwrap();
    let total = iters + iters / 10;
    let echo = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        s.set_nodelay(true).unwrap();
        let mut b = [0u8; 2];
        for _ in 0..total {
            s.read_exact(&mut b).unwrap();
            s.write_all(&b).unwrap();
        }
    });
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_nodelay(true).unwrap();
    let mut b = [1u8; 2];
    let mut samples = Vec::with_capacity(total);
    for _ in 0..total {
        let t0 = Instant::now();
        s.write_all(&b).unwrap();
        s.read_exact(&mut b).unwrap();
        samples.push(t0.elapsed().as_secs_f64() * 1e6 / 2.0);
    }
    echo.join().unwrap();
    let mut v = samples.split_off(iters / 10);
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let secs: f64 = std::env::args()
        .skip_while(|a| a != "--secs")
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(2.0);
    let iters = 20_000;
    println!("softrnic data-path benchmark (loopback, {secs} s per bandwidth run)");
    println!();
    // The machine may be shared: every configuration runs `rounds` times, interleaved,
    // and the best run of each counts.
    let rounds: usize = std::env::args()
        .skip_while(|a| a != "--rounds")
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let bp = Duration::from_micros(50);
    let mut best = [0.0f64; 7];
    for _ in 0..rounds {
        let runs = [
            tcp_bw(secs),
            rdma_write_bw(false, Some(Duration::ZERO), secs),
            rdma_write_bw(true, Some(Duration::ZERO), secs),
            rdma_write_bw(false, Some(bp), secs),
            rdma_write_bw(true, Some(bp), secs),
            rdma_write_bw(false, None, secs),
            rdma_write_bw(true, None, secs),
        ];
        for (b, r) in best.iter_mut().zip(runs) {
            *b = b.max(r);
        }
    }
    let tcp = best[0];
    println!(
        "{:<44} {:>12} {:>10}",
        format!("bandwidth, 64 KiB messages (best of {rounds})"),
        "MB/s",
        "vs TCP"
    );
    println!("{:<44} {:>12.0} {:>10.2}", "plain TCP stream", tcp, 1.0);
    for (name, v) in [
        ("RDMA Write, CRC off, busy poll 0", best[1]),
        ("RDMA Write, CRC on,  busy poll 0", best[2]),
        ("RDMA Write, CRC off, busy poll 50us", best[3]),
        ("RDMA Write, CRC on,  busy poll 50us", best[4]),
        ("RDMA Write, CRC off, manual progress", best[5]),
        ("RDMA Write, CRC on,  manual progress", best[6]),
    ] {
        println!("{:<44} {:>12.0} {:>10.2}", name, v, v / tcp);
    }
    println!();
    if std::env::args().any(|a| a == "--bw-only") {
        return;
    }
    let t = tcp_lat(iters);
    let manual = rdma_write_lat(
        RnicConfig {
            progress: ProgressMode::Manual,
            ..RnicConfig::default()
        },
        iters,
    );
    let busy = rdma_write_lat(RnicConfig::default(), iters / 4);
    let sleepy = rdma_write_lat(
        RnicConfig {
            busy_poll: Duration::ZERO,
            ..RnicConfig::default()
        },
        iters / 4,
    );
    println!(
        "{:<44} {:>12} {:>10}",
        "latency, 2 bytes, half round trip", "median us", "vs TCP"
    );
    println!("{:<44} {:>12.2} {:>10.2}", "plain TCP ping-pong", t, 1.0);
    println!(
        "{:<44} {:>12.2} {:>10.2}",
        "RDMA Write ping-pong, manual progress",
        manual,
        manual / t
    );
    println!(
        "{:<44} {:>12.2} {:>10.2}",
        "RDMA Write, progress thread, busy poll 50us",
        busy,
        busy / t
    );
    println!(
        "{:<44} {:>12.2} {:>10.2}",
        "RDMA Write, progress thread, no busy poll",
        sleepy,
        sleepy / t
    );
}
