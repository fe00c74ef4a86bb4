//! The runtime on softrnic's own TCP/IP over raw-Ethernet devices (kernel bypass): two RNICs
//! joined by a datagram "cable" (one Ethernet frame per datagram), or through a relay that
//! records and drops frames. Every operation with data verified, reject, Terminate and
//! disconnect; the frames on the cable carry the same MPA as over the kernel's TCP; a lossy
//! cable loses nothing.

use std::os::unix::net::UnixDatagram;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod common;

use common::node::{Node, connect_pair, every_operation, wait_event, wait_wc};
use stack::addr::TransportAddr;
use stack::device::{DeviceConfig, Link};
use stack::rdmap::TermCause;
use stack::{CmError, Cq, Event, ProgressMode, QpAttr, Rnic, RnicConfig, SendWr, WcStatus, mpa};

/// Frames relayed between two cables: recorded, and every `drop_every`-th dropped.
struct Relay {
    stop: Arc<AtomicBool>,
    /// While set, node a's frames stay in its cable: node a's device queue fills up.
    hold_a: Arc<AtomicBool>,
    /// A second handle on node a's end of its cable (frames sent as if by node a).
    cable_a: UnixDatagram,
    frames: Arc<Mutex<Vec<Vec<u8>>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Relay {
    /// Links for node a and node b, joined through the relay.
    fn new(drop_every: Option<u64>) -> (Relay, Link, Link) {
        let (a, ra) = UnixDatagram::pair().unwrap();
        let (b, rb) = UnixDatagram::pair().unwrap();
        for s in [&a, &b] {
            s.set_nonblocking(true).unwrap();
        }
        ra.set_nonblocking(true).unwrap();
        rb.set_nonblocking(true).unwrap();
        let cable_a = a.try_clone().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let hold_a = Arc::new(AtomicBool::new(false));
        let frames = Arc::new(Mutex::new(Vec::new()));
        let (st, fr, hold) = (stop.clone(), frames.clone(), hold_a.clone());
        let thread = std::thread::spawn(move || {
            let mut buf = vec![0u8; 70_000];
            let mut n = 0u64;
            while !st.load(Ordering::Relaxed) {
                let mut idle = true;
                for (from, to) in [(&ra, &rb), (&rb, &ra)] {
                    if std::ptr::eq(from, &ra) && hold.load(Ordering::Relaxed) {
                        continue;
                    }
                    while let Ok(len) = from.recv(&mut buf) {
                        idle = false;
                        n += 1;
                        let frame = buf[..len].to_vec();
                        let drop = drop_every.is_some_and(|k| n.is_multiple_of(k));
                        fr.lock().unwrap().push(frame);
                        // Only the chosen frames are lost: a full queue on the far side
                        // is waited out (the far side drains it).
                        while !drop && !st.load(Ordering::Relaxed) {
                            match to.send(&buf[..len]) {
                                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                                    std::thread::sleep(Duration::from_micros(10));
                                }
                                _ => break,
                            }
                        }
                    }
                }
                if idle {
                    std::thread::sleep(Duration::from_micros(20));
                }
            }
        });
        (
            Relay {
                stop,
                hold_a,
                cable_a,
                frames,
                thread: Some(thread),
            },
            Link::Datagram(a),
            Link::Datagram(b),
        )
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn node(progress: ProgressMode, link: Link, ip: [u8; 4]) -> Node {
    let n = Node::new(progress);
    n.rnic
        .attach_device("cable0", link, &DeviceConfig::new(ip.into(), 24))
        .unwrap();
    n
}

/// Node b listens on 10.9.0.2, node a connects from 10.9.0.1 over the device "cable0".
fn connected(progress: ProgressMode, la: Link, lb: Link) -> (Node, Node) {
    let a = node(progress, la, [10, 9, 0, 1]);
    let b = node(progress, lb, [10, 9, 0, 2]);
    let at: TransportAddr = "dev://cable0/10.9.0.2:7174".parse().unwrap();
    let l = b.rnic.listen_on(&at).unwrap();
    assert_eq!(l.transport, at);
    let to: TransportAddr = "dev://cable0/10.9.0.2:7174".parse().unwrap();
    let cfg = mpa::Config {
        private_data: b"from-a".to_vec(),
        ..mpa::Config::default()
    };
    a.rnic.connect_to(&a.qp, &to, cfg).unwrap();
    let req = match wait_event(&[&a, &b], &b, |e| matches!(e, Event::ConnectRequest(_))) {
        Event::ConnectRequest(r) => r,
        _ => unreachable!(),
    };
    assert_eq!(req.private_data(), b"from-a");
    assert_eq!(req.peer.ip().to_string(), "10.9.0.1");
    assert!(req.request.is_some(), "an MPA Request");
    let bcfg = mpa::Config {
        private_data: b"from-b".to_vec(),
        ..mpa::Config::default()
    };
    b.rnic.accept(req.id, &b.qp, bcfg).unwrap();
    wait_event(&[&a, &b], &a, |e| matches!(e, Event::Established { .. }));
    wait_event(&[&a, &b], &b, |e| matches!(e, Event::Established { .. }));
    assert_eq!(a.qp.session().unwrap().peer_private_data, b"from-b");
    (a, b)
}

#[test]
fn every_operation_over_a_device_cable() {
    for progress in [ProgressMode::Thread, ProgressMode::Manual] {
        let (la, lb) = Link::datagram_pair().unwrap();
        let (a, b) = connected(progress, la, lb);
        every_operation(&a, &b, 300_000);
        let sa = a.rnic.device_stats("cable0").unwrap();
        assert!(sa.tx_frames > 200 && sa.rx_frames > 100, "{sa:?}");
        // A full device queue holds the stack back; it never throws frames away.
        assert_eq!(sa.tx_dropped, 0, "{sa:?}");
    }
}

/// The frames on the cable are Ethernet/IPv4/TCP with the MPA Request and Reply of RFC 5044
/// §7.1 at the start of each direction's byte stream, as over the kernel's TCP.
#[test]
fn rfc5044_7_1_the_cable_carries_mpa_over_tcp() {
    let (relay, la, lb) = Relay::new(None);
    let (a, b) = connected(ProgressMode::Thread, la, lb);
    every_operation(&a, &b, 20_000);
    let frames = relay.frames.lock().unwrap().clone();
    let mut req = false;
    let mut rep = false;
    let mut arp = false;
    for f in &frames {
        let Ok(p) = etherparse::SlicedPacket::from_ethernet(f) else {
            continue;
        };
        if matches!(p.net, Some(etherparse::NetSlice::Arp(_))) {
            arp = true;
        }
        if let Some(etherparse::TransportSlice::Tcp(t)) = p.transport {
            let pl = t.payload();
            req |= pl.starts_with(mpa::frame::REQUEST_KEY);
            rep |= pl.starts_with(mpa::frame::REPLY_KEY);
        }
    }
    assert!(arp, "the stack resolves its peer with ARP");
    assert!(req && rep, "MPA Request and Reply on the wire");
}

/// A cable that loses every 41st frame: TCP on the device stacks retransmits, and every
/// operation still places every byte where it belongs. (The stack's minimum retransmission
/// timeout is 1 s and it has no SACK, so recovery is slow: the transfer is kept small.)
#[test]
fn a_lossy_cable_loses_nothing() {
    let (relay, la, lb) = Relay::new(Some(41));
    let (a, b) = connected(ProgressMode::Thread, la, lb);
    every_operation(&a, &b, 100_000);
    let n = relay.frames.lock().unwrap().len();
    assert!(n > 41 * 4, "{n} frames relayed: too few to have lost any");
}

/// RFC 5040 §7 on the device stack: an RDMA Read of an STag the peer does not have draws
/// the peer's Terminate; the Read completes with a remote access error.
#[test]
fn rfc5040_7_terminate_over_a_device_cable() {
    let (la, lb) = Link::datagram_pair().unwrap();
    let (a, b) = connected(ProgressMode::Thread, la, lb);
    let n = &[&a, &b];
    let sink = a.mr(4096);
    a.qp.post_send(SendWr::read(1, vec![sink.sge(0, 4096)], 0xdead_be00, 0))
        .unwrap();
    let w = wait_wc(n, &a.scq);
    assert_eq!(w.status, WcStatus::RemoteAccess);
    let t = match wait_event(n, &b, |e| matches!(e, Event::TerminateSent { .. })) {
        Event::TerminateSent { terminate, .. } => terminate,
        _ => unreachable!(),
    };
    assert!(matches!(t.cause, TermCause::Rdmap(_)), "{t:?}");
    wait_event(n, &a, |e| matches!(e, Event::TerminateReceived { .. }));
}

/// RFC 5044 §7.1.2 on the device stack: the listener's reject reaches the connecting side
/// with its private data; a connect to a port nobody listens on fails (TCP reset).
#[test]
fn rfc5044_7_1_2_reject_and_refused_over_a_device_cable() {
    let (la, lb) = Link::datagram_pair().unwrap();
    let a = node(ProgressMode::Thread, la, [10, 9, 0, 1]);
    let b = node(ProgressMode::Thread, lb, [10, 9, 0, 2]);
    let n = &[&a, &b];
    let l = b
        .rnic
        .listen_on(&"dev://cable0/10.9.0.2:0".parse().unwrap())
        .unwrap();
    a.rnic
        .connect_to(&a.qp, &l.transport, mpa::Config::default())
        .unwrap();
    let req = match wait_event(n, &b, |e| matches!(e, Event::ConnectRequest(_))) {
        Event::ConnectRequest(r) => r,
        _ => unreachable!(),
    };
    b.rnic.reject(req.id, b"busy").unwrap();
    let e = wait_event(n, &a, |e| matches!(e, Event::Rejected { .. }));
    match e {
        Event::Rejected { private_data, .. } => assert_eq!(private_data, b"busy"),
        other => panic!("{other:?}"),
    }
    let e = connect_fails(n, &a, "dev://cable0/10.9.0.2:9");
    assert!(matches!(e, CmError::Tcp(_)), "{e:?}");
}

/// A new QP of `a` connects to `to` and must fail: the connection error.
fn connect_fails(n: &[&Node], a: &Node, to: &str) -> CmError {
    let qp = a
        .rnic
        .create_qp(QpAttr::new(a.pd, a.scq.clone(), a.rcq.clone()))
        .unwrap();
    a.rnic
        .connect_to(&qp, &to.parse().unwrap(), mpa::Config::default())
        .unwrap();
    match wait_event(n, a, |e| matches!(e, Event::ConnectFailed { .. })) {
        Event::ConnectFailed { error, .. } => error,
        _ => unreachable!(),
    }
}

/// Device addresses that cannot work are refused with a reason.
#[test]
fn device_errors_say_what_to_do() {
    let rnic = Rnic::open(RnicConfig::default()).unwrap();
    let pd = rnic.alloc_pd();
    let cq = Cq::new(16);
    let qp = rnic.create_qp(QpAttr::new(pd, cq.clone(), cq)).unwrap();
    let e = rnic
        .connect_to(
            &qp,
            &"dev://nosuch/10.0.0.1:1".parse().unwrap(),
            mpa::Config::default(),
        )
        .unwrap_err();
    assert!(e.to_string().contains("attach_device"), "{e}");
    let (l, _) = Link::datagram_pair().unwrap();
    rnic.attach_device("c", l, &DeviceConfig::new([10, 0, 0, 1].into(), 24))
        .unwrap();
    let (l2, _) = Link::datagram_pair().unwrap();
    let e = rnic
        .attach_device("c", l2, &DeviceConfig::new([10, 0, 0, 1].into(), 24))
        .unwrap_err();
    assert!(e.to_string().contains("attached already"), "{e}");
    let e = Link::open_tap("a/b").unwrap_err();
    assert!(e.to_string().contains("interface name"), "{e}");
}

/// Bad input from the wire never panics the device stack: thousands of random, truncated
/// and mangled frames (garbage, and well-formed TCP segments to the stack's listening port
/// from neighbours that never answer, with random flags, numbers and payloads) arrive on the
/// cable of a listening RNIC; once the half-open handshakes have expired, the same cable
/// carries a connection to it and every operation places every byte.
#[test]
fn hostile_frames_on_the_cable_change_nothing() {
    use std::os::unix::net::UnixDatagram;
    let (la, lb) = Link::datagram_pair().unwrap();
    let b = node(ProgressMode::Thread, lb, [10, 9, 0, 2]);
    let l = b
        .rnic
        .listen_on(&"dev://cable0/10.9.0.2:7174".parse().unwrap())
        .unwrap();
    let Link::Datagram(raw) = la else {
        unreachable!()
    };
    let raw: UnixDatagram = raw;
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let b_mac = [0x02, 0x53, 10, 9, 0, 2];
    let started = std::time::Instant::now();
    for i in 0..5000u32 {
        let len = (next() % 1600) as usize;
        let mut f: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        if i % 2 == 0 {
            // Well-formed (checksums right, so the stack's TCP sees them): to the stack's
            // MAC, address and listening port, from neighbours that never answer, with
            // random flags, numbers and payloads.
            let r = next();
            let src = [10, 9, 0, 3 + (r % 200) as u8];
            let mut tcp = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, src[3]], b_mac)
                .ipv4(src, [10, 9, 0, 2], 64)
                .tcp((r >> 8) as u16 | 1024, 7174, (r >> 24) as u32, 65_535);
            if r & 1 << 60 != 0 {
                tcp = tcp.syn();
            }
            if r & 1 << 61 != 0 {
                tcp = tcp.ack((r >> 32) as u32);
            }
            if r & 1 << 62 != 0 {
                tcp = tcp.fin();
            }
            if r & 1 << 63 != 0 {
                tcp = tcp.rst();
            }
            let payload = f[..f.len().min(1400)].to_vec();
            f.clear();
            let _ = tcp.write(&mut f, &payload);
        }
        let _ = raw.send(&f);
        if i % 64 == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    // Half-open handshakes from the spoofed neighbours may hold the listener's sockets: they
    // listen again 5 s after their SYN.
    std::thread::sleep(Duration::from_millis(5_500).saturating_sub(started.elapsed()));
    // The same cable now carries a real connection to the same stack.
    let a = node(ProgressMode::Thread, Link::Datagram(raw), [10, 9, 0, 1]);
    a.rnic
        .connect_to(&a.qp, &l.transport, mpa::Config::default())
        .unwrap();
    let req = match wait_event(&[&a, &b], &b, |e| matches!(e, Event::ConnectRequest(_))) {
        Event::ConnectRequest(r) => r,
        _ => unreachable!(),
    };
    assert_eq!(req.listener, l.id);
    b.rnic
        .accept(req.id, &b.qp, mpa::Config::default())
        .unwrap();
    wait_event(&[&a, &b], &a, |e| matches!(e, Event::Established { .. }));
    every_operation(&a, &b, 100_000);
}

/// RFC 5043 on softrnic's own IP: DDP over SCTP as raw IPv4 (protocol 132) on the device
/// cable — first alone on it, then beside an MPA/TCP connection on the same cable; every
/// operation over each, every byte checked, and the SCTP packets on the cable are IPv4
/// protocol 132.
#[test]
fn rfc5043_sctp_as_raw_ip_on_a_device_cable() {
    let (relay, la, lb) = Relay::new(None);
    let a = node(ProgressMode::Thread, la, [10, 9, 0, 1]);
    let b = node(ProgressMode::Thread, lb, [10, 9, 0, 2]);
    let l = b
        .rnic
        .listen_on(&"sctp://10.9.0.2:7180?dev=cable0".parse().unwrap())
        .unwrap();
    a.rnic
        .connect_to(
            &a.qp,
            &"sctp://10.9.0.2:7180?dev=cable0&local=10.9.0.1"
                .parse()
                .unwrap(),
            mpa::Config::default(),
        )
        .unwrap();
    let req = match wait_event(&[&a, &b], &b, |e| matches!(e, Event::ConnectRequest(_))) {
        Event::ConnectRequest(r) => r,
        _ => unreachable!(),
    };
    assert_eq!(req.listener, l.id);
    assert!(req.sctp.is_some(), "an SCTP session request");
    b.rnic
        .accept(req.id, &b.qp, mpa::Config::default())
        .unwrap();
    wait_event(&[&a, &b], &a, |e| matches!(e, Event::Established { .. }));
    assert!(a.qp.session().unwrap().sctp().is_some());
    every_operation(&a, &b, 150_000);
    let sctp_frames = relay
        .frames
        .lock()
        .unwrap()
        .iter()
        .filter(|f| f.len() > 34 && f[12..14] == [0x08, 0x00] && f[23] == 132)
        .count();
    assert!(sctp_frames > 100, "{sctp_frames} SCTP packets on the cable");
    // MPA/TCP on the same devices afterwards.
    let qa = a
        .rnic
        .create_qp(QpAttr::new(a.pd, a.scq.clone(), a.rcq.clone()))
        .unwrap();
    let qb = b
        .rnic
        .create_qp(QpAttr::new(b.pd, b.scq.clone(), b.rcq.clone()))
        .unwrap();
    let ta = Node { qp: qa, ..a };
    let tb = Node { qp: qb, ..b };
    connect_pair(&ta, &tb, "dev://cable0/10.9.0.2:7181", |p| {
        format!("dev://cable0/10.9.0.2:{p}")
    });
    every_operation(&ta, &tb, 50_000);
}

/// A device whose queue is full (its peer does not read) puts the progress loop to sleep
/// until the link has room again: it does not spin on the frames waiting in the backlog,
/// which would take the CPU from the peer that must drain the queue (on a machine with
/// fewer cores than busy threads, for seconds). Room again wakes it: the transfer then
/// completes with every byte in place and no frame dropped.
/// Node a Sends 8 octets of `src` to a receive node b posts, and both complete: everything
/// node a posted before the Send has arrived (RFC 5040 §5.5 ordering).
fn send_behind(a: &Node, b: &Node, src: &stack::MemoryRegion) {
    let n = &[a, b];
    let rbuf = b.mr(8);
    b.qp.post_recv(stack::RecvWr::new(2, vec![rbuf.sge(0, 8)]))
        .unwrap();
    a.qp.post_send(SendWr::send(3, vec![src.sge(0, 8)]))
        .unwrap();
    let w = wait_wc(n, &a.scq);
    assert_eq!((w.wr_id, w.status), (3, WcStatus::Success));
    let r = wait_wc(n, &b.rcq);
    assert_eq!((r.wr_id, r.status), (2, WcStatus::Success));
}

#[test]
fn a_full_device_queue_sleeps_until_the_link_has_room() {
    let (relay, la, lb) = Relay::new(None);
    let (a, b) = connected(ProgressMode::Thread, la, lb);
    let n = &[&a, &b];
    let len = 4 << 20;
    let data = common::node::pattern(len, 5);
    let src = a.mr(len);
    src.buf().write_at(0, &data).unwrap();
    let dst = b.mr(len);
    relay.hold_a.store(true, Ordering::SeqCst);
    // Node a's cable is full: the relay reads nothing from it, and frames node b drops
    // (type 0, not its own) take its room.
    let junk = [0u8; 1514];
    let mut filled = 0;
    while relay.cable_a.send(&junk).is_ok() {
        filled += 1;
        assert!(filled < 100_000, "the cable never filled");
    }
    let full0 = a.rnic.device_stats("cable0").unwrap().tx_full;
    a.qp.post_send(SendWr::write(
        1,
        vec![src.sge(0, len as u32)],
        dst.stag(),
        dst.to_at(0),
    ))
    .unwrap();
    // The write's first frame finds the queue full.
    let t0 = std::time::Instant::now();
    while a.rnic.device_stats("cable0").unwrap().tx_full == full0 {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "node a's device queue never filled: {:?}",
            a.rnic.device_stats("cable0")
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    // While it stays full, the progress loop sleeps: a few polls (the backlog's recheck,
    // the QP's timers), not the hundreds of thousands of a loop that spins.
    let p0 = a.rnic.device_stats("cable0").unwrap().polls;
    std::thread::sleep(Duration::from_millis(500));
    let s = a.rnic.device_stats("cable0").unwrap();
    let polls = s.polls - p0;
    assert!(
        polls < 100,
        "{polls} polls in 500 ms with the queue full: {s:?}"
    );
    // Room again wakes the loop; nothing was lost.
    relay.hold_a.store(false, Ordering::SeqCst);
    let w = wait_wc(n, &a.scq);
    assert_eq!((w.wr_id, w.status), (1, WcStatus::Success));
    // A Send after the Write: once it arrives the Write is placed (RFC 5040 ordering).
    send_behind(&a, &b, &src);
    assert!(dst.buf().to_vec() == data, "Write payload");
    let s = a.rnic.device_stats("cable0").unwrap();
    assert_eq!(s.tx_dropped, 0, "{s:?}");
    eprintln!(
        "queue full {} times; {polls} polls in 500 ms full",
        s.tx_full
    );
}

/// RFC 5044 §4.5: the MULPDU follows from the EMSS, and over softrnic's own TCP the EMSS is
/// what one full segment of the connection carries (the device MTU less the IPv4 and TCP
/// headers; smoltcp sends no timestamp option). Full FPDUs then fill full segments, so a
/// stream that leaves in full segments stays aligned (RFC 5044 §8) for receivers and capture
/// dissectors that rely on alignment; with the EMSS 12 octets short they drifted across
/// segment boundaries. (Segments cut short by the peer's window still shift the stream.)
#[test]
fn rfc5044_4_5_mulpdu_follows_the_emss_of_a_full_segment_on_a_device_cable() {
    let (relay, la, lb) = Relay::new(None);
    let (a, b) = connected(ProgressMode::Thread, la, lb);
    let n = &[&a, &b];
    let len = 256 << 10;
    let src = a.mr(len);
    src.buf()
        .write_at(0, &common::node::pattern(len, 9))
        .unwrap();
    let dst = b.mr(len);
    a.qp.post_send(SendWr::write(
        1,
        vec![src.sge(0, len as u32)],
        dst.stag(),
        dst.to_at(0),
    ))
    .unwrap();
    let w = wait_wc(n, &a.scq);
    assert_eq!((w.wr_id, w.status), (1, WcStatus::Success));
    // The Write completed when TCP took it; a Send behind it arrives after it has left.
    send_behind(&a, &b, &src);
    // Node a's TCP payloads, in order (the relay loses nothing here).
    let frames = relay.frames.lock().unwrap().clone();
    let payloads: Vec<Vec<u8>> = frames
        .iter()
        .filter_map(|f| {
            let p = etherparse::SlicedPacket::from_ethernet(f).ok()?;
            let Some(etherparse::NetSlice::Ipv4(ip)) = &p.net else {
                return None;
            };
            if ip.header().source() != [10, 9, 0, 1] {
                return None;
            }
            match p.transport {
                Some(etherparse::TransportSlice::Tcp(t)) if !t.payload().is_empty() => {
                    Some(t.payload().to_vec())
                }
                _ => None,
            }
        })
        .collect();
    let full = payloads.iter().map(Vec::len).max().unwrap();
    let emss = u32::try_from(full).unwrap();
    assert_eq!(
        a.qp.mulpdu(),
        mpa::fpdu::mulpdu(emss, false) as usize,
        "MULPDU from the EMSS of a full segment ({full} octets)"
    );
    // The first full segment of the Write is one whole FPDU (its CRC field is there whether
    // or not CRC was negotiated, RFC 5044 §4.1).
    let first = payloads.iter().find(|p| p.len() == full).unwrap();
    let ulpdu = usize::from(u16::from_be_bytes([first[0], first[1]]));
    let fpdu = 2 + ulpdu + mpa::fpdu::pad_len(ulpdu) + 4;
    assert_eq!(fpdu, full, "the first full segment is one whole FPDU");
}

/// A cable whose far end is gone (as an interface removed under a NIC): the device reports
/// its link errors, counts them, and once they persist goes down as a NIC reports link
/// down — the established QP on it is disconnected with a reset, and a connect on the
/// device fails with an error naming it, instead of the stack retrying into a dead link.
#[test]
fn a_cable_closed_under_the_device_takes_it_down() {
    let (relay, la, lb) = Relay::new(None);
    let (a, b) = connected(ProgressMode::Thread, la, lb);
    let n = &[&a, &b];
    let src = a.mr(8);
    send_behind(&a, &b, &src);
    let before = a.rnic.device_stats("cable0").unwrap();
    assert_eq!(
        (before.link_errors, before.link_down),
        (0, false),
        "{before:?}"
    );
    // Both far ends of the cables close (the relay's sockets), with no FIN or reset.
    drop(relay);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let mut wr = 10;
    while !a.rnic.device_stats("cable0").unwrap().link_down {
        assert!(
            std::time::Instant::now() < deadline,
            "the device never went down: {:?}",
            a.rnic.device_stats("cable0")
        );
        // Each Send makes a segment the dead link refuses.
        let _ = a.qp.post_send(SendWr::send(wr, vec![src.sge(0, 8)]));
        wr += 1;
        std::thread::sleep(Duration::from_millis(20));
    }
    let s = a.rnic.device_stats("cable0").unwrap();
    assert!(s.link_errors >= 3 && s.tx_dropped >= 3, "{s:?}");
    // The QP on the device is told: its connection ended with a reset.
    let e = wait_event(n, &a, |e| matches!(e, Event::Disconnected { .. }));
    assert!(
        matches!(
            e,
            Event::Disconnected {
                reason: stack::CloseReason::Reset,
                ..
            }
        ),
        "{e:?}"
    );
    // A device that is down takes no new connection, and says which device and why.
    match connect_fails(n, &a, "dev://cable0/10.9.0.2:7174") {
        CmError::Tcp(why) => assert!(why.contains("device cable0 is down"), "{why}"),
        other => panic!("{other:?}"),
    }
    // Down, the device no longer touches its link: no more errors pile up.
    let errors = a.rnic.device_stats("cable0").unwrap().link_errors;
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(a.rnic.device_stats("cable0").unwrap().link_errors, errors);
}
