//! perftest-style tools: `softrnic write-bw`, `write-lat`, `read-bw`, `read-lat`, `send-bw`,
//! `send-lat`, `atomic-bw`, `atomic-lat`, speaking perftest's `-R` (rdma_cm) protocol, so each interoperates with
//! perftest's `ib_write_bw -R`, `ib_write_lat -R`, ... in either role.
//!
//! Like perftest, each tool is a server when given no address and a client when given the
//! server's address, and both ends must be given the same test options (`-s`/`-a`, `-n`,
//! ...): nothing about the test itself is negotiated. The tools take perftest's options
//! (`-s`, `-a`, `-n`, `-p`, `-t`, `-r`, `-o`, `-Q`, `-e`, `-D`, `-f`, `--run_infinitely`,
//! `-l`, `-b`, `-q`, `-N`, `-C`, `-H`, `-U`, `-A`, `--output`, `--report_gbits`, `-V`), the MPA options
//! of the connections (`--mpa-rev`, `--crc`, `--markers`, `--p2p --rtr`, `--ird/--ord`), and
//! print perftest's tables. perftest options with no meaning here are accepted and change
//! nothing, each saying so in `--help`: `-R` and `-z` (always so), `-F`, `-d`, `-i`, `-x`,
//! `-m`, `-I`, `-u`, and `-c RC`. Every other perftest option is refused by name
//! ([`refusal`]), never ignored.
//!
//! # The `-R` protocol (perftest 4.5-0.17 / "6.06" as in Debian bookworm)
//!
//! Two MPA connections go to the same server port, no MPA private data on either:
//!
//! 1. The *control* connection (IRD/ORD 0/0). Each side keeps one receive posted; every
//!    exchange is one Send from the client, then one Send from the server (the client
//!    always speaks first). In order: the version string (16 octets, NUL padded, "6.06";
//!    a peer below 5.70 is refused, as perftest does), the cycle buffer size (4 octets, big
//!    endian, 4096), the cache line size (4, big endian, 64), the MTU (2 octets: the
//!    ASCII digit of the verbs MTU enum and a NUL), then a `pingpong_dest` exchange (56
//!    octets, see [`Dest`]) with zeros.
//! 2. The *test* connection (IRD/ORD 0/0, or the outstanding reads for `read-bw` and
//!    `read-lat`); the client retries it for a while, as the server listens for it only
//!    after the previous exchange. Then another zero `pingpong_dest` exchange.
//!
//!    With `-q N` (bandwidth tests) N test connections are made here, one QP each, in
//!    turn (perftest's client starts all N at once; its server takes them in the order
//!    they arrive); QP i of one side is the i-th made or taken. Everything else still goes
//!    over the control connection. With `-b` both sides send over every QP (send-bw:
//!    and receive, returning credits, on every QP), with the same exchanges as one QP.
//!
//! Then, on the control connection, `pingpong_dest` exchanges carrying each side's QP
//! number, PSN, STag (perftest's rkey) and buffer address: three for `write-bw` and
//! `read-bw` (then: client runs; client and server exchange once more, then the client's
//! result — size, iterations (8 octets each, big endian), peak, average bandwidth and
//! message rate (IEEE doubles, big endian) — which the server prints; a last exchange
//! closes; with `-q N` these are every QP's in turn, again every QP's, then QP 0's), four
//! for `write-lat` and `read-lat` (`read-lat`: a closing exchange after the run), three
//! for `send-bw` and `send-lat` (`send-bw -q N`: every QP's, QP 0's, every QP's; then, per
//! size: the server posts its
//! receives, one exchange, the run — `send-bw -a` one more exchange after it — and a
//! closing exchange at the end).
//!
//! * `send-bw` over iWARP uses credits: the first `pingpong_dest` of each side names a
//!   4-octet credit word instead of the data buffer. The receiver RDMA Writes its count of
//!   received messages (a host-order 32-bit integer, little endian as on x86) into the
//!   sender's credit word every `rx_depth / 3` receives, and the sender keeps fewer than
//!   `rx_depth` Sends beyond the last credit.
//! * `write-lat`: the server sends first; each side RDMA Writes `size` octets whose last
//!   octet is its message count (mod 256), and polls the last octet of its own buffer for
//!   the peer's count before answering.
//!   The server is the MPA responder of the test connection and may not send before the
//!   client's first FPDU (RFC 5044 §7.1.2): softrnic's client opens the stream with a
//!   zero-length RDMA Write, or in peer-to-peer mode its RTR does (RFC 6581 §3). A perftest
//!   `ib_write_lat` client sends nothing first, so against it the server needs P2P: give
//!   the server `--p2p` and enable P2P on the client (siw: `peer_to_peer`).
//! * `send-lat`: the client sends first; each side answers a received Send with a Send.
//! * `read-lat`, `read-bw`, `write-bw`: only the client posts; the server waits.
//! * The peer's buffer is addressed at its advertised address (all messages land there),
//!   except by `atomic-bw`: as perftest, its `i`-th request targets the 8 octets at the
//!   start of cache line `i` mod (cycle buffer / 64) of the peer's buffer (with `-l`, the
//!   `j`-th request of every post list line `j`). `atomic-bw` exchanges what `read-bw`
//!   does; its buffer grants remote atomic access only, and its `pingpong_dest` lines
//!   show no OUT, RKey or VAddr (as perftest prints them for atomics). `atomic-lat` is
//!   `read-lat` with one atomic at a time, all at the peer's advertised address.
//!
//! # Measurements
//!
//! * Several QPs (`-q N`): each QP runs the test's iterations (`-n`) with its own `-t`
//!   outstanding, from a thread of its own, to the buffer (send-bw: the credit word) its
//!   peer QP advertised; the result counts N × `-n` iterations, timed from the first QP's
//!   start to the last QP's end (send-bw's server: first receive to last, over all QPs);
//!   a `-D` run adds the QPs' rates. The server prints the client's report, as with one QP.
//!   With `-b` each side does the same for its own Sends (send-bw's server: from its
//!   first QP's first receive, at which that QP starts sending) and prints the sum of both
//!   sides' reports, as perftest's `run_iter_bi` over several QPs.
//! * Bandwidth: the client keeps up to `-t` work requests outstanding; `BW average` is
//!   bytes / total time, `BW peak` the best rate over slices of the run, MB/sec being 2^20
//!   bytes per second as in perftest (`--report_gbits`: 10^9 bits). `send-bw`'s server
//!   times from its first receive to its last.
//! * Latency: the times between consecutive posts of the run (halved for the ping-pongs),
//!   as perftest reports them.
//! * `-D SECS` (perftest's duration mode): each side runs on its own clock for SECS
//!   seconds (send-bw's receiver from its first message), measuring only the middle
//!   `SECS - 2 × margin` (`-f`, default SECS/4); the exchanges are those of one size.
//!   `--run_infinitely` (bandwidth tests) prints a line every period and never ends; its
//!   peer waits on the control connection as long. With `-q N` the QPs' threads add up
//!   their completions and one line per period covers them all; with `-b` (write-bw,
//!   read-bw) both sides run at once with no exchange, each printing its own rate counted
//!   twice (perftest's `run_inf_bi_factor`).
//! * RDMA Write and Send completions come when the data was handed to TCP, so a sender
//!   waits until the peer's TCP has acknowledged all of the test connection's data
//!   ([`Rnic::wait_tx_acked`]) before the closing exchange on the control connection (and
//!   write-lat before it closes): a close that overtakes data still in flight makes a peer
//!   such as siw reset the test connection.
//! * The progress thread busy-polls for `--busy-poll-us` (default 50) before sleeping;
//!   `--manual-progress` drives the RNIC from the tool's own polling loop.

use std::io::Write;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::Args;

use crate::mpa_args::MpaArgs;
use stack::addr::TransportAddr;
use stack::{
    Access, Arm, CompletionChannel, Cq, MemoryRegion, MrOptions, ProgressMode, Qp, QpAttr, QpState,
    RecvWr, Rnic, RnicConfig, SendOp, SendWr, Wc,
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
    /// Atomic (RFC 7306 Fetch and Add or Compare and Swap) bandwidth.
    AtomicBw,
    /// Atomic latency (one atomic at a time, as read-lat).
    AtomicLat,
}

/// perftest's `-A`: which atomic operation the atomic tools run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum AtomicType {
    /// Compare and Swap: compare 0, swap 0 (perftest's values: every swap succeeds on the
    /// zeroed target and leaves it 0).
    #[value(name = "CMP_AND_SWAP")]
    CmpAndSwap,
    /// Fetch and Add of 1 (perftest's `ATOMIC_ADD_VALUE`).
    #[default]
    #[value(name = "FETCH_AND_ADD")]
    FetchAndAdd,
}

impl AtomicType {
    /// perftest's name of the operation.
    fn name(self) -> &'static str {
        match self {
            AtomicType::CmpAndSwap => "CMP_AND_SWAP",
            AtomicType::FetchAndAdd => "FETCH_AND_ADD",
        }
    }
}

/// The value perftest's Fetch and Add adds.
const ATOMIC_ADD_VALUE: u64 = 1;
/// The values of perftest's Compare and Swap.
const ATOMIC_COMPARE_VALUE: u64 = 0;
const ATOMIC_SWAP_VALUE: u64 = 0;
/// The only message size of the atomic tests (an atomic operates on 8 octets).
const ATOMIC_SIZE: u64 = 8;

impl Test {
    /// Every tool, in the order of the command line's help.
    pub const ALL: [Test; 8] = [
        Test::WriteBw,
        Test::WriteLat,
        Test::ReadBw,
        Test::ReadLat,
        Test::SendBw,
        Test::SendLat,
        Test::AtomicBw,
        Test::AtomicLat,
    ];

    fn verb(self) -> &'static str {
        match self {
            Test::WriteBw | Test::WriteLat => "RDMA_Write",
            Test::ReadBw | Test::ReadLat => "RDMA_Read",
            Test::SendBw | Test::SendLat => "Send",
            Test::AtomicBw | Test::AtomicLat => "Atomic",
        }
    }

    /// The tool's command name.
    pub fn name(self) -> &'static str {
        match self {
            Test::WriteBw => "write-bw",
            Test::WriteLat => "write-lat",
            Test::ReadBw => "read-bw",
            Test::ReadLat => "read-lat",
            Test::SendBw => "send-bw",
            Test::SendLat => "send-lat",
            Test::AtomicBw => "atomic-bw",
            Test::AtomicLat => "atomic-lat",
        }
    }

    fn is_bw(self) -> bool {
        matches!(
            self,
            Test::WriteBw | Test::ReadBw | Test::SendBw | Test::AtomicBw
        )
    }

    fn atomics(self) -> bool {
        matches!(self, Test::AtomicBw | Test::AtomicLat)
    }

    /// Read-like tests: every request draws a response, up to the outstanding reads
    /// (`-o`) advertised as IRD/ORD (RDMA Reads and atomics, RFC 6581, RFC 7306).
    fn outstanding(self) -> bool {
        self.reads() || self.atomics()
    }

    fn reads(self) -> bool {
        matches!(self, Test::ReadBw | Test::ReadLat)
    }

    fn sends(self) -> bool {
        matches!(self, Test::SendBw | Test::SendLat)
    }
}

/// What `--output` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// The average bandwidth (bandwidth tests).
    Bandwidth,
    /// The message rate in Mpps (bandwidth tests).
    #[value(name = "message_rate")]
    MessageRate,
    /// The average latency in microseconds (latency tests).
    Latency,
}

/// Options of the perftest-style tools (give both ends the same test options).
#[derive(Args, Clone, Debug)]
pub struct PerfArgs {
    /// Server to connect to (client mode); without it, run as the server.
    #[arg(value_name = "SERVER")]
    pub server: Option<String>,
    /// TCP port of both connections (perftest's default 18515).
    #[arg(short = 'p', long, default_value_t = 18515)]
    pub port: u16,
    /// Message size in bytes (default 65536 for bandwidth, 2 for latency tests).
    #[arg(short = 's', long)]
    pub size: Option<u64>,
    /// Run all sizes from 2 B to 8 MiB (powers of two); the server needs it too.
    #[arg(short = 'a', long = "all")]
    pub all: bool,
    /// Iterations per size (default 5000 for bandwidth, 1000 for latency tests).
    #[arg(short = 'n', long = "iters")]
    pub iters: Option<u64>,
    /// Report bandwidth in Gb/sec instead of MB/sec.
    #[arg(long = "report_gbits")]
    pub report_gbits: bool,
    /// Outstanding work requests of the sender (default 128 for bandwidth, 1 for latency
    /// tests; at most the iterations).
    #[arg(short = 't', long = "tx-depth")]
    pub tx_depth: Option<u32>,
    /// Receives the Send receiver keeps posted (default 512, at most the iterations, made
    /// even without -a, as perftest does; the sender's credit window).
    #[arg(short = 'r', long = "rx-depth")]
    pub rx_depth: Option<u32>,
    /// Outstanding RDMA Reads (read tests): the IRD and ORD advertised on the test
    /// connection (default 128, or --ird / --ord when given). Connections that carry no
    /// Reads advertise 0 / 0 as perftest's tools do, unless --ird/--ord or peer-to-peer
    /// mode are given.
    #[arg(short = 'o', long = "outs")]
    pub outs: Option<u16>,
    /// Atomic tests: the operation, CMP_AND_SWAP (compare 0, swap 0) or FETCH_AND_ADD (add
    /// 1), as perftest's -A (default FETCH_AND_ADD; the other tools refuse it).
    #[arg(short = 'A', long = "atomic_type", value_name = "TYPE")]
    pub atomic_type: Option<AtomicType>,
    /// MPA connection options.
    #[command(flatten)]
    pub mpa: MpaArgs,
    /// How long the progress thread busy-polls before sleeping, in microseconds (at most
    /// 1000000).
    #[arg(long = "busy-poll-us", default_value_t = 50,
          value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub busy_poll_us: u64,
    /// Cap the EMSS (e.g. 1448 for Ethernet-sized FPDUs over loopback; 128-65535).
    #[arg(long, value_parser = clap::value_parser!(u32).range(128..=65_535))]
    pub emss: Option<u32>,
    /// Progress threads of the RNIC (1-64): with -q, the test connections are spread over
    /// them (see the stack's `RnicConfig::progress_threads`).
    #[arg(long = "progress-threads", default_value_t = 1,
          value_parser = clap::value_parser!(u16).range(1..=64))]
    pub progress_threads: u16,
    /// No progress thread: the tool's own polling loop drives the RNIC (`rnic_advance`),
    /// one thread per process in all (best latency on few cores).
    #[arg(long = "manual-progress")]
    pub manual_progress: bool,
    /// Leave all progress to the progress thread: without this, while the progress thread
    /// sleeps, a post transmits in the tool's thread and the latency tests' polling loops
    /// run the thread's pass themselves (fewer wake-ups per message; see the stack's
    /// `RnicConfig::inline_progress`).
    #[arg(long = "no-inline-progress", conflicts_with = "manual_progress")]
    pub no_inline_progress: bool,
    /// After the results, print where the RNIC's progress was made (the stack's
    /// `Rnic::progress_stats`): posts sent by the posting thread, work done by polling
    /// threads, how often the progress threads slept, and with --progress-threads above 1
    /// how many connections each thread served as the measurement started
    /// (`Rnic::progress_thread_loads`).
    #[arg(long = "progress-stats")]
    pub progress_stats: bool,
    /// Sleep on completion events instead of polling the test connection's CQs, as
    /// perftest's -e: the CQs are armed and attached to a completion channel (an eventfd
    /// the tool waits on with poll(2)); nothing busy-polls in the tool.
    #[arg(short = 'e', long = "events", conflicts_with = "manual_progress")]
    pub events: bool,
    /// perftest compatibility: connect with rdma_cm (always so here).
    #[arg(short = 'R', long = "rdma_cm")]
    pub rdma_cm: bool,
    /// perftest compatibility: exchange data over rdma_cm (always so here).
    #[arg(short = 'z', long = "comm_rdma_cm")]
    pub comm_rdma_cm: bool,
    /// perftest compatibility: ignore CPU frequency warnings (none here).
    #[arg(short = 'F', long = "CPU-freq")]
    pub cpu_freq: bool,
    /// perftest compatibility: device name (ignored: the device is softrnic).
    #[arg(short = 'd', long = "ib-dev", value_name = "DEV")]
    pub ib_dev: Option<String>,
    /// perftest compatibility: port of the device (ignored).
    #[arg(short = 'i', long = "ib-port", value_name = "PORT")]
    pub ib_port: Option<u32>,
    /// perftest compatibility: GID index (ignored).
    #[arg(short = 'x', long = "gid-index", value_name = "N")]
    pub gid_index: Option<i32>,
    /// perftest compatibility: MTU (ignored: FPDUs follow the TCP MSS).
    #[arg(short = 'm', long = "mtu", value_name = "MTU")]
    pub mtu: Option<u32>,
    /// perftest compatibility: connection type; only RC exists over iWARP.
    #[arg(
        short = 'c',
        long = "connection",
        value_name = "TYPE",
        default_value = "RC"
    )]
    pub connection: String,
    /// perftest compatibility: max inline data (ignored: softrnic copies from registered
    /// memory either way).
    #[arg(short = 'I', long = "inline_size", value_name = "N")]
    pub inline_size: Option<u32>,
    /// CQ moderation of the bandwidth tests' sender, as perftest: only every Nth work
    /// request (and the last) is signaled, one completion standing for N (default 100,
    /// at most the TX depth; latency tests signal every request).
    #[arg(short = 'Q', long = "cq-mod", value_name = "N")]
    pub cq_mod: Option<u32>,
    /// Run each side for SECS seconds instead of a number of iterations (perftest's -D;
    /// not with -a or -e). Only the middle of the run is measured: a margin (-f) at the
    /// start and at the end is left out. Bandwidth tests report the messages completed in
    /// that window (no peak); latency tests the average latency and the rate of
    /// transactions. Give both ends the same -D.
    #[arg(short = 'D', long = "duration", value_name = "SECS")]
    pub duration: Option<u64>,
    /// Margin of a -D run in seconds, left out of the measurement at its start and end
    /// (default SECS/4; SECS must exceed twice the margin).
    #[arg(
        short = 'f',
        long = "margin",
        value_name = "SECS",
        requires = "duration"
    )]
    pub margin: Option<u64>,
    /// Bandwidth tests: run until interrupted, printing a result line every -D seconds
    /// (default 5), each measured over that period alone (perftest's --run_infinitely; not
    /// with -e, nor with -b in send-bw). With -q the line sums every QP; with -b (write-bw,
    /// read-bw) both ends run at once and each prints its own rate doubled, as perftest.
    #[arg(long = "run_infinitely")]
    pub run_infinitely: bool,
    /// Print only one number per result, as perftest: the average bandwidth (bandwidth
    /// tests: `bandwidth`) or message rate (`message_rate`), or the average latency in
    /// microseconds (latency tests: `latency`).
    #[arg(long = "output", value_name = "WHAT")]
    pub output: Option<Output>,
    /// Latency tests: report times in CPU cycles (microseconds times the CPU frequency that
    /// /proc/cpuinfo states), as perftest's -C.
    #[arg(short = 'C', long = "report-cycles")]
    pub report_cycles: bool,
    /// Latency tests: print every sample, sorted ("#, usec" then "N, value" lines), before
    /// the summary line (perftest's -H).
    #[arg(short = 'H', long = "report-histogram", alias = "report-histogrm")]
    pub histogram: bool,
    /// Latency tests: print every sample in the order measured, as perftest's -U (with -H
    /// as well, the unsorted listing comes first).
    #[arg(short = 'U', long = "report-unsorted")]
    pub unsorted: bool,
    /// Bandwidth tests: bidirectional, both ends send (perftest's -b; give it to both ends):
    /// each side prints the sum of both sides' results, exchanged after each size (a -D
    /// send-bw prints its own, as perftest). All three take -q with it; write-bw and
    /// read-bw also --run_infinitely (send-bw does not, as perftest).
    #[arg(short = 'b', long = "bidirectional")]
    pub bidirectional: bool,
    /// Bandwidth tests: post lists of N work requests, one post call each (perftest's -l;
    /// the iterations must be a multiple of N; CQ moderation becomes N unless -Q is given,
    /// which must divide N).
    #[arg(short = 'l', long = "post_list", value_name = "N")]
    pub post_list: Option<u32>,
    /// Bandwidth tests: run over N QPs, each its own MPA connection, as perftest's -q (1 ..
    /// 16384; give both ends the same N). Each QP carries the iterations (-n) of its own;
    /// the report sums them (also with -b, and per period with --run_infinitely).
    #[arg(short = 'q', long = "qp", value_name = "N")]
    pub qps: Option<u32>,
    /// Bandwidth tests: no peak bandwidth (reported as 0), as perftest's -N.
    #[arg(short = 'N', long = "noPeak")]
    pub no_peak: bool,
    /// perftest compatibility: InfiniBand's QP timeout (ignored: over iWARP TCP
    /// retransmits; perftest -R on an iWARP device does not use it either).
    #[arg(short = 'u', long = "qp-timeout", value_name = "N")]
    pub qp_timeout: Option<u8>,
    /// Print the perftest version this tool announces in the -R exchange, and exit.
    #[arg(short = 'V', long = "version")]
    pub version: bool,
}

