//! `softrnic rping`: the rdma_cm ping-pong of librdmacm's `rping`, on the wire exactly as
//! rping does it, so that `softrnic rping` and Linux `rping` (over siw or a hardware RNIC)
//! interoperate in both roles.
//!
//! # The protocol
//!
//! Over iWARP the RDMA CM adds nothing to the MPA private data, so the connection is a plain
//! MPA exchange (RFC 5044 §7.1, RFC 6581 enhanced setup). rping connects with
//! `responder_resources = initiator_depth = 1`, so the MPA Request carries IRD = ORD = 1;
//! `softrnic rping` does the same unless `--ird`/`--ord` are given.
//!
//! Each side keeps one 16-byte receive posted (posted before the connection is set up and
//! reposted after each receive completes). The only message is
//! `struct rping_rdma_info { u64 buf; u32 rkey; u32 size; }`, all fields big endian. One ping
//! is:
//!
//! 1. client: fills its *start* buffer with the ping text, Sends `{start addr, rkey, size}`;
//! 2. server: RDMA Reads `size` bytes from it into its own buffer, then Sends a go-ahead
//!    (16 bytes, all zero: rping's server never fills its send buffer);
//! 3. client: Sends `{rdma addr, rkey, size}` of its *rdma* buffer;
//! 4. server: RDMA Writes `strlen(data) + 1` bytes (the whole ping, which ends in its only
//!    NUL) to it, then Sends another all-zero go-ahead;
//! 5. client: with `-V`, compares the two buffers.
//!
//! The ping text of ping `n` is `"rdma-ping-<n>: "` followed by the ASCII characters
//! 65..=122 (`A` to `z`) cycling from a start character that advances by one per ping, with
//! the last byte set to NUL. After the last ping the client disconnects; the server's pending
//! receive is flushed and it ends with status 0. Sizes run from 26 (`RPING_MIN_BUFSIZE`) to
//! 65535 bytes, as rping accepts.
//!
//! Differences from rping's command line: `-q` means quiet here (rping's `-q`, a QP created
//! outside rdma_cm, has no meaning for softrnic); there is no `-P` (persistent server) and no
//! `-I`; the server's buffer is 65535 bytes unless `-S` is given (rping's server uses its own
//! `-S`, 64 by default, and fails a larger client).
//!
//! # Error injection (`--inject`)
//!
//! For conformance testing against a peer, one advertisement or one RDMA operation can be
//! made invalid (`--inject-at read|write` chooses which, default `write`):
//!
//! * as client, what we advertise is invalid — an STag that is not registered
//!   (`bad-stag`), or an address at the last byte of the region, so that the peer's access
//!   of `size` bytes runs past its end (`out-of-bounds`). The peer's RDMA Read Request or
//!   RDMA Write must be refused with the Terminate RFC 5040 §4.8 / RFC 5041 §7.2 prescribe,
//!   and our memory (the region and a guard area after it) must stay untouched; both are
//!   checked and printed; exit status 4.
//! * as server, our RDMA Read or Write uses an STag the peer never advertised, or starts at
//!   the last byte of the advertised buffer; the peer must answer with a Terminate, which is
//!   decoded and printed; exit status 3.
//!
//! # Exit status
//!
//! 0 success; 1 failure (connection, data mismatch, a Terminate other than the expected
//! one); 2 bad arguments; 3 the injected error drew the expected Terminate from the peer;
//! 4 we sent the expected Terminate for the peer's invalid access and our memory is
//! untouched; 5 the peer's Terminate names the expected error but with Layer and Error Type
//! exchanged.
//!
//! # Linux siw's Terminate Control
//!
//! RFC 5040 §4.8 puts Layer in the high four bits of the Terminate Control's first octet,
//! Error Type in the low four, and M, D, R in the three high bits of the third octet. Linux
//! siw 6.1 declares the field as C bitfields, which little-endian hosts lay out from the low
//! bits: Layer and Error Type come out exchanged (invisible when both are 1, as for DDP
//! Tagged Buffer Errors; RDMAP Remote Protection, layer 0 type 1, arrives as layer 1 type 0)
//! and M/D/R land in reserved bits. A received cause that matches the expected one only
//! after exchanging Layer and Error Type is reported as such (exit status 5).

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};

use crate::mpa_args::MpaArgs;
use stack::addr::TransportAddr;
use stack::ddp::{DdpCode, TaggedCode};
use stack::mpa::Role;
use stack::rdmap::{ProtectionCode, RdmapCode, TermCause, Terminate};
use stack::{
    Access, Cq, Event, MemoryRegion, MrOptions, Qp, QpAttr, RecvWr, RegisteredBuf, Rnic,
    RnicConfig, SendWr, Wc, WcOpcode, WcStatus,
};

/// rping's default port.
pub const DEFAULT_PORT: u16 = 7174;
/// rping's default ping size.
pub const DEFAULT_SIZE: u32 = 64;
/// Smallest size rping accepts: `sizeof(stringify(INT_MAX)) + sizeof("rdma-ping-%d: ")`.
pub const MIN_SIZE: u32 = 11 + 15;
/// Largest size rping accepts (`RPING_BUFSIZE - 1`).
pub const MAX_SIZE: u32 = 64 * 1024 - 1;
/// IRD and ORD rping asks for (`responder_resources` / `initiator_depth`).
pub const RPING_IRD_ORD: u16 = 1;
/// Length of `struct rping_rdma_info`.
pub const INFO_LEN: usize = 16;
/// Exit status: the injected error drew the expected Terminate from the peer.
pub const EXIT_TERMINATE_RECEIVED: u8 = 3;
/// Exit status: we sent the expected Terminate and our memory is untouched.
pub const EXIT_TERMINATE_SENT: u8 = 4;
/// Exit status: the peer's Terminate names the expected error, but with Layer and Error Type
/// exchanged in the Terminate Control field (nonconformant encoding; Linux siw 6.1 on
/// little-endian hosts does this).
pub const EXIT_TERMINATE_SWAPPED: u8 = 5;

/// Bytes after each RDMA-accessible region that belong to no registration; injection checks
/// that the peer's refused access left them (and the region) untouched.
const GUARD: usize = 4096;
const GUARD_BYTE: u8 = 0xa5;
/// rping's send queue depth (`RPING_SQ_DEPTH`); its CQ holds twice that.
const SQ_DEPTH: usize = 16;
const WR_RECV: u64 = 1;
const WR_SEND: u64 = 2;
const WR_RDMA: u64 = 3;

/// What `--inject` makes invalid.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Inject {
    /// An STag that is not registered (advertised as client, used as server).
    BadStag,
    /// An access running past the end of the buffer (it starts at the buffer's last byte).
    OutOfBounds,
}

