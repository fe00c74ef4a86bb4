//! Multihoming: path confirmation, heartbeats, failover, SCTP-PF and recovery.

mod common;

use std::time::Duration;

use common::*;
use sctp::{AssociationConfig, Event, Instant, PathState};

fn has(events: &[(Instant, Event)], e: &Event) -> Option<Instant> {
    events.iter().find(|(_, x)| x == e).map(|(t, _)| *t)
}

/// RFC 9260 §5.4: addresses learned from INIT / INIT ACK start unconfirmed and are
/// confirmed by a heartbeat; §8.3 the reply gives an RTT measurement.
#[test]
fn rfc9260_5_4_second_path_confirmed_by_heartbeat() {
    let mut p = Pair::connected(21, AssociationConfig::default());
    let second = addr("10.0.2.2:0");
    let st = p.assoc_a().path_stats();
    assert_eq!(st.len(), 2);
    assert_eq!(st[0].state, PathState::Active);
    p.run_for(Duration::from_secs(2));
    assert!(has(&p.events_a, &Event::PathUp { remote: second }).is_some());
    assert!(
        has(
            &p.events_b,
            &Event::PathUp {
                remote: addr("10.0.2.1:0")
            }
        )
        .is_some()
    );
    let st = p.assoc_a().path_stats();
    assert!(st.iter().all(|s| s.state == PathState::Active));
    assert_eq!(st[1].srtt, Some(Duration::from_millis(10)));
    assert_eq!(st[1].local, addr("10.0.2.1:0"));
    assert!(st[0].primary && st[0].data_path);
}

/// RFC 9260 §8.3: an idle confirmed path is probed every RTO + HB.interval (±50 % RTO of
/// jitter); heartbeats keep an idle association alive indefinitely.
#[test]
fn rfc9260_8_3_idle_paths_get_heartbeats() {
    let mut p = Pair::connected(22, AssociationConfig::default());
    p.run_for(Duration::from_secs(1));
    let before = p.assoc_a().path_stats()[0].heartbeats_sent;
    p.run_for(Duration::from_secs(300));
    let after = p.assoc_a().path_stats()[0].heartbeats_sent;
    // 300 s / (30 s + 1 s ± 0.5 s) is 9 or 10.
    assert!((9..=10).contains(&(after - before)), "{before} -> {after}");
    assert_eq!(p.assoc_a().state(), sctp::State::Established);
}

fn failover(pfmr: Option<u32>, seed: u64) -> (Bulk, Pair, Instant) {
    let cfg = AssociationConfig {
        pf_max_retrans: pfmr,
        ..AssociationConfig::default()
    };
    let mut p = Pair::connected(seed, cfg);
    p.run_for(Duration::from_secs(1));
    let mut bulk = Bulk::new(20_000, 1000, p.now);
    // Transfer a while, then black-hole the primary network mid-transfer.
    assert!(!p.run_until(p.now + Duration::from_millis(100), |p| bulk.step(p)));
    assert!(
        bulk.received > 0 && bulk.received < bulk.count,
        "{}",
        bulk.received
    );
    p.down = vec![1];
    let t_fail = p.now;
    let ok = p.run_until(p.now + Duration::from_secs(600), |p| bulk.step(p));
    assert!(
        ok,
        "transfer did not complete: {}/{}",
        bulk.received, bulk.count
    );
    (bulk, p, t_fail)
}

/// RFC 7829 §5.1 with PFMR = 0: one T3-rtx expiry on the primary moves it to Potentially
/// Failed and data continues on the alternate at once: the stall is one RTO (1 s here).
#[test]
fn rfc7829_pf_quick_failover_bounds_the_stall_to_one_rto() {
    let (bulk, p, t_fail) = failover(Some(0), 23);
    let primary = addr("10.0.1.2:0");
    let alt = addr("10.0.2.2:0");
    let pf = has(
        &p.events_a,
        &Event::PathPotentiallyFailed { remote: primary },
    )
    .expect("PF event");
    let switched = has(&p.events_a, &Event::PrimaryChanged { remote: alt }).expect("failover");
    assert_eq!(pf, switched);
    // The first T3-rtx expiry: one RTO (RTO.Min, 1 s) after the last packet that got through.
    assert!(
        switched - t_fail <= Duration::from_secs(1),
        "{:?}",
        switched - t_fail
    );
    assert!(
        bulk.max_stall >= Duration::from_secs(1) && bulk.max_stall < Duration::from_millis(1100),
        "stall {:?}",
        bulk.max_stall
    );
    eprintln!("PFMR=0: longest delivery stall {:?}", bulk.max_stall);
}

