//! perftest-style tools: `softrnic write-bw`, `write-lat`, `read-bw`, `read-lat`, `send-bw`,
//! `send-lat`.
//!
//! Like perftest, each tool is a server when given no address and a client when given the
//! server's address; they take perftest's options (`-s`, `-a`, `-n`, `-p`,
//! `--report_gbits`, `-t`) plus the MPA options of the connection (`--mpa-rev`, `--crc`,
//! `--markers`, `--p2p --rtr`, `--ird/--ord`), and print perftest's tables.
//!
//! # Out-of-band setup: MPA private data
//!
//! The tools need no side channel: the client's MPA Request carries its parameters in the
//! ULP private data and the server's MPA Reply carries its buffer (all integers big
//! endian):
//!
//! ```text
//! Request:  "SRPF" | version 1 | test (u8) | flags (u8, bit 0: all sizes) | 0 (u8)
//!           | size (u64) | iterations (u64) | tx depth (u32) | client STag (u32) | client TO (u64)
//! Reply:    "SRPF" | version 1 | status (u8, 0: ok) | 0 | 0
//!           | server STag (u32) | server TO (u64) | server buffer length (u64)
//! ```
//!
//! A server refuses (MPA reject with status 1 in the Reply's private data) a client that
//! runs a different test. Each side's buffer is `2 × size` bytes (the largest size with
//! `-a`): the first half is where the peer writes, the second half the local source.
//!
//! # Measurements
//!
//! * Bandwidth: the client keeps up to `-t` work requests outstanding; `BW average` is
//!   bytes / total time, `BW peak` the best rate over any `-t` consecutive completions,
//!   MB/sec being 2^20 bytes per second as in perftest (`--report_gbits`: 10^9 bits).
//!   With `send-bw` the server posts the receives for each size, then signals the client
//!   with a Send; both sides print the table.
//! * Latency: `write-lat` and `send-lat` are ping-pongs (the reported times are half the
//!   round trip, as perftest's); `write-lat` detects arrival by polling the last byte of
//!   the receive area, which carries an iteration stamp. `read-lat` times each RDMA Read
//!   from post to completion. Sizes are separated by a Send/Receive barrier.
//! * The progress thread busy-polls for `--busy-poll-us` (default 50) before sleeping;
//!   `--busy-poll-us 0` shows the cost of the epoll wake-up in the latency.

use std::io::Write;
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::{Duration, Instant};

use clap::Args;

use crate::mpa_args::MpaArgs;
use stack::{
    Access, Cq, MemoryRegion, MrOptions, ProgressMode, Qp, QpAttr, RecvWr, Rnic, RnicConfig,
    SendWr, Wc,
};

/// Which tool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Test {
    /// RDMA Write bandwidth.
    WriteBw,
    /// RDMA Write latency (ping-pong).
    WriteLat,
    /// RDMA Read bandwidth.
    ReadBw,
    /// RDMA Read latency.
    ReadLat,
    /// Send bandwidth.
    SendBw,
    /// Send latency (ping-pong).
    SendLat,
}

impl Test {
    fn code(self) -> u8 {
        match self {
            Test::WriteBw => 1,
            Test::WriteLat => 2,
            Test::ReadBw => 3,
            Test::ReadLat => 4,
            Test::SendBw => 5,
            Test::SendLat => 6,
        }
    }

    fn title(self) -> &'static str {
        match self {
            Test::WriteBw => "RDMA_Write BW Test",
            Test::WriteLat => "RDMA_Write Latency Test",
            Test::ReadBw => "RDMA_Read BW Test",
            Test::ReadLat => "RDMA_Read Latency Test",
            Test::SendBw => "Send BW Test",
            Test::SendLat => "Send Latency Test",
        }
    }

    fn is_bw(self) -> bool {
        matches!(self, Test::WriteBw | Test::ReadBw | Test::SendBw)
    }
}

