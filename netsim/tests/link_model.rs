//! Link model: timing, queueing, MTU, impairments, down/up, scheduled changes, switching.

use std::time::Duration;

use netsim::testing::{Probe, probe_frame, probe_tag};
use netsim::{
    Action, Dir, GilbertElliott, Instant, LinkId, LinkParams, NodeHandle, QueueLimit, Sim,
};

const A: [u8; 6] = [2, 0, 0, 0, 0, 0xA];
const B: [u8; 6] = [2, 0, 0, 0, 0, 0xB];

/// Two single-interface probes joined by one link; `a` sends `n` frames of `len` bytes, one
/// every `gap`, starting at `gap`.
fn pair(
    seed: u64,
    params: LinkParams,
    n: u64,
    len: usize,
    gap: Duration,
) -> (Sim, NodeHandle<Probe>, NodeHandle<Probe>, LinkId) {
    let mut sim = Sim::new(seed);
    let mut tx = Probe::new(1);
    for i in 0..n {
        let at = Instant::ZERO + gap * (i as u32 + 1);
        tx.send_at(at, 0, probe_frame(B, A, i, len));
    }
    let a = sim.add_node(tx);
    let b = sim.add_node(Probe::new(1));
    let l = sim.link(a.iface(0), b.iface(0), params).unwrap();
    (sim, a, b, l)
}

fn assert_conserved(sim: &Sim, l: LinkId) {
    for dir in Dir::BOTH {
        let c = sim.link_counters(l, dir);
        assert_eq!(
            c.sent + c.duplicated,
            c.delivered + c.dropped_total(),
            "{dir:?}: {c:?}"
        );
    }
}

/// Binomial bound: `k` successes out of `n` trials is within `sds` standard deviations of
/// `n * p`.
fn within(k: u64, n: u64, p: f64, sds: f64) -> bool {
    let mean = n as f64 * p;
    let sd = (n as f64 * p * (1.0 - p)).sqrt();
    (k as f64 - mean).abs() <= sds * sd
}

#[test]
fn serialisation_and_propagation_delay_are_exact() {
    let params = LinkParams::default()
        .bandwidth(1_000_000_000)
        .delay(Duration::from_micros(100));
    let mut sim = Sim::new(1);
    // Two 1000-byte frames offered together at t = 0: 8 µs each to serialise.
    let tx = Probe::new(1)
        .with_send(Instant::ZERO, 0, probe_frame(B, A, 0, 1000))
        .with_send(Instant::ZERO, 0, probe_frame(B, A, 1, 1000));
    let a = sim.add_node(tx);
    let b = sim.add_node(Probe::new(1));
    sim.link(a.iface(0), b.iface(0), params).unwrap();
    sim.run_until_idle();
    let times: Vec<u64> = sim
        .node(b)
        .received()
        .iter()
        .map(|r| r.at.as_nanos())
        .collect();
    assert_eq!(times, vec![108_000, 116_000]);

    // 100 Mbit/s, 64-byte frame: 5.12 µs; 1 ms propagation.
    let params = LinkParams::default()
        .bandwidth(100_000_000)
        .delay(Duration::from_millis(1));
    let (mut sim, _, b, _) = pair(1, params, 1, 64, Duration::from_millis(1));
    sim.run_until_idle();
    assert_eq!(
        sim.node(b).received()[0].at.as_nanos(),
        1_000_000 + 1_000_000 + 5_120
    );
}

#[test]
fn queue_limit_in_packets_drops_tail() {
    let params = LinkParams::default().queue_limit(QueueLimit::Packets(2));
    let mut tx = Probe::new(1);
    for i in 0..5 {
        tx.send_at(Instant::ZERO, 0, probe_frame(B, A, i, 1000));
    }
    let mut sim = Sim::new(1);
    let a = sim.add_node(tx);
    let b = sim.add_node(Probe::new(1));
    let l = sim.link(a.iface(0), b.iface(0), params).unwrap();
    sim.run_until_idle();
    // Frame 0 is serialising, 1 and 2 wait, 3 and 4 find the queue full.
    assert_eq!(sim.node(b).received_tags(), vec![0, 1, 2]);
    let c = sim.link_counters(l, Dir::AtoB);
    assert_eq!((c.sent, c.dropped_queue, c.delivered), (5, 2, 3));
    assert_conserved(&sim, l);
}

