//! Posting through the per-QP doorbell rings keeps the verbs' immediate errors: the queue
//! depth counts what is in the engine and what waits in the ring, malformed requests are
//! refused at post time, and whatever is still queued is flushed, not lost, when the QP
//! is destroyed.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use stack::mpa;
use stack::{
    Access, Cq, MrOptions, Pd, PostError, ProgressMode, Qp, QpAttr, Rnic, RnicConfig, SendWr,
    WcStatus,
};

const T: Duration = Duration::from_secs(5);

fn manual() -> RnicConfig {
    RnicConfig {
        progress: ProgressMode::Manual,
        ..RnicConfig::default()
    }
}

/// Two RNICs (of configuration `cfg`) and one QP each, connected over loopback with the
/// default MPA settings; `a`'s send queue holds `sq_depth` work requests.
struct Pair {
    a: Rnic,
    b: Rnic,
    pa: Pd,
    pb: Pd,
    ca: Cq,
    cb: Cq,
    qa: Qp,
    qb: Qp,
}

fn connected_pair(cfg: RnicConfig, cq_depth: usize, sq_depth: usize) -> Pair {
    let (a, b) = (Rnic::open(cfg.clone()).unwrap(), Rnic::open(cfg).unwrap());
    let (pa, pb) = (a.alloc_pd(), b.alloc_pd());
    let (ca, cb) = (Cq::new(cq_depth), Cq::new(cq_depth));
    let mut attr = QpAttr::new(pa, ca.clone(), ca.clone());
    attr.sq_depth = sq_depth;
    let qa = a.create_qp(attr).unwrap();
    let qb = b
        .create_qp(QpAttr::new(pb, cb.clone(), cb.clone()))
        .unwrap();
    let l = b
        .listen("127.0.0.1:0".parse::<SocketAddr>().unwrap())
        .unwrap();
    std::thread::scope(|s| {
        let h = s.spawn(|| b.accept_blocking(&l, &qb, mpa::Config::default(), T));
        a.connect_blocking(&qa, l.local_addr, mpa::Config::default(), T)
            .unwrap();
        h.join().unwrap().unwrap();
    });
    Pair {
        a,
        b,
        pa,
        pb,
        ca,
        cb,
        qa,
        qb,
    }
}

/// Manual-progress pair: `b` is only advanced during setup, so RDMA Reads from `a` stay
/// outstanding (their responses never come) for as long as the test wants.
#[test]
fn ring_posts_keep_queue_depth_and_validation_errors() {
    // In manual progress each blocking connect call drives its own RNIC.
    let Pair {
        a,
        b,
        pa,
        pb,
        ca,
        qa,
        ..
    } = connected_pair(manual(), 64, 4);
    let sink = a
        .mem()
        .register_new(
            pa,
            4096,
            MrOptions::new(Access::LOCAL_WRITE | Access::REMOTE_WRITE),
        )
        .unwrap();
    let src = b
        .mem()
        .register_new(pb, 4096, MrOptions::new(Access::REMOTE_READ))
        .unwrap();

    // Four Reads fill the send queue (depth 4); b never answers.
    for i in 0..4u64 {
        let wr = SendWr::read(i, vec![sink.sge(i * 64, 64)], src.stag(), src.to_at(0));
        qa.post_send(wr).unwrap();
        let _ = a.advance(Duration::ZERO);
    }
    assert_eq!(qa.sq_outstanding(), 4);
    let wr = SendWr::read(9, vec![sink.sge(0, 64)], src.stag(), src.to_at(0));
    assert_eq!(qa.post_send(wr), Err(PostError::QueueFull { depth: 4 }));
    // Refused at post time, as the engine would refuse it.
    let many = (0..7).map(|i| sink.sge(i, 1)).collect();
    assert!(matches!(
        qa.post_send(SendWr::send(10, many)),
        Err(PostError::TooManySge { given: 7, .. })
    ));
    let wrap = SendWr::write(11, vec![sink.sge(0, 64)], src.stag(), u64::MAX - 10);
    assert!(matches!(qa.post_send(wrap), Err(PostError::InvalidWr(_))));
    assert!(ca.is_empty(), "nothing completed");

    // Destroy: the four Reads are flushed, none lost.
    a.destroy_qp(&qa).unwrap();
    let mut flushed = Vec::new();
    let start = Instant::now();
    while flushed.len() < 4 {
        assert!(start.elapsed() < T, "flushes: {flushed:?}");
        let _ = a.advance(Duration::from_millis(1));
        while let Some(wc) = ca.poll_one() {
            assert_eq!(wc.status, WcStatus::Flushed);
            flushed.push(wc.wr_id);
        }
    }
    assert_eq!(flushed, [0, 1, 2, 3]);
}