/// Options of the perftest-style tools.
#[derive(Args, Clone, Debug)]
pub struct PerfArgs {
    /// Server to connect to (client mode); without it, run as the server.
    #[arg(value_name = "SERVER")]
    pub server: Option<String>,
    /// TCP port.
    #[arg(short = 'p', long, default_value_t = 18515)]
    pub port: u16,
    /// Message size in bytes (default 65536 for bandwidth, 2 for latency tests).
    #[arg(short = 's', long)]
    pub size: Option<u64>,
    /// Run all sizes from 2 B to 8 MiB (powers of two).
    #[arg(short = 'a', long = "all")]
    pub all: bool,
    /// Iterations per size (default 5000 for bandwidth, 1000 for latency tests).
    #[arg(short = 'n', long = "iters")]
    pub iters: Option<u64>,
    /// Report bandwidth in Gb/sec instead of MB/sec.
    #[arg(long = "report_gbits")]
    pub report_gbits: bool,
    /// Outstanding work requests (bandwidth tests).
    #[arg(short = 't', long = "tx-depth", default_value_t = 128)]
    pub tx_depth: u32,
    /// MPA connection options.
    #[command(flatten)]
    pub mpa: MpaArgs,
    /// How long the progress thread busy-polls before sleeping, in microseconds.
    #[arg(long = "busy-poll-us", default_value_t = 50)]
    pub busy_poll_us: u64,
    /// Cap the EMSS (e.g. 1448 for Ethernet-sized FPDUs over loopback).
    #[arg(long)]
    pub emss: Option<u32>,
    /// No progress thread: the tool's own polling loop drives the RNIC (`rnic_advance`),
    /// one thread per process in all (best latency on few cores).
    #[arg(long = "manual-progress")]
    pub manual_progress: bool,
}

fn rnic_config(a: &PerfArgs) -> RnicConfig {
    RnicConfig {
        busy_poll: Duration::from_micros(a.busy_poll_us),
        max_emss: a.emss,
        progress: if a.manual_progress {
            ProgressMode::Manual
        } else {
            ProgressMode::Thread
        },
        ..RnicConfig::default()
    }
}

const MAGIC: &[u8; 4] = b"SRPF";
const VERSION: u8 = 1;
const MAX_ALL: u64 = 8 << 20;
const TIMEOUT: Duration = Duration::from_secs(30);
/// Receives kept posted for control messages.
const CTRL_AHEAD: u64 = 2;
const CTRL_LEN: u32 = 64;

/// What the client tells the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Hello {
    test: u8,
    all: bool,
    size: u64,
    iters: u64,
    tx_depth: u32,
    stag: u32,
    to: u64,
}

impl Hello {
    fn to_bytes(self) -> Vec<u8> {
        let mut v = Vec::with_capacity(40);
        v.extend_from_slice(MAGIC);
        v.extend_from_slice(&[VERSION, self.test, u8::from(self.all), 0]);
        v.extend_from_slice(&self.size.to_be_bytes());
        v.extend_from_slice(&self.iters.to_be_bytes());
        v.extend_from_slice(&self.tx_depth.to_be_bytes());
        v.extend_from_slice(&self.stag.to_be_bytes());
        v.extend_from_slice(&self.to.to_be_bytes());
        v
    }

    fn parse(b: &[u8]) -> Option<Hello> {
        if b.get(..4)? != MAGIC || *b.get(4)? != VERSION {
            return None;
        }
        Some(Hello {
            test: *b.get(5)?,
            all: b.get(6)? & 1 != 0,
            size: u64::from_be_bytes(b.get(8..16)?.try_into().ok()?),
            iters: u64::from_be_bytes(b.get(16..24)?.try_into().ok()?),
            tx_depth: u32::from_be_bytes(b.get(24..28)?.try_into().ok()?),
            stag: u32::from_be_bytes(b.get(28..32)?.try_into().ok()?),
            to: u64::from_be_bytes(b.get(32..40)?.try_into().ok()?),
        })
    }
}

/// What the server answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Welcome {
    status: u8,
    stag: u32,
    to: u64,
    len: u64,
}

