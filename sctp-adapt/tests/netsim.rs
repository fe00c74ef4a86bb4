//! SCTP over raw IPv4 (protocol 132) in Ethernet frames, in the deterministic network
//! simulator: two hosts with two interfaces each on two links, with loss, reordering,
//! duplication and a link failure.

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::rc::Rc;
use std::time::Duration;

use netsim::{LinkParams, Node, Sim};
use sctp::{AssocId, Endpoint, EndpointConfig, Event};

const ETH_IPV4: u16 = 0x0800;
const PROTO_SCTP: u8 = 132;

fn mac(host: u8, iface: u8) -> [u8; 6] {
    [2, 0, 0, 0, host, iface]
}

fn ip_checksum(h: &[u8]) -> u16 {
    let mut sum: u32 = h
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Ethernet + IPv4 framing of an SCTP packet.
fn frame(src_mac: [u8; 6], dst_mac: [u8; 6], src: Ipv4Addr, dst: Ipv4Addr, sctp: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(34 + sctp.len());
    f.extend_from_slice(&dst_mac);
    f.extend_from_slice(&src_mac);
    f.extend_from_slice(&ETH_IPV4.to_be_bytes());
    let total = (20 + sctp.len()) as u16;
    let mut ip = [0u8; 20];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    ip[6] = 0x40; // DF
    ip[8] = 64;
    ip[9] = PROTO_SCTP;
    ip[12..16].copy_from_slice(&src.octets());
    ip[16..20].copy_from_slice(&dst.octets());
    let c = ip_checksum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(sctp);
    f
}

/// Parses Ethernet + IPv4 and returns (src, dst, SCTP bytes) for protocol 132.
fn unframe(f: &[u8]) -> Option<(Ipv4Addr, Ipv4Addr, &[u8])> {
    if f.get(12..14)? != ETH_IPV4.to_be_bytes() {
        return None;
    }
    let ip = f.get(14..)?;
    let ihl = usize::from(*ip.first()? & 0x0f) * 4;
    if ip[0] >> 4 != 4 || ihl < 20 || ip.len() < ihl || ip_checksum(ip.get(..ihl)?) != 0 {
        return None;
    }
    if ip[9] != PROTO_SCTP {
        return None;
    }
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
    let dst = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
    Some((src, dst, ip.get(ihl..total)?))
}

type App = Box<dyn FnMut(&mut Endpoint, sctp::Instant)>;

/// A multihomed host: one SCTP endpoint, one IPv4 address per interface, static ARP (each
/// interface is on a point-to-point link to the peer's interface of the same index).
struct SctpHost {
    id: u8,
    peer_id: u8,
    addrs: Vec<Ipv4Addr>,
    ep: Endpoint,
    app: App,
    out: VecDeque<(usize, Vec<u8>)>,
}

impl SctpHost {
    fn sock(ip: Ipv4Addr) -> SocketAddr {
        SocketAddr::V4(SocketAddrV4::new(ip, 0))
    }

    fn pump(&mut self, now: sctp::Instant) {
        (self.app)(&mut self.ep, now);
        while let Some(t) = self.ep.poll_transmit(now) {
            let (SocketAddr::V4(l), SocketAddr::V4(r)) = (t.local, t.remote) else {
                continue;
            };
            let Some(iface) = self.addrs.iter().position(|a| a == l.ip()) else {
                continue;
            };
            let f = frame(
                mac(self.id, iface as u8),
                mac(self.peer_id, iface as u8),
                *l.ip(),
                *r.ip(),
                &t.bytes,
            );
            self.out.push_back((iface, f));
        }
    }
}

fn t(now: netsim::Instant) -> sctp::Instant {
    sctp::Instant::from_nanos(now.as_nanos())
}

impl Node for SctpHost {
    fn interface_count(&self) -> usize {
        self.addrs.len()
    }

    fn handle_frame(&mut self, now: netsim::Instant, iface: usize, f: Vec<u8>) {
        if let Some((src, dst, sctp)) = unframe(&f)
            && self.addrs.get(iface) == Some(&dst)
        {
            self.ep
                .handle_packet(t(now), Self::sock(dst), Self::sock(src), sctp);
        }
        self.pump(t(now));
    }

    fn poll_transmit(&mut self, now: netsim::Instant) -> Option<(usize, Vec<u8>)> {
        if self.out.is_empty() {
            self.pump(t(now));
        }
        self.out.pop_front()
    }

    fn poll_timeout(&mut self) -> Option<netsim::Instant> {
        self.ep
            .poll_timeout()
            .map(|x| netsim::Instant::from_nanos(x.as_nanos()))
    }

    fn handle_timeout(&mut self, now: netsim::Instant) {
        self.ep.handle_timeout(t(now));
        self.pump(t(now));
    }
}

fn pattern(m: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (m.wrapping_mul(31).wrapping_add(i as u64 * 7) % 251) as u8)
        .collect()
}

#[derive(Default)]
struct Progress {
    sent: u64,
    received: Vec<(u16, u32, bool, usize)>,
    events_a: Vec<Event>,
    events_b: Vec<Event>,
    errors: Vec<String>,
}