/// RFC 9260 §8.2 without SCTP-PF: new data keeps going to the primary until it has failed
/// Path.Max.Retrans + 1 times (1+2+4+8+16+32 s of backed-off timeouts), so the stall is far
/// longer than with PF.
#[test]
fn rfc9260_8_2_failover_without_pf_waits_for_path_max_retrans() {
    let (bulk, p, t_fail) = failover(None, 24);
    let primary = addr("10.0.1.2:0");
    assert!(
        has(
            &p.events_a,
            &Event::PathPotentiallyFailed { remote: primary }
        )
        .is_none()
    );
    let down = has(&p.events_a, &Event::PathDown { remote: primary }).expect("PathDown");
    // Six backed-off timeouts: 1 + 2 + 4 + 8 + 16 + 32 = 63 s.
    let to_failover = down - t_fail;
    assert!(
        to_failover > Duration::from_secs(62) && to_failover <= Duration::from_millis(63_100),
        "{to_failover:?}"
    );
    // Retransmissions go to the alternate (RFC 9260 §6.4.1), so delivery creeps on between
    // timeouts, but new data waits for the primary: the longest stall is the last back-off.
    assert!(
        bulk.max_stall >= Duration::from_secs(16),
        "stall {:?}",
        bulk.max_stall
    );
    eprintln!(
        "no PF: failover after {to_failover:?}, longest delivery stall {:?}",
        bulk.max_stall
    );
}

/// RFC 7829 §5.1 / RFC 9260 §8.3: a failed primary that comes back is detected by a
/// heartbeat reply; data switches back to it.
#[test]
fn rfc7829_path_recovery_via_heartbeat_and_switchback() {
    let (_, mut p, _) = failover(Some(0), 25);
    let primary = addr("10.0.1.2:0");
    let t_up = p.now;
    p.down.clear();
    assert!(p.run_until(p.now + Duration::from_secs(200), |p| {
        p.events_a
            .iter()
            .any(|(t, e)| *t >= t_up && *e == Event::PathUp { remote: primary })
    }));
    assert!(
        p.events_a
            .iter()
            .any(|(t, e)| *t >= t_up && *e == Event::PrimaryChanged { remote: primary })
    );
    let st = p.assoc_a().path_stats();
    assert!(st[0].data_path && st[0].state == PathState::Active && st[0].error_count == 0);
    // New data uses the primary again.
    let sent0 = p.assoc_a().path_stats()[0].data_chunks_sent;
    p.assoc_a()
        .send(0, 0, false, b"back on the primary")
        .unwrap();
    p.run_for(Duration::from_millis(50));
    assert_eq!(p.assoc_a().path_stats()[0].data_chunks_sent, sent0 + 1);
}

/// RFC 9260 §8.1 / §8.2: one dead path does not kill the association while the other
/// answers heartbeats (the association error counter is reset by every reply).
#[test]
fn rfc9260_8_1_dead_secondary_path_does_not_fail_the_association() {
    let mut p = Pair::connected(26, AssociationConfig::default());
    p.run_for(Duration::from_secs(1));
    p.down = vec![2];
    p.run_for(Duration::from_secs(900));
    assert_eq!(p.assoc_a().state(), sctp::State::Established);
    let st = p.assoc_a().path_stats();
    assert_eq!(st[1].state, PathState::Inactive);
    assert!(
        has(
            &p.events_a,
            &Event::PathDown {
                remote: addr("10.0.2.2:0")
            }
        )
        .is_some()
    );
}