impl Welcome {
    fn to_bytes(self) -> Vec<u8> {
        let mut v = Vec::with_capacity(28);
        v.extend_from_slice(MAGIC);
        v.extend_from_slice(&[VERSION, self.status, 0, 0]);
        v.extend_from_slice(&self.stag.to_be_bytes());
        v.extend_from_slice(&self.to.to_be_bytes());
        v.extend_from_slice(&self.len.to_be_bytes());
        v
    }

    fn parse(b: &[u8]) -> Option<Welcome> {
        if b.get(..4)? != MAGIC || *b.get(4)? != VERSION {
            return None;
        }
        Some(Welcome {
            status: *b.get(5)?,
            stag: u32::from_be_bytes(b.get(8..12)?.try_into().ok()?),
            to: u64::from_be_bytes(b.get(12..20)?.try_into().ok()?),
            len: u64::from_be_bytes(b.get(20..28)?.try_into().ok()?),
        })
    }
}

/// Failure of a tool run.
#[derive(Debug, thiserror::Error)]
pub enum PerfError {
    /// Bad options.
    #[error("{0}")]
    Usage(String),
    /// The runtime failed.
    #[error("RNIC: {0}")]
    Rnic(#[from] stack::RnicError),
    /// Memory registration failed.
    #[error("memory registration: {0}")]
    Mem(#[from] stack::MemError),
    /// A work request was refused.
    #[error("posting: {0}")]
    Post(#[from] stack::PostError),
    /// I/O.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The run failed.
    #[error("{0}")]
    Failed(String),
}

fn fail<T>(msg: impl Into<String>) -> Result<T, PerfError> {
    Err(PerfError::Failed(msg.into()))
}

/// The sizes a run covers.
fn sizes(all: bool, size: u64) -> Vec<u64> {
    if all {
        (1..=23).map(|i| 1u64 << i).collect()
    } else {
        vec![size]
    }
}

/// One end of a tool's connection.
struct End {
    rnic: Rnic,
    qp: Qp,
    scq: Cq,
    rcq: Cq,
    /// `2 × area`: [0, area) receive area, [area, 2 area) source.
    buf: MemoryRegion,
    /// Control messages: [0, 64) receive, [64, 128) source (zeros).
    ctrl: MemoryRegion,
    area: u64,
    /// Receives land in `buf` (send tests) or `ctrl` (the others).
    recv_in_buf: bool,
    remote_stag: u32,
    remote_to: u64,
    remote_area: u64,
    next_recv: u64,
    manual: bool,
}

impl End {
    fn open(a: &PerfArgs, test: Test, max: u64, extra_rq: u64) -> Result<End, PerfError> {
        let rnic = Rnic::open(rnic_config(a))?;
        End::open_on(rnic, a, test, max, extra_rq)
    }

    fn open_on(
        rnic: Rnic,
        a: &PerfArgs,
        test: Test,
        max: u64,
        extra_rq: u64,
    ) -> Result<End, PerfError> {
        let pd = rnic.alloc_pd();
        let scq = Cq::new(65536);
        let rcq = Cq::new(65536);
        let mut attr = QpAttr::new(pd, scq.clone(), rcq.clone());
        attr.sq_depth = (a.tx_depth as usize).max(16) + 8;
        attr.rq_depth = usize::try_from(extra_rq)
            .unwrap_or(usize::MAX)
            .saturating_add(CTRL_AHEAD as usize + 2);
        let qp = rnic.create_qp(attr)?;
        let access = Access::LOCAL_WRITE
            | Access::REMOTE_READ
            | Access::REMOTE_WRITE
            | Access::REMOTE_ATOMIC;
        let area = max.max(u64::from(CTRL_LEN));
        let len = usize::try_from(area.saturating_mul(2))
            .map_err(|_| PerfError::Usage("size too large".into()))?;
        let buf = rnic.mem().register_new(pd, len, MrOptions::new(access))?;
        let ctrl = rnic
            .mem()
            .register_new(pd, CTRL_LEN as usize * 2, MrOptions::new(access))?;
        let mut e = End {
            rnic,
            qp,
            scq,
            rcq,
            buf,
            ctrl,
            area,
            recv_in_buf: matches!(test, Test::SendBw | Test::SendLat),
            remote_stag: 0,
            remote_to: 0,
            remote_area: 0,
            next_recv: 0,
            manual: a.manual_progress,
        };
        for _ in 0..CTRL_AHEAD {
            e.post_recv()?;
        }
        Ok(e)
    }

    fn post_recv(&mut self) -> Result<(), PerfError> {
        let sge = if self.recv_in_buf {
            self.buf.sge(0, self.area as u32)
        } else {
            self.ctrl.sge(0, CTRL_LEN)
        };
        self.next_recv += 1;
        self.qp.post_recv(RecvWr::new(self.next_recv, vec![sge]))?;
        Ok(())
    }

    fn src(&self, len: u64) -> stack::Sge {
        self.buf.sge(self.area, len as u32)
    }

    /// Runs the progress core once in manual-progress mode.
    fn kick(&self) {
        if self.manual {
            let _ = self.rnic.advance(Duration::ZERO);
        }
    }

    /// Busy-polls `cq` for one completion; fails on an error completion.
    fn poll_cq(&self, cq: &Cq) -> Result<Wc, PerfError> {
        self.next_wc(cq, false)
    }

    /// Waits for one completion: busy polling (latency tests) or, with `block` and a
    /// progress thread, sleeping on the CQ (bandwidth tests: the CPU goes to the data path).
    fn next_wc(&self, cq: &Cq, block: bool) -> Result<Wc, PerfError> {
        let start = Instant::now();
        let mut spins = 0u32;
        loop {
            self.kick();
            if let Some(wc) = cq.poll_one() {
                if !wc.status.is_success() {
                    return fail(format!("work request failed: {wc:?}"));
                }
                return Ok(wc);
            }
            if block && !self.manual {
                cq.wait(Duration::from_millis(10));
                if start.elapsed() > TIMEOUT {
                    return fail("no completion within 30 s");
                }
                continue;
            }
            spins += 1;
            if spins > 4096 {
                spins = 0;
                if start.elapsed() > TIMEOUT {
                    return fail("no completion within 30 s");
                }
            }
            std::thread::yield_now();
        }
    }

    /// Fails if an error completion arrived on the send CQ (sends are unsignaled).
    fn check_sends(&self) -> Result<(), PerfError> {
        match self.scq.poll_one() {
            Some(wc) if !wc.status.is_success() => fail(format!("work request failed: {wc:?}")),
            _ => Ok(()),
        }
    }

    /// Sends an (unsignaled) control message.
    fn send_ctrl(&self) -> Result<(), PerfError> {
        self.qp.post_send(
            SendWr::send(u64::MAX, vec![self.ctrl.sge(u64::from(CTRL_LEN), 8)]).unsignaled(),
        )?;
        Ok(())
    }

    /// Waits for the next incoming message and re-posts its receive.
    fn recv_one(&mut self) -> Result<Wc, PerfError> {
        let wc = self.poll_cq(&self.rcq)?;
        self.post_recv()?;
        Ok(wc)
    }

    /// Both sides send a control message and wait for the peer's.
    fn barrier(&mut self) -> Result<(), PerfError> {
        self.send_ctrl()?;
        self.recv_one()?;
        Ok(())
    }
}

/// Runs one tool from the command line; returns the exit status.
pub fn run_command(test: Test, args: &PerfArgs, out: &mut dyn Write) -> std::process::ExitCode {
    let r = match &args.server {
        Some(s) => client(test, args, s, out),
        None => server(test, args, out),
    };
    match r {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            let _ = out.flush();
            eprintln!("softrnic: {e}");
            std::process::ExitCode::from(1)
        }
    }
}

const DASHES: &str =
    "---------------------------------------------------------------------------------------";

fn header(
    out: &mut dyn Write,
    test: Test,
    args: &PerfArgs,
    end: &End,
    peer: SocketAddr,
) -> Result<(), PerfError> {
    writeln!(out, "{DASHES}")?;
    writeln!(out, "                    {}", test.title())?;
    writeln!(out, " Device          : softrnic (iWARP over kernel TCP)")?;
    if let Some(s) = end.qp.session() {
        writeln!(
            out,
            " Transport       : MPA rev {} CRC {} markers tx {} rx {} P2P {}{}",
            s.revision,
            on(s.crc),
            on(s.markers_tx),
            on(s.markers_rx),
            on(s.p2p),
            s.rtr.map(|r| format!(" RTR {r}")).unwrap_or_default()
        )?;
        writeln!(out, " IRD / ORD       : {} / {}", s.ird, s.ord)?;
    }
    writeln!(out, " Mtu             : {}[B] (MULPDU)", end.qp.mulpdu())?;
    if test.is_bw() {
        writeln!(out, " TX depth        : {}", args.tx_depth)?;
    }
    writeln!(
        out,
        " Busy poll       : {} usec",
        end.rnic.config().busy_poll.as_micros()
    )?;
    writeln!(
        out,
        " local address:  STag {:#010x} TO {:#018x}",
        end.buf.stag(),
        end.buf.base_to()
    )?;
    writeln!(
        out,
        " remote address: {peer} STag {:#010x} TO {:#018x}",
        end.remote_stag, end.remote_to
    )?;
    writeln!(out, "{DASHES}")?;
    if test.is_bw() {
        let unit = if args.report_gbits {
            "Gb/sec"
        } else {
            "MB/sec"
        };
        writeln!(
            out,
            " #bytes     #iterations    BW peak[{unit}]    BW average[{unit}]   MsgRate[Mpps]"
        )?;
    } else {
        writeln!(
            out,
            " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] "
        )?;
    }
    Ok(())
}

fn on(b: bool) -> &'static str {
    if b { "on" } else { "off" }
}

fn bw_line(
    out: &mut dyn Write,
    gbits: bool,
    size: u64,
    iters: u64,
    total: Duration,
    peak_bps: f64,
) -> Result<(), PerfError> {
    let secs = total.as_secs_f64().max(1e-9);
    let bytes_ps = (size * iters) as f64 / secs;
    let conv = |b: f64| {
        if gbits {
            b * 8.0 / 1e9
        } else {
            b / 1_048_576.0
        }
    };
    writeln!(
        out,
        " {:<10} {:<10}       {:<10.2}         {:<10.2}           {:<.6}",
        size,
        iters,
        conv(peak_bps.max(bytes_ps)),
        conv(bytes_ps),
        iters as f64 / secs / 1e6
    )?;
    Ok(())
}

/// Latency statistics in microseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LatStats {
    /// Minimum.
    pub min: f64,
    /// Maximum.
    pub max: f64,
    /// Median.
    pub typical: f64,
    /// Mean.
    pub avg: f64,
    /// Standard deviation.
    pub stdev: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
}

