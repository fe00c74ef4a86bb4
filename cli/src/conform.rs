//! `softrnic conform`: runs the conformance catalogue (the `conform` crate) against a live
//! iWARP peer and prints the report; writes JSON, JUnit XML and the run's capture.

use std::io::Write;
use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, ValueEnum};
use conform::{Config, Llp, PeerApp, Verdict};

/// rping's port, the default peer port.
const DEFAULT_PORT: u16 = 7174;
/// perftest's port, the default with a perftest application.
const PERFTEST_PORT: u16 = 18515;

/// The peer's application, as the cases may assume it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum AppArg {
    /// An rping server (`rping -s -P`, `softrnic rping -s -P`).
    RpingServer,
    /// An rping client connecting once per case (with --listen).
    RpingClient,
    /// A perftest RDMA Write bandwidth server speaking `-R` (`ib_write_bw -R`, `softrnic
    /// write-bw`; default port 18515), started again for every case (it serves one test):
    /// the runner plays perftest's client up to the run, then sends its segments on the test
    /// connection. Its buffer grants remote write only, so ddp-access is judged; cases that
    /// need a posted receive, remote read or two connections are N/A, and so are the Read and
    /// Atomic cases when its Reply grants IRD 0 (perftest's Write setting: give `softrnic
    /// write-bw` --ird 1 --ord 1).
    WriteBwServer,
    /// A perftest RDMA Read bandwidth server speaking `-R` (`ib_read_bw -R`, `softrnic
    /// read-bw`; port 18515), started again for every case; its buffer grants remote read
    /// and write.
    ReadBwServer,
    /// A perftest Atomic bandwidth server speaking `-R` (`ib_atomic_bw -R`, `softrnic
    /// atomic-bw`; port 18515), started again for every case; its buffer grants remote atomic
    /// access only, so the RFC 7306 Atomic cases (rdmap-atomic, rdmap-atomic-alignment) are
    /// judged on it.
    AtomicBwServer,
    /// A perftest `-R` client connecting once per case (with --listen), e.g. `while
    /// ib_write_bw -R -p PORT RUNNER; do :; done`: its first FPDU must be its version string.
    PerftestClient,
    /// Unknown application: connection setup cases and those that need no buffers only.
    Bare,
}

/// The lower layer the cases run over.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LlpArg {
    /// MPA over TCP: the RFC 5044/6581/5041/5040/7306 cases.
    Mpa,
    /// DDP over softrnic's SCTP, UDP-encapsulated (RFC 6951): the RFC 5043 cases; the peer
    /// is its SCTP address and port, e.g. `softrnic rping -s -P --transport sctp+udp`.
    Sctp,
}

