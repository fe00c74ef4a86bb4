//! RDMA Write, Read and Send between two softrnic engines over simulated lossy links: every
//! byte is checked at its target (verified, lost or misplaced).

use harness::mpa::{Capture, RunReport, Scenario};

fn run(name: &str, bytes: u64, seed: u64) -> RunReport {
    let mut s = Scenario::named(name).expect("built-in scenario");
    s.bytes = bytes;
    s.run(seed, Capture::None).expect("simulation set-up")
}

fn assert_all_verified(r: &RunReport) {
    assert!(
        r.ok(),
        "{}/{}: {} of {} verified, {} lost, {} misplaced, completed {}\n{}",
        r.scenario,
        r.seed,
        r.verified,
        r.bytes,
        r.lost,
        r.misplaced,
        r.completed,
        r.log.join("\n")
    );
    assert_eq!(r.verified, r.bytes);
}

/// RFC 5040 §5.1–§5.3 over RFC 5044 MPA with CRC, across 1 % loss, 1 % reordering and 1 %
/// duplication: Writes, Sends and Reads (16 MiB) all arrive intact at their targets, on a
/// single connection, and the impairments really happened in both directions.
#[test]
fn write_read_send_survive_loss_reordering_and_duplication() {
    let r = run("loss", 16 * 1024 * 1024, 11);
    assert_all_verified(&r);
    assert_eq!(r.connections, 1, "{}", r.log.join("\n"));
    assert_eq!(r.crc_terminates + r.other_terminates, 0);
    // Four Sends per 1 MiB round, each consuming one receive buffer.
    assert_eq!(r.recv_completions, 16 * 4);
    let [ab, ba] = r.counters;
    for c in [ab, ba] {
        assert!(
            c.dropped_loss > 0 && c.duplicated > 0 && c.reordered > 0,
            "{c:?}"
        );
    }
    // The Read Responses made the B→A direction carry bulk data too.
    assert!(ba.delivered_bytes > 4 * 1024 * 1024, "{ba:?}");
}

/// The clean link moves data at close to line rate: 4 MiB at 1 Gbit/s takes well under
/// 100 ms of virtual time.
#[test]
fn clean_link_runs_near_line_rate() {
    let r = run("clean", 4 * 1024 * 1024, 1);
    assert_all_verified(&r);
    assert_eq!(r.frames_dropped, 0);
    let secs = r.sim_time.as_secs_f64();
    let gbps = (4.0 * 1024.0 * 1024.0 * 8.0) / secs / 1e9;
    assert!(gbps > 0.5, "only {gbps:.3} Gbit/s ({secs} s)");
}

/// Bursty (Gilbert) loss: recovery may take retransmission timeouts, but every byte arrives.
#[test]
fn bursty_gilbert_loss_loses_nothing() {
    let r = run("gilbert", 4 * 1024 * 1024, 3);
    assert_all_verified(&r);
    assert!(r.counters[0].dropped_burst > 0, "{:?}", r.counters[0]);
}

/// The large proof: 100 MiB of Writes (50 MiB), Sends (25 MiB) and Reads (25 MiB) over the
/// 1 % loss + reordering + duplication link, every byte verified (about a second of wall time;
/// some 90 s of virtual time, mostly smoltcp retransmission timeouts).
#[test]
fn hundred_mib_over_a_lossy_link() {
    let r = run("loss", 100 * 1024 * 1024, 100);
    eprintln!(
        "100 MiB: simulated {:?}, wall {:?}, {} connections",
        r.sim_time, r.wall_time, r.connections
    );
    assert_all_verified(&r);
    assert_eq!(r.recv_completions, 100 * 4);
}