/// Statistics of `samples` (µs; sorted in place). Percentiles are nearest-rank.
pub fn lat_stats(samples: &mut [f64]) -> LatStats {
    samples.sort_by(f64::total_cmp);
    let n = samples.len().max(1);
    let pct = |p: f64| {
        let i = ((p * n as f64).ceil() as usize).clamp(1, n) - 1;
        samples.get(i).copied().unwrap_or(0.0)
    };
    let avg = samples.iter().sum::<f64>() / n as f64;
    let var = samples.iter().map(|x| (x - avg) * (x - avg)).sum::<f64>() / n as f64;
    LatStats {
        min: samples.first().copied().unwrap_or(0.0),
        max: samples.last().copied().unwrap_or(0.0),
        typical: pct(0.5),
        avg,
        stdev: var.sqrt(),
        p99: pct(0.99),
        p999: pct(0.999),
    }
}

fn lat_line(out: &mut dyn Write, size: u64, iters: u64, s: &LatStats) -> Result<(), PerfError> {
    writeln!(
        out,
        " {:<7} {:<10}    {:<7.2}        {:<7.2}      {:<7.2}          {:<7.2}        {:<7.2}         {:<7.2}                {:<7.2}",
        size, iters, s.min, s.max, s.typical, s.avg, s.stdev, s.p99, s.p999
    )?;
    Ok(())
}