#[test]
fn queue_limit_in_bytes_drops_tail() {
    let params = LinkParams::default().queue_limit(QueueLimit::Bytes(2500));
    let mut tx = Probe::new(1);
    for (i, len) in [1000, 1000, 1000, 1000, 400].into_iter().enumerate() {
        tx.send_at(Instant::ZERO, 0, probe_frame(B, A, i as u64, len));
    }
    let mut sim = Sim::new(1);
    let a = sim.add_node(tx);
    let b = sim.add_node(Probe::new(1));
    let l = sim.link(a.iface(0), b.iface(0), params).unwrap();
    sim.run_until_idle();
    // Queue holds 1 and 2 (2000 bytes); 3 would make 3000; 4 (400) fits in what is left.
    assert_eq!(sim.node(b).received_tags(), vec![0, 1, 2, 4]);
    assert_eq!(sim.link_counters(l, Dir::AtoB).dropped_queue, 1);
}

#[test]
fn oversize_frames_are_dropped_and_counted() {
    let mut tx = Probe::new(1);
    tx.send_at(Instant::ZERO, 0, probe_frame(B, A, 0, 1514));
    tx.send_at(Instant::ZERO, 0, probe_frame(B, A, 1, 1515));
    tx.send_at(Instant::ZERO, 0, probe_frame(B, A, 2, 9000));
    let mut sim = Sim::new(1);
    let a = sim.add_node(tx);
    let b = sim.add_node(Probe::new(1));
    let l = sim
        .link(a.iface(0), b.iface(0), LinkParams::default().mtu(1500))
        .unwrap();
    sim.run_until_idle();
    assert_eq!(sim.node(b).received_tags(), vec![0]);
    assert_eq!(sim.link_counters(l, Dir::AtoB).dropped_mtu, 2);
    assert_conserved(&sim, l);
}

#[test]
fn iid_loss_rate_is_within_statistical_bounds() {
    let n = 20_000;
    let params = LinkParams::ideal().loss(0.1);
    let (mut sim, _, b, l) = pair(11, params, n, 64, Duration::from_micros(1));
    sim.run_until_idle();
    let c = sim.link_counters(l, Dir::AtoB);
    assert!(within(c.dropped_loss, n, 0.1, 5.0), "{c:?}");
    assert_eq!(sim.node(b).received().len() as u64, n - c.dropped_loss);
    assert_conserved(&sim, l);
}

/// Lengths of runs of consecutive missing tags in `0..n`.
fn loss_bursts(tags: &[u64], n: u64) -> Vec<u64> {
    let mut got = vec![false; n as usize];
    for &t in tags {
        got[t as usize] = true;
    }
    let mut bursts = Vec::new();
    let mut run = 0;
    for g in got {
        if g {
            if run > 0 {
                bursts.push(run);
            }
            run = 0;
        } else {
            run += 1;
        }
    }
    if run > 0 {
        bursts.push(run);
    }
    bursts
}

#[test]
fn gilbert_elliott_loss_comes_in_bursts_of_mean_length_one_over_r() {
    let n = 100_000;
    let (p, r) = (0.01, 0.25);
    let params = LinkParams::ideal().gilbert_elliott(GilbertElliott::gilbert(p, r));
    let (mut sim, _, b, l) = pair(5, params, n, 64, Duration::from_micros(1));
    sim.run_until_idle();
    let bursts = loss_bursts(&sim.node(b).received_tags(), n);
    let lost: u64 = bursts.iter().sum();
    let mean = lost as f64 / bursts.len() as f64;
    // Mean burst length 1/r = 4; ~940 bursts, sd of the mean ~0.11.
    assert!(
        (mean - 1.0 / r).abs() < 0.4,
        "mean burst {mean}, {} bursts",
        bursts.len()
    );
    // Long-run loss p / (p + r) = 3.85 %.
    let rate = lost as f64 / n as f64;
    assert!((rate - p / (p + r)).abs() < 0.006, "loss rate {rate}");
    assert_eq!(sim.link_counters(l, Dir::AtoB).dropped_burst, lost);
    // Independent loss at the same rate gives bursts of mean ~1.04, far shorter.
    let params = LinkParams::ideal().loss(p / (p + r));
    let (mut sim, _, b, _) = pair(5, params, n, 64, Duration::from_micros(1));
    sim.run_until_idle();
    let bursts = loss_bursts(&sim.node(b).received_tags(), n);
    let mean = bursts.iter().sum::<u64>() as f64 / bursts.len() as f64;
    assert!(mean < 1.2, "iid mean burst {mean}");
}

