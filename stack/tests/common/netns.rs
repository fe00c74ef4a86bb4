//! Network namespaces for the root-only tests: made with `ip`, entered by a thread (threads
//! it starts inherit it), deleted on drop.

use std::fs::File;
use std::os::fd::AsFd;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// Runs `ip ARGS`, failing the test if it fails.
pub fn ip(args: &[&str]) {
    run("ip", args);
}

/// Runs a command, failing the test if it fails.
pub fn run(cmd: &str, args: &[&str]) {
    let s = Command::new(cmd).args(args).status().expect(cmd);
    assert!(s.success(), "{cmd} {args:?} failed");
}

/// A network namespace (with its loopback up), deleted on drop.
pub struct Netns(pub String);

impl Netns {
    /// `srnic-TAG<pid>-<n>`: the pid keeps test processes apart, `n` (a count per
    /// process) the tests of one process that run in parallel with the same tag.
    pub fn new(tag: &str) -> Netns {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let ns = format!("srnic-{tag}{}-{n}", std::process::id() % 100_000);
        ip(&["netns", "add", &ns]);
        ip(&["-n", &ns, "link", "set", "lo", "up"]);
        Netns(ns)
    }

    /// `ip -n NS ARGS`.
    pub fn ip(&self, args: &[&str]) {
        let mut all = vec!["-n", self.0.as_str()];
        all.extend_from_slice(args);
        ip(&all);
    }

    /// Moves the calling thread into the namespace.
    pub fn enter(&self) {
        enter(&self.0);
    }
}

/// Moves the calling thread into namespace `ns`.
pub fn enter(ns: &str) {
    let f = File::open(format!("/var/run/netns/{ns}")).expect("netns");
    rustix::thread::move_into_link_name_space(
        f.as_fd(),
        Some(rustix::thread::LinkNameSpaceType::Network),
    )
    .expect("setns");
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// A packet capture with tcpdump on an interface of a namespace, stopped on drop (or by
/// [`Capture::finish`], which returns the file's path).
pub struct Capture {
    child: Option<std::process::Child>,
    path: std::path::PathBuf,
}

impl Capture {
    /// Starts capturing on `iface` of `ns` into a fresh file under the system's temporary
    /// directory; returns once tcpdump listens.
    pub fn start(ns: &Netns, iface: &str, name: &str) -> Capture {
        assert!(
            Command::new("tcpdump").arg("--version").output().is_ok(),
            "tcpdump is missing: scripts/install-xdp-deps.sh installs it"
        );
        let path = std::env::temp_dir().join(format!("{name}-{}.pcap", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let child = Command::new("ip")
            .args([
                "netns", "exec", &ns.0, "tcpdump", "-i", iface, "-s", "0", "-U", "-w",
            ])
            .arg(&path)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("tcpdump");
        // tcpdump writes the file header once it listens.
        let t0 = std::time::Instant::now();
        while std::fs::metadata(&path).map_or(true, |m| m.len() < 24) {
            assert!(
                t0.elapsed() < std::time::Duration::from_secs(10),
                "tcpdump did not start"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        std::thread::sleep(std::time::Duration::from_millis(300));
        Capture {
            child: Some(child),
            path,
        }
    }

    /// [`Capture::start`] when tcpdump is installed; otherwise says so and returns `None`.
    pub fn start_if_available(ns: &Netns, iface: &str, name: &str) -> Option<Capture> {
        if Command::new("tcpdump").arg("--version").output().is_err() {
            eprintln!("capture SKIPPED: tcpdump is not installed (scripts/install-xdp-deps.sh)");
            return None;
        }
        Some(Capture::start(ns, iface, name))
    }

    /// Stops tcpdump (SIGTERM: it flushes and closes the file) and returns the path.
    pub fn finish(mut self) -> std::path::PathBuf {
        self.stop();
        self.path.clone()
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let pid = child.id().to_string();
            let _ = Command::new("kill").args(["-TERM", &pid]).status();
            let _ = child.wait();
        }
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Random loss for the kernel's TCP in `ns`: nftables drops `percent` % of the TCP packets
/// the kernel receives and of those it sends, counting what it dropped.
pub fn tcp_loss(ns: &Netns, percent: u32) {
    assert!(
        Command::new("nft").arg("--version").output().is_ok(),
        "nft is missing: scripts/install-xdp-deps.sh installs nftables"
    );
    let rules = format!(
        "table inet loss {{
            chain in {{ type filter hook input priority 0; meta l4proto tcp numgen random mod 100 < {percent} counter drop; }}
            chain out {{ type filter hook output priority 0; meta l4proto tcp numgen random mod 100 < {percent} counter drop; }}
        }}"
    );
    let mut child = Command::new("ip")
        .args(["netns", "exec", &ns.0, "nft", "-f", "-"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("nft");
    use std::io::Write as _;
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(rules.as_bytes())
        .expect("nft rules");
    assert!(child.wait().expect("nft").success(), "nft -f failed");
}

/// Packets [`tcp_loss`] dropped so far in `ns` (both directions).
pub fn tcp_dropped(ns: &Netns) -> u64 {
    let out = Command::new("ip")
        .args([
            "netns", "exec", &ns.0, "nft", "list", "table", "inet", "loss",
        ])
        .output()
        .expect("nft list");
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace()
        .collect::<Vec<_>>()
        .windows(2)
        .filter(|w| w[0] == "packets")
        .filter_map(|w| w[1].parse::<u64>().ok())
        .sum()
}

/// Decodes a capture with softrnic's decoder and checks it: at least one MPA connection,
/// more than `min_fpdus` FPDUs, no protocol error. Returns a one-line summary; the file is
/// removed when it passes.
pub fn check_capture(path: &std::path::Path, min_fpdus: u64) -> String {
    let frames = decode::capture::read_file(path).expect("capture");
    let report = decode::decode_frames(&frames);
    let mpa = report.mpa_connections().count();
    let fpdus: u64 = report
        .mpa_connections()
        .map(|c| c.fpdus[0] + c.fpdus[1])
        .sum();
    assert!(mpa >= 1 && fpdus > min_fpdus, "{path:?}: {report:?}");
    assert_eq!(report.errors(), 0, "{path:?} decodes with errors");
    let _ = std::fs::remove_file(path);
    format!(
        "{} frames, {mpa} MPA connection(s), {fpdus} FPDUs, 0 errors",
        report.frames
    )
}