fn ips(host: u8) -> Vec<Ipv4Addr> {
    vec![Ipv4Addr::new(10, 0, 1, host), Ipv4Addr::new(10, 0, 2, host)]
}

/// Two hosts, two lossy, reordering, duplicating links; link 1 (the primary) fails
/// mid-transfer. Every message arrives intact, ordered ones in order per stream.
#[test]
fn multihomed_transfer_over_impaired_links_with_link_failure() {
    const MSGS: u64 = 3000;
    let mut sim = Sim::new(77);
    let progress = Rc::new(RefCell::new(Progress::default()));

    let sock = |ip: Ipv4Addr| SocketAddr::V4(SocketAddrV4::new(ip, 0));
    let cfg_a = EndpointConfig::new(5000, ips(1).into_iter().map(sock).collect(), 1);
    let cfg_b = EndpointConfig::new(6000, ips(2).into_iter().map(sock).collect(), 2);

    let pa = progress.clone();
    let mut assoc: Option<AssocId> = None;
    let sender: App = Box::new(move |ep, now| {
        let id = *assoc.get_or_insert_with(|| {
            ep.connect(now, sock(Ipv4Addr::new(10, 0, 1, 2)), 6000)
                .unwrap()
        });
        let mut p = pa.borrow_mut();
        while let Some((_, e)) = ep.poll_event() {
            p.events_a.push(e);
        }
        let Some(a) = ep.association_mut(id) else {
            return;
        };
        if a.state() != sctp::State::Established {
            return;
        }
        while p.sent < MSGS {
            let m = p.sent;
            let len = 1 + (m as usize * 389) % 6000;
            let stream = (m % 4) as u16;
            let unordered = m % 10 == 9;
            match a.send(stream, m as u32, unordered, &pattern(m, len)) {
                Ok(()) => p.sent += 1,
                Err(sctp::SendError::BufferFull { .. }) => break,
                Err(e) => panic!("{e}"),
            }
        }
    });
    let pb = progress.clone();
    let mut accepted: Option<AssocId> = None;
    let receiver: App = Box::new(move |ep, _now| {
        let mut p = pb.borrow_mut();
        if let Some(id) = ep.accept() {
            accepted = Some(id);
        }
        while let Some((_, e)) = ep.poll_event() {
            p.events_b.push(e);
        }
        let Some(b) = accepted.and_then(|id| ep.association_mut(id)) else {
            return;
        };
        while let Some(m) = b.recv() {
            let id = u64::from(m.ppid);
            let len = 1 + (id as usize * 389) % 6000;
            if m.data != pattern(id, len) || m.stream != (id % 4) as u16 {
                p.errors.push(format!("message {id} corrupted"));
            }
            p.received
                .push((m.stream, m.ppid, m.unordered, m.data.len()));
        }
    });

    let a = sim.add_node(SctpHost {
        id: 1,
        peer_id: 2,
        addrs: ips(1),
        ep: Endpoint::new(cfg_a),
        app: sender,
        out: VecDeque::new(),
    });
    let b = sim.add_node(SctpHost {
        id: 2,
        peer_id: 1,
        addrs: ips(2),
        ep: Endpoint::new(cfg_b),
        app: receiver,
        out: VecDeque::new(),
    });
    let params = LinkParams::default()
        .bandwidth(100_000_000)
        .delay(Duration::from_millis(2))
        .loss(0.01)
        .duplicate(0.01)
        .reorder(0.02, Duration::from_millis(3));
    let l1 = sim.link(a.iface(0), b.iface(0), params.clone()).unwrap();
    sim.link(a.iface(1), b.iface(1), params).unwrap();
    // The primary link fails for good after 300 ms.
    sim.link_down_at(l1, netsim::Instant::from_millis(300))
        .unwrap();

    let done = sim.run_until_condition(netsim::Instant::from_secs(120), |_| {
        progress.borrow().received.len() as u64 == MSGS
    });
    let p = progress.borrow();
    assert!(p.errors.is_empty(), "{:?}", p.errors);
    assert!(
        done,
        "received {} of {MSGS} by {}",
        p.received.len(),
        sim.now()
    );
    // Every message exactly once.
    let mut ids: Vec<u32> = p.received.iter().map(|r| r.1).collect();
    ids.sort_unstable();
    assert!(ids.iter().enumerate().all(|(i, &id)| i as u32 == id));
    // Ordered messages in order within each stream.
    let mut last: BTreeMap<u16, u32> = BTreeMap::new();
    for &(stream, ppid, unordered, _) in &p.received {
        if !unordered && let Some(prev) = last.insert(stream, ppid) {
            assert!(prev < ppid, "stream {stream}: {prev} before {ppid}");
        }
    }
    // The failure was noticed and data moved to the second path.
    let alt = sock(Ipv4Addr::new(10, 0, 2, 2));
    assert!(
        p.events_a.contains(&Event::PrimaryChanged { remote: alt }),
        "{:?}",
        p.events_a
    );
    assert!(
        sim.now() < netsim::Instant::from_secs(60),
        "took {}",
        sim.now()
    );
    let bytes: usize = p.received.iter().map(|r| r.3).sum();
    eprintln!(
        "netsim: {MSGS} messages, {bytes} bytes delivered by {}",
        sim.now()
    );
}
