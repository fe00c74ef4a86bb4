//! `softrnic sctp-perf`: an iperf-like throughput tool over the softrnic SCTP stack, on raw
//! IPv4 (protocol 132, root) or RFC 6951 UDP encapsulation (`--udp-encap`, no privileges).
//!
//! ```text
//! softrnic sctp-perf -s [-B ADDR[,ADDR...]] [-p PORT]                  server
//! softrnic sctp-perf -c ADDR[,ADDR...] [-B ADDR[,ADDR...]] [-p PORT]   client
//! ```
//!
//! # The test protocol (in-band, on the association itself)
//!
//! Control messages travel on stream 0, ordered, PPID [`PPID_CONTROL`]; data messages on the
//! `--streams` streams round-robin, PPID [`PPID_DATA`]. All integers are big endian.
//!
//! ```text
//! PARAMS  (client → server, first message)
//!         "SPRF" | version 1 | type 1 | flags (bit 0 verify, 1 reverse, 2 bidir, 3 unordered)
//!         | 0 | streams (u16) | 0 (u16) | message length (u32) | bytes (u64, 0: timed)
//!         | duration ms (u64)
//! FIN     (sender → receiver, after its last data message)
//!         "SPRF" | 1 | type 2 | 0 | 0 | streams (u16) | 0 (u16) | bytes (u64)
//!         | messages sent per stream (u64 each)
//! REPORT  (receiver → sender, once everything the FIN announced arrived)
//!         "SPRF" | 1 | type 3 | 0 | 0 | bytes (u64) | messages (u64) | errors (u64)
//! DATA    stream (u16) | 0 (u16) | per-stream sequence number (u64) | pattern bytes
//! ```
//!
//! With `--verify` every data byte after the 12-byte header is a function of (stream,
//! sequence, offset); the receiver checks every byte, the stream number, and — on ordered
//! streams — that sequence numbers arrive in order without gaps; at the FIN it checks that
//! every message sent arrived exactly once. The client shuts the association down when both
//! directions are done; the server serves one association and exits when it ends.
//!
//! With `--plain` the client speaks none of this (for a peer that is not sctp-perf, e.g. a
//! kernel SCTP sink): it sends data for `-t`/`-n` and shuts down. A server whose first
//! message is not PARAMS (ordered data on stream 0, any other PPID) switches to the same
//! mode and counts everything until the peer ends the association.
//!
//! Exit status: 0 on success, 1 on a verification failure, loss or abort, 2 on usage errors.

use std::io::Write;
use std::net::IpAddr;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use clap::Args;
use sctp_io::{AssociationConfig, Config, Error, Notification, SctpSocket, Transport};

/// PPID of the test's control messages (an unassigned value, "SPRF"; the decoder names it).
pub use decode::sctp_decode::PPID_SCTP_PERF_CONTROL as PPID_CONTROL;
/// PPID of the data messages ("SPRD").
pub use decode::sctp_decode::PPID_SCTP_PERF_DATA as PPID_DATA;
const MAGIC: &[u8; 4] = b"SPRF";
const HDR: usize = 12;

