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

/// Runs `softrnic demo ARGS` with `RUST_LOG=debug`: every operation verified, and every
/// event of a QP's engine (setup, state changes, Terminate) and every disconnect logged in
/// the span of its QP, which names the QP, on the passive side as on the active one.
fn check_demo(args: &[&str], connected: &str) {
    let out = bin()
        .arg("demo")
        .args(args)
        .env("RUST_LOG", "debug")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    let log = String::from_utf8_lossy(&out.stderr);
    let qp_events: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("stack::engine:") || l.contains("stack::transport: disconnected"))
        .collect();
    let established = qp_events
        .iter()
        .filter(|l| l.contains("connection established"))
        .count();
    assert!(established >= 10, "both ends of 5 QPs: {log}");
    for l in &qp_events {
        assert!(l.contains("qp{qp="), "outside its QP's span: {l}");
    }
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

/// `RUST_LOG=debug softrnic sim`: the simulated QPs log inside their spans as the RNIC's do
/// — every engine event of both ends over MPA/TCP and over SCTP is inside a `qp{qp=N ...}`
/// span that names the end or the LLP.
#[test]
fn sim_logs_every_engine_event_inside_its_qp_span() {
    for (scenario, span) in [
        ("clean", "node=\"responder\""),
        ("sctp-clean", "llp=\"SCTP\""),
    ] {
        let out = bin()
            .args(["sim", scenario, "--bytes", "64K"])
            .env("RUST_LOG", "debug")
            .output()
            .unwrap();
        assert!(out.status.success(), "{scenario}: {out:?}");
        let log = String::from_utf8_lossy(&out.stderr);
        let events: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("stack::engine:"))
            .collect();
        assert!(
            events
                .iter()
                .filter(|l| l.contains("connection established"))
                .count()
                >= 2,
            "{scenario}: both ends: {log}"
        );
        assert!(events.iter().any(|l| l.contains(span)), "{scenario}: {log}");
        for l in &events {
            assert!(
                l.contains("qp{qp="),
                "{scenario}: outside its QP's span: {l}"
            );
        }
    }
}

/// `softrnic sim failover`: one row per second of the 120 s schedule with a column per
/// mode, a summary row per mode, and the figure as a PNG in `--out`; multihoming is at zero
/// for at least a second when its path fails. Bad options exit 2.
#[test]
fn sim_failover_prints_a_row_per_second_and_draws_the_figure() {
    let dir = std::env::temp_dir().join(format!("softrnic-sim-fo-{}", std::process::id()));
    let out = bin()
        .args(["sim", "failover", "--scale", "0.02", "--out"])
        .arg(&dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    let header = text
        .lines()
        .position(|l| {
            l.split_whitespace().collect::<Vec<_>>() == ["t", "multihoming", "CMT", "CMT-PF"]
        })
        .expect("table header");
    let rows: Vec<Vec<f64>> = text
        .lines()
        .skip(header + 1)
        .take_while(|l| !l.trim().is_empty())
        .map(|l| l.split_whitespace().map(|f| f.parse().unwrap()).collect())
        .collect();
    assert_eq!(rows.len(), 120, "{text}");
    assert!(
        rows.iter()
            .enumerate()
            .all(|(i, r)| r.len() == 4 && r[0] == i as f64)
    );
    // Multihoming: data before the failure at 15 s, none for a while after it, data again.
    assert!(rows[10][1] > 0.0 && rows[20][1] > 0.0, "{text}");
    assert!(rows[15..18].iter().any(|r| r[1] == 0.0), "{text}");
    for mode in ["multihoming", "CMT", "CMT-PF"] {
        let row = text
            .lines()
            .find(|l| l.starts_with(&format!("{mode} ")) && l.contains('%'))
            .expect(mode);
        assert!(row.contains("Mbit/s"), "{row}");
    }
    let png = std::fs::read(dir.join("failover.png")).unwrap();
    assert_eq!(&png[..4], b"\x89PNG");
    let _ = std::fs::remove_dir_all(&dir);
    for bad in [["--scale", "0"], ["--loss", "1"]] {
        let o = bin().args(["sim", "failover"]).args(bad).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{bad:?}");
    }
}

/// `softrnic sim bandwidth`: a row per message size, 64 B to 4 MiB, with one path, two
/// paths and their ratio; large messages go nearly twice as fast over two paths.
#[test]
fn sim_bandwidth_prints_one_and_two_paths_per_size() {
    let out = bin()
        .args(["sim", "bandwidth", "--scale", "0.02", "--bytes", "2M"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    let rows: Vec<Vec<&str>> = text
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|f| f.len() == 7 && f[5].ends_with('%'))
        .collect();
    let sizes: Vec<String> = rows.iter().map(|f| format!("{} {}", f[0], f[1])).collect();
    assert_eq!(
        sizes,
        [
            "64 B", "256 B", "1 KiB", "4 KiB", "16 KiB", "64 KiB", "256 KiB", "1 MiB", "4 MiB"
        ],
        "{text}"
    );
    let ratio = |f: &Vec<&str>| f[4].trim_end_matches('x').parse::<f64>().unwrap();
    assert!(ratio(&rows[7]) >= 1.9, "{text}");
}

/// `softrnic sim onesided`: a row per size from 2 B to 4 MiB and a column per operation and
/// transport, and three figures.
#[test]
fn sim_onesided_prints_a_row_per_size_and_draws_three_figures() {
    let dir = std::env::temp_dir().join(format!("softrnic-sim-os-{}", std::process::id()));
    let out = bin()
        .args(["sim", "onesided", "--scale", "0.1", "--out"])
        .arg(&dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    let header = text
        .lines()
        .find(|l| l.trim_start().starts_with("size"))
        .expect("header");
    assert_eq!(header.split_whitespace().count(), 10, "{header}");
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() == 11 && f[2..].iter().all(|x| x.parse::<f64>().is_ok())
        })
        .collect();
    assert_eq!(rows.len(), 22, "{text}");
    assert!(rows[0].trim_start().starts_with("2 B"), "{text}");
    assert!(rows[21].trim_start().starts_with("4 MiB"), "{text}");
    for f in [
        "onesided-put.png",
        "onesided-get-read.png",
        "onesided-get-write.png",
    ] {
        let png = std::fs::read(dir.join(f)).unwrap();
        assert_eq!(&png[..4], b"\x89PNG", "{f}");
    }
    let _ = std::fs::remove_dir_all(&dir);
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
