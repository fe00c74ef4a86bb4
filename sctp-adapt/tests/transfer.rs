//! Two associations back to back in memory: setup, data, shutdown, abort, loss recovery.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use sctp::wire::{Chunk, chunk_type, parse_packet};
use sctp::{AbortReason, AssociationConfig, Event, Instant, State};

fn cfg() -> AssociationConfig {
    AssociationConfig::default()
}

/// RFC 9260 §5.1: four-way handshake; both sides come up with consistent tags.
#[test]
fn rfc9260_5_1_handshake_establishes_both_sides() {
    let mut p = Pair::new(1, cfg());
    p.keep_log = true;
    p.connect();
    assert!(p.events_b.iter().any(|(_, e)| *e == Event::Connected));
    let (at, ap) = (p.assoc_a().local_tag(), p.assoc_a().peer_tag());
    let (bt, bp) = (p.assoc_b().local_tag(), p.assoc_b().peer_tag());
    assert_eq!(at, bp);
    assert_eq!(bt, ap);
    assert_eq!(p.assoc_a().state(), State::Established);
    assert_eq!(p.assoc_b().state(), State::Established);
    let kinds: Vec<Vec<u8>> = p
        .log
        .iter()
        .take(4)
        .map(|s| chunk_types(&s.bytes))
        .collect();
    assert_eq!(
        kinds,
        vec![
            vec![chunk_type::INIT],
            vec![chunk_type::INIT_ACK],
            vec![chunk_type::COOKIE_ECHO],
            vec![chunk_type::COOKIE_ACK]
        ]
    );
    // §5.1: the INIT carries verification tag 0, the INIT ACK the INIT's Initiate Tag.
    let init = parse_packet(&p.log[0].bytes, true).unwrap();
    assert_eq!(init.header.verification_tag, 0);
    let Chunk::Init(i) = &init.chunks[0] else {
        panic!()
    };
    let ack = parse_packet(&p.log[1].bytes, true).unwrap();
    assert_eq!(ack.header.verification_tag, i.initiate_tag);
    // Streams: min(requested, offered).
    assert_eq!(p.assoc_a().streams(), (16, 16));
}

/// RFC 9260 §5.1: setup works in the other direction too (B initiates towards A).
#[test]
fn rfc9260_5_1_handshake_other_direction() {
    let mut p = Pair::new(2, cfg());
    let id = p.b.connect(p.now, addr("10.0.2.1:0"), PORT_A).unwrap();
    p.b_id = Some(id);
    let ok = p.run_until(Instant::from_secs(5), |p| {
        p.a_id.is_some() && p.events_b.iter().any(|(_, e)| *e == Event::Connected)
    });
    assert!(ok);
    p.assoc_b().send(0, 1, false, b"reverse").unwrap();
    assert!(p.run_until(Instant::from_secs(6), |p| p.assoc_a().recv().is_some()));
}

fn exchange(p: &mut Pair, msgs: &[(u16, bool, usize)]) {
    for (i, &(stream, unordered, len)) in msgs.iter().enumerate() {
        p.assoc_a()
            .send(stream, i as u32, unordered, &pattern(i as u64, len))
            .unwrap();
        p.assoc_b()
            .send(stream, i as u32, unordered, &pattern(1000 + i as u64, len))
            .unwrap();
    }
    let mut got_b: Vec<sctp::Message> = Vec::new();
    let mut got_a: Vec<sctp::Message> = Vec::new();
    let n = msgs.len();
    let ok = p.run_until(p.now + Duration::from_secs(60), |p| {
        while let Some(m) = p.assoc_b().recv() {
            got_b.push(m);
        }
        while let Some(m) = p.assoc_a().recv() {
            got_a.push(m);
        }
        got_a.len() == n && got_b.len() == n
    });
    assert!(
        ok,
        "delivered {}/{} and {}/{}",
        got_b.len(),
        n,
        got_a.len(),
        n
    );
    for (got, base) in [(&got_b, 0u64), (&got_a, 1000u64)] {
        // Every message intact.
        for m in got.iter() {
            let (stream, unordered, len) = msgs[m.ppid as usize];
            assert_eq!(m.stream, stream);
            assert_eq!(m.unordered, unordered);
            assert_eq!(
                m.data,
                pattern(base + u64::from(m.ppid), len),
                "message {}",
                m.ppid
            );
        }
        // Ordered messages arrive in order within their stream (RFC 9260 §6.6).
        let mut last: BTreeMap<u16, u32> = BTreeMap::new();
        for m in got.iter().filter(|m| !m.unordered) {
            if let Some(prev) = last.insert(m.stream, m.ppid) {
                assert!(prev < m.ppid, "stream {} out of order", m.stream);
            }
        }
    }
}