/// Which operation of the ping `--inject` hits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum InjectAt {
    /// The server's RDMA Read of the client's start buffer.
    Read,
    /// The server's RDMA Write into the client's rdma buffer.
    Write,
}

/// Options of `softrnic rping` (rping's, plus MPA options and error injection).
#[derive(Args, Clone, Debug)]
pub struct RpingArgs {
    /// Server side: listen on -a ADDR (default any) and -p PORT.
    #[arg(short = 's', long = "server", conflicts_with = "client")]
    pub server: bool,
    /// Client side: connect to -a ADDR, -p PORT.
    #[arg(short = 'c', long = "client")]
    pub client: bool,
    /// Address (client: the server's; server: where to listen). Host names resolve.
    #[arg(short = 'a', long = "addr", value_name = "ADDR")]
    pub addr: Option<String>,
    /// TCP port.
    #[arg(short = 'p', long = "port", default_value_t = DEFAULT_PORT)]
    pub port: u16,
    /// Ping count (client; 0 or none: ping until interrupted).
    #[arg(short = 'C', long = "count", value_name = "COUNT")]
    pub count: Option<u64>,
    /// Ping data size in bytes (26..=65535). Client default 64; the server's buffer is
    /// 65535 bytes unless given, so any client size fits.
    #[arg(short = 'S', long = "size", value_name = "SIZE")]
    pub size: Option<u32>,
    /// Validate ping data (client: compare what came back with what was sent).
    #[arg(short = 'V', long = "validate")]
    pub validate: bool,
    /// Print ping data.
    #[arg(short = 'v', long = "verbose")]
    pub verbose: bool,
    /// Quiet: no summary line, only errors.
    #[arg(short = 'q', long = "quiet")]
    pub quiet: bool,
    /// Debug output (every step, on stderr).
    #[arg(short = 'd', long = "debug")]
    pub debug: bool,
    /// Persistent server: serve every client, each connection on a thread of its own, and
    /// go on listening (until interrupted) rather than exit after the first.
    #[arg(short = 'P', long = "persistent")]
    pub persistent: bool,
    /// MPA connection options (IRD/ORD default to rping's 1/1 here).
    #[command(flatten)]
    pub mpa: MpaArgs,
    /// Error injection for conformance tests (see --inject-at): as client, advertise an
    /// unregistered STag or a buffer the peer's access overruns, and check our Terminate and
    /// that our memory is untouched (exit 4); as server, use such an STag / range on the
    /// peer's buffer and decode the peer's Terminate (exit 3).
    #[arg(long, value_enum, value_name = "WHAT")]
    pub inject: Option<Inject>,
    /// Which operation the injection hits: the server's RDMA Read of the start buffer or
    /// its RDMA Write of the echo.
    #[arg(long = "inject-at", value_enum, default_value_t = InjectAt::Write, requires = "inject")]
    pub inject_at: InjectAt,
    /// Client interop quirk: hold the first FPDU this many milliseconds after the MPA Reply
    /// (Linux siw 6.1 may leave an FPDU that arrives right after its Reply unprocessed;
    /// `--profile siw` sets 50). 0 turns it off [default: the profile's, 0].
    #[arg(long = "first-fpdu-delay-ms", value_name = "MS")]
    pub first_fpdu_delay_ms: Option<u64>,
    /// Give up on any step (connection setup, each completion) after this many seconds
    /// (default 30; the server waits for its connection without limit unless given;
    /// 1-31536000).
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..=31_536_000))]
    pub timeout: Option<u64>,
    /// Cap the EMSS (e.g. 1448 for Ethernet-sized FPDUs over loopback; 128-65535).
    #[arg(long, value_parser = clap::value_parser!(u32).range(128..=65_535))]
    pub emss: Option<u32>,
    /// A deliberate protocol fault, to check that `softrnic conform` finds it (hidden).
    #[arg(long, value_enum, value_name = "FAULT", hide = true)]
    pub fault: Option<FaultArg>,
}

/// The faults `--fault` switches on (see `stack::Fault`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FaultArg {
    /// Accept P2P without echoing it in the Reply.
    NoP2pEcho,
    /// Select an RTR type that was not offered.
    WrongRtr,
    /// Lay out the Terminate Control as Linux siw 6.1 does.
    SiwTerminate,
    /// Send the first FPDU with CRC negotiated with a wrong CRC.
    BadCrc,
    /// Do not limit inbound Read Requests by the IRD.
    IrdNotEnforced,
    /// Send the tagged RTR with STag 0 (initiator).
    RtrStagZero,
    /// Over SCTP: send DDP Segments with PPID 0 instead of 16.
    SctpWrongPpid,
    /// Over SCTP: send the Session Accept with DDP-SSN 1 instead of 0.
    SctpAcceptSsn,
    /// After a Terminate, keep the stream open and go on placing inbound segments.
    PlaceAfterTerminate,
}

impl From<FaultArg> for stack::Fault {
    fn from(f: FaultArg) -> stack::Fault {
        match f {
            FaultArg::NoP2pEcho => stack::Fault::NoP2pEcho,
            FaultArg::WrongRtr => stack::Fault::WrongRtr,
            FaultArg::SiwTerminate => stack::Fault::SiwTerminate,
            FaultArg::BadCrc => stack::Fault::BadCrc,
            FaultArg::IrdNotEnforced => stack::Fault::IrdNotEnforced,
            FaultArg::RtrStagZero => stack::Fault::RtrStagZero,
            FaultArg::SctpWrongPpid => stack::Fault::SctpWrongPpid,
            FaultArg::SctpAcceptSsn => stack::Fault::SctpAcceptSsn,
            FaultArg::PlaceAfterTerminate => stack::Fault::PlaceAfterTerminate,
        }
    }
}

/// `struct rping_rdma_info`, big endian on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RdmaInfo {
    /// Buffer address (Tagged Offset).
    pub buf: u64,
    /// STag (rkey).
    pub rkey: u32,
    /// Length.
    pub size: u32,
}

impl RdmaInfo {
    /// The 16 bytes on the wire.
    pub fn to_bytes(self) -> [u8; INFO_LEN] {
        let mut b = [0u8; INFO_LEN];
        b[..8].copy_from_slice(&self.buf.to_be_bytes());
        b[8..12].copy_from_slice(&self.rkey.to_be_bytes());
        b[12..].copy_from_slice(&self.size.to_be_bytes());
        b
    }

    /// Parses exactly 16 bytes.
    pub fn parse(b: &[u8]) -> Option<RdmaInfo> {
        if b.len() != INFO_LEN {
            return None;
        }
        Some(RdmaInfo {
            buf: u64::from_be_bytes(b[..8].try_into().ok()?),
            rkey: u32::from_be_bytes(b[8..12].try_into().ok()?),
            size: u32::from_be_bytes(b[12..].try_into().ok()?),
        })
    }
}