/// perftest's options the tools do not implement, short and long, with why: each is refused
/// with [`refusal`] rather than ignored.
const NOT_IMPLEMENTED: &[(&str, &str, &str)] = &[
    ("-S", "--sl", "InfiniBand service levels"),
    ("-T", "--tos", "setting the type of service"),
    ("-L", "--hop_limit", "raw Ethernet hop limits"),
    ("-g", "--mcg", "multicast (UD only)"),
    ("-M", "--MGID", "multicast (UD only)"),
    ("-X", "--vector", "completion vectors"),
    ("-O", "--dualport", "dual-port devices"),
    ("-w", "--limit_bw", "bandwidth limits"),
    ("-y", "--limit_msgrate", "message rate limits"),
    ("-W", "--report-counters", "device counters"),
    ("-B", "--source_mac", "raw Ethernet"),
    ("-E", "--dest_mac", "raw Ethernet"),
    ("-J", "--dest_ip", "raw Ethernet"),
    ("-j", "--source_ip", "raw Ethernet"),
    ("-K", "--dest_port", "raw Ethernet"),
    ("-k", "--source_port", "raw Ethernet"),
    ("-Y", "--ethertype", "raw Ethernet"),
    ("-Z", "--server", "raw Ethernet"),
    ("-P", "--client", "raw Ethernet"),
    ("-v", "--mac_fwd", "raw Ethernet"),
    ("-G", "--use_rss", "raw Ethernet"),
    ("", "--cpu_util", "CPU utilisation"),
    ("", "--use-srq", "shared receive queues in the tests"),
    ("", "--report-both", "separate local and remote -b results"),
    ("", "--reversed", "reversed traffic direction"),
    ("", "--pkey_index", "InfiniBand partitions"),
    ("", "--inline_recv", "inline receives"),
    ("", "--tcp", "raw Ethernet"),
    ("", "--burst_size", "rate limiting"),
    ("", "--typical_pkt_size", "rate limiting"),
    ("", "--rate_limit", "rate limiting"),
    ("", "--rate_limit_type", "rate limiting"),
    ("", "--rate_units", "rate limiting"),
    ("", "--out_json", "JSON output"),
    ("", "--out_json_file", "JSON output"),
    ("", "--latency_gap", "latency gaps"),
    ("", "--flow_label", "flow labels"),
    ("", "--retry_count", "InfiniBand retry counts"),
    ("", "--dont_xchg_versions", "skipping the version exchange"),
    ("", "--use_cuda", "GPU memory"),
    ("", "--use_cuda_bus_id", "GPU memory"),
    ("", "--use_rocm", "GPU memory"),
    ("", "--use_neuron", "accelerator memory"),
    ("", "--use_hl", "accelerator memory"),
    ("", "--use_mlu", "accelerator memory"),
    ("", "--use_opencl", "accelerator memory"),
    ("", "--mmap", "mmap'd buffers"),
    ("", "--mmap-offset", "mmap'd buffers"),
    ("", "--ipv6", "IPv6 addressing options"),
    ("", "--raw_ipv6", "raw Ethernet"),
    ("", "--report-per-port", "dual-port devices"),
    ("", "--odp", "on-demand paging"),
    ("", "--use_hugepages", "huge pages"),
    ("", "--use_old_post_send", "the old post API"),
    ("", "--promiscuous", "raw Ethernet"),
    ("", "--sniffer", "raw Ethernet"),
    ("", "--raw_mcast", "raw Ethernet"),
    ("", "--mr_per_qp", "several QPs per test"),
    ("", "--dlid", "InfiniBand LIDs"),
    ("", "--tclass", "traffic classes"),
    ("", "--wait_destroy", "delayed teardown"),
    ("", "--flows", "raw Ethernet flows"),
    ("", "--flows_burst", "raw Ethernet flows"),
    ("", "--reply_every", "latency under load"),
    ("", "--perform_warm_up", "warm-up runs"),
    ("", "--vlan_en", "raw Ethernet"),
    ("", "--vlan_pcp", "raw Ethernet"),
    ("", "--recv_post_list", "receive post lists"),
    ("", "--aes_xts", "encryption offload"),
    ("", "--encrypt_on_tx", "encryption offload"),
    ("", "--sig_before", "encryption offload"),
    ("", "--aes_block_size", "encryption offload"),
    ("", "--kek_path", "encryption offload"),
    ("", "--credentials_path", "encryption offload"),
    ("", "--data_enc_keys_number", "encryption offload"),
    ("", "--data_enc_key_app_path", "encryption offload"),
    ("", "--log_dci_streams", "DC transport"),
    ("", "--log_active_dci_streams", "DC transport"),
    ("", "--disable_pcie_relaxed", "PCIe relaxed ordering"),
    ("", "--use_ooo", "out-of-order data placement options"),
    ("", "--force-link", "link type selection"),
    ("", "--remote_mac", "raw Ethernet"),
    ("", "--local_mac", "raw Ethernet"),
    ("", "--remote_ip", "raw Ethernet"),
    ("", "--local_ip", "raw Ethernet"),
    ("", "--remote_port", "raw Ethernet"),
    ("", "--local_port", "raw Ethernet"),
];

/// The message refusing `arg` (as the command line gave it, `--name=value` or `-xVALUE`)
/// when it is a perftest option the tools do not implement; `None` for anything else.
pub fn refusal(arg: &str) -> Option<String> {
    let name = if arg.starts_with("--") {
        arg.split('=').next().unwrap_or(arg)
    } else {
        arg.get(..2).unwrap_or(arg)
    };
    NOT_IMPLEMENTED
        .iter()
        .find(|(short, long, _)| name == *short || name == *long)
        .map(|(short, long, what)| {
            let both = if short.is_empty() {
                (*long).to_owned()
            } else {
                format!("{short}/{long}")
            };
            format!("perftest's {both} is not implemented by softrnic ({what})")
        })
}

fn rnic_config(a: &PerfArgs) -> RnicConfig {
    RnicConfig {
        busy_poll: Duration::from_micros(a.busy_poll_us),
        max_emss: a.emss,
        progress_threads: a.progress_threads.into(),
        inline_progress: !a.no_inline_progress,
        progress: if a.manual_progress {
            ProgressMode::Manual
        } else {
            ProgressMode::Thread
        },
        ..RnicConfig::default()
    }
}

/// The version this implementation of the protocol announces (perftest refuses peers
/// below 5.70; the report exchange uses 8-octet iteration counts from 5.33 on).
const VERSION: &str = "6.06";
/// perftest's lowest compatible peer version.
const MIN_PEER_VERSION: f64 = 5.70;
const VERSION_LEN: usize = 16;
/// Our cycle buffer (perftest: the page size) and cache line size.
const CYCLE_BUFFER: u32 = 4096;
/// Most iterations of one test (perftest's counters are 64-bit; this keeps the per-run
/// bookkeeping bounded).
const MAX_ITERS: u64 = 1 << 40;
/// Largest cycle buffer a peer may announce (perftest announces the page size).
const MAX_PEER_CYCLE: u32 = 1 << 20;
const CACHE_LINE: u32 = 64;
/// The MTU we announce: verbs' IBV_MTU_1024 (3), as siw does.
const MTU_ENUM: u8 = 3;
const MAX_ALL: u64 = 8 << 20;
/// Outstanding RDMA Reads of the read tests without `-o` (what perftest's tools use on
/// siw, the device maximum there).
const DEFAULT_OUTS: u16 = 128;
/// perftest's most QPs of one test (`MAX_QP_NUM`).
const MAX_QPS: u32 = 16384;
/// perftest's default CQ moderation of bandwidth tests.
const DEFAULT_CQ_MOD: u32 = 100;
const TIMEOUT: Duration = Duration::from_secs(30);
/// How long a side waits on the control connection (the peer may be running a long test).
const CTRL_WAIT: Duration = Duration::from_secs(24 * 3600);
/// Attempts and delay of the client's test connection (perftest: 10 × 100 ms).
const CONNECT_TRIES: u32 = 10;
const CONNECT_RETRY: Duration = Duration::from_millis(100);
const CTRL_LEN: u32 = 64;
/// How long write-lat waits after its last message before closing (see `run`).
const WRITE_LAT_LINGER: Duration = Duration::from_millis(500);

pub use conform::wire::{DEST_LEN, Dest};

/// One bandwidth result as perftest exchanges it (`bw_report_data`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BwReport {
    /// Message size.
    pub size: u64,
    /// Iterations.
    pub iters: u64,
    /// Peak bandwidth (MB/sec or Gb/sec).
    pub peak: f64,
    /// Average bandwidth (MB/sec or Gb/sec).
    pub avg: f64,
    /// Message rate (Mpps).
    pub msg_rate: f64,
}

/// perftest's version string field: `v` NUL padded to 16 octets.
pub fn version_bytes(v: &str) -> [u8; VERSION_LEN] {
    let mut b = [0u8; VERSION_LEN];
    for (d, s) in b.iter_mut().zip(v.bytes().take(VERSION_LEN - 1)) {
        *d = s;
    }
    b
}

/// The number perftest reads from a version string (C `atof`: the longest leading
/// decimal number; 0 when there is none).
pub fn parse_version(b: &[u8]) -> f64 {
    let s: String = b
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as char)
        .collect();
    let s = s.trim_start();
    let mut end = 0;
    let mut dot = false;
    for (i, c) in s.char_indices() {
        if c.is_ascii_digit() {
            end = i + 1;
        } else if c == '.' && !dot {
            dot = true;
        } else {
            break;
        }
    }
    s.get(..end).and_then(|t| t.parse().ok()).unwrap_or(0.0)
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

/// The options of a run, resolved as perftest resolves them.
#[derive(Clone, Debug)]
struct Plan {
    test: Test,
    client: bool,
    size: u64,
    all: bool,
    iters: u64,
    tx_depth: u64,
    /// Every `cq_mod`-th send work request is signaled (bandwidth tests).
    cq_mod: u64,
    rx_depth: u64,
    outs: u16,
    gbits: bool,
    /// Iterations, a duration or forever.
    mode: Mode,
    /// `-N`: no peak bandwidth.
    no_peak: bool,
    /// `--output`: only the number.
    output: Option<Output>,
    /// `-C`: times in cycles of a CPU of this frequency (MHz).
    cycles_mhz: Option<f64>,
    /// `-H`: list the samples, sorted.
    histogram: bool,
    /// `-U`: list the samples as measured.
    unsorted: bool,
    /// `-l`: send work requests per post call.
    post_list: u64,
    /// `-b`: both sides send.
    duplex: bool,
    /// `-q`: QPs (test connections) of the run.
    qps: u64,
    /// `-A`: the atomic tests' operation.
    atomic: AtomicType,
}

/// How long a run lasts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// `-n` iterations.
    Iters,
    /// `-D SECS`: the middle `secs - 2 margin` seconds are measured.
    Duration {
        /// The whole run.
        secs: u64,
        /// Left out at the start and at the end.
        margin: u64,
    },
    /// `--run_infinitely`: a result every `period` seconds until interrupted.
    Infinite {
        /// Seconds per result line.
        period: u64,
    },
}

/// perftest's default duration (seconds) of `--run_infinitely`'s periods without `-D`.
const DEFAULT_PERIOD: u64 = 5;

/// Where a timed run stands (perftest's duration states).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// The leading margin: running, not measured.
    Warmup,
    /// Measured.
    Sample,
    /// The trailing margin.
    Cooldown,
    /// Over.
    End,
}

/// The clock of a `-D` run, started when the run starts (send-bw's receiver: at its first
/// message, as perftest).
#[derive(Clone, Copy, Debug)]
struct Clock {
    start: Instant,
    margin: Duration,
    secs: Duration,
}

impl Clock {
    /// The clock of `mode`, starting now; `None` unless `mode` is a duration.
    fn of(mode: Mode) -> Option<Clock> {
        match mode {
            Mode::Duration { secs, margin } => Some(Clock {
                start: Instant::now(),
                margin: Duration::from_secs(margin),
                secs: Duration::from_secs(secs),
            }),
            _ => None,
        }
    }

