//! Multipath experiments: RDMA over SCTP (RFC 5043) through the RNIC's QP engine, between two
//! multihomed hosts in virtual time ([`crate::sctp`]'s hosts), with plain multihoming,
//! Concurrent Multipath Transfer (CMT) or CMT with the Potentially Failed state (CMT-PF).
//!
//! * [`failover`] — a bulk RDMA Write transfer over two paths of different rates while each
//!   path fails and recovers in turn, as a per-second throughput series per [`Mode`].
//! * [`bandwidth`] — RDMA Write throughput per message size over one path and over two
//!   equal paths.
//!
//! Throughput is the DDP payload (the RDMA Write data) the responder's RNIC receives from
//! its association; headers of every layer (DDP, SCTP, IP, Ethernet) and retransmissions are
//! not counted. Virtual time costs no CPU: a run measures the protocols and the links, not a
//! host's processing.

use std::time::Duration;

use netsim::{LinkParams, QueueLimit, SimError};
use sctp::{AssociationConfig, CmtConfig};
use stack::{MemoryRegion, QpState, SendWr, WcStatus};

use crate::plot::{Chart, Legend, Series};
use crate::sctp::{Outage, Pair, Rnic, Workload, path_events, run_pair};

/// How the association uses its paths.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    /// One path carries new data at a time; another takes over when it fails (RFC 9260
    /// §6.4 and §8.2, with the quick failover of SCTP-PF, RFC 7829, that softrnic uses by
    /// default: `cmt: None`, `pf_max_retrans: Some(0)`).
    Multihoming,
    /// Concurrent Multipath Transfer: new data striped over every active path
    /// (`cmt: Some(CmtConfig::default())`, `pf_max_retrans: None`).
    Cmt,
    /// CMT-PF: CMT, and a path that times out carries no data until a heartbeat answers
    /// (`cmt: Some(CmtConfig::default())`, `pf_max_retrans: Some(0)`).
    CmtPf,
}

impl Mode {
    /// Every mode, in the order of the tables.
    pub const ALL: [Mode; 3] = [Mode::Multihoming, Mode::Cmt, Mode::CmtPf];

    /// The name in tables and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Multihoming => "multihoming",
            Mode::Cmt => "CMT",
            Mode::CmtPf => "CMT-PF",
        }
    }

    /// The association configuration of the mode (the other parameters are the defaults).
    pub fn config(self) -> AssociationConfig {
        let mut c = AssociationConfig::default();
        match self {
            Mode::Multihoming => c.cmt = None,
            Mode::Cmt => {
                c.cmt = Some(CmtConfig::default());
                c.pf_max_retrans = None;
            }
            Mode::CmtPf => {
                c.cmt = Some(CmtConfig::default());
                c.pf_max_retrans = Some(0);
            }
        }
        c
    }
}

impl std::str::FromStr for Mode {
    type Err = String;

    fn from_str(s: &str) -> Result<Mode, String> {
        match s.to_ascii_lowercase().as_str() {
            "multihoming" | "mh" => Ok(Mode::Multihoming),
            "cmt" => Ok(Mode::Cmt),
            "cmt-pf" | "cmtpf" => Ok(Mode::CmtPf),
            _ => Err(format!(
                "unknown mode `{s}`; known: multihoming, cmt, cmt-pf"
            )),
        }
    }
}

/// A stream of RDMA Writes of `size` bytes from A into one region of B, up to `depth`
/// outstanding, re-posted as they complete: `messages` of them, or without end.
struct Bulk {
    size: usize,
    depth: usize,
    messages: Option<u64>,
    regions: Option<(MemoryRegion, MemoryRegion)>,
    outstanding: usize,
    posted: u64,
    failed: u64,
    started: Option<Duration>,
    finished: Option<Duration>,
}

impl Bulk {
    fn new(size: usize, depth: usize, messages: Option<u64>) -> Bulk {
        Bulk {
            size: size.max(1),
            depth: depth.max(1),
            messages,
            regions: None,
            outstanding: 0,
            posted: 0,
            failed: 0,
            started: None,
            finished: None,
        }
    }
}

impl Workload for Bulk {
    fn step(&mut self, a: &mut Rnic, b: &mut Rnic, now: Duration, _at_b: bool) {
        if self.regions.is_none() {
            if a.eng.state() != QpState::Rts || b.eng.state() != QpState::Rts {
                return;
            }
            self.regions = Some((a.mr(self.size), b.mr(self.size)));
            self.started = Some(now);
        }
        while let Some(w) = a.cq.poll_one() {
            self.outstanding = self.outstanding.saturating_sub(1);
            if w.status != WcStatus::Success {
                self.failed += 1;
            }
        }
        while b.cq.poll_one().is_some() {}
        let Some((src, dst)) = &self.regions else {
            return;
        };
        while self.outstanding < self.depth && self.messages.is_none_or(|m| self.posted < m) {
            let wr = SendWr::write(
                self.posted,
                vec![src.sge(0, self.size as u32)],
                dst.stag(),
                dst.to_at(0),
            );
            if a.eng.post_send(wr).is_err() {
                break;
            }
            self.outstanding += 1;
            self.posted += 1;
        }
        if let (Some(m), None, Some(meter)) = (self.messages, self.finished, &b.meter)
            && meter.total >= m * self.size as u64
        {
            self.finished = meter.last_at;
        }
    }

    fn done(&self) -> bool {
        self.finished.is_some()
    }
}

/// Outstanding RDMA Writes for a message size: about 8 MiB in flight, at least 2 and at
/// most the send queue's depth (256).
fn depth_for(size: usize) -> usize {
    (8usize << 20).div_ceil(size.max(1)).clamp(2, 256)
}

/// Virtual time a run may take when something stalls.
const STALL_DEADLINE: Duration = Duration::from_secs(600);

/// The failover experiment (Figure 4.4 of the design this project comes from).
pub mod failover {
    use super::*;

    /// The experiment's RTO.Max: 8 s instead of the 60 s RFC 9260 §16 suggests. With
    /// Path.Max.Retrans 5 and PFMR 0 a failed path stays Potentially Failed for its first
    /// 31 s of failure (one T3-rtx expiry and five heartbeats backed off 2, 4, 8, 8, 8 s)
    /// and is probed at least every 8 s, so a returning link is found within 8 s instead of
    /// up to 16 s (60 s once the doubling reaches it).
    pub const RTO_MAX: Duration = Duration::from_secs(8);