/// The ping text rping's client puts in its start buffer for ping number `ping`
/// (`size` ≥ [`MIN_SIZE`]).
pub fn ping_data(size: usize, ping: u64) -> Vec<u8> {
    let mut b = format!("rdma-ping-{}: ", ping as i32).into_bytes();
    b.truncate(size.saturating_sub(1));
    // The start letter advances by one per ping through 'A'..='z' (58 letters).
    let mut c = 65 + (ping % 58) as u8;
    while b.len() < size {
        b.push(c);
        c += 1;
        if c > 122 {
            c = 65;
        }
    }
    if let Some(last) = b.last_mut() {
        *last = 0;
    }
    b
}

/// The NUL-terminated text at the start of `b`, as rping prints it with `%s`.
fn c_str(b: &[u8]) -> String {
    let end = b.iter().position(|&x| x == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

/// The Terminate RFC 5040 §4.8 / RFC 5041 §7.2 prescribe for the injected error: a tagged
/// DDP segment (RDMA Write) is refused by DDP (Tagged Buffer Error), an RDMA Read Request
/// by RDMAP (Remote Protection Error), the code being Invalid STag or Base or bounds
/// violation.
pub fn expected_terminate(inject: Inject, at: InjectAt) -> TermCause {
    match (at, inject) {
        (InjectAt::Write, Inject::BadStag) => {
            TermCause::Ddp(DdpCode::Tagged(TaggedCode::InvalidStag))
        }
        (InjectAt::Write, Inject::OutOfBounds) => {
            TermCause::Ddp(DdpCode::Tagged(TaggedCode::BaseOrBounds))
        }
        (InjectAt::Read, Inject::BadStag) => {
            TermCause::Rdmap(RdmapCode::RemoteProtection(ProtectionCode::InvalidStag))
        }
        (InjectAt::Read, Inject::OutOfBounds) => {
            TermCause::Rdmap(RdmapCode::RemoteProtection(ProtectionCode::BaseOrBounds))
        }
    }
}

/// The cause read with Layer and Error Type exchanged (how a peer that lays out the
/// Terminate Control from the low bits, like Linux siw on little-endian hosts, means it).
pub fn swapped(cause: TermCause) -> TermCause {
    let (l, e, c) = cause.layer_etype_ecode();
    TermCause::from_wire(e, l, c)
}

/// A Terminate in words, with the flags and the opcode of the copied DDP header.
pub fn describe_terminate(t: &Terminate) -> String {
    let mut s = format!("{}", t.cause);
    let mut extra = Vec::new();
    if t.d {
        let op = t
            .ddp_header
            .as_ref()
            .and_then(|h| h.opcode())
            .map(|o| format!("{o:?}"))
            .unwrap_or_else(|| "?".into());
        extra.push(format!(
            "terminated DDP header of a {op} segment, DDP segment length {}",
            t.ddp_segment_length
        ));
    }
    if let Some(rr) = &t.rdma_header {
        extra.push(format!(
            "terminated RDMA Read Request: source STag {:#010x} TO {:#x} length {}",
            rr.source_stag, rr.source_to, rr.size
        ));
    }
    if !extra.is_empty() {
        s.push_str("; ");
        s.push_str(&extra.join("; "));
    }
    s
}

/// Why a run stopped early.
#[derive(Debug)]
enum Stop {
    /// The connection ended (peer disconnect, flush).
    Disconnected,
    /// Nothing happened in time.
    Timeout(&'static str),
    /// A work request failed.
    Wc(Wc),
    /// Anything else, in words.
    Msg(String),
}

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stop::Disconnected => f.write_str("the connection was closed"),
            Stop::Timeout(w) => write!(f, "timed out waiting for {w}"),
            // In words: "RDMA Read 3 on QP 1: remote access error (...); Terminate
            // received: ...".
            Stop::Wc(wc) => write!(f, "work request failed: {wc}"),
            Stop::Msg(m) => f.write_str(m),
        }
    }
}

/// One connection: the QP, its CQ and what the RNIC reported about it.
struct Conn<'a> {
    rnic: &'a Rnic,
    qp: Qp,
    cq: Cq,
    step: Duration,
    debug: bool,
    sent: Vec<Terminate>,
    received: Vec<Terminate>,
    closed: bool,
}

