//! The `softrnic` binary as a user runs it: output, exit status, error messages.

mod common;

use std::path::PathBuf;

use common::bin;

fn golden(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data/golden")
        .join(name)
}

#[test]
fn decode_prints_frames_and_summary_and_exits_zero() {
    let out = bin()
        .arg("decode")
        .arg(golden("siw-rping-crc.pcap"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("MPA Request  rev 2  M0 C1 R0 H1  IRD 1 ORD 1"),
        "{text}"
    );
    assert!(
        text.contains("RDMA Read Response  STag 0x7ca19900"),
        "{text}"
    );
    assert!(text.contains("crc ok"));
    assert!(text.contains("CRC 18 good / 0 bad; 0 errors"), "{text}");
    assert!(
        text.contains("opcodes: RDMA Write 6, RDMA Read Request 4, RDMA Read Response 6, Send 16")
    );
}

#[test]
fn decode_counts_is_machine_readable() {
    let out = bin()
        .args(["decode", "--counts"])
        .arg(golden("siw-siw-rdmacm.pcap"))
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "0x00 RDMA-Write 35\n0x01 RDMA-Read-Request 8\n0x02 RDMA-Read-Response 33\n0x03 Send 113\n"
    );
}

#[test]
fn decode_summary_and_conn_filter() {
    let out = bin()
        .args(["decode", "--summary", "--conn", "6"])
        .arg(golden("siw-siw-rdmacm.pcap"))
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(!text.contains("frame "), "summary only: {text}");
    assert!(text.contains("128/128"), "{text}");
    assert!(
        !text.contains("18515 "),
        "other connections filtered out: {text}"
    );
}

#[test]
fn decode_exits_one_on_protocol_errors() {
    let mut bytes = std::fs::read(golden("siw-rping-crc.pcap")).unwrap();
    // Flip a bit deep inside the capture's largest CRC-protected frames.
    let n = bytes.len();
    bytes[n - 2000] ^= 0x01;
    let dir = std::env::temp_dir().join(format!("softrnic-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("corrupt.pcap");
    std::fs::write(&path, &bytes).unwrap();
    let out = bin().arg("decode").arg(&path).output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("ERROR: "), "{text}");
}

#[test]
fn decode_exits_two_on_unreadable_input() {
    let out = bin()
        .args(["decode", "/nonexistent/capture.pcap"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("cannot read /nonexistent/capture.pcap"),
        "{err}"
    );

    let out = bin()
        .args(["decode", concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml")])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8(out.stderr)
            .unwrap()
            .contains("is not a pcap or pcapng capture")
    );
}

#[test]
fn help_explains_decode() {
    let out = bin().args(["decode", "--help"]).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("Exit status"), "{text}");
    assert!(text.contains("--counts"));
}

/// `softrnic demo` runs every operation between two in-process RNICs over loopback and
/// verifies every byte, including the Terminate after a Write to an invalidated STag.
#[test]
fn demo_runs_and_verifies_everything() {
    check_demo(&[], "MPA/TCP rev 2");
}

/// `softrnic demo --transport sctp`: the same operations over DDP over softrnic's SCTP
/// (RFC 5043, UDP encapsulation), every byte verified.
#[test]
fn demo_over_sctp_runs_and_verifies_everything() {
    check_demo(
        &["--transport", "sctp"],
        "DDP over SCTP (RFC 5043, UDP encapsulation)",
    );
}

/// `softrnic demo --transport dev`: the same operations over MPA on softrnic's own TCP/IP
/// on two raw-Ethernet devices joined by an in-process cable, every byte verified.
#[test]
fn demo_over_the_device_stack_runs_and_verifies_everything() {
    check_demo(
        &["--transport", "dev"],
        "softrnic's own TCP/IP on an in-process Ethernet cable: MPA/TCP rev 2",
    );
}

fn check_demo(args: &[&str], connected: &str) {
    let out = bin().arg("demo").args(args).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        text.lines().next().is_some_and(|l| l.contains(connected)),
        "{text}"
    );
    for op in [
        "Send/Receive",
        "RDMA Write",
        "RDMA Read",
        "Atomic Fetch&Add",
        "Atomic Cmp&Swap",
        "Fast Register",
        "Memory windows",
        "Shared receive queue",
        "Completion events",
        "Send w/ Invalidate",
    ] {
        let line = text.lines().find(|l| l.starts_with(op)).expect(op);
        assert!(line.contains(" ok "), "{line}");
    }
    assert!(
        text.contains("DDP Tagged Buffer Error: Invalid STag"),
        "{text}"
    );
    assert!(text.contains("all operations verified"), "{text}");
}

/// `softrnic sim sctp-*`: RDMA over multihomed SCTP in virtual time; the failover scenario
/// moves every byte (exit 0) and `-v` shows the association moving to the second path.
#[test]
fn sim_sctp_failover_moves_every_byte() {
    let out = bin()
        .args(["sim", "sctp-failover", "--bytes", "1M", "-v"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    let row = text
        .lines()
        .find(|l| l.starts_with("sctp-failover"))
        .expect("a row");
    let f: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        (f[3], f[4], f[5], f[6]),
        ("1048576", "1048576", "0", "0"),
        "{row}"
    );
    assert!(
        text.contains("PrimaryChanged { remote: 10.0.2.2:0 }"),
        "{text}"
    );
    let bad = bin()
        .args(["sim", "sctp-loss", "--corrupt", "1"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
}

/// RDMA over SCTP in the simulator, captured on both paths (`--capture`): every capture
/// decodes — SCTP chunks, RFC 5043 session control and DDP/RDMAP segments — with 0 errors.
#[test]
fn sim_sctp_captures_decode_without_errors() {
    let dir = std::env::temp_dir().join(format!("softrnic-sim-sctp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cap = dir.join("flap.pcap");
    let out = bin()
        .args(["sim", "sctp-flap", "--bytes", "2M", "--capture"])
        .arg(&cap)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    for f in [cap.clone(), dir.join("flap.pcap.path1")] {
        let d = bin()
            .arg("decode")
            .arg("--summary")
            .arg(&f)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&d.stdout);
        assert!(d.status.success(), "{}: {text}", f.display());
        assert!(text.contains("0 errors, 0 warnings"), "{text}");
        assert!(text.contains("PPID 16 (DDP segment)"), "{text}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A capture whose last frame is cut short: the frames before it are decoded and printed,
/// then the damage is reported and the exit status is non-zero (as tshark does). A file that
/// is not a capture (`/dev/zero`) is refused at once.
#[test]
fn decode_damaged_and_non_captures() {
    let golden = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/data/golden/siw-rping-crc.pcap"
    );
    let bytes = std::fs::read(golden).unwrap();
    let cut = std::env::temp_dir().join(format!("softrnic-cut-{}.pcap", std::process::id()));
    std::fs::write(&cut, &bytes[..bytes.len() - 10]).unwrap();
    let out = bin()
        .arg("decode")
        .arg("--summary")
        .arg(&cut)
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&cut);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success());
    assert!(
        text.contains("opcodes:"),
        "nothing printed before the damage: {text}"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("damaged capture after"),
        "{out:?}"
    );
    let start = std::time::Instant::now();
    let out = bin().args(["decode", "/dev/zero"]).output().unwrap();
    assert!(start.elapsed() < std::time::Duration::from_secs(5));
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not a pcap or pcapng capture"));
}
