//! The `softrnic` binary as a user runs it: output, exit status, error messages.

use std::path::PathBuf;
use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_softrnic"))
}

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
    let out = bin().arg("demo").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    for op in [
        "Send/Receive",
        "RDMA Write",
        "RDMA Read",
        "Atomic Fetch&Add",
        "Atomic Cmp&Swap",
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

/// Starts `softrnic <tool> -p 0 <server_args>` and returns it with the port it listens on.
fn perf_server(tool: &str, server_args: &[&str]) -> (std::process::Child, u16) {
    use std::io::BufRead;
    let mut child = bin()
        .arg(tool)
        .args(["-p", "0"])
        .args(server_args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = std::io::BufReader::new(stdout).lines();
    let first = lines.next().unwrap().unwrap();
    let port = first
        .rsplit(' ')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {first:?}"));
    // Keep draining the server's output so it never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    (child, port)
}

/// Runs a perftest-style tool as two processes (server, then client) and returns the
/// client's output.
fn perf_pair(tool: &str, client_args: &[&str], server_args: &[&str]) -> String {
    let (mut server, port) = perf_server(tool, server_args);
    let out = bin()
        .arg(tool)
        .arg("127.0.0.1")
        .args(["-p", &port.to_string()])
        .args(client_args)
        .output()
        .unwrap();
    let status = server.wait().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{tool} client failed: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(status.success(), "{tool} server failed");
    text
}

fn result_rows(text: &str) -> Vec<Vec<f64>> {
    text.lines()
        .filter_map(|l| {
            let v: Vec<f64> = l
                .split_whitespace()
                .map(|w| w.parse::<f64>())
                .collect::<Result<_, _>>()
                .ok()?;
            (v.len() >= 5).then_some(v)
        })
        .collect()
}

/// The six perftest-style tools run between two processes and print perftest's tables.
#[test]
fn perftest_tools_between_two_processes() {
    for tool in ["write-bw", "read-bw", "send-bw"] {
        let text = perf_pair(tool, &["-s", "4096", "-n", "50", "-t", "8"], &[]);
        assert!(
            text.contains(
                "#bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]"
            ),
            "{text}"
        );
        let rows = result_rows(&text);
        assert_eq!(rows.len(), 1, "{text}");
        assert_eq!((rows[0][0], rows[0][1]), (4096.0, 50.0));
        assert!(rows[0][3] > 0.0 && rows[0][2] >= rows[0][3], "{text}");
    }
    for tool in ["write-lat", "read-lat", "send-lat"] {
        let text = perf_pair(tool, &["-n", "50"], &[]);
        assert!(text.contains("t_typical[usec]"), "{text}");
        assert!(text.contains("99.9% percentile[usec]"), "{text}");
        let rows = result_rows(&text);
        assert_eq!(rows.len(), 1, "{text}");
        let r = &rows[0];
        assert_eq!((r[0], r[1]), (2.0, 50.0));
        // min <= typical <= max, min <= avg <= max.
        assert!(
            r[2] <= r[4] && r[4] <= r[3] && r[2] <= r[5] && r[5] <= r[3],
            "{text}"
        );
    }
}

/// MPA options reach the wire: CRC, markers and peer-to-peer with a Read RTR are
/// negotiated (RFC 5044 §7.1, RFC 6581), reported in the header, and `--report_gbits`
/// switches the unit; `-a` covers every size; manual progress works.
#[test]
fn perftest_mpa_options_all_sizes_and_manual_progress() {
    let mpa = ["--crc", "--markers", "--p2p", "--rtr", "read"];
    let mut client: Vec<&str> = vec!["-s", "65536", "-n", "20", "--report_gbits"];
    client.extend(mpa);
    let text = perf_pair("write-bw", &client, &mpa);
    assert!(
        text.contains("CRC on markers tx on rx on P2P on RTR zero-length RDMA Read"),
        "{text}"
    );
    assert!(text.contains("BW average[Gb/sec]"), "{text}");

    let text = perf_pair("read-lat", &["-a", "-n", "5"], &[]);
    let sizes: Vec<f64> = result_rows(&text).iter().map(|r| r[0]).collect();
    let want: Vec<f64> = (1..=23).map(|i| f64::from(1u32 << i)).collect();
    assert_eq!(sizes, want, "{text}");

    let text = perf_pair(
        "send-lat",
        &["-n", "30", "--manual-progress"],
        &["--manual-progress"],
    );
    assert_eq!(result_rows(&text).len(), 1, "{text}");

    // MPA revision 1 (RFC 5044 without the RFC 6581 enhancements).
    let text = perf_pair(
        "send-lat",
        &["-n", "10", "--mpa-rev", "1"],
        &["--mpa-rev", "1"],
    );
    assert!(text.contains("MPA rev 1 CRC off"), "{text}");

    // A client running another test is refused by the server.
    let (mut server, port) = perf_server("write-bw", &[]);
    let out = bin()
        .args(["read-bw", "127.0.0.1", "-p", &port.to_string(), "-n", "5"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("rejected"));
    assert!(!server.wait().unwrap().success());
}