impl Conn<'_> {
    /// Disconnects and waits (up to 5 s) for the connection to close; a failure of either
    /// leaves nothing to do.
    fn disconnect(&self) {
        let _ = self.rnic.disconnect(&self.qp);
        let _ = self
            .rnic
            .wait_disconnected(&self.qp, Duration::from_secs(5));
    }

    fn dbg(&self, msg: impl AsRef<str>) {
        if self.debug {
            eprintln!("rping: {}", msg.as_ref());
        }
    }

    fn pump_events(&mut self) {
        while let Some(e) = self.rnic.poll_event_for(self.qp.id()) {
            match e {
                Event::TerminateSent { terminate, .. } => {
                    self.dbg(format!(
                        "Terminate sent: {}",
                        describe_terminate(&terminate)
                    ));
                    self.sent.push(terminate);
                }
                Event::TerminateReceived { terminate, .. } => {
                    self.dbg(format!(
                        "Terminate received: {}",
                        describe_terminate(&terminate)
                    ));
                    self.received.push(terminate);
                }
                Event::Disconnected { reason, .. } => {
                    self.dbg(format!("DISCONNECT EVENT ({reason:?})"));
                    self.closed = true;
                }
                Event::QpError { from, .. } => {
                    self.dbg(format!("QP entered the Error state from {from:?}"));
                    self.closed = true;
                }
                other => self.dbg(format!("event {other:?}")),
            }
        }
    }

    /// Collects the events of a connection that just ended (the Terminate behind it may be
    /// reported a moment after the flush).
    fn settle(&mut self) {
        let until = Instant::now() + Duration::from_millis(200);
        self.pump_events();
        while self.sent.is_empty() && self.received.is_empty() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
            self.pump_events();
        }
    }

    /// The next completion (flushes mean the connection is gone).
    fn next_wc(&mut self, what: &'static str) -> Result<Wc, Stop> {
        let deadline = Instant::now() + self.step;
        loop {
            if let Some(wc) = self.cq.poll_one() {
                self.dbg(format!(
                    "{:?} completion: {:?}, {} bytes",
                    wc.opcode, wc.status, wc.byte_len
                ));
                if wc.status == WcStatus::Flushed {
                    self.settle();
                    return Err(Stop::Disconnected);
                }
                return Ok(wc);
            }
            self.pump_events();
            if self.closed {
                if let Some(wc) = self.cq.poll_one()
                    && wc.status != WcStatus::Flushed
                {
                    return Ok(wc);
                }
                self.settle();
                return Err(Stop::Disconnected);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Stop::Timeout(what));
            }
            self.cq.wait(left.min(Duration::from_millis(20)));
        }
    }

    /// Waits for a successful completion of `want`, skipping Send completions.
    fn wait_for(&mut self, want: WcOpcode, what: &'static str) -> Result<Wc, Stop> {
        loop {
            let wc = self.next_wc(what)?;
            if !wc.status.is_success() {
                return Err(Stop::Wc(wc));
            }
            if wc.opcode == want {
                return Ok(wc);
            }
            if wc.opcode != WcOpcode::Send {
                return Err(Stop::Msg(format!("unexpected {:?} completion", wc.opcode)));
            }
        }
    }

    /// Waits (up to the step timeout) until a Terminate went out or came in, or the
    /// connection ended and a short grace period passed.
    fn wait_terminate(&mut self, sent: bool) {
        let deadline = Instant::now() + self.step;
        let mut closed_at: Option<Instant> = None;
        loop {
            while self.cq.poll_one().is_some() {}
            self.pump_events();
            let have = if sent {
                !self.sent.is_empty()
            } else {
                !self.received.is_empty()
            };
            if have || Instant::now() >= deadline {
                return;
            }
            if self.closed {
                let t = *closed_at.get_or_insert_with(Instant::now);
                if t.elapsed() > Duration::from_millis(500) {
                    return;
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn post_recv(&self, mr: &MemoryRegion) -> Result<(), Stop> {
        self.qp
            .post_recv(RecvWr::new(WR_RECV, vec![mr.sge(0, INFO_LEN as u32)]))
            .map_err(|e| Stop::Msg(format!("post recv error: {e}")))
    }

    fn post(&self, wr: SendWr) -> Result<(), Stop> {
        self.qp
            .post_send(wr)
            .map_err(|e| Stop::Msg(format!("post send error: {e}")))
    }
}

/// A region registered over the first `len` bytes of a buffer with a guard area after it.
fn guarded_region(rnic: &Rnic, conn_pd: stack::Pd, len: usize) -> Result<MemoryRegion, String> {
    let buf = RegisteredBuf::new(len + GUARD);
    buf.fill(0);
    buf.write_at(len, &[GUARD_BYTE; GUARD])
        .map_err(|e| e.to_string())?;
    let access = Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE;
    rnic.mem()
        .register(conn_pd, &buf, MrOptions::new(access).range(0..len))
        .map_err(|e| format!("rdma buffer registration failed: {e}"))
}

/// The state of a [`guarded_region`] of `len` bytes that nothing may have written yet (its
/// RDMA Read never completed): "untouched", or where it differs from zeros and the guard.
fn unread_buffer_state(mr: &MemoryRegion, len: usize) -> String {
    let now = mr.buf().to_vec();
    let changed = |(i, &b): (usize, &u8)| b != if i < len { 0 } else { GUARD_BYTE };
    match now.iter().enumerate().position(changed) {
        None => format!(
            "rdma buffer untouched ({} bytes of region and guard compared)",
            now.len()
        ),
        Some(first) => format!(
            "rdma buffer MODIFIED although its RDMA Read did not complete: {} bytes differ, the first at offset {first} ({})",
            now.iter().enumerate().filter(|&ib| changed(ib)).count(),
            if first < len {
                "in the region"
            } else {
                "in the guard area"
            }
        ),
    }
}

/// An STag near `stag` that names no registration here.
fn unregistered_stag(rnic: &Rnic, stag: u32) -> u32 {
    let mut s = stag ^ 0x0080_0000;
    while rnic.mem().query(s).is_some() {
        s = s.wrapping_add(0x100);
    }
    s
}

struct Setup {
    rnic: Rnic,
    mpa: stack::mpa::Config,
    step: Duration,
    conn_timeout: Option<Duration>,
    addr: TransportAddr,
    first_fpdu_delay: Duration,
}

fn resolve_tcp(h: &str, port: u16) -> Result<SocketAddr, String> {
    (h, port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {h}: {e}"))?
        .next()
        .ok_or_else(|| format!("{h} has no address"))
}

/// Where the server listens or the client connects: TCP, or over SCTP (`--transport`) the
/// server's `--bind` addresses / the client's comma-separated `-a` addresses.
fn resolve(a: &RpingArgs) -> Result<TransportAddr, String> {
    a.mpa.check()?;
    match &a.addr {
        None if a.client => Err("the client needs the server's address (-a ADDR)".into()),
        None if a.mpa.sctp() || a.mpa.device() => Ok(a.mpa.listen_addr(a.port)),
        None => Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), a.port).into()),
        Some(h) if a.client => a.mpa.connect_addr(h, a.port, resolve_tcp),
        Some(_) if a.mpa.device() => {
            Err("over --transport tap|xdp the server listens on its --bind address (no -a)".into())
        }
        Some(h) if a.mpa.sctp() => {
            let TransportAddr::Sctp(mut l) = a.mpa.listen_addr(a.port) else {
                return Err("not an SCTP address".into());
            };
            l.addrs = match a.mpa.connect_addr(h, a.port, resolve_tcp)? {
                TransportAddr::Sctp(x) => x.addrs,
                TransportAddr::Tcp(x) => vec![x.ip()],
                TransportAddr::Dev(x) => vec![IpAddr::V4(*x.addr.ip())],
            };
            Ok(TransportAddr::Sctp(l))
        }
        Some(h) => resolve_tcp(h, a.port).map(TransportAddr::from),
    }
}

/// Runs `softrnic rping` (rping's IRD/ORD 1/1 apply unless `--ird`/`--ord` are given).
pub fn run_command(a: &RpingArgs, out: &mut dyn Write) -> ExitCode {
    if a.server == a.client {
        eprintln!("softrnic rping: give exactly one of -s (server) and -c (client)");
        return ExitCode::from(2);
    }
    if a.persistent && !a.server {
        eprintln!("softrnic rping: -P (persistent) applies to the server (-s) only");
        return ExitCode::from(2);
    }
    if let Some(s) = a.size
        && !(MIN_SIZE..=MAX_SIZE).contains(&s)
    {
        eprintln!("softrnic rping: invalid size {s} (valid range is {MIN_SIZE} to {MAX_SIZE})");
        return ExitCode::from(2);
    }
    let addr = match resolve(a) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("softrnic rping: {e}");
            return ExitCode::from(2);
        }
    };
    let mut m = a.mpa.clone();
    if !m.ird_ord_given() {
        m.ird = Some(RPING_IRD_ORD);
        m.ord = Some(RPING_IRD_ORD);
    }
    let role = if a.client {
        Role::Initiator
    } else {
        Role::Responder
    };
    let mpa = m.config_for(role, Vec::new());
    let first_fpdu_delay = a
        .first_fpdu_delay_ms
        .map_or_else(|| m.first_fpdu_delay(), Duration::from_millis);
    let rnic = match Rnic::open(RnicConfig {
        max_emss: a.emss,
        ..RnicConfig::default()
    }) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("softrnic rping: cannot open the RNIC: {e}");
            return ExitCode::from(1);
        }
    };
    let s = Setup {
        rnic,
        mpa,
        step: Duration::from_secs(a.timeout.unwrap_or(30)),
        conn_timeout: a.timeout.map(Duration::from_secs),
        addr,
        first_fpdu_delay,
    };
    let r = if a.client {
        client(a, &s, out)
    } else {
        server(a, &s, out)
    };
    match r {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!(
                "softrnic rping {}: {e}",
                if a.client { "client" } else { "server" }
            );
            ExitCode::from(1)
        }
    }
}