/// RFC 9260 §6.6, §6.9: ordered and unordered messages on several streams, both
/// directions, some needing fragmentation.
#[test]
fn rfc9260_6_6_data_both_ways_ordered_and_unordered_streams() {
    let mut p = Pair::connected(3, cfg());
    let mut msgs = Vec::new();
    for i in 0..200usize {
        msgs.push(((i % 5) as u16, i % 7 == 3, 1 + (i * 37) % 3000));
    }
    exchange(&mut p, &msgs);
}

/// RFC 9260 §6.9: a large message is fragmented with B/E bits and reassembled.
#[test]
fn rfc9260_6_9_fragmentation_of_large_messages() {
    let mut p = Pair::connected(4, cfg());
    p.keep_log = true;
    let big = pattern(7, 200_000);
    p.assoc_a().send(3, 99, false, &big).unwrap();
    let mut got = None;
    assert!(p.run_until(p.now + Duration::from_secs(30), |p| {
        got = p.assoc_b().recv();
        got.is_some()
    }));
    let m = got.unwrap();
    assert_eq!(m.data, big);
    assert_eq!((m.stream, m.ppid), (3, 99));
    // Every DATA chunk fits a 1500-byte IPv4 path; first has B, last has E, none both.
    let mut flags = Vec::new();
    for s in p.log.iter().filter(|s| s.from == Side::A) {
        assert!(s.bytes.len() <= 1480);
        for c in parse_packet(&s.bytes, true).unwrap().chunks {
            if let Chunk::Data(d) = c {
                flags.push(d.flags & 3);
            }
        }
    }
    assert!(flags.len() >= 200_000 / 1452);
    assert_eq!(flags[0], 0b10);
    assert_eq!(*flags.last().unwrap(), 0b01);
    assert!(flags[1..flags.len() - 1].iter().all(|&f| f == 0));
}

/// RFC 9260 §9.2: graceful shutdown delivers queued data, then both sides close.
#[test]
fn rfc9260_9_2_shutdown_after_data() {
    let mut p = Pair::connected(5, cfg());
    p.keep_log = true;
    for i in 0..50 {
        p.assoc_a().send(0, 0, false, &pattern(i, 5000)).unwrap();
    }
    let now = p.now;
    p.assoc_a().shutdown(now);
    let mut n = 0;
    let ok = p.run_until(p.now + Duration::from_secs(30), |p| {
        if let Some(id) = p.b_id
            && let Some(b) = p.b.association_mut(id)
        {
            while let Some(m) = b.recv() {
                assert_eq!(m.data, pattern(n, 5000));
                n += 1;
            }
        }
        p.events_a
            .iter()
            .any(|(_, e)| *e == Event::ShutdownComplete)
            && p.events_b
                .iter()
                .any(|(_, e)| *e == Event::ShutdownComplete)
    });
    assert!(ok);
    assert_eq!(n, 50);
    let types: Vec<u8> = p.log.iter().flat_map(|s| chunk_types(&s.bytes)).collect();
    let pos = |t| types.iter().position(|&x| x == t).unwrap();
    assert!(pos(chunk_type::SHUTDOWN) < pos(chunk_type::SHUTDOWN_ACK));
    assert!(pos(chunk_type::SHUTDOWN_ACK) < pos(chunk_type::SHUTDOWN_COMPLETE));
    // After close nothing more is sent and sends are refused.
    assert!(p.a.poll_transmit(p.now).is_none());
}

