//! Seed sweeps: many short runs over a range of loss rates, none may lose or misplace a byte.

use harness::mpa::Capture;
use softrnic::sim::{SimArgs, plan, run_command};

/// 20 seeds spread over 0–10 % i.i.d. loss (plus the scenario's reordering and duplication),
/// 256 KiB each: 0 lost, 0 misplaced. The full 1,000-seed sweep is
/// `softrnic sim loss --seeds 1000 --loss 0..10 --bytes 256K` (see the README).
#[test]
fn twenty_seeds_over_zero_to_ten_percent_loss() {
    let args = SimArgs {
        scenario: "loss".into(),
        seeds: Some(20),
        loss: Some("0..10".into()),
        bytes: Some("256K".into()),
        ..SimArgs::default()
    };
    let runs: Vec<_> = plan(&args).unwrap().runs().collect();
    assert_eq!(runs.len(), 20);
    assert_eq!(runs[0].scenario.link.loss, 0.0);
    assert!((runs[19].scenario.link.loss - 0.10).abs() < 1e-12);
    for run in &runs {
        let r = run.scenario.run(run.seed, Capture::None).unwrap();
        assert!(
            r.ok(),
            "seed {} at {:.1} % loss: {r:?}",
            run.seed,
            r.loss * 100.0
        );
    }
}

/// The full sweep: 1,000 seeds over 0–10 % loss, 1 MiB each, 0 lost and 0 misplaced (about
/// 6 s in release mode). Run with
/// `cargo test --release -p softrnic-tests --test sim_sweep -- --ignored`, or as a table with
/// `softrnic sim loss --seeds 1000 --loss 0..10 --bytes 1M`.
#[test]
#[ignore = "1,000 runs; run in release mode"]
fn thousand_seeds_over_zero_to_ten_percent_loss() {
    let args = SimArgs {
        scenario: "loss".into(),
        seeds: Some(1000),
        loss: Some("0..10".into()),
        bytes: Some("1M".into()),
        ..SimArgs::default()
    };
    let mut out = Vec::new();
    let status = run_command(&args, &mut out);
    let out = String::from_utf8(out).unwrap();
    eprintln!(
        "{}",
        out.lines().rev().take(2).collect::<Vec<_>>().join("\n")
    );
    assert_eq!(status, 0, "{out}");
}

/// The command prints a row per run plus a total line and exits 0 when all is well.
#[test]
fn sweep_table_has_a_row_per_run_and_a_total() {
    let args = SimArgs {
        scenario: "all".into(),
        seeds: Some(2),
        bytes: Some("128K".into()),
        ..SimArgs::default()
    };
    let mut out = Vec::new();
    assert_eq!(run_command(&args, &mut out), 0);
    let out = String::from_utf8(out).unwrap();
    let rows = out.lines().filter(|l| l.contains("131072")).count();
    assert_eq!(rows, 6 * 2, "{out}");
    assert!(out.lines().any(|l| l.starts_with("total")), "{out}");
}

/// A workload that cannot finish (the link loses everything) is reported as lost and makes
/// the command fail.
#[test]
fn a_dead_link_fails_the_command() {
    let args = SimArgs {
        scenario: "clean".into(),
        loss: Some("100".into()),
        bytes: Some("64K".into()),
        ..SimArgs::default()
    };
    let mut runs: Vec<_> = plan(&args).unwrap().runs().collect();
    runs[0].scenario.deadline = std::time::Duration::from_secs(5);
    let r = runs[0].scenario.run(1, Capture::None).unwrap();
    assert!(!r.ok());
    assert_eq!(r.lost, 64 * 1024);
    assert_eq!(r.verified, 0);
}