#[test]
fn duplication_happens_at_the_configured_rate() {
    let n = 20_000;
    let params = LinkParams::ideal().duplicate(0.05);
    let (mut sim, _, b, l) = pair(3, params, n, 64, Duration::from_micros(1));
    sim.run_until_idle();
    let c = sim.link_counters(l, Dir::AtoB);
    assert!(within(c.duplicated, n, 0.05, 5.0), "{c:?}");
    let tags = sim.node(b).received_tags();
    assert_eq!(tags.len() as u64, n + c.duplicated);
    let mut seen = std::collections::BTreeMap::new();
    for t in tags {
        *seen.entry(t).or_insert(0) += 1;
    }
    assert_eq!(seen.len() as u64, n);
    assert_eq!(
        seen.values().filter(|&&k| k == 2).count() as u64,
        c.duplicated
    );
    assert_conserved(&sim, l);
}

#[test]
fn reordering_happens_at_the_configured_rate() {
    let n = 20_000;
    // Frames every 10 µs; a reordered frame is held 25 µs more, so two to three later frames
    // overtake it.
    let params = LinkParams::ideal().reorder(0.05, Duration::from_micros(25));
    let (mut sim, _, b, l) = pair(4, params, n, 64, Duration::from_micros(10));
    sim.run_until_idle();
    let c = sim.link_counters(l, Dir::AtoB);
    assert!(within(c.reordered, n, 0.05, 5.0), "{c:?}");
    let tags = sim.node(b).received_tags();
    assert_eq!(tags.len() as u64, n);
    // A frame arrived late if some later-sent frame arrived before it.
    let mut late = 0;
    let mut max_seen = None;
    for &t in &tags {
        if max_seen.is_some_and(|m| t < m) {
            late += 1;
        }
        max_seen = max_seen.max(Some(t));
    }
    // A held-back frame is overtaken unless the next two frames are held back as well (or it
    // is among the last two): that happens for about 0.25 % of them.
    assert!(
        late <= c.reordered && late * 100 >= c.reordered * 99,
        "late {late}, {c:?}"
    );
}

#[test]
fn jitter_delays_within_bounds_but_keeps_order() {
    let n = 5_000;
    let params = LinkParams::ideal()
        .delay(Duration::from_micros(100))
        .jitter(Duration::from_micros(50));
    let (mut sim, _, b, _) = pair(8, params, n, 64, Duration::from_micros(5));
    sim.run_until_idle();
    let rx = sim.node(b).received();
    let tags: Vec<u64> = rx.iter().filter_map(|r| probe_tag(&r.frame)).collect();
    assert_eq!(tags, (0..n).collect::<Vec<_>>());
    let mut distinct = std::collections::BTreeSet::new();
    for r in rx {
        let sent = Instant::from_micros(5 * (probe_tag(&r.frame).unwrap() + 1));
        let delay = r.at - sent;
        assert!(delay >= Duration::from_micros(100), "{delay:?}");
        // Held back behind an earlier, more jittered frame at most by the full jitter.
        assert!(delay <= Duration::from_micros(150), "{delay:?}");
        distinct.insert(delay);
    }
    assert!(distinct.len() > 100, "jitter should vary delays");
}