    /// Link rates, schedule and workload of a failover run.
    #[derive(Clone, Debug, PartialEq)]
    pub struct Setup {
        /// Bit rate of the primary path (path 0) and of the secondary (path 1).
        pub rates: [u64; 2],
        /// One-way propagation delay of both paths.
        pub delay: Duration,
        /// Virtual time measured.
        pub duration: Duration,
        /// Path outages.
        pub outages: Vec<Outage>,
        /// Size of each RDMA Write.
        pub message: usize,
        /// Path MTU.
        pub mtu: usize,
        /// Width of a throughput sample.
        pub bin: Duration,
        /// Frames each link direction holds waiting for the transmitter.
        pub queue: usize,
        /// Each endpoint's receive buffer (the a_rwnd it announces).
        pub recv_buffer: u32,
        /// RTO.Max of both associations (RFC 9260 §6.3.1 C7, §6.3.3 E2): the bound on the
        /// doubling of a path's RTO, and so on the interval between the heartbeats that
        /// probe a Potentially Failed path (RFC 7829 §5.1). RFC 9260 §16 suggests 60 s.
        pub rto_max: Duration,
    }

    impl Setup {
        /// The schedule of Figure 4.4 at the given rates: 120 s; the primary down at 15 s and
        /// up at 35 s, the secondary down at 55 s and up at 75 s; 100 µs one-way delay,
        /// queues of 100 frames (with the simulator's default of 1000, a 1 MiB receive buffer
        /// holds CMT to about one path's rate: data of the fast path waits in it for the
        /// slow path's), 256 KiB RDMA Writes, 1 s samples; RTO.Max [`RTO_MAX`].
        pub fn seed(rates: [u64; 2]) -> Setup {
            let s = Duration::from_secs;
            Setup {
                rates,
                delay: Duration::from_micros(100),
                duration: s(120),
                outages: vec![
                    Outage {
                        path: 0,
                        at: s(15),
                        down_for: Some(s(20)),
                    },
                    Outage {
                        path: 1,
                        at: s(55),
                        down_for: Some(s(20)),
                    },
                ],
                message: 256 << 10,
                mtu: 1500,
                bin: s(1),
                queue: 100,
                recv_buffer: 1 << 20,
                rto_max: RTO_MAX,
            }
        }

        /// The outages in words: `primary down 15-35 s, secondary down 55-75 s`.
        pub fn schedule(&self) -> String {
            let name = |p: usize| match p {
                0 => "primary".to_string(),
                1 => "secondary".to_string(),
                n => format!("path {n}"),
            };
            let secs = |d: Duration| format!("{}", d.as_secs_f64());
            self.outages
                .iter()
                .map(|o| match o.down_for {
                    Some(d) => format!("{} down {}-{} s", name(o.path), secs(o.at), secs(o.at + d)),
                    None => format!("{} down from {} s", name(o.path), secs(o.at)),
                })
                .collect::<Vec<_>>()
                .join(", ")
        }

        /// The sum of the link rates (bit/s).
        pub fn capacity(&self) -> u64 {
            self.rates.iter().sum()
        }

        fn links(&self) -> Vec<LinkParams> {
            self.rates
                .iter()
                .map(|&r| {
                    LinkParams::default()
                        .bandwidth(r)
                        .delay(self.delay)
                        .queue_limit(QueueLimit::Packets(self.queue))
                })
                .collect()
        }
    }

    /// The outcome of one mode.
    #[derive(Clone, Debug, PartialEq)]
    pub struct Run {
        /// The mode.
        pub mode: Mode,
        /// Bytes received per sample, one per sample of the setup's duration.
        pub bytes: Vec<u64>,
        /// Width of a sample.
        pub bin: Duration,
        /// RDMA Write bytes sent by A on each path (frames A→B, all headers included).
        pub path_bytes: Vec<u64>,
        /// Path events of the initiator's association.
        pub path_events: Vec<(Duration, String)>,
        /// Work completions in error.
        pub failed_completions: u64,
        /// Terminates sent by either host.
        pub terminates: u64,
    }

    impl Run {
        /// Throughput per sample in bit/s.
        pub fn rates(&self) -> Vec<f64> {
            let secs = self.bin.as_secs_f64();
            self.bytes.iter().map(|&b| b as f64 * 8.0 / secs).collect()
        }

        /// Mean throughput over the run in bit/s.
        pub fn average(&self) -> f64 {
            let secs = self.bin.as_secs_f64() * self.bytes.len().max(1) as f64;
            self.bytes.iter().sum::<u64>() as f64 * 8.0 / secs
        }

        /// The longest run of samples with nothing received, and where it starts.
        pub fn longest_zero_run(&self) -> (usize, Option<usize>) {
            let (mut best, mut at, mut cur) = (0, None, 0);
            for (i, &b) in self.bytes.iter().enumerate() {
                if b == 0 {
                    cur += 1;
                    if cur > best {
                        best = cur;
                        at = Some(i + 1 - cur);
                    }
                } else {
                    cur = 0;
                }
            }
            (best, at)
        }

        /// Samples with nothing received.
        pub fn zero_samples(&self) -> usize {
            self.bytes.iter().filter(|&&b| b == 0).count()
        }
    }

    /// Throughput against time, one line per run, in Mbit/s.
    pub fn chart(setup: &Setup, runs: &[Run]) -> Chart {
        let mbit = |r: u64| r as f64 / 1e6;
        Chart {
            title: format!(
                "RDMA Write over SCTP, {} + {} Mbit/s; {}; RTO.Max {} s",
                mbit(setup.rates[0]),
                mbit(setup.rates[1]),
                setup.schedule(),
                setup.rto_max.as_secs_f64()
            ),
            x_label: "time (s)".into(),
            y_label: "throughput (Mbit/s)".into(),
            log_x: false,
            log_y: false,
            markers: false,
            y_min: 0.0,
            legend: Legend::LowerRight,
            size: (1000, 560),
            series: runs
                .iter()
                .map(|r| Series {
                    name: r.mode.name().into(),
                    points: r
                        .rates()
                        .iter()
                        .enumerate()
                        .map(|(i, &x)| ((i as f64 + 0.5) * r.bin.as_secs_f64(), x / 1e6))
                        .collect(),
                })
                .collect(),
        }
    }

