//! `softrnic rping` client against `softrnic rping` server, two processes over loopback:
//! rping's ping-pong with -V, and every error injection (RFC 5040 §4.8 / RFC 5041 §7.2
//! Terminates, memory untouched).

mod common;

use std::process::Output;
use std::time::Duration;

use common::{Server, bin};

/// Starts a server on an ephemeral port (`-p 0 -d`).
fn server(extra: &[&str]) -> Server {
    let mut args = vec!["--timeout", "20"];
    args.extend_from_slice(extra);
    Server::rping(&args)
}

fn client(port: u16, extra: &[&str]) -> Output {
    bin()
        .args(["rping", "-c", "-a", "127.0.0.1", "--timeout", "20"])
        .args(["-p", &port.to_string()])
        .args(extra)
        .output()
        .expect("run client")
}

fn text(o: &[u8]) -> String {
    String::from_utf8_lossy(o).into_owned()
}

/// rping's exchange, several pings with multi-segment RDMA Read and Write (EMSS 1448) and
/// -V: both ends exit 0 and the client saw every echo intact.
#[test]
fn rping_client_server_validate() {
    let srv = server(&["--emss", "1448"]);
    let port = srv.port;
    let c = client(
        port,
        &["-C", "4", "-V", "-v", "-S", "5000", "--emss", "1448"],
    );
    let s = srv.wait();
    let out = text(&c.stdout);
    assert_eq!(
        c.status.code(),
        Some(0),
        "client: {out} {}",
        text(&c.stderr)
    );
    assert_eq!(out.matches("ping data: rdma-ping-").count(), 4, "{out}");
    assert!(out.contains("ping data: rdma-ping-3: DEFG"), "{out}");
    assert!(out.contains("4 pings of 5000 bytes"), "{out}");
    assert!(out.contains("data verified"), "{out}");
    assert_eq!(s.status.code(), Some(0), "server: {}", s.stdout);
    assert!(s.stdout.contains("4 pings with"), "{}", s.stdout);
}

/// Client-side injection: the server's RDMA Read Request / RDMA Write hits what the client
/// advertised; the client must send RDMAP Remote Protection (Read, RFC 5040 §4.8) or DDP
/// Tagged Buffer (Write, RFC 5041 §7.2) Terminates with the right code, leave its memory
/// untouched and exit 4; the server sees its operation fail and exits 1.
#[test]
fn rping_client_injection_sends_rfc_terminate_memory_untouched() {
    let cases = [
        ("bad-stag", "read", "(layer 0x0, type 0x1, code 0x00)"),
        ("out-of-bounds", "read", "(layer 0x0, type 0x1, code 0x01)"),
        ("bad-stag", "write", "(layer 0x1, type 0x1, code 0x00)"),
        ("out-of-bounds", "write", "(layer 0x1, type 0x1, code 0x01)"),
    ];
    for (inject, at, triple) in cases {
        let srv = server(&[]);
        let port = srv.port;
        let c = client(
            port,
            &[
                "-C",
                "3",
                "-V",
                "-S",
                "3000",
                "--inject",
                inject,
                "--inject-at",
                at,
            ],
        );
        let s = srv.wait();
        let out = text(&c.stdout);
        assert_eq!(
            c.status.code(),
            Some(4),
            "{inject} {at}: {out} {}",
            text(&c.stderr)
        );
        assert!(out.contains("memory untouched"), "{out}");
        assert!(
            out.lines()
                .any(|l| l.starts_with("rping client: Terminate sent:") && l.contains(triple)),
            "{inject} {at}: {out}"
        );
        assert_eq!(s.status.code(), Some(1), "{inject} {at}: server {s:?}");
    }
}

/// Server-side injection: our RDMA Read / Write uses an unadvertised STag or runs past the
/// advertised buffer; the peer's Terminate is decoded, printed in words, and the server
/// exits 3.
#[test]
fn rping_server_injection_receives_rfc_terminate() {
    let cases = [
        (
            "bad-stag",
            "read",
            "RDMAP Remote Protection Error: Invalid STag",
        ),
        (
            "out-of-bounds",
            "read",
            "RDMAP Remote Protection Error: Base or bounds violation",
        ),
        ("bad-stag", "write", "DDP Tagged Buffer Error: Invalid STag"),
        (
            "out-of-bounds",
            "write",
            "DDP Tagged Buffer Error: Base or bounds violation",
        ),
    ];
    for (inject, at, words) in cases {
        let srv = server(&["--inject", inject, "--inject-at", at]);
        let port = srv.port;
        let c = client(port, &["-C", "3", "-V"]);
        let s = srv.wait();
        let out = s.stdout;
        assert_eq!(s.status.code(), Some(3), "{inject} {at}: {out}");
        assert!(
            out.contains(&format!("rping server: Terminate received: {words}")),
            "{inject} {at}: {out}"
        );
        assert_eq!(c.status.code(), Some(1), "{inject} {at}: client {c:?}");
        assert!(
            text(&c.stderr).contains("Terminate sent"),
            "{}",
            text(&c.stderr)
        );
    }
}

