//! # softrnic-conform — clause-by-clause conformance testing of an iWARP peer
//!
//! The runner is a raw MPA/DDP/RDMAP endpoint on a plain TCP socket: it builds MPA frames
//! and FPDUs itself (with the protocol crates' emitters, or by hand when a case needs a
//! malformed or unusual one), sends them to a live peer, parses the peer's answers with the
//! protocol crates and gives each case a [`Verdict`]. Every case:
//!
//! * is named by the RFC clause it checks ([`Case::clause`]) and says what it sends and what
//!   the RFC requires of the peer;
//! * runs on a connection of its own (a failing case cannot disturb the next);
//! * records every byte both ways, so that a run leaves a capture ([`capture::write_pcap`]);
//! * is deterministic: the same peer gives the same exchange (no randomness).
//!
//! With [`Llp::SctpUdp`] the run takes the RFC 5043 cases instead: the runner is then a raw
//! DDP-over-SCTP endpoint on softrnic's SCTP (RFC 6951 UDP encapsulation), one association
//! per case, and sends session control messages and DDP Segments built by hand.
//!
//! ## Verdicts
//!
//! PASS, FAIL, DEVIATION — the peer broke the rule in a known, documented way (the reason
//! names it: Linux siw 6.1's Terminate layout, its Write RTR when only Send was offered and
//! its cause for an inbound Read queue overrun, Chelsio's refusal of a Ready-to-Receive with
//! STag 0) — and N/A (the peer declined an optional feature, e.g. rejected markers, or the
//! case needs an application behaviour the peer's application does not have).
//!
//! ## The peer's application
//!
//! Connection setup needs only the peer's RNIC, but DDP and RDMAP cases need to know what the
//! application behind it does: which receives it posts and which buffers it exposes. The
//! [`PeerApp`] says which application the peer runs; the cases that depend on it state their
//! assumptions per application ([`PeerApp::RpingServer`]: librdmacm's `rping -s`, which
//! `softrnic rping -s` reproduces on the wire).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod capture;
mod cases;
pub mod report;
mod sctp;
pub mod wire;

use std::net::{SocketAddr, TcpListener};
use std::time::{Duration, Instant};

use serde::Serialize;

pub use capture::ConnRecord;
pub use cases::catalogue;

/// A case's result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Verdict {
    /// The peer did what the RFC requires.
    Pass,
    /// The peer broke the rule.
    Fail,
    /// The peer broke the rule in a known, documented way (see the case's reason).
    Deviation,
    /// The case does not apply: the peer declined an optional feature, or its application
    /// does not offer what the case needs.
    #[serde(rename = "N/A")]
    NotApplicable,
}

