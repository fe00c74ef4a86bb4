//! The perftest-style tools between two processes over loopback, speaking perftest's
//! `-R` protocol (control connection + test connection, `pingpong_dest` exchanges,
//! report exchange, send-bw credits).

mod common;

use common::{Server, bin};

/// Runs a tool as server and client (the same options on both, as with perftest);
/// returns (client output, server output).
fn perf_pair(tool: &str, args: &[&str]) -> (String, String) {
    let server = Server::perf(tool, args);
    let out = bin()
        .arg(tool)
        .arg("127.0.0.1")
        .args(["-p", &server.port.to_string()])
        .args(args)
        .output()
        .unwrap();
    let exit = server.wait();
    let err = exit.stderr;
    // What the server printed after naming its port.
    let server_text = exit.stdout.split_once('\n').map_or("", |l| l.1).to_owned();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{tool} client failed: {}\n{text}\nserver:\n{server_text}{err}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        exit.status.success(),
        "{tool} server failed: {err}\n{server_text}"
    );
    (text, server_text)
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

const BW_HEAD: &str =
    " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]";

/// write-bw and read-bw: the client measures, and the server prints the client's result
/// as received in perftest's report exchange (size, iterations, peak, average, rate).
#[test]
fn write_bw_and_read_bw_report_exchange() {
    for tool in ["write-bw", "read-bw"] {
        let (client, server) = perf_pair(tool, &["-s", "4096", "-n", "50", "-t", "8"]);
        assert!(client.contains(BW_HEAD), "{client}");
        assert!(client.contains("rdma_cm QPs\t : ON"), "{client}");
        let rows = result_rows(&client);
        assert_eq!(rows.len(), 1, "{client}");
        assert_eq!((rows[0][0], rows[0][1]), (4096.0, 50.0));
        assert!(rows[0][3] > 0.0 && rows[0][2] >= rows[0][3], "{client}");
        // The server's line is the client's, carried over the control connection.
        assert_eq!(result_rows(&server), rows, "{server}");
    }
    // Read tests advertise their outstanding reads as IRD/ORD; others 0/0 (perftest).
    let (client, _) = perf_pair("read-bw", &["-s", "64", "-n", "10", "-o", "8"]);
    assert!(client.contains("IRD / ORD       : 8 / 8"), "{client}");
    assert!(client.contains(" OUT 0x08 RKey "), "{client}");
    let (client, _) = perf_pair("write-bw", &["-s", "64", "-n", "10"]);
    assert!(client.contains("IRD / ORD       : 0 / 0"), "{client}");
}

/// send-bw: both sides measure; the receiver returns credits by RDMA Write every
/// rx_depth / 3 messages, so a small receive window still lets many messages through.
#[test]
fn send_bw_with_credits_and_all_sizes() {
    let (client, server) = perf_pair("send-bw", &["-s", "1024", "-n", "200", "-r", "6"]);
    let rows = result_rows(&client);
    assert_eq!(rows.len(), 1, "{client}");
    assert_eq!((rows[0][0], rows[0][1]), (1024.0, 200.0));
    assert!(server.contains(" RX depth        : 6"), "{server}");
    let srows = result_rows(&server);
    assert_eq!(srows.len(), 1, "{server}");
    assert_eq!((srows[0][0], srows[0][1]), (1024.0, 200.0));

    let (client, server) = perf_pair("send-bw", &["-a", "-n", "4"]);
    let want: Vec<f64> = (1..=23).map(|i| f64::from(1u32 << i)).collect();
    let sizes = |t: &str| result_rows(t).iter().map(|r| r[0]).collect::<Vec<_>>();
    assert_eq!(sizes(&client), want, "{client}");
    assert_eq!(sizes(&server), want, "{server}");
}

/// The latency tools: both ping-pong sides print the table; read-lat only the client.
#[test]
fn latency_tools() {
    for tool in ["write-lat", "send-lat", "read-lat"] {
        let (client, server) = perf_pair(tool, &["-n", "300", "-s", "64"]);
        assert!(client.contains("t_typical[usec]"), "{client}");
        assert!(client.contains("99.9% percentile[usec]"), "{client}");
        let rows = result_rows(&client);
        assert_eq!(rows.len(), 1, "{client}");
        let r = &rows[0];
        assert_eq!((r[0], r[1]), (64.0, 300.0));
        // min <= typical <= max, min <= avg <= max.
        assert!(
            r[2] <= r[4] && r[4] <= r[3] && r[2] <= r[5] && r[5] <= r[3],
            "{client}"
        );
        let srows = result_rows(&server).len();
        assert_eq!(srows, usize::from(tool != "read-lat"), "{server}");
    }
    // All sizes (the runs above, 300 iterations, wrap write-lat's one-octet counter).
    let (client, _) = perf_pair("write-lat", &["-a", "-n", "3"]);
    let sizes: Vec<f64> = result_rows(&client).iter().map(|r| r[0]).collect();
    let want: Vec<f64> = (1..=23).map(|i| f64::from(1u32 << i)).collect();
    assert_eq!(sizes, want, "{client}");
    let (client, _) = perf_pair("read-lat", &["-a", "-n", "3"]);
    assert_eq!(result_rows(&client).len(), 23, "{client}");
}