/// A receive posted through the ring before the matching Send was even posted is used
/// for it, even while the receiving core is in the middle of a long service (here: large
/// RDMA Writes streaming the same way), as the verbs promise.
#[test]
fn receive_posted_before_the_send_is_used_while_core_is_busy() {
    let Pair {
        a,
        b,
        pa,
        pb,
        ca,
        cb,
        qa,
        qb,
    } = connected_pair(RnicConfig::default(), 4096, 256);
    let all = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
    let big = 1 << 20;
    let src = a.mem().register_new(pa, big, MrOptions::new(all)).unwrap();
    let sink = b.mem().register_new(pb, big, MrOptions::new(all)).unwrap();
    let rbuf = b.mem().register_new(pb, 64, MrOptions::new(all)).unwrap();
    let start = Instant::now();
    let (mut writes, mut sends) = (0u64, 0u64);
    for i in 0..40u64 {
        // Keep b's core busy reading 1 MiB Writes.
        for k in 0..4 {
            let wr = SendWr::write(
                1_000_000 + 4 * i + k,
                vec![src.sge(0, big as u32)],
                sink.stag(),
                sink.to_at(0),
            );
            qa.post_send(wr).unwrap();
            writes += 1;
        }
        // Once a has handed them to TCP, b's core is still reading them: post now.
        let mut handed = 0;
        while handed < 4 {
            assert!(start.elapsed() < T * 2, "writes not handed to TCP");
            handed += ca.drain().iter().filter(|w| w.wr_id >= 1_000_000).count();
            ca.wait(Duration::from_millis(1));
        }
        qb.post_recv(stack::RecvWr::new(i, vec![rbuf.sge(0, 64)]))
            .unwrap();
        qa.post_send(SendWr::send(i, vec![src.sge(0, 8)])).unwrap();
        sends += 1;
        let wc = loop {
            assert!(start.elapsed() < T * 2, "receive {i} never completed");
            if let Some(wc) = cb.poll_one() {
                break wc;
            }
            cb.wait(Duration::from_millis(10));
        };
        assert_eq!((wc.wr_id, wc.status), (i, WcStatus::Success), "{wc:?}");
    }
    assert_eq!((writes, sends), (160, 40));
}

/// A slot freed by a completion is free the moment the completion can be polled: an
/// application that keeps exactly `sq_depth` Writes outstanding and posts one more after
/// each polled completion is never refused with `QueueFull`, even while the progress core
/// has not yet published its new queue count.
#[test]
fn slot_is_free_as_soon_as_its_completion_is_polled() {
    let Pair {
        a,
        b,
        pa,
        pb,
        ca,
        cb: _,
        qa,
        qb: _,
    } = connected_pair(RnicConfig::default(), 64, 4);
    let all = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
    let src = a.mem().register_new(pa, 4096, MrOptions::new(all)).unwrap();
    let sink = b.mem().register_new(pb, 4096, MrOptions::new(all)).unwrap();
    let write = |id: u64| SendWr::write(id, vec![src.sge(0, 64)], sink.stag(), sink.to_at(0));
    for id in 0..4 {
        qa.post_send(write(id)).unwrap();
    }
    let start = Instant::now();
    let (mut next, mut done) = (4u64, 0u64);
    while done < 2000 {
        assert!(
            start.elapsed() < T * 2,
            "writes stopped completing at {done}"
        );
        let Some(wc) = ca.poll_one() else {
            ca.wait(Duration::from_millis(1));
            continue;
        };
        assert_eq!(wc.status, WcStatus::Success, "{wc:?}");
        done += 1;
        if next < 2000 {
            qa.post_send(write(next))
                .unwrap_or_else(|e| panic!("post after {done} completions: {e}"));
            next += 1;
        }
    }
}

/// Sends one 4-octet message from `p.qa` into a receive posted at `p.qb`, polling `p.cb`
/// with `poll` between tries; returns once the receive completed (or panics after `T`).
fn send_and_receive(p: &Pair, wr_id: u64, mut poll: impl FnMut()) {
    let src =
        p.a.mem()
            .register_new(p.pa, 64, MrOptions::new(Access::NONE))
            .unwrap();
    let dst =
        p.b.mem()
            .register_new(p.pb, 64, MrOptions::new(Access::LOCAL_WRITE))
            .unwrap();
    src.buf().write_at(0, b"inl!").unwrap();
    p.qb.post_recv(stack::RecvWr::new(wr_id, vec![dst.sge(0, 64)]))
        .unwrap();
    p.qa.post_send(SendWr::send(wr_id, vec![src.sge(0, 4)]))
        .unwrap();
    let start = Instant::now();
    let wc = loop {
        if let Some(wc) = p.cb.poll_one() {
            break wc;
        }
        assert!(start.elapsed() < T, "the message did not arrive");
        poll();
    };
    assert_eq!(
        (wc.wr_id, wc.status, wc.byte_len),
        (wr_id, WcStatus::Success, 4)
    );
    assert_eq!(dst.buf().read_range(0..4).unwrap(), b"inl!");
    assert!(p.ca.wait(T));
    assert_eq!(p.ca.poll_one().unwrap().wr_id, wr_id);
}

/// Waits until every progress thread of `r` sleeps (its sleep count stops moving).
fn settle(r: &Rnic) {
    let mut last = r.progress_stats();
    loop {
        std::thread::sleep(Duration::from_millis(30));
        let now = r.progress_stats();
        if now.thread_sleeps == last.thread_sleeps && now.thread_sleeps > 0 {
            return;
        }
        last = now;
    }
}