fn new_conn<'a>(a: &RpingArgs, s: &'a Setup) -> Result<(Conn<'a>, stack::Pd), String> {
    let pd = s.rnic.alloc_pd();
    let cq = Cq::new(SQ_DEPTH * 2);
    let mut attr = QpAttr::new(pd, cq.clone(), cq.clone());
    attr.sq_depth = SQ_DEPTH;
    attr.rq_depth = 2;
    attr.first_fpdu_delay = s.first_fpdu_delay;
    attr.fault = a.fault.map(stack::Fault::from);
    let qp = s
        .rnic
        .create_qp(attr)
        .map_err(|e| format!("create QP: {e}"))?;
    Ok((
        Conn {
            rnic: &s.rnic,
            qp,
            cq,
            step: s.step,
            debug: a.debug,
            sent: Vec::new(),
            received: Vec::new(),
            closed: false,
        },
        pd,
    ))
}

fn small_mr(s: &Setup, pd: stack::Pd, access: Access) -> Result<MemoryRegion, String> {
    s.rnic
        .mem()
        .register_new(pd, INFO_LEN, MrOptions::new(access))
        .map_err(|e| format!("buffer registration failed: {e}"))
}

fn client(a: &RpingArgs, s: &Setup, out: &mut dyn Write) -> Result<u8, String> {
    let size = a.size.unwrap_or(DEFAULT_SIZE) as usize;
    let (mut c, pd) = new_conn(a, s)?;
    let recv_mr = small_mr(s, pd, Access::LOCAL_WRITE)?;
    let send_mr = small_mr(s, pd, Access::NONE)?;
    let rdma_mr = guarded_region(&s.rnic, pd, size)?;
    let start_mr = guarded_region(&s.rnic, pd, size)?;
    c.post_recv(&recv_mr).map_err(|e| e.to_string())?;
    c.dbg(format!("connecting to {}", s.addr));
    let session = s
        .rnic
        .connect_to_blocking(
            &c.qp,
            &s.addr,
            s.mpa.clone(),
            s.conn_timeout.unwrap_or(s.step),
        )
        .map_err(|e| format!("connect error: {e}"))?;
    if let Some(m) = session.mpa() {
        c.dbg(format!(
            "connected: MPA rev {} CRC {} markers {}/{} IRD {} ORD {}",
            m.revision, m.crc, m.markers_tx, m.markers_rx, session.ird, session.ord
        ));
    }
    let count = a.count.unwrap_or(0);
    let mut ping: u64 = 0;
    while count == 0 || ping < count {
        let data = ping_data(size, ping);
        start_mr
            .buf()
            .write_at(0, &data)
            .map_err(|e| e.to_string())?;
        // Phase 1: advertise the start buffer (the server RDMA Reads it).
        let mut adv = RdmaInfo {
            buf: start_mr.base_to(),
            rkey: start_mr.stag(),
            size: size as u32,
        };
        let injected = a.inject.filter(|_| a.inject_at == InjectAt::Read);
        if let Some(i) = injected {
            adv = corrupt_adv(&s.rnic, adv, &start_mr, i);
            return client_injected(a, &mut c, &send_mr, &start_mr, adv, out);
        }
        advertise(
            &mut c,
            &send_mr,
            &recv_mr,
            adv,
            "the server's go-ahead after its RDMA Read",
        )?;
        // Phase 2: advertise the rdma buffer (the server RDMA Writes the echo into it).
        rdma_mr
            .buf()
            .write_at(0, &vec![0u8; size])
            .map_err(|e| e.to_string())?;
        let adv = RdmaInfo {
            buf: rdma_mr.base_to(),
            rkey: rdma_mr.stag(),
            size: size as u32,
        };
        if let Some(i) = a.inject {
            let adv = corrupt_adv(&s.rnic, adv, &rdma_mr, i);
            return client_injected(a, &mut c, &send_mr, &rdma_mr, adv, out);
        }
        advertise(
            &mut c,
            &send_mr,
            &recv_mr,
            adv,
            "the server's go-ahead after its RDMA Write",
        )?;
        let echo = rdma_mr
            .buf()
            .read_range(0..size)
            .map_err(|e| e.to_string())?;
        if a.validate && echo != data {
            let at = echo
                .iter()
                .zip(&data)
                .position(|(x, y)| x != y)
                .unwrap_or(0);
            return Err(format!(
                "data mismatch! (ping {ping}, first difference at byte {at})"
            ));
        }
        if a.verbose {
            let _ = writeln!(out, "ping data: {}", c_str(&echo));
        }
        ping += 1;
    }
    c.disconnect();
    if !a.quiet {
        let _ = writeln!(
            out,
            "rping client: {ping} pings of {size} bytes with {} completed{}",
            s.addr,
            if a.validate { ", data verified" } else { "" }
        );
    }
    Ok(0)
}

/// Client: sends one buffer advertisement, waits for the server's go-ahead Send (which
/// must be exactly an info message long, as rping checks) and reposts the receive.
fn advertise(
    c: &mut Conn<'_>,
    send_mr: &MemoryRegion,
    recv_mr: &MemoryRegion,
    adv: RdmaInfo,
    what: &'static str,
) -> Result<(), String> {
    send_info(c, send_mr, adv)?;
    let wc = c
        .wait_for(WcOpcode::Recv, what)
        .map_err(|e| stop_msg(e, c))?;
    if wc.byte_len as usize != INFO_LEN {
        return Err(format!("Received bogus data, size {}", wc.byte_len));
    }
    c.post_recv(recv_mr).map_err(|e| e.to_string())
}