/// Options of `softrnic sctp-perf`.
#[derive(Args, Debug, Clone)]
pub struct SctpPerfArgs {
    /// Run as server: serve one association, then exit.
    #[arg(
        short = 's',
        long,
        conflicts_with = "client",
        required_unless_present = "client"
    )]
    pub server: bool,
    /// Run as client to the server's addresses (the first is used for INIT; the others are
    /// the peer's further addresses for multihoming, announced by the server itself).
    #[arg(
        short = 'c',
        long,
        value_name = "ADDR[,ADDR...]",
        value_delimiter = ','
    )]
    pub client: Vec<IpAddr>,
    /// Local addresses (one socket each, all announced to the peer; wildcards are refused
    /// because SCTP lists its addresses in INIT/INIT ACK). Default: the server binds
    /// 127.0.0.1 (give -B for anything else); the client uses the server's address when it
    /// is a loopback address, else the address the kernel routes from towards it.
    #[arg(
        short = 'B',
        long = "bind",
        value_name = "ADDR[,ADDR...]",
        value_delimiter = ','
    )]
    pub bind: Vec<IpAddr>,
    /// SCTP port of the server.
    #[arg(short = 'p', long, default_value_t = 5001)]
    pub port: u16,
    /// RFC 6951 UDP encapsulation instead of raw IPv4 (which needs root).
    #[arg(long)]
    pub udp_encap: bool,
    /// UDP encapsulation port, local and remote. A client whose local port is taken (server
    /// on the same host) falls back to an ephemeral local port.
    #[arg(long, default_value_t = sctp_io::SCTP_UDP_PORT, value_name = "P")]
    pub udp_port: u16,
    /// Local UDP encapsulation port, when it must differ from --udp-port (0: ephemeral).
    #[arg(long, value_name = "P")]
    pub udp_local_port: Option<u16>,
    /// Bytes to send (K, M, G suffixes: powers of 1024); overrides -t.
    #[arg(short = 'n', long = "bytes", value_name = "BYTES", value_parser = parse_size)]
    pub bytes: Option<u64>,
    /// Seconds to send.
    #[arg(
        short = 't',
        long = "time",
        default_value_t = 10.0,
        value_name = "SECS"
    )]
    pub time: f64,
    /// Message size in bytes (1400 fits one DATA chunk in a 1500-byte MTU).
    #[arg(short = 'l', long = "len", default_value_t = 1400, value_name = "LEN")]
    pub len: usize,
    /// Outbound streams, used round-robin.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub streams: u16,
    /// Send data unordered (the U bit).
    #[arg(long)]
    pub unordered: bool,
    /// Seconds between interval reports (0: none).
    #[arg(
        short = 'i',
        long = "interval",
        default_value_t = 1.0,
        value_name = "SECS"
    )]
    pub interval: f64,
    /// Send a checkable pattern and verify every byte, order and completeness.
    #[arg(long)]
    pub verify: bool,
    /// The server sends, the client receives.
    #[arg(long, conflicts_with = "bidir")]
    pub reverse: bool,
    /// Both directions at once.
    #[arg(long)]
    pub bidir: bool,
    /// Path MTU (IP level) of every path.
    #[arg(long, default_value_t = 1500, value_name = "BYTES")]
    pub mtu: usize,
    /// RTO.Min in milliseconds (RFC 9260 default 1000; lower it for fast failover demos).
    #[arg(long, default_value_t = 1000, value_name = "MS")]
    pub rto_min: u64,
    /// RTO.Max in milliseconds.
    #[arg(long, default_value_t = 60000, value_name = "MS")]
    pub rto_max: u64,
    /// RTO.Initial in milliseconds.
    #[arg(long, default_value_t = 1000, value_name = "MS")]
    pub rto_initial: u64,
    /// HB.interval in milliseconds.
    #[arg(long, default_value_t = 30000, value_name = "MS")]
    pub hb_interval: u64,
    /// Path.Max.Retrans.
    #[arg(long, default_value_t = 5, value_name = "N")]
    pub path_max_retrans: u32,
    /// PotentiallyFailed.Max.Retrans of RFC 7829 ("off" disables SCTP-PF).
    #[arg(long, default_value = "0", value_name = "N|off")]
    pub pf_max_retrans: String,
    /// Stripe new data over every active path (Concurrent Multipath Transfer: split fast
    /// retransmit, CUCv2, delayed ACK for CMT, RTX-SSTHRESH). `--cmt` alone or `--cmt pf`:
    /// with CMT-PF (follows --pf-max-retrans, which must not be off); `--cmt nopf`: without the
    /// Potentially Failed state; `off` (default): one path at a time.
    #[arg(long, value_enum, value_name = "MODE", num_args = 0..=1,
          default_value = "off", default_missing_value = "pf")]
    pub cmt: crate::mpa_args::CmtArg,
    /// CMT's scheduler: `striped` (bandwidth: each packet to the next path with room) or
    /// `lowest-rtt` (messages up to 1024 bytes on the path with the lowest RTT, larger ones
    /// striped).
    #[arg(long, value_enum, default_value = "striped", value_name = "S")]
    pub cmt_scheduler: CmtSchedulerArg,
    /// The peer is not sctp-perf (a kernel SCTP sink or source, another stack): no in-band
    /// PARAMS/FIN/REPORT; the client sends for -t/-n and shuts down, success being a
    /// graceful shutdown. A server enters this mode by itself when the first message it
    /// receives is not a PARAMS message, and counts everything until the peer ends.
    #[arg(long)]
    pub plain: bool,
    /// Seconds the client waits for the association to come up.
    #[arg(long, default_value_t = 10.0, value_name = "SECS")]
    pub connect_timeout: f64,
}

/// `--cmt-scheduler` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum CmtSchedulerArg {
    /// Each packet of new data to the next active path with room in its window.
    Striped,
    /// Small messages (up to 1024 bytes) to the active path with the lowest RTT.
    LowestRtt,
}

