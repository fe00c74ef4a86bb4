//! `softrnic sctp-perf` between two processes over loopback with RFC 6951 UDP encapsulation
//! (no privileges): every byte verified, both directions, exit statuses.

mod common;

use std::process::Command;

use common::{Server, bin, sctp_perf_client};

fn client(sctp_port: u16, udp: u16, extra: &[&str]) -> (i32, String) {
    let out = sctp_perf_client(sctp_port, udp)
        .args(extra)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// 4 MiB client → server on three ordered streams, every byte, order and completeness
/// checked by the server; both ends exit 0 and agree on the byte count.
#[test]
fn sctp_perf_udp_loopback_verify() {
    let srv = Server::sctp_perf(5801);
    let udp = srv.port;
    let (code, out) = client(
        5801,
        udp,
        &["-n", "4M", "--verify", "--streams", "3", "-i", "0.5"],
    );
    let exit = srv.wait();
    let sout = exit.stdout;
    assert_eq!(code, 0, "client:\n{out}\nserver:\n{sout}");
    assert!(exit.status.success(), "server:\n{sout}");
    assert!(out.contains("receiver (2996 messages, 0 errors)"), "{out}");
    assert!(sout.contains("verify: 0 errors"), "{sout}");
    assert!(sout.contains("result: OK") && out.contains("result: OK"));
    assert!(out.contains("Streams 3 (ordered)"), "{out}");
    assert!(
        out.contains("path (remote)"),
        "per-path statistics missing:\n{out}"
    );
}

/// --reverse --unordered: the server sends, the client verifies (every sequence number
/// exactly once on unordered streams).
#[test]
fn sctp_perf_udp_loopback_reverse_unordered_verify() {
    let srv = Server::sctp_perf(5802);
    let udp = srv.port;
    let (code, out) = client(
        5802,
        udp,
        &[
            "-n",
            "1M",
            "--verify",
            "--reverse",
            "--unordered",
            "--streams",
            "2",
            "-l",
            "999",
        ],
    );
    let exit = srv.wait();
    let sout = exit.stdout;
    assert_eq!(code, 0, "client:\n{out}\nserver:\n{sout}");
    assert!(exit.status.success(), "server:\n{sout}");
    assert!(out.contains("verify: 0 errors"), "{out}");
    assert!(sout.contains("[  2]") && sout.contains("sender"), "{sout}");
}

/// Usage errors exit 2; an unreachable server exits 1 with a message.
#[test]
fn sctp_perf_exit_statuses() {
    let out = bin()
        .args([
            "sctp-perf",
            "-c",
            "127.0.0.1",
            "--udp-encap",
            "--streams",
            "0",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = bin().args(["sctp-perf"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    // Nobody listens on this UDP port: INIT goes unanswered, the connect times out.
    let out = bin()
        .args([
            "sctp-perf",
            "-c",
            "127.0.0.1",
            "--udp-encap",
            "--udp-port",
            "9",
        ])
        .args([
            "--udp-local-port",
            "0",
            "--connect-timeout",
            "0.5",
            "-p",
            "5803",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cannot connect"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// --plain: a client that speaks no test protocol (as a kernel SCTP source would) is
/// served as a plain sink; both sides succeed on a graceful shutdown.
#[test]
fn sctp_perf_plain_peer() {
    let srv = Server::sctp_perf(5804);
    let udp = srv.port;
    let (code, out) = client(5804, udp, &["-n", "1M", "--plain", "-l", "1000"]);
    let exit = srv.wait();
    let sout = exit.stdout;
    assert_eq!(code, 0, "client:\n{out}\nserver:\n{sout}");
    assert!(exit.status.success(), "server:\n{sout}");
    assert!(sout.contains("is not sctp-perf"), "{sout}");
    assert!(sout.contains("receiver (1049 messages)"), "{sout}");
}

/// Flags that used to panic or hang are refused with exit 2 and a message naming the option
/// and its range: huge or non-finite times (a `Duration` overflow), an MTU SCTP cannot use,
/// and RTO values out of order.
#[test]
fn nonsense_flags_are_refused() {
    for (args, needle) in [
        (&["--connect-timeout", "1e30"][..], "--connect-timeout"),
        (&["-i", "1e30"][..], "-i must"),
        (&["-i", "NaN"][..], "-i must"),
        (&["-t", "inf"][..], "-t must"),
        (&["--mtu", "0"][..], "--mtu must be 576-65535"),
        (&["--mtu", "1000000"][..], "--mtu must be 576-65535"),
        (&["--rto-initial", "0"][..], "RTO values"),
        (&["--rto-min", "0"][..], "RTO values"),
        (
            &["--cmt", "pf", "--pf-max-retrans", "off"][..],
            "--cmt pf needs SCTP-PF",
        ),
        (&["--cmt", "sometimes"][..], "--cmt"),
    ] {
        let out = bin()
            .args(["sctp-perf", "-c", "127.0.0.1", "--udp-encap"])
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

/// `-t` holds when nothing flows: with the server frozen (SIGSTOP) mid-test, a 2-second
/// client stops sending at its time, waits a bounded grace for its FIN and the report,
/// says why it gives up, aborts the association and exits 1 — in well under a minute
/// (SCTP alone took 225 s to give up on the peer).
#[test]
fn sctp_perf_client_honours_its_time_when_the_peer_freezes() {
    let srv = Server::sctp_perf(5806);
    let udp = srv.port;
    let pid = srv.id().to_string();
    let freezer = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(1500));
        let _ = Command::new("kill").args(["-STOP", &pid]).status();
        pid
    });
    let t0 = std::time::Instant::now();
    let (code, out) = client(5806, udp, &["-t", "2", "-i", "0"]);
    let took = t0.elapsed();
    let pid = freezer.join().unwrap();
    let _ = Command::new("kill").args(["-CONT", &pid]).status();
    srv.kill();
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("giving up"), "{out}");
    assert!(out.contains("result: FAILED"), "{out}");
    assert!(
        took < std::time::Duration::from_secs(50),
        "took {took:?}\n{out}"
    );
}

/// `--cmt`: with two addresses on each side, Concurrent Multipath Transfer sends data on
/// both paths at once (each path's row marked as carrying data, each with thousands of
/// packets), every byte verified by the server.
#[test]
fn sctp_perf_cmt_stripes_over_two_loopback_paths() {
    let srv = Server::sctp_perf_with(5806, &["-B", "127.0.0.1,127.0.0.2"]);
    let udp = srv.port;
    let out = bin()
        .args(["sctp-perf", "-c", "127.0.0.1,127.0.0.2", "--udp-encap"])
        .args(["--udp-local-port", "0", "-B", "127.0.0.1,127.0.0.2"])
        .args(["--udp-port", &udp.to_string(), "-p", "5806"])
        .args(["-n", "8M", "--verify", "-i", "0", "--cmt"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let exit = srv.wait();
    assert!(
        out.status.success(),
        "client:\n{text}\nserver:\n{}",
        exit.stdout
    );
    assert!(exit.stdout.contains("verify: 0 errors"), "{}", exit.stdout);
    let rows: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("path (remote)"))
        .skip(1)
        .take(2)
        .collect();
    assert_eq!(rows.len(), 2, "{text}");
    for r in rows {
        assert!(r.contains("*data"), "{r}\n{text}");
        let pkts: u64 = r
            .split_whitespace()
            .find_map(|w| w.parse().ok().filter(|&n: &u64| n > 0))
            .unwrap_or(0);
        assert!(pkts > 1000, "{r}");
    }
}