/// Sends `adv` as a 16-byte info message from `send_mr`.
fn send_info(c: &mut Conn<'_>, send_mr: &MemoryRegion, adv: RdmaInfo) -> Result<(), String> {
    send_mr
        .buf()
        .write_at(0, &adv.to_bytes())
        .map_err(|e| e.to_string())?;
    c.post(SendWr::send(WR_SEND, vec![send_mr.sge(0, INFO_LEN as u32)]))
        .map_err(|e| e.to_string())
}

fn stop_msg(e: Stop, c: &Conn<'_>) -> String {
    let mut m = e.to_string();
    if let Some(t) = c.received.first() {
        m.push_str(&format!("; Terminate received: {}", describe_terminate(t)));
    }
    if let Some(t) = c.sent.first() {
        m.push_str(&format!("; Terminate sent: {}", describe_terminate(t)));
    }
    m
}

fn corrupt_adv(rnic: &Rnic, adv: RdmaInfo, mr: &MemoryRegion, i: Inject) -> RdmaInfo {
    match i {
        Inject::BadStag => RdmaInfo {
            rkey: unregistered_stag(rnic, mr.stag()),
            ..adv
        },
        Inject::OutOfBounds => RdmaInfo {
            buf: mr.base_to() + mr.len() - 1,
            ..adv
        },
    }
}

/// Client with injection: advertise `adv` (invalid), then check that the peer's access drew
/// the prescribed Terminate from us and that `mr` and its guard area are untouched.
fn client_injected(
    a: &RpingArgs,
    c: &mut Conn<'_>,
    send_mr: &MemoryRegion,
    mr: &MemoryRegion,
    adv: RdmaInfo,
    out: &mut dyn Write,
) -> Result<u8, String> {
    let inject = a.inject.unwrap_or(Inject::BadStag);
    let expected = expected_terminate(inject, a.inject_at);
    let before = mr.buf().to_vec();
    let _ = writeln!(
        out,
        "rping client: injecting {}: advertising STag {:#010x} TO {:#x} length {} for the peer's RDMA {} (our region: STag {:#010x} TO {:#x} length {})",
        inject_name(inject),
        adv.rkey,
        adv.buf,
        adv.size,
        at_name(a.inject_at),
        mr.stag(),
        mr.base_to(),
        mr.len()
    );
    send_info(c, send_mr, adv)?;
    c.wait_terminate(true);
    let after = mr.buf().to_vec();
    let untouched = before == after;
    let _ = writeln!(
        out,
        "rping client: registered memory {} ({} bytes of region and guard compared)",
        if untouched { "untouched" } else { "MODIFIED" },
        after.len()
    );
    if !c.received.is_empty() {
        let _ = writeln!(
            out,
            "rping client: Terminate received from the peer: {}",
            describe_terminate(&c.received[0])
        );
    }
    let Some(t) = c.sent.first() else {
        return Err(format!(
            "no Terminate was sent: the peer did not access the invalid {} (expected {expected})",
            inject_name(inject)
        ));
    };
    let _ = writeln!(
        out,
        "rping client: Terminate sent: {}",
        describe_terminate(t)
    );
    if t.cause != expected {
        return Err(format!(
            "the Terminate sent is {} but RFC 5040/5041 prescribe {expected}",
            t.cause
        ));
    }
    if !untouched {
        return Err("the refused access modified registered memory".into());
    }
    let _ = writeln!(
        out,
        "rping client: expected Terminate sent ({expected}), memory untouched"
    );
    Ok(EXIT_TERMINATE_SENT)
}

fn inject_name(i: Inject) -> &'static str {
    match i {
        Inject::BadStag => "invalid STag",
        Inject::OutOfBounds => "out-of-bounds buffer",
    }
}

fn at_name(a: InjectAt) -> &'static str {
    match a {
        InjectAt::Read => "Read",
        InjectAt::Write => "Write",
    }
}

/// A connection the server accepted, with its buffers.
struct Accepted<'a> {
    c: Conn<'a>,
    peer: SocketAddr,
    recv_mr: MemoryRegion,
    send_mr: MemoryRegion,
    rdma_mr: MemoryRegion,
}

fn server(a: &RpingArgs, s: &Setup, out: &mut dyn Write) -> Result<u8, String> {
    let listener = s
        .rnic
        .listen_on(&s.addr)
        .map_err(|e| format!("cannot listen on {}: {e}", s.addr))?;
    if a.debug {
        // Tests and scripts read the port from this line (useful with -p 0).
        eprintln!("rping: listening on {}", listener.local_addr);
    }
    if !a.persistent {
        let conn = accept_next(a, s, &listener)?;
        s.rnic.close_listener(&listener);
        return serve(a, conn, out);
    }
    // Persistent: each connection runs on a thread of its own (its events are its QP's
    // only), so a client that stalls or misbehaves holds up nobody else.
    std::thread::scope(|scope| {
        loop {
            let conn = accept_next(a, s, &listener)?;
            scope.spawn(move || {
                let (peer, qp) = (conn.peer, conn.c.qp.clone());
                if let Err(e) = serve(a, conn, &mut std::io::stdout()) {
                    eprintln!("rping: connection from {peer}: {e}");
                }
                let _ = s.rnic.destroy_qp(&qp);
                // What the connection left queued would otherwise pile up.
                while s.rnic.poll_event_for(qp.id()).is_some() {}
            });
        }
    })
}

/// Waits for the next connection and accepts it. A connection whose setup fails (a
/// malformed or refused MPA Request — answered with a Reject by the RNIC —, a peer that
/// went away) does not end the server: it says so and waits for the next request, as a
/// server behind librdmacm never sees such a request.
fn accept_next<'a>(
    a: &RpingArgs,
    s: &'a Setup,
    listener: &stack::Listener,
) -> Result<Accepted<'a>, String> {
    let size = a.size.unwrap_or(MAX_SIZE) as usize;
    loop {
        let req = loop {
            let wait = s.conn_timeout.unwrap_or(Duration::from_secs(3600));
            match s.rnic.wait_request(listener, wait) {
                Ok(r) => break r,
                Err(stack::RnicError::Timeout) if s.conn_timeout.is_none() => continue,
                Err(e) => return Err(format!("no connection request: {e}")),
            }
        };
        let (c, pd) = new_conn(a, s)?;
        if let Some(r) = &req.request {
            c.dbg(format!(
                "connection request from {}: MPA rev {} CRC {} markers {} private data {} bytes",
                req.peer,
                r.revision,
                r.crc,
                r.markers,
                req.private_data().len()
            ));
        }
        let recv_mr = small_mr(s, pd, Access::LOCAL_WRITE)?;
        // rping's server never fills its send buffer: every go-ahead is 16 zero bytes.
        let send_mr = small_mr(s, pd, Access::NONE)?;
        let rdma_mr = guarded_region(&s.rnic, pd, size)?;
        c.post_recv(&recv_mr).map_err(|e| e.to_string())?;
        let up = s
            .rnic
            .accept(req.id, &c.qp, s.mpa.clone())
            .and_then(|()| s.rnic.wait_established(&c.qp, s.step).map(|_| ()));
        match up {
            Ok(()) => {
                return Ok(Accepted {
                    c,
                    peer: req.peer,
                    recv_mr,
                    send_mr,
                    rdma_mr,
                });
            }
            Err(e) => {
                eprintln!(
                    "rping: connection from {} failed ({e}); waiting for the next",
                    req.peer
                );
                let _ = s.rnic.destroy_qp(&c.qp);
                while s.rnic.poll_event_for(c.qp.id()).is_some() {}
            }
        }
    }
}