fn resolve(host: &str, port: u16) -> Result<SocketAddr, PerfError> {
    if let Ok(a) = host.parse::<SocketAddr>() {
        return Ok(a);
    }
    let host = host.trim_start_matches('[').trim_end_matches(']');
    (host, port)
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| PerfError::Usage(format!("cannot resolve {host}")))
}

fn client(test: Test, a: &PerfArgs, host: &str, out: &mut dyn Write) -> Result<(), PerfError> {
    let size = a.size.unwrap_or(if test.is_bw() { 65536 } else { 2 });
    if size == 0 || size > u64::from(u32::MAX) {
        return Err(PerfError::Usage("size must be 1 .. 2^32-1".into()));
    }
    let iters = a
        .iters
        .unwrap_or(if test.is_bw() { 5000 } else { 1000 })
        .max(1);
    let max = if a.all { MAX_ALL } else { size };
    let addr = resolve(host, a.port)?;
    let mut end = End::open(a, test, max, 0)?;
    let hello = Hello {
        test: test.code(),
        all: a.all,
        size,
        iters,
        tx_depth: a.tx_depth,
        stag: end.buf.stag(),
        to: end.buf.base_to(),
    };
    let session =
        end.rnic
            .connect_blocking(&end.qp, addr, a.mpa.config(hello.to_bytes()), TIMEOUT)?;
    let Some(w) = Welcome::parse(&session.peer_private_data) else {
        return fail("the server's MPA Reply carries no softrnic perf parameters");
    };
    if w.status != 0 {
        return fail("the server refused the test");
    }
    end.remote_stag = w.stag;
    end.remote_to = w.to;
    end.remote_area = w.len / 2;
    header(out, test, a, &end, addr)?;
    if test == Test::SendBw {
        // The MPA responder sends nothing before the initiator's first FPDU (RFC 5044
        // §7.1.2): open the stream so the server can signal its receives.
        end.send_ctrl()?;
    }
    for s in sizes(a.all, size) {
        match test {
            Test::WriteBw | Test::ReadBw => {
                let (total, peak) = bw_client(&mut end, test, s, iters, a.tx_depth)?;
                bw_line(out, a.report_gbits, s, iters, total, peak)?;
            }
            Test::SendBw => {
                // The server's "receives posted" message.
                end.recv_one()?;
                let (total, peak) = bw_client(&mut end, test, s, iters, a.tx_depth)?;
                bw_line(out, a.report_gbits, s, iters, total, peak)?;
            }
            Test::WriteLat | Test::SendLat => {
                let mut v = pingpong(&mut end, test, s, iters, true)?;
                lat_line(out, s, iters, &lat_stats(&mut v))?;
            }
            Test::ReadLat => {
                let mut v = read_lat(&mut end, s, iters)?;
                lat_line(out, s, iters, &lat_stats(&mut v))?;
            }
        }
        out.flush()?;
    }
    writeln!(out, "{DASHES}")?;
    end.rnic.disconnect(&end.qp)?;
    let _ = end.rnic.wait_disconnected(&end.qp, Duration::from_secs(5));
    Ok(())
}

