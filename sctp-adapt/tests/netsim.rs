//! SCTP over raw IPv4 (protocol 132) in Ethernet frames, in the deterministic network
//! simulator: two hosts with two interfaces each on two links, with loss, reordering,
//! duplication and a link failure.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::rc::Rc;
use std::time::Duration;

use netsim::{LinkParams, Sim};
use sctp::netsim_host::{App, SctpHost};
use sctp::{AssocId, Endpoint, EndpointConfig, Event};

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

    let a = sim.add_node(SctpHost::new(1, 2, ips(1), Endpoint::new(cfg_a), sender));
    let b = sim.add_node(SctpHost::new(2, 1, ips(2), Endpoint::new(cfg_b), receiver));
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
