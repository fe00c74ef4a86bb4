//! `softrnic conform` against `softrnic rping -s -P --p2p`, two processes over loopback: a
//! clean peer passes every case, and each deliberate fault of the peer (`--fault`) is found
//! by the case of the RFC clause it breaks, and by no other.

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Output;

use common::{Server, bin};

/// A scratch directory of this test process.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("softrnic-conform-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir.join(name)
}

/// An rping server (persistent, P2P, every RTR type) with `extra` options.
fn peer(extra: &[&str]) -> Server {
    let mut args = vec!["-P", "--p2p", "--timeout", "20"];
    args.extend_from_slice(extra);
    Server::rping(&args)
}

/// Runs `softrnic conform` against `port` with a JSON report; the exit status, the output and
/// the verdict of each case.
fn conform(port: u16, name: &str, extra: &[&str]) -> (Output, BTreeMap<String, String>) {
    let (out, _, v) = conform_json(port, name, extra);
    (out, v)
}

/// [`conform`], also returning the whole JSON report.
fn conform_json(
    port: u16,
    name: &str,
    extra: &[&str],
) -> (Output, serde_json::Value, BTreeMap<String, String>) {
    let json = scratch(&format!("{name}.json"));
    let pcap = scratch(&format!("{name}.pcap"));
    let out = bin()
        .args(["conform", &format!("127.0.0.1:{port}"), "-q"])
        .arg("--json")
        .arg(&json)
        .arg("--pcap")
        .arg(&pcap)
        .args(extra)
        .output()
        .expect("run conform");
    let text = std::fs::read_to_string(&json).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    let v: serde_json::Value = serde_json::from_str(&text).expect("JSON report");
    let verdicts = v["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            (
                r["id"].as_str().unwrap_or("").to_string(),
                r["verdict"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    (out, v, verdicts)
}

/// The cases that did not pass, with their verdicts.
fn not_passed(v: &BTreeMap<String, String>) -> BTreeMap<&str, &str> {
    v.iter()
        .filter(|(_, verdict)| verdict.as_str() != "PASS")
        .map(|(id, verdict)| (id.as_str(), verdict.as_str()))
        .collect()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The catalogue as `--list` prints it: the ids of the cases of the peer in `role`.
fn catalogue(role: &str) -> Vec<String> {
    let out = bin().args(["conform", "--list"]).output().expect("list");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let id = w.next()?;
            (w.next()? == role).then(|| id.to_string())
        })
        .collect()
}

/// Every case against a clean softrnic peer: all PASS but the access-rights case, which
/// needs a buffer the rping application does not expose (N/A). Exit 0; the table, the
/// summary line, the JUnit report and the capture are there, and the capture decodes.
#[test]
fn clean_softrnic_peer_passes_every_case() {
    let srv = peer(&[]);
    let junit = scratch("clean.xml");
    let (out, report, v) = conform_json(srv.port, "clean", &["--junit", junit.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    let ids: Vec<&String> = v.keys().collect();
    let mut all = catalogue("responder");
    all.sort();
    assert_eq!(ids, all.iter().collect::<Vec<_>>(), "every case ran");
    assert!(v.len() >= 40, "{v:?}");
    assert_eq!(
        not_passed(&v),
        RPING_NA.iter().map(|id| (*id, "N/A")).collect(),
        "{}",
        text(&out)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let na = RPING_NA.len();
    let summary = format!(
        "{} cases: {} PASS, 0 FAIL, 0 DEVIATION, {na} N/A",
        v.len(),
        v.len() - na
    );
    assert!(stdout.contains(&summary), "{stdout}");
    assert!(
        stdout.contains("| PASS | mpa-rev1 | RFC 5044 §7.1.1 Rev |"),
        "{stdout}"
    );
    let xml = std::fs::read_to_string(&junit).expect("JUnit report");
    assert!(
        xml.contains(&format!(
            r#"tests="{}" failures="0" skipped="{na}""#,
            v.len()
        )),
        "{xml}"
    );
    // The capture holds every connection the run opened; the decoder reads it.
    let dec = bin()
        .args(["decode", "--json"])
        .arg(scratch("clean.pcap"))
        .output()
        .expect("decode");
    assert_ne!(dec.status.code(), Some(2), "{dec:?}");
    let summary = String::from_utf8_lossy(&dec.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|j| j["type"] == "summary")
        .expect("decoder summary");
    let opened = report["connections"].as_u64().expect("connections");
    // Every case that ran opened at least one connection (an N/A case opens none).
    assert!(opened as usize >= v.len() - na, "{report}");
    assert_eq!(summary["connections"].as_u64(), Some(opened), "{summary}");
    // softrnic as the target: whatever the cases sent (Writes out of bounds, to another
    // connection's buffer or to an invalidated STag, Atomics without the right), the rping
    // server's rdma buffer, which only its own RDMA Read may fill and the runner never
    // answers, is as registered when each connection ends — region and guard area alike.
    let server = srv.kill().text();
    let untouched = server.matches("rdma buffer untouched").count();
    assert!(
        untouched >= 20,
        "{untouched} connections checked:\n{server}"
    );
    assert!(!server.contains("MODIFIED"), "{server}");
}

/// The cases an rping server cannot serve: it exposes no buffer without a remote right nor
/// one with remote atomic rights, and its application disconnects on an Immediate Data
/// completion (which hides the RNIC's handling of it).
const RPING_NA: &[&str] = &[
    "ddp-access",
    "rdmap-atomic",
    "rdmap-atomic-alignment",
    "rdmap-immediate",
];

/// Runs the catalogue (without the 5 s Request timer case) against a peer with `fault` and
/// returns the cases that did not pass, and the exit status.
fn with_fault(fault: &str, extra: &[&str]) -> (BTreeMap<String, String>, Option<i32>, String) {
    let srv = peer(&["--fault", fault]);
    let mut args = vec!["--skip", "request-timeout"];
    args.extend_from_slice(extra);
    let (out, v) = conform(srv.port, fault, &args);
    let failed = v
        .into_iter()
        .filter(|(id, verdict)| verdict != "PASS" && !RPING_NA.contains(&id.as_str()))
        .collect();
    (failed, out.status.code(), text(&out))
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

/// RFC 6581 §9: a Reply that accepts P2P without echoing it is found by mpa-p2p-echo alone
/// (FAIL); the RTR cases cannot run without P2P (N/A, pointing there). Exit 1.
#[test]
fn rfc6581_9_p2p_not_echoed_is_found_by_the_p2p_echo_case() {
    let (failed, code, out) = with_fault("no-p2p-echo", &[]);
    assert_eq!(
        failed,
        map(&[
            ("mpa-p2p-echo", "FAIL"),
            ("mpa-rtr-choice", "N/A"),
            ("mpa-rtr-read", "N/A"),
            ("mpa-rtr-send", "N/A"),
            ("mpa-rtr-stag0", "N/A"),
            ("mpa-rtr-write", "N/A"),
        ]),
        "{out}"
    );
    assert_eq!(code, Some(1), "{out}");
}

/// RFC 6581 §9: an RTR type that was not offered (or several) is found by the RTR selection
/// cases and by nothing else: each FAIL, except the Write RTR selected for an offer of Send
/// alone, which is Linux siw 6.1's known deviation (it knows no Send RTR).
#[test]
fn rfc6581_9_wrong_rtr_type_is_found_by_the_rtr_cases() {
    let (failed, code, out) = with_fault("wrong-rtr", &[]);
    assert_eq!(
        failed,
        map(&[
            ("mpa-rtr-choice", "FAIL"),
            ("mpa-rtr-read", "FAIL"),
            ("mpa-rtr-send", "DEVIATION"),
            ("mpa-rtr-stag0", "N/A"),
            ("mpa-rtr-write", "FAIL"),
        ]),
        "{out}"
    );
    assert_eq!(code, Some(1), "{out}");
}

/// RFC 5040 §4.8: Terminates in Linux siw 6.1's layout are a DEVIATION of the layout case
/// alone; every other case still reads their causes and copied headers. Exit 0, or 1 with
/// --strict.
#[test]
fn rfc5040_4_8_siw_terminate_layout_is_a_deviation_of_the_layout_case() {
    let (failed, code, out) = with_fault("siw-terminate", &[]);
    assert_eq!(
        failed,
        map(&[("rdmap-terminate-layout", "DEVIATION")]),
        "{out}"
    );
    assert_eq!(code, Some(0), "{out}");
    let (failed, code, out) = with_fault("siw-terminate", &["--strict", "--case", "layout"]);
    assert_eq!(
        failed,
        map(&[("rdmap-terminate-layout", "DEVIATION")]),
        "{out}"
    );
    assert_eq!(code, Some(1), "{out}");
}

/// RFC 5044 §4.4: a wrong CRC on the peer's first FPDU is found by mpa-crc alone.
#[test]
fn rfc5044_4_4_wrong_crc_is_found_by_the_crc_case() {
    let (failed, code, out) = with_fault("bad-crc", &[]);
    assert_eq!(failed, map(&[("mpa-crc", "FAIL")]), "{out}");
    assert_eq!(code, Some(1), "{out}");
}

/// RFC 5040 §6.1: Read Requests beyond the IRD served instead of refused are found by
/// rdmap-ird alone.
#[test]
fn rfc5040_6_1_ird_not_enforced_is_found_by_the_ird_case() {
    let (failed, code, out) = with_fault("ird-not-enforced", &[]);
    assert_eq!(failed, map(&[("rdmap-ird", "FAIL")]), "{out}");
    assert_eq!(code, Some(1), "{out}");
}

/// RFC 5044 §7.1.1 C: a peer with strict CRC (the t404 profile at revision 2) refuses a
/// Request without C, which mpa-crc-not-requested reports as a DEVIATION; with --crc in every
/// other Request the rest pass or are N/A for what that peer declines (markers, P2P).
#[test]
fn rfc5044_7_1_1_strict_crc_peer_is_a_deviation_of_the_crc_case() {
    let srv = Server::rping(&[
        "-P",
        "--timeout",
        "20",
        "--profile",
        "t404",
        "--mpa-rev",
        "2",
    ]);
    let (out, v) = conform(srv.port, "t404", &["--crc", "--skip", "request-timeout"]);
    assert!(out.status.success(), "{}", text(&out));
    let deviations: Vec<&str> = not_passed(&v)
        .into_iter()
        .filter(|(_, verdict)| *verdict != "N/A")
        .map(|(id, verdict)| {
            assert_eq!(verdict, "DEVIATION", "{}", text(&out));
            id
        })
        .collect();
    assert_eq!(deviations, ["mpa-crc-not-requested"], "{}", text(&out));
    for declined in ["mpa-markers", "mpa-p2p-echo", "mpa-rtr-write"] {
        assert_eq!(v[declined], "N/A", "{}", text(&out));
    }
    assert_eq!(v["mpa-crc"], "PASS", "{}", text(&out));
    assert_eq!(v["rdmap-read"], "PASS", "{}", text(&out));
}

/// With nothing known about the peer's application, the cases that need its buffers are
/// N/A and the rest still pass.
#[test]
fn bare_peer_runs_only_what_needs_no_application() {
    let srv = peer(&[]);
    let (out, v) = conform(
        srv.port,
        "bare",
        &["--app", "bare", "--skip", "request-timeout"],
    );
    assert!(out.status.success(), "{}", text(&out));
    let na: Vec<&str> = not_passed(&v)
        .into_iter()
        .inspect(|(_, verdict)| assert_eq!(*verdict, "N/A", "{}", text(&out)))
        .map(|(id, _)| id)
        .collect();
    for needs_buffers in ["ddp-bounds", "ddp-no-buffer", "rdmap-read", "rdmap-ird"] {
        assert!(na.contains(&needs_buffers), "{na:?}");
    }
    for runs_anyway in [
        "mpa-rev1",
        "ddp-invalid-qn",
        "ddp-invalid-stag",
        "rdmap-opcode",
    ] {
        assert_eq!(v[runs_anyway], "PASS", "{}", text(&out));
    }
}

/// `softrnic conform --listen`: the port of its "softrnic conform: listening on ADDR" line.
fn listen_port(line: &str) -> Option<u16> {
    line.strip_prefix("softrnic conform: listening on ")
        .and_then(|a| a.rsplit(':').next())
        .and_then(|p| p.parse().ok())
}

/// Runs `softrnic conform --listen` with softrnic rping clients (`client` options) connecting
/// one after the other until it is done; the exit and the verdict of each case.
fn listen_run(name: &str, client: &[&str]) -> (common::Exit, BTreeMap<String, String>) {
    let mut rping = vec![
        "rping",
        "-c",
        "-a",
        "127.0.0.1",
        "-C",
        "1",
        "--timeout",
        "5",
    ];
    rping.extend_from_slice(client);
    listen_run_app(name, "rping-client", &rping, "-p")
}

/// Runs `softrnic conform --listen --app APP` with `client` (a softrnic command, given the
/// runner's port after `port_opt`) started again and again, each run bounded to 10 s, until
/// the runner is done; the exit and the verdict of each case.
fn listen_run_app(
    name: &str,
    app: &str,
    client: &[&str],
    port_opt: &str,
) -> (common::Exit, BTreeMap<String, String>) {
    let json = scratch(&format!("{name}.json"));
    let pcap = scratch(&format!("{name}.pcap"));
    let args = [
        "conform",
        "--listen",
        "127.0.0.1:0",
        "--app",
        app,
        "--accept-timeout",
        "20",
        "-q",
        "--json",
        json.to_str().unwrap(),
        "--pcap",
        pcap.to_str().unwrap(),
    ];
    let mut runner = Server::start(&args, listen_port);
    let port = runner.port.to_string();
    let mut clients = 0;
    while runner.alive() {
        clients += 1;
        assert!(clients < 50, "the runner wants too many connections");
        let mut c = bin()
            .args(client)
            .args([port_opt, &port])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start the client");
        let t0 = std::time::Instant::now();
        while c.try_wait().ok().flatten().is_none() {
            if t0.elapsed() > std::time::Duration::from_secs(10) {
                let _ = c.kill();
                let _ = c.wait();
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
    let exit = runner.wait();
    let text = std::fs::read_to_string(&json).unwrap_or_else(|e| panic!("{e}: {exit:?}"));
    let v: serde_json::Value = serde_json::from_str(&text).expect("JSON report");
    assert_eq!(v["app"], app, "{v}");
    let verdicts = v["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            (
                r["id"].as_str().unwrap_or("").to_string(),
                r["verdict"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    (exit, verdicts)
}

/// The peer as initiator with perftest's `-R` client as its application (`softrnic write-bw
/// ADDR -R`, P2P): every initiator case passes, init-first-fpdu judging that its first
/// message is the 16-octet version Send. Without P2P the RTR cases are N/A.
#[test]
fn listen_perftest_client_passes_every_case() {
    let (exit, v) = listen_run_app(
        "listen-perftest",
        "perftest-client",
        &["write-bw", "127.0.0.1", "-R", "--p2p", "-n", "5"],
        "-p",
    );
    assert!(exit.status.success(), "{}", exit.text());
    let mut all = catalogue("initiator");
    all.sort();
    assert_eq!(v.keys().cloned().collect::<Vec<_>>(), all);
    assert!(not_passed(&v).is_empty(), "{v:?}\n{}", exit.text());
}

/// The peer as initiator (softrnic rping clients in P2P mode): every initiator case passes.
#[test]
fn listen_clean_softrnic_initiator_passes_every_case() {
    let (exit, v) = listen_run("listen-clean", &["--p2p"]);
    assert!(exit.status.success(), "{}", exit.text());
    let mut all = catalogue("initiator");
    all.sort();
    assert_eq!(v.keys().cloned().collect::<Vec<_>>(), all);
    assert!(not_passed(&v).is_empty(), "{v:?}\n{}", exit.text());
}

/// RFC 6581 §9 / RFC 5041 §5.2: an initiator's RTR with STag 0 is a DEVIATION (Chelsio
/// refuses it) of init-rtr-stag alone; the same peer without P2P makes the RTR cases N/A.
#[test]
fn rfc6581_9_rtr_with_stag_0_is_a_deviation_of_the_rtr_stag_case() {
    let (exit, v) = listen_run("listen-stag0", &["--p2p", "--fault", "rtr-stag-zero"]);
    assert!(exit.status.success(), "{}", exit.text());
    assert_eq!(
        not_passed(&v),
        BTreeMap::from([("init-rtr-stag", "DEVIATION")]),
        "{}",
        exit.text()
    );
    let (exit, v) = listen_run("listen-no-p2p", &[]);
    assert!(exit.status.success(), "{}", exit.text());
    assert_eq!(
        not_passed(&v),
        BTreeMap::from([("init-rtr-stag", "N/A"), ("init-rtr-type", "N/A")]),
        "{}",
        exit.text()
    );
}

/// Bad arguments exit 2 with a message: no peer, a selection that leaves no case, a peer
/// that cannot be reached.
#[test]
fn conform_refuses_bad_arguments() {
    let out = bin().arg("conform").output().expect("run");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let out = bin()
        .args(["conform", "127.0.0.1:9", "--case", "no-such-case"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(text(&out).contains("no case left"), "{}", text(&out));
    // A peer that is not there: nothing was tested, which is not a verdict on anything.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let out = bin()
        .args([
            "conform",
            &format!("127.0.0.1:{port}"),
            "-q",
            "--case",
            "mpa-rev",
        ])
        .arg("--pcap")
        .arg(scratch("unreachable.pcap"))
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("nothing was tested"), "{}", text(&out));
    // An application model of the wrong role: a server model with --listen, a client model
    // against a listening peer.
    let out = bin()
        .args([
            "conform",
            "--listen",
            "127.0.0.1:0",
            "--app",
            "write-bw-server",
        ])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("is a responder"), "{}", text(&out));
    let out = bin()
        .args(["conform", "127.0.0.1:9", "--app", "perftest-client"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("is an initiator"), "{}", text(&out));
}

/// An rping server over DDP over SCTP (UDP encapsulation on `udp`), persistent, with
/// `extra` options.
fn sctp_peer(udp: u16, extra: &[&str]) -> Server {
    let udp = udp.to_string();
    let mut args = vec![
        "-P",
        "--transport",
        "sctp+udp",
        "--udp-port",
        &udp,
        "--timeout",
        "20",
    ];
    args.extend_from_slice(extra);
    Server::rping(&args)
}

/// Runs the RFC 5043 cases (`--llp sctp`) against the SCTP peer on SCTP port `port`, UDP
/// port `udp`: the exit status, the output and the verdict of each case.
fn conform_sctp(
    port: u16,
    udp: u16,
    name: &str,
) -> (Output, serde_json::Value, BTreeMap<String, String>) {
    let udp = udp.to_string();
    conform_json(port, name, &["--llp", "sctp", "--udp-port", &udp])
}

/// RFC 5043 §5.1, §5.2, §6: a clean softrnic peer over SCTP passes every RFC 5043 case
/// (and only those run: the MPA cases need TCP). Exit 0; the report names the lower layer
/// and counts the associations.
#[test]
fn rfc5043_5_6_clean_softrnic_sctp_peer_passes_every_rfc5043_case() {
    let srv = sctp_peer(29961, &[]);
    let (out, report, v) = conform_sctp(srv.port, 29961, "sctp-clean");
    assert!(out.status.success(), "{}", text(&out));
    let mut all = catalogue("sctp");
    all.sort();
    assert_eq!(v.keys().cloned().collect::<Vec<_>>(), all, "{}", text(&out));
    assert!(all.len() >= 7 && all.iter().all(|id| id.starts_with("rfc5043-")));
    assert_eq!(not_passed(&v), BTreeMap::new(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("DDP over SCTP/UDP, UDP port 29961"),
        "{stdout}"
    );
    assert!(
        stdout.contains("| PASS | rfc5043-segment-framing | RFC 5043 §5.2, §5.2.1, §5.2.2, §10 |"),
        "{stdout}"
    );
    assert!(
        stdout.contains("PPID 16 unordered: DDP-SSN 1 Read Request MSN 1"),
        "{stdout}"
    );
    // RFC 5040 §7.1 over RFC 5043: the Terminate is the next DDP Segment, then nothing.
    assert!(
        stdout.contains("PPID 16 unordered: DDP-SSN 2 Terminate: RDMAP Remote Protection Error: Invalid STag (layer 0x0, type 0x1, code 0x00), MDR"),
        "{stdout}"
    );
    // Shut down or aborted, depending on whether the Send came before the end.
    assert!(
        stdout.contains("; after it: aborted the association")
            || stdout.contains("; after it: ended the association"),
        "{stdout}"
    );
    assert_eq!(report["llp"]["sctp-udp"]["udp_port"], 29961, "{report}");
    assert_eq!(
        report["associations"].as_u64(),
        Some(all.len() as u64),
        "{report}"
    );
}

/// Runs the RFC 5043 cases against an SCTP peer with `fault` (UDP port `udp`) and checks
/// that the `cases` alone fail, saying `why`, and that the exit status is 1.
fn sctp_fault_found_by(fault: &str, udp: u16, cases: &[&str], why: &str) {
    let srv = sctp_peer(udp, &["--fault", fault]);
    let (out, _, v) = conform_sctp(srv.port, udp, fault);
    let out = text(&out).to_string() + &format!("\nexit {:?}", out.status.code());
    let want: BTreeMap<&str, &str> = cases.iter().map(|c| (*c, "FAIL")).collect();
    assert_eq!(not_passed(&v), want, "{out}");
    assert!(out.contains(why), "{out}");
    assert!(out.ends_with("exit Some(1)"), "{out}");
}

/// RFC 5043 §5.2: DDP Segments sent with PPID 0 instead of 16 are found by the cases that
/// judge a DDP Segment of the peer: the segment framing (rping's Read Request) and the
/// Terminate (FAIL, exit 1); the others pass.
#[test]
fn rfc5043_5_2_wrong_segment_ppid_is_found_by_the_segment_framing_and_terminate_cases() {
    sctp_fault_found_by(
        "sctp-wrong-ppid",
        29962,
        &["rfc5043-segment-framing", "rfc5043-terminate"],
        "PPID 0, not 16 (§5.2)",
    );
}

/// RFC 5043 §5.2.1, §6.2: a Session Accept with DDP-SSN 1 instead of the session's first,
/// 0, is found by the session accept case alone (FAIL, exit 1).
#[test]
fn rfc5043_5_2_1_accept_ddp_ssn_is_found_by_the_session_accept_case() {
    sctp_fault_found_by(
        "sctp-accept-ssn",
        29963,
        &["rfc5043-session-accept"],
        "DDP-SSN 1, not 0",
    );
}

/// Against an SCTP peer that is not there the RFC 5043 cases make no association, and
/// the run says nothing was tested (exit 2).
#[test]
fn sctp_run_without_a_peer_is_exit_2() {
    let (out, report, v) = conform_sctp(9, 29964, "sctp-nobody");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert_eq!(report["associations"].as_u64(), Some(0), "{report}");
    assert!(v.values().all(|verdict| verdict != "PASS"), "{v:?}");
}

/// A perftest `-R` server (`softrnic TOOL -p PORT EXTRA`) started again whenever it exits
/// (it serves one test, as perftest's do), on the port the first one took, until dropped.
struct PerfLoop {
    port: u16,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl PerfLoop {
    fn start(tool: &'static str, extra: &[&str]) -> PerfLoop {
        let first = Server::perf(tool, extra);
        let port = first.port;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        let thread = std::thread::spawn(move || {
            let mut srv = first;
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                if !srv.alive() {
                    let _ = srv.wait();
                    let p = port.to_string();
                    let mut args = vec![tool, "-p", p.as_str()];
                    args.extend(extra.iter().map(String::as_str));
                    srv = Server::start(&args, common::perf_port);
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            let _ = srv.kill();
        });
        PerfLoop {
            port,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for PerfLoop {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The cases a perftest `-R` server without P2P cannot serve: P2P declined, no receive on
/// its test connection, one test connection.
const PERFTEST_NA: &[&str] = &[
    "mpa-p2p-echo",
    "mpa-rtr-write",
    "mpa-rtr-read",
    "mpa-rtr-send",
    "mpa-rtr-choice",
    "mpa-rtr-stag0",
    "ddp-too-long",
    "ddp-stag-not-associated",
    "ddp-invalid-mo",
    "rdmap-read-not-associated",
    "rdmap-invalidate",
    "rdmap-invalidate-invalid",
    "rdmap-atomic",
    "rdmap-atomic-alignment",
    "rdmap-immediate",
];

/// RFC 5040 §4.8, §7.1: against `softrnic write-bw` (perftest's `-R` protocol played by the
/// runner; the server's buffer has remote write rights only, as perftest registers it), a
/// Read Request of that buffer draws 'Access rights violation' with both headers copied:
/// ddp-access is judged and passes. The cases that read the buffer are N/A with the reason.
#[test]
fn rfc5040_4_8_write_bw_server_refuses_a_read_of_its_buffer() {
    let srv = PerfLoop::start("write-bw", &["--ird", "1", "--ord", "1"]);
    let (out, report, v) = conform_json(
        srv.port,
        "write-bw",
        &["--app", "write-bw-server", "--skip", "request-timeout"],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(report["app"], "write-bw-server", "{report}");
    assert_eq!(v["ddp-access"], "PASS", "{}", text(&out));
    for passes in [
        "ddp-no-buffer",
        "ddp-bounds",
        "rdmap-read-invalid-stag",
        "rdmap-atomic-access",
    ] {
        assert_eq!(v[passes], "PASS", "{passes}: {}", text(&out));
    }
    let mut na: Vec<&str> = PERFTEST_NA.to_vec();
    na.extend(["rdmap-read", "rdmap-read-bounds", "rdmap-ird"]);
    let expected: BTreeMap<&str, &str> = na.iter().map(|id| (*id, "N/A")).collect();
    assert_eq!(not_passed(&v), expected, "{}", text(&out));
    for r in report["results"].as_array().expect("results") {
        if r["verdict"] == "N/A" {
            assert!(!r["reason"].as_str().unwrap_or("").is_empty(), "{r}");
        }
    }
    let access = report["results"]
        .as_array()
        .and_then(|rs| rs.iter().find(|r| r["id"] == "ddp-access"))
        .expect("ddp-access");
    assert!(
        access["observed"]
            .as_str()
            .unwrap_or("")
            .contains("Access rights violation"),
        "{access}"
    );
}

/// A write-bw server accepting its test connection with IRD 0 (perftest's own setting for
/// the Write tests) takes no Read Request at all: the cases judging what one names are N/A,
/// saying so, rather than failing on the IRD.
#[test]
fn rfc6581_7_write_bw_server_with_ird_0_leaves_the_read_cases_not_applicable() {
    let srv = PerfLoop::start("write-bw", &[]);
    let (out, report, v) = conform_json(
        srv.port,
        "write-bw-ird0",
        &[
            "--app",
            "write-bw-server",
            "--case",
            "ddp-access",
            "--case",
            "rdmap-read-invalid-stag",
            "--case",
            "rdmap-atomic-access",
            "--case",
            "ddp-bounds",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(v["ddp-bounds"], "PASS", "{}", text(&out));
    for id in [
        "ddp-access",
        "rdmap-read-invalid-stag",
        "rdmap-atomic-access",
    ] {
        assert_eq!(v[id], "N/A", "{id}: {}", text(&out));
    }
    assert!(report.to_string().contains("grants IRD 0"), "{report}");
}

/// Against `softrnic read-bw` (buffer with remote read and write rights, as perftest
/// registers it over iWARP) the Read cases run and pass; ddp-access is N/A, saying why.
#[test]
fn read_bw_server_passes_the_read_cases() {
    let srv = PerfLoop::start("read-bw", &[]);
    let (out, report, v) = conform_json(
        srv.port,
        "read-bw",
        &["--app", "read-bw-server", "--skip", "request-timeout"],
    );
    assert!(out.status.success(), "{}", text(&out));
    for passes in [
        "rdmap-read",
        "rdmap-read-bounds",
        "rdmap-ird",
        "rdmap-atomic-access",
    ] {
        assert_eq!(v[passes], "PASS", "{passes}: {}", text(&out));
    }
    let mut na: Vec<&str> = PERFTEST_NA.to_vec();
    na.push("ddp-access");
    let expected: BTreeMap<&str, &str> = na.iter().map(|id| (*id, "N/A")).collect();
    assert_eq!(not_passed(&v), expected, "{}", text(&out));
    assert!(
        report
            .to_string()
            .contains("read-bw's buffer grants read and write"),
        "{report}"
    );
}

/// RFC 5040 §7.1: a peer that goes on placing and answering segments after its Terminate,
/// the stream left open, is found by rdmap-after-terminate alone (FAIL, exit 1).
#[test]
fn rfc5040_7_1_place_after_terminate_is_found_by_the_after_terminate_case() {
    let (failed, code, out) = with_fault("place-after-terminate", &[]);
    assert_eq!(failed, map(&[("rdmap-after-terminate", "FAIL")]), "{out}");
    assert_eq!(code, Some(1), "{out}");
}

/// RFC 7306 §5.2.1, §5.2.2, §8.2: against `softrnic atomic-bw` (its buffer grants remote atomic
/// access only, as perftest registers it) the Atomic cases are judged and pass: a Fetch and Add
/// on the buffer's first word draws an Atomic Response (MSN 1, the Request Identifier), one 4
/// octets in draws 'Catastrophic error, localized to RDMAP Stream' with the header copied. A
/// Read of the buffer is refused (ddp-access); the cases that need remote read or write rights
/// are N/A, and so is rdmap-atomic-access (the buffer grants atomics).
#[test]
fn rfc7306_5_2_1_atomic_bw_server_passes_the_atomic_cases() {
    let srv = PerfLoop::start("atomic-bw", &[]);
    let (out, report, v) = conform_json(
        srv.port,
        "atomic-bw",
        &["--app", "atomic-bw-server", "--skip", "request-timeout"],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(report["app"], "atomic-bw-server", "{report}");
    for passes in [
        "rdmap-atomic",
        "rdmap-atomic-alignment",
        "ddp-access",
        "ddp-no-buffer",
        "rdmap-read-invalid-stag",
    ] {
        assert_eq!(v[passes], "PASS", "{passes}: {}", text(&out));
    }
    let mut na: Vec<&str> = PERFTEST_NA
        .iter()
        .copied()
        .filter(|id| !id.starts_with("rdmap-atomic"))
        .collect();
    na.extend([
        "rdmap-atomic-access",
        "rdmap-read",
        "rdmap-read-bounds",
        "rdmap-ird",
        "ddp-bounds",
        "ddp-to-wrap",
    ]);
    let expected: BTreeMap<&str, &str> = na.iter().map(|id| (*id, "N/A")).collect();
    assert_eq!(not_passed(&v), expected, "{}", text(&out));
    let alignment = report["results"]
        .as_array()
        .and_then(|rs| rs.iter().find(|r| r["id"] == "rdmap-atomic-alignment"))
        .expect("rdmap-atomic-alignment");
    assert!(
        alignment["observed"]
            .as_str()
            .unwrap_or("")
            .contains("Catastrophic error, localized to RDMAP Stream"),
        "{alignment}"
    );
}
