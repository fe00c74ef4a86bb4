//! Connection management plumbing of the runtime that applications see directly: the RNIC
//! event channel (an eventfd for CM events) and the passive side's MPA Request timeout.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::BorrowedFd;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec, poll};
use stack::mpa;
use stack::{Event, Rnic, RnicConfig};

fn any_port() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// Whether `fd` is readable within `ms` milliseconds.
fn readable(fd: BorrowedFd<'_>, ms: u64) -> bool {
    let mut fds = [PollFd::new(&fd, PollFlags::IN)];
    let t = Timespec {
        tv_sec: (ms / 1000) as i64,
        tv_nsec: ((ms % 1000) * 1_000_000) as i64,
    };
    let n = poll(&mut fds, Some(&t)).expect("poll");
    n == 1 && fds[0].revents().contains(PollFlags::IN)
}

fn mpa_request_bytes() -> Vec<u8> {
    let mut out = Vec::new();
    mpa::request(&mpa::Config::default())
        .expect("default config")
        .emit(&mut out)
        .expect("emit");
    out
}

/// The RNIC's event fd is readable exactly while CM events are queued: it fires for a
/// connection request, and taking the last event (here through `poll_event`) makes it
/// unreadable again, so an application's own poll loop can wait on it.
#[test]
fn event_fd_readable_while_cm_events_queued() {
    let rnic = Rnic::open(RnicConfig::default()).unwrap();
    assert!(!readable(rnic.event_fd(), 0), "no event yet");
    let l = rnic.listen(any_port()).unwrap();
    let mut c = TcpStream::connect(l.local_addr).unwrap();
    c.write_all(&mpa_request_bytes()).unwrap();

    assert!(readable(rnic.event_fd(), 5000), "ConnectRequest signalled");
    // Still readable until the event is taken (level, not a one-shot edge).
    assert!(readable(rnic.event_fd(), 0));
    let Some(Event::ConnectRequest(req)) = rnic.poll_event() else {
        panic!("expected a ConnectRequest");
    };
    assert_eq!(req.listener, l.id);
    assert!(!readable(rnic.event_fd(), 0), "queue empty: fd quiet");
    assert!(rnic.poll_event().is_none());

    // A second connection: readable again; taking it through `wait_request` (which picks
    // the event out of the queue) also quiets the fd.
    let mut c2 = TcpStream::connect(l.local_addr).unwrap();
    c2.write_all(&mpa_request_bytes()).unwrap();
    assert!(readable(rnic.event_fd(), 5000));
    let r2 = rnic.wait_request(&l, Duration::from_secs(5)).unwrap();
    assert_ne!(r2.id, req.id);
    assert!(!readable(rnic.event_fd(), 0));
    rnic.reject(req.id, b"").unwrap();
    rnic.reject(r2.id, b"").unwrap();
}

/// RFC 5044 §7.1.3: the responder sends nothing before a complete MPA Request, so a client
/// that connects and never sends one is dropped after `RnicConfig::mpa_request_timeout`
/// (no ConnectRequest is reported), while one that sends its Request in time is kept.
#[test]
fn rfc5044_7_1_3_silent_client_dropped_after_mpa_request_timeout() {
    assert_eq!(
        RnicConfig::default().mpa_request_timeout,
        mpa::negotiate::REQUEST_TIMEOUT,
        "the default stays the MPA crate's value"
    );
    let timeout = Duration::from_millis(150);
    let rnic = Rnic::open(RnicConfig {
        mpa_request_timeout: timeout,
        ..RnicConfig::default()
    })
    .unwrap();
    let l = rnic.listen(any_port()).unwrap();

    let start = Instant::now();
    let mut silent = TcpStream::connect(l.local_addr).unwrap();
    let mut polite = TcpStream::connect(l.local_addr).unwrap();
    polite.write_all(&mpa_request_bytes()).unwrap();

    silent
        .set_read_timeout(Some(Duration::from_secs(3)))
        .unwrap();
    let mut b = [0u8; 16];
    match silent.read(&mut b) {
        Ok(0) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        other => panic!("silent client not dropped: {other:?}"),
    }
    let waited = start.elapsed();
    assert!(waited >= timeout, "dropped too early: {waited:?}");
    assert!(
        waited < Duration::from_secs(2),
        "dropped too late: {waited:?}"
    );

    // Only the polite client's request was reported, and its connection is still open.
    let req = rnic.wait_request(&l, Duration::from_secs(2)).unwrap();
    std::thread::sleep(timeout * 2);
    assert!(
        rnic.poll_event().is_none(),
        "no request from the silent client"
    );
    polite.set_nonblocking(true).unwrap();
    match polite.read(&mut b) {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        other => panic!("client with a Request was dropped: {other:?}"),
    }
    rnic.reject(req.id, b"").unwrap();
}