/// RFC 9260 §9.2: a graceful shutdown delivers every byte the peer sent. A receiver that
/// reads nothing until the shutdown has completed still finds all of it: the endpoint keeps
/// a closed association while it holds unread messages.
#[test]
fn rfc9260_9_2_data_readable_after_shutdown_completes() {
    let mut p = Pair::connected(6, cfg());
    for i in 0..40 {
        p.assoc_a().send(0, 0, false, &pattern(i, 1000)).unwrap();
    }
    let now = p.now;
    p.assoc_a().shutdown(now);
    let ok = p.run_until(p.now + Duration::from_secs(30), |p| {
        p.events_b
            .iter()
            .any(|(_, e)| *e == Event::ShutdownComplete)
    });
    assert!(ok, "shutdown did not complete");
    // The endpoint is polled on (as a driver would), then the data is read.
    p.run_for(Duration::from_secs(1));
    let b = p.assoc_b();
    assert_eq!(b.state(), State::Closed);
    for i in 0..40 {
        let m = b
            .recv()
            .unwrap_or_else(|| panic!("message {i} lost after close"));
        assert_eq!(m.data, pattern(i, 1000));
    }
    assert!(b.recv().is_none());
}

/// RFC 9260 §9.1: ABORT closes both ends at once and carries the User-Initiated Abort cause.
#[test]
fn rfc9260_9_1_abort() {
    let mut p = Pair::connected(6, cfg());
    p.assoc_a().abort();
    assert!(p.run_until(p.now + Duration::from_secs(1), |p| {
        p.events_b
            .iter()
            .any(|(_, e)| matches!(e, Event::Aborted { .. }))
    }));
    let reason = p
        .events_b
        .iter()
        .find_map(|(_, e)| match e {
            Event::Aborted { reason } => Some(reason.clone()),
            _ => None,
        })
        .unwrap();
    assert!(
        matches!(reason, AbortReason::Peer(c) if matches!(c[0], sctp::wire::ErrorCause::UserInitiatedAbort(_)))
    );
    assert!(p.events_a.iter().any(|(_, e)| *e
        == Event::Aborted {
            reason: AbortReason::Local
        }));
}

/// RFC 9260 §6.3.3: a lost DATA packet is retransmitted when T3-rtx expires (RTO.Initial
/// 1 s on a fresh path), and only then.
#[test]
fn rfc9260_6_3_3_retransmission_after_loss() {
    let mut p = Pair::connected(7, cfg());
    let mut dropped = false;
    p.filter = Some(Box::new(move |_, side, bytes, _| {
        if side == Side::A && chunk_types(bytes).contains(&chunk_type::DATA) && !dropped {
            dropped = true;
            return false;
        }
        true
    }));
    let t0 = p.now;
    p.assoc_a().send(0, 0, false, b"lost once").unwrap();
    let mut got = None;
    assert!(p.run_until(p.now + Duration::from_secs(10), |p| {
        got = p.assoc_b().recv();
        got.is_some()
    }));
    assert_eq!(got.unwrap().data, b"lost once");
    let elapsed = p.now - t0;
    // The handshake measured an RTT of 10 ms, so the RTO is RTO.Min = 1 s.
    assert!(
        elapsed >= Duration::from_secs(1) && elapsed < Duration::from_millis(1100),
        "{elapsed:?}"
    );
}

/// RFC 9260 §7.2.4: three miss indications trigger fast retransmit well before the RTO.
#[test]
fn rfc9260_7_2_4_fast_retransmit() {
    let mut p = Pair::connected(8, cfg());
    let mut data_pkts = 0;
    p.filter = Some(Box::new(move |_, side, bytes, _| {
        if side == Side::A && chunk_types(bytes).contains(&chunk_type::DATA) {
            data_pkts += 1;
            if data_pkts == 2 {
                return false;
            }
        }
        true
    }));
    let t0 = p.now;
    for i in 0..20 {
        p.assoc_a().send(0, 0, false, &pattern(i, 1400)).unwrap();
    }
    let mut n = 0;
    assert!(p.run_until(p.now + Duration::from_secs(10), |p| {
        while let Some(m) = p.assoc_b().recv() {
            assert_eq!(m.data, pattern(n, 1400));
            n += 1;
        }
        n == 20
    }));
    assert!(
        p.now - t0 < Duration::from_millis(500),
        "took {:?}",
        p.now - t0
    );
    assert!(p.assoc_a().stats().fast_retransmits >= 1);
    assert_eq!(p.assoc_a().stats().t3_expirations, 0);
}

