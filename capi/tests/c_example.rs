//! The C examples against libsoftrnic: each is compiled with the system C compiler
//! (`$CC`, else `cc`; `-Wall -Wextra -Werror`) against include/softrnic.h and the
//! libsoftrnic.so cargo built for this test run, then run and its output checked.
//! Without a C compiler the tests print "SKIPPED: no C compiler" and pass.

mod common;

use common::{compiler, lib_dir};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Compiles `examples/c/<name>.c` and returns the executable.
fn build(cc: &str, name: &str) -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = lib_dir();
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("capi-{name}"));
    let output = Command::new(cc)
        .args(["-std=c11", "-D_POSIX_C_SOURCE=200809L"])
        .args(["-Wall", "-Wextra", "-Werror", "-pthread"])
        .arg("-I")
        .arg(manifest.join("include"))
        .arg(manifest.join(format!("examples/c/{name}.c")))
        .arg("-o")
        .arg(&out)
        .arg(format!("-L{}", lib.display()))
        .arg("-lsoftrnic")
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .output()
        .expect("run the C compiler");
    assert!(
        output.status.success(),
        "{cc} failed on {name}.c:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    out
}

/// Runs `exe` (killed after a minute); returns its exit success and stdout.
fn run(exe: &Path) -> (bool, String, String) {
    // The library just built, not an older copy elsewhere on cargo's LD_LIBRARY_PATH
    // (which takes precedence over the executable's run path).
    let mut child = Command::new(exe)
        .env("LD_LIBRARY_PATH", lib_dir())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the example");
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait for the example") {
            break s;
        }
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("{} did not finish within a minute", exe.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut out = String::new();
    let mut err = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (status.success(), out, err)
}

#[test]
fn pingpong_moves_and_verifies_bytes() {
    let Some(cc) = compiler() else {
        println!("SKIPPED: no C compiler");
        return;
    };
    let exe = build(&cc, "pingpong");
    let (ok, out, err) = run(&exe);
    assert!(ok, "pingpong failed:\n{out}\n{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 14, "{out}");
    assert!(
        lines[0].starts_with("connect: ok (tcp://127.0.0.1:"),
        "{out}"
    );
    assert_eq!(
        &lines[1..],
        [
            "send/recv: ok (26 bytes ping, 5 bytes pong)",
            "rdma write: ok (16384 bytes placed and verified)",
            "rdma read: ok (8192 bytes read and verified)",
            "polled write ping-pong: ok (200 round trips, sent and placed by the polling thread)",
            "fetch and add: ok (40 + 2 = 42)",
            "compare and swap: ok (42 -> 100)",
            "send with invalidate: ok (peer STag invalidated and deallocated)",
            "local invalidate: ok (STag invalidated and deallocated)",
            "fast register: ok (4096 bytes written and read through it, invalidated)",
            "memory window: ok (4096 bytes read through a read-only Type 1 window)",
            "shared region: ok (4096 bytes written through a shared and a re-registered STag)",
            "qp modify: ok (RTS -> TERMINATE -> ERROR)",
            "teardown: ok",
        ]
    );
}

/// events.c: two QPs on one SRQ, the receive CQ on a completion channel slept on with
/// poll(2), the SRQ limit and both sides' Terminate as asynchronous events.
#[test]
fn events_come_through_channels_and_the_event_queue() {
    let Some(cc) = compiler() else {
        println!("SKIPPED: no C compiler");
        return;
    };
    let exe = build(&cc, "events");
    let (ok, out, err) = run(&exe);
    assert!(ok, "events failed:\n{out}\n{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 5, "{out}");
    assert_eq!(lines[0], "connect: ok (2 QPs on one SRQ)");
    assert!(
        lines[1].starts_with("completion channel: ok (8 receives, "),
        "{out}"
    );
    assert!(lines[2].starts_with("srq limit event: ok (SRQ "), "{out}");
    assert_eq!(
        lines[3],
        "terminate events: ok (sent and received, cause 0x1100)"
    );
    assert_eq!(lines[4], "teardown: ok");
}

#[test]
fn misuse_gets_error_codes_not_crashes() {
    let Some(cc) = compiler() else {
        println!("SKIPPED: no C compiler");
        return;
    };
    let exe = build(&cc, "misuse");
    let (ok, out, err) = run(&exe);
    assert!(ok, "misuse failed:\n{out}\n{err}");
    assert!(err.is_empty(), "{err}");
    assert_eq!(
        out.lines().last(),
        Some("misuse: all checks passed"),
        "{out}"
    );
    for want in [
        "strerror(0) = success",
        "strerror(-6) = unknown STag",
        "strerror(-19) = internal error",
        "SOFTRNIC_ERR_UNKNOWN_STAG softrnic_deallocate_stag(rnic, 0xdeadbeef): unknown STag: STag 0xdeadbeef is not registered on this RNIC",
        "SOFTRNIC_ERR_NULL        softrnic_rnic_close(NULL): a required pointer argument is NULL: the RNIC handle is NULL",
    ] {
        assert!(
            out.lines().any(|l| l == want),
            "no line {want:?} in:\n{out}"
        );
    }
    // Every code from SOFTRNIC_OK down to SOFTRNIC_ERR_INTERNAL was described.
    assert_eq!(
        out.lines().filter(|l| l.starts_with("strerror(")).count(),
        20
    );
}

/// cm.c: connection management step by step without blocking — a request taken unanswered
/// with its private data, rejected with private data (RFC 5044 §7.1.1: the Reject's MPA
/// Reply carries it to the initiator's REJECTED event), then accepted with private data
/// both ways.
#[test]
fn cm_requests_rfc5044_7_1_1_reject_and_accept_carry_private_data() {
    let Some(cc) = compiler() else {
        println!("SKIPPED: no C compiler");
        return;
    };
    let exe = build(&cc, "cm");
    let (ok, out, err) = run(&exe);
    assert!(ok, "cm failed:\n{out}\n{err}");
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            "request: ok (5 bytes of private data from 127.0.0.1)",
            "reject: ok (REJECTED with 7 bytes of the responder's private data)",
            "accept: ok (ESTABLISHED on both QPs, \"hello\" and \"welcome\" delivered)",
            "misuse: ok",
            "teardown: ok",
        ]
    );
}
