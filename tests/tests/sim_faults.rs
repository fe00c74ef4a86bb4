//! Faults below TCP: bit corruption (caught by TCP's checksum, or by MPA's CRC when the
//! checksums are repaired) and a link outage mid-transfer.

use std::time::Duration;

use harness::mpa::{Capture, RunReport, Scenario};
use mpa::CrcPolicy;

fn run(s: &Scenario, seed: u64) -> RunReport {
    s.run(seed, Capture::None).expect("simulation set-up")
}

/// RFC 5044 §4.4 and §8 (error code 2), RFC 5040 §7: payload bit flips that get past IP and
/// TCP (checksums repaired) are caught by the MPA CRC. The receiver sends an MPA CRC
/// Terminate, the connection is torn down, nothing corrupted is ever placed (no target byte is
/// "misplaced"), and the workload finishes on a new connection with every byte verified.
#[test]
fn mpa_crc_catches_corruption_the_checksums_miss() {
    let mut s = Scenario::named("corrupt").unwrap();
    s.bytes = 6 * 1024 * 1024;
    let mut crc_terms = 0;
    let mut corrupted = 0;
    for seed in 1..=3 {
        let r = run(&s, seed);
        let log = r.log.join("\n");
        assert_eq!(
            r.misplaced, 0,
            "seed {seed}: corrupted data was placed\n{log}"
        );
        assert!(r.ok(), "seed {seed}: {r:?}");
        // Every failed connection failed for a CRC error (or a damaged MPA setup frame).
        assert_eq!(r.other_terminates, 0, "seed {seed}:\n{log}");
        assert_eq!(r.connections, 1 + r.retries, "seed {seed}:\n{log}");
        assert!(
            r.crc_terminates + r.setup_failures >= r.retries,
            "seed {seed}:\n{log}"
        );
        assert!(
            log.lines()
                .all(|l| l.contains("CrcError") || l.contains("setup"))
        );
        crc_terms += r.crc_terminates;
        corrupted += r.frames_corrupted;
    }
    assert!(corrupted > 0);
    assert!(crc_terms > 0, "no corruption reached MPA");
}

/// The negative control for the test above: the same corruption with CRC switched off
/// (RFC 5044 §7.1.1, C = 0 on both sides) does get placed, and the check notices.
#[test]
fn without_crc_the_same_corruption_is_misplaced() {
    let mut s = Scenario::named("corrupt").unwrap();
    s.bytes = 4 * 1024 * 1024;
    s.link.corrupt = 0.002;
    s.mpa.crc = CrcPolicy::Off;
    let r = run(&s, 1);
    assert!(r.frames_corrupted > 0);
    assert_eq!(r.crc_terminates, 0);
    assert!(
        r.misplaced > 0 || r.other_terminates > 0,
        "corruption went unnoticed: {r:?}"
    );
    assert!(!r.ok());
}

/// RFC 793 §3.1 / RFC 791 §3.1: plain bit corruption past the Ethernet header is dropped by
/// the IP or TCP checksum and retransmitted; MPA never sees it, so no Terminate is sent, the
/// connection survives and every byte is verified.
#[test]
fn tcp_checksum_catches_plain_corruption() {
    let mut s = Scenario::named("corrupt-tcp").unwrap();
    s.bytes = 4 * 1024 * 1024;
    let r = run(&s, 2);
    assert!(r.frames_corrupted > 20, "{r:?}");
    assert!(r.ok(), "{r:?}");
    assert_eq!(r.connections, 1);
    assert_eq!(r.crc_terminates + r.other_terminates + r.setup_failures, 0);
}

/// A link that goes down for 3 s half-way through the transfer and comes back: TCP recovers
/// by retransmission, the RDMA connection survives and every byte is verified.
#[test]
fn link_down_for_three_seconds_mid_transfer() {
    let mut s = Scenario::named("linkflap").unwrap();
    s.bytes = 8 * 1024 * 1024;
    let r = run(&s, 4);
    assert!(r.ok(), "{r:?}");
    assert_eq!(r.connections, 1);
    assert!(r.sim_time > Duration::from_secs(3), "{:?}", r.sim_time);
    let dropped = r.counters[0].dropped_down + r.counters[1].dropped_down;
    assert!(dropped > 0, "the outage hit no traffic: {:?}", r.counters);
}