/// RFC 9260 §6.3.3 E2 and §8.1: with the peer unreachable the RTO doubles on every
/// expiry, and after Association.Max.Retrans the association fails.
#[test]
fn rfc9260_6_3_3_rto_backoff_and_association_failure() {
    let c = AssociationConfig {
        heartbeats: false,
        pf_max_retrans: None,
        ..cfg()
    };
    let mut p = Pair::connected(9, c);
    p.keep_log = true;
    p.down = vec![1, 2];
    let t0 = p.now;
    p.assoc_a().send(0, 0, false, b"into the void").unwrap();
    assert!(p.run_until(p.now + Duration::from_secs(1000), |p| {
        p.events_a
            .iter()
            .any(|(_, e)| matches!(e, Event::Aborted { .. }))
    }));
    assert!(p.events_a.iter().any(|(_, e)| *e
        == Event::Aborted {
            reason: AbortReason::Timeout
        }));
    let times: Vec<Duration> = p
        .log
        .iter()
        .filter(|s| {
            s.from == Side::A && s.at >= t0 && chunk_types(&s.bytes).contains(&chunk_type::DATA)
        })
        .map(|s| s.at - t0)
        .collect();
    // First transmission plus Association.Max.Retrans (10) retransmissions.
    assert_eq!(times.len(), 11, "{times:?}");
    let gaps: Vec<u64> = times.windows(2).map(|w| (w[1] - w[0]).as_secs()).collect();
    // 1, 2, 4, ... capped at RTO.Max = 60 s. (The second path is still unconfirmed when the
    // network fails, so every retransmission goes to the primary.)
    assert_eq!(gaps, [1, 2, 4, 8, 16, 32, 60, 60, 60, 60]);
}

/// Random loss, duplication and reordering: every message arrives intact and in order.
#[test]
fn lossy_reordering_duplicating_link_delivers_everything() {
    for seed in [11u64, 12, 13] {
        let mut p = Pair::connected(seed, cfg());
        p.loss = 0.05;
        p.duplicate = 0.05;
        p.reorder = 0.1;
        let msgs: Vec<(u16, bool, usize)> = (0..300)
            .map(|i| ((i % 3) as u16, i % 11 == 0, 100 + (i * 131) % 4000))
            .collect();
        exchange(&mut p, &msgs);
    }
}

/// RFC 9260 §9.2: both ends shut down at the same time (SHUTDOWN crosses SHUTDOWN); both
/// complete.
#[test]
fn rfc9260_9_2_simultaneous_shutdown() {
    let mut p = Pair::connected(14, cfg());
    let now = p.now;
    p.assoc_a().shutdown(now);
    p.assoc_b().shutdown(now);
    assert!(p.run_until(p.now + Duration::from_secs(10), |p| {
        p.events_a
            .iter()
            .any(|(_, e)| *e == Event::ShutdownComplete)
            && p.events_b
                .iter()
                .any(|(_, e)| *e == Event::ShutdownComplete)
    }));
}

/// RFC 9260 §9.2: the SHUTDOWN receiver still delivers its own queued data before it
/// answers with SHUTDOWN ACK; it accepts no new data from its user.
#[test]
fn rfc9260_9_2_shutdown_receiver_flushes_its_data() {
    let mut p = Pair::connected(15, cfg());
    for i in 0..30 {
        p.assoc_b().send(1, 0, false, &pattern(i, 2000)).unwrap();
    }
    let now = p.now;
    p.assoc_a().shutdown(now);
    let mut n = 0;
    let mut refused = false;
    assert!(p.run_until(p.now + Duration::from_secs(20), |p| {
        if let Some(id) = p.b_id
            && let Some(b) = p.b.association_mut(id)
            && b.state() == State::ShutdownReceived
        {
            refused |= b.send(1, 0, false, b"late").is_err();
        }
        if let Some(id) = p.a_id
            && let Some(a) = p.a.association_mut(id)
        {
            while let Some(m) = a.recv() {
                assert_eq!(m.data, pattern(n, 2000));
                n += 1;
            }
        }
        p.events_b
            .iter()
            .any(|(_, e)| *e == Event::ShutdownComplete)
    }));
    assert_eq!(n, 30);
    assert!(refused);
}