    fn phase(&self) -> Phase {
        let t = self.start.elapsed();
        if t < self.margin {
            Phase::Warmup
        } else if t + self.margin < self.secs {
            Phase::Sample
        } else if t < self.secs {
            Phase::Cooldown
        } else {
            Phase::End
        }
    }

    /// The measured window.
    fn sample(&self) -> Duration {
        self.secs.saturating_sub(2 * self.margin)
    }
}

/// The phase of an optional clock: without one, always measuring.
fn phase_of(clock: Option<&Clock>) -> Phase {
    clock.map_or(Phase::Sample, Clock::phase)
}

/// Largest queue depth and CQ moderation the tools take.
const MAX_DEPTH: u32 = 16_384;

/// `value` if it is 1 ..= `max`; otherwise the usage error naming the option and the range.
fn in_range(flag: &str, what: &str, value: u32, max: u32) -> Result<u32, PerfError> {
    if (1..=max).contains(&value) {
        Ok(value)
    } else {
        Err(PerfError::Usage(format!(
            "{flag} {value}: {what} must be 1 .. {max}"
        )))
    }
}

impl Plan {
    fn new(test: Test, a: &PerfArgs) -> Result<Plan, PerfError> {
        a.mpa.check().map_err(PerfError::Usage)?;
        if !a.connection.eq_ignore_ascii_case("RC") {
            return Err(PerfError::Usage(format!(
                "connection type {} is not available over iWARP (RC only)",
                a.connection
            )));
        }
        let atomic = Plan::atomic(test, a)?;
        let size = if test.atomics() {
            ATOMIC_SIZE
        } else {
            a.size.unwrap_or(if test.is_bw() { 65536 } else { 2 })
        };
        if size == 0 || size > u64::from(u32::MAX) {
            return Err(PerfError::Usage(format!(
                "-s {size}: the message size must be 1 .. 4294967295 bytes (a DDP message is shorter than 2^32)"
            )));
        }
        let iters = a.iters.unwrap_or(if test.is_bw() { 5000 } else { 1000 });
        if iters == 0 || iters > MAX_ITERS {
            return Err(PerfError::Usage(format!(
                "-n {iters}: the number of iterations must be 1 .. {MAX_ITERS}"
            )));
        }
        let mode = Plan::mode(test, a)?;
        // perftest bounds the depths by the iterations only when it counts iterations.
        let bound = if mode == Mode::Iters { iters } else { u64::MAX };
        let tx_depth = u64::from(in_range(
            "-t",
            "the send queue depth",
            a.tx_depth.unwrap_or(if test.is_bw() { 128 } else { 1 }),
            MAX_DEPTH,
        )?)
        .min(bound);
        let cq_mod = if test.is_bw() {
            let m = in_range(
                "-Q",
                "the CQ moderation",
                a.cq_mod.unwrap_or(DEFAULT_CQ_MOD),
                MAX_DEPTH,
            )?;
            u64::from(m).min(tx_depth)
        } else {
            1
        };
        // perftest's post lists: BW tests only, a whole number of lists, and CQ moderation
        // of one completion per list unless -Q divides the list.
        let (post_list, cq_mod) = match a.post_list {
            None | Some(1) => (1, cq_mod),
            Some(l) => {
                let l = u64::from(in_range("-l", "the post list", l, MAX_DEPTH)?);
                if !test.is_bw() {
                    return Err(PerfError::Usage(
                        "-l: post lists are for the bandwidth tests only (as perftest)".into(),
                    ));
                }
                if mode == Mode::Iters && !iters.is_multiple_of(l) {
                    return Err(PerfError::Usage(format!(
                        "-l {l}: the iterations (-n {iters}) must be a multiple of the post list"
                    )));
                }
                if l > tx_depth {
                    return Err(PerfError::Usage(format!(
                        "-l {l}: a post list must fit the TX depth (-t {tx_depth})"
                    )));
                }
                match a.cq_mod {
                    None => (l, l),
                    Some(_) if l.is_multiple_of(cq_mod) => (l, cq_mod),
                    Some(_) => {
                        return Err(PerfError::Usage(format!(
                            "-l {l} -Q {cq_mod}: the post list must be a multiple of the CQ \
                             moderation"
                        )));
                    }
                }
            }
        };
        let rx_depth = in_range(
            "-r",
            "the receive queue depth",
            a.rx_depth.unwrap_or(512),
            MAX_DEPTH,
        )?;
        let mut rx_depth = u64::from(rx_depth).min(bound);
        let outs = in_range(
            "-o",
            "the outstanding RDMA Reads (IRD/ORD: a 14-bit field, RFC 6581)",
            u32::from(a.outs.unwrap_or(DEFAULT_OUTS)),
            u32::from(stack::mpa::frame::IRD_ORD_MAX),
        )?;
        if test.sends() && !a.all && mode == Mode::Iters && rx_depth % 2 == 1 {
            rx_depth += 1;
        }
        Ok(Plan {
            test,
            client: a.server.is_some(),
            size,
            all: a.all,
            iters,
            tx_depth,
            cq_mod,
            rx_depth,
            outs: u16::try_from(outs).unwrap_or(DEFAULT_OUTS),
            gbits: a.report_gbits,
            mode,
            no_peak: Plan::no_peak(test, a)?,
            output: Plan::output(test, a)?,
            cycles_mhz: Plan::cycles(test, a, mode)?,
            histogram: a.histogram,
            unsorted: a.unsorted,
            post_list,
            duplex: Plan::duplex(test, a)?,
            qps: Plan::qps(test, a, mode)?,
            atomic,
        })
    }

    /// `-A`, and the atomic tests' fixed size: 8 octets, so neither another `-s` nor `-a`
    /// (as perftest); `-A` only for the atomic tests (as perftest).
    fn atomic(test: Test, a: &PerfArgs) -> Result<AtomicType, PerfError> {
        if !test.atomics() {
            return match a.atomic_type {
                Some(_) => Err(PerfError::Usage(
                    "-A: the atomic operation is chosen only in the atomic tests (atomic-bw, \
                     atomic-lat), as perftest"
                        .into(),
                )),
                None => Ok(AtomicType::default()),
            };
        }
        if let Some(s) = a.size
            && s != ATOMIC_SIZE
        {
            return Err(PerfError::Usage(format!(
                "-s {s}: the message size of the atomic tests is {ATOMIC_SIZE} and cannot be \
                 changed (RFC 7306 atomics operate on 8 octets; as perftest)"
            )));
        }
        if a.all {
            return Err(PerfError::Usage(format!(
                "-a: the atomic tests run only {ATOMIC_SIZE}-octet messages (as perftest)"
            )));
        }
        Ok(a.atomic_type.unwrap_or_default())
    }

    /// `-q`: bandwidth tests only, 1 .. 16384 QPs (as perftest, which refuses -q in the
    /// latency tests even as -q 1).
    fn qps(test: Test, a: &PerfArgs, mode: Mode) -> Result<u64, PerfError> {
        let Some(n) = a.qps else {
            return Ok(1);
        };
        if !test.is_bw() {
            return Err(PerfError::Usage(
                "-q: multiple QPs only available on bw tests (as perftest)".into(),
            ));
        }
        let n = in_range("-q", "the number of QPs", n, MAX_QPS)?;
        let _ = mode;
        Ok(u64::from(n))
    }

    /// `-C`'s CPU frequency; checks -C, -H and -U, which are latency tests' options
    /// and list or scale per-iteration samples a -D run does not keep.
    fn cycles(test: Test, a: &PerfArgs, mode: Mode) -> Result<Option<f64>, PerfError> {
        for (flag, given) in [
            ("-C", a.report_cycles),
            ("-H", a.histogram),
            ("-U", a.unsorted),
        ] {
            if !given {
                continue;
            }
            if test.is_bw() {
                return Err(PerfError::Usage(format!(
                    "{flag}: available only in the latency tests (as perftest)"
                )));
            }
            if mode != Mode::Iters {
                return Err(PerfError::Usage(format!(
                    "{flag}: a -D run keeps no per-iteration samples; give -n"
                )));
            }
        }
        if !a.report_cycles {
            return Ok(None);
        }
        let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        match cpu_mhz(&info) {
            Some(mhz) => Ok(Some(mhz)),
            None => Err(PerfError::Usage(
                "-C: /proc/cpuinfo states no CPU frequency (cpu MHz) to count cycles with".into(),
            )),
        }
    }

    /// `-N`: bandwidth tests only (as perftest).
    fn no_peak(test: Test, a: &PerfArgs) -> Result<bool, PerfError> {
        if a.no_peak && !test.is_bw() {
            return Err(PerfError::Usage(
                "-N: no peak is for the bandwidth tests only (as perftest)".into(),
            ));
        }
        Ok(a.no_peak)
    }

    /// `-b`: bandwidth tests, one size at a time or a duration.
    fn duplex(test: Test, a: &PerfArgs) -> Result<bool, PerfError> {
        if !a.bidirectional {
            return Ok(false);
        }
        if !test.is_bw() {
            return Err(PerfError::Usage(
                "-b: bidirectional runs are for the bandwidth tests only (as perftest)".into(),
            ));
        }
        if a.run_infinitely && test == Test::SendBw {
            return Err(PerfError::Usage(
                "--run_infinitely is not supported in the bidirectional send-bw test (as \
                 perftest)"
                    .into(),
            ));
        }
        Ok(true)
    }

    /// `--output`, which must suit the test (as perftest).
    fn output(test: Test, a: &PerfArgs) -> Result<Option<Output>, PerfError> {
        match (a.output, test.is_bw()) {
            (Some(Output::Latency), true) => Err(PerfError::Usage(
                "--output=latency: a bandwidth test prints bandwidth or message_rate".into(),
            )),
            (Some(o @ (Output::Bandwidth | Output::MessageRate)), false) => {
                Err(PerfError::Usage(format!(
                    "--output={}: a latency test prints latency",
                    if o == Output::Bandwidth {
                        "bandwidth"
                    } else {
                        "message_rate"
                    }
                )))
            }
            (o, _) => Ok(o),
        }
    }

    /// The run's length from -D, -f and --run_infinitely, checked as perftest checks them.
    fn mode(test: Test, a: &PerfArgs) -> Result<Mode, PerfError> {
        let usage = |m: String| Err(PerfError::Usage(m));
        if a.run_infinitely {
            if !test.is_bw() {
                return usage(
                    "--run_infinitely: only the bandwidth tests run infinitely (as perftest)"
                        .into(),
                );
            }
            if a.events {
                return usage("--run_infinitely does not work with -e (as perftest)".into());
            }
            if a.all {
                return usage("--run_infinitely runs one size: not with -a".into());
            }
            let period = a.duration.unwrap_or(DEFAULT_PERIOD);
            if period == 0 {
                return usage("-D 0: the duration must be at least 1 second".into());
            }
            return Ok(Mode::Infinite { period });
        }
        let Some(secs) = a.duration else {
            return Ok(Mode::Iters);
        };
        if secs == 0 || secs > 86_400 {
            return usage(format!(
                "-D {secs}: the duration must be 1 .. 86400 seconds"
            ));
        }
        if a.all {
            return usage("-D: duration mode does not run all sizes (-a), as perftest".into());
        }
        if a.events {
            return usage("-D: duration mode does not work with -e, as perftest".into());
        }
        let margin = a.margin.unwrap_or(secs / 4);
        if secs <= margin.saturating_mul(2) {
            return usage(format!(
                "-D {secs} -f {margin}: the duration must exceed twice the margin"
            ));
        }
        Ok(Mode::Duration { secs, margin })
    }

    fn max_size(&self) -> u64 {
        if self.all { MAX_ALL } else { self.size }
    }
}

/// The MPA settings of a connection: perftest's IRD/ORD (the outstanding reads on the
/// test connection of a read test, 0/0 elsewhere unless `--ird/--ord` or peer-to-peer
/// mode ask otherwise) and no private data.
fn cm_config(a: &PerfArgs, plan: &Plan, test_conn: bool) -> stack::mpa::Config {
    let role = if plan.client {
        stack::mpa::Role::Initiator
    } else {
        stack::mpa::Role::Responder
    };
    let mut c = a.mpa.config_for(role, Vec::new());
    if test_conn && plan.test.outstanding() {
        if a.outs.is_some() || !a.mpa.ird_ord_given() {
            c.ird = plan.outs;
            c.ord = plan.outs;
        }
        // A perftest initiator asks for its device's maximum (siw: 128): let the
        // responder raise its IRD that far (RFC 6581 relaxed IRD/ORD negotiation).
        c.ird_max = c.ird.max(c.ord).max(DEFAULT_OUTS);
    } else if !c.p2p && !a.mpa.ird_ord_given() {
        c.ird = 0;
        c.ord = 0;
        c.ird_max = 0;
    }
    c
}

/// Waits for one completion on `cq`, driving the RNIC in manual-progress mode; fails on
/// an error completion, after `timeout`, or when `qp` broke.
fn wait_wc(
    rnic: &Rnic,
    manual: bool,
    events: Option<&CompletionChannel>,
    cq: &Cq,
    qp: &Qp,
    timeout: Duration,
    what: &str,
) -> Result<Wc, PerfError> {
    // Spin a while (an answer usually comes within microseconds, within a few milliseconds
    // on an emulated guest), then block: a peer that stays silent — for up to `timeout`, 24
    // hours on the control connection — costs no CPU. The blocking waits end as soon as a
    // completion or socket data arrives, but with a progress thread they cost a hand-over
    // from it per message.
    const SPIN: Duration = Duration::from_millis(20);
    const BLOCK: Duration = Duration::from_millis(50);
    let start = Instant::now();
    loop {
        let spinning = events.is_none() && start.elapsed() < SPIN;
        if manual {
            let _ = rnic.advance(if spinning { Duration::ZERO } else { BLOCK });
        } else if spinning {
            // A sleeping progress thread's pass, run here: the answer is placed without
            // a wake-up of that thread first.
            rnic.assist();
        }
        if let Some(wc) = cq.poll_one() {
            if !wc.status.is_success() {
                return fail(format!("{what}: work request failed: {wc}"));
            }
            return Ok(wc);
        }
        if spinning {
            std::thread::yield_now();
            continue;
        }
        if matches!(qp.state(), QpState::Error | QpState::Terminate) {
            return fail(format!("{what}: the connection broke"));
        }
        if start.elapsed() > timeout {
            return fail(format!("{what}: nothing within {} s", timeout.as_secs()));
        }
        if !manual {
            // No more polling here: the progress thread takes the sockets back.
            rnic.end_assist();
            sleep_on(cq, events, BLOCK);
        }
    }
}

/// Blocks until `cq` may hold a completion or `max` passed: with completion events, the
/// CQ is armed for its next completion and the tool sleeps on the channel's eventfd
/// (perftest's -e); otherwise on the CQ itself.
fn sleep_on(cq: &Cq, events: Option<&CompletionChannel>, max: Duration) {
    match events {
        Some(ch) => {
            cq.arm(Arm::NextCompletion);
            // A completion that came before the arm would signal nothing.
            if cq.is_empty() {
                ch.wait(max);
            }
            ch.get_events();
        }
        None => {
            cq.wait(max);
        }
    }
}

/// The control connection: strictly alternating Sends, the client first.
struct Comm {
    qp: Qp,
    scq: Cq,
    rcq: Cq,
    /// [0, 64) receive, [64, 128) send.
    mr: MemoryRegion,
    client: bool,
    manual: bool,
    /// How long a control message may take (the peer may be running a long test; with
    /// --run_infinitely, forever).
    wait: Duration,
}

impl Comm {
    fn new(
        rnic: &Rnic,
        client: bool,
        manual: bool,
        first_fpdu_delay: Duration,
    ) -> Result<Comm, PerfError> {
        let pd = rnic.alloc_pd();
        let scq = Cq::new(16);
        let rcq = Cq::new(16);
        let mut attr = QpAttr::new(pd, scq.clone(), rcq.clone());
        attr.sq_depth = 4;
        attr.rq_depth = 4;
        attr.first_fpdu_delay = first_fpdu_delay;
        let qp = rnic.create_qp(attr)?;
        let mr = rnic.mem().register_new(
            pd,
            2 * CTRL_LEN as usize,
            MrOptions::new(Access::LOCAL_WRITE),
        )?;
        let c = Comm {
            qp,
            scq,
            rcq,
            mr,
            client,
            manual,
            wait: CTRL_WAIT,
        };
        // One receive posted before the connection, as perftest does.
        c.post_recv()?;
        Ok(c)
    }