/// Options of `softrnic conform`.
#[derive(Args, Clone, Debug)]
pub struct ConformArgs {
    /// The peer, listening: ADDR or ADDR:PORT (when omitted, port 7174, rping's, or 18515,
    /// perftest's, with --app write-bw-server, read-bw-server or atomic-bw-server).
    #[arg(value_name = "ADDR[:PORT]", required_unless_present_any = ["list", "listen"],
          conflicts_with = "listen")]
    pub peer: Option<String>,
    /// The peer initiates: listen on PORT or ADDR:PORT (0: any free port; the address is
    /// printed on stderr) and take one connection from the peer per case, e.g. from
    /// `while rping -c -a RUNNER -p PORT -C 1; do :; done`.
    #[arg(long, value_name = "[ADDR:]PORT")]
    pub listen: Option<String>,
    /// The lower layer: `mpa` (TCP) or `sctp` (the RFC 5043 cases over SCTP/UDP).
    #[arg(long, value_enum, default_value = "mpa", conflicts_with = "listen")]
    pub llp: LlpArg,
    /// With --llp sctp: the peer's UDP encapsulation port.
    #[arg(long = "udp-port", value_name = "PORT", default_value_t = sctp_io::SCTP_UDP_PORT)]
    pub udp_port: u16,
    /// What the peer's application does (what DDP/RDMAP cases may rely on) [default:
    /// rping-server, with --listen rping-client]. With --listen: rping-client,
    /// perftest-client or bare; without: rping-server, write-bw-server, read-bw-server,
    /// atomic-bw-server or bare.
    #[arg(long, value_enum)]
    pub app: Option<AppArg>,
    /// With --listen: seconds each case waits for the peer to connect (1-3600).
    #[arg(long, value_name = "SECS", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub accept_timeout: u64,
    /// Run only cases whose id or RFC clause contains PATTERN (repeatable, case-insensitive);
    /// `=ID` runs the case ID alone (e.g. --case =mpa-crc, not mpa-crc-error).
    #[arg(long = "case", value_name = "PATTERN")]
    pub cases: Vec<String>,
    /// Leave out cases whose id or RFC clause contains PATTERN (repeatable).
    #[arg(long = "skip", value_name = "PATTERN")]
    pub skip: Vec<String>,
    /// List the catalogue (id, clause, requirement) and exit.
    #[arg(long)]
    pub list: bool,
    /// Write the report as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write the report as JUnit XML to FILE.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Write the run's capture (every byte both ways, pcap) to FILE.
    #[arg(long, value_name = "FILE", default_value = "softrnic-conform.pcap")]
    pub pcap: PathBuf,
    /// Seconds to wait for each answer of the peer (1-600).
    #[arg(long, value_name = "SECS", default_value_t = 3,
          value_parser = clap::value_parser!(u64).range(1..=600))]
    pub step_timeout: u64,
    /// Seconds the Request-timeout case waits for the peer to give up (1-600).
    #[arg(long, value_name = "SECS", default_value_t = 8,
          value_parser = clap::value_parser!(u64).range(1..=600))]
    pub request_timeout: u64,
    /// Hold the first FPDU this many milliseconds after the MPA Reply (50 for Linux siw 6.1).
    #[arg(long = "first-fpdu-delay-ms", value_name = "MS", default_value_t = 0)]
    pub first_fpdu_delay_ms: u64,
    /// Set C (CRC) in every MPA Request, for peers that refuse a Request without it (one case
    /// still sends C 0 to find that out).
    #[arg(long)]
    pub crc: bool,
    /// Exit non-zero on DEVIATION as well as on FAIL.
    #[arg(long)]
    pub strict: bool,
    /// No progress lines on stderr.
    #[arg(short = 'q', long)]
    pub quiet: bool,
}

fn resolve(peer: &str, default_port: u16) -> Result<SocketAddr, String> {
    if let Ok(a) = peer.parse::<SocketAddr>() {
        return Ok(a);
    }
    let with_port =
        if peer.contains(':') && !peer.starts_with('[') && peer.matches(':').count() == 1 {
            peer.to_string()
        } else {
            format!("{peer}:{default_port}")
        };
    with_port
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {peer}: {e}"))?
        .next()
        .ok_or_else(|| format!("cannot resolve {peer}"))
}

/// Binds the listener of --listen: `PORT` (all addresses) or `ADDR:PORT`.
fn bind(spec: &str) -> Result<TcpListener, String> {
    let addr = match spec.parse::<u16>() {
        Ok(port) => SocketAddr::from(([0, 0, 0, 0], port)),
        Err(_) => resolve(spec, DEFAULT_PORT)?,
    };
    TcpListener::bind(addr).map_err(|e| format!("cannot listen on {addr}: {e}"))
}