/// RFC 9260 §5.1.6 / §4 (note on Max.Init.Retransmits): INIT to an unreachable peer is
/// retransmitted with backed-off RTO and the attempt fails after Max.Init.Retransmits.
#[test]
fn rfc9260_5_1_init_retransmission_limit() {
    let mut p = Pair::new(16, cfg());
    p.keep_log = true;
    p.down = vec![1, 2];
    let id =
        p.a.connect(Instant::ZERO, addr("10.0.1.2:0"), PORT_B)
            .unwrap();
    p.a_id = Some(id);
    assert!(p.run_until(Instant::from_secs(1000), |p| !p.events_a.is_empty()));
    assert_eq!(
        p.events_a[0].1,
        Event::Aborted {
            reason: AbortReason::Timeout
        }
    );
    let times: Vec<u64> = p
        .log
        .iter()
        .map(|s| s.at.as_nanos() / 1_000_000_000)
        .collect();
    // 1 + 8 retransmissions at 0, 1, 3, 7, 15, 31, 63, 123, 183 s; failure at 243 s.
    assert_eq!(times, [0, 1, 3, 7, 15, 31, 63, 123, 183]);
    assert_eq!(p.now, Instant::from_secs(243));
}

/// Finds an endpoint seed whose first association starts its TSNs within `margin` of the
/// 2^32 wrap. Mirrors the derivation in the endpoint (a key for the cookie, a key for the
/// association's generator; then tag, then initial TSN), and the test checks the INIT.
fn seed_near_wrap(margin: u32) -> (u64, u32) {
    for seed in 0u64.. {
        let mut r = sctp::rng::Rng::new(seed);
        r.key();
        let mut ar = sctp::rng::Rng::from_key(r.key());
        ar.nonzero_u32();
        let tsn = ar.next_u32();
        if tsn > u32::MAX - margin {
            return (seed, tsn);
        }
    }
    unreachable!()
}

/// RFC 9260 §1.6 / §3.3.1: TSNs and SSNs wrap (serial number arithmetic): a lossy transfer
/// whose TSNs cross 2^32, and more than 65536 ordered messages on one stream.
#[test]
fn rfc9260_1_6_tsn_and_ssn_wrap_around() {
    let (seed, tsn) = seed_near_wrap(3000);
    let mut p = Pair::with_configs(
        5,
        config(seed, a_addrs(), PORT_A, cfg()),
        config(77, b_addrs(), PORT_B, cfg()),
    );
    p.keep_log = true;
    p.connect();
    let init = parse_packet(&p.log[0].bytes, true).unwrap();
    let Chunk::Init(i) = &init.chunks[0] else {
        panic!()
    };
    assert_eq!(i.initial_tsn, tsn);
    p.keep_log = false;
    p.loss = 0.02;
    p.reorder = 0.05;
    const N: u64 = 70_000;
    let (mut sent, mut got) = (0u64, 0u64);
    assert!(p.run_until(p.now + Duration::from_secs(600), |p| {
        while sent < N {
            let m = (sent as u32).to_be_bytes();
            if p.assoc_a().send(2, 0, false, &m).is_err() {
                break;
            }
            sent += 1;
        }
        while let Some(m) = p.assoc_b().recv() {
            assert_eq!(m.data, (got as u32).to_be_bytes(), "message {got}");
            assert_eq!(m.ssn, got as u16);
            got += 1;
        }
        got == N
    }));
}