impl Verdict {
    /// The verdict as the report prints it.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "PASS",
            Verdict::Fail => "FAIL",
            Verdict::Deviation => "DEVIATION",
            Verdict::NotApplicable => "N/A",
        }
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The application the peer runs (what the DDP and RDMAP cases may rely on).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PeerApp {
    /// An rping server (librdmacm's `rping -s`, `softrnic rping -s`): accepts with IRD/ORD
    /// 1/1 and no private data; keeps one 16-octet receive posted (reposted after each
    /// Send arrives); on the client's first Send `{u64 buf, u32 rkey, u32 size}` (big
    /// endian) it RDMA-Reads `size` octets from `buf` into its own rdma buffer, which it
    /// registered with local write, remote read and remote write rights, so the Read
    /// Request reveals that buffer's STag and address. It never sends first.
    RpingServer,
    /// An rping client (librdmacm's `rping -c`, `softrnic rping -c`), connecting to the
    /// runner once per case: its Request has IRD/ORD 1/1 and no private data, and its first
    /// FPDU (after any peer-to-peer RTR) is a Send of 16 octets advertising its start buffer.
    RpingClient,
    /// A perftest `-R` (rdma_cm) server of RDMA Write bandwidth (`ib_write_bw -R`, `softrnic
    /// write-bw`), serving one test: the runner plays the client's side of the protocol (a
    /// control connection with IRD/ORD 0/0 and its exchanges by Send — version, cycle
    /// buffer, cache line, MTU, a zero `pingpong_dest` —, the test connection, a zero
    /// `pingpong_dest`, then three giving the server's STag and buffer address, see
    /// [`wire::Dest`]) and then sends its segments on the test connection. The server posts
    /// no receive on the test connection, and registers its buffer with local and remote
    /// write rights only (no remote read).
    WriteBwServer,
    /// A perftest `-R` server of RDMA Read bandwidth (`ib_read_bw -R`, `softrnic read-bw`),
    /// driven as [`PeerApp::WriteBwServer`]; its buffer grants remote read and (as iWARP needs
    /// for a Read's sink) remote write.
    ReadBwServer,
    /// A perftest `-R` server of Atomic bandwidth (`ib_atomic_bw -R`, `softrnic atomic-bw`),
    /// driven as [`PeerApp::WriteBwServer`]; its buffer grants remote atomic access only (no
    /// remote read or write), so the RFC 7306 Atomic cases are judged on it.
    AtomicBwServer,
    /// A perftest `-R` client (`ib_write_bw -R ADDR`, any of perftest's `-R` tools, `softrnic
    /// write-bw ADDR -R`), started once per case: its first connection is the control
    /// connection, with no private data, and its first FPDU there (after any peer-to-peer
    /// RTR) is a Send, MSN 1, of its 16-octet version string.
    PerftestClient,
    /// Nothing is known about the application: only connection setup cases run.
    Bare,
}

impl PeerApp {
    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            PeerApp::RpingServer => "rping-server",
            PeerApp::RpingClient => "rping-client",
            PeerApp::WriteBwServer => "write-bw-server",
            PeerApp::ReadBwServer => "read-bw-server",
            PeerApp::AtomicBwServer => "atomic-bw-server",
            PeerApp::PerftestClient => "perftest-client",
            PeerApp::Bare => "bare",
        }
    }

    /// A perftest `-R` server (the runner plays perftest's client).
    pub fn is_perftest(self) -> bool {
        matches!(
            self,
            PeerApp::WriteBwServer | PeerApp::ReadBwServer | PeerApp::AtomicBwServer
        )
    }

    /// An application that initiates (the runner listens: `--listen`).
    pub fn initiates(self) -> bool {
        matches!(self, PeerApp::RpingClient | PeerApp::PerftestClient)
    }
}

/// The lower layer the run tests the peer over.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Llp {
    /// MPA over TCP (RFC 5044, RFC 6581): the MPA, DDP and RDMAP cases.
    Mpa,
    /// DDP over SCTP (RFC 5043) on softrnic's SCTP with RFC 6951 UDP encapsulation: the
    /// RFC 5043 cases. `peer` is the peer's IP address and SCTP port.
    SctpUdp {
        /// The peer's UDP encapsulation port.
        udp_port: u16,
    },
}

impl Llp {
    /// The lower layer in words, for the report.
    pub fn describe(self) -> String {
        match self {
            Llp::Mpa => "MPA/TCP".to_string(),
            Llp::SctpUdp { udp_port } => format!("DDP over SCTP/UDP, UDP port {udp_port}"),
        }
    }
}

/// Settings of a run.
#[derive(Clone, Debug)]
pub struct Config {
    /// The peer (listening; the runner connects), or with `listen` the runner's own
    /// listening address.
    pub peer: SocketAddr,
    /// The lower layer: MPA over TCP, or DDP over SCTP (the RFC 5043 cases).
    pub llp: Llp,
    /// The peer initiates: the runner listens ([`run_listening`]) and runs the cases of the
    /// peer as initiator.
    pub listen: bool,
    /// What the peer's application does.
    pub app: PeerApp,
    /// How long to wait for each answer of the peer.
    pub step: Duration,
    /// With `listen`: how long each case waits for the peer to connect.
    pub accept_timeout: Duration,
    /// How long the MPA Request timeout case waits for the peer to give up on a silent
    /// initiator (Linux siw and softrnic give up after 5 s).
    pub request_timeout: Duration,
    /// Hold the first FPDU this long after the MPA Reply (Linux siw 6.1 may leave an FPDU
    /// that arrives right after its Reply unread; 50 ms suffices).
    pub first_fpdu_delay: Duration,
    /// Set C in every Request (except the case that checks a Request without it), for peers
    /// that refuse a Request without C.
    pub crc: bool,
    /// Run only the cases whose id or clause contains one of these (all when empty).
    pub select: Vec<String>,
    /// Leave out the cases whose id or clause contains one of these.
    pub skip: Vec<String>,
}