/// rping's argument rules: exactly one of -s/-c, sizes 26..=65535, a client needs -a.
#[test]
fn rping_rejects_bad_arguments() {
    for args in [
        &["rping", "-s", "-c"][..],
        &["rping"][..],
        &["rping", "-c", "-a", "127.0.0.1", "-S", "25"][..],
        &["rping", "-c", "-a", "127.0.0.1", "-S", "65536"][..],
        &["rping", "-c"][..],
        &["rping", "-c", "-a", "127.0.0.1", "--timeout", "0"][..],
        &["rping", "-c", "-a", "127.0.0.1", "--emss", "0"][..],
        &["rping", "-c", "-a", "127.0.0.1", "--ird", "16384"][..],
        &["rping", "-c", "-a", "127.0.0.1", "-P"][..],
    ] {
        let o = bin().args(args).output().expect("run");
        assert_eq!(o.status.code(), Some(2), "{args:?}: {o:?}");
    }
}

/// rping's exchange over DDP over softrnic's SCTP (RFC 5043, UDP encapsulation): the
/// buffer advertisements, the server's RDMA Read and Write and the go-ahead Sends, data
/// verified.
#[test]
fn rping_over_sctp() {
    let sctp = ["--transport", "sctp+udp", "--udp-port", "29931"];
    let srv = server(&sctp);
    let port = srv.port;
    let mut args = sctp.to_vec();
    args.extend(["-C", "4", "-V", "-S", "5000"]);
    let c = client(port, &args);
    let s = srv.wait();
    let out = text(&c.stdout);
    assert_eq!(
        c.status.code(),
        Some(0),
        "client: {out} {}",
        text(&c.stderr)
    );
    assert!(out.contains("4 pings of 5000 bytes"), "{out}");
    assert!(out.contains("data verified"), "{out}");
    assert_eq!(s.status.code(), Some(0), "server: {}", s.stdout);
}

/// A peer must not take the server down (RFC 5044 §7.1.2, RFC 6581): a malformed MPA
/// Request (revision 7) is answered with an MPA Reply with the Reject bit, a peer that
/// connects and closes before its Request is forgotten, and the server goes on to serve the
/// next, good client.
#[test]
fn rping_server_survives_malformed_requests() {
    use std::io::{Read, Write};
    let srv = server(&[]);
    let port = srv.port;
    // Connects and closes without a Request.
    drop(std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect"));
    // Revision 7.
    let mut t = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    t.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut req = b"MPA ID Req Frame".to_vec();
    req.extend_from_slice(&[0x00, 7, 0, 0]);
    t.write_all(&req).unwrap();
    let mut reply = [0u8; 20];
    t.read_exact(&mut reply).expect("an MPA Reply");
    assert_eq!(&reply[..16], b"MPA ID Rep Frame");
    assert_ne!(reply[16] & 0x20, 0, "Reject bit set: {reply:?}");
    drop(t);
    let c = client(port, &["-C", "2", "-V"]);
    let s = srv.wait();
    assert_eq!(c.status.code(), Some(0), "client: {}", text(&c.stderr));
    assert_eq!(s.status.code(), Some(0), "server: {}", s.stdout);
}

/// `RUST_LOG=debug`: every QP event of an rping client — connection established, each state
/// change (the disconnect's Rts → Closing, asked for by the application, among them) and
/// the disconnect — is logged inside its QP's span, over MPA/TCP and over SCTP.
#[test]
fn rping_logs_every_qp_event_inside_its_qp_span() {
    for (llp, transport) in [
        ("MPA/TCP", &[][..]),
        (
            "SCTP",
            &["--transport", "sctp+udp", "--udp-port", "29937"][..],
        ),
    ] {
        let srv = server(transport);
        let c = bin()
            .args(["rping", "-c", "-a", "127.0.0.1", "--timeout", "20"])
            .args(["-p", &srv.port.to_string(), "-C", "2", "-S", "100"])
            .args(transport)
            .env("RUST_LOG", "debug")
            .output()
            .expect("run client");
        let s = srv.wait();
        assert_eq!(c.status.code(), Some(0), "{llp}: {}", text(&c.stderr));
        assert_eq!(s.status.code(), Some(0), "{llp} server: {}", s.stdout);
        let log = text(&c.stderr);
        let events: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("stack::engine:") || l.contains("disconnected qp="))
            .collect();
        for needle in ["connection established", "to=Closing", "disconnected qp="] {
            assert!(
                events.iter().any(|l| l.contains(needle)),
                "{llp}: {needle}: {log}"
            );
        }
        for l in &events {
            assert!(l.contains("qp{qp=1 "), "{llp}: outside its QP's span: {l}");
        }
    }
}