fn write_file(path: &PathBuf, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Runs `softrnic conform`. Exit status: 0 no case failed, 1 a case failed (or deviated,
/// with --strict), 2 bad arguments, no connection at all, or files that could not be
/// written.
pub fn run_command(a: &ConformArgs, out: &mut dyn Write) -> ExitCode {
    if a.list {
        for c in conform::catalogue() {
            let role = if c.peer_initiates {
                "initiator"
            } else if c.sctp {
                "sctp"
            } else {
                "responder"
            };
            let _ = writeln!(
                out,
                "{:<26} {role:<9} {:<40} {}",
                c.id, c.clause, c.requires
            );
        }
        return ExitCode::SUCCESS;
    }
    let listener = match a.listen.as_deref().map(bind) {
        None => None,
        Some(Ok(l)) => Some(l),
        Some(Err(e)) => {
            eprintln!("softrnic conform: {e}");
            return ExitCode::from(2);
        }
    };
    let peer = match (&listener, a.peer.as_deref()) {
        (Some(l), _) => match l.local_addr() {
            Ok(addr) => addr,
            Err(e) => {
                eprintln!("softrnic conform: {e}");
                return ExitCode::from(2);
            }
        },
        (None, Some(p)) => match resolve(
            p,
            match a.app {
                Some(AppArg::WriteBwServer | AppArg::ReadBwServer | AppArg::AtomicBwServer) => {
                    PERFTEST_PORT
                }
                _ => DEFAULT_PORT,
            },
        ) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("softrnic conform: {e}");
                return ExitCode::from(2);
            }
        },
        (None, None) => {
            eprintln!("softrnic conform: give the peer's ADDR[:PORT] or --listen PORT");
            return ExitCode::from(2);
        }
    };
    let mut cfg = Config::new(peer);
    cfg.listen = listener.is_some();
    cfg.llp = match a.llp {
        LlpArg::Mpa => Llp::Mpa,
        LlpArg::Sctp => Llp::SctpUdp {
            udp_port: a.udp_port,
        },
    };
    cfg.accept_timeout = Duration::from_secs(a.accept_timeout);
    cfg.app = match a.app {
        Some(AppArg::RpingServer) => PeerApp::RpingServer,
        Some(AppArg::RpingClient) => PeerApp::RpingClient,
        Some(AppArg::WriteBwServer) => PeerApp::WriteBwServer,
        Some(AppArg::ReadBwServer) => PeerApp::ReadBwServer,
        Some(AppArg::AtomicBwServer) => PeerApp::AtomicBwServer,
        Some(AppArg::PerftestClient) => PeerApp::PerftestClient,
        Some(AppArg::Bare) => PeerApp::Bare,
        None if cfg.listen => PeerApp::RpingClient,
        None => PeerApp::RpingServer,
    };
    if cfg.app != PeerApp::Bare && cfg.app.initiates() != cfg.listen {
        eprintln!(
            "softrnic conform: --app {} is {}",
            cfg.app.name(),
            if cfg.listen {
                "a responder; with --listen the peer initiates (--app rping-client, perftest-client or bare)"
            } else {
                "an initiator: give --listen [ADDR:]PORT and let it connect"
            }
        );
        return ExitCode::from(2);
    }
    cfg.step = Duration::from_secs(a.step_timeout);
    cfg.request_timeout = Duration::from_secs(a.request_timeout);
    cfg.first_fpdu_delay = Duration::from_millis(a.first_fpdu_delay_ms);
    cfg.crc = a.crc;
    cfg.select = a.cases.clone();
    cfg.skip = a.skip.clone();
    let total = conform::selected(&cfg).len();
    if total == 0 {
        eprintln!(
            "softrnic conform: no case left by --case {:?} --skip {:?} (see --list)",
            a.cases, a.skip
        );
        return ExitCode::from(2);
    }
    let mut done = 0;
    let quiet = a.quiet;
    let progress = |r: &conform::CaseResult| {
        done += 1;
        if !quiet {
            eprintln!("[{done:>2}/{total}] {:<26} {}", r.id, r.verdict);
        }
    };
    let report = match &listener {
        Some(l) => {
            // Scripts and tests read the port from this line (useful with --listen 0).
            eprintln!("softrnic conform: listening on {peer}");
            conform::run_listening(&cfg, l, progress)
        }
        None => conform::run(&cfg, progress),
    };
    let _ = write!(out, "{}", conform::report::table(&report));
    let mut status = 0u8;
    let file = std::fs::File::create(&a.pcap)
        .map_err(|e| format!("cannot write {}: {e}", a.pcap.display()))
        .and_then(|f| {
            conform::capture::write_pcap(&report.connections, std::io::BufWriter::new(f))
        });
    match file {
        Ok(()) => {
            let _ = writeln!(out, "capture: {}", a.pcap.display());
        }
        Err(e) => {
            eprintln!("softrnic conform: {e}");
            status = 2;
        }
    }
    if let Some(p) = &a.json
        && let Err(e) = write_file(p, &conform::report::json(&report))
    {
        eprintln!("softrnic conform: {e}");
        status = 2;
    }
    if let Some(p) = &a.junit
        && let Err(e) = write_file(p, &conform::report::junit(&report))
    {
        eprintln!("softrnic conform: {e}");
        status = 2;
    }
    if report.connections.is_empty() && report.associations == 0 && report.count(Verdict::Fail) > 0
    {
        eprintln!(
            "softrnic conform: no connection {} {peer}: nothing was tested",
            if cfg.listen {
                "came to"
            } else {
                "could be made to"
            }
        );
        return ExitCode::from(2);
    }
    if status == 0
        && (report.count(Verdict::Fail) > 0 || (a.strict && report.count(Verdict::Deviation) > 0))
    {
        status = 1;
    }
    ExitCode::from(status)
}