    fn post_recv(&self) -> Result<(), PerfError> {
        self.qp
            .post_recv(RecvWr::new(5, vec![self.mr.sge(0, CTRL_LEN)]))?;
        Ok(())
    }

    fn send(&self, rnic: &Rnic, data: &[u8]) -> Result<(), PerfError> {
        let len = data.len().min(CTRL_LEN as usize);
        self.mr
            .buf()
            .write_at(CTRL_LEN as usize, data.get(..len).unwrap_or(data))?;
        self.qp.post_send(SendWr::send(
            5,
            vec![self.mr.sge(u64::from(CTRL_LEN), len as u32)],
        ))?;
        wait_wc(
            rnic,
            self.manual,
            None,
            &self.scq,
            &self.qp,
            TIMEOUT,
            "control Send",
        )?;
        Ok(())
    }

    fn recv(&self, rnic: &Rnic) -> Result<Vec<u8>, PerfError> {
        let wc = wait_wc(
            rnic,
            self.manual,
            None,
            &self.rcq,
            &self.qp,
            self.wait,
            "control message",
        )?;
        let mut v = vec![0u8; (wc.byte_len as usize).min(CTRL_LEN as usize)];
        self.mr.buf().read_at(0, &mut v)?;
        self.post_recv()?;
        Ok(v)
    }

    /// One exchange: the client sends, then receives; the server the other way round.
    fn xchg(&self, rnic: &Rnic, mine: &[u8]) -> Result<Vec<u8>, PerfError> {
        if self.client {
            self.send(rnic, mine)?;
            self.recv(rnic)
        } else {
            let v = self.recv(rnic)?;
            self.send(rnic, mine)?;
            Ok(v)
        }
    }

    /// perftest's `ctx_hand_shake`: one `pingpong_dest` exchange.
    fn hand_shake(&self, rnic: &Rnic, mine: &Dest) -> Result<Dest, PerfError> {
        let v = self.xchg(rnic, &mine.to_bytes())?;
        Dest::parse(&v).ok_or_else(|| {
            PerfError::Failed(format!(
                "the peer's pingpong_dest has {} octets, not {DEST_LEN} (not perftest -R?)",
                v.len()
            ))
        })
    }
}

/// A batch of completions to poll into.
fn wc_batch() -> [Wc; 64] {
    [Wc::new(
        stack::QpId(0),
        0,
        stack::WcOpcode::Send,
        stack::WcStatus::Success,
    ); 64]
}

/// The test connection and its memory.
struct Data {
    qp: Qp,
    scq: Cq,
    rcq: Cq,
    /// `2 × area`: [0, area) local source / sink, [area, 2 area) the area the peer
    /// accesses (and where receives land).
    buf: MemoryRegion,
    /// Credits of send-bw: [0, 4) the count we write, [4, 8) the peer's credit to us.
    credit: MemoryRegion,
    area: u64,
    local: Dest,
    remote: Dest,
    manual: bool,
    /// With -e: the completion channel the test connection's CQs signal.
    events: Option<CompletionChannel>,
    /// Receives posted and not yet completed.
    rq_out: u64,
}

impl Data {
    fn src(&self, len: u64) -> stack::Sge {
        self.buf.sge(0, len as u32)
    }

    fn post_recv(&mut self) -> Result<(), PerfError> {
        self.qp.post_recv(RecvWr::new(
            0,
            vec![self.buf.sge(self.area, self.area as u32)],
        ))?;
        self.rq_out += 1;
        Ok(())
    }

    /// The atomic tests' `i`-th request (perftest's): Fetch and Add of 1 or Compare and Swap
    /// of 0 with 0 on the 8 octets at `off` in the peer's buffer (atomic-bw: see
    /// [`atomic_offset`]; atomic-lat: always 0); the original value lands at `off` in our
    /// local area.
    fn atomic_wr(&self, i: u64, plan: &Plan, off: u64) -> SendWr {
        let remote_stag = self.remote.rkey;
        let remote_to = self.remote.vaddr.wrapping_add(off);
        let op = match plan.atomic {
            AtomicType::FetchAndAdd => SendOp::FetchAdd {
                remote_stag,
                remote_to,
                add: ATOMIC_ADD_VALUE,
                add_mask: 0,
            },
            AtomicType::CmpAndSwap => SendOp::CmpSwap {
                remote_stag,
                remote_to,
                compare: ATOMIC_COMPARE_VALUE,
                compare_mask: u64::MAX,
                swap: ATOMIC_SWAP_VALUE,
                swap_mask: u64::MAX,
            },
        };
        SendWr::new(i, op, vec![self.buf.sge(off, ATOMIC_SIZE as u32)])
    }

    /// The sum of the 8-octet words at the start of every cache line of the area the peer
    /// accesses (wrapping): what the peer's Fetch and Adds added to the zeroed buffer.
    fn atomic_sum(&self) -> Result<u64, PerfError> {
        let mut sum = 0u64;
        let mut w = [0u8; 8];
        for line in 0..self.area / u64::from(CACHE_LINE) {
            let off = self.area + line * u64::from(CACHE_LINE);
            self.buf.buf().read_at(off as usize, &mut w)?;
            sum = sum.wrapping_add(u64::from_ne_bytes(w));
        }
        Ok(sum)
    }

    fn kick(&self, rnic: &Rnic) {
        if self.manual {
            let _ = rnic.advance(Duration::ZERO);
        }
    }

    /// A latency loop's spin: in manual mode a pass of the RNIC, with a progress thread the
    /// pass of a sleeping thread run here ([`Rnic::assist`]), so the peer's message is
    /// placed without waking that thread first.
    fn assist(&self, rnic: &Rnic) {
        if self.manual {
            let _ = rnic.advance(Duration::ZERO);
        } else {
            rnic.assist();
        }
    }

    /// Writes `rcnt`, the count of receives consumed, into the peer's credit word: true when
    /// posted, false when the send queue is full (to try again later).
    fn post_credit(&self, rcnt: u64) -> Result<bool, PerfError> {
        self.credit
            .buf()
            .write_at(0, &(rcnt as u32).to_le_bytes())?;
        let wr = SendWr::write(
            rcnt,
            vec![self.credit.sge(0, 4)],
            self.remote.rkey,
            self.remote.vaddr,
        );
        match self.qp.post_send(wr) {
            Ok(()) => Ok(true),
            Err(stack::PostError::QueueFull { .. }) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    fn credit(&self) -> Result<u32, PerfError> {
        let mut b = [0u8; 4];
        self.credit.buf().read_at(4, &mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    /// Waits until the peer's TCP has acknowledged everything sent on the test connection
    /// (completions come when the data was handed to the socket).
    fn drain(&self, rnic: &Rnic) -> Result<(), PerfError> {
        rnic.wait_tx_acked(&self.qp, TIMEOUT).map_err(|e| {
            if matches!(self.qp.state(), QpState::Error | QpState::Terminate) {
                // Completions came when the data was handed to TCP; the peer may have
                // refused it since (e.g. a Terminate for an access its buffer does not grant).
                return PerfError::Failed(format!(
                    "the test connection broke before the peer acknowledged its data \
                     (RUST_LOG=warn shows a Terminate the peer sent): {e}"
                ));
            }
            PerfError::Failed(format!(
                "the peer did not acknowledge the test connection's data within {} s: {e}",
                TIMEOUT.as_secs()
            ))
        })
    }

    fn wait(&self, rnic: &Rnic, cq: &Cq, what: &str) -> Result<Wc, PerfError> {
        wait_wc(
            rnic,
            self.manual,
            self.events.as_ref(),
            cq,
            &self.qp,
            TIMEOUT,
            what,
        )
    }
}

/// The offset in the cycle buffer of `area` octets of the atomic tests' `i`-th request, as
/// perftest steps it: one cache line per request (an 8-octet message rounds up to a line),
/// back to the start after the last line; with post lists of `post_list` requests, the
/// `j`-th request of every list takes line `j`.
fn atomic_offset(i: u64, post_list: u64, area: u64) -> u64 {
    let line = u64::from(CACHE_LINE);
    let lines = (area / line).max(1);
    let k = if post_list > 1 { i % post_list } else { i };
    (k % lines) * line
}

fn psn() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    (h.finish() & 0xff_ffff) as u32
}

/// Runs one tool from the command line; returns the exit status.
pub fn run_command(test: Test, args: &PerfArgs, out: &mut dyn Write) -> std::process::ExitCode {
    match run(test, args, out) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            let _ = out.flush();
            eprintln!("softrnic: {e}");
            // Bad arguments: 2, as every tool; anything else: 1.
            std::process::ExitCode::from(if matches!(e, PerfError::Usage(_)) {
                2
            } else {
                1
            })
        }
    }
}

const DASHES: &str =
    "---------------------------------------------------------------------------------------";

/// C's `%#0Nx`: "0x" and hex digits zero-padded to `width` in all, or only zeros for 0.
fn c_hex(v: u64, width: usize) -> String {
    if v == 0 {
        format!("{:0width$x}", 0)
    } else {
        format!("{v:#0width$x}")
    }
}

fn print_dest(out: &mut dyn Write, side: &str, test: Test, d: &Dest) -> Result<(), PerfError> {
    write!(
        out,
        " {side} address: LID {} QPN {} PSN {}",
        c_hex(u64::from(d.lid), 4),
        c_hex(u64::from(d.qpn), 6),
        c_hex(u64::from(d.psn), 6)
    )?;
    if test.reads() {
        write!(out, " OUT {}", c_hex(u64::from(d.out_reads), 4))?;
    }
    // perftest prints the buffer for Writes and Reads only (not for atomics).
    if !test.sends() && !test.atomics() {
        write!(
            out,
            " RKey {} VAddr {}",
            c_hex(u64::from(d.rkey), 8),
            c_hex(d.vaddr, 16)
        )?;
    }
    writeln!(out)?;
    // perftest prints the GID octets in decimal.
    let gid: Vec<String> = d.gid.iter().map(|b| format!("{b:02}")).collect();
    writeln!(out, " GID: {}", gid.join(":"))?;
    Ok(())
}

fn header(
    out: &mut dyn Write,
    plan: &Plan,
    a: &PerfArgs,
    rnic: &Rnic,
    ds: &[Data],
    peer: &TransportAddr,
) -> Result<(), PerfError> {
    let test = plan.test;
    let Some(data) = ds.first() else {
        return fail("no test connection");
    };
    writeln!(out, "{DASHES}")?;
    let kind = if test.is_bw() {
        let mut k = String::new();
        if plan.duplex {
            k.push_str("Bidirectional ");
        }
        if plan.post_list > 1 {
            k.push_str("Post List ");
        }
        k + "BW"
    } else {
        "Latency".to_owned()
    };
    let verb = if test.atomics() {
        format!("{} {}", test.verb(), plan.atomic.name())
    } else {
        test.verb().to_owned()
    };
    writeln!(out, "                    {verb} {kind} Test")?;
    writeln!(out, " Dual-port       : OFF\t\tDevice         : softrnic")?;
    writeln!(
        out,
        " Number of qps   : {}\t\tTransport type : IW",
        ds.len()
    )?;
    writeln!(out, " Connection type : RC\t\tUsing SRQ      : OFF")?;
    if a.events {
        writeln!(out, " Using Events    : ON (completion channel)")?;
    }
    if plan.client || plan.duplex {
        writeln!(out, " TX depth        : {}", plan.tx_depth)?;
        if plan.post_list > 1 {
            writeln!(out, " Post List       : {}", plan.post_list)?;
        }
        if test.is_bw() {
            writeln!(out, " CQ Moderation   : {}", plan.cq_mod)?;
        }
    }
    if test.sends() && (!plan.client || plan.duplex) {
        writeln!(out, " RX depth        : {}", plan.rx_depth)?;
    }
    match plan.mode {
        Mode::Iters => {}
        Mode::Duration { secs, margin } => {
            writeln!(out, " Duration        : {secs} s (margin {margin} s)")?;
        }
        Mode::Infinite { period } => {
            writeln!(out, " Run infinitely  : a result every {period} s")?;
        }
    }
    writeln!(out, " Mtu             : 1024[B]")?;
    writeln!(out, " Link type       : Ethernet")?;
    if test.outstanding() {
        writeln!(out, " Outstand reads  : {}", plan.outs)?;
    } else {
        writeln!(out, " Max inline data : 0[B]")?;
    }
    writeln!(out, " rdma_cm QPs\t : ON")?;
    writeln!(out, " Data ex. method : rdma_cm")?;
    if let Some(s) = data.qp.session().and_then(|s| s.mpa().cloned()) {
        writeln!(
            out,
            " MPA             : rev {} CRC {} markers tx {} rx {} P2P {}{}",
            s.revision,
            on(s.crc),
            on(s.markers_tx),
            on(s.markers_rx),
            on(s.p2p),
            s.rtr.map(|r| format!(" RTR {r}")).unwrap_or_default()
        )?;
        writeln!(out, " IRD / ORD       : {} / {}", s.ird, s.ord)?;
    }
    if let Some(s) = data.qp.session()
        && let Some(c) = s.sctp()
    {
        writeln!(
            out,
            " LLP             : DDP over SCTP (RFC 5043), {} session setup",
            if c.enhanced { "RFC 6581" } else { "RFC 5043" }
        )?;
        writeln!(out, " IRD / ORD       : {} / {}", s.ird, s.ord)?;
    }
    writeln!(out, " MULPDU          : {}[B]", data.qp.mulpdu())?;
    writeln!(out, " Peer            : {peer}")?;
    if !a.manual_progress {
        writeln!(
            out,
            " Busy poll       : {} usec",
            rnic.config().busy_poll.as_micros()
        )?;
        writeln!(
            out,
            " Inline progress : {}",
            on(rnic.config().inline_progress)
        )?;
    }
    writeln!(out, "{DASHES}")?;
    for d in ds {
        print_dest(out, "local", test, &d.local)?;
    }
    for d in ds {
        print_dest(out, "remote", test, &d.remote)?;
    }
    Ok(())
}

fn table_head(out: &mut dyn Write, plan: &Plan) -> Result<(), PerfError> {
    writeln!(out, "{DASHES}")?;
    if plan.test.is_bw() {
        let unit = if plan.gbits { "Gb/sec" } else { "MB/sec" };
        writeln!(
            out,
            " #bytes     #iterations    BW peak[{unit}]    BW average[{unit}]   MsgRate[Mpps]"
        )?;
    } else if matches!(plan.mode, Mode::Duration { .. }) {
        writeln!(
            out,
            " #bytes        #iterations       t_avg[usec]    tps average"
        )?;
    } else {
        let head = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] ";
        if plan.cycles_mhz.is_some() {
            writeln!(out, "{}", head.replace("[usec]", "[cycles]"))?;
        } else {
            writeln!(out, "{head}")?;
        }
    }
    Ok(())
}

fn on(b: bool) -> &'static str {
    if b { "on" } else { "off" }
}

/// A bandwidth result in the run's units; without a peak (`-D`, `--run_infinitely`) the
/// peak is 0, as perftest reports it.
fn bw_report(
    gbits: bool,
    size: u64,
    iters: u64,
    total: Duration,
    peak_bps: Option<f64>,
) -> BwReport {
    let secs = total.as_secs_f64().max(1e-9);
    let bytes_ps = (size * iters) as f64 / secs;
    let conv = |b: f64| {
        if gbits {
            b * 8.0 / 1e9
        } else {
            b / 1_048_576.0
        }
    };
    BwReport {
        size,
        iters,
        peak: peak_bps.map_or(0.0, |p| conv(p.max(bytes_ps))),
        avg: conv(bytes_ps),
        msg_rate: iters as f64 / secs / 1e6,
    }
}

/// A horizontal rule of the tables (none with `--output`).
fn rule(out: &mut dyn Write, plan: &Plan) -> Result<(), PerfError> {
    if plan.output.is_none() {
        writeln!(out, "{DASHES}")?;
    }
    Ok(())
}

/// A bandwidth result: the table's row, or with `--output` only its number (C's `%lf`).
fn bw_line(out: &mut dyn Write, plan: &Plan, r: &BwReport) -> Result<(), PerfError> {
    match plan.output {
        Some(Output::Bandwidth) => {
            writeln!(out, "{:.6}", r.avg)?;
            return Ok(());
        }
        Some(Output::MessageRate) => {
            writeln!(out, "{:.6}", r.msg_rate)?;
            return Ok(());
        }
        _ => {}
    }
    writeln!(
        out,
        " {:<7}    {:<10}       {:<7.2}            {:<7.2}\t\t   {:<7.6}",
        r.size, r.iters, r.peak, r.avg, r.msg_rate
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
        " {:<7} {:<10}    {:<7.2}        {:<7.2}      {:<7.2}  \t       {:<7.2}     \t{:<7.2}\t\t{:<7.2} \t\t{:<7.2}",
        size, iters, s.min, s.max, s.typical, s.avg, s.stdev, s.p99, s.p999
    )?;
    Ok(())
}

