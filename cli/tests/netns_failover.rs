//! The failover experiment on real interfaces (`scripts/failover-veth.sh`), shortened: two
//! namespaces joined by two rate-limited veth pairs (100 and 50 Mbit/s), `sctp-perf` over raw
//! IPv4, path 1 down and up, then path 2 down and up, once per multipath mode. Needs root:
//! `cargo test -p softrnic --test netns_failover -- --ignored`.

use std::path::Path;
use std::process::Command;

/// Per mode (off, pf, nopf), the receiver's Mbit/s for each second.
fn columns(csv: &str) -> Vec<(String, Vec<f64>)> {
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().expect("header").split(',').collect();
    let mut cols: Vec<(String, Vec<f64>)> = header[1..]
        .iter()
        .map(|m| (m.to_string(), Vec::new()))
        .collect();
    for l in lines {
        for (i, v) in l.split(',').skip(1).enumerate() {
            cols[i].1.push(v.parse().expect("a rate"));
        }
    }
    cols
}

/// Every mode moves the data with every byte verified through both failures; once both
/// paths are back, CMT (with and without PF) carries more than path 1 alone can (it uses
/// both paths) while plain multihoming does not; data flows again after each failure.
#[test]
#[ignore = "needs root: network namespaces, veth, tbf and raw IPv4 sockets"]
fn failover_on_two_veth_paths_in_three_modes() {
    let dir = std::env::temp_dir().join(format!("srnic-fo{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let csv = dir.join("table.csv");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/failover-veth.sh");
    let out = Command::new("bash")
        .arg(&script)
        .args(["--secs", "16", "--softrnic", env!("CARGO_BIN_EXE_softrnic")])
        .arg("--csv")
        .arg(&csv)
        .arg("--logs")
        .arg(dir.join("logs"))
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    eprintln!("{text}");
    assert!(out.status.success(), "{text}");
    let cols = columns(&std::fs::read_to_string(&csv).unwrap());
    assert_eq!(cols.len(), 3);
    // Schedule for 16 s: path 1 down 2-4 s, path 2 down 7-10 s.
    for (mode, rates) in &cols {
        assert_eq!(rates.len(), 16, "{mode}");
        let end = rates[12..16].iter().copied().fold(0.0, f64::max);
        if mode == "off" {
            assert!(end < 101.0, "{mode}: {end} Mbit/s on one 100 Mbit/s path");
        } else {
            assert!(end > 110.0, "{mode}: {end} Mbit/s, not both paths");
        }
        // Data flows again after each failure.
        assert!(rates[4..7].iter().any(|&r| r > 1.0), "{mode}: {rates:?}");
        assert!(rates[11..16].iter().any(|&r| r > 1.0), "{mode}: {rates:?}");
    }
    std::fs::remove_dir_all(&dir).ok();
}