/// Explicit primary selection moves new data to the chosen path.
#[test]
fn set_primary_moves_new_data() {
    let mut p = Pair::connected(27, AssociationConfig::default());
    p.run_for(Duration::from_secs(1));
    p.assoc_a().set_primary(addr("10.0.2.2:0")).unwrap();
    assert!(p.assoc_a().set_primary(addr("10.9.9.9:0")).is_err());
    for i in 0..10 {
        p.assoc_a().send(1, 0, false, &pattern(i, 3000)).unwrap();
    }
    p.run_for(Duration::from_millis(100));
    let st = p.assoc_a().path_stats();
    assert_eq!(st[0].data_chunks_sent, 0);
    assert!(st[1].data_chunks_sent >= 20);
}

/// RFC 7829 §5.1: with every path Potentially Failed, data goes to the one with the lowest
/// error count — the alternate that timed out once, not the primary that has been failing
/// for seconds — so the transfer goes on as soon as the alternate answers.
#[test]
fn rfc7829_5_1_all_paths_pf_picks_the_fewest_errors_not_the_primary() {
    let mut p = Pair::connected(25, AssociationConfig::default());
    p.run_for(Duration::from_secs(1));
    let mut bulk = Bulk::new(200_000, 1000, p.now);
    assert!(!p.run_until(p.now + Duration::from_millis(100), |p| bulk.step(p)));
    let primary = addr("10.0.1.2:0");
    let alt = addr("10.0.2.2:0");
    // The primary fails for good and keeps failing its heartbeats.
    p.down = vec![1];
    assert!(!p.run_until(p.now + Duration::from_secs(3), |p| bulk.step(p)));
    assert!(
        has(
            &p.events_a,
            &Event::PathPotentiallyFailed { remote: primary }
        )
        .is_some()
    );
    // The alternate drops out long enough for one timeout, then comes back.
    p.down = vec![1, 2];
    let ok = p.run_until(p.now + Duration::from_secs(10), |p| {
        bulk.step(p);
        p.events_a
            .iter()
            .any(|(_, e)| *e == Event::PathPotentiallyFailed { remote: alt })
    });
    assert!(ok, "the alternate never became Potentially Failed");
    let both_pf = p.now;
    let before = bulk.received;
    p.down = vec![1];
    assert!(!p.run_until(p.now + Duration::from_secs(10), |p| bulk.step(p)));
    // Data flows again on the alternate (its first heartbeat answered within two RTOs).
    assert!(
        bulk.received > before + 1000,
        "{before} -> {}",
        bulk.received
    );
    let stats = p.assoc_a().path_stats();
    assert!(
        stats[1].data_path && stats[1].state == PathState::Active,
        "{stats:?}"
    );
    // Data never went back to the failed primary.
    assert!(
        !p.events_a
            .iter()
            .any(|(t, e)| *t >= both_pf && *e == Event::PrimaryChanged { remote: primary }),
        "{:?}",
        p.events_a
    );
}

/// RFC 7829 §5.1 and RFC 9260 §8.3: a Potentially Failed destination is probed with one
/// HEARTBEAT per RTO (HB.interval is not added), and each unanswered HEARTBEAT backs the RTO
/// off (doubles it, up to RTO.Max). The probes after a failure are therefore 2, 4, 8, 16 s
/// apart (the T3-rtx expiry that made the path PF already doubled RTO.Min); a link that
/// comes back between two probes is found by the next one, up to one backed-off RTO later.
#[test]
fn rfc7829_5_1_pf_destination_heartbeats_once_per_backed_off_rto() {
    let (mut p, _, gaps) =
        primary_down_with_bulk(AssociationConfig::default(), Duration::from_secs(40));
    eprintln!("PF heartbeats after the failure: {gaps:?}");
    assert!(gaps.len() >= 4, "{gaps:?}");
    for (g, want) in gaps.iter().zip([2u64, 4, 8, 16]) {
        assert_eq!(*g, Duration::from_secs(want), "{gaps:?}");
    }
    let st = &p.assoc_a().path_stats()[0];
    assert_eq!(st.state, PathState::PotentiallyFailed);
    assert!(st.rto <= AssociationConfig::default().rto_max);
}