/// Prints a latency run's result: perftest's statistics of the samples, or with -D the
/// average latency and transactions per second over the measured window. `factor` is 2
/// for the ping-pongs (a round trip is two latencies), 1 for read-lat.
fn lat_result(
    out: &mut dyn Write,
    plan: &Plan,
    size: u64,
    run: &LatRun,
    factor: f64,
) -> Result<(), PerfError> {
    match plan.mode {
        Mode::Duration { secs, margin } => {
            let window = secs.saturating_sub(2 * margin) as f64;
            let n = run.sampled.max(1) as f64;
            let latency = window * 1e6 / factor / n;
            let tps = run.sampled as f64 / window;
            if plan.output == Some(Output::Latency) {
                writeln!(out, "{latency:.6}")?;
            } else {
                writeln!(
                    out,
                    " {:<7}       {}            {:<7.2}        {:<7.2}",
                    size, run.sampled, latency, tps
                )?;
            }
        }
        _ => {
            let mut v = lat_samples(&run.posts, factor);
            if let Some(mhz) = plan.cycles_mhz {
                v.iter_mut().for_each(|x| *x *= mhz);
            }
            if plan.histogram || plan.unsorted {
                sample_lists(out, plan, &v)?;
                // The table's head again before the summary line, as perftest.
                if plan.output.is_none() {
                    table_head(out, plan)?;
                }
            }
            let stats = lat_stats(&mut v);
            if plan.output == Some(Output::Latency) {
                writeln!(out, "{:.6}", stats.avg)?;
            } else {
                lat_line(out, size, plan.iters, &stats)?;
            }
        }
    }
    out.flush()?;
    Ok(())
}

/// The first "cpu MHz" that /proc/cpuinfo's text `info` states (as perftest reads it).
fn cpu_mhz(info: &str) -> Option<f64> {
    info.lines()
        .filter(|l| l.starts_with("cpu MHz"))
        .find_map(|l| l.split_once(':')?.1.trim().parse::<f64>().ok())
        .filter(|&m| m > 0.0)
}

/// C's `printf("%g", v)`: six significant digits, trailing zeros dropped, exponent form
/// below 1e-4 and from 1e6.
fn c_g(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let e = format!("{v:.5e}");
    let (mant, exp) = e.split_once('e').unwrap_or((&e, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let trim = |t: &str| -> String {
        if t.contains('.') {
            t.trim_end_matches('0').trim_end_matches('.').to_owned()
        } else {
            t.to_owned()
        }
    };
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim(mant), exp.abs())
    } else {
        let decimals = usize::try_from(5 - exp).unwrap_or(0);
        trim(&format!("{v:.decimals$}"))
    }
}

/// -H and -U: every sample, "#, UNIT" then "N, value" lines (sorted for -H, as measured
/// for -U; both lists when both are given, unsorted first, as perftest).
fn sample_lists(out: &mut dyn Write, plan: &Plan, samples: &[f64]) -> Result<(), PerfError> {
    let unit = if plan.cycles_mhz.is_some() {
        "cycles"
    } else {
        "usec"
    };
    let mut list = |v: &[f64]| -> Result<(), PerfError> {
        writeln!(out, "#, {unit}")?;
        for (i, x) in v.iter().enumerate() {
            writeln!(out, "{}, {}", i + 1, c_g(*x))?;
        }
        Ok(())
    };
    if plan.unsorted {
        list(samples)?;
    }
    if plan.histogram {
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        list(&sorted)?;
    }
    Ok(())
}