fn bw_client(
    end: &mut End,
    test: Test,
    size: u64,
    iters: u64,
    depth: u32,
) -> Result<(Duration, f64), PerfError> {
    let depth = u64::from(depth.max(1));
    let mut posted = 0u64;
    let mut done = 0u64;
    let mut stamps: Vec<Instant> = Vec::with_capacity(iters as usize);
    let mut wcs = [Wc::new(
        stack::QpId(0),
        0,
        stack::WcOpcode::Send,
        stack::WcStatus::Success,
    ); 64];
    let start = Instant::now();
    let mut last_progress = Instant::now();
    while done < iters {
        while posted < iters && posted - done < depth {
            let wr = match test {
                Test::WriteBw => {
                    SendWr::write(posted, vec![end.src(size)], end.remote_stag, end.remote_to)
                }
                Test::ReadBw => SendWr::read(
                    posted,
                    vec![end.buf.sge(0, size as u32)],
                    end.remote_stag,
                    end.remote_to.wrapping_add(end.remote_area),
                ),
                _ => SendWr::send(posted, vec![end.src(size)]),
            };
            end.qp.post_send(wr)?;
            posted += 1;
        }
        end.kick();
        let n = end.scq.poll(&mut wcs);
        if n == 0 {
            if last_progress.elapsed() > TIMEOUT {
                return fail("bandwidth test stalled");
            }
            // Sleep on the CQ rather than spin: the progress threads need the CPU.
            if end.manual {
                std::thread::yield_now();
            } else {
                end.scq.wait(Duration::from_millis(10));
            }
            continue;
        }
        last_progress = Instant::now();
        for wc in wcs.iter().take(n) {
            if !wc.status.is_success() {
                return fail(format!("work request failed: {wc:?}"));
            }
            done += 1;
            stamps.push(last_progress);
        }
    }
    let total = start.elapsed();
    Ok((total, peak(&stamps, start, size, depth as usize)))
}