/// Polls `r` with `assist` until its progress thread sleeps leaving its sockets to this
/// thread: the thread is woken (a listener's commands ring it) while the lease holds, and
/// nothing rings it after. The thread may take a leased sleep after the first command and
/// be woken by the second: the polls go on until its sleep counts have stood still for
/// 100 ms, so that a test's message does not meet that late wake-up.
fn lease_sockets(r: &Rnic) {
    const SETTLED: Duration = Duration::from_millis(100);
    let stats = || {
        let s = r.progress_stats();
        (s.thread_sleeps, s.thread_leased_sleeps)
    };
    let before = stats().1;
    r.assist();
    r.assist();
    let l = r.listen("127.0.0.1:0".parse().unwrap()).unwrap();
    r.close_listener(&l);
    let start = Instant::now();
    let mut last = stats();
    let mut still = Instant::now();
    while last.1 == before || still.elapsed() < SETTLED {
        assert!(
            start.elapsed() < T,
            "the progress thread never took the lease and stayed asleep"
        );
        // Polls a millisecond apart keep the lease and leave the core to the thread now
        // and then.
        r.assist();
        std::thread::sleep(Duration::from_millis(1));
        let now = stats();
        if now != last {
            (last, still) = (now, Instant::now());
        }
    }
}

fn quiet(lease: Duration) -> RnicConfig {
    RnicConfig {
        busy_poll: Duration::ZERO,
        assist_lease: lease,
        ..RnicConfig::default()
    }
}

/// With `inline_progress` (the default), while an application polls with `assist`, a
/// post that finds the progress thread asleep transmits in the posting thread, and the
/// sleeping progress thread leaves the sockets to it (it is not woken by an arrival): the
/// application places the message itself. `end_assist` hands the sockets back at once
/// (the lease here, 10 s, outlasts the test's 5 s wait). Without `inline_progress` every
/// step is the progress threads'.
#[test]
fn sleeping_progress_thread_leaves_posts_and_polls_to_the_application() {
    let p = connected_pair(quiet(Duration::from_secs(10)), 16, 16);
    // A post with nobody polling wakes the thread, which sends it.
    settle(&p.a);
    let a0 = p.a.progress_stats();
    send_and_receive(&p, 5, || std::thread::sleep(Duration::from_micros(100)));
    assert_eq!(p.a.progress_stats().inline_posts, a0.inline_posts);
    // A polling application's post is sent by the posting thread, and the polling
    // receiver places the message. A progress thread woken by its timers (every 100 ms)
    // just then may serve either first: a few tries allow for that.
    let mut tries = 0;
    let (a0, b0, a1, b1) = loop {
        tries += 1;
        lease_sockets(&p.a);
        lease_sockets(&p.b);
        let (a0, b0) = (p.a.progress_stats(), p.b.progress_stats());
        send_and_receive(&p, 10 + tries, || {
            p.a.assist();
            p.b.assist();
        });
        let (a1, b1) = (p.a.progress_stats(), p.b.progress_stats());
        if (a1.inline_posts > a0.inline_posts && b1.assisted_work > b0.assisted_work) || tries == 3
        {
            break (a0, b0, a1, b1);
        }
    };
    assert_eq!(a1.inline_posts - a0.inline_posts, 1, "a: {a0:?} -> {a1:?}");
    assert!(
        b1.assisted_work > b0.assisted_work,
        "b placed nothing itself: {b0:?} -> {b1:?}"
    );
    // Neither thread went back to its sockets meanwhile (they stayed leased).
    assert_eq!(b1.thread_sleeps, b0.thread_sleeps, "b's thread was woken");
    // Handing the sockets back: the thread serves the next message, nobody polling.
    p.b.end_assist();
    send_and_receive(&p, 2, || std::thread::sleep(Duration::from_micros(100)));
    assert_eq!(p.b.progress_stats().assisted_work, b1.assisted_work);

    // Off: the posting and polling threads leave everything to the progress threads.
    let off = connected_pair(
        RnicConfig {
            inline_progress: false,
            ..quiet(Duration::from_secs(10))
        },
        16,
        16,
    );
    settle(&off.a);
    send_and_receive(&off, 3, || {
        assert_eq!(off.b.assist(), 0);
    });
    assert_eq!(off.a.progress_stats().inline_posts, 0);
    assert_eq!(off.b.progress_stats().assisted_work, 0);
}

/// An application that stops polling without `end_assist` loses nothing: once its lease
/// runs out, the progress thread serves the sockets again.
#[test]
fn lapsed_assist_lease_hands_the_sockets_back() {
    let p = connected_pair(quiet(Duration::from_millis(50)), 16, 16);
    settle(&p.b);
    lease_sockets(&p.b);
    let s1 = p.b.progress_stats();
    // The application falls silent without handing the sockets back: the thread places
    // the message once the lease has run out.
    send_and_receive(&p, 9, || std::thread::sleep(Duration::from_millis(5)));
    assert_eq!(p.b.progress_stats().assisted_work, s1.assisted_work);
}
