//! The libfabric provider `softrnic` (fabric/softrnic_fi.c) on the libsoftrnic.so of this
//! build: the provider is compiled with the system C compiler into a directory that
//! `FI_PROVIDER_PATH` names, then libfabric 1.17's own tools (`fi_info`, `fi_pingpong`) and
//! fabric/tests/fi_rma_check.c (libfabric's API end to end) run against it.
//! Without a C compiler, libfabric's headers or its tools, each test prints
//! "SKIPPED: <why>" and passes (`scripts/install-libfabric.sh` installs them on Debian).

mod common;

use common::{compiler, lib_dir};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

fn have(cmd: &str, arg: &str) -> bool {
    Command::new(cmd)
        .arg(arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// Why the tests cannot run here, if they cannot.
fn missing() -> Option<String> {
    if compiler().is_none() {
        return Some("no C compiler".into());
    }
    if !Path::new("/usr/include/rdma/providers/fi_prov.h").is_file() {
        return Some("libfabric's headers are not installed (libfabric-dev)".into());
    }
    for tool in ["fi_info", "fi_pingpong"] {
        if !have(tool, "--version") {
            return Some(format!("{tool} is not installed (libfabric-bin)"));
        }
    }
    None
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// Compiles the provider once into `dir/libsoftrnic-fi.so`, linked against libsoftrnic in
/// `lib`.
fn build_provider(dir: &Path, lib: &Path) {
    std::fs::create_dir_all(dir).expect("provider directory");
    let out = Command::new("bash")
        .arg(repo().join("fabric/build.sh"))
        .arg(lib)
        .arg(dir)
        .output()
        .expect("run fabric/build.sh");
    assert!(
        out.status.success(),
        "fabric/build.sh failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The directory holding this build's provider (built on first use).
fn provider_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fabric-provider");
        build_provider(&dir, &lib_dir());
        dir
    })
}

/// A libfabric tool (or test program) with the provider on its path and only it enabled.
fn fi_command(program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut c = Command::new(program);
    c.env("FI_PROVIDER_PATH", provider_dir())
        .env("LD_LIBRARY_PATH", lib_dir())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// Waits for `child` (killed after `limit`) and returns its output.
fn finish(mut child: Child, limit: Duration, what: &str) -> Output {
    let start = Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            return child.wait_with_output().expect("output");
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let mut out = String::new();
            let mut err = String::new();
            let _ = child.stdout.take().map(|mut s| s.read_to_string(&mut out));
            let _ = child.stderr.take().map(|mut s| s.read_to_string(&mut err));
            panic!("{what} did not finish within {limit:?}:\n{out}\n{err}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs the client `start` makes (each run killed after `limit`) until it succeeds or 10 s
/// have passed since the first attempt — its server may not listen yet — and returns the last
/// run's output.
fn until_listening(what: &str, limit: Duration, mut start: impl FnMut() -> Child) -> Output {
    let first = Instant::now();
    loop {
        let out = finish(start(), limit, what);
        if out.status.success() || first.elapsed() > Duration::from_secs(10) {
            return out;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The standard output of a process `who` that must have exited 0 (else its output fails the
/// test).
fn succeeded(out: &Output, who: &str) -> String {
    let o = text(&out.stdout);
    assert!(out.status.success(), "{who}:\n{o}\n{}", text(&out.stderr));
    o
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn fi_info_lists_the_provider_with_its_attributes() {
    if let Some(why) = missing() {
        println!("SKIPPED: {why}");
        return;
    }
    let out = finish(
        fi_command("fi_info")
            .args(["-p", "softrnic", "-t", "FI_EP_MSG", "-v"])
            .spawn()
            .expect("fi_info"),
        Duration::from_secs(30),
        "fi_info",
    );
    let s = text(&out.stdout);
    assert!(out.status.success(), "{s}\n{}", text(&out.stderr));
    for want in [
        "prov_name: softrnic",
        "type: FI_EP_MSG",
        "protocol: FI_PROTO_IWARP",
        "addr_format: FI_SOCKADDR_IN",
        "mr_mode: [ FI_MR_LOCAL, FI_MR_VIRT_ADDR, FI_MR_ALLOCATED, FI_MR_PROV_KEY ]",
        "caps: [ FI_MSG, FI_RMA, FI_ATOMIC, FI_READ, FI_WRITE, FI_RECV, FI_SEND, FI_REMOTE_READ, FI_REMOTE_WRITE, FI_LOCAL_COMM, FI_REMOTE_COMM ]",
        "cq_data_size: 8",
        "inject_size: 128",
        "iov_limit: 6",
        "rma_iov_limit: 1",
        "size: 256",
        "data_progress: FI_PROGRESS_AUTO",
        "mode: [ FI_RX_CQ_DATA ]",
    ] {
        assert!(s.contains(want), "no {want:?} in:\n{s}");
    }
    // The short listing names it too.
    let out = finish(
        fi_command("fi_info")
            .args(["-p", "softrnic"])
            .spawn()
            .expect("fi_info"),
        Duration::from_secs(30),
        "fi_info",
    );
    assert!(
        text(&out.stdout)
            .lines()
            .any(|l| l.trim() == "provider: softrnic"),
        "{}",
        text(&out.stdout)
    );
}

/// A free TCP port for fi_pingpong's control connection.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

/// fi_pingpong's result line for `size`: its columns.
fn result_line(out: &str, size: &str) -> Option<Vec<String>> {
    out.lines()
        .map(|l| l.split_whitespace().map(String::from).collect::<Vec<_>>())
        .find(|c| c.first().map(String::as_str) == Some(size) && c.len() == 8)
}

/// Runs fi_pingpong -e msg between a server and a client process (4 KiB messages, 200
/// iterations, FI_SOFTRNIC_PROGRESS=`progress`) and checks both ends' result lines.
fn pingpong(progress: &str) {
    pingpong_with(progress, "softrnic", "msg", "4096", "4k", "200", &[]);
}

/// Runs fi_pingpong with provider `prov`, endpoint type `ep`, message size `size` (shown as
/// `label` in its table) and `iters` iterations, `extra` options on both ends, between a
/// server and a client process, and checks both ends' result lines.
fn pingpong_with(
    progress: &str,
    prov: &str,
    ep: &str,
    size: &str,
    label: &str,
    iters: &str,
    extra: &[&str],
) {
    let port = free_port().to_string();
    let server = fi_command("fi_pingpong")
        .env("FI_SOFTRNIC_PROGRESS", progress)
        .args(["-p", prov, "-e", ep, "-B", &port])
        .args(["-S", size, "-I", iters])
        .args(extra)
        .spawn()
        .expect("fi_pingpong server");
    // The server listens for the control connection once it is up; the client retries.
    let client = until_listening("fi_pingpong client", Duration::from_secs(120), || {
        fi_command("fi_pingpong")
            .env("FI_SOFTRNIC_PROGRESS", progress)
            .args(["-p", prov, "-e", ep, "-P", &port])
            .args(["-S", size, "-I", iters])
            .args(extra)
            .arg("127.0.0.1")
            .spawn()
            .expect("fi_pingpong client")
    });
    let server = finish(server, Duration::from_secs(120), "fi_pingpong server");
    let (cs, ss) = (succeeded(&client, "client"), succeeded(&server, "server"));
    // bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec, on both ends.
    let acked = format!("={iters}");
    for (who, out) in [("client", &cs), ("server", &ss)] {
        let c = result_line(out, label).unwrap_or_else(|| panic!("{who}: no {label} line:\n{out}"));
        assert_eq!(
            (c[1].as_str(), c[2].as_str()),
            (iters, acked.as_str()),
            "{who}: {out}"
        );
        let usec: f64 = c[6].parse().unwrap_or_else(|_| panic!("{who}: {out}"));
        assert!(usec > 0.0, "{who}: {out}");
        println!("{prov} {ep}, {progress} progress, {who}: {}", c.join(" "));
    }
}

#[test]
fn fi_pingpong_runs_between_two_processes_over_msg_endpoints() {
    if let Some(why) = missing() {
        println!("SKIPPED: {why}");
        return;
    }
    pingpong("auto");
}

/// libfabric's ofi_rxm layered on the provider: an FI_EP_RDM endpoint (what MPI uses) over
/// softrnic's MSG endpoints, with fi_pingpong's data verification (`-v`) at 64 B (rxm's
/// eager protocol, through its registered buffer pools), 64 KiB and 1 MiB (its larger-message
/// protocols).
#[test]
fn fi_pingpong_rdm_over_ofi_rxm_verified() {
    if let Some(why) = missing() {
        println!("SKIPPED: {why}");
        return;
    }
    for (size, label) in [("64", "64"), ("65536", "64k"), ("1048576", "1m")] {
        pingpong_with(
            "auto",
            "softrnic;ofi_rxm",
            "rdm",
            size,
            label,
            "50",
            &["-v"],
        );
    }
}

/// Why an Open MPI test cannot run here, if it cannot.
fn mpi_missing() -> Option<String> {
    if let Some(why) = missing() {
        return Some(why);
    }
    if !have("mpicc", "--version") || !have("mpirun", "--version") {
        return Some("Open MPI is not installed (openmpi-bin, libopenmpi-dev)".into());
    }
    None
}

/// Compiles fabric/`source` with mpicc and runs it on two ranks over the provider through
/// ofi_rxm: the MTL `ofi` restricted to `softrnic;ofi_rxm` (Open MPI's log must name the
/// provider for both ranks), one-sided operations by `osc pt2pt` (as messages over the same
/// path), no other transport (`--mca btl self`). Returns the ranks' standard output after
/// asserting that mpirun exited 0.
fn mpi_run(source: &str, args: &[&str]) -> String {
    let name = Path::new(source)
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("mpi_prog");
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let out = Command::new("mpicc")
        .args(["-O2", "-Wall", "-Werror"])
        .arg(repo().join("fabric").join(source))
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("run mpicc");
    assert!(out.status.success(), "mpicc failed:\n{}", text(&out.stderr));
    let run = finish(
        fi_command("mpirun")
            .args(["--allow-run-as-root", "--oversubscribe", "-np", "2"])
            .args(["--mca", "pml", "cm", "--mca", "mtl", "ofi"])
            .args(["--mca", "mtl_ofi_provider_include", "softrnic;ofi_rxm"])
            .args(["--mca", "osc", "pt2pt", "--mca", "btl", "self"])
            .args(["--mca", "mtl_base_verbose", "100"])
            .arg(&exe)
            .args(args)
            .spawn()
            .expect("mpirun"),
        Duration::from_secs(120),
        "mpirun",
    );
    let (o, e) = (text(&run.stdout), text(&run.stderr));
    assert!(run.status.success(), "mpirun failed:\n{o}\n{e}");
    let both = format!("{o}{e}");
    assert_eq!(
        both.matches("mtl:ofi:provider: softrnic").count(),
        2,
        "both ranks on the softrnic provider:\n{both}"
    );
    o
}

/// Open MPI (Debian's openmpi-bin 4.1) over the provider through ofi_rxm (see [`mpi_run`]):
/// fabric/tests/mpi_check.c checks every byte of 100 Send/Recv round trips of 64 KiB and of an
/// MPI_Put of 4 KiB between fences.
#[test]
fn open_mpi_send_recv_and_put_over_ofi_rxm() {
    if let Some(why) = mpi_missing() {
        println!("SKIPPED: {why}");
        return;
    }
    let o = mpi_run("tests/mpi_check.c", &[]);
    assert!(o.contains("rank 0: sendrecv verified, put sent"), "{o}");
    assert!(o.contains("rank 1: sendrecv verified, put verified"), "{o}");
}

/// The MPI one-sided benchmark (fabric/bench/mpi_osc_bench.c: MPI_Put, MPI_Get and
/// MPI_Accumulate of MPI_INT with MPI_SUM, latency and bandwidth, 8 B to 256 KiB, fences) over
/// the provider through ofi_rxm, a few iterations: every measurement is reported and every
/// byte checked — the Puts' at the target, the Gets' at the origin, and every int the
/// Accumulates summed at the target.
#[test]
fn open_mpi_one_sided_put_get_accumulate_verified_over_ofi_rxm() {
    if let Some(why) = mpi_missing() {
        println!("SKIPPED: {why}");
        return;
    }
    let o = mpi_run("bench/mpi_osc_bench.c", &["4"]);
    for op in ["put", "get", "acc"] {
        for kind in ["lat", "bw"] {
            for size in [8, 64, 512, 4096, 32768, 262144] {
                let row = format!("{op}_{kind} {size} ");
                assert!(
                    o.lines().any(|l| l.starts_with(&row)
                        && l[row.len()..].parse::<f64>().is_ok_and(|v| v > 0.0)),
                    "no {row}row:\n{o}"
                );
            }
        }
    }
    assert!(o.lines().any(|l| l == "verified"), "{o}");
}

/// FI_SOFTRNIC_PROGRESS=manual: no progress thread, fi_pingpong's CQ polling runs the RNIC
/// (and fi_info reports FI_PROGRESS_MANUAL).
#[test]
fn fi_pingpong_with_manual_progress() {
    if let Some(why) = missing() {
        println!("SKIPPED: {why}");
        return;
    }
    let out = finish(
        fi_command("fi_info")
            .env("FI_SOFTRNIC_PROGRESS", "manual")
            .args(["-p", "softrnic", "-t", "FI_EP_MSG", "-v"])
            .spawn()
            .expect("fi_info"),
        Duration::from_secs(30),
        "fi_info",
    );
    let s = text(&out.stdout);
    assert!(s.contains("data_progress: FI_PROGRESS_MANUAL"), "{s}");
    assert!(s.contains("control_progress: FI_PROGRESS_MANUAL"), "{s}");
    pingpong("manual");
}

/// Compiles fabric/tests/`name`.c against libfabric (`extra` arguments after the libraries)
/// and returns the program's path.
fn compile_c(name: &str, extra: &[std::ffi::OsString]) -> PathBuf {
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let out = Command::new(compiler().expect("checked by missing()"))
        .args(["-std=c11", "-D_POSIX_C_SOURCE=200809L"])
        .args(["-Wall", "-Wextra", "-Werror"])
        .arg(repo().join(format!("fabric/tests/{name}.c")))
        .arg("-o")
        .arg(&exe)
        .args(["-lfabric", "-pthread"])
        .args(extra)
        .output()
        .expect("run the C compiler");
    assert!(out.status.success(), "{}", text(&out.stderr));
    exe
}

/// fabric/tests/fi_rma_peer.c — the two-process RMA exchange the lab runs against libfabric's
/// verbs provider on siw (fabric-rma-siw) — between two processes on the provider over
/// loopback: fi_write, fi_read and a Send asking the target to check, 64 B to 64 KiB, every
/// byte checked at both ends, the buffers' addresses and keys carried in the CM data of
/// connect and accept.
#[test]
fn fi_rma_peer_between_two_processes() {
    if let Some(why) = missing() {
        println!("SKIPPED: {why}");
        return;
    }
    let exe = compile_c("fi_rma_peer", &[]);
    let port = free_port().to_string();
    let target = fi_command(&exe)
        .args(["-p", "softrnic", "-P", &port, "-n", "5"])
        .spawn()
        .expect("fi_rma_peer target");
    // The target listens once it is up; the initiator retries a refused connect.
    let initiator = until_listening("fi_rma_peer initiator", Duration::from_secs(60), || {
        fi_command(&exe)
            .args(["-p", "softrnic", "-P", &port, "-n", "5", "127.0.0.1"])
            .spawn()
            .expect("fi_rma_peer initiator")
    });
    let target = finish(target, Duration::from_secs(60), "fi_rma_peer target");
    let (i, t) = (
        succeeded(&initiator, "initiator"),
        succeeded(&target, "target"),
    );
    for size in [64, 4096, 65536] {
        let line = format!("fi_write, fi_read {size} octets x 5: verified");
        assert!(i.lines().any(|l| l == line), "{i}");
    }
    assert!(t.lines().any(|l| l == "15 fi_writes checked"), "{t}");
    assert!(i.lines().any(|l| l == "rma verified") && t.lines().any(|l| l == "rma verified"));
}

/// Compiles fabric/tests/`name`.c against libfabric, runs it with the provider and returns
/// its output lines (after asserting that it exited 0).
fn run_c_check(name: &str) -> Vec<String> {
    run_c_check_with(name, &[], &[])
}

/// As [`run_c_check`], with `extra` arguments for the compiler (after the libraries) and
/// `env` for the program.
fn run_c_check_with(name: &str, extra: &[std::ffi::OsString], env: &[(&str, &str)]) -> Vec<String> {
    let exe = compile_c(name, extra);
    let out = finish(
        fi_command(&exe)
            .envs(env.iter().copied())
            .spawn()
            .expect(name),
        Duration::from_secs(60),
        name,
    );
    let s = text(&out.stdout);
    assert!(out.status.success(), "{s}\n{}", text(&out.stderr));
    s.lines().map(String::from).collect()
}

#[test]
fn fi_rma_check_write_read_writedata_rfc7306_immediate_data_rfc5044_7_1_1_reject_with_cm_data_and_misuse()
 {
    if let Some(why) = missing() {
        println!("SKIPPED: {why}");
        return;
    }
    let lines = run_c_check("fi_rma_check");
    assert!(lines[0].starts_with("listen: ok (port "), "{lines:?}");
    assert_eq!(
        &lines[1..],
        [
            "misuse: ok (Function not implemented for a CQ format, Operation not permitted in current state for a post before connecting)",
            "reject: ok (FI_ECONNREFUSED, \"Connection refused\", 12 + 8 bytes of CM data)",
            "connect: ok (CM data \"hello\" in the request, \"welcome\" in the reply)",
            "send/recv: ok (fi_sendv 2 pieces -> fi_recvmsg, 10 bytes, woken by the CQ's wait fd)",
            "rdma write: ok (65536 bytes placed and verified)",
            "rdma read: ok (32768 bytes read and verified)",
            "rdma writedata: ok (4096 bytes and remote CQ data 0x1122334455667788)",
            "bad key: ok (completion error Permission denied, provider: remote access error)",
            "shutdown: ok (FI_SHUTDOWN on the server)",
            "fi_rma_check: all checks passed",
        ]
    );
}

/// CM data on the wire in the layout of libfabric's verbs provider (one length octet, then
/// the data) inside the MPA Request/Reply private data (RFC 5044 §7.1.1; RFC 6581's IRD/ORD
/// words precede it and are the RNIC's): fabric/tests/fi_cm_layout_check.c plays the verbs
/// peer with a plain RNIC of libsoftrnic's C ABI and checks the bytes both ways.
#[test]
fn fi_cm_layout_check_verbs_provider_cm_data_in_rfc5044_7_1_1_private_data() {
    if let Some(why) = missing() {
        println!("SKIPPED: {why}");
        return;
    }
    let lib = lib_dir();
    let mut rpath = std::ffi::OsString::from("-Wl,-rpath,");
    rpath.push(&lib);
    let extra = [
        std::ffi::OsString::from("-I"),
        repo().join("capi/include").into_os_string(),
        std::ffi::OsString::from("-L"),
        lib.clone().into_os_string(),
        std::ffi::OsString::from("-lsoftrnic"),
        rpath,
    ];
    let lines = run_c_check_with("fi_cm_layout_check", &extra, &[]);
    assert_eq!(
        lines,
        [
            "cm_data_size: ok (55, the verbs provider's; 56 refused)",
            "connect: ok (MPA Request private data [05 68 65 6c 6c 6f])",
            "rejected: ok (MPA Reply [04 6e 6f 70 65] -> err_data \"nope\", 4 bytes)",
            "connect without CM data: ok (MPA Request private data [00]); accepted: ok (MPA Reply [07 'welcome'] -> FI_CONNECTED with 7 bytes)",
            "accept: ok (MPA Request [03 'abc'] -> FI_CONNREQ with 3 bytes; fi_accept \"ok!\" -> MPA Reply private data [03 6f 6b 21])",
            "long length octet: ok (MPA Request [c8 78] -> FI_CONNREQ with the 1 byte carried); fi_reject \"bye\" -> MPA Reply private data [03 62 79 65]",
            "fi_cm_layout_check: all checks passed",
        ]
    );
}

/// FI_SOFTRNIC_FIRST_FPDU_DELAY_MS (softrnic_qp_attr.first_fpdu_delay_ms): the initiator's
/// first message waits that long after the MPA Reply (RFC 5044 §7.1.2 lets it send once it
/// has the Reply; Linux siw 6.1 peers need the wait, its accept race), later ones do not.
#[test]
fn fi_delay_check_first_fpdu_held_after_the_rfc5044_7_1_2_reply() {
    if let Some(why) = missing() {
        println!("SKIPPED: {why}");
        return;
    }
    let lines = run_c_check_with(
        "fi_delay_check",
        &[],
        &[("FI_SOFTRNIC_FIRST_FPDU_DELAY_MS", "400")],
    );
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(
        lines[0].starts_with("first message: ok (held: arrived "),
        "{lines:?}"
    );
    assert_eq!(
        &lines[1..],
        ["second message: ok", "fi_delay_check: all checks passed"]
    );
}

/// FI_ATOMIC from RFC 7306 (§4 Atomic Operations: Fetch and Add, Compare and Swap on one
/// 64-bit, 8-byte aligned value): fabric/tests/fi_atomic_check.c checks each result and the
/// target memory, the valid-queries, misuse and a target region without the remote right.
#[test]
fn fi_atomic_check_rfc7306_fetch_add_and_compare_swap() {
    if let Some(why) = missing() {
        println!("SKIPPED: {why}");
        return;
    }
    let lines = run_c_check("fi_atomic_check");
    assert_eq!(
        lines,
        [
            "connect: ok",
            "valid: ok (FI_SUM and FI_CSWAP on FI_UINT64/FI_INT64, count 1, size 8; others Operation not supported)",
            "fetch_atomic FI_SUM: ok (1000 + 42: result 1000, target 1042)",
            "compare_atomic FI_CSWAP: ok (1042 == 1042: swapped to 7; 99 != 7: result 7, target unchanged)",
            "atomic FI_SUM: ok (7 + 5 = 12; inject + 100 without completion; FI_INT64 - 13: result 112, target 99)",
            "misuse: ok (misaligned, count 2, no descriptor: Invalid argument; FI_MAX, FI_UINT32: Operation not supported)",
            "read-only target: ok (completion error Permission denied, target unchanged)",
            "fi_atomic_check: all checks passed",
        ]
    );
}

/// fi_inject, fi_inject_write and fi_inject_writedata through the provider's registered
/// bounce slots (no completion, the source free at once, 900 injects in rounds: more than
/// the slots, 200 round trips both ways), and fi_senddata/fi_injectdata without payload as RFC 7306 §4 Immediate Data
/// messages (with payload -FI_ENOSYS: RFC 7306 has no Send carrying Immediate Data).
#[test]
fn fi_inject_check_inject_and_rfc7306_immediate_data_senddata() {
    if let Some(why) = missing() {
        println!("SKIPPED: {why}");
        return;
    }
    let lines = run_c_check("fi_inject_check");
    assert_eq!(
        lines,
        [
            "connect: ok (inject_size 128)",
            "inject: ok (128 bytes, source reused at once; 129 bytes: Message too long)",
            "inject burst: ok (900 messages in order, no sender completion)",
            "inject ping-pong: ok (200 round trips)",
            "inject_write, inject_writedata: ok (128 and 64 bytes placed, remote CQ data 0xabcdef0123456789, no sender completion)",
            "senddata, injectdata: ok (Immediate Data 0x0102030405060708 and 0x1111222233334444; with payload: Function not implemented)",
            "fi_inject_check: all checks passed",
        ]
    );
}

/// An FI_WAIT_FD event queue's descriptor follows its entries, fi_eq_write's included:
/// fabric/tests/fi_eq_check.c polls it empty, after fi_eq_write, after a peek and after the
/// read, checks fi_trywait, and wakes a thread blocked in fi_eq_sread without timeout.
#[test]
fn fi_eq_check_eq_write_wakes_the_wait_fd() {
    if let Some(why) = missing() {
        println!("SKIPPED: {why}");
        return;
    }
    let lines = run_c_check("fi_eq_check");
    assert_eq!(
        lines,
        [
            "wait fd: ok (quiet when empty, readable after fi_eq_write and a peek, quiet after the read)",
            "two entries: ok (readable until the second is read)",
            "sread: ok (a blocked fi_eq_sread returned the written entry)",
            "fi_eq_check: all checks passed",
        ]
    );
}

/// A provider that cannot find libsoftrnic.so still loads, and says why through
/// libfabric's log (FI_LOG_LEVEL=warn) instead of listing itself.
#[test]
fn a_provider_without_libsoftrnic_says_why() {
    if let Some(why) = missing() {
        println!("SKIPPED: {why}");
        return;
    }
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fabric-nolib");
    let lib = tmp.join("lib");
    let dir = tmp.join("prov");
    std::fs::create_dir_all(&lib).expect("dir");
    // Its run path names a directory without libsoftrnic.so.
    build_provider(&dir, &lib);
    let out = finish(
        Command::new("fi_info")
            .args(["-p", "softrnic"])
            .env("FI_PROVIDER_PATH", &dir)
            .env("FI_LOG_LEVEL", "warn")
            .env_remove("LD_LIBRARY_PATH")
            .env_remove("SOFTRNIC_LIB")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("fi_info"),
        Duration::from_secs(30),
        "fi_info",
    );
    let (s, e) = (text(&out.stdout), text(&out.stderr));
    assert!(!out.status.success(), "{s}");
    assert!(!s.contains("provider: softrnic"), "{s}");
    for want in [
        "libsoftrnic could not be loaded: libsoftrnic.so: cannot open shared object file",
        "cannot start: libsoftrnic could not be loaded",
    ] {
        assert!(
            e.lines()
                .any(|l| l.contains(":softrnic:") && l.contains(want)),
            "no warning {want:?}:\n{e}"
        );
    }
}