/// Peak bandwidth (bytes/s): the run's completions are cut into ten equal slices (each at
/// least twice the tx depth, as completions are stamped in batches) and the fastest slice
/// counts, timed from the end of the slice before it.
fn peak(stamps: &[Instant], start: Instant, size: u64, depth: usize) -> f64 {
    let slice = (stamps.len() / 10).max(2 * depth).max(1);
    let mut best = 0.0f64;
    let mut from = start;
    for chunk in stamps.chunks(slice) {
        let Some(&to) = chunk.last() else {
            break;
        };
        let dt = to.duration_since(from).as_secs_f64();
        if dt > 0.0 && chunk.len() == slice {
            best = best.max((size * chunk.len() as u64) as f64 / dt);
        }
        from = to;
    }
    best
}

/// The iteration stamp written into the last byte of a write-lat message (never 0).
fn stamp(size_idx: u64, i: u64) -> u8 {
    ((size_idx * 7 + i) % 255) as u8 + 1
}

/// A ping-pong of `iters` messages; the client returns half round trips in µs.
fn pingpong(
    end: &mut End,
    test: Test,
    size: u64,
    iters: u64,
    client: bool,
) -> Result<Vec<f64>, PerfError> {
    let at = size.saturating_sub(1) as usize;
    let src_at = end.area as usize + at;
    // Our receive area's stamp byte is cleared before the barrier: the peer writes only
    // after it.
    end.buf.buf().write_at(at, &[0])?;
    end.barrier()?;
    let size_idx = u64::from(size.trailing_zeros());
    let mut samples = Vec::with_capacity(iters as usize);
    for i in 0..iters {
        let t0 = Instant::now();
        if !client {
            pp_wait(end, test, at, stamp(size_idx, i))?;
        }
        end.buf.buf().write_at(src_at, &[stamp(size_idx, i)])?;
        let wr = if test == Test::WriteLat {
            SendWr::write(i, vec![end.src(size)], end.remote_stag, end.remote_to)
        } else {
            SendWr::send(i, vec![end.src(size)])
        };
        end.qp.post_send(wr.unsignaled())?;
        if client {
            pp_wait(end, test, at, stamp(size_idx, i))?;
            samples.push(t0.elapsed().as_secs_f64() * 1e6 / 2.0);
        }
    }
    Ok(samples)
}

fn pp_wait(end: &mut End, test: Test, at: usize, want: u8) -> Result<(), PerfError> {
    if test == Test::SendLat {
        end.recv_one()?;
        return Ok(());
    }
    let start = Instant::now();
    let mut b = [0u8];
    let mut spins = 0u32;
    loop {
        end.kick();
        end.buf.buf().read_at(at, &mut b)?;
        if b[0] == want {
            return Ok(());
        }
        spins += 1;
        if spins > 4096 {
            spins = 0;
            end.check_sends()?;
            if start.elapsed() > TIMEOUT {
                return fail("write-lat: the peer's write did not arrive");
            }
        }
        std::thread::yield_now();
    }
}