/// Latency samples from the post times of a run: consecutive differences, divided by
/// `factor` (2 for the ping-pongs).
fn lat_samples(posts: &[Instant], factor: f64) -> Vec<f64> {
    posts
        .windows(2)
        .map(|w| w[1].duration_since(w[0]).as_secs_f64() * 1e6 / factor)
        .collect()
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

/// Creates the test QP (on `rnic`, with fresh CQs sized for the run).
fn data_qp(
    rnic: &Rnic,
    pd: stack::Pd,
    plan: &Plan,
    a: &PerfArgs,
    events: Option<&CompletionChannel>,
) -> Result<(Qp, Cq, Cq), PerfError> {
    let (scq, rcq) = match events {
        Some(ch) => (Cq::with_channel(65536, ch), Cq::with_channel(65536, ch)),
        None => (Cq::new(65536), Cq::new(65536)),
    };
    let mut attr = QpAttr::new(pd, scq.clone(), rcq.clone());
    attr.sq_depth = (plan.tx_depth as usize).max(16) + 16;
    attr.rq_depth = plan.rx_depth as usize + 16;
    attr.first_fpdu_delay = a.mpa.first_fpdu_delay();
    Ok((rnic.create_qp(attr)?, scq, rcq))
}

/// The control exchange before a test (versions, cycle buffer, cache line, MTU); returns
/// the cycle buffer size to use.
fn control_exchange(rnic: &Rnic, comm: &Comm) -> Result<u32, PerfError> {
    // Versions, system data, MTU.
    let theirs = comm.xchg(rnic, &version_bytes(VERSION))?;
    let v = parse_version(&theirs);
    if v < MIN_PEER_VERSION {
        return fail(format!(
            "the peer announces perftest version {v:.2}; versions older than 5.70 use another protocol"
        ));
    }
    let cycle = comm.xchg(rnic, &CYCLE_BUFFER.to_be_bytes())?;
    let cycle = cycle
        .get(..4)
        .and_then(|b| b.try_into().ok())
        .map(u32::from_be_bytes)
        .unwrap_or(0);
    // The peer's cycle buffer sizes our registered area: bounded, so a peer cannot make us
    // allocate gigabytes (0xFFFFFFFF asked for 8 GiB and aborted).
    if cycle > MAX_PEER_CYCLE {
        return fail(format!(
            "the peer announces a cycle buffer of {cycle} bytes; at most {MAX_PEER_CYCLE} are \
             accepted (perftest uses the page size)"
        ));
    }
    let cycle = cycle.max(CYCLE_BUFFER);
    let _cache_line = comm.xchg(rnic, &CACHE_LINE.to_be_bytes())?;
    let _mtu = comm.xchg(rnic, &[b'0' + MTU_ENUM, 0])?;

    Ok(cycle)
}

fn run(test: Test, a: &PerfArgs, out: &mut dyn Write) -> Result<(), PerfError> {
    if a.version {
        writeln!(out, "Version: {VERSION}")?;
        return Ok(());
    }
    let plan = Plan::new(test, a)?;
    let rnic = Rnic::open(rnic_config(a))?;
    let manual = a.manual_progress;

    // 1. The control connection and its exchange.
    let (mut comm, listener, peer, cycle) = control_connection(a, &plan, &rnic, out)?;
    if matches!(plan.mode, Mode::Infinite { .. }) {
        // The peer runs until it is interrupted.
        comm.wait = Duration::MAX;
    }

    // Resources of the test connections: one PD, and per QP its buffer and credit word.
    let pd = rnic.alloc_pd();
    let area = plan
        .max_size()
        .max(u64::from(cycle))
        .next_multiple_of(u64::from(CACHE_LINE));
    let len = usize::try_from(area.saturating_mul(2))
        .map_err(|_| PerfError::Usage("size too large".into()))?;
    let access = buffer_access(test);

    // 2. The test connections (one per QP, -q), between two zero exchanges.
    comm.hand_shake(&rnic, &Dest::default())?;
    let test_cfg = cm_config(a, &plan, true);
    let mut conns = Vec::new();
    for _ in 0..plan.qps {
        // With -e each QP's CQs signal a completion channel of their own (the QPs are
        // driven from threads of their own).
        let events = if a.events {
            Some(CompletionChannel::new().map_err(|e| {
                PerfError::Usage(format!("-e: cannot create a completion channel: {e}"))
            })?)
        } else {
            None
        };
        let (qp, scq, rcq) = match &listener {
            Some(l) => {
                let req = rnic.wait_request(l, TIMEOUT)?;
                let (qp, scq, rcq) = data_qp(&rnic, pd, &plan, a, events.as_ref())?;
                rnic.accept(req.id, &qp, test_cfg.clone())?;
                rnic.wait_established(&qp, TIMEOUT)?;
                (qp, scq, rcq)
            }
            None => connect_test(a, &plan, &rnic, pd, &peer, &test_cfg, events.as_ref())?,
        };
        conns.push((qp, scq, rcq, events));
    }
    if let Some(l) = &listener {
        rnic.close_listener(l);
    }
    comm.hand_shake(&rnic, &Dest::default())?;

    let mut ds = Vec::with_capacity(conns.len());
    for (qp, scq, rcq, events) in conns {
        // No test invalidates its buffer, so it is registered as not invalidatable: over
        // SCTP its Tagged segments are then placed as they arrive, gaps or not (RFC 5041
        // §2.1).
        let buf = rnic
            .mem()
            .register_new(pd, len, MrOptions::new(access).not_invalidatable())?;
        let credit = rnic.mem().register_new(
            pd,
            8,
            MrOptions::new(Access::LOCAL_WRITE | Access::REMOTE_WRITE),
        )?;
        let mut local = Dest {
            out_reads: if test.outstanding() {
                u32::from(plan.outs)
            } else {
                1
            },
            qpn: qp.id().0,
            psn: psn(),
            rkey: buf.stag(),
            vaddr: buf.base_to() + area,
            ..Dest::default()
        };
        if test == Test::SendBw {
            local.rkey = credit.stag();
            local.vaddr = credit.base_to() + 4;
        }
        ds.push(Data {
            qp,
            scq,
            rcq,
            buf,
            credit,
            area,
            local,
            remote: Dest::default(),
            manual,
            events,
            rq_out: 0,
        });
    }

    // 3. The pingpong_dest exchanges: the bandwidth tests exchange each QP's in turn twice
    // and the first QP's once more (write-bw, read-bw: after both rounds; send-bw: between
    // them), as perftest; the latency tests (one QP) three or four times.
    let round = |ds: &mut [Data], comm: &Comm| -> Result<(), PerfError> {
        for d in ds.iter_mut() {
            d.remote = comm.hand_shake(&rnic, &d.local)?;
        }
        Ok(())
    };
    let first = |ds: &mut [Data], comm: &Comm| -> Result<(), PerfError> {
        if let Some(d) = ds.first_mut() {
            d.remote = comm.hand_shake(&rnic, &d.local)?;
        }
        Ok(())
    };
    match test {
        Test::WriteBw | Test::ReadBw | Test::AtomicBw => {
            round(&mut ds, &comm)?;
            round(&mut ds, &comm)?;
            first(&mut ds, &comm)?;
        }
        Test::SendBw => {
            round(&mut ds, &comm)?;
            first(&mut ds, &comm)?;
            round(&mut ds, &comm)?;
        }
        Test::SendLat => {
            for _ in 0..3 {
                first(&mut ds, &comm)?;
            }
        }
        Test::WriteLat | Test::ReadLat | Test::AtomicLat => {
            for _ in 0..4 {
                first(&mut ds, &comm)?;
            }
        }
    }
    if plan.output.is_none() {
        header(out, &plan, a, &rnic, &ds, &peer)?;
        table_head(out, &plan)?;
    }
    out.flush()?;

    // 4. The measurements, then teardown. The connections per progress thread are those
    // the measurement starts with (the peer may close its test connections before this end
    // reports).
    let loads = rnic.progress_thread_loads();
    measure(test, &plan, &rnic, &comm, &mut ds, out)?;
    if a.progress_stats {
        progress_line(out, &rnic.progress_stats(), &loads)?;
    }
    out.flush()?;
    teardown(test, &plan, &rnic, &comm, &ds);
    Ok(())
}

/// `--progress-stats`: where the measurement's progress was made, and with several progress
/// threads the established connections each one served as the measurement started (`loads`).
fn progress_line(
    out: &mut dyn Write,
    s: &stack::ProgressStats,
    loads: &[usize],
) -> Result<(), PerfError> {
    write!(
        out,
        " Progress        : {} posts sent by the posting thread, {} pieces of work by polling \
         threads; progress threads slept {} times watching their sockets, {} leaving them to \
         a polling thread",
        s.inline_posts, s.assisted_work, s.thread_sleeps, s.thread_leased_sleeps
    )?;
    if loads.len() > 1 {
        write!(out, "; connections per progress thread {loads:?}")?;
    }
    writeln!(out)?;
    Ok(())
}

/// The rights of a test's data buffer, as perftest registers it over iWARP: local write, and
/// remote write for the Write tests; remote read for the Read tests, with remote write too
/// (an iWARP Read Response is placed like a Write, so the Read's sink needs it); the Send
/// tests' buffer no remote right (their credit word is registered apart). A conformance
/// runner's Read Request of a write-bw server's buffer must then be refused.
fn buffer_access(test: Test) -> Access {
    match test {
        Test::WriteBw | Test::WriteLat => Access::LOCAL_WRITE | Access::REMOTE_WRITE,
        Test::ReadBw | Test::ReadLat => {
            Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE
        }
        Test::SendBw | Test::SendLat => Access::LOCAL_WRITE,
        // Remote atomic access only, beside local write (perftest's IBV_ACCESS_REMOTE_ATOMIC):
        // an RDMA Read or Write of the buffer is refused, an aligned atomic accepted.
        Test::AtomicBw | Test::AtomicLat => Access::LOCAL_WRITE | Access::REMOTE_ATOMIC,
    }
}

/// The control connection (connected, or the first client whose connection and control
/// exchange succeed) and the cycle buffer size agreed on it; a server also returns its
/// listener (for the test connection).
fn control_connection(
    a: &PerfArgs,
    plan: &Plan,
    rnic: &Rnic,
    out: &mut dyn Write,
) -> Result<(Comm, Option<stack::Listener>, TransportAddr, u32), PerfError> {
    let manual = a.manual_progress;
    let mut comm = Comm::new(rnic, plan.client, manual, a.mpa.first_fpdu_delay())?;
    let comm_cfg = cm_config(a, plan, false);
    if let Some(host) = &a.server {
        let to = a
            .mpa
            .connect_addr(host, a.port, |h, p| {
                resolve(h, p).map_err(|e| e.to_string())
            })
            .map_err(PerfError::Usage)?;
        rnic.connect_to_blocking(&comm.qp, &to, comm_cfg, TIMEOUT)?;
        let cycle = control_exchange(rnic, &comm)?;
        return Ok((comm, None, to, cycle));
    }
    let l = rnic.listen_on(&a.mpa.listen_addr(a.port))?;
    let waiting = format!(
        " Waiting for client to connect on port {}",
        l.local_addr.port()
    );
    if plan.output.is_some() {
        // Only the results go to standard output; the port is still said.
        eprintln!("{waiting}");
    } else {
        writeln!(out, "{waiting}")?;
        writeln!(out, "\n************************************")?;
        writeln!(out, "* Waiting for client to connect... *")?;
        writeln!(out, "************************************")?;
        out.flush()?;
    }
    // A control connection whose setup or exchange fails (a malformed or refused
    // MPA Request, answered with a Reject by the RNIC; a peer that went away or sent
    // what is not perftest's exchange) does not end the server: it says so and waits
    // for the next.
    let (peer, cycle) = loop {
        let req = rnic.wait_request(&l, CTRL_WAIT)?;
        let up = rnic
            .accept(req.id, &comm.qp, comm_cfg.clone())
            .and_then(|()| rnic.wait_established(&comm.qp, TIMEOUT).map(|_| ()))
            .map_err(PerfError::from)
            .and_then(|()| control_exchange(rnic, &comm));
        match up {
            Ok(cycle) => break (req.peer, cycle),
            Err(e) => {
                eprintln!(
                    "softrnic: connection from {} failed ({e}); waiting for the next",
                    req.peer
                );
                let _ = rnic.destroy_qp(&comm.qp);
                while rnic.poll_event_for(comm.qp.id()).is_some() {}
                comm = Comm::new(rnic, plan.client, manual, a.mpa.first_fpdu_delay())?;
            }
        }
    };
    Ok((comm, Some(l), TransportAddr::from(peer), cycle))
}

/// The client's test connection, retried as perftest does while the server gets ready.
fn connect_test(
    a: &PerfArgs,
    plan: &Plan,
    rnic: &Rnic,
    pd: stack::Pd,
    peer: &TransportAddr,
    test_cfg: &stack::mpa::Config,
    events: Option<&CompletionChannel>,
) -> Result<(Qp, Cq, Cq), PerfError> {
    let mut last = None;
    let mut made = None;
    for _ in 0..CONNECT_TRIES {
        let (qp, scq, rcq) = data_qp(rnic, pd, plan, a, events)?;
        match rnic.connect_to_blocking(&qp, peer, test_cfg.clone(), TIMEOUT) {
            Ok(_) => {
                made = Some((qp, scq, rcq));
                break;
            }
            Err(e) => {
                let _ = rnic.destroy_qp(&qp);
                last = Some(e);
                std::thread::sleep(CONNECT_RETRY);
            }
        }
    }
    match made {
        Some(m) => Ok(m),
        None => fail(format!(
            "test connection to {peer} failed {CONNECT_TRIES} times: {}",
            last.map(|e| e.to_string()).unwrap_or_default()
        )),
    }
}

/// Every size's measurement with the closing exchanges of the test's protocol.
fn measure(
    test: Test,
    plan: &Plan,
    rnic: &Rnic,
    comm: &Comm,
    ds: &mut [Data],
    out: &mut dyn Write,
) -> Result<(), PerfError> {
    if ds.is_empty() {
        return fail("no test connection");
    }
    match test {
        Test::WriteBw | Test::ReadBw | Test::AtomicBw if plan.duplex => {
            measure_bw_both_ways(plan, rnic, comm, ds, out)
        }
        Test::WriteBw | Test::ReadBw | Test::AtomicBw => measure_bw(plan, rnic, comm, ds, out),
        Test::SendBw => measure_send_bw(plan, rnic, comm, ds, out),
        Test::WriteLat | Test::SendLat | Test::ReadLat | Test::AtomicLat => {
            measure_latency(test, plan, rnic, comm, &mut ds[0], out)
        }
    }
}

/// write-bw and read-bw with -b: both sides send.
fn measure_bw_both_ways(
    plan: &Plan,
    rnic: &Rnic,
    comm: &Comm,
    ds: &mut [Data],
    out: &mut dyn Write,
) -> Result<(), PerfError> {
    // perftest's -b: both sides run the sender over every QP (-q), between
    // exchanges, and print the sum of their results. With --run_infinitely both
    // run at once without an exchange, each printing its own rate doubled (as
    // perftest's run_inf_bi_factor).
    if matches!(plan.mode, Mode::Infinite { .. }) {
        bw_clients(rnic, ds, plan, plan.size, None, out)?;
        return fail("the infinite run ended");
    }
    for s in sizes(plan.all, plan.size) {
        comm.hand_shake(rnic, &ds[0].local)?;
        let mine = bw_clients(rnic, ds, plan, s, None, out)?;
        for d in ds.iter() {
            d.drain(rnic)?;
        }
        if plan.all {
            comm.hand_shake(rnic, &ds[0].local)?;
        }
        let theirs = xchg_report(rnic, comm, &mine)?;
        bw_line(out, plan, &mine.plus(&theirs))?;
        out.flush()?;
    }
    rule(out, plan)?;
    atomic_target(out, plan, ds)?;
    comm.hand_shake(rnic, &ds[0].local)?;
    Ok(())
}

/// The atomic tests' target (the side whose buffer the peer's atomics hit, at full
/// verbosity): the sum of the words at the start of every cache line of every QP's buffer.
/// The buffers start zeroed, so after the peer's last completion this is the number of
/// Fetch and Adds executed here (each adds 1), and 0 after Compare and Swaps (0 for 0).
fn atomic_target(out: &mut dyn Write, plan: &Plan, ds: &[Data]) -> Result<(), PerfError> {
    if !plan.test.atomics() || plan.output.is_some() {
        return Ok(());
    }
    let mut sum = 0u64;
    let mut words = 0u64;
    for d in ds {
        sum = sum.wrapping_add(d.atomic_sum()?);
        words += d.area / u64::from(CACHE_LINE);
    }
    writeln!(
        out,
        " Atomic target   : {words} words (one per cache line), sum {sum}"
    )?;
    out.flush()?;
    Ok(())
}

/// write-bw and read-bw: the client sends, the server reports what the client measured.
fn measure_bw(
    plan: &Plan,
    rnic: &Rnic,
    comm: &Comm,
    ds: &mut [Data],
    out: &mut dyn Write,
) -> Result<(), PerfError> {
    let zero = BwReport {
        size: 0,
        iters: 0,
        peak: 0.0,
        avg: 0.0,
        msg_rate: 0.0,
    };
    if plan.client {
        let mut last = None;
        for s in sizes(plan.all, plan.size) {
            let r = bw_clients(rnic, ds, plan, s, None, out)?;
            bw_line(out, plan, &r)?;
            out.flush()?;
            last = Some(r);
        }
        rule(out, plan)?;
        // Our Writes completed when handed to TCP: let them reach the server
        // before the closing exchange on the control connection overtakes them.
        for d in ds.iter() {
            d.drain(rnic)?;
        }
        comm.hand_shake(rnic, &ds[0].local)?;
        xchg_report(rnic, comm, &last.unwrap_or(zero))?;
    } else {
        comm.hand_shake(rnic, &ds[0].local)?;
        let r = xchg_report(rnic, comm, &zero)?;
        bw_line(out, plan, &r)?;
        rule(out, plan)?;
        atomic_target(out, plan, ds)?;
    }
    comm.hand_shake(rnic, &ds[0].local)?;
    Ok(())
}

/// send-bw, one way or with -b both ways.
fn measure_send_bw(
    plan: &Plan,
    rnic: &Rnic,
    comm: &Comm,
    ds: &mut [Data],
    out: &mut dyn Write,
) -> Result<(), PerfError> {
    for s in sizes(plan.all, plan.size) {
        if !plan.client || plan.duplex {
            for d in ds.iter_mut() {
                while d.rq_out < plan.rx_depth {
                    d.post_recv()?;
                }
            }
        }
        comm.hand_shake(rnic, &ds[0].local)?;
        let r = if plan.duplex {
            for d in ds.iter() {
                d.credit.buf().write_at(4, &[0; 4])?;
            }
            // Every QP both sends and receives, each from a thread of its own;
            // the result sums them as perftest's run_iter_bi over several QPs.
            let mine = bw_multi(ds, plan, s, |d, _| send_bi(rnic, d, plan, s), out)?;
            if plan.mode == Mode::Iters {
                mine.plus(&xchg_report(rnic, comm, &mine)?)
            } else {
                // perftest's -D send-bw -b: each side its own result.
                mine
            }
        } else if plan.client {
            for d in ds.iter() {
                d.credit.buf().write_at(4, &[0; 4])?;
            }
            bw_clients(rnic, ds, plan, s, Some(plan.rx_depth), out)?
        } else {
            send_bw_servers(rnic, ds, plan, s, out)?
        };
        bw_line(out, plan, &r)?;
        out.flush()?;
        if plan.all {
            comm.hand_shake(rnic, &ds[0].local)?;
        }
    }
    rule(out, plan)?;
    for d in ds.iter() {
        d.drain(rnic)?;
    }
    comm.hand_shake(rnic, &ds[0].local)?;
    Ok(())
}

/// The latency tests, on the first test connection.
fn measure_latency(
    test: Test,
    plan: &Plan,
    rnic: &Rnic,
    comm: &Comm,
    d: &mut Data,
    out: &mut dyn Write,
) -> Result<(), PerfError> {
    match test {
        Test::WriteLat => {
            // In peer-to-peer mode the initiator's RTR (RFC 6581 §3) has already opened
            // the stream for the responder.
            let p2p = d.qp.session().is_some_and(|s| s.p2p());
            if plan.client && !p2p {
                // The server writes first, but as the MPA responder it may not send
                // before our first FPDU (RFC 5044 §7.1.2): open the stream with a
                // zero-length RDMA Write, which changes no memory at the server.
                d.qp.post_send(SendWr::write(0, Vec::new(), d.remote.rkey, d.remote.vaddr))?;
                d.wait(rnic, &d.scq, "write-lat opening write")?;
            }
            for s in sizes(plan.all, plan.size) {
                let run = write_lat(rnic, d, plan, s)?;
                lat_result(out, plan, s, &run, 2.0)?;
            }
            rule(out, plan)?;
        }
        Test::SendLat => {
            for s in sizes(plan.all, plan.size) {
                let want = match plan.mode {
                    Mode::Iters => plan.rx_depth.min(plan.iters),
                    _ => plan.rx_depth,
                };
                while d.rq_out < want {
                    d.post_recv()?;
                }
                comm.hand_shake(rnic, &d.local)?;
                let run = send_lat(rnic, d, plan, s)?;
                lat_result(out, plan, s, &run, 2.0)?;
            }
            rule(out, plan)?;
            comm.hand_shake(rnic, &d.local)?;
        }
        Test::ReadLat | Test::AtomicLat => {
            if plan.client {
                for s in sizes(plan.all, plan.size) {
                    let run = read_lat(rnic, d, plan, s)?;
                    lat_result(out, plan, s, &run, 1.0)?;
                }
            }
            rule(out, plan)?;
            comm.hand_shake(rnic, &d.local)?;
            // The client's closing exchange follows its last completion.
            if !plan.client {
                atomic_target(out, plan, std::slice::from_ref(d))?;
            }
        }
        Test::WriteBw | Test::ReadBw | Test::SendBw | Test::AtomicBw => {
            return fail("not a latency test");
        }
    }
    Ok(())
}

/// Teardown: the client closes the test connection, then the control connection; the
/// server waits a moment for the client's close.
fn teardown(test: Test, plan: &Plan, rnic: &Rnic, comm: &Comm, ds: &[Data]) {
    // write-lat ends without a closing exchange: the peer's last Write may have arrived
    // here before its completion was reported there, and a close overtaking that
    // completion makes siw flush the Write with an error (seen with siw 6.1). Linger.
    if test == Test::WriteLat
        && let Some(d) = ds.first()
    {
        // Best effort: the peer may already have closed after its last completion.
        let _ = d.drain(rnic);
        std::thread::sleep(WRITE_LAT_LINGER);
    }
    if plan.client {
        for d in ds {
            let _ = rnic.disconnect(&d.qp);
        }
        for d in ds {
            let _ = rnic.wait_disconnected(&d.qp, Duration::from_secs(5));
        }
        let _ = rnic.disconnect(&comm.qp);
        let _ = rnic.wait_disconnected(&comm.qp, Duration::from_secs(5));
    } else {
        for d in ds {
            let _ = rnic.wait_disconnected(&d.qp, Duration::from_secs(5));
            let _ = rnic.disconnect(&d.qp);
        }
        let _ = rnic.wait_disconnected(&comm.qp, Duration::from_secs(5));
        let _ = rnic.disconnect(&comm.qp);
    }
}

impl BwReport {
    /// Both sides of a bidirectional run, as perftest sums them: peak, average and rate
    /// added, size and iterations ours.
    fn plus(&self, theirs: &BwReport) -> BwReport {
        BwReport {
            peak: self.peak + theirs.peak,
            avg: self.avg + theirs.avg,
            msg_rate: self.msg_rate + theirs.msg_rate,
            ..*self
        }
    }
}

/// perftest's `xchg_bw_reports`: five exchanges (size, iterations, peak, average, message
/// rate; big endian). Returns the peer's report.
fn xchg_report(rnic: &Rnic, comm: &Comm, mine: &BwReport) -> Result<BwReport, PerfError> {
    let u = |v: Vec<u8>| -> u64 {
        v.get(..8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_be_bytes)
            .unwrap_or(0)
    };
    let size = u(comm.xchg(rnic, &mine.size.to_be_bytes())?);
    let iters = u(comm.xchg(rnic, &mine.iters.to_be_bytes())?);
    let peak = f64::from_bits(u(comm.xchg(rnic, &mine.peak.to_bits().to_be_bytes())?));
    let avg = f64::from_bits(u(comm.xchg(rnic, &mine.avg.to_bits().to_be_bytes())?));
    let msg_rate = f64::from_bits(u(comm.xchg(rnic, &mine.msg_rate.to_bits().to_be_bytes())?));
    Ok(BwReport {
        size,
        iters,
        peak,
        avg,
        msg_rate,
    })
}

/// The bandwidth sender: RDMA Writes, RDMA Reads or Sends (then within the receiver's
/// credit window `credit`), up to the tx depth outstanding, for the plan's iterations or
/// duration; with `--run_infinitely` it prints a line to `out` every period and never
/// returns but with an error.
fn bw_client(
    rnic: &Rnic,
    d: &mut Data,
    plan: &Plan,
    size: u64,
    credit: Option<u64>,
    tally: Option<&Tally>,
    out: &mut dyn Write,
) -> Result<(BwReport, Timing), PerfError> {
    let counted = plan.mode == Mode::Iters;
    let iters = if counted { plan.iters } else { u64::MAX };
    let depth = plan.tx_depth;
    let clock = Clock::of(plan.mode);
    let mut posted = 0u64;
    let mut done = 0u64;
    // Completions inside a -D run's measured window.
    let mut sampled = 0u64;
    let mut stamps: Vec<Instant> = Vec::with_capacity(if counted { iters as usize } else { 0 });
    let mut wcs = wc_batch();
    let start = Instant::now();
    let mut last_progress = Instant::now();
    // --run_infinitely: the period's start and the completions before it.
    let (mut period_start, mut period_done) = (start, 0u64);
    loop {
        let phase = phase_of(clock.as_ref());
        if (counted && done >= iters) || phase == Phase::End {
            break;
        }
        let mut blocked = false;
        // A post list (-l) of `list` requests goes out in one post call.
        let list = plan.post_list;
        while posted < iters && posted - done + list <= depth {
            if let Some(rx) = credit {
                let window = (posted as u32)
                    .wrapping_add(list as u32)
                    .wrapping_sub(d.credit()?);
                if u64::from(window) >= rx {
                    blocked = true;
                    break;
                }
            }
            let wr = |i: u64| {
                let wr = match plan.test {
                    Test::WriteBw => {
                        SendWr::write(i, vec![d.src(size)], d.remote.rkey, d.remote.vaddr)
                    }
                    Test::ReadBw => {
                        SendWr::read(i, vec![d.src(size)], d.remote.rkey, d.remote.vaddr)
                    }
                    Test::AtomicBw => {
                        d.atomic_wr(i, plan, atomic_offset(i, plan.post_list, d.area))
                    }
                    _ => SendWr::send(i, vec![d.src(size)]),
                };
                if signaled(i, plan.cq_mod, iters) {
                    wr
                } else {
                    wr.unsignaled()
                }
            };
            if list == 1 {
                d.qp.post_send(wr(posted))?;
            } else {
                d.qp.post_send_batch((posted..posted + list).map(wr))
                    .map_err(|(_, e)| e)?;
            }
            posted += list;
        }
        d.kick(rnic);
        if let Some(t) = tally {
            // Several QPs run infinitely: the caller prints their sum.
            t.add(done - period_done)?;
            period_done = done;
        } else if let Mode::Infinite { period } = plan.mode
            && period_start.elapsed() >= Duration::from_secs(period)
        {
            let now = Instant::now();
            let r = infinite_report(plan, size, done - period_done, now - period_start);
            bw_line(out, plan, &r)?;
            out.flush()?;
            (period_start, period_done) = (now, done);
        }
        let n = d.scq.poll(&mut wcs);
        if n == 0 {
            if last_progress.elapsed() > TIMEOUT {
                return fail(if blocked {
                    "send-bw: no credit from the receiver within 30 s"
                } else {
                    "bandwidth test stalled"
                });
            }
            if d.manual || blocked {
                std::thread::yield_now();
            } else {
                // Sleep on the CQ rather than spin: the progress thread needs the CPU.
                sleep_on(&d.scq, d.events.as_ref(), Duration::from_millis(10));
            }
            continue;
        }
        last_progress = Instant::now();
        for wc in wcs.iter().take(n) {
            if !wc.status.is_success() {
                return fail(format!("work request failed: {wc}"));
            }
            // The send queue completes in order: a signaled request's completion stands
            // for the unsignaled ones before it.
            let upto = (wc.wr_id + 1).clamp(done, posted);
            if counted {
                for _ in done..upto {
                    stamps.push(last_progress);
                }
            } else if phase == Phase::Sample {
                sampled += upto - done;
            }
            done = upto;
        }
    }
    let end = Instant::now();
    match clock {
        // What is still outstanding completes before the closing exchange (Data::drain).
        Some(c) => Ok((
            bw_report(plan.gbits, size, sampled, c.sample(), None),
            Timing { start, end, stamps },
        )),
        None => {
            let total = end.duration_since(start);
            let pk = peak(&stamps, start, size, depth as usize);
            Ok((
                bw_report(
                    plan.gbits,
                    size,
                    iters,
                    total,
                    (!plan.no_peak).then_some(pk),
                ),
                Timing { start, end, stamps },
            ))
        }
    }
}

/// When one QP's side of a bandwidth run started and ended, and the completion (or
/// receive) times its peak is cut from.
struct Timing {
    start: Instant,
    end: Instant,
    stamps: Vec<Instant>,
}

/// One size of a bandwidth test over every QP of the run (`-q`): each QP's side runs in a
/// thread of its own, all started together, and the result is perftest's for several QPs:
/// every QP's iterations, timed from the first start to the last end (a -D run: the
/// messages of every QP in the measured window, their rates added).
fn bw_multi(
    ds: &mut [Data],
    plan: &Plan,
    size: u64,
    one: impl Fn(&mut Data, &mut dyn Write) -> Result<(BwReport, Timing), PerfError> + Sync,
    out: &mut dyn Write,
) -> Result<BwReport, PerfError> {
    if let [d] = ds {
        return Ok(one(d, out)?.0);
    }
    let runs: Vec<Result<(BwReport, Timing), PerfError>> = std::thread::scope(|sc| {
        let handles: Vec<_> = ds
            .iter_mut()
            .enumerate()
            .map(|(i, d)| {
                let one = &one;
                std::thread::Builder::new()
                    .name(format!("perf-qp{i}"))
                    .spawn_scoped(sc, move || one(d, &mut std::io::sink()))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| match h {
                Ok(h) => h
                    .join()
                    .unwrap_or_else(|_| fail("a QP's thread of the run panicked")),
                Err(e) => Err(PerfError::Io(e)),
            })
            .collect()
    });
    let mut reports = Vec::with_capacity(runs.len());
    for r in runs {
        reports.push(r?);
    }
    let n = reports.len() as u64;
    if plan.mode != Mode::Iters {
        // Every QP measured the same window: their messages and rates add up.
        let mut sum = BwReport {
            size,
            iters: 0,
            peak: 0.0,
            avg: 0.0,
            msg_rate: 0.0,
        };
        for (r, _) in &reports {
            sum.iters += r.iters;
            sum.avg += r.avg;
            sum.msg_rate += r.msg_rate;
        }
        return Ok(sum);
    }
    let Some(start) = reports.iter().map(|(_, t)| t.start).min() else {
        return fail("no test connection");
    };
    let end = reports.iter().map(|(_, t)| t.end).max().unwrap_or(start);
    let mut stamps: Vec<Instant> = reports
        .iter()
        .flat_map(|(_, t)| t.stamps.iter().copied())
        .collect();
    stamps.sort_unstable();
    let pk = peak(&stamps, start, size, (plan.tx_depth * n) as usize);
    Ok(bw_report(
        plan.gbits,
        size,
        plan.iters * n,
        end.duration_since(start),
        (!plan.no_peak).then_some(pk),
    ))
}

/// One `--run_infinitely` period's line: `n` messages in `took`. A bidirectional run
/// (write-bw, read-bw `-b`) counts its own messages twice for both directions, as
/// perftest's `run_inf_bi_factor` does.
fn infinite_report(plan: &Plan, size: u64, n: u64, took: Duration) -> BwReport {
    let factor = if plan.duplex { 2 } else { 1 };
    BwReport {
        size,
        ..bw_report(plan.gbits, size * factor, n, took, None)
    }
}

/// The completions of several QPs running infinitely (`-q N --run_infinitely`), added up
/// by their threads for one line per period over all of them (perftest's
/// `run_iter_bw_infinitely` polls every QP in one loop and reports their sum).
#[derive(Default)]
struct Tally {
    done: AtomicU64,
    stop: AtomicBool,
}

impl Tally {
    /// Adds `n` completions; an error once the run is being stopped.
    fn add(&self, n: u64) -> Result<(), PerfError> {
        self.done.fetch_add(n, Ordering::Relaxed);
        if self.stop.load(Ordering::Relaxed) {
            return fail("stopped: another QP's run failed");
        }
        Ok(())
    }
}

/// `--run_infinitely` over several QPs: each QP's side runs in a thread of its own
/// (`one`, adding to a shared [`Tally`]); this thread prints a line per `period` seconds
/// for all of them together. It ends only when a QP's run fails (or printing does), after
/// stopping the others, with that error.
fn infinite_multi(
    ds: &mut [Data],
    plan: &Plan,
    size: u64,
    period: u64,
    out: &mut dyn Write,
    one: impl Fn(&mut Data, &Tally) -> Result<(BwReport, Timing), PerfError> + Sync,
) -> Result<BwReport, PerfError> {
    let tally = Tally::default();
    std::thread::scope(|sc| {
        let mut handles = Vec::with_capacity(ds.len());
        let mut spawned = Ok(());
        for (i, d) in ds.iter_mut().enumerate() {
            let (one, tally) = (&one, &tally);
            match std::thread::Builder::new()
                .name(format!("perf-qp{i}"))
                .spawn_scoped(sc, move || one(d, tally))
            {
                Ok(h) => handles.push(h),
                Err(e) => {
                    spawned = Err(PerfError::Io(e));
                    break;
                }
            }
        }
        let printed = spawned.and_then(|()| {
            let (mut start, mut before) = (Instant::now(), 0u64);
            loop {
                std::thread::sleep(Duration::from_millis(20));
                if handles.iter().any(|h| h.is_finished()) {
                    return fail("a QP's infinite run ended");
                }
                if start.elapsed() >= Duration::from_secs(period) {
                    let now = Instant::now();
                    let total = tally.done.load(Ordering::Relaxed);
                    bw_line(
                        out,
                        plan,
                        &infinite_report(plan, size, total - before, now - start),
                    )?;
                    out.flush()?;
                    (start, before) = (now, total);
                }
            }
        });
        tally.stop.store(true, Ordering::Relaxed);
        // A QP's own failure says more than "ended".
        let mut first = None;
        for h in handles {
            let r = h
                .join()
                .unwrap_or_else(|_| fail("a QP's thread of the run panicked"));
            if let Err(e) = r
                && first.is_none()
            {
                first = Some(e);
            }
        }
        match (printed, first) {
            (Err(PerfError::Io(e)), _) => Err(PerfError::Io(e)),
            (_, Some(e)) => Err(e),
            (r, None) => r,
        }
    })
}

/// The bandwidth sender over every QP of the run (see [`bw_client`], [`bw_multi`]).
fn bw_clients(
    rnic: &Rnic,
    ds: &mut [Data],
    plan: &Plan,
    size: u64,
    credit: Option<u64>,
    out: &mut dyn Write,
) -> Result<BwReport, PerfError> {
    if let Mode::Infinite { period } = plan.mode
        && ds.len() > 1
    {
        return infinite_multi(ds, plan, size, period, out, |d, t| {
            bw_client(rnic, d, plan, size, credit, Some(t), &mut std::io::sink())
        });
    }
    bw_multi(
        ds,
        plan,
        size,
        |d, out| bw_client(rnic, d, plan, size, credit, None, out),
        out,
    )
}

/// send-bw's receiver over every QP of the run (see [`send_bw_server`], [`bw_multi`]).
fn send_bw_servers(
    rnic: &Rnic,
    ds: &mut [Data],
    plan: &Plan,
    size: u64,
    out: &mut dyn Write,
) -> Result<BwReport, PerfError> {
    if let Mode::Infinite { period } = plan.mode
        && ds.len() > 1
    {
        return infinite_multi(ds, plan, size, period, out, |d, t| {
            send_bw_server(rnic, d, plan, size, Some(t), &mut std::io::sink())
        });
    }
    bw_multi(
        ds,
        plan,
        size,
        |d, out| send_bw_server(rnic, d, plan, size, None, out),
        out,
    )
}

/// perftest's CQ moderation: request `i` (from 0) of `iters` is signaled when it is every
/// `cq_mod`-th one or the last.
fn signaled(i: u64, cq_mod: u64, iters: u64) -> bool {
    (i + 1).is_multiple_of(cq_mod.max(1)) || i + 1 == iters
}

/// send-bw's receiver: takes `iters` messages, reposting receives up to `iters` in all
/// and returning credits (RDMA Writes of its receive count) every `rx_depth / 3`. A credit
/// goes out only once the receives it stands for are posted again; a post the runtime
/// refuses as a full queue (its count can lag behind completions already polled) is
/// retried. With -D it receives (reposting every receive) until its clock, started at the
/// first message as perftest's, runs out; with --run_infinitely it prints a line to `out`
/// every period and never returns but with an error.
fn send_bw_server(
    rnic: &Rnic,
    d: &mut Data,
    plan: &Plan,
    size: u64,
    tally: Option<&Tally>,
    out: &mut dyn Write,
) -> Result<(BwReport, Timing), PerfError> {
    let counted = plan.mode == Mode::Iters;
    let iters = if counted { plan.iters } else { u64::MAX };
    let mut clock = None;
    let mut sampled = 0u64;
    let (mut period_start, mut period_rcnt) = (Instant::now(), 0u64);
    let credit_every = (plan.rx_depth / 3).max(1);
    let mut posted = d.rq_out.min(iters);
    let mut rcnt = 0u64;
    let mut credits_out = 0u64;
    // Reposts owed, and whether a credit is due once they are done.
    let mut owed = 0u64;
    let mut credit_due = false;
    let mut start = None;
    let mut stamps = Vec::with_capacity(if counted { iters as usize } else { 0 });
    let mut last = Instant::now();
    loop {
        if phase_of(clock.as_ref()) == Phase::End {
            break;
        }
        if let Some(t) = tally {
            // Several QPs run infinitely: the caller prints their sum.
            t.add(rcnt - period_rcnt)?;
            period_rcnt = rcnt;
        } else if let Mode::Infinite { period } = plan.mode
            && period_start.elapsed() >= Duration::from_secs(period)
        {
            let now = Instant::now();
            let r = infinite_report(plan, size, rcnt - period_rcnt, now - period_start);
            bw_line(out, plan, &r)?;
            out.flush()?;
            (period_start, period_rcnt) = (now, rcnt);
        }
        while owed > 0 {
            d.post_recv()?;
            owed -= 1;
        }
        while let Some(wc) = d.scq.poll_one() {
            if !wc.status.is_success() {
                return fail(format!("credit write failed: {wc}"));
            }
            credits_out = credits_out.saturating_sub(1);
        }
        if credit_due && owed == 0 && credits_out < plan.tx_depth.max(8) && d.post_credit(rcnt)? {
            credits_out += 1;
            credit_due = false;
        }
        if rcnt >= iters && owed == 0 && !credit_due {
            break;
        }
        d.kick(rnic);
        let wc = if rcnt < iters { d.rcq.poll_one() } else { None };
        let Some(wc) = wc else {
            if last.elapsed() > TIMEOUT {
                return fail(format!("send-bw: only {rcnt} of {iters} messages arrived"));
            }
            if matches!(d.qp.state(), QpState::Error | QpState::Terminate) {
                return fail("send-bw: the connection broke");
            }
            if d.manual || start.is_some() {
                std::thread::yield_now();
            } else {
                sleep_on(&d.rcq, d.events.as_ref(), Duration::from_millis(1));
            }
            continue;
        };
        if !wc.status.is_success() {
            return fail(format!("receive failed: {wc}"));
        }
        last = Instant::now();
        start.get_or_insert(last);
        if counted {
            stamps.push(last);
        } else if clock.is_none() {
            clock = Clock::of(plan.mode);
        }
        if phase_of(clock.as_ref()) == Phase::Sample && clock.is_some() {
            sampled += 1;
        }
        rcnt += 1;
        d.rq_out = d.rq_out.saturating_sub(1);
        if posted < iters {
            owed += 1;
            posted += 1;
        }
        if (rcnt % plan.rx_depth).is_multiple_of(credit_every) {
            credit_due = true;
        }
    }
    while credits_out > 0 {
        d.wait(rnic, &d.scq, "credit write")?;
        credits_out -= 1;
    }
    let first = start.unwrap_or(last);
    if let Some(c) = clock {
        return Ok((
            bw_report(plan.gbits, size, sampled, c.sample(), None),
            Timing {
                start: first,
                end: last,
                stamps,
            },
        ));
    }
    let total = last.duration_since(first);
    // As perftest's receiver reports it: every message, timed from the first receive to
    // the last.
    let n = iters;
    let after_first = stamps.get(1..).unwrap_or(&[]).to_vec();
    let pk = peak(&after_first, first, size, plan.tx_depth as usize);
    Ok((
        bw_report(plan.gbits, size, n, total, (!plan.no_peak).then_some(pk)),
        Timing {
            start: first,
            end: last,
            stamps: after_first,
        },
    ))
}

/// send-bw -b (perftest's `run_iter_bi`): each side sends within the peer's credit window
/// and receives, reposting receives and returning credits (RDMA Writes of its receive count,
/// told apart from its Sends by their completions' opcode) every `rx_depth / 3`. The client
/// starts at once, the server at its first receive (so it never sends into a client that
/// is not running yet). Ends when all Sends completed and all the peer's arrived, or with
/// -D when its clock, started at the same points, runs out. Returns the Sends' result.
fn send_bi(
    rnic: &Rnic,
    d: &mut Data,
    plan: &Plan,
    size: u64,
) -> Result<(BwReport, Timing), PerfError> {
    let counted = plan.mode == Mode::Iters;
    let iters = if counted { plan.iters } else { u64::MAX };
    let (depth, list, rx) = (plan.tx_depth, plan.post_list, plan.rx_depth);
    let credit_every = (rx / 3).max(1);
    let mut clock = if plan.client {
        Clock::of(plan.mode)
    } else {
        None
    };
    let mut sending = plan.client;
    let (mut posted, mut done, mut sampled) = (0u64, 0u64, 0u64);
    let mut reposted = d.rq_out.min(iters);
    let (mut rcnt, mut owed, mut credits_out, mut credit_due) = (0u64, 0u64, 0u64, false);
    let mut stamps: Vec<Instant> = Vec::with_capacity(if counted { iters as usize } else { 0 });
    let mut wcs = wc_batch();
    let mut start = Instant::now();
    let mut last_progress = Instant::now();
    loop {
        let phase = phase_of(clock.as_ref());
        if phase == Phase::End || (counted && done >= iters && rcnt >= iters && owed == 0) {
            break;
        }
        // Receives first: reposts, then a due credit.
        while owed > 0 {
            d.post_recv()?;
            owed -= 1;
        }
        if credit_due && credits_out < 8 && d.post_credit(rcnt)? {
            credits_out += 1;
            credit_due = false;
        }
        while sending && posted < iters && posted - done + list <= depth {
            let window = (posted as u32)
                .wrapping_add(list as u32)
                .wrapping_sub(d.credit()?);
            if u64::from(window) >= rx {
                break;
            }
            let wr = |i: u64| {
                let wr = SendWr::send(i, vec![d.src(size)]);
                if signaled(i, plan.cq_mod, iters) {
                    wr
                } else {
                    wr.unsignaled()
                }
            };
            d.qp.post_send_batch((posted..posted + list).map(wr))
                .map_err(|(_, e)| e)?;
            posted += list;
        }
        d.kick(rnic);
        let mut progress = false;
        while let Some(wc) = if rcnt < iters { d.rcq.poll_one() } else { None } {
            if !wc.status.is_success() {
                return fail(format!("receive failed: {wc}"));
            }
            progress = true;
            if !sending {
                // The server sends once the client is running, and times from then.
                sending = true;
                start = Instant::now();
                clock = Clock::of(plan.mode);
            }
            rcnt += 1;
            d.rq_out = d.rq_out.saturating_sub(1);
            if reposted < iters {
                owed += 1;
                reposted += 1;
            }
            if (rcnt % rx).is_multiple_of(credit_every) {
                credit_due = true;
            }
        }
        let n = d.scq.poll(&mut wcs);
        for wc in wcs.iter().take(n) {
            if !wc.status.is_success() {
                return fail(format!("work request failed: {wc}"));
            }
            progress = true;
            if wc.opcode == stack::WcOpcode::RdmaWrite {
                credits_out = credits_out.saturating_sub(1);
                continue;
            }
            let upto = (wc.wr_id + 1).clamp(done, posted);
            if counted {
                let now = Instant::now();
                for _ in done..upto {
                    stamps.push(now);
                }
            } else if phase == Phase::Sample {
                sampled += upto - done;
            }
            done = upto;
        }
        if progress {
            last_progress = Instant::now();
        } else {
            if last_progress.elapsed() > TIMEOUT {
                return fail(format!(
                    "send-bw -b: stalled ({done} Sends completed, {rcnt} received)"
                ));
            }
            if matches!(d.qp.state(), QpState::Error | QpState::Terminate) {
                return fail("send-bw -b: the connection broke");
            }
            std::thread::yield_now();
        }
    }
    let end = stamps.last().copied().unwrap_or(start);
    let report = match clock {
        Some(c) if !counted => bw_report(plan.gbits, size, sampled, c.sample(), None),
        _ => {
            let pk = peak(&stamps, start, size, depth as usize);
            bw_report(
                plan.gbits,
                size,
                iters,
                end.duration_since(start),
                (!plan.no_peak).then_some(pk),
            )
        }
    };
    Ok((report, Timing { start, end, stamps }))
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

/// What a latency run measured: the post times (iterations) or the transactions completed
/// in a -D run's window.
struct LatRun {
    posts: Vec<Instant>,
    sampled: u64,
}

/// The iterations of a latency run (none: until its clock runs out) and its clock.
fn lat_bounds(plan: &Plan) -> (u64, Option<Clock>) {
    match plan.mode {
        Mode::Iters => (plan.iters, None),
        _ => (u64::MAX, Clock::of(plan.mode)),
    }
}

/// Waits for a completion on `cq` until `clock` runs out (`None` then): the -D runs of the
/// ping-pongs, whose peer may stop first.
fn wait_or_end(
    rnic: &Rnic,
    d: &Data,
    cq: &Cq,
    clock: Option<&Clock>,
    what: &str,
) -> Result<Option<Wc>, PerfError> {
    if clock.is_none() {
        return d.wait(rnic, cq, what).map(Some);
    }
    let start = Instant::now();
    loop {
        d.assist(rnic);
        if let Some(wc) = cq.poll_one() {
            if !wc.status.is_success() {
                return fail(format!("{what}: work request failed: {wc}"));
            }
            return Ok(Some(wc));
        }
        if phase_of(clock) == Phase::End {
            return Ok(None);
        }
        if matches!(d.qp.state(), QpState::Error | QpState::Terminate) {
            return fail(format!("{what}: the connection broke"));
        }
        if start.elapsed() > TIMEOUT {
            return fail(format!("{what}: nothing within {} s", TIMEOUT.as_secs()));
        }
        std::thread::yield_now();
    }
}

/// write-lat: the server writes first; each side waits for the peer's count in the last
/// octet of its area, then writes its own. Returns the post times.
fn write_lat(rnic: &Rnic, d: &mut Data, plan: &Plan, size: u64) -> Result<LatRun, PerfError> {
    let (iters, clock) = lat_bounds(plan);
    let counted = clock.is_none();
    let poll_at = (d.area + size - 1) as usize;
    let post_at = (size - 1) as usize;
    let mut run = LatRun {
        posts: Vec::with_capacity(if counted { iters as usize } else { 0 }),
        sampled: 0,
    };
    let (mut scnt, mut rcnt, mut ccnt) = (0u64, 0u64, 0u64);
    while scnt < iters || ccnt < iters || rcnt < iters {
        if phase_of(clock.as_ref()) == Phase::End {
            break;
        }
        // The server writes first.
        if rcnt < iters && (plan.client || scnt >= 1) {
            rcnt += 1;
            let want = rcnt as u8;
            let start = Instant::now();
            let mut b = [0u8];
            let mut spins = 0u32;
            loop {
                d.assist(rnic);
                d.buf.buf().read_at(poll_at, &mut b)?;
                if b[0] == want {
                    break;
                }
                spins += 1;
                if spins > 4096 {
                    spins = 0;
                    if let Some(wc) = d.scq.poll_one() {
                        if !wc.status.is_success() {
                            return fail(format!("work request failed: {wc}"));
                        }
                        ccnt += 1;
                    }
                    if phase_of(clock.as_ref()) == Phase::End {
                        // The peer stopped first: its clock ran out before ours.
                        return Ok(run);
                    }
                    if start.elapsed() > TIMEOUT {
                        return fail("write-lat: the peer's write did not arrive");
                    }
                }
                std::thread::yield_now();
            }
        }
        if scnt < iters {
            if counted {
                run.posts.push(Instant::now());
            }
            scnt += 1;
            d.buf.buf().write_at(post_at, &[scnt as u8])?;
            d.qp.post_send(SendWr::write(
                scnt,
                vec![d.src(size)],
                d.remote.rkey,
                d.remote.vaddr,
            ))?;
        }
        if ccnt < scnt {
            if let Err(e) = d.wait(rnic, &d.scq, "write-lat") {
                let p2p = d.qp.session().is_some_and(|s| s.p2p());
                if !plan.client && ccnt == 0 && !p2p {
                    return fail(format!(
                        "{e}: as MPA responder our first RDMA Write waits for the client's \
                         first FPDU (RFC 5044 §7.1.2), and a perftest ib_write_lat client \
                         sends nothing first. Remedy: MPA peer-to-peer mode, where the \
                         client's RTR opens the stream (RFC 6581): enable P2P on the client \
                         (siw: peer_to_peer, rtr_type Write or Read; softrnic: --p2p --rtr \
                         write) and give this server --p2p; or run softrnic as the \
                         write-lat client"
                    ));
                }
                return Err(e);
            }
            ccnt += 1;
            if clock.is_some() && phase_of(clock.as_ref()) == Phase::Sample {
                run.sampled += 1;
            }
        }
    }
    Ok(run)
}

/// send-lat: the client sends first; each side answers a received message.
fn send_lat(rnic: &Rnic, d: &mut Data, plan: &Plan, size: u64) -> Result<LatRun, PerfError> {
    let (iters, clock) = lat_bounds(plan);
    let counted = clock.is_none();
    let mut run = LatRun {
        posts: Vec::with_capacity(if counted { iters as usize } else { 0 }),
        sampled: 0,
    };
    let mut posted = d.rq_out.min(iters);
    let (mut scnt, mut rcnt) = (0u64, 0u64);
    while scnt < iters || rcnt < iters {
        // The client sends first.
        if rcnt < iters && (!plan.client || scnt >= 1) {
            if wait_or_end(rnic, d, &d.rcq, clock.as_ref(), "send-lat")?.is_none() {
                break;
            }
            rcnt += 1;
            d.rq_out = d.rq_out.saturating_sub(1);
            if posted < iters {
                d.post_recv()?;
                posted += 1;
            }
        }
        if phase_of(clock.as_ref()) == Phase::End {
            break;
        }
        if scnt < iters {
            if counted {
                run.posts.push(Instant::now());
            }
            scnt += 1;
            d.qp.post_send(SendWr::send(scnt, vec![d.src(size)]))?;
            d.wait(rnic, &d.scq, "send-lat")?;
            if clock.is_some() && phase_of(clock.as_ref()) == Phase::Sample {
                run.sampled += 1;
            }
        }
    }
    Ok(run)
}

/// read-lat: one RDMA Read at a time from the peer's buffer (atomic-lat: one atomic at a time
/// on its first word).
fn read_lat(rnic: &Rnic, d: &mut Data, plan: &Plan, size: u64) -> Result<LatRun, PerfError> {
    let (iters, clock) = lat_bounds(plan);
    let counted = clock.is_none();
    let mut run = LatRun {
        posts: Vec::with_capacity(if counted { iters as usize } else { 0 }),
        sampled: 0,
    };
    for i in 0..iters {
        if phase_of(clock.as_ref()) == Phase::End {
            break;
        }
        if counted {
            run.posts.push(Instant::now());
        }
        let wr = if plan.test.atomics() {
            // Latency tests keep to one target (perftest steps addresses in BW tests only).
            d.atomic_wr(i, plan, 0)
        } else {
            SendWr::read(i, vec![d.src(size)], d.remote.rkey, d.remote.vaddr)
        };
        d.qp.post_send(wr)?;
        d.wait(rnic, &d.scq, plan.test.name())?;
        if clock.is_some() && phase_of(clock.as_ref()) == Phase::Sample {
            run.sampled += 1;
        }
    }
    Ok(run)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `pingpong_dest` that siw's ib_write_bw sent (lab capture
    /// tests/data/golden/lab-siw-perftest-ooo-reply.pcap, frame 207, the 56-octet Send).
    const SIW_DEST: &str = "00000000 00000001 00000002 00e3040b 6a3fdf00 00000000 000055b7a6cef000 52540099000300000000000000000000 00000000 00000000";

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn pingpong_dest_from_a_real_perftest_peer() {
        let b = hex(SIW_DEST);
        assert_eq!(b.len(), DEST_LEN);
        let d = Dest::parse(&b).unwrap();
        assert_eq!(d.out_reads, 1);
        assert_eq!(d.qpn, 2);
        assert_eq!(d.psn, 0xe3040b);
        assert_eq!(d.rkey, 0x6a3f_df00);
        assert_eq!(d.vaddr, 0x55b7_a6ce_f000);
        assert_eq!(&d.gid[..6], &[0x52, 0x54, 0x00, 0x99, 0x00, 0x03]);
        // And back, octet for octet.
        assert_eq!(d.to_bytes().to_vec(), b);
        assert!(Dest::parse(&b[..55]).is_none());
    }

    /// The data buffer's rights follow perftest's registration over iWARP: a Read test's
    /// buffer takes remote reads and writes, a Write test's remote writes only, a Send
    /// test's none.
    #[test]
    fn buffer_rights_by_verb_as_perftest_registers_them() {
        let w = buffer_access(Test::WriteBw);
        assert!(w.contains(Access::REMOTE_WRITE) && !w.contains(Access::REMOTE_READ));
        assert_eq!(buffer_access(Test::WriteLat), w);
        let r = buffer_access(Test::ReadBw);
        assert!(r.contains(Access::REMOTE_READ | Access::REMOTE_WRITE));
        assert_eq!(buffer_access(Test::ReadLat), r);
        let s = buffer_access(Test::SendBw);
        assert!(!s.contains(Access::REMOTE_READ) && !s.contains(Access::REMOTE_WRITE));
        // Atomics: remote atomic access only, beside local write (RFC 7306 §5: the
        // responder checks the STag grants atomic access).
        assert_eq!(
            buffer_access(Test::AtomicBw),
            Access::LOCAL_WRITE | Access::REMOTE_ATOMIC
        );
        assert_eq!(
            buffer_access(Test::AtomicLat),
            buffer_access(Test::AtomicBw)
        );
    }

    #[test]
    fn version_field_as_perftest_reads_it() {
        // Frame 180 of the same capture: "6.06" NUL-padded to 16 octets.
        let b = hex("362e3036000000000000000000000000");
        assert_eq!(version_bytes("6.06").to_vec(), b);
        assert!((parse_version(&b) - 6.06).abs() < 1e-9);
        assert_eq!(parse_version(b"5.70abc\0"), 5.70);
        assert_eq!(parse_version(b"\0"), 0.0);
        assert_eq!(parse_version(b"x1"), 0.0);
    }

    #[test]
    fn c_style_hex_matches_printf() {
        assert_eq!(c_hex(0, 4), "0000");
        assert_eq!(c_hex(2, 6), "0x0002");
        assert_eq!(c_hex(0xe3040b, 6), "0xe3040b");
        assert_eq!(c_hex(0x55b7a6cef000, 16), "0x0055b7a6cef000");
    }

    #[test]
    fn c_style_g_matches_printf() {
        for (v, want) in [
            (52.333, "52.333"),
            (34.64651, "34.6465"),
            (85591.94, "85591.9"),
            (110421.3, "110421"),
            (1234567.0, "1.23457e+06"),
            (0.00001234, "1.234e-05"),
            (0.5, "0.5"),
            (2.0, "2"),
        ] {
            assert_eq!(c_g(v), want, "{v}");
        }
    }

    #[test]
    fn cpu_frequency_from_cpuinfo() {
        let info = "processor\t: 0\nmodel name\t: x\ncpu MHz\t\t: 2596.132\ncache size\t: 1 KB\n\nprocessor\t: 1\ncpu MHz\t\t: 1200.000\n";
        assert_eq!(cpu_mhz(info), Some(2596.132));
        assert_eq!(cpu_mhz("processor\t: 0\n"), None);
        assert_eq!(cpu_mhz("cpu MHz\t: 0\n"), None);
    }

    /// Every perftest option the tools refuse is unknown to their parser (so it reaches
    /// the refusal, never an implementation) and has a message naming it.
    #[test]
    fn unimplemented_perftest_options_are_refused_by_name() {
        #[derive(clap::Parser, Debug)]
        struct P {
            #[command(flatten)]
            _a: PerfArgs,
        }
        for (short, long, _) in NOT_IMPLEMENTED {
            for name in [short, long].into_iter().filter(|n| !n.is_empty()) {
                let e = <P as clap::Parser>::try_parse_from(["x", "127.0.0.1", name, "1"])
                    .expect_err(name);
                assert_eq!(e.kind(), clap::error::ErrorKind::UnknownArgument, "{name}");
                let arg = e
                    .get(clap::error::ContextKind::InvalidArg)
                    .unwrap()
                    .to_string();
                let msg = refusal(&arg).unwrap_or_else(|| panic!("{name}: {arg}"));
                assert!(
                    msg.contains(name) && msg.contains("not implemented"),
                    "{msg}"
                );
            }
        }
        assert!(refusal("--tos=4").unwrap().contains("-T/--tos"));
        assert!(refusal("-X4").unwrap().contains("-X/--vector"));
        // -q is implemented.
        assert_eq!(refusal("-q4"), None);
        assert_eq!(refusal("--qp=4"), None);
        assert_eq!(refusal("--bogus"), None);
        assert_eq!(refusal("-s"), None);
    }

    /// perftest's moderation: every Nth request and the last are signaled.
    #[test]
    fn cq_moderation_signals_every_nth_and_the_last() {
        let on: Vec<u64> = (0..10).filter(|&i| signaled(i, 4, 10)).collect();
        assert_eq!(on, [3, 7, 9]);
        assert!((0..5).all(|i| signaled(i, 1, 5)));
    }

    /// The tools' options as parsed from `extra`.
    fn a(extra: &[&str]) -> PerfArgs {
        #[derive(clap::Parser)]
        struct P {
            #[command(flatten)]
            a: PerfArgs,
        }
        let mut v = vec!["x"];
        v.extend_from_slice(extra);
        <P as clap::Parser>::parse_from(v).a
    }

    #[test]
    fn rx_depth_follows_perftest() {
        let p = Plan::new(Test::SendBw, &a(&["-n", "5"])).unwrap();
        assert_eq!((p.rx_depth, p.tx_depth), (6, 5));
        let p = Plan::new(Test::SendBw, &a(&["-n", "5", "-a"])).unwrap();
        assert_eq!(p.rx_depth, 5);
        let p = Plan::new(Test::SendBw, &a(&[])).unwrap();
        assert_eq!(
            (p.rx_depth, p.tx_depth, p.iters, p.cq_mod),
            (512, 128, 5000, 100)
        );
        let p = Plan::new(Test::WriteBw, &a(&["-t", "16", "-Q", "64"])).unwrap();
        assert_eq!(p.cq_mod, 16, "CQ moderation is at most the TX depth");
        let p = Plan::new(Test::WriteLat, &a(&["-Q", "8"])).unwrap();
        assert_eq!(p.cq_mod, 1, "latency tests signal every request");
        let p = Plan::new(Test::WriteLat, &a(&["-R", "-F", "-d", "siw0", "-x", "3"])).unwrap();
        assert_eq!((p.size, p.iters, p.tx_depth), (2, 1000, 1));
        assert!(Plan::new(Test::WriteLat, &a(&["-c", "UD"])).is_err());
    }

    /// Zero and out-of-range depths are usage errors naming the option, never clamped.
    #[test]
    fn zero_and_huge_depths_are_refused() {
        for (flag, v) in [
            ("-t", "0"),
            ("-t", "16385"),
            ("-r", "0"),
            ("-r", "4000000000"),
            ("-Q", "0"),
            ("-o", "0"),
            ("-o", "16384"),
        ] {
            match Plan::new(Test::ReadBw, &a(&[flag, v])) {
                Err(PerfError::Usage(m)) => {
                    assert!(m.starts_with(&format!("{flag} {v}:")), "{m}");
                }
                Err(e) => panic!("{flag} {v}: {e}"),
                Ok(_) => panic!("{flag} {v} accepted"),
            }
        }
        let p = Plan::new(
            Test::ReadBw,
            &a(&["-t", "16384", "-r", "16384", "-o", "16383"]),
        )
        .unwrap();
        assert_eq!((p.tx_depth, p.rx_depth, p.outs), (5000, 5000, 16383));
    }
}