    /// Runs `setup` in `mode` with `seed`: a bulk transfer for the whole duration, measured
    /// from time 0 (association setup included).
    pub fn run(setup: &Setup, mode: Mode, seed: u64) -> Result<Run, SimError> {
        let pair = Pair {
            links: setup.links(),
            outages: &setup.outages,
            assoc: AssociationConfig {
                recv_buffer: setup.recv_buffer,
                rto_max: setup.rto_max.max(AssociationConfig::default().rto_min),
                ..mode.config()
            },
            mtu: setup.mtu,
            deadline: setup.duration,
            capture: None,
            meter: Some(setup.bin),
        };
        let bins = setup
            .duration
            .as_nanos()
            .div_ceil(setup.bin.as_nanos().max(1)) as usize;
        let work = Bulk::new(setup.message, depth_for(setup.message), None);
        let wall = std::time::Instant::now();
        let run = run_pair(&pair, seed, work, |end| {
            let mut bytes = end
                .b
                .rnic
                .meter
                .as_ref()
                .map(|m| m.bins.clone())
                .unwrap_or_default();
            bytes.resize(bins, 0);
            Run {
                mode,
                bytes,
                bin: setup.bin,
                path_bytes: end.counters.iter().map(|c| c[0].sent_bytes).collect(),
                path_events: path_events(end.a),
                failed_completions: end.work.failed,
                terminates: end.a.rnic.terminates + end.b.rnic.terminates,
            }
        })?;
        tracing::debug!(
            mode = mode.name(),
            wall_ms = wall.elapsed().as_millis() as u64,
            "failover run"
        );
        Ok(run)
    }
}

/// The bandwidth experiment (Figure 4.5 of the design this project comes from).
pub mod bandwidth {
    use super::*;

    /// Message sizes from 64 B to 4 MiB in powers of 4.
    pub const SIZES: [usize; 9] = [
        64,
        256,
        1 << 10,
        4 << 10,
        16 << 10,
        64 << 10,
        256 << 10,
        1 << 20,
        4 << 20,
    ];

    /// Links and workload of a bandwidth sweep.
    #[derive(Clone, Debug, PartialEq)]
    pub struct Setup {
        /// Bit rate of every path.
        pub rate: u64,
        /// One-way propagation delay of every path.
        pub delay: Duration,
        /// RDMA Write sizes.
        pub sizes: Vec<usize>,
        /// Bytes moved per size (at least one message).
        pub bytes: u64,
        /// How the two-path association uses its paths (the one-path runs use the same).
        pub mode: Mode,
        /// Path MTU.
        pub mtu: usize,
        /// Frames each link direction holds waiting for the transmitter.
        pub queue: usize,
    }

    impl Setup {
        /// [`SIZES`], 100 µs one-way delay, queues of 100 frames, CMT-PF, MTU 1500, `bytes`
        /// per size.
        pub fn new(rate: u64, bytes: u64) -> Setup {
            Setup {
                rate,
                delay: Duration::from_micros(100),
                sizes: SIZES.to_vec(),
                bytes,
                mode: Mode::CmtPf,
                mtu: 1500,
                queue: 100,
            }
        }
    }

    /// One message size over one and over two paths.
    #[derive(Clone, Copy, Debug, PartialEq)]
    pub struct Point {
        /// RDMA Write size.
        pub size: usize,
        /// Over one path.
        pub one: Sample,
        /// Over two paths.
        pub two: Sample,
    }

    impl Point {
        /// Two paths over one.
        pub fn ratio(&self) -> f64 {
            if self.one.bps > 0.0 {
                self.two.bps / self.one.bps
            } else {
                0.0
            }
        }
    }

    /// One transfer of the sweep.
    #[derive(Clone, Copy, Debug, Default, PartialEq)]
    pub struct Sample {
        /// Throughput (bit/s): the bytes over the time from the first Write posted (the
        /// connection is up) to the last byte received; zero if the transfer did not finish.
        pub bps: f64,
        /// The sender's T3-rtx expirations.
        pub timeouts: u64,
        /// The sender's fast retransmit events.
        pub fast_retransmits: u64,
        /// Frames the links dropped at a full queue (all paths, both directions).
        pub queue_drops: u64,
    }

    /// RDMA Writes of `size` over `paths` paths.
    pub fn throughput(
        setup: &Setup,
        paths: usize,
        size: usize,
        seed: u64,
    ) -> Result<Sample, SimError> {
        let pair = Pair {
            links: vec![
                LinkParams::default()
                    .bandwidth(setup.rate)
                    .delay(setup.delay)
                    .queue_limit(QueueLimit::Packets(setup.queue));
                paths.max(1)
            ],
            outages: &[],
            assoc: setup.mode.config(),
            mtu: setup.mtu,
            deadline: STALL_DEADLINE,
            capture: None,
            meter: Some(Duration::from_secs(1)),
        };
        let messages = (setup.bytes / size.max(1) as u64).max(1);
        let work = Bulk::new(size, depth_for(size), Some(messages));
        run_pair(&pair, seed, work, |end| {
            let bps = match (end.work.started, end.work.finished) {
                (Some(s), Some(f)) if f > s => {
                    (messages * size as u64) as f64 * 8.0 / (f - s).as_secs_f64()
                }
                _ => 0.0,
            };
            let stats = end.stats.unwrap_or_default();
            Sample {
                bps,
                timeouts: stats.t3_expirations,
                fast_retransmits: stats.fast_retransmits,
                queue_drops: end.counters.iter().flatten().map(|c| c.dropped_queue).sum(),
            }
        })
    }

    /// Throughput against message size, one line per path count, in Mbit/s.
    pub fn chart(setup: &Setup, points: &[Point]) -> Chart {
        let line = |name: String, f: fn(&Point) -> f64| Series {
            name,
            points: points.iter().map(|p| (p.size as f64, f(p) / 1e6)).collect(),
        };
        Chart {
            title: format!(
                "RDMA Write over SCTP: one vs two {} Mbit/s paths ({})",
                setup.rate as f64 / 1e6,
                setup.mode.name()
            ),
            x_label: "message size".into(),
            y_label: "throughput (Mbit/s)".into(),
            log_x: true,
            log_y: false,
            markers: true,
            y_min: 0.0,
            legend: Legend::UpperLeft,
            size: (1000, 560),
            series: vec![
                line("one path".into(), |p| p.one.bps),
                line("two paths".into(), |p| p.two.bps),
            ],
        }
    }