fn read_lat(end: &mut End, size: u64, iters: u64) -> Result<Vec<f64>, PerfError> {
    let mut samples = Vec::with_capacity(iters as usize);
    for i in 0..iters {
        let t0 = Instant::now();
        end.qp.post_send(SendWr::read(
            i,
            vec![end.buf.sge(0, size as u32)],
            end.remote_stag,
            end.remote_to.wrapping_add(end.remote_area),
        ))?;
        end.poll_cq(&end.scq)?;
        samples.push(t0.elapsed().as_secs_f64() * 1e6);
    }
    Ok(samples)
}

fn server(test: Test, a: &PerfArgs, out: &mut dyn Write) -> Result<(), PerfError> {
    // A listening RNIC; the QP and its buffer are made once the client's parameters are
    // known, on the same RNIC.
    let lrnic = Rnic::open(rnic_config(a))?;
    let any: SocketAddr = ([0, 0, 0, 0], a.port).into();
    let l = lrnic.listen(any)?;
    writeln!(
        out,
        " Waiting for client to connect on port {}",
        l.local_addr.port()
    )?;
    out.flush()?;
    let req = lrnic.wait_request(&l, Duration::from_secs(24 * 3600))?;
    let hello = Hello::parse(req.private_data());
    let Some(hello) = hello.filter(|h| h.test == test.code()) else {
        let refuse = Welcome {
            status: 1,
            stag: 0,
            to: 0,
            len: 0,
        };
        lrnic.reject(req.id, &refuse.to_bytes())?;
        return fail("client runs a different test (or is not a softrnic perf client)");
    };
    if hello.size == 0 || hello.size > u64::from(u32::MAX) {
        lrnic.reject(req.id, &[])?;
        return fail("client asked for an invalid size");
    }
    let max = if hello.all { MAX_ALL } else { hello.size };
    let extra_rq = if test == Test::SendBw { hello.iters } else { 0 };
    // The QP lives on the listening RNIC (the request is pending there).
    let mut end = End::open_on(lrnic, a, test, max, extra_rq)?;
    end.remote_stag = hello.stag;
    end.remote_to = hello.to;
    end.remote_area = max.max(u64::from(CTRL_LEN));
    let welcome = Welcome {
        status: 0,
        stag: end.buf.stag(),
        to: end.buf.base_to(),
        len: end.area * 2,
    };
    end.rnic
        .accept(req.id, &end.qp, a.mpa.config(welcome.to_bytes()))?;
    end.rnic.wait_established(&end.qp, TIMEOUT)?;
    header(out, test, a, &end, req.peer)?;
    if test == Test::SendBw {
        end.recv_one()?;
    }
    for s in sizes(hello.all, hello.size) {
        match test {
            Test::SendBw => {
                for _ in 0..hello.iters {
                    end.post_recv()?;
                }
                end.send_ctrl()?;
                // The client's messages come in order; time them from the first.
                let first = end.next_wc(&end.rcq, true)?;
                let start = Instant::now();
                let _ = first;
                let mut stamps = Vec::with_capacity(hello.iters as usize);
                stamps.push(start);
                for _ in 1..hello.iters {
                    end.next_wc(&end.rcq, true)?;
                    stamps.push(Instant::now());
                }
                let total = start.elapsed();
                // n − 1 messages arrived within `total` after the first.
                let n = hello.iters.saturating_sub(1).max(1);
                let pk = peak(
                    stamps.get(1..).unwrap_or(&[]),
                    start,
                    s,
                    hello.tx_depth as usize,
                );
                bw_line(out, a.report_gbits, s, n, total, pk)?;
            }
            Test::WriteLat | Test::SendLat => {
                pingpong(&mut end, test, s, hello.iters, false)?;
            }
            Test::WriteBw | Test::ReadBw | Test::ReadLat => {}
        }
        out.flush()?;
    }
    writeln!(out, "{DASHES}")?;
    let _ = end
        .rnic
        .wait_disconnected(&end.qp, Duration::from_secs(24 * 3600));
    Ok(())
}