impl Config {
    /// Defaults for `peer` running an rping server: 3 s per step, 30 s for a connection in
    /// listening mode, 8 s for the Request timeout, no first-FPDU delay, every case.
    pub fn new(peer: SocketAddr) -> Config {
        Config {
            peer,
            llp: Llp::Mpa,
            listen: false,
            app: PeerApp::RpingServer,
            step: Duration::from_secs(3),
            accept_timeout: Duration::from_secs(30),
            request_timeout: Duration::from_secs(8),
            first_fpdu_delay: Duration::ZERO,
            crc: false,
            select: Vec::new(),
            skip: Vec::new(),
        }
    }
}

/// One test case of the catalogue.
#[derive(Clone, Copy)]
pub struct Case {
    /// Short identifier (`mpa-rev1`, `ddp-tagged-invalid-stag`, ...).
    pub id: &'static str,
    /// The RFC clause checked.
    pub clause: &'static str,
    /// What the RFC requires of the peer.
    pub requires: &'static str,
    /// The case needs the peer as initiator (the runner listens).
    pub peer_initiates: bool,
    /// An RFC 5043 case, run over DDP over SCTP ([`Llp::SctpUdp`]).
    pub sctp: bool,
    /// How it drives the peer and judges the answer.
    run: cases::Drive,
}

impl std::fmt::Debug for Case {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Case")
            .field("id", &self.id)
            .field("clause", &self.clause)
            .finish()
    }
}

impl Case {
    /// Whether `pattern` selects this case: a substring of its id or clause, ignoring case;
    /// `=ID` selects the case whose id is ID and no other (one case per run, e.g. against a
    /// peer application restarted for every case).
    pub fn matches(&self, pattern: &str) -> bool {
        if let Some(id) = pattern.strip_prefix('=') {
            return self.id.eq_ignore_ascii_case(id);
        }
        let p = pattern.to_ascii_lowercase();
        self.id.to_ascii_lowercase().contains(&p) || self.clause.to_ascii_lowercase().contains(&p)
    }
}

/// What a case found.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// What the runner sent.
    pub sent: String,
    /// What the peer did.
    pub observed: String,
    /// The verdict.
    pub verdict: Verdict,
    /// Why (for FAIL, DEVIATION and N/A: the rule broken, the known deviation, what was
    /// declined).
    pub reason: String,
}

impl Outcome {
    fn new(verdict: Verdict, sent: impl Into<String>, observed: impl Into<String>) -> Outcome {
        Outcome {
            sent: sent.into(),
            observed: observed.into(),
            verdict,
            reason: String::new(),
        }
    }

    fn because(mut self, reason: impl Into<String>) -> Outcome {
        self.reason = reason.into();
        self
    }
}

/// The result of one case.
#[derive(Clone, Debug, Serialize)]
pub struct CaseResult {
    /// The case's id.
    pub id: String,
    /// The RFC clause.
    pub clause: String,
    /// What the runner sent.
    pub sent: String,
    /// What the RFC requires.
    pub requires: String,
    /// What the peer did.
    pub observed: String,
    /// The verdict.
    pub verdict: Verdict,
    /// Why (empty for PASS).
    pub reason: String,
    /// How long the case took, in milliseconds.
    pub millis: u64,
}

