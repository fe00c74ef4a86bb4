//! Simulation captures: deterministic per seed, and decodable by `softrnic decode` with zero
//! errors.

use harness::mpa::{Capture, Scenario};
use softrnic::capture::read_bytes;
use softrnic::decode::{DecodeOptions, decode_file, decode_frames};
use softrnic::sim::{SimArgs, run_command};

fn capture(name: &str, seed: u64, bytes: u64) -> Vec<u8> {
    let mut s = Scenario::named(name).unwrap();
    s.bytes = bytes;
    let r = s.run(seed, Capture::Memory).unwrap();
    assert!(r.ok(), "{r:?}");
    r.capture.expect("memory capture")
}

/// Two runs with one seed give byte-identical captures; another seed gives another capture.
#[test]
fn one_seed_one_capture() {
    let a = capture("loss", 5, 1024 * 1024);
    let b = capture("loss", 5, 1024 * 1024);
    let c = capture("loss", 6, 1024 * 1024);
    assert!(a.len() > 1024 * 1024);
    assert!(a == b, "same seed, different captures");
    assert!(a != c, "different seeds, same capture");
}

/// The decoder reassembles the lossy, reordered, duplicated traffic and finds every FPDU's
/// RFC 5044 §4.4 CRC good and all of RFC 5040's operations of the workload.
#[test]
fn lossy_capture_decodes_without_errors() {
    let pcap = capture("loss", 7, 2 * 1024 * 1024);
    let frames = read_bytes(&pcap, "sim").unwrap();
    let report = decode_frames(&frames);
    assert_eq!(report.errors(), 0);
    assert_eq!(report.mpa_connections().count(), 1);
    let counts: Vec<String> = report
        .counts()
        .iter()
        .filter(|&(_, &n)| n > 0)
        .map(|(op, _)| format!("{op:?}"))
        .collect();
    for op in ["RdmaWrite", "ReadRequest", "ReadResponse", "Send"] {
        assert!(
            counts.iter().any(|c| c == op),
            "{op} missing from {counts:?}"
        );
    }
}

/// `softrnic sim --capture FILE` writes a pcap that `softrnic decode` reads with zero errors.
#[test]
fn sim_command_capture_decodes_cleanly() {
    let dir = std::env::temp_dir().join(format!("softrnic-sim-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("clean.pcap");
    let args = SimArgs {
        scenario: "clean".into(),
        seed: 3,
        bytes: Some("1M".into()),
        capture: Some(path.clone()),
        ..SimArgs::default()
    };
    let mut table = Vec::new();
    assert_eq!(run_command(&args, &mut table), 0);
    let table = String::from_utf8(table).unwrap();
    assert!(table.lines().any(|l| l.starts_with("clean")), "{table}");
    let opts = DecodeOptions {
        frames: false,
        summary: true,
        counts: false,
        hex: false,
        conn: None,
        json: false,
    };
    let mut out = Vec::new();
    let report = decode_file(&path, &opts, &mut out).unwrap();
    assert!(!report.has_errors(), "{}", String::from_utf8_lossy(&out));
    assert_eq!(report.mpa_connections().count(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}