#[test]
fn corruption_flips_exactly_one_bit_past_the_offset() {
    let n = 2_000;
    let mut params = LinkParams::ideal().corrupt(1.0);
    params.corrupt_offset = 14;
    let (mut sim, _, b, l) = pair(6, params, n, 100, Duration::from_micros(1));
    sim.run_until_idle();
    assert_eq!(sim.link_counters(l, Dir::AtoB).corrupted, n);
    let mut positions = std::collections::BTreeSet::new();
    for (i, r) in sim.node(b).received().iter().enumerate() {
        let orig = probe_frame(B, A, i as u64, 100);
        let diff: Vec<usize> = (0..100).filter(|&k| orig[k] != r.frame[k]).collect();
        assert_eq!(diff.len(), 1, "frame {i}");
        assert!(diff[0] >= 14, "header byte {} corrupted", diff[0]);
        assert_eq!((orig[diff[0]] ^ r.frame[diff[0]]).count_ones(), 1);
        positions.insert(diff[0]);
    }
    assert!(positions.len() > 50, "flips should spread over the frame");

    let mut params = LinkParams::ideal().corrupt(1.0);
    params.corrupt_bits = 3;
    let (mut sim, _, b, _) = pair(6, params, 200, 100, Duration::from_micros(1));
    sim.run_until_idle();
    for (i, r) in sim.node(b).received().iter().enumerate() {
        let orig = probe_frame(B, A, i as u64, 100);
        let flipped: u32 = orig
            .iter()
            .zip(&r.frame)
            .map(|(x, y)| (x ^ y).count_ones())
            .sum();
        assert_eq!(flipped, 3, "frame {i}");
    }

    let params = LinkParams::ideal().corrupt(0.2);
    let (mut sim, _, _, l) = pair(6, params, 10_000, 100, Duration::from_micros(1));
    sim.run_until_idle();
    assert!(within(
        sim.link_counters(l, Dir::AtoB).corrupted,
        10_000,
        0.2,
        5.0
    ));
}

#[test]
fn transmit_captures_see_what_was_offered_and_receive_captures_what_arrived() {
    use pcap_file::pcap::PcapReader;
    let count = |bytes: Vec<u8>| {
        let mut r = PcapReader::new(&bytes[..]).unwrap();
        let mut n = 0;
        while let Some(p) = r.next_packet() {
            p.unwrap();
            n += 1;
        }
        n
    };
    let params = LinkParams::default().queue_limit(QueueLimit::Packets(1));
    let mut tx = Probe::new(1);
    for i in 0..5 {
        tx.send_at(Instant::ZERO, 0, probe_frame(B, A, i, 500));
    }
    let mut sim = Sim::new(1);
    let a = sim.add_node(tx);
    let b = sim.add_node(Probe::new(1));
    let l = sim.link(a.iface(0), b.iface(0), params).unwrap();
    let at_tx = sim
        .capture_with(
            l,
            netsim::CaptureSink::Memory,
            netsim::CapturePoint::Transmit,
        )
        .unwrap();
    let at_rx = sim.capture_in_memory(l).unwrap();
    sim.run_until_idle();
    assert_eq!(count(sim.finish_capture(at_tx).unwrap()), 5);
    assert_eq!(count(sim.finish_capture(at_rx).unwrap()), 2);
}

#[test]
fn link_down_drops_everything_until_it_comes_back_up() {
    // One frame every ms for 100 ms; 1 ms propagation; down from 30 ms to 60 ms.
    let params = LinkParams::default().delay(Duration::from_millis(1));
    let (mut sim, a, b, l) = pair(1, params, 100, 100, Duration::from_millis(1));
    sim.link_down_at(l, Instant::from_millis(30)).unwrap();
    sim.link_up_at(l, Instant::from_millis(60)).unwrap();
    sim.run_until(Instant::from_millis(45));
    assert!(!sim.is_link_up(l));
    sim.run_until_idle();
    assert!(sim.is_link_up(l));
    let tags = sim.node(b).received_tags();
    // Frame k is sent at (k+1) ms. Frame 28 (sent 29 ms) is still on the wire at 30 ms and
    // lost; frames 29..=58 are offered while down. Frame 59 (sent 60 ms) goes through.
    let expected: Vec<u64> = (0..28).chain(59..100).collect();
    assert_eq!(tags, expected);
    assert_eq!(sim.link_counters(l, Dir::AtoB).dropped_down, 31);
    assert_conserved(&sim, l);
    let changes = [
        (Instant::from_millis(30), 0, false),
        (Instant::from_millis(60), 0, true),
    ];
    assert_eq!(sim.node(a).link_changes(), changes);
    assert_eq!(sim.node(b).link_changes(), changes);
}