/// rping's server loop on one connection, until the client disconnects.
fn serve(a: &RpingArgs, conn: Accepted<'_>, out: &mut dyn Write) -> Result<u8, String> {
    let size = a.size.unwrap_or(MAX_SIZE) as usize;
    let Accepted {
        mut c,
        peer,
        recv_mr,
        send_mr,
        rdma_mr,
    } = conn;
    let mut pings = 0u64;
    loop {
        // Wait for the client's start buffer advertisement.
        let wc = match c.wait_for(WcOpcode::Recv, "the client's start buffer advertisement") {
            Ok(wc) => wc,
            Err(Stop::Disconnected) if c.sent.is_empty() && c.received.is_empty() => break,
            Err(e) => return Err(stop_msg(e, &c)),
        };
        let info = take_info(&c, &wc, &recv_mr)?;
        if info.size as usize > size {
            return Err(format!(
                "the client's buffer ({} bytes) is larger than ours ({size}); use -S",
                info.size
            ));
        }
        let (rkey, to) = match a.inject.filter(|_| a.inject_at == InjectAt::Read) {
            Some(i) => server_bad_target(i, info),
            None => (info.rkey, info.buf),
        };
        let injecting = a.inject.is_some() && a.inject_at == InjectAt::Read;
        if injecting {
            announce_server_injection(a, out, rkey, to, info);
        }
        c.post(SendWr::read(
            WR_RDMA,
            vec![rdma_mr.sge(0, info.size)],
            rkey,
            to,
        ))
        .map_err(|e| e.to_string())?;
        if injecting {
            return server_injected(a, &mut c, out);
        }
        if let Err(e) = c.wait_for(WcOpcode::RdmaRead, "the RDMA Read") {
            let mut m = stop_msg(e, &c);
            if pings == 0 {
                // Nothing but the Read's Response may write the rdma buffer, and it never
                // came: the buffer (zeroed at registration) and its guard area must be as
                // registered, whatever the peer sent.
                m.push_str(&format!("; {}", unread_buffer_state(&rdma_mr, size)));
            }
            return Err(m);
        }
        let read_len = info.size as usize;
        let data = rdma_mr
            .buf()
            .read_range(0..read_len)
            .map_err(|e| e.to_string())?;
        if a.verbose {
            let _ = writeln!(out, "server ping data: {}", c_str(&data));
        }
        // Tell the client to continue.
        c.post(SendWr::send(WR_SEND, vec![send_mr.sge(0, INFO_LEN as u32)]))
            .map_err(|e| e.to_string())?;
        let wc = match c.wait_for(WcOpcode::Recv, "the client's rdma buffer advertisement") {
            Ok(wc) => wc,
            Err(e) => return Err(stop_msg(e, &c)),
        };
        let info = take_info(&c, &wc, &recv_mr)?;
        // Echo strlen + 1 bytes, as rping does (at most what was read).
        let len = data
            .iter()
            .position(|&x| x == 0)
            .map_or(read_len, |p| p + 1) as u32;
        let (rkey, to) = match a.inject {
            Some(i) => server_bad_target(i, info),
            None => (info.rkey, info.buf),
        };
        if a.inject.is_some() {
            announce_server_injection(a, out, rkey, to, info);
        }
        c.post(SendWr::write(WR_RDMA, vec![rdma_mr.sge(0, len)], rkey, to))
            .map_err(|e| e.to_string())?;
        if a.inject.is_some() {
            return server_injected(a, &mut c, out);
        }
        if let Err(e) = c.wait_for(WcOpcode::RdmaWrite, "the RDMA Write") {
            return Err(stop_msg(e, &c));
        }
        // Tell the client to begin again.
        c.post(SendWr::send(WR_SEND, vec![send_mr.sge(0, INFO_LEN as u32)]))
            .map_err(|e| e.to_string())?;
        pings += 1;
    }
    c.disconnect();
    if !a.quiet {
        let _ = writeln!(
            out,
            "rping server: {pings} pings with {peer} completed, client disconnected"
        );
    }
    Ok(0)
}

/// The client's buffer advertisement that `wc` completed, with the receive posted again.
fn take_info(c: &Conn<'_>, wc: &Wc, recv_mr: &MemoryRegion) -> Result<RdmaInfo, String> {
    let info = recv_info(wc, recv_mr)?;
    c.post_recv(recv_mr).map_err(|e| e.to_string())?;
    c.dbg(format!(
        "received rkey {:x} addr {:x} len {} from peer",
        info.rkey, info.buf, info.size
    ));
    Ok(info)
}

fn recv_info(wc: &Wc, recv_mr: &MemoryRegion) -> Result<RdmaInfo, String> {
    if wc.byte_len as usize != INFO_LEN {
        return Err(format!("Received bogus data, size {}", wc.byte_len));
    }
    let b = recv_mr
        .buf()
        .read_range(0..INFO_LEN)
        .map_err(|e| e.to_string())?;
    RdmaInfo::parse(&b).ok_or_else(|| "Received bogus data".to_string())
}

/// The STag and TO our injected operation uses on the peer's advertised buffer.
fn server_bad_target(i: Inject, info: RdmaInfo) -> (u32, u64) {
    match i {
        // Another STag index: one the peer never advertised.
        Inject::BadStag => (info.rkey ^ 0x0080_0000, info.buf),
        // Starts at the buffer's last byte: the first segment already runs past the end.
        Inject::OutOfBounds => (info.rkey, info.buf + u64::from(info.size) - 1),
    }
}

fn announce_server_injection(
    a: &RpingArgs,
    out: &mut dyn Write,
    rkey: u32,
    to: u64,
    info: RdmaInfo,
) {
    let _ = writeln!(
        out,
        "rping server: injecting {}: RDMA {} with STag {:#010x} TO {:#x} (the peer advertised STag {:#010x} TO {:#x} length {})",
        inject_name(a.inject.unwrap_or(Inject::BadStag)),
        at_name(a.inject_at),
        rkey,
        to,
        info.rkey,
        info.buf,
        info.size
    );
}