/// perftest's -e: each tool sleeps on completion events (armed CQs on a completion channel)
/// instead of polling, at both ends, and still moves and reports everything.
#[test]
fn tools_with_completion_events() {
    for tool in ["write-bw", "read-bw", "send-bw", "send-lat", "read-lat"] {
        let (client, server) = perf_pair(tool, &["-e", "-n", "200", "-s", "4096"]);
        assert!(client.contains("Using Events    : ON"), "{tool}: {client}");
        assert!(server.contains("Using Events    : ON"), "{tool}: {server}");
        let rows = result_rows(&client);
        assert_eq!(rows.len(), 1, "{tool}: {client}");
        assert_eq!(
            (rows[0][0], rows[0][1]),
            (4096.0, 200.0),
            "{tool}: {client}"
        );
    }
    // -e needs completions to sleep on: it cannot go with --manual-progress.
    let out = bin()
        .args(["write-bw", "-e", "--manual-progress", "127.0.0.1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// write-lat with the server writing first, unlocked by RFC 6581 peer-to-peer mode: as MPA
/// responder the server may not send before the initiator's first FPDU (RFC 5044 §7.1.2);
/// in P2P mode the client sends no opening Write of its own (as perftest's ib_write_lat
/// client does not), so the RTR (RFC 6581 §3, each type) is what unlocks the server.
#[test]
fn write_lat_server_writes_first_after_p2p_rtr() {
    for (rtr, name) in [
        ("write", "zero-length RDMA Write"),
        ("read", "zero-length RDMA Read"),
        ("send", "zero-length Send"),
    ] {
        let (client, server) = perf_pair(
            "write-lat",
            &["-n", "20", "-s", "4096", "--p2p", "--rtr", rtr],
        );
        for text in [&client, &server] {
            assert!(text.contains(&format!("P2P on RTR {name}")), "{text}");
            let rows = result_rows(text);
            assert_eq!(rows.len(), 1, "{text}");
            assert_eq!((rows[0][0], rows[0][1]), (4096.0, 20.0), "{text}");
        }
    }
}

/// MPA options reach both connections: CRC and markers (RFC 5044 §7.1), revision 1, and
/// peer-to-peer mode with a Read RTR (RFC 6581 §7); `--report_gbits` switches the unit;
/// manual progress works; perftest's own options are accepted.
#[test]
fn mpa_options_units_and_perftest_flags() {
    let (client, _) = perf_pair(
        "write-bw",
        &[
            "-s",
            "65536",
            "-n",
            "20",
            "--report_gbits",
            "--crc",
            "--markers",
        ],
    );
    assert!(client.contains("CRC on markers tx on rx on"), "{client}");
    assert!(client.contains("BW average[Gb/sec]"), "{client}");

    let (client, _) = perf_pair("send-lat", &["-n", "10", "--p2p", "--rtr", "read"]);
    assert!(
        client.contains("P2P on RTR zero-length RDMA Read"),
        "{client}"
    );

    let (client, _) = perf_pair("send-lat", &["-n", "10", "--mpa-rev", "1"]);
    assert!(
        client.contains("MPA             : rev 1 CRC off"),
        "{client}"
    );

    let (client, _) = perf_pair(
        "write-lat",
        &[
            "-n",
            "30",
            "--manual-progress",
            "-R",
            "-F",
            "-d",
            "siw0",
            "-x",
            "0",
            "-i",
            "1",
        ],
    );
    assert_eq!(result_rows(&client).len(), 1, "{client}");

    // Only RC exists over iWARP.
    let out = bin()
        .args(["write-bw", "127.0.0.1", "-c", "UD"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("RC only"));
}

/// A server that is not perftest -R (here: a listener that never speaks) makes the
/// client fail with an error, not hang: the control exchange times out or the stream
/// closes.
#[test]
fn client_without_server_fails() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    drop(l);
    let out = bin()
        .args(["send-lat", "127.0.0.1", "-p", &port.to_string(), "-n", "5"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).starts_with("softrnic: "),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The tools over DDP over softrnic's SCTP (RFC 5043, UDP encapsulation): the same
/// perftest protocol, both connections over SCTP associations to the server's SCTP port
/// (an ephemeral one from `-p 0`) and fixed UDP port; the header names the LLP.
#[test]
fn tools_over_sctp() {
    for (i, tool) in ["write-bw", "read-bw", "send-bw", "write-lat"]
        .iter()
        .enumerate()
    {
        let udp = (29_911 + i).to_string();
        let (client, server) = perf_pair(
            tool,
            &[
                "--transport",
                "sctp+udp",
                "--udp-port",
                &udp,
                "-s",
                "8192",
                "-n",
                "100",
            ],
        );
        assert!(
            client.contains(" LLP             : DDP over SCTP (RFC 5043)"),
            "{tool}: {client}"
        );
        assert_eq!(result_rows(&client).len(), 1, "{tool}: {client}");
        assert!(!server.is_empty());
    }
}

/// MPA-only options are refused over SCTP with a message naming them.
#[test]
fn mpa_options_are_refused_over_sctp() {
    let out = bin()
        .args(["write-bw", "127.0.0.1", "--transport", "sctp+udp", "--crc"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--crc") && err.contains("sctp+udp"), "{err}");
}

/// `--transport tap` says what it needs: the device and the stack's own IPv4 address.
#[test]
fn tap_transport_needs_a_device_and_an_address() {
    for (args, want) in [
        (&["--transport", "tap"][..], "--device"),
        (&["--transport", "tap", "--device", "tap9"][..], "--bind"),
        (&["--device", "tap9"][..], "--transport tap"),
    ] {
        let out = bin()
            .args(["write-bw", "10.0.0.1"])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

/// A peer must not take the server down: a malformed MPA Request (revision 3) on the
/// control connection is answered with a Reject and the server serves the next client.
#[test]
fn perf_server_survives_a_malformed_request() {
    use std::io::{Read, Write};
    let server = Server::perf("write-bw", &["-s", "4096", "-n", "20"]);
    let port = server.port;
    let mut t = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    t.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let mut req = b"MPA ID Req Frame".to_vec();
    req.extend_from_slice(&[0x00, 3, 0, 0]);
    t.write_all(&req).unwrap();
    let mut reply = [0u8; 20];
    t.read_exact(&mut reply).unwrap();
    assert_eq!(&reply[..16], b"MPA ID Rep Frame");
    assert_ne!(reply[16] & 0x20, 0, "Reject bit: {reply:?}");
    drop(t);
    let out = bin()
        .args(["write-bw", "127.0.0.1", "-p", &port.to_string()])
        .args(["-s", "4096", "-n", "20"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let exit = server.wait();
    assert!(exit.status.success());
    assert_eq!(result_rows(&exit.stdout).len(), 1);
}

/// The write-bw server waits for a silent client's control message without spinning: with
/// the control connection up and nothing sent, it uses little CPU over two seconds (it used
/// ~70 % of a core).
#[test]
fn server_does_not_spin_while_the_client_is_silent() {
    let server = Server::perf("write-bw", &[]);
    let (port, pid) = (server.port, server.id());
    let rnic = stack::Rnic::open(stack::RnicConfig::default()).unwrap();
    let pd = rnic.alloc_pd();
    let cq = stack::Cq::new(16);
    let qp = rnic
        .create_qp(stack::QpAttr::new(pd, cq.clone(), cq.clone()))
        .unwrap();
    let cfg = stack::mpa::Config {
        ird: 0,
        ord: 0,
        ..stack::mpa::Config::default()
    };
    rnic.connect_blocking(
        &qp,
        ([127, 0, 0, 1], port).into(),
        cfg,
        std::time::Duration::from_secs(10),
    )
    .unwrap();
    let ticks = || -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let rest = stat.rsplit_once(')').unwrap().1;
        rest.split_whitespace()
            .skip(11)
            .take(2)
            .map(|x| x.parse::<u64>().unwrap())
            .sum()
    };
    let before = ticks();
    std::thread::sleep(std::time::Duration::from_secs(2));
    let used = ticks() - before;
    server.kill();
    // 2 s at 100 ticks/s: 200 ticks for a busy core; allow 10 %.
    assert!(
        used < 20,
        "the server used {used} ticks of CPU in 2 s waiting"
    );
}

/// A peer cannot make the server allocate what it announces: a cycle buffer of 0xFFFFFFFF
/// octets in perftest's control exchange (it made the server try to register 8 GiB and
/// abort) is refused with a message, and the server serves the next client.
#[test]
fn server_refuses_a_huge_cycle_buffer() {
    let server = Server::perf("write-bw", &["-s", "4096", "-n", "20"]);
    let port = server.port;
    let rnic = stack::Rnic::open(stack::RnicConfig::default()).unwrap();
    let pd = rnic.alloc_pd();
    let cq = stack::Cq::new(16);
    let qp = rnic
        .create_qp(stack::QpAttr::new(pd, cq.clone(), cq.clone()))
        .unwrap();
    let cfg = stack::mpa::Config {
        ird: 0,
        ord: 0,
        ..stack::mpa::Config::default()
    };
    let t = std::time::Duration::from_secs(10);
    rnic.connect_blocking(&qp, ([127, 0, 0, 1], port).into(), cfg, t)
        .unwrap();
    let access = stack::Access::LOCAL_WRITE;
    let buf = rnic
        .mem()
        .register_new(pd, 64, stack::MrOptions::new(access))
        .unwrap();
    let recv = rnic
        .mem()
        .register_new(pd, 64, stack::MrOptions::new(access))
        .unwrap();
    let exchange = |msg: &[u8]| {
        buf.buf().write_at(0, msg).unwrap();
        qp.post_recv(stack::RecvWr::new(1, vec![recv.sge(0, 64)]))
            .unwrap();
        qp.post_send(stack::SendWr::send(2, vec![buf.sge(0, msg.len() as u32)]))
            .unwrap();
    };
    let mut version = [0u8; 16];
    version[..4].copy_from_slice(b"6.06");
    exchange(&version);
    std::thread::sleep(std::time::Duration::from_millis(200));
    exchange(&0xFFFF_FFFFu32.to_be_bytes());
    // The refusal is said on stderr, and the server goes on waiting for a client.
    let said = server
        .stderr_line(|l| l.contains("failed"), std::time::Duration::from_secs(20))
        .unwrap_or_default();
    assert!(said.contains("cycle buffer of 4294967295 bytes"), "{said}");
    drop(qp);
    drop(rnic);
    let out = bin()
        .args(["write-bw", "127.0.0.1", "-p", &port.to_string()])
        .args(["-s", "4096", "-n", "20"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(server.wait().status.success());
}

/// Zero and nonsense values are refused with exit 2 and a message naming the option and
/// its range (`-n 0` used to run one iteration).
#[test]
fn zero_and_nonsense_values_are_refused() {
    for (args, needle) in [
        (&["-n", "0"][..], "-n 0: the number of iterations must be 1"),
        (&["-s", "0"][..], "-s 0: the message size must be 1"),
        (&["-s", "4294967296"][..], "must be 1 .. 4294967295"),
        (
            &["-t", "0"][..],
            "-t 0: the send queue depth must be 1 .. 16384",
        ),
        (
            &["-r", "0"][..],
            "-r 0: the receive queue depth must be 1 .. 16384",
        ),
        (
            &["-Q", "0"][..],
            "-Q 0: the CQ moderation must be 1 .. 16384",
        ),
        (&["-o", "0"][..], "-o 0: the outstanding RDMA Reads"),
        (
            &["--ird", "16384"][..],
            "--ird 16384: IRD and ORD must be 0 .. 16383",
        ),
        (&["--emss", "64"][..], "64 is not in 128..=65535"),
        (&["--busy-poll-us", "2000000"][..], "is not in 0..=1000000"),
    ] {
        let out = bin()
            .args(["write-bw", "127.0.0.1", "-p", "1"])
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

/// perftest's -D: every tool runs for the given seconds instead of iterations, both ends on
/// their own clocks; bandwidth rows count the messages of the measured window (no peak:
/// 0.00), latency rows give the average latency and transactions per second, whose
/// product is a fixed fraction of a second (one round trip is two latencies).
#[test]
fn duration_runs_for_seconds_not_iterations() {
    for tool in ["write-bw", "read-bw", "send-bw"] {
        let t0 = std::time::Instant::now();
        let (client, server) = perf_pair(tool, &["-D", "2", "-s", "4096"]);
        let took = t0.elapsed().as_secs_f64();
        assert!((2.0..15.0).contains(&took), "{tool}: {took} s");
        assert!(
            client.contains(" Duration        : 2 s (margin 0 s)"),
            "{client}"
        );
        let rows = result_rows(&client);
        assert_eq!(rows.len(), 1, "{tool}: {client}");
        let r = &rows[0];
        assert_eq!(r[0], 4096.0, "{client}");
        assert!(r[1] > 10.0, "{tool}: few messages: {client}");
        assert_eq!(r[2], 0.0, "{tool}: -D reports no peak: {client}");
        // Average = messages × size over the 2 s window.
        let want = r[1] * 4096.0 / 2.0 / 1_048_576.0;
        assert!(
            (r[3] - want).abs() <= 0.01 + want * 1e-3,
            "{tool}: {client}"
        );
        let srows = result_rows(&server);
        assert_eq!(srows.len(), 1, "{tool}: {server}");
        if tool != "send-bw" {
            assert_eq!(srows, rows, "the server prints the client's report");
        }
    }
    for (tool, factor) in [("write-lat", 2.0), ("send-lat", 2.0), ("read-lat", 1.0)] {
        let (client, server) = perf_pair(tool, &["-D", "3", "-f", "1", "-s", "64"]);
        assert!(
            client.contains(" #bytes        #iterations       t_avg[usec]    tps average"),
            "{client}"
        );
        let rows: Vec<Vec<f64>> = client
            .lines()
            .filter_map(|l| {
                let v: Vec<f64> = l
                    .split_whitespace()
                    .map(|w| w.parse().ok())
                    .collect::<Option<_>>()?;
                (v.len() == 4).then_some(v)
            })
            .collect();
        assert_eq!(rows.len(), 1, "{tool}: {client}");
        let r = &rows[0];
        assert_eq!(r[0], 64.0);
        assert!(r[1] > 10.0, "{tool}: {client}");
        // Over the 1 s window: t_avg = 1e6 / factor / n and tps = n.
        assert!((r[3] - r[1]).abs() < 0.01, "{tool}: {client}");
        let product = r[2] * r[3] * factor;
        assert!(
            (product - 1e6).abs() < 1e6 * 0.01,
            "{tool}: {product}: {client}"
        );
        assert!(!server.is_empty());
    }
}

/// perftest's --run_infinitely: the client prints a result line every -D seconds, each
/// measured over its period, until it is interrupted.
#[test]
fn run_infinitely_prints_a_line_per_period() {
    use std::io::{BufRead, BufReader};
    for tool in ["write-bw", "send-bw"] {
        let args = ["--run_infinitely", "-D", "1", "-s", "4096"];
        let server = Server::perf(tool, &args);
        let mut client = bin()
            .arg(tool)
            .arg("127.0.0.1")
            .args(["-p", &server.port.to_string()])
            .args(args)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let t0 = std::time::Instant::now();
        let mut rows = Vec::new();
        let lines = BufReader::new(client.stdout.take().unwrap()).lines();
        for line in lines.map_while(Result::ok) {
            rows.extend(result_rows(&line));
            if rows.len() == 3 {
                break;
            }
        }
        let took = t0.elapsed().as_secs_f64();
        assert!(
            client.try_wait().unwrap().is_none(),
            "{tool}: the client ended"
        );
        client.kill().unwrap();
        let _ = client.wait();
        assert_eq!(rows.len(), 3, "{tool}: {rows:?}");
        assert!((2.5..20.0).contains(&took), "{tool}: 3 lines in {took} s");
        for r in &rows {
            assert_eq!((r[0], r[2]), (4096.0, 0.0), "{tool}: {rows:?}");
            assert!(r[1] > 0.0 && r[3] > 0.0, "{tool}: {rows:?}");
        }
        // The client's end ends the server's wait.
        server.wait();
    }
}

/// -D and --run_infinitely are checked as perftest checks them.
#[test]
fn duration_options_are_checked() {
    for (tool, args, needle) in [
        ("write-bw", &["-D", "0"][..], "-D 0: the duration must be"),
        (
            "write-bw",
            &["-D", "4", "-f", "2"][..],
            "must exceed twice the margin",
        ),
        ("write-bw", &["-D", "2", "-a"][..], "does not run all sizes"),
        ("send-bw", &["-D", "2", "-e"][..], "does not work with -e"),
        (
            "write-bw",
            &["--run_infinitely", "-e"][..],
            "does not work with -e",
        ),
        (
            "write-lat",
            &["--run_infinitely"][..],
            "only the bandwidth tests",
        ),
        ("write-bw", &["-f", "1"][..], "--duration"),
    ] {
        let out = bin()
            .args([tool, "127.0.0.1", "-p", "1"])
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

/// perftest's --output: both ends print only the number, one line per result (C's `%lf`).
#[test]
fn output_prints_only_the_number() {
    for (tool, what, args) in [
        ("write-bw", "bandwidth", &["-s", "4096", "-n", "200"][..]),
        ("send-bw", "message_rate", &["-s", "4096", "-n", "200"][..]),
        ("read-bw", "bandwidth", &["-s", "4096", "-n", "200"][..]),
        ("send-lat", "latency", &["-s", "64", "-n", "100"][..]),
        ("write-lat", "latency", &["-s", "64", "-D", "2"][..]),
        ("write-bw", "bandwidth", &["-s", "4096", "-D", "2"][..]),
    ] {
        let output = format!("--output={what}");
        let mut all = args.to_vec();
        all.push(&output);
        let server = Server::perf(tool, &all);
        let out = bin()
            .args([tool, "127.0.0.1", "-p", &server.port.to_string()])
            .args(&all)
            .output()
            .unwrap();
        let exit = server.wait();
        assert!(out.status.success(), "{tool}: {out:?}");
        assert!(exit.status.success(), "{tool}: {}", exit.text());
        let client = String::from_utf8_lossy(&out.stdout).into_owned();
        if tool.starts_with("write-bw") || tool.starts_with("read-bw") {
            // The server's number is the client's result, carried in the report exchange.
            assert_eq!(client, exit.stdout, "{tool}");
        }
        for text in [client, exit.stdout] {
            let lines: Vec<&str> = text.lines().collect();
            assert_eq!(lines.len(), 1, "{tool} {what}: {text}");
            let (int, frac) = lines[0].split_once('.').expect("a decimal point");
            assert_eq!(frac.len(), 6, "{tool}: {text}");
            let v: f64 = lines[0].parse().unwrap();
            assert!(
                v > 0.0 && int.chars().all(|c| c.is_ascii_digit()),
                "{tool}: {text}"
            );
        }
    }
    // Each test prints what suits it (as perftest).
    for (tool, what) in [
        ("write-bw", "latency"),
        ("write-lat", "bandwidth"),
        ("send-lat", "message_rate"),
    ] {
        let out = bin()
            .args([tool, "127.0.0.1", "-p", "1", &format!("--output={what}")])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{tool} {what}: {err}");
        assert!(err.contains(&format!("--output={what}: a ")), "{err}");
    }
}

/// The "N, value" lines of -H / -U listings, one Vec per listing.
fn listings(text: &str) -> Vec<(String, Vec<f64>)> {
    let mut all: Vec<(String, Vec<f64>)> = Vec::new();
    for l in text.lines() {
        if let Some(unit) = l.strip_prefix("#, ") {
            all.push((unit.to_owned(), Vec::new()));
        } else if let Some((n, v)) = l.split_once(", ")
            && let (Ok(n), Ok(v)) = (n.parse::<usize>(), v.parse::<f64>())
            && let Some(last) = all.last_mut()
        {
            assert_eq!(n, last.1.len() + 1, "{text}");
            last.1.push(v);
        }
    }
    all
}

/// perftest's -H (every sample, sorted), -U (as measured) and -C (in CPU cycles): the
/// listing holds one sample per iteration after the first, and the summary's minimum,
/// maximum and median are the listing's.
#[test]
fn latency_sample_listings_and_cycles() {
    for tool in ["send-lat", "read-lat", "write-lat"] {
        let (client, _) = perf_pair(tool, &["-n", "40", "-s", "64", "-H", "-U"]);
        let lists = listings(&client);
        assert_eq!(lists.len(), 2, "{tool}: {client}");
        let (unsorted, sorted) = (&lists[0], &lists[1]);
        assert_eq!((unsorted.0.as_str(), sorted.0.as_str()), ("usec", "usec"));
        assert_eq!(sorted.1.len(), 39, "{tool}: {client}");
        assert!(sorted.1.windows(2).all(|w| w[0] <= w[1]), "{client}");
        let mut resorted = unsorted.1.clone();
        resorted.sort_by(f64::total_cmp);
        assert_eq!(resorted, sorted.1, "-U lists the same samples");
        let rows = result_rows(&client);
        assert_eq!(rows.len(), 1, "{client}");
        let close = |a: f64, b: f64| (a - b).abs() <= 0.006 + b * 1e-5;
        assert!(close(rows[0][2], sorted.1[0]), "min: {client}");
        assert!(close(rows[0][3], sorted.1[38]), "max: {client}");
        assert!(close(rows[0][4], sorted.1[19]), "median: {client}");
    }
    let (client, _) = perf_pair("send-lat", &["-n", "30", "-C", "-H"]);
    assert!(client.contains("t_avg[cycles]"), "{client}");
    let lists = listings(&client);
    assert_eq!(lists.len(), 1, "{client}");
    assert_eq!(lists[0].0, "cycles");
    let rows = result_rows(&client);
    // Cycles of a CPU of at least 100 MHz: a round trip over loopback is over 100 cycles.
    assert!(rows[0][2] > 100.0, "{client}");
    // The listing prints as perftest does (%g, six significant digits), the summary with two
    // decimals: a slow round trip of a million cycles differs by more than one in the listing.
    let relative = (rows[0][2] - lists[0].1[0]).abs() / rows[0][2];
    assert!(relative < 1e-5, "{client}");

    for (tool, args, needle) in [
        (
            "write-bw",
            &["-H"][..],
            "-H: available only in the latency tests",
        ),
        (
            "send-bw",
            &["-C"][..],
            "-C: available only in the latency tests",
        ),
        ("send-lat", &["-U", "-D", "2"][..], "-U: a -D run keeps no"),
    ] {
        let out = bin()
            .args([tool, "127.0.0.1", "-p", "1"])
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

/// perftest's -l: the senders post lists of N work requests per call, with one signaled
/// completion per list unless -Q divides it; every message still arrives (send-bw: within
/// the receiver's credit window).
#[test]
fn post_lists() {
    for (tool, args, modn) in [
        ("write-bw", &["-l", "8", "-n", "400", "-s", "4096"][..], "8"),
        (
            "read-bw",
            &["-l", "4", "-n", "200", "-s", "4096", "-Q", "2"][..],
            "2",
        ),
        (
            "send-bw",
            &["-l", "4", "-n", "400", "-s", "1024", "-r", "16"][..],
            "4",
        ),
        ("write-bw", &["-l", "16", "-D", "2", "-s", "4096"][..], "16"),
    ] {
        let (client, server) = perf_pair(tool, args);
        assert!(
            client.contains(&format!(
                "{} Post List BW Test",
                if tool == "send-bw" {
                    "Send"
                } else if tool == "read-bw" {
                    "RDMA_Read"
                } else {
                    "RDMA_Write"
                }
            )),
            "{client}"
        );
        assert!(
            client.contains(&format!(" CQ Moderation   : {modn}\n")),
            "{client}"
        );
        let rows = result_rows(&client);
        assert_eq!(rows.len(), 1, "{tool}: {client}");
        if !args.contains(&"-D") {
            let n: f64 = args[args.iter().position(|a| *a == "-n").unwrap() + 1]
                .parse()
                .unwrap();
            assert_eq!(rows[0][1], n, "{tool}: {client}");
            assert_eq!(result_rows(&server)[0][1], n, "{tool}: {server}");
        } else {
            assert!(rows[0][1] >= 16.0 && rows[0][1] % 16.0 == 0.0, "{client}");
        }
    }
    for (tool, args, needle) in [
        (
            "write-bw",
            &["-l", "3", "-n", "10"][..],
            "must be a multiple of the post list",
        ),
        (
            "write-bw",
            &["-l", "4", "-Q", "3", "-n", "8"][..],
            "multiple of the CQ moderation",
        ),
        (
            "write-bw",
            &["-l", "32", "-t", "16", "-n", "64"][..],
            "must fit the TX depth",
        ),
        ("write-lat", &["-l", "2"][..], "bandwidth tests only"),
        (
            "write-bw",
            &["-l", "0"][..],
            "-l 0: the post list must be 1",
        ),
    ] {
        let out = bin()
            .args([tool, "127.0.0.1", "-p", "1"])
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

/// perftest's -b: both sides send and each prints the sum of both results, exchanged after
/// each size, so both print the same line; send-bw's sides each wait for all of the other's
/// messages (and a -D run prints each side's own result).
#[test]
fn bidirectional_runs() {
    for (tool, verb, args) in [
        ("write-bw", "RDMA_Write", &["-n", "300", "-s", "4096"][..]),
        ("read-bw", "RDMA_Read", &["-n", "300", "-s", "4096"][..]),
        (
            "send-bw",
            "Send",
            &["-n", "300", "-s", "4096", "-r", "12"][..],
        ),
        (
            "send-bw",
            "Send",
            &["-n", "400", "-s", "1024", "-l", "4"][..],
        ),
    ] {
        let mut all = args.to_vec();
        all.push("-b");
        let (client, server) = perf_pair(tool, &all);
        for text in [&client, &server] {
            assert!(text.contains(&format!("{verb} Bidirectional")), "{text}");
            assert!(
                text.contains(" TX depth        : "),
                "both sides send: {text}"
            );
        }
        let rows = result_rows(&client);
        assert_eq!(rows.len(), 1, "{tool}: {client}");
        let size: f64 = args[args.iter().position(|a| *a == "-s").unwrap() + 1]
            .parse()
            .unwrap();
        assert_eq!(rows[0][0], size, "{client}");
        assert!(rows[0][3] > 0.0 && rows[0][2] >= rows[0][3], "{client}");
        assert_eq!(
            result_rows(&server),
            rows,
            "{tool}: the same sum on both sides"
        );
    }
    // All sizes: one summed line per size on both sides.
    let (client, server) = perf_pair("send-bw", &["-b", "-a", "-n", "4"]);
    let sizes = |t: &str| result_rows(t).iter().map(|r| r[0]).collect::<Vec<_>>();
    let want: Vec<f64> = (1..=23).map(|i| f64::from(1u32 << i)).collect();
    assert_eq!(sizes(&client), want, "{client}");
    assert_eq!(sizes(&server), want, "{server}");
    // -D: each side's own messages of its window.
    let (client, server) = perf_pair("send-bw", &["-b", "-D", "2", "-s", "4096"]);
    for text in [&client, &server] {
        let rows = result_rows(text);
        assert_eq!(rows.len(), 1, "{text}");
        assert!(rows[0][1] > 10.0 && rows[0][2] == 0.0, "{text}");
    }
    for (tool, args, needle) in [
        ("write-lat", &["-b"][..], "bandwidth tests only"),
        (
            "send-bw",
            &["-b", "--run_infinitely"][..],
            "not supported in the bidirectional send-bw test",
        ),
    ] {
        let out = bin()
            .args([tool, "127.0.0.1", "-p", "1"])
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

/// perftest options the tools do not implement are refused by name with exit 2, never
/// ignored; -N drops the peak; -V prints the announced version.
#[test]
fn perftest_options_not_implemented_are_refused() {
    for (args, needle) in [
        (
            &["-X", "2"][..],
            "perftest's -X/--vector is not implemented by softrnic",
        ),
        (
            &["--mr_per_qp"][..],
            "perftest's --mr_per_qp is not implemented",
        ),
        (
            &["--cpu_util"][..],
            "perftest's --cpu_util is not implemented",
        ),
        (&["-FS", "1"][..], "perftest's -S/--sl is not implemented"),
        (
            &["--use-srq"][..],
            "perftest's --use-srq is not implemented",
        ),
    ] {
        let out = bin()
            .args(["send-bw", "127.0.0.1"])
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.starts_with("softrnic: send-bw: ") && err.contains(needle),
            "{args:?}: {err}"
        );
    }
    let (client, server) = perf_pair("write-bw", &["-N", "-n", "100", "-s", "4096"]);
    let rows = result_rows(&client);
    assert_eq!(rows[0][2], 0.0, "-N: no peak: {client}");
    assert!(rows[0][3] > 0.0, "{client}");
    assert_eq!(result_rows(&server), rows);
    let out = bin().args(["read-lat", "-V"]).output().unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "Version: 6.06\n");
}

/// The QPNs of a tool's "local address" or "remote address" lines, in order.
fn qpns(text: &str, side: &str) -> Vec<String> {
    let head = format!(" {side} address: ");
    text.lines()
        .filter_map(|l| l.strip_prefix(&head))
        .filter_map(|l| l.split_whitespace().nth(3).map(str::to_owned))
        .collect()
}

/// perftest's -q N: N test connections (each its own MPA connection and QP, after the
/// control connection), each QP's pingpong_dest exchanged in turn, every QP running the
/// iterations of its own and the report counting them all (perftest's iterations × QPs).
#[test]
fn several_qps_per_bandwidth_test() {
    for tool in ["write-bw", "read-bw", "send-bw"] {
        for n in [1usize, 2, 4, 8] {
            let q = n.to_string();
            let (client, server) = perf_pair(tool, &["-q", &q, "-n", "40", "-s", "4096"]);
            let want = format!(" Number of qps   : {n}\t\tTransport type : IW");
            assert!(client.contains(&want), "{tool} -q {n}: {client}");
            assert!(server.contains(&want), "{tool} -q {n}: {server}");
            // N QPs at each end, each QP paired with one of the peer's: the client's local
            // QPNs are the server's remote ones and the other way round, one per connection.
            let (cl, cr) = (qpns(&client, "local"), qpns(&client, "remote"));
            let (sl, sr) = (qpns(&server, "local"), qpns(&server, "remote"));
            assert_eq!(cl.len(), n, "{tool} -q {n}: {client}");
            assert_eq!((cl.clone(), cr.clone()), (sr, sl), "{tool} -q {n}");
            let mut distinct = cr.clone();
            distinct.sort();
            distinct.dedup();
            assert_eq!(distinct.len(), n, "{tool} -q {n}: the server's QPs: {cr:?}");
            let rows = result_rows(&client);
            assert_eq!(rows.len(), 1, "{tool} -q {n}: {client}");
            assert_eq!(
                (rows[0][0], rows[0][1]),
                (4096.0, 40.0 * n as f64),
                "{tool} -q {n}: {client}"
            );
            assert!(rows[0][3] > 0.0, "{tool} -q {n}: {client}");
            let srows = result_rows(&server);
            assert_eq!(srows.len(), 1, "{tool} -q {n}: {server}");
            assert_eq!(
                (srows[0][0], srows[0][1]),
                (4096.0, 40.0 * n as f64),
                "{tool} -q {n}: {server}"
            );
        }
    }
    // With the options that combine with it: all sizes, a post list, a duration.
    let (client, server) = perf_pair("write-bw", &["-q", "3", "-a", "-n", "4"]);
    let sizes: Vec<(f64, f64)> = result_rows(&client).iter().map(|r| (r[0], r[1])).collect();
    let want: Vec<(f64, f64)> = (1..=23).map(|i| (f64::from(1u32 << i), 12.0)).collect();
    assert_eq!(sizes, want, "{client}");
    assert_eq!(result_rows(&server).len(), 1, "{server}");
    let (client, _) = perf_pair("send-bw", &["-q", "2", "-l", "5", "-n", "50", "-s", "64"]);
    assert_eq!(result_rows(&client)[0][1], 100.0, "{client}");
    // Completion events (a channel per QP) and manual progress (every QP's thread drives
    // the RNIC).
    for (tool, opt) in [("send-bw", "-e"), ("read-bw", "--manual-progress")] {
        let (client, server) = perf_pair(tool, &["-q", "4", opt, "-n", "100", "-s", "8192"]);
        assert_eq!(result_rows(&client)[0][1], 400.0, "{tool} {opt}: {client}");
        assert_eq!(result_rows(&server)[0][1], 400.0, "{tool} {opt}: {server}");
    }
    let (client, server) = perf_pair("read-bw", &["-q", "2", "-D", "2", "-s", "4096"]);
    let rows = result_rows(&client);
    assert!(rows.len() == 1 && rows[0][1] > 0.0, "{client}");
    assert_eq!(result_rows(&server), rows, "{server}");
}

/// The connections per progress thread of a `--progress-stats` line, when it names them.
fn thread_loads(text: &str) -> Option<Vec<usize>> {
    let line = text
        .lines()
        .find(|l| l.starts_with(" Progress        : "))?;
    let list = line.split_once("connections per progress thread [")?.1;
    let list = list.strip_suffix(']')?;
    list.split(", ").map(|n| n.parse().ok()).collect()
}

/// --progress-threads with -q: the test connections are spread over the threads at both
/// ends, and --progress-stats says how (the stack's `Rnic::progress_thread_loads`, read as
/// the measurement starts); with one thread the line names no threads.
#[test]
fn progress_threads_spread_the_test_connections() {
    let args = [
        "-q",
        "4",
        "--progress-threads",
        "2",
        "--progress-stats",
        "-n",
        "40",
        "-s",
        "4096",
    ];
    for tool in ["write-bw", "send-bw"] {
        let (client, server) = perf_pair(tool, &args);
        assert_eq!(result_rows(&client)[0][1], 160.0, "{tool}: {client}");
        for (side, text) in [("client", &client), ("server", &server)] {
            let loads = thread_loads(text).unwrap_or_else(|| panic!("{tool} {side}: {text}"));
            // The four test connections (and whatever else the tool keeps connected), as
            // even as least-loaded placement makes them.
            let total: usize = loads.iter().sum();
            assert!(
                loads.len() == 2 && total >= 4 && loads[0].abs_diff(loads[1]) <= 1,
                "{tool} {side}: {loads:?}\n{text}"
            );
        }
    }
    let (client, _) = perf_pair("write-bw", &["--progress-stats", "-n", "10", "-s", "64"]);
    assert!(client.contains(" Progress        : "), "{client}");
    assert_eq!(thread_loads(&client), None, "{client}");
}

/// The first `n` result rows `child` prints on stdout, and the seconds they took; the
/// child is killed after.
fn infinite_rows(mut child: std::process::Child, n: usize) -> (Vec<Vec<f64>>, f64) {
    use std::io::{BufRead, BufReader};
    let t0 = std::time::Instant::now();
    let mut rows = Vec::new();
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    for line in lines.map_while(Result::ok) {
        rows.extend(result_rows(&line));
        if rows.len() == n {
            break;
        }
    }
    let took = t0.elapsed().as_secs_f64();
    assert!(child.try_wait().unwrap().is_none(), "the run ended");
    child.kill().unwrap();
    let _ = child.wait();
    (rows, took)
}

/// perftest 4.5's combinations of -q, -b and --run_infinitely: -q N with -b (write-bw,
/// read-bw, send-bw) sends both ways over every QP and both sides print the same sum;
/// -q N with --run_infinitely prints one line per period for all QPs together; -b with
/// --run_infinitely runs both sides at once, each printing lines (its own rate doubled,
/// as perftest's run_inf_bi_factor), also over several QPs.
#[test]
fn several_qps_with_bidirectional_and_run_infinitely() {
    // send-bw -q 3 -b: every QP sends, receives and returns credits on both sides (as
    // perftest's run_iter_bi over several QPs); each side reports 3 x 40 of its own Sends
    // plus the peer's report.
    for tool in ["write-bw", "read-bw", "send-bw"] {
        let (client, server) = perf_pair(tool, &["-q", "3", "-b", "-n", "40", "-s", "4096"]);
        for text in [&client, &server] {
            assert!(text.contains(" Number of qps   : 3\t\t"), "{tool}: {text}");
            assert!(text.contains(" Bidirectional"), "{tool}: {text}");
        }
        let rows = result_rows(&client);
        assert_eq!(rows.len(), 1, "{tool}: {client}");
        assert_eq!(
            (rows[0][0], rows[0][1]),
            (4096.0, 120.0),
            "{tool}: {client}"
        );
        assert!(rows[0][3] > 0.0, "{tool}: {client}");
        assert_eq!(
            result_rows(&server),
            rows,
            "{tool}: the same sum on both sides"
        );
    }
    // send-bw -q 2 -b -D: each side its own Sends of the window over both QPs, as with one.
    let (client, server) = perf_pair("send-bw", &["-q", "2", "-b", "-D", "2", "-s", "4096"]);
    for text in [&client, &server] {
        assert!(text.contains(" Number of qps   : 2\t\t"), "{text}");
        let rows = result_rows(text);
        assert_eq!(rows.len(), 1, "{text}");
        assert!(rows[0][1] > 10.0 && rows[0][2] == 0.0, "{text}");
    }
    // -q with --run_infinitely (send-bw: the server's line too sums its QPs).
    for tool in ["write-bw", "send-bw"] {
        let args = ["-q", "3", "--run_infinitely", "-D", "1", "-s", "4096"];
        let server = Server::perf(tool, &args);
        let client = bin()
            .arg(tool)
            .arg("127.0.0.1")
            .args(["-p", &server.port.to_string()])
            .args(args)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let (rows, took) = infinite_rows(client, 3);
        assert_eq!(rows.len(), 3, "{tool}: {rows:?}");
        assert!((2.5..20.0).contains(&took), "{tool}: 3 lines in {took} s");
        for r in &rows {
            assert_eq!((r[0], r[2]), (4096.0, 0.0), "{tool}: {rows:?}");
            assert!(r[1] > 0.0 && r[3] > 0.0, "{tool}: {rows:?}");
        }
        let exit = server.kill();
        if tool == "send-bw" {
            let srows = result_rows(&exit.stdout);
            assert!(!srows.is_empty(), "{tool} server: {}", exit.text());
            assert!(srows.iter().all(|r| r[1] > 0.0), "{}", exit.text());
        }
    }
    // -b with --run_infinitely, one QP and two: both sides run and print.
    for (tool, q) in [("write-bw", "1"), ("read-bw", "2")] {
        let args = ["-b", "-q", q, "--run_infinitely", "-D", "1", "-s", "4096"];
        let server = Server::perf(tool, &args);
        let client = bin()
            .arg(tool)
            .arg("127.0.0.1")
            .args(["-p", &server.port.to_string()])
            .args(args)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let (rows, _) = infinite_rows(client, 2);
        assert_eq!(rows.len(), 2, "{tool} -q {q}: {rows:?}");
        assert!(
            rows.iter().all(|r| r[0] == 4096.0 && r[3] > 0.0),
            "{rows:?}"
        );
        let exit = server.kill();
        let srows = result_rows(&exit.stdout);
        assert!(
            !srows.is_empty(),
            "{tool} -q {q}: the server runs too: {}",
            exit.text()
        );
        assert!(srows.iter().all(|r| r[3] > 0.0), "{}", exit.text());
    }
}

/// -q as perftest takes it: bandwidth tests only (even -q 1), 1 .. 16384; and what
/// softrnic does not do with several QPs is refused, never ignored.
#[test]
fn several_qps_refused_where_not_available() {
    for (tool, args, needle) in [
        (
            "write-lat",
            &["-q", "1"][..],
            "multiple QPs only available on bw tests",
        ),
        (
            "send-lat",
            &["--qp=2"][..],
            "multiple QPs only available on bw tests",
        ),
        ("write-bw", &["-q", "0"][..], "-q 0: the number of QPs"),
        ("write-bw", &["-q", "16385"][..], "must be 1 .. 16384"),
    ] {
        let out = bin().args([tool, "127.0.0.1"]).args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{tool} {args:?}: {err}");
        assert!(err.contains(needle), "{tool} {args:?}: {err}");
    }
}

/// The target line atomic-bw prints on the side whose buffer the peer's atomics hit.
fn atomic_target(text: &str) -> Option<(u64, u64)> {
    let l = text
        .lines()
        .find_map(|l| l.strip_prefix(" Atomic target   : "))?;
    let (words, rest) = l.split_once(" words (one per cache line), sum ")?;
    Some((words.parse().ok()?, rest.trim().parse().ok()?))
}

/// atomic-bw (perftest's ib_atomic_bw): RFC 7306 §5.1 Fetch and Add and Compare and Swap
/// through perftest's read-bw exchanges. Every completion succeeded (the client exits 0
/// only then), the server prints the client's counters, and the server's buffer shows
/// what the atomics did: N Fetch and Adds of 1 spread over the cycle buffer's 64 cache
/// lines sum to N; Compare and Swap of 0 with 0 leaves the zeroed buffer 0.
#[test]
fn atomic_bw_fetch_and_add_and_compare_and_swap() {
    let (client, server) = perf_pair("atomic-bw", &["-n", "1000", "-t", "16", "-o", "8"]);
    assert!(client.contains("Atomic FETCH_AND_ADD BW Test"), "{client}");
    assert!(client.contains(BW_HEAD), "{client}");
    // Atomics are Read-like: the outstanding atomics are the IRD/ORD (RFC 6581, RFC 7306).
    assert!(client.contains("IRD / ORD       : 8 / 8"), "{client}");
    assert!(client.contains(" Outstand reads  : 8"), "{client}");
    // perftest prints no OUT, RKey or VAddr in an atomic test's address lines.
    assert!(
        client.contains(" local address: LID 0000 QPN ") && !client.contains("RKey"),
        "{client}"
    );
    let rows = result_rows(&client);
    assert_eq!(rows.len(), 1, "{client}");
    assert_eq!((rows[0][0], rows[0][1]), (8.0, 1000.0));
    assert!(rows[0][3] > 0.0 && rows[0][4] > 0.0, "{client}");
    assert_eq!(result_rows(&server), rows, "{server}");
    assert_eq!(atomic_target(&server), Some((64, 1000)), "{server}");
    assert_eq!(atomic_target(&client), None, "{client}");

    let (client, server) = perf_pair("atomic-bw", &["-A", "CMP_AND_SWAP", "-n", "300"]);
    assert!(client.contains("Atomic CMP_AND_SWAP BW Test"), "{client}");
    assert!(server.contains("Atomic CMP_AND_SWAP BW Test"), "{server}");
    let rows = result_rows(&client);
    assert_eq!((rows[0][0], rows[0][1]), (8.0, 300.0), "{client}");
    assert_eq!(result_rows(&server), rows, "{server}");
    assert_eq!(atomic_target(&server), Some((64, 0)), "{server}");

    // Several QPs, each with its own buffer: the server's sum covers them all.
    let (client, server) = perf_pair(
        "atomic-bw",
        &["-q", "2", "-n", "200", "--report_gbits", "-F"],
    );
    assert!(client.contains("BW average[Gb/sec]"), "{client}");
    assert_eq!(result_rows(&client)[0][1], 400.0, "{client}");
    assert_eq!(atomic_target(&server), Some((128, 400)), "{server}");

    // Bidirectional: each side's buffer takes the other's Fetch and Adds.
    let (client, server) = perf_pair("atomic-bw", &["-b", "-n", "100"]);
    assert_eq!(atomic_target(&client), Some((64, 100)), "{client}");
    assert_eq!(atomic_target(&server), Some((64, 100)), "{server}");
}

/// The atomic tests' message size is 8 (RFC 7306 atomics operate on 64-bit values):
/// another -s and -a are refused, as perftest; -A belongs to the atomic tests only.
#[test]
fn atomic_bw_options_are_checked() {
    for (tool, args, needle) in [
        ("atomic-bw", &["-s", "16"][..], "-s 16: the message size"),
        ("atomic-bw", &["-a"][..], "-a: the atomic tests"),
        ("read-bw", &["-A", "CMP_AND_SWAP"][..], "-A: the atomic"),
        ("atomic-bw", &["-A", "SWAP"][..], "invalid value 'SWAP'"),
    ] {
        let out = bin()
            .args([tool, "127.0.0.1", "-p", "1"])
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{tool} {args:?}: {err}");
        assert!(err.contains(needle), "{tool} {args:?}: {err}");
    }
    let out = bin().args(["atomic-bw", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(
        help.contains("ib_atomic_bw") && help.contains("CMP_AND_SWAP"),
        "{help}"
    );
}

/// The atomic-bw server's buffer grants remote atomic access only, as perftest registers
/// it: an RDMA Read of it is refused by the RNIC with a Remote Protection Error Terminate
/// (RFC 5040 §7.4.1, access rights violation), which the client reports; an RDMA Write is
/// refused too: the Writes complete locally when handed to TCP, and the Terminate then
/// breaks the connection (the client, still writing, fails on whatever comes next; its log
/// names the Terminate it received).
#[test]
fn atomic_bw_buffer_refuses_reads_and_writes() {
    let server = Server::perf("atomic-bw", &[]);
    let out = bin()
        .env("RUST_LOG", "warn")
        .args(["write-bw", "127.0.0.1", "-p", &server.port.to_string()])
        // Writing for 2 s: ten Writes could all be handed to TCP, and the closing exchange
        // done on the control connection, before the server's Terminate comes back.
        .args(["-s", "8", "-D", "2"])
        .output()
        .unwrap();
    let exit = server.wait();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("Terminate received") && err.contains("Access rights violation"),
        "{err}"
    );
    assert!(!exit.status.success(), "{}", exit.text());

    let server = Server::perf("atomic-bw", &[]);
    let out = bin()
        .args(["read-bw", "127.0.0.1", "-p", &server.port.to_string()])
        .args(["-s", "8", "-n", "10"])
        .output()
        .unwrap();
    let exit = server.wait();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("remote access error") && err.contains("Access rights violation"),
        "{err}"
    );
    assert!(!exit.status.success(), "{}", exit.text());
}

/// atomic-lat (perftest's ib_atomic_lat): read-lat's exchanges with one RFC 7306 atomic at a
/// time on the server's first word; the client prints the latency table, the server the
/// word: N Fetch and Adds of 1 make it N, Compare and Swap of 0 with 0 leaves it 0.
#[test]
fn atomic_lat_both_types() {
    let (client, server) = perf_pair("atomic-lat", &["-n", "300"]);
    assert!(
        client.contains("Atomic FETCH_AND_ADD Latency Test"),
        "{client}"
    );
    assert!(client.contains("t_typical[usec]"), "{client}");
    let rows = result_rows(&client);
    assert_eq!(rows.len(), 1, "{client}");
    let r = &rows[0];
    assert_eq!((r[0], r[1]), (8.0, 300.0), "{client}");
    assert!(r[2] > 0.0 && r[2] <= r[4] && r[4] <= r[3], "{client}");
    assert!(result_rows(&server).is_empty(), "{server}");
    assert_eq!(atomic_target(&server), Some((64, 300)), "{server}");

    let (client, server) = perf_pair("atomic-lat", &["-A", "CMP_AND_SWAP", "-n", "100"]);
    assert!(
        client.contains("Atomic CMP_AND_SWAP Latency Test"),
        "{client}"
    );
    assert_eq!(result_rows(&client)[0][1], 100.0, "{client}");
    assert_eq!(atomic_target(&server), Some((64, 0)), "{server}");

    let out = bin()
        .args(["atomic-lat", "127.0.0.1", "-p", "1", "-s", "2"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("-s 2: the message size"));
}