    /// Every size of `setup` over one path and over two.
    pub fn run(setup: &Setup, seed: u64) -> Result<Vec<Point>, SimError> {
        setup
            .sizes
            .iter()
            .map(|&size| {
                Ok(Point {
                    size,
                    one: throughput(setup, 1, size, seed)?,
                    two: throughput(setup, 2, size, seed)?,
                })
            })
            .collect()
    }
}

/// MPI-style one-sided transfers (the original's Put and Get) over the RNIC: latency per
/// message size over MPA/TCP and over SCTP with one and two paths.
pub mod onesided {
    use std::cell::RefCell;
    use std::net::SocketAddrV4;
    use std::rc::Rc;

    use netsim::tcp::smoltcp::iface::SocketHandle;
    use netsim::tcp::smoltcp::socket::tcp::State as TcpState;
    use netsim::tcp::{TcpApp, TcpCtx, TcpHost, TcpHostConfig};
    use netsim::{Instant, Sim};
    use stack::mpa::{self, CrcPolicy};
    use stack::{RecvWr, Setup as EngineSetup, WcOpcode};

    use super::*;

    /// A one-sided operation, each followed by a fence: the origin starts the next only
    /// when this one is complete at both ends.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub enum Op {
        /// Put: an RDMA Write into the target's window and a notification Send after it
        /// (in order, so its arrival means the data is placed); the target's acknowledging
        /// Send is the fence.
        Put,
        /// Get through an RDMA Read of the target's window; the Read's completion is the
        /// fence.
        GetRead,
        /// Get through an RDMA Write: the origin Sends a request, the target Writes the
        /// data into the origin's window and Sends a notification after it.
        GetWrite,
    }

    impl Op {
        /// Every operation, in the order of the tables.
        pub const ALL: [Op; 3] = [Op::Put, Op::GetRead, Op::GetWrite];

        /// The name in tables.
        pub fn name(self) -> &'static str {
            match self {
                Op::Put => "Put",
                Op::GetRead => "Get (Read)",
                Op::GetWrite => "Get (Write)",
            }
        }
    }

    /// The lower layer under the RNIC.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub enum Transport {
        /// MPA (CRC on) over the simulator's TCP (smoltcp), one link.
        Tcp,
        /// DDP over SCTP (RFC 5043), one path.
        Sctp1,
        /// DDP over SCTP with two paths and CMT-PF.
        Sctp2,
    }

    impl Transport {
        /// Every transport, in the order of the tables.
        pub const ALL: [Transport; 3] = [Transport::Tcp, Transport::Sctp1, Transport::Sctp2];

        /// The name in tables.
        pub fn name(self) -> &'static str {
            match self {
                Transport::Tcp => "TCP",
                Transport::Sctp1 => "SCTP 1 path",
                Transport::Sctp2 => "SCTP 2 paths",
            }
        }
    }

    /// Message sizes from 2 B to 4 MiB in powers of 2.
    pub fn sizes() -> Vec<usize> {
        (1..=22).map(|k| 1usize << k).collect()
    }

    /// Links and workload of a latency sweep.
    #[derive(Clone, Debug, PartialEq)]
    pub struct Setup {
        /// Bit rate of every link.
        pub rate: u64,
        /// One-way propagation delay of every link.
        pub delay: Duration,
        /// Message sizes.
        pub sizes: Vec<usize>,
        /// Operations per size that are not measured (the windows open).
        pub warmup: usize,
        /// Operations per size that are measured.
        pub iterations: usize,
        /// Frames each link direction holds waiting for the transmitter.
        pub queue: usize,
        /// A fault injected into every transfer, to show that the byte check catches it
        /// (`None` in every experiment).
        pub fault: Option<Fault>,
    }

    /// A fault [`Setup::fault`] injects, for testing the check of the bytes that arrive.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Fault {
        /// The data is placed one byte past its place in the target window (the RDMA
        /// operation names target offset 1 instead of 0).
        Misplace,
        /// One byte of the target window is changed after the data is placed, before the
        /// target looks at it (as a faulty DMA would).
        Corrupt,
    }

    impl Setup {
        /// [`sizes`], 100 µs one way, queues of 100 frames, 2 operations of warm-up and 5
        /// measured per size.
        pub fn new(rate: u64) -> Setup {
            Setup {
                rate,
                delay: Duration::from_micros(100),
                sizes: sizes(),
                warmup: 2,
                iterations: 5,
                queue: 100,
                fault: None,
            }
        }

        fn link(&self) -> LinkParams {
            LinkParams::default()
                .bandwidth(self.rate)
                .delay(self.delay)
                .queue_limit(QueueLimit::Packets(self.queue))
        }
    }

    /// Mean latency per size of one operation over one transport.
    #[derive(Clone, Debug, PartialEq)]
    pub struct Curve {
        /// The operation.
        pub op: Op,
        /// The transport.
        pub transport: Transport,
        /// (size, mean latency); sizes not reached before the deadline are missing.
        pub points: Vec<(usize, Duration)>,
        /// Work completions in error.
        pub failed_completions: u64,
        /// Bytes checked at their target and found as the origin sent them: every
        /// operation's, warm-up included.
        pub verified_bytes: u64,
        /// The first transfer whose bytes did not arrive as sent; the curve stops there.
        pub mismatch: Option<Mismatch>,
    }

    /// A transfer whose bytes did not arrive as sent.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct Mismatch {
        /// Message size.
        pub size: usize,
        /// Operation number within the size (warm-up included).
        pub iteration: usize,
        /// Bytes that differ from what was sent.
        pub wrong_bytes: usize,
        /// The first of them.
        pub first_offset: usize,
    }

    impl std::fmt::Display for Mismatch {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(
                f,
                "{} B transfer #{}: {} byte(s) not as sent, the first at offset {}",
                self.size, self.iteration, self.wrong_bytes, self.first_offset
            )
        }
    }

    /// The bytes of operation `iteration` of size number `size_i` of `op`: a different
    /// pattern for every transfer, so that bytes left over from an earlier one never pass.
    fn pattern(op: Op, size_i: usize, iteration: usize, len: usize) -> Vec<u8> {
        crate::mpa::xorshift_bytes(
            (op as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
                ^ ((size_i as u64) << 32)
                ^ (iteration as u64),
            len,
        )
    }

    const CTL: usize = 8;
    const RECVS: usize = 8;

    struct Regions {
        a_win: MemoryRegion,
        b_win: MemoryRegion,
        a_ctl: MemoryRegion,
        b_ctl: MemoryRegion,
    }

    /// The origin A runs `op` on every size, one at a time; the target B answers.
    struct Latency {
        op: Op,
        sizes: Vec<usize>,
        warmup: usize,
        iterations: usize,
        regions: Option<Regions>,
        size_i: usize,
        iter: usize,
        started: Option<Duration>,
        sum: Duration,
        points: Vec<(usize, Duration)>,
        failed: u64,
        next_id: u64,
        fault: Option<Fault>,
        /// What the current operation must leave in its target window.
        expected: Vec<u8>,
        verified: u64,
        mismatch: Option<Mismatch>,
    }

    impl Latency {
        fn new(op: Op, setup: &Setup) -> Latency {
            Latency {
                op,
                sizes: setup.sizes.clone(),
                warmup: setup.warmup,
                iterations: setup.iterations.max(1),
                regions: None,
                size_i: 0,
                iter: 0,
                started: None,
                sum: Duration::ZERO,
                points: Vec::new(),
                failed: 0,
                next_id: 0,
                fault: setup.fault,
                expected: Vec::new(),
                verified: 0,
                mismatch: None,
            }
        }

        /// Where the operation places its data in the target window.
        fn target_offset(&self) -> u64 {
            u64::from(self.fault == Some(Fault::Misplace))
        }

        /// Before an operation: the source window holds this transfer's pattern, the target
        /// window its complement (so a byte that never arrives is caught too).
        fn prepare(&mut self) {
            let Some(r) = &self.regions else {
                return;
            };
            let size = self.size() as usize;
            let want = pattern(self.op, self.size_i, self.iter, size);
            let poison: Vec<u8> = want.iter().map(|x| !x).collect();
            let (src, dst) = match self.op {
                Op::Put => (&r.a_win, &r.b_win),
                Op::GetRead | Op::GetWrite => (&r.b_win, &r.a_win),
            };
            let _ = src.buf().write_at(0, &want);
            let _ = dst.buf().write_at(0, &poison);
            self.expected = want;
        }

        /// After the notification (Put, Get via Write) or the Read's completion (Get via
        /// Read): the target window must hold exactly what the origin sent.
        fn check(&mut self) {
            let Some(r) = &self.regions else {
                return;
            };
            let win = match self.op {
                Op::Put => &r.b_win,
                Op::GetRead | Op::GetWrite => &r.a_win,
            };
            if self.fault == Some(Fault::Corrupt) && !self.expected.is_empty() {
                let mut b = [0u8];
                let _ = win.buf().read_at(0, &mut b);
                let _ = win.buf().write_at(0, &[b[0] ^ 0x5a]);
            }
            let mut got = vec![0u8; self.expected.len()];
            if win.buf().read_at(0, &mut got).is_err() {
                got.iter_mut()
                    .zip(&self.expected)
                    .for_each(|(g, w)| *g = !w);
            }
            let wrong: Vec<usize> = got
                .iter()
                .zip(&self.expected)
                .enumerate()
                .filter(|(_, (g, w))| g != w)
                .map(|(i, _)| i)
                .collect();
            if let Some(&first) = wrong.first() {
                if self.mismatch.is_none() {
                    self.mismatch = Some(Mismatch {
                        size: self.expected.len(),
                        iteration: self.iter,
                        wrong_bytes: wrong.len(),
                        first_offset: first,
                    });
                }
            } else {
                self.verified += self.expected.len() as u64;
            }
        }

        fn id(&mut self) -> u64 {
            self.next_id += 1;
            self.next_id
        }

        fn size(&self) -> u32 {
            self.sizes.get(self.size_i).map_or(0, |&s| s as u32)
        }

        /// The origin starts the next operation.
        fn start(&mut self, a: &mut Rnic, now: Duration) {
            self.prepare();
            let size = self.size();
            let (w1, w2) = (self.id(), self.id());
            let to = self.target_offset();
            let Some(r) = &self.regions else {
                return;
            };
            let ok = match self.op {
                Op::Put => {
                    a.eng
                        .post_send(SendWr::write(
                            w1,
                            vec![r.a_win.sge(0, size)],
                            r.b_win.stag(),
                            r.b_win.to_at(to),
                        ))
                        .is_ok()
                        && a.eng
                            .post_send(SendWr::send(w2, vec![r.a_ctl.sge(0, CTL as u32)]))
                            .is_ok()
                }
                Op::GetRead => a
                    .eng
                    .post_send(SendWr::read(
                        w1,
                        vec![r.a_win.sge(to, size)],
                        r.b_win.stag(),
                        r.b_win.to_at(0),
                    ))
                    .is_ok(),
                Op::GetWrite => a
                    .eng
                    .post_send(SendWr::send(w1, vec![r.a_ctl.sge(0, CTL as u32)]))
                    .is_ok(),
            };
            if ok {
                self.started = Some(now);
            } else {
                self.failed += 1;
            }
        }

        /// The origin saw the operation complete.
        fn finish(&mut self, now: Duration) {
            let Some(t0) = self.started.take() else {
                return;
            };
            if self.iter >= self.warmup {
                self.sum += now.saturating_sub(t0);
            }
            self.iter += 1;
            if self.iter == self.warmup + self.iterations {
                self.points
                    .push((self.sizes[self.size_i], self.sum / self.iterations as u32));
                self.sum = Duration::ZERO;
                self.iter = 0;
                self.size_i += 1;
            }
        }

        fn repost(&mut self, x: &mut Rnic, ctl: Sge) {
            let id = self.id();
            if x.eng.post_recv(RecvWr::new(id, vec![ctl])).is_err() {
                self.failed += 1;
            }
        }
    }

    use stack::Sge;

    impl Workload for Latency {
        fn step(&mut self, a: &mut Rnic, b: &mut Rnic, now: Duration, at_b: bool) {
            if self.regions.is_none() {
                if a.eng.state() != QpState::Rts || b.eng.state() != QpState::Rts {
                    return;
                }
                // One byte more than the largest size: room for a misplaced transfer.
                let max = self.sizes.iter().copied().max().unwrap_or(1) + 1;
                let r = Regions {
                    a_win: a.mr(max),
                    b_win: b.mr(max),
                    a_ctl: a.mr(CTL * RECVS * 2),
                    b_ctl: b.mr(CTL * RECVS * 2),
                };
                let (ac, bc) = (r.a_ctl.sge(0, CTL as u32), r.b_ctl.sge(0, CTL as u32));
                self.regions = Some(r);
                for _ in 0..RECVS {
                    self.repost(a, ac);
                    self.repost(b, bc);
                }
            }
            let Some(r) = &self.regions else {
                return;
            };
            let (a_ctl, b_ctl) = (r.a_ctl.sge(0, CTL as u32), r.b_ctl.sge(0, CTL as u32));
            if at_b {
                // The target answers requests and notifications in its own turn.
                while let Some(w) = b.cq.poll_one() {
                    if w.status != WcStatus::Success {
                        self.failed += 1;
                        continue;
                    }
                    if w.opcode != WcOpcode::Recv {
                        continue;
                    }
                    self.repost(b, b_ctl);
                    if self.op == Op::Put {
                        // The notification came after the Write: the data is placed.
                        self.check();
                    }
                    let size = self.size();
                    let to = self.target_offset();
                    let (w1, w2) = (self.id(), self.id());
                    let Some(r) = &self.regions else {
                        return;
                    };
                    let posted = match self.op {
                        Op::Put => b
                            .eng
                            .post_send(SendWr::send(w1, vec![r.b_ctl.sge(CTL as u64, CTL as u32)])),
                        Op::GetWrite => b
                            .eng
                            .post_send(SendWr::write(
                                w1,
                                vec![r.b_win.sge(0, size)],
                                r.a_win.stag(),
                                r.a_win.to_at(to),
                            ))
                            .and_then(|()| {
                                b.eng.post_send(SendWr::send(
                                    w2,
                                    vec![r.b_ctl.sge(CTL as u64, CTL as u32)],
                                ))
                            }),
                        Op::GetRead => Ok(()),
                    };
                    if posted.is_err() {
                        self.failed += 1;
                    }
                }
                return;
            }
            while let Some(w) = a.cq.poll_one() {
                if w.status != WcStatus::Success {
                    self.failed += 1;
                    continue;
                }
                let done = match (self.op, w.opcode) {
                    (Op::Put | Op::GetWrite, WcOpcode::Recv) => {
                        self.repost(a, a_ctl);
                        true
                    }
                    (Op::GetRead, WcOpcode::RdmaRead) => true,
                    _ => false,
                };
                if done {
                    if self.op != Op::Put {
                        self.check();
                    }
                    self.finish(now);
                }
            }
            if self.started.is_none() && !self.done() {
                self.start(a, now);
            }
        }

        fn done(&self) -> bool {
            self.size_i >= self.sizes.len() || self.failed > 0 || self.mismatch.is_some()
        }
    }

    /// The deadline of one curve: every size should be done long before.
    const DEADLINE: Duration = Duration::from_secs(3600);

    /// One operation over one transport, every size.
    pub fn curve(
        setup: &Setup,
        op: Op,
        transport: Transport,
        seed: u64,
    ) -> Result<Curve, SimError> {
        let work = Latency::new(op, setup);
        let finish = |w: &Latency| Curve {
            op,
            transport,
            points: w.points.clone(),
            failed_completions: w.failed,
            verified_bytes: w.verified,
            mismatch: w.mismatch.clone(),
        };
        match transport {
            Transport::Sctp1 | Transport::Sctp2 => {
                let paths = if transport == Transport::Sctp1 { 1 } else { 2 };
                let pair = Pair {
                    links: vec![setup.link(); paths],
                    outages: &[],
                    assoc: Mode::CmtPf.config(),
                    mtu: 1500,
                    deadline: DEADLINE,
                    capture: None,
                    meter: None,
                };
                run_pair(&pair, seed, work, |end| finish(end.work))
            }
            Transport::Tcp => run_tcp(setup, seed, work, finish),
        }
    }

    const PORT: u16 = 4791;

    /// One end of the TCP pair: the RNIC over its connection, and the shared workload.
    struct TcpEnd<W> {
        me: Rc<RefCell<Rnic>>,
        peer: Rc<RefCell<Rnic>>,
        work: Rc<RefCell<W>>,
        at_b: bool,
        /// The server to connect to (the initiator), or `None` (the listener).
        server: Option<SocketAddrV4>,
        h: Option<SocketHandle>,
    }

    impl<W: Workload + 'static> TcpEnd<W> {
        fn pump(&mut self, cx: &mut TcpCtx<'_>, h: SocketHandle) {
            let t = cx.now();
            let Ok(mut r) = self.me.try_borrow_mut() else {
                return;
            };
            let _span = r.span().entered();
            let s = cx.socket(h);
            if s.state() != TcpState::Established {
                return;
            }
            while s.can_recv() {
                let got = s.recv(|d| {
                    r.eng.handle_stream(t, d);
                    (d.len(), d.len())
                });
                if !matches!(got, Ok(n) if n > 0) {
                    break;
                }
            }
            if r.eng.poll_timeout().is_some_and(|d| d <= t) {
                r.eng.handle_timeout(t);
            }
            while s.can_send() {
                let Some(bytes) = r.eng.poll_transmit() else {
                    break;
                };
                match s.send_slice(bytes) {
                    Ok(n) if n > 0 => r.eng.transmit_done(n),
                    _ => break,
                }
            }
            r.collect_events();
        }
    }

    impl<W: Workload + 'static> TcpApp for TcpEnd<W> {
        fn poll(&mut self, cx: &mut TcpCtx<'_>) {
            let h = match self.h {
                Some(h) => h,
                None => {
                    let h = cx.new_socket();
                    let _ = match self.server {
                        Some(addr) => cx.connect(h, addr, 40000).is_ok(),
                        None => cx.listen(h, PORT).is_ok(),
                    };
                    self.h = Some(h);
                    h
                }
            };
            self.pump(cx, h);
            let t = cx.now().since_start();
            if let (Ok(mut me), Ok(mut peer), Ok(mut w)) = (
                self.me.try_borrow_mut(),
                self.peer.try_borrow_mut(),
                self.work.try_borrow_mut(),
            ) {
                if self.at_b {
                    w.step(&mut peer, &mut me, t, true);
                } else {
                    w.step(&mut me, &mut peer, t, false);
                }
            }
            self.pump(cx, h);
        }

        fn poll_at(&self) -> Option<Instant> {
            let r = self.me.try_borrow().ok()?;
            r.eng.poll_timeout()
        }
    }

    fn run_tcp<W: Workload + 'static, R>(
        setup: &Setup,
        seed: u64,
        work: W,
        finish: impl FnOnce(&W) -> R,
    ) -> Result<R, SimError> {
        let mut sim = Sim::new(seed);
        let cfg = mpa::Config {
            crc: CrcPolicy::Require,
            ..mpa::Config::default()
        };
        let a = Rc::new(RefCell::new(Rnic::new(
            1,
            EngineSetup::Initiator(cfg.clone()),
            seed,
        )));
        let b = Rc::new(RefCell::new(Rnic::new(
            2,
            EngineSetup::Responder(cfg),
            seed,
        )));
        let work = Rc::new(RefCell::new(work));
        let srv_cfg = TcpHostConfig::numbered(2).with_seed(sim.derive_seed(2));
        let cli_cfg = TcpHostConfig::numbered(1).with_seed(sim.derive_seed(1));
        let server = SocketAddrV4::new(srv_cfg.addr, PORT);
        let end_b = TcpEnd {
            me: b.clone(),
            peer: a.clone(),
            work: work.clone(),
            at_b: true,
            server: None,
            h: None,
        };
        let end_a = TcpEnd {
            me: a,
            peer: b,
            work: work.clone(),
            at_b: false,
            server: Some(server),
            h: None,
        };
        let hb = sim.add_node(TcpHost::new(srv_cfg, end_b));
        let ha = sim.add_node(TcpHost::new(cli_cfg, end_a));
        sim.link(ha.iface(0), hb.iface(0), setup.link())?;
        let wd = work.clone();
        sim.run_until_condition(Instant::from_duration(DEADLINE), move |_| {
            wd.try_borrow().is_ok_and(|w| w.done())
        });
        let w = work.borrow();
        Ok(finish(&w))
    }

    /// Latency against message size, one line per transport, for `op`, in µs (log scales).
    pub fn chart(setup: &Setup, op: Op, curves: &[Curve]) -> Chart {
        Chart {
            title: format!(
                "{} with a fence over the RNIC, {} Mbit/s links",
                op.name(),
                setup.rate as f64 / 1e6
            ),
            x_label: "message size".into(),
            y_label: "latency (us)".into(),
            log_x: true,
            log_y: true,
            markers: true,
            y_min: 0.0,
            legend: Legend::UpperLeft,
            size: (1000, 560),
            series: curves
                .iter()
                .filter(|c| c.op == op)
                .map(|c| Series {
                    name: c.transport.name().into(),
                    points: c
                        .points
                        .iter()
                        .map(|&(s, d)| (s as f64, d.as_secs_f64() * 1e6))
                        .collect(),
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn short(rates: [u64; 2]) -> failover::Setup {
        let s = Duration::from_secs;
        failover::Setup {
            duration: s(16),
            outages: vec![
                Outage {
                    path: 0,
                    at: s(3),
                    down_for: Some(s(5)),
                },
                Outage {
                    path: 1,
                    at: s(10),
                    down_for: Some(s(3)),
                },
            ],
            message: 64 << 10,
            ..failover::Setup::seed(rates)
        }
    }

    /// One sample per second of the run; multihoming moves data, stops when its only data
    /// path goes down, and moves data again on the other path.
    #[test]
    fn multihoming_stalls_when_its_path_fails_and_recovers() {
        let setup = short([20_000_000, 10_000_000]);
        let r = failover::run(&setup, Mode::Multihoming, 1).expect("run");
        assert_eq!(r.bytes.len(), 16);
        assert_eq!(r.failed_completions, 0);
        assert_eq!(r.terminates, 0);
        let rates = r.rates();
        // Before the failure the primary is nearly full (setup takes part of second 0).
        assert!(rates[2] > 0.8 * 20e6, "{rates:?}");
        // The failure at 3 s stops the transfer for at least one whole second...
        let (zeros, at) = r.longest_zero_run();
        assert!(zeros >= 1, "{rates:?}");
        assert!(at.is_some_and(|t| t >= 3), "{at:?} {rates:?}");
        // ...and it resumes on the secondary while the primary is still down.
        assert!(rates[5..8].iter().any(|&x| x > 0.5 * 10e6), "{rates:?}");
        assert!(r.path_bytes[1] > 0, "{:?}", r.path_bytes);
        assert!(
            r.path_events
                .iter()
                .any(|(_, e)| e.contains("PrimaryChanged")),
            "{:?}",
            r.path_events
        );
        assert!(r.average() > 0.0 && r.average() < setup.capacity() as f64);
    }

    /// RFC 9260 §6.3.3 E2: the setup's RTO.Max bounds the backed-off heartbeats to a
    /// Potentially Failed path, so with 8 s the primary, down from 2 to 22 s, is up again
    /// within 8 s of its return; with RFC 9260 §16's 60 s the probe after the one 16 s
    /// backed-off is due only 30 s or more after the failure, beyond the end of the run.
    #[test]
    fn rfc9260_6_3_3_e2_failover_rto_max_bounds_the_return_of_a_path() {
        let s = Duration::from_secs;
        let setup = |rto_max| failover::Setup {
            duration: s(31),
            outages: vec![Outage {
                path: 0,
                at: s(2),
                down_for: Some(s(20)),
            }],
            message: 64 << 10,
            rto_max,
            ..failover::Setup::seed([20_000_000, 10_000_000])
        };
        let up_again = |r: &failover::Run| {
            r.path_events
                .iter()
                .find(|(t, e)| *t >= s(22) && e.contains("PathUp"))
                .map(|(t, _)| *t)
        };
        let short = failover::run(&setup(s(8)), Mode::CmtPf, 1).expect("run");
        let long = failover::run(&setup(s(60)), Mode::CmtPf, 1).expect("run");
        let t = up_again(&short);
        assert!(t.is_some_and(|t| t <= s(30)), "{:?}", short.path_events);
        assert_eq!(up_again(&long), None, "{:?}", long.path_events);
        assert!(short.average() > long.average());
    }

    /// A run is a function of its seed.
    #[test]
    fn failover_runs_are_deterministic() {
        let mut setup = short([10_000_000, 5_000_000]);
        setup.duration = Duration::from_secs(5);
        let a = failover::run(&setup, Mode::CmtPf, 3).expect("run");
        let b = failover::run(&setup, Mode::CmtPf, 3).expect("run");
        assert_eq!(a, b);
    }

    /// Throughput grows with the message size, and one path's large messages come close
    /// to its rate.
    #[test]
    fn bandwidth_grows_with_the_message_size() {
        let mut setup = bandwidth::Setup::new(20_000_000, 2 << 20);
        setup.sizes = vec![64, 64 << 10];
        let small = bandwidth::throughput(&setup, 1, 64, 1).expect("run").bps;
        let large = bandwidth::throughput(&setup, 1, 64 << 10, 1)
            .expect("run")
            .bps;
        assert!(small > 0.0 && small < large, "{small} {large}");
        assert!(large > 0.8 * 20e6 && large <= 20e6, "{large}");
    }

    /// CMT-PF keeps both paths busy while they are up and the surviving one while the other
    /// is down: more throughput than multihoming, and never a whole second without data.
    #[test]
    fn cmt_pf_beats_multihoming_and_never_stalls() {
        let setup = short([20_000_000, 10_000_000]);
        let mh = failover::run(&setup, Mode::Multihoming, 1).expect("run");
        let pf = failover::run(&setup, Mode::CmtPf, 1).expect("run");
        assert_eq!(pf.bytes.len(), 16);
        assert!(
            pf.average() > 1.1 * mh.average(),
            "{} {}",
            pf.average(),
            mh.average()
        );
        assert!(pf.longest_zero_run().0 <= 1, "{:?}", pf.rates());
        // Both paths carried data.
        assert!(
            pf.path_bytes.iter().all(|&b| b > 1 << 20),
            "{:?}",
            pf.path_bytes
        );
    }

    /// Two equal paths with CMT-PF carry large messages at least 1.9 times as fast as one.
    #[test]
    fn two_paths_nearly_double_large_messages() {
        let setup = bandwidth::Setup::new(20_000_000, 8 << 20);
        let one = bandwidth::throughput(&setup, 1, 1 << 20, 1)
            .expect("run")
            .bps;
        let two = bandwidth::throughput(&setup, 2, 1 << 20, 1)
            .expect("run")
            .bps;
        assert!(two >= 1.9 * one, "{one} {two}");
        assert!(two <= 2.0 * 20e6, "{two}");
    }

    /// Every one-sided operation completes at every size over every transport; a small one
    /// takes a round trip, a large one longer, and two SCTP paths move a large one faster
    /// than one.
    #[test]
    fn one_sided_operations_take_a_round_trip_and_two_paths_help_large_ones() {
        use onesided::{Op, Transport};
        let mut setup = onesided::Setup::new(100_000_000);
        setup.sizes = vec![2, 64 << 10];
        setup.warmup = 1;
        setup.iterations = 2;
        for op in Op::ALL {
            let mut large = Vec::new();
            for t in Transport::ALL {
                let c = onesided::curve(&setup, op, t, 1).expect("run");
                assert_eq!(c.failed_completions, 0, "{c:?}");
                assert_eq!(c.points.len(), 2, "{c:?}");
                let (small, big) = (c.points[0].1, c.points[1].1);
                assert!(small >= 2 * setup.delay, "{c:?}");
                assert!(
                    small < 2 * setup.delay + Duration::from_micros(100),
                    "{c:?}"
                );
                // 64 KiB at 100 Mbit/s take 5.2 ms to serialise on one link.
                assert!(big > small + Duration::from_millis(2), "{c:?}");
                large.push(big);
            }
            assert!(large[2] * 4 < large[1] * 3, "{op:?}: {large:?}");
        }
    }

    /// The one-sided experiment checks every transfer's bytes at the target (after the
    /// notification or the Read's completion): clean runs verify every byte of every
    /// operation, warm-up included.
    #[test]
    fn one_sided_transfers_arrive_byte_for_byte() {
        use onesided::{Op, Transport};
        let mut setup = onesided::Setup::new(100_000_000);
        setup.sizes = vec![2, 3000, 64 << 10];
        setup.warmup = 1;
        setup.iterations = 2;
        let per_curve: u64 = setup.sizes.iter().map(|&s| 3 * s as u64).sum();
        for op in Op::ALL {
            for t in Transport::ALL {
                let c = onesided::curve(&setup, op, t, 2).expect("run");
                assert_eq!(c.mismatch, None, "{op:?} {t:?}");
                assert_eq!(c.verified_bytes, per_curve, "{op:?} {t:?}");
            }
        }
    }

    /// A misplaced or corrupted placement is caught: the curve stops at the first transfer
    /// and names it, the bytes that differ and where.
    #[test]
    fn one_sided_check_catches_misplaced_and_corrupted_data() {
        use onesided::{Fault, Op, Transport};
        let mut setup = onesided::Setup::new(100_000_000);
        setup.sizes = vec![64, 4096];
        setup.warmup = 0;
        setup.iterations = 2;
        for fault in [Fault::Misplace, Fault::Corrupt] {
            setup.fault = Some(fault);
            for op in Op::ALL {
                for t in [Transport::Tcp, Transport::Sctp2] {
                    let c = onesided::curve(&setup, op, t, 1).expect("run");
                    let m = c
                        .mismatch
                        .clone()
                        .unwrap_or_else(|| panic!("{fault:?} {op:?} {t:?} not caught"));
                    assert_eq!((m.size, m.iteration), (64, 0), "{fault:?} {op:?} {t:?}");
                    assert_eq!(m.first_offset, 0, "{fault:?} {op:?} {t:?}");
                    match fault {
                        // Shifted by one byte: (almost) every byte is wrong.
                        Fault::Misplace => assert!(m.wrong_bytes > 32, "{m:?}"),
                        Fault::Corrupt => assert_eq!(m.wrong_bytes, 1, "{m:?}"),
                    }
                    assert!(c.points.is_empty(), "the curve stops: {c:?}");
                    assert_eq!(c.verified_bytes, 0);
                }
            }
        }
    }

    #[test]
    fn modes_configure_the_association() {
        assert_eq!(Mode::Multihoming.config().cmt, None);
        assert_eq!(Mode::Cmt.config().pf_max_retrans, None);
        assert!(Mode::Cmt.config().cmt.is_some());
        assert_eq!(Mode::CmtPf.config().pf_max_retrans, Some(0));
        assert_eq!("cmt-pf".parse::<Mode>(), Ok(Mode::CmtPf));
        assert!("tcp".parse::<Mode>().is_err());
    }
}