/// The results of a run.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// The peer.
    pub peer: String,
    /// Its application.
    pub app: PeerApp,
    /// The lower layer.
    pub llp: Llp,
    /// SCTP associations the run opened (DDP over SCTP; they are not in the capture).
    pub associations: usize,
    /// One result per case run, in catalogue order.
    pub results: Vec<CaseResult>,
    /// Every connection of the run (for the capture).
    #[serde(skip)]
    pub connections: Vec<ConnRecord>,
}

impl Report {
    /// How many cases had `v`.
    pub fn count(&self, v: Verdict) -> usize {
        self.results.iter().filter(|r| r.verdict == v).count()
    }

    /// The summary line: totals per verdict.
    pub fn summary(&self) -> String {
        format!(
            "{} cases: {} PASS, {} FAIL, {} DEVIATION, {} N/A",
            self.results.len(),
            self.count(Verdict::Pass),
            self.count(Verdict::Fail),
            self.count(Verdict::Deviation),
            self.count(Verdict::NotApplicable),
        )
    }

    /// The result of case `id`.
    pub fn result(&self, id: &str) -> Option<&CaseResult> {
        self.results.iter().find(|r| r.id == id)
    }
}

/// A case's view of the run: the settings, the listener (peer as initiator) and the
/// connections it opened.
pub struct Ctx<'a> {
    cfg: &'a Config,
    listener: Option<&'a TcpListener>,
    case: &'static str,
    conns: Vec<ConnRecord>,
    /// Connections that stay open until the case is over (a perftest control connection).
    held: Vec<wire::Conn>,
    associations: usize,
}

/// The cases of the run's mode (`cfg.listen`) that `cfg.select` picks and `cfg.skip` leaves,
/// in catalogue order.
pub fn selected(cfg: &Config) -> Vec<Case> {
    catalogue()
        .iter()
        .copied()
        .filter(|c| c.peer_initiates == cfg.listen)
        .filter(|c| c.sctp == (cfg.llp != Llp::Mpa))
        .filter(|c| cfg.select.is_empty() || cfg.select.iter().any(|p| c.matches(p)))
        .filter(|c| !cfg.skip.iter().any(|p| c.matches(p)))
        .collect()
}

/// Runs the selected cases one after the other against the listening peer and returns the
/// report; `progress` is called after each case (the command prints as it goes).
pub fn run(cfg: &Config, progress: impl FnMut(&CaseResult)) -> Report {
    run_inner(cfg, None, progress)
}

/// Runs the selected cases of the peer as initiator: each case takes the next connection
/// the peer opens to `listener` (so the peer must connect once per case).
pub fn run_listening(
    cfg: &Config,
    listener: &TcpListener,
    progress: impl FnMut(&CaseResult),
) -> Report {
    run_inner(cfg, Some(listener), progress)
}

fn run_inner(
    cfg: &Config,
    listener: Option<&TcpListener>,
    mut progress: impl FnMut(&CaseResult),
) -> Report {
    let mut report = Report {
        peer: cfg.peer.to_string(),
        app: cfg.app,
        llp: cfg.llp,
        associations: 0,
        results: Vec::new(),
        connections: Vec::new(),
    };
    for case in selected(cfg) {
        let span = tracing::info_span!("case", id = case.id);
        let _g = span.enter();
        let start = Instant::now();
        let mut ctx = Ctx {
            cfg,
            listener,
            case: case.id,
            conns: Vec::new(),
            held: Vec::new(),
            associations: 0,
        };
        let o = cases::drive(case.run, &mut ctx);
        for c in std::mem::take(&mut ctx.held) {
            ctx.conns.push(c.close());
        }
        tracing::info!(verdict = %o.verdict, "case done");
        let r = CaseResult {
            id: case.id.to_string(),
            clause: case.clause.to_string(),
            sent: o.sent,
            requires: case.requires.to_string(),
            observed: o.observed,
            verdict: o.verdict,
            reason: o.reason,
            millis: u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX),
        };
        progress(&r);
        report.results.push(r);
        report.connections.append(&mut ctx.conns);
        report.associations += ctx.associations;
    }
    report
}