#[test]
fn link_down_flushes_the_queue() {
    let params = LinkParams::default().bandwidth(1_000_000); // 1 Mbit/s: 8 ms per 1000 bytes
    let mut tx = Probe::new(1);
    for i in 0..4 {
        tx.send_at(Instant::ZERO, 0, probe_frame(B, A, i, 1000));
    }
    let mut sim = Sim::new(1);
    let a = sim.add_node(tx);
    let b = sim.add_node(Probe::new(1));
    let l = sim.link(a.iface(0), b.iface(0), params).unwrap();
    // Down at 10 ms: frame 0 delivered (8 ms + 50 µs), frame 1 mid-serialisation, 2 and 3
    // queued. Up again at 11 ms: nothing left to send.
    sim.link_down_at(l, Instant::from_millis(10)).unwrap();
    sim.link_up_at(l, Instant::from_millis(11)).unwrap();
    sim.run_until_idle();
    assert_eq!(sim.node(b).received_tags(), vec![0]);
    assert_eq!(sim.link_counters(l, Dir::AtoB).dropped_down, 3);
    assert_conserved(&sim, l);
}

#[test]
fn parameters_change_at_the_scheduled_time() {
    // 1000-byte frames every 10 ms; from 35 ms on, the link loses everything and is 10x slower.
    let params = LinkParams::default().delay(Duration::ZERO);
    let (mut sim, _, b, l) = pair(1, params.clone(), 6, 1000, Duration::from_millis(10));
    let slow = params.clone().bandwidth(100_000_000).loss(1.0);
    sim.set_params_at(l, Some(Dir::AtoB), Instant::from_millis(35), slow.clone())
        .unwrap();
    sim.set_params_at(
        l,
        None,
        Instant::from_millis(45),
        params.bandwidth(100_000_000),
    )
    .unwrap();
    sim.run_until_idle();
    let rx = sim.node(b).received();
    let got: Vec<(u64, u64)> = rx
        .iter()
        .map(|r| (probe_tag(&r.frame).unwrap(), r.at.as_nanos()))
        .collect();
    // 8 µs per frame at 1 Gbit/s, 80 µs at 100 Mbit/s; frame 3 (sent 40 ms) is lost.
    assert_eq!(
        got,
        vec![
            (0, 10_008_000),
            (1, 20_008_000),
            (2, 30_008_000),
            (4, 50_080_000),
            (5, 60_080_000)
        ]
    );
    assert_eq!(
        sim.link_params(l, Dir::BtoA).bandwidth_bps,
        Some(100_000_000)
    );
    assert_eq!(sim.link_counters(l, Dir::AtoB).dropped_loss, 1);
}

#[test]
fn scheduling_rejects_the_past_and_unknown_links() {
    let (mut sim, _, _, l) = pair(1, LinkParams::default(), 1, 64, Duration::from_millis(1));
    sim.run_until(Instant::from_millis(5));
    assert!(matches!(
        sim.link_down_at(l, Instant::from_millis(1)),
        Err(netsim::SimError::InThePast { .. })
    ));
    let bad = LinkParams::default().loss(2.0);
    assert!(
        sim.apply(Action::SetParams {
            link: l,
            dir: None,
            params: bad
        })
        .is_err()
    );
    let mut other = Sim::new(1);
    assert!(matches!(
        other.link_down_at(l, Instant::ZERO),
        Err(netsim::SimError::NoSuchLink { .. })
    ));
}

#[test]
fn an_interface_takes_one_link_only() {
    let mut sim = Sim::new(1);
    let a = sim.add_node(Probe::new(2));
    let b = sim.add_node(Probe::new(1));
    sim.link(a.iface(0), b.iface(0), LinkParams::default())
        .unwrap();
    let err = sim
        .link(a.iface(1), b.iface(0), LinkParams::default())
        .unwrap_err();
    assert!(
        matches!(err, netsim::SimError::InterfaceInUse { .. }),
        "{err}"
    );
    let err = sim
        .link(a.iface(2), b.iface(0), LinkParams::default())
        .unwrap_err();
    assert!(
        matches!(err, netsim::SimError::NoSuchInterface { count: 2, .. }),
        "{err}"
    );
    let err = sim
        .link(a.iface(1), a.iface(1), LinkParams::default())
        .unwrap_err();
    assert!(matches!(err, netsim::SimError::SelfLink(_)), "{err}");
}

