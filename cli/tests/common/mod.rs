//! What the process tests share: the `softrnic` binary, and a server tool run as a child
//! process whose port is read from its output, whose output is drained (so it never blocks
//! on a full pipe) and kept, and which is killed when the test lets go of it.

// Each test file uses part of this module.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The `softrnic` binary under test.
pub fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_softrnic"))
}

/// `sctp-perf -c` over UDP encapsulation to the [`Server::sctp_perf`] on SCTP port
/// `sctp_port` and UDP port `udp`.
pub fn sctp_perf_client(sctp_port: u16, udp: u16) -> Command {
    let mut c = bin();
    c.args([
        "sctp-perf",
        "-c",
        "127.0.0.1",
        "--udp-encap",
        "--udp-local-port",
        "0",
    ])
    .args(["--udp-port", &udp.to_string(), "-p", &sctp_port.to_string()]);
    c
}

/// How long a server may take to name its port.
const PORT_TIMEOUT: Duration = Duration::from_secs(20);

/// Output kept per stream: enough to explain a failure (a long soak logs a line per hostile
/// peer).
const KEPT: usize = 1 << 16;

/// `rping -s`: the port of its "rping: listening on ADDR:PORT" line.
fn rping_port(line: &str) -> Option<u16> {
    line.strip_prefix("rping: listening on ")
        .and_then(|a| a.rsplit(':').next())
        .and_then(|p| p.parse().ok())
}

/// The perftest-style servers: the port of "Waiting for client to connect on port PORT".
pub fn perf_port(line: &str) -> Option<u16> {
    line.trim()
        .strip_prefix("Waiting for client to connect on port ")
        .and_then(|p| p.parse().ok())
}

/// `sctp-perf -s --udp-encap`: the UDP port of its "local UDP port PORT," line.
fn sctp_perf_port(line: &str) -> Option<u16> {
    line.split("local UDP port ")
        .nth(1)
        .and_then(|r| r.split(',').next())
        .and_then(|p| p.trim().parse().ok())
}

/// What a server printed on one stream, as far as it is kept.
type Kept = Arc<Mutex<String>>;

/// A thread that reads `stream` line by line, keeps the lines in `kept` and sends the port
/// of each line `port_of` recognises.
fn drain(
    stream: impl Read + Send + 'static,
    kept: &Kept,
    port: &Sender<u16>,
    port_of: fn(&str) -> Option<u16>,
) -> JoinHandle<()> {
    let (kept, port) = (Arc::clone(kept), port.clone());
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            if let Some(p) = port_of(&line) {
                let _ = port.send(p);
            }
            let mut kept = kept.lock().unwrap_or_else(|p| p.into_inner());
            if kept.len() < KEPT {
                kept.push_str(&line);
                kept.push('\n');
            }
        }
    })
}

/// A server that has exited: its status and what it printed.
#[derive(Debug)]
pub struct Exit {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Exit {
    /// Standard output followed by standard error.
    pub fn text(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }
}

/// A server tool on an ephemeral port, killed on drop.
pub struct Server {
    child: Child,
    /// The port the server named.
    pub port: u16,
    stdout: Kept,
    stderr: Kept,
    readers: Vec<JoinHandle<()>>,
}

impl Server {
    /// Starts `softrnic ARGS` and reads its port from the first line on stdout or stderr that
    /// `port_of` recognises. Panics, with the server's output, if the server exits first or
    /// names no port within 20 s.
    pub fn start(args: &[&str], port_of: fn(&str) -> Option<u16>) -> Server {
        let mut child = bin()
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn server");
        let (tx, rx) = std::sync::mpsc::channel();
        let stdout = Kept::default();
        let stderr = Kept::default();
        let readers = vec![
            drain(child.stdout.take().expect("stdout"), &stdout, &tx, port_of),
            drain(child.stderr.take().expect("stderr"), &stderr, &tx, port_of),
        ];
        // The readers hold the only senders: the port, or the news that the server is gone.
        drop(tx);
        let mut server = Server {
            child,
            port: 0,
            stdout,
            stderr,
            readers,
        };
        match rx.recv_timeout(PORT_TIMEOUT) {
            Ok(port) => server.port = port,
            Err(RecvTimeoutError::Timeout) => {
                panic!("{args:?} named no port:\n{}", server.kill().text())
            }
            Err(RecvTimeoutError::Disconnected) => {
                panic!(
                    "{args:?} exited before naming its port:\n{}",
                    server.wait().text()
                )
            }
        }
        server
    }

    /// `rping -s -a 127.0.0.1 -p 0 -d EXTRA`: rping's server on an ephemeral port.
    pub fn rping(extra: &[&str]) -> Server {
        let mut args = vec!["rping", "-s", "-a", "127.0.0.1", "-p", "0", "-d"];
        args.extend_from_slice(extra);
        Server::start(&args, rping_port)
    }

    /// `TOOL -p 0 ARGS`: a perftest-style server on an ephemeral port.
    pub fn perf(tool: &str, args: &[&str]) -> Server {
        let mut cmd = vec![tool, "-p", "0"];
        cmd.extend_from_slice(args);
        Server::start(&cmd, perf_port)
    }

    /// `sctp-perf -s` over UDP encapsulation (RFC 6951) on SCTP port `sctp_port`; its
    /// [`port`](Server::port) is the UDP port, an ephemeral one.
    pub fn sctp_perf(sctp_port: u16) -> Server {
        Server::sctp_perf_with(sctp_port, &[])
    }

    /// [`Server::sctp_perf`] with further options.
    pub fn sctp_perf_with(sctp_port: u16, extra: &[&str]) -> Server {
        let sctp_port = sctp_port.to_string();
        let mut args = vec![
            "sctp-perf",
            "-s",
            "--udp-encap",
            "--udp-local-port",
            "0",
            "-i",
            "0",
            "-p",
            &sctp_port,
        ];
        args.extend_from_slice(extra);
        Server::start(&args, sctp_perf_port)
    }

    /// The server's process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Whether the server is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The first line on the server's stderr that `wanted` accepts, waiting up to `timeout`
    /// for it; `None` if none came (or the kept output was full).
    pub fn stderr_line(&self, wanted: impl Fn(&str) -> bool, timeout: Duration) -> Option<String> {
        let t0 = Instant::now();
        loop {
            let kept = self.stderr.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(line) = kept.lines().find(|l| wanted(l)) {
                return Some(line.to_owned());
            }
            drop(kept);
            if t0.elapsed() > timeout {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits for the server to exit on its own.
    pub fn wait(mut self) -> Exit {
        let status = self.child.wait().expect("wait for the server");
        self.collect(status)
    }

    /// Kills the server.
    pub fn kill(mut self) -> Exit {
        let _ = self.child.kill();
        let status = self.child.wait().expect("wait for the server");
        self.collect(status)
    }

    /// The exit of a reaped server, with all it printed.
    fn collect(&mut self, status: ExitStatus) -> Exit {
        for r in self.readers.drain(..) {
            let _ = r.join();
        }
        let take =
            |s: &Mutex<String>| std::mem::take(&mut *s.lock().unwrap_or_else(|p| p.into_inner()));
        Exit {
            status,
            stdout: take(&self.stdout),
            stderr: take(&self.stderr),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // Nothing to do for a server already reaped by wait or kill.
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