/// Parses "4M", "100k", "1G", "12345" (the same sizes `softrnic sim` takes).
pub fn parse_size(s: &str) -> Result<u64, String> {
    crate::sim::parse_bytes("bytes", s).map_err(|e| e.to_string())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Params {
    /// Local only: the peer does not speak the test protocol.
    plain: bool,
    verify: bool,
    reverse: bool,
    bidir: bool,
    unordered: bool,
    streams: u16,
    len: u32,
    bytes: u64,
    duration_ms: u64,
}

impl Params {
    fn encode(&self) -> Vec<u8> {
        let mut v = MAGIC.to_vec();
        let flags = u8::from(self.verify)
            | u8::from(self.reverse) << 1
            | u8::from(self.bidir) << 2
            | u8::from(self.unordered) << 3;
        v.extend_from_slice(&[1, 1, flags, 0]);
        v.extend_from_slice(&self.streams.to_be_bytes());
        v.extend_from_slice(&[0, 0]);
        v.extend_from_slice(&self.len.to_be_bytes());
        v.extend_from_slice(&self.bytes.to_be_bytes());
        v.extend_from_slice(&self.duration_ms.to_be_bytes());
        v
    }

    fn decode(b: &[u8]) -> Option<Params> {
        if b.len() < 32 || &b[..4] != MAGIC || b[4] != 1 || b[5] != 1 {
            return None;
        }
        let flags = b[6];
        Some(Params {
            plain: false,
            verify: flags & 1 != 0,
            reverse: flags & 2 != 0,
            bidir: flags & 4 != 0,
            unordered: flags & 8 != 0,
            streams: u16::from_be_bytes([b[8], b[9]]),
            len: u32::from_be_bytes(b[12..16].try_into().ok()?),
            bytes: u64::from_be_bytes(b[16..24].try_into().ok()?),
            duration_ms: u64::from_be_bytes(b[24..32].try_into().ok()?),
        })
    }
}

/// What a server assumes of a peer that does not speak the test protocol.
fn plain_params() -> Params {
    Params {
        plain: true,
        verify: false,
        reverse: false,
        bidir: false,
        unordered: false,
        streams: 1,
        len: 0,
        bytes: 0,
        duration_ms: 0,
    }
}

use ddp::be::be64;

/// The pattern byte at `offset` of message `seq` on `stream` (after the header).
fn pattern_byte(stream: u16, seq: u64, offset: usize) -> u8 {
    (seq.wrapping_mul(0x9E37_79B9)
        .wrapping_add(u64::from(stream) * 131)
        .wrapping_add(offset as u64 * 7)
        ^ (offset as u64 >> 8)) as u8
}

/// Builds a data message.
pub fn data_message(stream: u16, seq: u64, len: usize, verify: bool) -> Vec<u8> {
    let mut m = vec![0u8; len.max(HDR)];
    fill_data(&mut m, stream, seq, verify);
    m
}

fn fill_data(m: &mut [u8], stream: u16, seq: u64, verify: bool) {
    m[0..2].copy_from_slice(&stream.to_be_bytes());
    m[2..4].copy_from_slice(&[0, 0]);
    m[4..12].copy_from_slice(&seq.to_be_bytes());
    if verify {
        for (i, b) in m[HDR..].iter_mut().enumerate() {
            *b = pattern_byte(stream, seq, i);
        }
    }
}

/// Checks a received data message; returns a description of the first problem.
pub fn check_data(arrived_on: u16, m: &[u8], expect_len: usize) -> Result<(u16, u64), String> {
    if m.len() < HDR {
        return Err(format!(
            "message of {} bytes is shorter than the header",
            m.len()
        ));
    }
    let stream = u16::from_be_bytes([m[0], m[1]]);
    let seq = u64::from_be_bytes(m[4..12].try_into().unwrap_or_default());
    if stream != arrived_on {
        return Err(format!(
            "message seq {seq} names stream {stream} but arrived on stream {arrived_on}"
        ));
    }
    if m.len() != expect_len.max(HDR) {
        return Err(format!(
            "stream {stream} seq {seq}: {} bytes, expected {}",
            m.len(),
            expect_len.max(HDR)
        ));
    }
    if let Some(i) = m[HDR..]
        .iter()
        .enumerate()
        .position(|(i, b)| *b != pattern_byte(stream, seq, i))
    {
        return Err(format!(
            "stream {stream} seq {seq}: byte {} is {:#04x}, expected {:#04x}",
            HDR + i,
            m[HDR + i],
            pattern_byte(stream, seq, i)
        ));
    }
    Ok((stream, seq))
}

/// Receiver-side state of one direction.
#[derive(Default)]
struct RxState {
    next_seq: Vec<u64>,
    seen: Vec<Vec<bool>>,
    counts: Vec<u64>,
    errors: u64,
    fin: Option<(u64, Vec<u64>)>,
    done: bool,
    peer_report: Option<(u64, u64, u64)>,
    params: Option<Params>,
}

struct Shared {
    rx_bytes: AtomicU64,
    rx_msgs: AtomicU64,
    tx_bytes: AtomicU64,
    tx_msgs: AtomicU64,
    tx_done: AtomicBool,
    rx: Mutex<RxState>,
    failed: AtomicBool,
}

fn report(e: &str) {
    let _ = writeln!(std::io::stdout(), "error: {e}");
}

fn control(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut v = MAGIC.to_vec();
    v.extend_from_slice(&[1, kind, 0, 0]);
    v.extend_from_slice(body);
    v
}

/// Receives everything; runs until the association ends.
fn rx_loop(
    sock: &SctpSocket,
    sh: &Shared,
    early: Vec<sctp_io::Message>,
    plain: bool,
    verify: bool,
    unordered: bool,
    len: usize,
) {
    let mut printed = 0u32;
    let mut early = early.into_iter();
    loop {
        let m = match early.next() {
            Some(m) => m,
            None => match sock.recv(None) {
                Ok(m) => m,
                Err(_) => return,
            },
        };
        if plain {
            sh.rx_bytes
                .fetch_add(m.data.len() as u64, Ordering::Relaxed);
            sh.rx_msgs.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        if m.ppid == PPID_CONTROL {
            let b = &m.data;
            if b.len() < 8 || &b[..4] != MAGIC {
                report("malformed control message");
                sh.failed.store(true, Ordering::Relaxed);
                continue;
            }
            let mut st = sh.rx.lock().unwrap_or_else(|p| p.into_inner());
            match b[5] {
                1 => st.params = Params::decode(b),
                2 => {
                    let n = b
                        .get(8..)
                        .and_then(<[u8]>::first_chunk)
                        .map_or(0, |x| u16::from_be_bytes(*x));
                    let bytes = be64(b, 12).unwrap_or(0);
                    let per: Vec<u64> = (0..usize::from(n))
                        .map(|i| be64(b, 20 + i * 8).unwrap_or(0))
                        .collect();
                    st.fin = Some((bytes, per));
                }
                3 => {
                    st.peer_report = Some((
                        be64(b, 8).unwrap_or(0),
                        be64(b, 16).unwrap_or(0),
                        be64(b, 24).unwrap_or(0),
                    ))
                }
                _ => {}
            }
            drop(st);
            check_complete(sock, sh);
            continue;
        }
        if m.ppid != PPID_DATA {
            continue;
        }
        sh.rx_bytes
            .fetch_add(m.data.len() as u64, Ordering::Relaxed);
        sh.rx_msgs.fetch_add(1, Ordering::Relaxed);
        let mut st = sh.rx.lock().unwrap_or_else(|p| p.into_inner());
        let s = usize::from(m.stream);
        if st.counts.len() <= s {
            st.counts.resize(s + 1, 0);
            st.next_seq.resize(s + 1, 0);
            st.seen.resize(s + 1, Vec::new());
        }
        st.counts[s] += 1;
        if verify {
            let res = check_data(m.stream, &m.data, len).and_then(|(stream, seq)| {
                if unordered || m.unordered {
                    let seen = &mut st.seen[usize::from(stream)];
                    let i = seq as usize;
                    if seen.len() <= i {
                        seen.resize(i + 1, false);
                    }
                    if seen[i] {
                        return Err(format!("stream {stream} seq {seq} delivered twice"));
                    }
                    seen[i] = true;
                } else {
                    let exp = st.next_seq[usize::from(stream)];
                    st.next_seq[usize::from(stream)] = seq + 1;
                    if seq != exp {
                        return Err(format!(
                            "stream {stream}: seq {seq} delivered where {exp} was due (ordered stream)"
                        ));
                    }
                }
                Ok(())
            });
            if let Err(e) = res {
                st.errors += 1;
                if printed < 10 {
                    printed += 1;
                    report(&e);
                }
            }
        }
        let check = st.fin.is_some();
        drop(st);
        if check {
            check_complete(sock, sh);
        }
    }
}

/// After a FIN: once every announced message arrived, verify and send the REPORT.
fn check_complete(sock: &SctpSocket, sh: &Shared) {
    let mut st = sh.rx.lock().unwrap_or_else(|p| p.into_inner());
    if st.done {
        return;
    }
    let Some((_, per)) = st.fin.clone() else {
        return;
    };
    let got = |s: usize| st.counts.get(s).copied().unwrap_or(0);
    if (0..per.len()).any(|s| got(s) < per[s]) {
        return;
    }
    if (0..st.counts.len()).any(|s| got(s) > per.get(s).copied().unwrap_or(0)) {
        st.errors += 1;
        report("more messages arrived than the sender sent");
    }
    // Unordered: every sequence number exactly once.
    for (s, seen) in st.seen.clone().iter().enumerate() {
        let n = per.get(s).copied().unwrap_or(0) as usize;
        if !seen.is_empty() && (seen.len() != n || seen.iter().any(|x| !x)) {
            st.errors += 1;
            report(&format!("stream {s}: messages missing"));
        }
    }
    st.done = true;
    let mut body = Vec::new();
    body.extend_from_slice(&sh.rx_bytes.load(Ordering::Relaxed).to_be_bytes());
    body.extend_from_slice(&sh.rx_msgs.load(Ordering::Relaxed).to_be_bytes());
    body.extend_from_slice(&st.errors.to_be_bytes());
    drop(st);
    if let Err(e) = sock.send(0, PPID_CONTROL, false, &control(3, &body)) {
        report(&format!("cannot send the report: {e}"));
    }
}

/// How long after its last data the sender waits for room to send its FIN, and then for the
/// receiver's report, when nothing flows any more (a peer that stopped acknowledging).
const REPORT_GRACE: Duration = Duration::from_secs(10);

fn tx_loop(sock: &SctpSocket, sh: &Shared, p: Params) {
    let len = (p.len as usize).max(HDR);
    let start = Instant::now();
    let limit = Duration::from_millis(p.duration_ms);
    // A timed test stops sending at its time even while the peer acknowledges nothing.
    let deadline = (p.bytes == 0).then(|| start + limit);
    let mut per = vec![0u64; usize::from(p.streams)];
    let mut buf = vec![0u8; len];
    let mut i = 0u64;
    let mut sent = 0u64;
    loop {
        if p.bytes > 0 {
            if sent >= p.bytes {
                break;
            }
        } else if start.elapsed() >= limit {
            break;
        }
        let stream = (i % u64::from(p.streams)) as u16;
        let seq = per[usize::from(stream)];
        fill_data(&mut buf, stream, seq, p.verify);
        match sock.send_until(stream, PPID_DATA, p.unordered, &buf, deadline) {
            Ok(()) => {}
            Err(Error::TimedOut) => break,
            Err(e) => {
                report(&format!("send: {e}"));
                sh.failed.store(true, Ordering::Relaxed);
                sh.tx_done.store(true, Ordering::Relaxed);
                return;
            }
        }
        per[usize::from(stream)] += 1;
        i += 1;
        sent += len as u64;
        sh.tx_bytes.fetch_add(len as u64, Ordering::Relaxed);
        sh.tx_msgs.fetch_add(1, Ordering::Relaxed);
    }
    if p.plain {
        sh.tx_done.store(true, Ordering::Relaxed);
        return;
    }
    let mut body = Vec::new();
    body.extend_from_slice(&p.streams.to_be_bytes());
    body.extend_from_slice(&[0, 0]);
    body.extend_from_slice(&sent.to_be_bytes());
    for c in &per {
        body.extend_from_slice(&c.to_be_bytes());
    }
    let fin_by = Instant::now() + REPORT_GRACE;
    if let Err(e) = sock.send_until(0, PPID_CONTROL, false, &control(2, &body), Some(fin_by)) {
        report(&format!("cannot send FIN: {e}"));
        sh.failed.store(true, Ordering::Relaxed);
    }
    sh.tx_done.store(true, Ordering::Relaxed);
}

fn fmt_bytes(b: f64) -> String {
    if b >= 1024.0 * 1024.0 * 1024.0 {
        format!("{:.2} GBytes", b / (1024.0 * 1024.0 * 1024.0))
    } else if b >= 1024.0 * 1024.0 {
        format!("{:.1} MBytes", b / (1024.0 * 1024.0))
    } else {
        format!("{:.1} KBytes", b / 1024.0)
    }
}

fn fmt_rate(bytes: f64, secs: f64) -> String {
    let bits = if secs > 0.0 { bytes * 8.0 / secs } else { 0.0 };
    if bits >= 1e9 {
        format!("{:.2} Gbits/sec", bits / 1e9)
    } else {
        format!("{:.1} Mbits/sec", bits / 1e6)
    }
}

fn assoc_config(a: &SctpPerfArgs, streams: u16) -> Result<AssociationConfig, String> {
    let ms = Duration::from_millis;
    let pf = match a.pf_max_retrans.as_str() {
        "off" | "none" => None,
        n => Some(
            n.parse()
                .map_err(|_| format!("--pf-max-retrans: '{n}' is not a number or 'off'"))?,
        ),
    };
    let mut c = AssociationConfig {
        rto_initial: ms(a.rto_initial),
        rto_min: ms(a.rto_min),
        rto_max: ms(a.rto_max.max(a.rto_min)),
        hb_interval: ms(a.hb_interval),
        path_max_retrans: a.path_max_retrans,
        pf_max_retrans: pf,
        pmtu: a.mtu,
        outbound_streams: streams,
        max_inbound_streams: streams,
        // A wide window: loopback and LAN runs are window-limited otherwise.
        recv_buffer: 4 << 20,
        send_buffer: 8 << 20,
        ..AssociationConfig::default()
    };
    use crate::mpa_args::CmtArg;
    match a.cmt {
        CmtArg::Off => {}
        CmtArg::Pf if pf.is_none() => {
            return Err(
                "--cmt pf needs SCTP-PF: give --pf-max-retrans a number, or use --cmt nopf".into(),
            );
        }
        m => m.multipath().apply(&mut c),
    }
    if let Some(cmt) = c.cmt.as_mut() {
        cmt.scheduler = match a.cmt_scheduler {
            CmtSchedulerArg::Striped => sctp::Scheduler::Striped,
            CmtSchedulerArg::LowestRtt => sctp::Scheduler::LowestRtt {
                small_message: 1024,
            },
        };
    }
    Ok(c)
}

/// Default local address: loopback for a loopback peer, else the address the kernel
/// routes from (found with an unconnected UDP socket's `connect`).
fn default_local(remote: Option<IpAddr>) -> Vec<IpAddr> {
    match remote {
        Some(r) if r.is_loopback() => vec![r],
        Some(r) => std::net::UdpSocket::bind("0.0.0.0:0")
            .and_then(|s| {
                s.connect((r, 9))?;
                s.local_addr()
            })
            .map(|a| vec![a.ip()])
            .unwrap_or_else(|_| vec![IpAddr::from([0, 0, 0, 0])]),
        None => vec![IpAddr::from([127, 0, 0, 1])],
    }
}

/// Longest time option accepted (a year): larger ones would overflow a `Duration` deadline.
const MAX_SECS: f64 = 31_536_000.0;
/// Path MTU bounds (see the `--mtu` check).
const MIN_MTU: usize = 576;
const MAX_MTU: usize = 65_535;

/// Runs the tool; returns the exit status.
pub fn run(a: &SctpPerfArgs) -> ExitCode {
    if let Err(m) = check_args(a) {
        eprintln!("softrnic sctp-perf: {m}");
        return ExitCode::from(2);
    }
    let mut out = std::io::stdout();
    let t_start = Instant::now();
    let sock = match open_socket(a, &mut out) {
        Ok(s) => Arc::new(s),
        Err(OpenError::Usage(m)) => {
            eprintln!("softrnic sctp-perf: {m}");
            return ExitCode::from(2);
        }
        Err(OpenError::Failed(m)) => {
            eprintln!("softrnic sctp-perf: {m}");
            return ExitCode::from(1);
        }
    };
    let (params, early) = match agree_params(a, &sock, &mut out) {
        Ok(p) => p,
        Err(m) => {
            report(&m);
            return ExitCode::from(1);
        }
    };
    let dirs = Directions::of(a.server, &params);
    let (os, _) = sock.streams();
    if dirs.sends && os < params.streams {
        report(&format!(
            "only {os} outbound streams negotiated, {} requested",
            params.streams
        ));
        sock.abort();
        return ExitCode::from(1);
    }
    print_test(a.server, &sock, &params, &mut out);
    let sh = Arc::new(Shared {
        rx_bytes: AtomicU64::new(0),
        rx_msgs: AtomicU64::new(0),
        tx_bytes: AtomicU64::new(0),
        tx_msgs: AtomicU64::new(0),
        tx_done: AtomicBool::new(false),
        rx: Mutex::new(RxState::default()),
        failed: AtomicBool::new(false),
    });
    let rx_thread = {
        let (sock, sh) = (sock.clone(), sh.clone());
        let (v, u, l) = (params.verify, params.unordered, params.len as usize);
        let plain = params.plain;
        thread::spawn(move || rx_loop(&sock, &sh, early, plain, v, u, l))
    };
    let tx_thread = dirs.sends.then(|| {
        let (sock, sh) = (sock.clone(), sh.clone());
        thread::spawn(move || tx_loop(&sock, &sh, params))
    });
    if !dirs.sends {
        sh.tx_done.store(true, Ordering::Relaxed);
    }
    let t0 = Instant::now();
    watch(a, &sock, &sh, &params, dirs, t0, &mut out);
    let elapsed = t0.elapsed().as_secs_f64();
    if let Some(t) = tx_thread {
        let _ = t.join();
    }
    if !a.server {
        // The client ends the association once it has everything.
        sock.shutdown();
    }
    let closed = sock.wait_closed(Some(Duration::from_secs(10)));
    if closed.is_err() {
        // The peer did not complete the shutdown: end the association (ABORT) rather than
        // wait minutes for SCTP to give up on it.
        sock.abort();
    }
    while let Some(n) = sock.poll_notification() {
        let _ = writeln!(out, "{n}  (at {:.2} s)", t0.elapsed().as_secs_f64());
    }
    let _ = rx_thread.join();
    let mut ok = !sh.failed.load(Ordering::Relaxed);
    if let Err(e) = &closed {
        let _ = writeln!(
            out,
            "error: the association did not shut down gracefully: {e}"
        );
        ok = false;
    }
    ok &= summary(&sh, &params, dirs, elapsed, &mut out);
    print_association(&sock, t_start, &mut out);
    let _ = writeln!(out, "{}", if ok { "result: OK" } else { "result: FAILED" });
    let _ = out.flush();
    ExitCode::from(if ok { 0 } else { 1 })
}

/// The option values `run` refuses (exit 2), in words.
fn check_args(a: &SctpPerfArgs) -> Result<(), &'static str> {
    if a.streams == 0 || a.streams > 1024 {
        return Err("--streams must be 1 to 1024");
    }
    if a.len == 0 || a.len > 1 << 20 {
        return Err("-l must be 1 byte to 1 MiB");
    }
    if a.verify && a.len < HDR {
        return Err("--verify needs -l of at least 12 (the sequence header)");
    }
    if (!a.time.is_finite() || a.time <= 0.0 || a.time > MAX_SECS) && a.bytes.is_none() {
        return Err("-t must be more than 0 and at most 31536000 seconds (a year)");
    }
    if !a.interval.is_finite() || a.interval < 0.0 || a.interval > MAX_SECS {
        return Err("-i must be between 0 (no interval reports) and 31536000 seconds");
    }
    if !a.connect_timeout.is_finite() || a.connect_timeout <= 0.0 || a.connect_timeout > MAX_SECS {
        return Err("--connect-timeout must be more than 0 and at most 31536000 seconds");
    }
    if !(MIN_MTU..=MAX_MTU).contains(&a.mtu) {
        return Err(
            "--mtu must be 576-65535: an IPv4 host must take 576-byte packets (RFC 791), and \
             SCTP needs room for the IP, UDP, common and DATA chunk headers (RFC 9260 §3); no \
             IP packet is larger than 65535",
        );
    }
    if a.rto_min == 0 || a.rto_initial < a.rto_min || a.rto_max < a.rto_initial {
        return Err(
            "RTO values must satisfy 1 <= --rto-min <= --rto-initial <= --rto-max (milliseconds)",
        );
    }
    Ok(())
}

/// Why the association could not be set up: a usage error (exit 2) or a failure (exit 1).
enum OpenError {
    Usage(String),
    Failed(String),
}

/// The association: accepted (server, after saying where it listens) or connected.
fn open_socket(a: &SctpPerfArgs, out: &mut dyn Write) -> Result<SctpSocket, OpenError> {
    let locals = if a.bind.is_empty() {
        default_local(a.client.first().copied())
    } else {
        a.bind.clone()
    };
    if locals.iter().any(|ip| ip.is_unspecified()) {
        return Err(OpenError::Usage(
            "-B needs concrete addresses (SCTP announces each one to the peer)".into(),
        ));
    }
    let cfg_streams = if a.server { 1024 } else { a.streams.max(1) };
    let assoc = assoc_config(a, cfg_streams).map_err(OpenError::Usage)?;
    let transport = |local_port: u16| {
        if a.udp_encap {
            Transport::Udp {
                local_port,
                remote_port: a.udp_port,
            }
        } else {
            Transport::RawIpv4
        }
    };
    let failed = |e: Error| OpenError::Failed(e.to_string());
    if a.server {
        let mut cfg = Config::new(
            transport(a.udp_local_port.unwrap_or(a.udp_port)),
            locals.clone(),
            a.port,
        );
        cfg.association = assoc;
        let s = SctpSocket::listen(cfg).map_err(failed)?;
        let _ = writeln!(
            out,
            "Server listening on SCTP port {} at {} over {}",
            a.port,
            join(&locals),
            s.transport_description()
        );
        let _ = out.flush();
        s.accept(None).map_err(failed)?;
        return Ok(s);
    }
    let timeout = Some(Duration::from_secs_f64(a.connect_timeout.max(0.1)));
    let mk = |port: u16| {
        let mut cfg = Config::new(transport(port), locals.clone(), 0);
        cfg.association = assoc.clone();
        cfg
    };
    let first = match a.udp_local_port {
        Some(p) => SctpSocket::connect(mk(p), &a.client, a.port, timeout),
        None => match SctpSocket::connect(mk(a.udp_port), &a.client, a.port, timeout) {
            Err(Error::Io(e)) if a.udp_encap && e.kind() == std::io::ErrorKind::AddrInUse => {
                // Server on the same host: use an ephemeral local UDP port.
                SctpSocket::connect(mk(0), &a.client, a.port, timeout)
            }
            r => r,
        },
    };
    first.map_err(|e| {
        OpenError::Failed(format!(
            "cannot connect to {} port {}: {e}",
            join(&a.client),
            a.port
        ))
    })
}

/// The test's parameters: the client announces them; the server learns them from the first
/// message. Data on other streams can overtake the PARAMS message (a retransmitted first
/// chunk); such messages are returned to be counted once the parameters are known.
fn agree_params(
    a: &SctpPerfArgs,
    sock: &SctpSocket,
    out: &mut dyn Write,
) -> Result<(Params, Vec<sctp_io::Message>), String> {
    let mut early = Vec::new();
    if !a.server {
        let p = Params {
            plain: a.plain,
            verify: a.verify,
            reverse: a.reverse,
            bidir: a.bidir,
            unordered: a.unordered,
            streams: a.streams,
            len: a.len as u32,
            bytes: a.bytes.unwrap_or(0),
            duration_ms: (a.time * 1000.0) as u64,
        };
        if !p.plain {
            sock.send(0, PPID_CONTROL, false, &p.encode())
                .map_err(|e| format!("cannot send the test parameters: {e}"))?;
        }
        return Ok((p, early));
    }
    loop {
        match sock.recv(Some(Duration::from_secs(30))) {
            Ok(m) if m.ppid == PPID_CONTROL => {
                return match Params::decode(&m.data) {
                    Some(p) => Ok((p, early)),
                    None => {
                        sock.abort();
                        Err("the client's PARAMS message is malformed".into())
                    }
                };
            }
            // Only data on another stream (or unordered) can overtake the PARAMS sent
            // first on stream 0; ordered data on stream 0 means a peer without it.
            Ok(m)
                if m.ppid == PPID_DATA
                    && (m.stream != 0 || m.unordered)
                    && early.len() < 100_000 =>
            {
                early.push(m)
            }
            Err(Error::Closed) if !early.is_empty() => return Ok((plain_params(), early)),
            Ok(m) => {
                let _ = writeln!(
                    out,
                    "The peer is not sctp-perf (first message: PPID {}, {} bytes): counting \
                     everything it sends until it ends the association",
                    m.ppid,
                    m.data.len()
                );
                early.push(m);
                return Ok((plain_params(), early));
            }
            Err(e) => return Err(format!("no test parameters from the client: {e}")),
        }
    }
}

/// Which way data flows for this side, and the report IDs: `[  1]` is client -> server
/// data, `[  2]` server -> client.
#[derive(Clone, Copy)]
struct Directions {
    sends: bool,
    receives: bool,
    tx_id: u8,
    rx_id: u8,
}

impl Directions {
    fn of(server: bool, p: &Params) -> Directions {
        let (sends, receives) = if server {
            (p.reverse || p.bidir, !p.reverse || p.bidir)
        } else {
            (!p.reverse || p.bidir, p.reverse || p.bidir)
        };
        Directions {
            sends,
            receives,
            tx_id: if server { 2 } else { 1 },
            rx_id: if server { 1 } else { 2 },
        }
    }
}

/// The connection line, what the test does and the interval table's header.
fn print_test(server: bool, sock: &SctpSocket, params: &Params, out: &mut dyn Write) {
    let _ = writeln!(
        out,
        "{}: local {} SCTP port {} <-> remote {} SCTP port {}, {}",
        if server { "Accepted" } else { "Connected" },
        join(sock.local_addrs()),
        sock.port(),
        join(&sock.remote_addrs()),
        sock.peer_port(),
        sock.transport_description()
    );
    if params.plain {
        let _ = writeln!(
            out,
            "Plain peer: no test protocol, the peer decides what is sent"
        );
    } else {
        let _ = writeln!(
            out,
            "Streams {} ({}), message {} bytes, {}{}{}",
            params.streams,
            if params.unordered {
                "unordered"
            } else {
                "ordered"
            },
            params.len,
            if params.bytes > 0 {
                format!("{} to send", fmt_bytes(params.bytes as f64))
            } else {
                format!("{:.1} s", params.duration_ms as f64 / 1000.0)
            },
            if params.verify { ", verifying" } else { "" },
            match (params.reverse, params.bidir) {
                (_, true) => ", both directions",
                (true, _) => ", reverse (server sends)",
                _ => "",
            }
        );
    }
    let _ = writeln!(out, "[ ID] Interval           Transfer     Bitrate");
    let _ = out.flush();
}

/// Prints notifications and interval reports until the transfer is over (both directions
/// done and reported) or the association ended early or failed.
fn watch(
    a: &SctpPerfArgs,
    sock: &SctpSocket,
    sh: &Shared,
    params: &Params,
    d: Directions,
    t0: Instant,
    out: &mut dyn Write,
) {
    let interval = (a.interval > 0.0).then(|| Duration::from_secs_f64(a.interval));
    let mut next_tick = interval.map(|i| t0 + i);
    let mut last = (0u64, 0u64, t0);
    let mut closed_early = false;
    // A timed test ends by its time, its FIN and the report a little after, even when the
    // peer stopped acknowledging (SCTP itself would take minutes to give up on it).
    let give_up = (params.bytes == 0 && !params.plain)
        .then(|| t0 + Duration::from_millis(params.duration_ms) + 2 * REPORT_GRACE);
    loop {
        thread::sleep(Duration::from_millis(20));
        while let Some(n) = sock.poll_notification() {
            let _ = writeln!(out, "{n}  (at {:.2} s)", t0.elapsed().as_secs_f64());
            if matches!(n, Notification::Aborted(_) | Notification::ShutdownComplete) {
                closed_early = true;
            }
        }
        let now = Instant::now();
        if let (Some(tick), Some(iv)) = (next_tick, interval)
            && now >= tick
        {
            let tx = sh.tx_bytes.load(Ordering::Relaxed);
            let rx = sh.rx_bytes.load(Ordering::Relaxed);
            let from = last.2.duration_since(t0).as_secs_f64();
            let to = now.duration_since(t0).as_secs_f64();
            let dt = now.duration_since(last.2).as_secs_f64();
            for (on, id, b) in [
                (d.sends, d.tx_id, (tx - last.0) as f64),
                (d.receives, d.rx_id, (rx - last.1) as f64),
            ] {
                if on {
                    let _ = writeln!(
                        out,
                        "[{id:>3}] {from:>6.2}-{to:<6.2} sec  {:>12}  {:>16}",
                        fmt_bytes(b),
                        fmt_rate(b, dt)
                    );
                }
            }
            let _ = out.flush();
            last = (tx, rx, now);
            next_tick = Some(tick + iv);
        }
        let st = sh.rx.lock().unwrap_or_else(|p| p.into_inner());
        let tx_ok = !d.sends
            || (sh.tx_done.load(Ordering::Relaxed) && (params.plain || st.peer_report.is_some()));
        // A plain peer's data ends only with the association.
        let rx_ok = !d.receives || (st.done && !params.plain);
        drop(st);
        if (tx_ok && rx_ok) || closed_early || sh.failed.load(Ordering::Relaxed) {
            return;
        }
        if give_up.is_some_and(|g| now >= g) {
            let _ = writeln!(
                out,
                "error: the test's time and {} s more have passed and the transfer has not \
                 finished (the peer acknowledges nothing): giving up",
                2 * REPORT_GRACE.as_secs()
            );
            sh.failed.store(true, Ordering::Relaxed);
            return;
        }
    }
}

/// The sender and receiver lines and the checks behind them; `false` if anything was
/// lost, damaged or unreported.
fn summary(sh: &Shared, params: &Params, d: Directions, elapsed: f64, out: &mut dyn Write) -> bool {
    let st = sh.rx.lock().unwrap_or_else(|p| p.into_inner());
    let mut ok = true;
    let _ = writeln!(out, "- - - - - - - - - - - - - - - - - - - - - - - - -");
    let _ = writeln!(out, "[ ID] Interval           Transfer     Bitrate");
    let tx_id = d.tx_id;
    if d.sends {
        let b = sh.tx_bytes.load(Ordering::Relaxed) as f64;
        let _ = writeln!(
            out,
            "[{tx_id:>3}]   0.00-{elapsed:<6.2} sec  {:>12}  {:>16}  sender ({} messages)",
            fmt_bytes(b),
            fmt_rate(b, elapsed),
            sh.tx_msgs.load(Ordering::Relaxed)
        );
        match st.peer_report {
            _ if params.plain => {}
            Some((bytes, msgs, errors)) => {
                let _ = writeln!(
                    out,
                    "[{tx_id:>3}]   0.00-{elapsed:<6.2} sec  {:>12}  {:>16}  receiver ({msgs} messages, {errors} errors)",
                    fmt_bytes(bytes as f64),
                    fmt_rate(bytes as f64, elapsed)
                );
                if errors > 0 || bytes != sh.tx_bytes.load(Ordering::Relaxed) {
                    ok = false;
                }
            }
            None => {
                let _ = writeln!(out, "[{tx_id:>3}] no report from the receiver");
                ok = false;
            }
        }
    }
    if d.receives {
        let rx_id = d.rx_id;
        let b = sh.rx_bytes.load(Ordering::Relaxed) as f64;
        let _ = writeln!(
            out,
            "[{rx_id:>3}]   0.00-{elapsed:<6.2} sec  {:>12}  {:>16}  receiver ({} messages)",
            fmt_bytes(b),
            fmt_rate(b, elapsed),
            sh.rx_msgs.load(Ordering::Relaxed)
        );
        match &st.fin {
            _ if params.plain => {}
            Some((bytes, per)) => {
                let sent: u64 = per.iter().sum();
                let got = sh.rx_msgs.load(Ordering::Relaxed);
                if !st.done || got != sent || b as u64 != *bytes {
                    ok = false;
                    let _ = writeln!(
                        out,
                        "error: {got} of {sent} messages ({} of {bytes} bytes) arrived",
                        b as u64
                    );
                }
            }
            None => {
                ok = false;
                let _ = writeln!(out, "error: the transfer ended without the sender's FIN");
            }
        }
        if params.verify {
            let _ = writeln!(
                out,
                "verify: {} errors{}",
                st.errors,
                if st.errors == 0 {
                    " (every byte, order and completeness checked)"
                } else {
                    ""
                }
            );
        }
        if st.errors > 0 {
            ok = false;
        }
    }
    ok
}

/// The association's counters and a table of its paths.
fn print_association(sock: &SctpSocket, t_start: Instant, out: &mut dyn Write) {
    let stats = sock.stats();
    let _ = writeln!(
        out,
        "association: {} packets in, {} discarded, {} duplicate TSNs; {:.2} s total",
        stats.packets_received,
        stats.packets_discarded,
        stats.duplicate_tsns,
        t_start.elapsed().as_secs_f64()
    );
    let _ = writeln!(
        out,
        "{:<22} {:<16} {:<19} {:>9} {:>11} {:>8} {:>8} {:>9} {:>8} {:>9}",
        "path (remote)",
        "local",
        "state",
        "pkts out",
        "bytes out",
        "pkts in",
        "rtx",
        "srtt ms",
        "rto ms",
        "cwnd"
    );
    for p in sock.path_stats() {
        let _ = writeln!(
            out,
            "{:<22} {:<16} {:<19} {:>9} {:>11} {:>8} {:>8} {:>9} {:>8} {:>9}",
            format!(
                "{}{}",
                p.remote.ip(),
                if p.primary { " (primary)" } else { "" }
            ),
            p.local.ip().to_string(),
            format!("{:?}{}", p.state, if p.data_path { " *data" } else { "" }),
            p.packets_sent,
            p.bytes_sent,
            p.packets_received,
            p.chunks_retransmitted,
            p.srtt
                .map_or("-".to_string(), |d| format!("{:.3}", d.as_secs_f64() * 1e3)),
            p.rto.as_millis(),
            p.cwnd
        );
    }
}

fn join(a: &[IpAddr]) -> String {
    a.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pattern the lab's guest-side peer (tests/interop/tools/sctp_peer.py, whose test
    /// pins the same bytes) checks softrnic's data against.
    #[test]
    fn pattern_matches_the_lab_peer() {
        let at = |o| pattern_byte(3, 1000, o);
        assert_eq!([at(0), at(1), at(2), at(3)], [49, 56, 63, 70]);
        assert_eq!([at(300), at(301), at(302), at(303)], [100, 109, 114, 123]);
    }

    #[test]
    fn params_round_trip() {
        let p = Params {
            plain: false,
            verify: true,
            reverse: false,
            bidir: true,
            unordered: true,
            streams: 7,
            len: 1400,
            bytes: 4 << 20,
            duration_ms: 2500,
        };
        assert_eq!(Params::decode(&p.encode()), Some(p));
        assert_eq!(Params::decode(&p.encode()[..20]), None);
    }

    #[test]
    fn verify_catches_a_flipped_byte_and_a_wrong_stream() {
        let mut m = data_message(3, 99, 500, true);
        assert_eq!(check_data(3, &m, 500), Ok((3, 99)));
        assert!(check_data(2, &m, 500).is_err());
        m[300] ^= 1;
        let e = check_data(3, &m, 500).unwrap_err();
        assert!(e.contains("byte 300"), "{e}");
        assert!(check_data(3, &m[..499], 500).is_err());
    }

    #[test]
    fn sizes_parse_with_suffixes() {
        assert_eq!(parse_size("4M"), Ok(4 << 20));
        assert_eq!(parse_size("100k"), Ok(102_400));
        assert_eq!(parse_size("12345"), Ok(12345));
        assert!(parse_size("lots").is_err());
    }
}