/// IPv6 addresses work the same way (IPv6 Address parameters, 40-byte IP header in the
/// packet size); an IPv4-only peer address list is not offered IPv6 paths.
#[test]
fn ipv6_association_with_mixed_family_peer() {
    let a6 = vec![addr("[fd00::1:1]:0"), addr("[fd00::2:1]:0")];
    let b_mixed = vec![
        addr("[fd00::1:2]:0"),
        addr("10.0.1.2:0"),
        addr("[fd00::2:2]:0"),
    ];
    let mut p = Pair::with_configs(
        17,
        config(17, a6, PORT_A, cfg()),
        config(18, b_mixed, PORT_B, cfg()),
    );
    p.keep_log = true;
    let id =
        p.a.connect(Instant::ZERO, addr("[fd00::1:2]:0"), PORT_B)
            .unwrap();
    p.a_id = Some(id);
    assert!(p.run_until(Instant::from_secs(5), |p| p.b_id.is_some()
        && p.connected_a()));
    assert_eq!(
        p.assoc_a().remote_addresses(),
        vec![addr("[fd00::1:2]:0"), addr("[fd00::2:2]:0")]
    );
    let big = pattern(3, 50_000);
    p.assoc_a().send(0, 0, false, &big).unwrap();
    let mut got = None;
    assert!(p.run_until(p.now + Duration::from_secs(5), |p| {
        got = p.assoc_b().recv();
        got.is_some()
    }));
    assert_eq!(got.unwrap().data, big);
    // PMTU 1500 less the 40-byte IPv6 header.
    assert!(p.log.iter().all(|s| s.bytes.len() <= 1460));
    assert!(p.log.iter().any(|s| s.bytes.len() > 1440));
}

/// RFC 9260 §7.2.1: slow start grows cwnd from min(4 MTU, max(2 MTU, 4404)); after an idle
/// period the window decays to max(cwnd / 2, 4 MTU) per RTO.
#[test]
fn rfc9260_7_2_1_slow_start_and_idle_decay() {
    let mut p = Pair::connected(18, cfg());
    assert_eq!(p.assoc_a().path_stats()[0].cwnd, 4404);
    for i in 0..300 {
        p.assoc_a().send(0, 0, false, &pattern(i, 1400)).unwrap();
    }
    let mut n = 0;
    assert!(p.run_until(p.now + Duration::from_secs(10), |p| {
        while p.assoc_b().recv().is_some() {
            n += 1;
        }
        n == 300
    }));
    let grown = p.assoc_a().path_stats()[0].cwnd;
    assert!(grown > 30_000, "{grown}");
    p.run_for(Duration::from_secs(20));
    assert_eq!(
        p.assoc_a().path_stats()[0].cwnd,
        grown,
        "decay applies when sending again"
    );
    p.assoc_a().send(0, 0, false, b"after a pause").unwrap();
    p.run_for(Duration::from_millis(1));
    assert_eq!(p.assoc_a().path_stats()[0].cwnd, 6000);
}

/// An association taken out of its endpoint ([`sctp::Endpoint::remove`]) and filed in
/// another endpoint of the same port and addresses ([`sctp::Endpoint::adopt`]) carries on:
/// data both ways with loss (its TSNs, windows and retransmission timers came along), then a
/// graceful shutdown (RFC 9260 §9.2). This is how a program runs the associations a
/// listening endpoint accepted on other threads.
#[test]
fn adopted_association_carries_on_in_another_endpoint() {
    let mut p = Pair::connected(44, cfg());
    exchange(&mut p, &[(0, false, 3000), (1, true, 200)]);
    let old = p.b_id.take().unwrap();
    let a = p.b.remove(old).unwrap();
    let tag = a.local_tag();
    let mut c = config(45, b_addrs(), PORT_B, cfg());
    c.accept_incoming = false;
    let mut moved = sctp::Endpoint::new(c);
    let id = moved.adopt(a);
    let listener = std::mem::replace(&mut p.b, moved);
    assert!(listener.association(old).is_none());
    p.b_id = Some(id);
    assert_eq!(p.assoc_b().local_tag(), tag);
    assert_eq!(p.assoc_b().state(), State::Established);
    p.loss = 0.1;
    exchange(&mut p, &[(0, false, 20_000), (2, false, 700), (3, true, 1)]);
    p.loss = 0.0;
    let now = p.now;
    p.assoc_a().shutdown(now);
    assert!(p.run_until(p.now + Duration::from_secs(30), |p| {
        p.events_b
            .iter()
            .any(|(_, e)| *e == Event::ShutdownComplete)
            && p.events_a
                .iter()
                .any(|(_, e)| *e == Event::ShutdownComplete)
    }));
}
