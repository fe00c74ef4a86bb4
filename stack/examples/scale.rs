//! Scale benchmark: one RNIC holding many connected QPs. Two RNICs in one process (each with
//! its progress thread) connect N QP pairs over loopback TCP (full MPA setup each), then:
//!
//! * setup rate: connections per second, with up to `--window` connects outstanding;
//! * memory per QP: the process's resident set growth divided by the 2N QPs (both ends are
//!   in this process), next to the kernel's share of it (two TCP sockets per connection);
//! * latency of one active QP while all others sit idle: a 2-byte Send/Receive ping-pong
//!   (half round trip, each side polling its CQ; median of three rounds), set against the
//!   same ping-pong measured in the same run before the idle QPs existed.
//!
//! `cargo run --release -p softrnic-stack --example scale [-- --qps N --window W --iters I
//! --progress-threads T]` (defaults 10000, 256, 20000, 1; with T progress threads per RNIC
//! the idle QPs are spread over them, the active pair staying on thread 0). Raises the open-file limit to its hard maximum (each
//! connection holds two sockets); N is cut to fit it.

use std::time::{Duration, Instant};

use stack::addr::TransportAddr;
use stack::mpa;
use stack::{Access, Cq, Event, MrOptions, Qp, QpAttr, RecvWr, Rnic, RnicConfig, SendWr};

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map_or(default, |v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name} takes a number, not {v:?}"))
        })
}

/// Resident set size in bytes, from /proc/self/statm (pages × 4096).
fn rss() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |p| p * 4096)
}

/// The kernel's socket memory in bytes (TCP pages in /proc/net/sockstat).
fn tcp_mem() -> u64 {
    std::fs::read_to_string("/proc/net/sockstat")
        .ok()
        .and_then(|s| {
            let l = s.lines().find(|l| l.starts_with("TCP:"))?;
            let w: Vec<&str> = l.split_whitespace().collect();
            let i = w.iter().position(|x| *x == "mem")?;
            w.get(i + 1)?.parse::<u64>().ok()
        })
        .map_or(0, |p| p * 4096)
}

struct Side {
    rnic: Rnic,
    pd: stack::Pd,
    cq: Cq,
}

fn side(threads: usize) -> Side {
    let rnic = Rnic::open(RnicConfig {
        progress_threads: threads,
        ..RnicConfig::default()
    })
    .expect("RNIC");
    let pd = rnic.alloc_pd();
    Side {
        rnic,
        pd,
        cq: Cq::new(1 << 16),
    }
}

fn qp(s: &Side, cq: &Cq) -> Qp {
    let mut attr = QpAttr::new(s.pd, cq.clone(), cq.clone());
    attr.sq_depth = 16;
    attr.rq_depth = 16;
    s.rnic.create_qp(attr).expect("QP")
}