/// RFC 9260 §6.3.3 E2 and §6.3.1 C7: the doubling of the RTO stops at RTO.Max, a protocol
/// parameter (§16 suggests 60 s). Configured lower (4 s here), it bounds the interval between
/// the heartbeats that probe a Potentially Failed destination (RFC 7829 §5.1): 2, 4, 4 s
/// instead of 2, 4, 8, 16 s, and a link that comes back is found by the next probe, at most
/// RTO.Max (plus a round trip) later; the HEARTBEAT ACK makes the path Active again.
#[test]
fn rfc9260_6_3_3_e2_rto_max_bounds_pf_heartbeat_interval_and_recovery() {
    let rto_max = Duration::from_secs(4);
    let cfg = AssociationConfig {
        rto_max,
        ..AssociationConfig::default()
    };
    // Down for 12.5 s: five errors at most (one T3-rtx, then heartbeats timing out after 2,
    // 4, 4, 4 s), so the path is still Potentially Failed, not Inactive, when it returns.
    let (mut p, mut bulk, gaps) = primary_down_with_bulk(cfg, Duration::from_millis(12_500));
    let primary = addr("10.0.1.2:0");
    assert!(gaps.len() >= 3, "{gaps:?}");
    for (g, want) in gaps.iter().zip([2u64, 4, 4]) {
        assert_eq!(*g, Duration::from_secs(want), "{gaps:?}");
    }
    let st = &p.assoc_a().path_stats()[0];
    assert_eq!(st.state, PathState::PotentiallyFailed);
    assert_eq!(st.rto, rto_max);
    let t_up = p.now;
    p.down.clear();
    assert!(p.run_until(t_up + Duration::from_secs(10), |p| {
        bulk.step(p);
        p.events_a
            .iter()
            .any(|(t, e)| *t >= t_up && *e == Event::PathUp { remote: primary })
    }));
    let found = p
        .events_a
        .iter()
        .find(|(t, e)| *t >= t_up && *e == Event::PathUp { remote: primary })
        .map(|(t, _)| *t - t_up)
        .unwrap();
    assert!(
        found <= rto_max + Duration::from_millis(100),
        "found {found:?} after the link returned"
    );
    assert_eq!(p.assoc_a().path_stats()[0].state, PathState::Active);
}

/// RFC 9260 §6.3.1 C6/C7: an RTO.Max configured below RTO.Min does not panic; the computed
/// RTO is held at RTO.Max and the association still carries data.
#[test]
fn rfc9260_6_3_1_c7_rto_max_below_rto_min_is_not_a_panic() {
    let cfg = AssociationConfig {
        rto_max: Duration::from_millis(500),
        ..AssociationConfig::default()
    };
    let mut p = Pair::connected(27, cfg);
    p.run_for(Duration::from_secs(1));
    let mut bulk = Bulk::new(2_000, 1000, p.now);
    assert!(p.run_until(p.now + Duration::from_secs(30), |p| bulk.step(p)));
    let st = &p.assoc_a().path_stats()[0];
    assert_eq!(st.rto, Duration::from_millis(500));
}

/// A connected pair (seed 26) moving bulk data until the primary path fails, then `down_for`
/// more of the transfer with the primary black-holed: the pair, the transfer, and the gaps
/// between the HEARTBEATs A sent to the primary after the failure.
fn primary_down_with_bulk(
    cfg: AssociationConfig,
    down_for: Duration,
) -> (Pair, Bulk, Vec<Duration>) {
    let mut p = Pair::connected(26, cfg);
    p.keep_log = true;
    p.run_for(Duration::from_secs(1));
    let mut bulk = Bulk::new(200_000, 1000, p.now);
    assert!(!p.run_until(p.now + Duration::from_millis(100), |p| bulk.step(p)));
    p.down = vec![1];
    let t_fail = p.now;
    p.run_until(t_fail + down_for, |p| {
        bulk.step(p);
        false
    });
    let primary = addr("10.0.1.2:0");
    let probes: Vec<Instant> = p
        .log
        .iter()
        .filter(|s| s.from == Side::A && s.dst == primary && s.at > t_fail)
        .filter(|s| common::chunk_types(&s.bytes).contains(&4))
        .map(|s| s.at)
        .collect();
    let gaps = probes.windows(2).map(|w| w[1] - w[0]).collect();
    (p, bulk, gaps)
}