#[test]
fn multihomed_node_uses_each_interface() {
    // A node with two interfaces on two different links; each peer hears only its own.
    let mut sim = Sim::new(1);
    let m = sim.add_node(
        Probe::new(2)
            .with_send(Instant::ZERO, 0, probe_frame(B, A, 100, 64))
            .with_send(Instant::ZERO, 1, probe_frame(B, A, 200, 64)),
    );
    let p0 = sim.add_node(Probe::new(1));
    let p1 = sim.add_node(Probe::new(1));
    let l0 = sim
        .link(m.iface(0), p0.iface(0), LinkParams::default())
        .unwrap();
    sim.link(m.iface(1), p1.iface(0), LinkParams::default())
        .unwrap();
    sim.link_down_at(l0, Instant::from_millis(1)).unwrap();
    sim.run_until_idle();
    assert_eq!(sim.node(p0).received_tags(), vec![100]);
    assert_eq!(sim.node(p1).received_tags(), vec![200]);
    assert_eq!(
        sim.node(m).link_changes(),
        [(Instant::from_millis(1), 0, false)]
    );
    assert_eq!(
        sim.interface_link(m.iface(1)).map(|(_, d)| d),
        Some(Dir::AtoB)
    );
}

#[test]
fn switched_segment_floods_then_forwards() {
    const C: [u8; 6] = [2, 0, 0, 0, 0, 0xC];
    let mut sim = Sim::new(1);
    let sw = sim.add_switch(3);
    // A talks to B before B has spoken (flooded to B and C), then B answers (forwarded to A
    // only), then A again (forwarded to B only).
    let a = sim.add_node(
        Probe::new(1)
            .with_send(Instant::ZERO, 0, probe_frame(B, A, 1, 64))
            .with_send(Instant::from_millis(2), 0, probe_frame(B, A, 3, 64)),
    );
    let b =
        sim.add_node(Probe::new(1).with_send(Instant::from_millis(1), 0, probe_frame(A, B, 2, 64)));
    let c = sim.add_node(Probe::new(1).with_send(
        Instant::from_millis(3),
        0,
        probe_frame([0xff; 6], C, 4, 64),
    ));
    for (i, h) in [a, b, c].into_iter().enumerate() {
        sim.link(h.iface(0), sw.iface(i), LinkParams::default())
            .unwrap();
    }
    sim.run_until_idle();
    assert_eq!(sim.node(a).received_tags(), vec![2, 4]);
    assert_eq!(sim.node(b).received_tags(), vec![1, 3, 4]);
    assert_eq!(sim.node(c).received_tags(), vec![1]);
    let counters = sim.node(sw).counters();
    assert_eq!((counters.flooded, counters.forwarded), (2, 2));
    assert_eq!(sim.node(sw).lookup(C), Some(2));
}

#[test]
fn frames_on_unattached_interfaces_are_counted() {
    let mut sim = Sim::new(1);
    let a = sim.add_node(Probe::new(2).with_send(Instant::ZERO, 1, probe_frame(B, A, 0, 64)));
    sim.run_until_idle();
    assert_eq!(sim.unattached_drops(a.id()), 1);
}

mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Every frame offered is delivered, dropped for exactly one reason, or (for extra
        /// copies) counted as duplicated, whatever the impairments.
        #[test]
        fn counters_conserve_frames(
            seed in any::<u64>(),
            loss in 0.0..0.5f64,
            dup in 0.0..0.5f64,
            reorder in 0.0..0.5f64,
            ge in proptest::option::of((0.0..0.3f64, 0.05..1.0f64)),
            queue in 0usize..8,
            n in 1u64..200,
            down in proptest::option::of((0u64..3000, 0u64..3000)),
        ) {
            let mut params = LinkParams::default()
                .bandwidth(10_000_000)
                .jitter(Duration::from_micros(30))
                .loss(loss)
                .duplicate(dup)
                .reorder(reorder, Duration::from_micros(200))
                .queue_limit(QueueLimit::Packets(queue));
            params.gilbert_elliott = ge.map(|(p, r)| GilbertElliott::gilbert(p, r));
            let (mut sim, _, b, l) = pair(seed, params, n, 600, Duration::from_micros(200));
            if let Some((t, len)) = down {
                sim.link_down_at(l, Instant::from_micros(t)).unwrap();
                sim.link_up_at(l, Instant::from_micros(t + len)).unwrap();
            }
            sim.run_until_idle();
            assert_conserved(&sim, l);
            let c = sim.link_counters(l, Dir::AtoB);
            prop_assert_eq!(c.sent, n);
            prop_assert_eq!(sim.node(b).received().len() as u64, c.delivered);
        }
    }
}