/// Connects `n` pairs with at most `window` connects outstanding; returns them.
fn connect(a: &Side, b: &Side, at: &TransportAddr, n: usize, window: usize) -> Vec<(Qp, Qp)> {
    let mut pairs = Vec::with_capacity(n);
    let mut waiting_b: Vec<Qp> = Vec::new();
    let mut started = 0;
    let mut established = 0;
    let deadline = Instant::now() + Duration::from_secs(600);
    let mut a_qps: Vec<Qp> = Vec::new();
    while established < n {
        while started < n && started - established < window {
            let qa = qp(a, &a.cq);
            a.rnic
                .connect_to(&qa, at, mpa::Config::default())
                .expect("connect");
            a_qps.push(qa);
            started += 1;
        }
        let mut progress = false;
        while let Some(e) = b.rnic.poll_event() {
            progress = true;
            if let Event::ConnectRequest(r) = e {
                let qb = qp(b, &b.cq);
                b.rnic
                    .accept(r.id, &qb, mpa::Config::default())
                    .expect("accept");
                waiting_b.push(qb);
            }
        }
        while let Some(e) = a.rnic.poll_event() {
            progress = true;
            match e {
                Event::Established { .. } => established += 1,
                Event::ConnectFailed { qp, error } => panic!("QP {qp:?} failed: {error}"),
                _ => {}
            }
        }
        assert!(
            Instant::now() < deadline,
            "{established} of {n} after 600 s"
        );
        if !progress {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    // Pair the QPs up by their peer addresses is not needed: the benchmark only uses one
    // pair, found by a probe message below.
    for (qa, qb) in a_qps.into_iter().zip(waiting_b) {
        pairs.push((qa, qb));
    }
    pairs
}

/// Half round trip of a 2-byte Send/Receive ping-pong between `qa` and `qb` (own CQs).
fn ping_pong(a: &Side, b: &Side, qa: &Qp, qb: &Qp, cqa: &Cq, cqb: &Cq, iters: usize) -> f64 {
    let ma = a
        .rnic
        .mem()
        .register_new(a.pd, 64, MrOptions::new(Access::LOCAL_WRITE))
        .unwrap();
    let mb = b
        .rnic
        .mem()
        .register_new(b.pd, 64, MrOptions::new(Access::LOCAL_WRITE))
        .unwrap();
    let spin = |cq: &Cq, want: usize| {
        let mut got = 0;
        while got < want {
            while let Some(w) = cq.poll_one() {
                assert!(w.status.is_success(), "{w:?}");
                got += 1;
            }
        }
    };
    qb.post_recv(RecvWr::new(0, vec![mb.sge(32, 2)])).unwrap();
    qa.post_recv(RecvWr::new(0, vec![ma.sge(32, 2)])).unwrap();
    let start = Instant::now();
    for _ in 0..iters {
        qa.post_send(SendWr::send(1, vec![ma.sge(0, 2)])).unwrap();
        // b: its receive, then it answers.
        spin(cqb, 1);
        qb.post_recv(RecvWr::new(0, vec![mb.sge(32, 2)])).unwrap();
        qb.post_send(SendWr::send(2, vec![mb.sge(0, 2)])).unwrap();
        // a: its send's completion and the answer.
        spin(cqa, 2);
        qa.post_recv(RecvWr::new(0, vec![ma.sge(32, 2)])).unwrap();
        spin(cqb, 1);
    }
    start.elapsed().as_secs_f64() * 1e6 / iters as f64 / 2.0
}

fn main() {
    let window = arg("--window", 256);
    let iters = arg("--iters", 20_000);
    let mut n = arg("--qps", 10_000);
    if let Some(lim) = rustix::process::getrlimit(rustix::process::Resource::Nofile).maximum {
        let _ = rustix::process::setrlimit(
            rustix::process::Resource::Nofile,
            rustix::process::Rlimit {
                current: Some(lim),
                maximum: Some(lim),
            },
        );
    }
    let files = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .unwrap_or(1024) as usize;
    if 2 * n + 256 > files {
        let fit = files.saturating_sub(256) / 2;
        eprintln!(
            "open-file limit {files}: {n} connections need {}; running {fit}",
            2 * n
        );
        n = fit;
    }
    let threads = arg("--progress-threads", 1);
    let a = side(threads);
    let b = side(threads);
    let l = b
        .rnic
        .listen_on(&"127.0.0.1:0".parse::<TransportAddr>().unwrap())
        .expect("listen");

    // The active pair first, alone: the baseline latency.
    let (cqa, cqb) = (Cq::new(64), Cq::new(64));
    let qa = qp(&a, &cqa);
    let qb = qp(&b, &cqb);
    let at = l.transport.clone();
    std::thread::scope(|s| {
        let h = s.spawn(|| {
            b.rnic
                .accept_blocking(&l, &qb, mpa::Config::default(), Duration::from_secs(10))
        });
        a.rnic
            .connect_to_blocking(&qa, &at, mpa::Config::default(), Duration::from_secs(10))
            .expect("connect");
        h.join().unwrap().expect("accept");
    });
    // Medians of three rounds each (the machine may be shared).
    let median = |f: &dyn Fn() -> f64| {
        let mut v: Vec<f64> = (0..3).map(|_| f()).collect();
        v.sort_by(f64::total_cmp);
        v[1]
    };
    let alone = median(&|| ping_pong(&a, &b, &qa, &qb, &cqa, &cqb, iters));

    let rss0 = rss();
    let tcp0 = tcp_mem();
    let t0 = Instant::now();
    let pairs = connect(&a, &b, &at, n, window);
    let setup = t0.elapsed().as_secs_f64();
    let rss1 = rss();
    let tcp1 = tcp_mem();
    let busy = median(&|| ping_pong(&a, &b, &qa, &qb, &cqa, &cqb, iters));
    let per_qp = rss1.saturating_sub(rss0) as f64 / (2 * pairs.len()) as f64;
    let kernel_per_conn = tcp1.saturating_sub(tcp0) as f64 / pairs.len() as f64;
    println!(
        "connected QP pairs           {} ({threads} progress thread(s) per RNIC)",
        pairs.len()
    );
    println!(
        "setup                        {setup:.2} s, {:.0} connections/s (window {window})",
        pairs.len() as f64 / setup
    );
    println!(
        "memory per QP (process RSS)  {:.1} KiB ({:.1} MiB for {} QPs)",
        per_qp / 1024.0,
        rss1.saturating_sub(rss0) as f64 / 1048576.0,
        2 * pairs.len()
    );
    println!(
        "kernel TCP memory            {:.1} KiB per connection (two sockets)",
        kernel_per_conn / 1024.0
    );
    println!(
        "2-byte Send/Recv half RTT    {alone:.2} us alone, {busy:.2} us with all others idle ({:.2}x)",
        busy / alone
    );
}