/// Server with injection: the invalid operation is posted; wait for the peer's Terminate
/// and judge it.
fn server_injected(a: &RpingArgs, c: &mut Conn<'_>, out: &mut dyn Write) -> Result<u8, String> {
    let inject = a.inject.unwrap_or(Inject::BadStag);
    let expected = expected_terminate(inject, a.inject_at);
    c.wait_terminate(false);
    if let Some(t) = c.sent.first() {
        let _ = writeln!(
            out,
            "rping server: Terminate sent: {}",
            describe_terminate(t)
        );
    }
    let Some(t) = c.received.first() else {
        return Err(format!(
            "no Terminate arrived from the peer (expected {expected}){}",
            if c.closed {
                "; the connection closed without one"
            } else {
                ""
            }
        ));
    };
    let _ = writeln!(
        out,
        "rping server: Terminate received: {}",
        describe_terminate(t)
    );
    if t.cause == expected {
        let _ = writeln!(
            out,
            "rping server: expected Terminate received ({expected})"
        );
        return Ok(EXIT_TERMINATE_RECEIVED);
    }
    if swapped(t.cause) == expected {
        let (l, e, _) = t.cause.layer_etype_ecode();
        let _ = writeln!(
            out,
            "rping server: the peer's Terminate names the expected error ({expected}) but with Layer and Error Type exchanged (layer {l:#x} type {e:#x} on the wire; RFC 5040 §4.8 puts Layer in the high 4 bits); nonconformant encoding, as Linux siw's bitfield layout produces on little-endian hosts"
        );
        return Ok(EXIT_TERMINATE_SWAPPED);
    }
    Err(format!(
        "the peer's Terminate is {} but RFC 5040/5041 prescribe {expected}",
        t.cause
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The server's check of an rdma buffer whose RDMA Read never completed: untouched as
    /// registered (zeros, then the guard area), or the first byte that differs, in the region
    /// or in the guard.
    #[test]
    fn unread_buffer_state_names_what_changed() {
        let rnic = Rnic::open(RnicConfig {
            progress: stack::ProgressMode::Manual,
            ..RnicConfig::default()
        })
        .expect("rnic");
        let pd = rnic.alloc_pd();
        let mr = guarded_region(&rnic, pd, 64).expect("region");
        let state = unread_buffer_state(&mr, 64);
        assert_eq!(
            state,
            format!(
                "rdma buffer untouched ({} bytes of region and guard compared)",
                64 + GUARD
            )
        );
        mr.buf().write_at(3, &[1, 2]).unwrap();
        let state = unread_buffer_state(&mr, 64);
        assert!(state.contains("MODIFIED"), "{state}");
        assert!(
            state.contains("2 bytes differ, the first at offset 3 (in the region)"),
            "{state}"
        );
        mr.buf().write_at(3, &[0, 0]).unwrap();
        mr.buf().write_at(64 + 100, &[0]).unwrap();
        let state = unread_buffer_state(&mr, 64);
        assert!(
            state.contains("1 bytes differ, the first at offset 164 (in the guard area)"),
            "{state}"
        );
        mr.buf().write_at(63, &[7]).unwrap();
        let state = unread_buffer_state(&mr, 64);
        assert!(
            state.contains("2 bytes differ, the first at offset 63 (in the region)"),
            "{state}"
        );
    }

    /// The ping text follows rping's client loop: "rdma-ping-N: ", then letters from a
    /// start that advances per ping and wraps from 'z' to 'A', and a final NUL.
    #[test]
    fn ping_data_matches_rping_pattern() {
        let d = ping_data(64, 0);
        assert_eq!(d.len(), 64);
        assert_eq!(&d[..13], b"rdma-ping-0: ");
        assert_eq!(d[13], b'A');
        assert_eq!(d[14], b'B');
        assert_eq!(d[63], 0);
        assert_eq!(d.iter().filter(|&&x| x == 0).count(), 1);
        let d = ping_data(64, 1);
        assert_eq!(d[13], b'B');
        // 58 letters: ping 58 starts at 'A' again, ping 57 at 'z'.
        assert_eq!(ping_data(64, 57)[14], b'z');
        assert_eq!(ping_data(64, 58)[14], b'A');
        // The letters wrap from 'z' (122) to 'A' (65) inside one ping.
        let d = ping_data(200, 0);
        assert_eq!(d[13 + 57], b'z');
        assert_eq!(d[13 + 58], b'A');
    }

    /// RFC 5040 §4.8: RDMAP Remote Protection (layer 0, type 1) read with the two nibbles
    /// exchanged is layer 1 type 0 — what Linux siw 6.1 sends; a DDP Tagged Buffer Error
    /// (1, 1) is its own exchange.
    #[test]
    fn rfc5040_4_8_swapped_layer_and_type() {
        let rp = expected_terminate(Inject::BadStag, InjectAt::Read);
        let wire = TermCause::from_wire(1, 0, 0);
        assert_ne!(wire, rp);
        assert_eq!(swapped(wire), rp);
        let t = expected_terminate(Inject::OutOfBounds, InjectAt::Write);
        assert_eq!(swapped(t), t);
    }

    /// `struct rping_rdma_info` is 16 bytes, all fields in network byte order.
    #[test]
    fn rdma_info_is_big_endian() {
        let i = RdmaInfo {
            buf: 0x0102_0304_0506_0708,
            rkey: 0x1122_3344,
            size: 0x40,
        };
        let b = i.to_bytes();
        assert_eq!(
            b,
            [
                1, 2, 3, 4, 5, 6, 7, 8, 0x11, 0x22, 0x33, 0x44, 0, 0, 0, 0x40
            ]
        );
        assert_eq!(RdmaInfo::parse(&b), Some(i));
        assert_eq!(RdmaInfo::parse(&b[..15]), None);
    }

    /// RFC 5041 §7.2 (tagged buffer errors for RDMA Write segments) and RFC 5040 §4.8 Figure
    /// 9 (Remote Protection Errors for RDMA Read Requests).
    #[test]
    fn expected_terminates_follow_rfc5040_5041() {
        assert_eq!(
            expected_terminate(Inject::BadStag, InjectAt::Write).layer_etype_ecode(),
            (1, 1, 0)
        );
        assert_eq!(
            expected_terminate(Inject::OutOfBounds, InjectAt::Write).layer_etype_ecode(),
            (1, 1, 1)
        );
        assert_eq!(
            expected_terminate(Inject::BadStag, InjectAt::Read).layer_etype_ecode(),
            (0, 1, 0)
        );
        assert_eq!(
            expected_terminate(Inject::OutOfBounds, InjectAt::Read).layer_etype_ecode(),
            (0, 1, 1)
        );
    }
}
