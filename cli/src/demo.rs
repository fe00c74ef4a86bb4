//! `softrnic demo`: two RNICs in one process talking iWARP over loopback.
//!
//! The demo needs no setup and no privileges. It opens two [`Rnic`]s (each with its own
//! progress thread), connects them through 127.0.0.1 — MPA over kernel TCP on an ephemeral
//! port with full MPA setup, or (`--transport sctp`) DDP over softrnic's own SCTP (RFC 5043)
//! with RFC 6951 UDP encapsulation on an ephemeral UDP port, or (`--transport sctp-raw`,
//! root) SCTP directly on IPv4, or (`--transport dev`) MPA over softrnic's own TCP/IP on
//! two raw-Ethernet devices joined by an in-process cable (the kernel bypass path, without
//! a TAP device or privileges) — registers memory and runs every kind of operation,
//! verifying every byte:
//!
//! 1. Send / Receive, 64 KiB messages;
//! 2. RDMA Write, 4 MiB messages;
//! 3. RDMA Read, 4 MiB messages;
//! 4. atomic Fetch and Add (many, checking the running sum) and Compare and Swap (a
//!    matching and a failing compare);
//! 5. fast registration (and a stale key refused) and memory windows;
//! 6. a shared receive queue: three more QPs whose receives all come from one SRQ, with
//!    its limit event;
//! 7. completion events: a CQ on a completion channel, the receiver sleeping on the
//!    channel's file descriptor instead of polling;
//! 8. Send with Invalidate of the target's STag, then an RDMA Write to that STag, which the
//!    target must refuse with a DDP Tagged Buffer "Invalid STag" Terminate (RFC 5041 §7.2,
//!    RFC 5040 §7) — the connection then ends, as the protocol requires.
//!
//! A table of what ran follows (operations, bytes, time, MB/s and µs per operation).

use std::fmt;
use std::io::Write;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use stack::addr::TransportAddr;
use stack::ddp::{DdpCode, TaggedCode};
use stack::mpa;
use stack::rdmap::TermCause;
use stack::{
    Access, Addressing, Arm, CompletionChannel, Cq, Event, FastRegRegion, MemoryRegion, MrOptions,
    MwType, Pd, Qp, QpAttr, RecvWr, RegisteredBuf, Rnic, RnicConfig, SendOp, SendWr, Srq, Wc,
    WcOpcode, WcStatus,
};

/// How long the demo waits for any one thing (a connection, a completion, an event): long
/// enough for a heavily loaded machine, where every operation is slow, to count as slow and
/// not as failed (the table shows the time each operation took).
const TIMEOUT: Duration = Duration::from_secs(30);

/// The lower layer the demo runs over.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum DemoTransport {
    /// MPA over the kernel's TCP.
    #[default]
    Tcp,
    /// DDP over softrnic's SCTP with UDP encapsulation (RFC 5043 + RFC 6951): no privileges.
    Sctp,
    /// DDP over softrnic's SCTP directly on IPv4 (protocol 132): needs root or CAP_NET_RAW
    /// and a host without kernel SCTP.
    SctpRaw,
    /// MPA over softrnic's own TCP/IP on two raw-Ethernet devices joined by an in-process
    /// cable (10.99.0.1 and 10.99.0.2, MTU `--mtu`): no privileges.
    Dev,
}

/// `softrnic demo` options.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct DemoArgs {
    /// Lower layer: `tcp` (MPA over kernel TCP), `sctp` (softrnic's SCTP over UDP),
    /// `sctp-raw` (softrnic's SCTP over raw IPv4, root) or `dev` (softrnic's own TCP/IP on
    /// an in-process Ethernet cable).
    #[arg(long, value_enum, default_value_t = DemoTransport::Tcp)]
    pub transport: DemoTransport,
    /// Path MTU for SCTP (DDP segments are sized to fit it, RFC 5043 §9) and the device MTU
    /// of `dev`: 576-65535.
    #[arg(long, default_value_t = 1500, value_parser = clap::value_parser!(u16).range(576..))]
    pub mtu: u16,
}

/// One row of the demo's table.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// What ran.
    pub op: &'static str,
    /// Operations completed.
    pub ops: u64,
    /// Payload bytes moved.
    pub bytes: u64,
    /// Wall time.
    pub time: Duration,
    /// Whether every byte / value checked out.
    pub verified: bool,
    /// A note (e.g. the Terminate seen).
    pub note: String,
}

/// Everything that ran.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// The rows, in order.
    pub rows: Vec<Row>,
}

impl Report {
    /// Whether every row verified.
    pub fn ok(&self) -> bool {
        !self.rows.is_empty() && self.rows.iter().all(|r| r.verified)
    }
}

/// Why the demo stopped.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// The runtime failed.
    #[error("RNIC: {0}")]
    Rnic(#[from] stack::RnicError),
    /// Memory registration failed.
    #[error("memory registration: {0}")]
    Mem(#[from] stack::MemError),
    /// A work request was refused.
    #[error("posting a work request: {0}")]
    Post(#[from] stack::PostError),
    /// Something did not happen in time or went wrong.
    #[error("{0}")]
    Failed(String),
}

struct Side {
    rnic: Rnic,
    pd: Pd,
    cq: Cq,
    qp: Qp,
}

impl Side {
    fn open() -> Result<Side, DemoError> {
        let rnic = Rnic::open(RnicConfig::default())?;
        let pd = rnic.alloc_pd();
        let cq = Cq::new(4096);
        let mut attr = QpAttr::new(pd, cq.clone(), cq.clone());
        attr.sq_depth = 512;
        attr.rq_depth = 512;
        let qp = rnic.create_qp(attr)?;
        Ok(Side { rnic, pd, cq, qp })
    }

    fn mr(&self, len: usize) -> Result<MemoryRegion, DemoError> {
        let access = Access::LOCAL_WRITE
            | Access::REMOTE_READ
            | Access::REMOTE_WRITE
            | Access::REMOTE_ATOMIC;
        Ok(self
            .rnic
            .mem()
            .register_new(self.pd, len, MrOptions::new(access))?)
    }

    /// Waits for the next completion; errors unless it succeeded with `wr_id`.
    fn expect(&self, wr_id: u64) -> Result<Wc, DemoError> {
        let wc = wait_wc(&self.cq)?;
        if wc.wr_id != wr_id || !wc.status.is_success() {
            return Err(DemoError::Failed(format!(
                "expected work request {wr_id} to succeed, got {wc}"
            )));
        }
        Ok(wc)
    }
}

fn wait_wc(cq: &Cq) -> Result<Wc, DemoError> {
    let start = Instant::now();
    loop {
        if let Some(wc) = cq.poll_one() {
            return Ok(wc);
        }
        if start.elapsed() > TIMEOUT {
            return Err(DemoError::Failed(format!(
                "no completion within {} s",
                TIMEOUT.as_secs()
            )));
        }
        cq.wait(Duration::from_millis(50));
    }
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(29).wrapping_add(seed) ^ (i >> 8) as u8)
        .collect()
}

fn connect(args: &DemoArgs) -> Result<(Side, Side, TransportAddr), DemoError> {
    let a = Side::open()?;
    let b = Side::open()?;
    let at: TransportAddr = match args.transport {
        DemoTransport::Tcp => SocketAddr::from(([127, 0, 0, 1], 0)).into(),
        // The SCTP port is fixed; the UDP port is an ephemeral one.
        DemoTransport::Sctp => format!("sctp+udp://127.0.0.1:7174?udp-port=0&mtu={}", args.mtu)
            .parse()
            .map_err(|e| DemoError::Failed(format!("{e}")))?,
        DemoTransport::SctpRaw => format!("sctp://127.0.0.1:7174?mtu={}", args.mtu)
            .parse()
            .map_err(|e| DemoError::Failed(format!("{e}")))?,
        DemoTransport::Dev => {
            let (la, lb) = stack::device::Link::datagram_pair().map_err(stack::RnicError::from)?;
            for (side, link, ip) in [(&a, la, [10, 99, 0, 1]), (&b, lb, [10, 99, 0, 2])] {
                let mut cfg = stack::device::DeviceConfig::new(ip.into(), 24);
                cfg.mtu = Some(usize::from(args.mtu));
                side.rnic.attach_device("cable0", link, &cfg)?;
            }
            "dev://cable0/10.99.0.2:7174"
                .parse()
                .map_err(|e| DemoError::Failed(format!("{e}")))?
        }
    };
    let l = b.rnic.listen_on(&at)?;
    pair_up(&a.rnic, &a.qp, &b.rnic, &b.qp, &l)?;
    Ok((a, b, at))
}

/// Connects `qa` of RNIC `ra` to `qb` of `rb` through `rb`'s listener `l`.
fn pair_up(ra: &Rnic, qa: &Qp, rb: &Rnic, qb: &Qp, l: &stack::Listener) -> Result<(), DemoError> {
    let cfg_a = mpa::Config {
        ird: 16,
        ord: 16,
        ird_max: 16,
        ..mpa::Config::default()
    };
    let cfg_b = cfg_a.clone();
    let accepted = std::thread::scope(|s| {
        let h = s.spawn(|| rb.accept_blocking(l, qb, cfg_b, TIMEOUT));
        let c = ra.connect_to_blocking(qa, &l.transport, cfg_a, TIMEOUT);
        (c, h.join())
    });
    match accepted {
        (Ok(_), Ok(Ok(_))) => Ok(()),
        (Err(e), _) | (_, Ok(Err(e))) => Err(e.into()),
        (_, Err(_)) => Err(DemoError::Failed("accept thread panicked".into())),
    }
}

/// The demo's transport address on another port, for the extra connections of the SRQ and
/// completion-event rows.
fn on_port(at: &TransportAddr, port: u16) -> TransportAddr {
    let mut at = at.clone();
    match &mut at {
        TransportAddr::Tcp(a) => a.set_port(0),
        TransportAddr::Sctp(s) => s.port = port,
        TransportAddr::Dev(d) => d.addr.set_port(port),
    }
    at
}

/// `softrnic demo`: runs the demo, prints the table, returns the exit status (0 when
/// everything verified, 1 otherwise).
pub fn run_command(args: &DemoArgs, out: &mut dyn Write) -> std::process::ExitCode {
    match run(args, out) {
        Ok(report) => {
            let _ = write!(out, "{report}");
            if report.ok() {
                let _ = writeln!(out, "all operations verified");
                std::process::ExitCode::SUCCESS
            } else {
                let _ = writeln!(out, "VERIFICATION FAILED");
                std::process::ExitCode::from(1)
            }
        }
        Err(e) => {
            let _ = out.flush();
            eprintln!("softrnic demo: {e}");
            std::process::ExitCode::from(1)
        }
    }
}

/// Runs the demo, printing progress lines to `out`.
pub fn run(args: &DemoArgs, out: &mut dyn Write) -> Result<Report, DemoError> {
    let mut report = Report::default();
    let (a, b, at) = connect(args)?;
    if let Some(s) = a.qp.session() {
        let _ = match (s.mpa(), s.sctp()) {
            (Some(m), _) => writeln!(
                out,
                "connected over {}: MPA/TCP rev {}, CRC {}, markers {}, IRD {} ORD {}, MULPDU {}",
                if args.transport == DemoTransport::Dev {
                    "softrnic's own TCP/IP on an in-process Ethernet cable"
                } else {
                    "loopback"
                },
                m.revision,
                if m.crc { "on" } else { "off" },
                if m.markers_tx { "on" } else { "off" },
                s.ird,
                s.ord,
                a.qp.mulpdu()
            ),
            (_, Some(c)) => writeln!(
                out,
                "connected over loopback: DDP over SCTP (RFC 5043, {}), {} session setup, IRD {} ORD {}, largest DDP segment {}",
                match args.transport {
                    DemoTransport::SctpRaw => "raw IPv4",
                    _ => "UDP encapsulation",
                },
                if c.enhanced {
                    "RFC 6581 enhanced"
                } else {
                    "RFC 5043"
                },
                s.ird,
                s.ord,
                c.max_segment
            ),
            _ => Ok(()),
        };
    }

    let steps: [(&str, &Step); 10] = [
        ("Send/Receive", &|| send_recv(&a, &b)),
        ("RDMA Write", &|| rdma_write(&a, &b)),
        ("RDMA Read", &|| rdma_read(&a, &b)),
        ("Atomic Fetch&Add", &|| fetch_add(&a, &b)),
        ("Atomic Cmp&Swap", &|| cmp_swap(&a, &b)),
        ("Fast Register", &|| fast_register(&a, &b)),
        ("Memory windows", &|| memory_window(&a, &b)),
        ("Shared receive queue", &|| {
            shared_receive_queue(&a, &b, &on_port(&at, 7175))
        }),
        ("Completion events", &|| {
            completion_events(&a, &b, &on_port(&at, 7176))
        }),
        ("Send w/ Invalidate", &|| send_invalidate(&a, &b)),
    ];
    for (op, step) in steps {
        let row = step()
            .map_err(|e| DemoError::Failed(format!("{op}: {e}{}", device_report(args, &a, &b))))?;
        report.rows.push(row);
    }
    Ok(report)
}

/// One operation of the demo.
type Step<'a> = dyn Fn() -> Result<Row, DemoError> + 'a;

/// The device counters of both ends (`--transport dev`), for an error message: whether
/// frames were refused or waited for room tells a stalled stack from a lost frame.
fn device_report(args: &DemoArgs, a: &Side, b: &Side) -> String {
    if args.transport != DemoTransport::Dev {
        return String::new();
    }
    let mut s = String::new();
    for (name, side) in [("10.99.0.1", a), ("10.99.0.2", b)] {
        if let Some(d) = side.rnic.device_stats("cable0") {
            s += &format!(
                "; {name}: {} frames in, {} out, {} refused, queue full {} times, \
                 stack polled {} times",
                d.rx_frames, d.tx_frames, d.tx_dropped, d.tx_full, d.polls
            );
        }
    }
    s
}

fn send_recv(a: &Side, b: &Side) -> Result<Row, DemoError> {
    const SIZE: usize = 64 * 1024;
    const N: usize = 256;
    let src = a.mr(SIZE * N)?;
    let data = pattern(SIZE * N, 1);
    src.buf().write_at(0, &data)?;
    let dst = b.mr(SIZE * N)?;
    for i in 0..N {
        b.qp.post_recv(RecvWr::new(
            i as u64,
            vec![dst.sge((i * SIZE) as u64, SIZE as u32)],
        ))?;
    }
    let start = Instant::now();
    for i in 0..N {
        a.qp.post_send(SendWr::send(
            i as u64,
            vec![src.sge((i * SIZE) as u64, SIZE as u32)],
        ))?;
    }
    let mut verified = true;
    for i in 0..N {
        let wc = b.expect(i as u64)?;
        verified &= wc.byte_len as usize == SIZE;
    }
    let time = start.elapsed();
    for i in 0..N {
        a.expect(i as u64)?;
    }
    verified &= dst.buf().to_vec() == data;
    Ok(Row {
        op: "Send/Receive 64 KiB",
        ops: N as u64,
        bytes: (SIZE * N) as u64,
        time,
        verified,
        note: String::new(),
    })
}

/// Posts a Send of 8 bytes a→b and waits for it: orders what came before on the stream.
fn sync(a: &Side, b: &Side, id: u64) -> Result<(), DemoError> {
    let s = a.mr(8)?;
    let r = b.mr(8)?;
    b.qp.post_recv(RecvWr::new(id, vec![r.sge(0, 8)]))?;
    a.qp.post_send(SendWr::send(id, vec![s.sge(0, 8)]))?;
    a.expect(id)?;
    b.expect(id)?;
    Ok(())
}

fn rdma_write(a: &Side, b: &Side) -> Result<Row, DemoError> {
    const SIZE: usize = 4 << 20;
    const N: usize = 32;
    let src = a.mr(SIZE)?;
    let data = pattern(SIZE, 2);
    src.buf().write_at(0, &data)?;
    let sink = b.mr(SIZE)?;
    let start = Instant::now();
    for i in 0..N {
        a.qp.post_send(SendWr::write(
            100 + i as u64,
            vec![src.sge(0, SIZE as u32)],
            sink.stag(),
            sink.to_at(0),
        ))?;
    }
    for i in 0..N {
        a.expect(100 + i as u64)?;
    }
    sync(a, b, 999)?;
    let time = start.elapsed();
    Ok(Row {
        op: "RDMA Write 4 MiB",
        ops: N as u64,
        bytes: (SIZE * N) as u64,
        time,
        verified: sink.buf().to_vec() == data,
        note: String::new(),
    })
}

fn rdma_read(a: &Side, b: &Side) -> Result<Row, DemoError> {
    const SIZE: usize = 4 << 20;
    const N: usize = 32;
    let source = b.mr(SIZE)?;
    let data = pattern(SIZE, 3);
    source.buf().write_at(0, &data)?;
    let sink = a.mr(SIZE * 2)?;
    let mut time = Duration::ZERO;
    let mut verified = true;
    for i in 0..N {
        let off = ((i % 2) * SIZE) as u64;
        sink.buf().fill(0);
        // Timed: the Read itself, not the check of the bytes.
        let start = Instant::now();
        a.qp.post_send(SendWr::read(
            200 + i as u64,
            vec![sink.sge(off, SIZE as u32)],
            source.stag(),
            source.to_at(0),
        ))?;
        let wc = a.expect(200 + i as u64)?;
        time += start.elapsed();
        verified &= wc.byte_len as usize == SIZE;
        verified &= sink
            .buf()
            .read_range(off as usize..off as usize + SIZE)
            .is_ok_and(|v| v == data);
    }
    Ok(Row {
        op: "RDMA Read 4 MiB",
        ops: N as u64,
        bytes: (SIZE * N) as u64,
        time,
        verified,
        note: String::new(),
    })
}

fn read_u64(mr: &MemoryRegion, off: usize) -> Result<u64, DemoError> {
    let mut v = [0u8; 8];
    mr.buf().read_at(off, &mut v)?;
    Ok(u64::from_ne_bytes(v))
}

fn fetch_add(a: &Side, b: &Side) -> Result<Row, DemoError> {
    const N: u64 = 1000;
    let target = b.mr(64)?;
    target.buf().write_at(8, &1000u64.to_ne_bytes())?;
    let result = a.mr(8)?;
    let mut verified = true;
    let start = Instant::now();
    for i in 0..N {
        a.qp.post_send(SendWr::new(
            300 + i,
            SendOp::FetchAdd {
                remote_stag: target.stag(),
                remote_to: target.to_at(8),
                add: i,
                add_mask: 0,
            },
            vec![result.sge(0, 8)],
        ))?;
        a.expect(300 + i)?;
        // The original value: 1000 + 0 + 1 + … + (i − 1).
        verified &= read_u64(&result, 0)? == 1000 + i * i.saturating_sub(1) / 2;
    }
    let time = start.elapsed();
    verified &= read_u64(&target, 8)? == 1000 + N * (N - 1) / 2;
    Ok(Row {
        op: "Atomic Fetch&Add",
        ops: N,
        bytes: N * 8,
        time,
        verified,
        note: String::new(),
    })
}

fn cmp_swap(a: &Side, b: &Side) -> Result<Row, DemoError> {
    let target = b.mr(64)?;
    target.buf().write_at(16, &0xfeed_u64.to_ne_bytes())?;
    let result = a.mr(8)?;
    let start = Instant::now();
    let mut verified = true;
    for (i, (compare, swap, expect_after)) in [(0xfeed, 0xbeef, 0xbeef), (0x1234, 0x5678, 0xbeef)]
        .into_iter()
        .enumerate()
    {
        let before = read_u64(&target, 16)?;
        a.qp.post_send(SendWr::new(
            400 + i as u64,
            SendOp::CmpSwap {
                remote_stag: target.stag(),
                remote_to: target.to_at(16),
                compare,
                compare_mask: u64::MAX,
                swap,
                swap_mask: u64::MAX,
            },
            vec![result.sge(0, 8)],
        ))?;
        a.expect(400 + i as u64)?;
        verified &= read_u64(&result, 0)? == before;
        verified &= read_u64(&target, 16)? == expect_after;
    }
    Ok(Row {
        op: "Atomic Cmp&Swap",
        ops: 2,
        bytes: 16,
        time: start.elapsed(),
        verified,
        note: "one swap, one failed compare".into(),
    })
}

/// Fast registration on b: an STag with no memory gets a buffer through a Fast Register
/// work request, a's Write lands through it, a Local Invalidate work request ends it, and a
/// second Fast Register under a rotated key makes it usable again (the STag of the first use
/// names nothing from then on).
fn fast_register(a: &Side, b: &Side) -> Result<Row, DemoError> {
    const LEN: usize = 64 * 1024;
    let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
    let mem = b.rnic.mem();
    let buf = RegisteredBuf::try_new(LEN)?;
    let src = a.mr(LEN)?;
    let start = Instant::now();
    let first = mem.alloc_fast_reg(b.pd, LEN as u64)?;
    let mut verified = mem.query(first).is_some_and(|i| !i.valid);
    let mut stag = first;
    for (round, id) in [(0u8, 600u64), (1, 610)] {
        if round == 1 {
            // Rotate the consumer key: the low byte of the STag.
            stag = (first & !0xFF) | u32::from((first as u8).wrapping_add(1));
        }
        let region = FastRegRegion::new(&buf);
        let to = region.to_at(0);
        mem.map_fast_reg(b.pd, first, region)?;
        b.qp.post_send(SendWr::new(
            id,
            SendOp::FastRegister { stag, access },
            vec![],
        ))?;
        verified &= b.expect(id)?.opcode == WcOpcode::FastRegister;
        let data = pattern(LEN, 0x60 + round);
        src.buf().write_at(0, &data)?;
        a.qp.post_send(SendWr::write(
            id + 1,
            vec![src.sge(0, LEN as u32)],
            stag,
            to,
        ))?;
        a.expect(id + 1)?;
        // The Write is placed once the peer processed it: a Send behind it says so.
        sync(a, b, id + 2)?;
        verified &= buf.to_vec() == data;
        b.qp.post_send(SendWr::new(
            id + 3,
            SendOp::LocalInvalidate { stag },
            vec![],
        ))?;
        b.expect(id + 3)?;
        verified &= mem.query(stag).is_some_and(|i| !i.valid);
    }
    verified &= mem.query(first).is_none();
    Ok(Row {
        op: "Fast Register",
        ops: 2,
        bytes: 2 * LEN as u64,
        time: start.elapsed(),
        verified,
        note: format!("STag {first:#010x} -> {stag:#010x}: key rotated, old STag names nothing"),
    })
}

/// Memory windows on b: a Type 1 window exposes 16 KiB in the middle of a 64 KiB region,
/// zero-based and read-only, for a's RDMA Read; a Type 2 window, bound by a work request of
/// b's QP, takes a's RDMA Write and is then invalidated by a Local Invalidate; the region's
/// bytes outside the windows stay as they were.
fn memory_window(a: &Side, b: &Side) -> Result<Row, DemoError> {
    const LEN: usize = 64 * 1024;
    const WIN: u64 = 16 * 1024;
    let mem = b.rnic.mem();
    let rights = Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE | Access::MW_BIND;
    let region = mem.register_new(b.pd, LEN, MrOptions::new(rights))?;
    let before = pattern(LEN, 0x70);
    region.buf().write_at(0, &before)?;
    let start = Instant::now();
    // Type 1, read-only, zero-based: bytes 16 KiB .. 32 KiB of the region.
    let w1 = mem.alloc_mw(b.pd, MwType::Type1)?;
    mem.bind_mw(
        b.pd,
        None,
        w1,
        region.stag(),
        region.to_at(WIN),
        WIN,
        Access::REMOTE_READ,
        Addressing::ZeroBased,
    )?;
    let sink = a.mr(WIN as usize)?;
    a.qp.post_send(SendWr::read(700, vec![sink.sge(0, WIN as u32)], w1, 0))?;
    a.expect(700)?;
    let mut verified = sink.buf().to_vec() == before[WIN as usize..2 * WIN as usize];
    // Type 2, bound on b's send queue: bytes 32 KiB .. 48 KiB, VA-based, write-only.
    let w2 = mem.alloc_mw(b.pd, MwType::Type2)?;
    b.qp.post_send(SendWr::new(
        701,
        SendOp::BindWindow {
            mw: w2,
            region: region.stag(),
            to: region.to_at(2 * WIN),
            len: WIN,
            access: Access::REMOTE_WRITE,
            zero_based: false,
        },
        vec![],
    ))?;
    verified &= b.expect(701)?.opcode == WcOpcode::BindWindow;
    let data = pattern(WIN as usize, 0x71);
    let src = a.mr(WIN as usize)?;
    src.buf().write_at(0, &data)?;
    a.qp.post_send(SendWr::write(
        702,
        vec![src.sge(0, WIN as u32)],
        w2,
        region.to_at(2 * WIN),
    ))?;
    a.expect(702)?;
    sync(a, b, 703)?;
    b.qp.post_send(SendWr::new(
        704,
        SendOp::LocalInvalidate { stag: w2 },
        vec![],
    ))?;
    b.expect(704)?;
    let now = region.buf().to_vec();
    let (w, e) = (2 * WIN as usize, 3 * WIN as usize);
    verified &= now[w..e] == data[..] && now[..w] == before[..w] && now[e..] == before[e..];
    verified &= mem.query(w2).is_some_and(|i| !i.valid);
    // The Type 1 window is unbound (a bind of length 0, new key), then the region can go.
    let w1b = (w1 & !0xFF) | u32::from((w1 as u8).wrapping_add(1));
    mem.bind_mw(
        b.pd,
        None,
        w1b,
        region.stag(),
        region.to_at(0),
        0,
        Access::REMOTE_READ,
        Addressing::ZeroBased,
    )?;
    mem.deregister(w1b)?;
    mem.deregister(w2)?;
    mem.deregister(region.stag())?;
    Ok(Row {
        op: "Memory windows",
        ops: 2,
        bytes: 2 * WIN,
        time: start.elapsed(),
        verified,
        note: "Type 1 read-only Read; Type 2 bound by WR, Write, invalidated".into(),
    })
}

fn send_invalidate(a: &Side, b: &Side) -> Result<Row, DemoError> {
    let sink = b.mr(4096)?;
    let rbuf = b.mr(64)?;
    let src = a.mr(4096)?;
    src.buf().write_at(0, b"invalidate this")?;
    b.qp.post_recv(RecvWr::new(500, vec![rbuf.sge(0, 64)]))?;
    let start = Instant::now();
    a.qp.post_send(SendWr::new(
        500,
        SendOp::Send {
            solicited: false,
            invalidate: Some(sink.stag()),
        },
        vec![src.sge(0, 15)],
    ))?;
    let wc = b.expect(500)?;
    a.expect(500)?;
    let time = start.elapsed();
    let mut verified = wc.invalidated_stag == Some(sink.stag())
        && rbuf
            .buf()
            .read_range(0..15)
            .is_ok_and(|v| v == b"invalidate this");
    let invalid = b.rnic.mem().query(sink.stag()).is_some_and(|i| !i.valid);
    verified &= invalid;

    // The second Write to the STag must be refused by the target.
    a.qp.post_send(SendWr::write(
        501,
        vec![src.sge(0, 4096)],
        sink.stag(),
        sink.to_at(0),
    ))?;
    let expected = TermCause::Ddp(DdpCode::Tagged(TaggedCode::InvalidStag));
    let sent = wait_event(&b.rnic, |e| match e {
        Event::TerminateSent { terminate, .. } => Some(terminate.cause),
        _ => None,
    })?;
    let received = wait_event(&a.rnic, |e| match e {
        Event::TerminateReceived { terminate, .. } => Some(terminate.cause),
        _ => None,
    })?;
    verified &= sent == expected && received == expected;
    // Nothing of the refused Write was placed.
    verified &= sink.buf().to_vec().iter().all(|&x| x == 0);
    let wc = wait_wc(&a.cq)?;
    if wc.status != WcStatus::Success {
        verified &=
            wc.status == WcStatus::RemoteAccess && wc.term.is_some_and(|t| t.cause == expected);
    }
    Ok(Row {
        op: "Send w/ Invalidate",
        ops: 1,
        bytes: 15,
        time,
        verified,
        note: format!("STag invalid after; 2nd Write -> Terminate \"{received}\""),
    })
}

/// The first 8 bytes of message `id` carry `id`; the rest is a pattern of it.
fn tagged_message(id: u64, len: usize) -> Vec<u8> {
    let mut v = pattern(len, id as u8);
    v[..8].copy_from_slice(&id.to_be_bytes());
    v
}

/// Several QPs drawing their receives from one shared receive queue (RDMA Verbs; ibverbs'
/// SRQ): three more connections whose receiving QPs share one SRQ on b; every message lands
/// in a receive of the SRQ, each completion names the QP it arrived on, and the limit event
/// fires once as the SRQ runs low.
fn shared_receive_queue(a: &Side, b: &Side, at: &TransportAddr) -> Result<Row, DemoError> {
    const QPS: usize = 3;
    const MSGS: usize = 8;
    const SIZE: usize = 4096;
    const SPARE: usize = 4;
    let (cq_a, cq_b) = (Cq::new(256), Cq::new(256));
    let srq = Srq::new(b.pd, 64, 1);
    let sink = b.mr((QPS * MSGS + SPARE) * SIZE)?;
    for i in 0..QPS * MSGS + SPARE {
        srq.post_recv(RecvWr::new(
            i as u64,
            vec![sink.sge((i * SIZE) as u64, SIZE as u32)],
        ))?;
    }
    // Fires when a take leaves fewer than SPARE + 1 receives.
    srq.arm_limit(SPARE + 1);
    let l = b.rnic.listen_on(at)?;
    let mut pairs = Vec::new();
    for _ in 0..QPS {
        let qa = a
            .rnic
            .create_qp(QpAttr::new(a.pd, cq_a.clone(), cq_a.clone()))?;
        let mut attr = QpAttr::new(b.pd, cq_b.clone(), cq_b.clone());
        attr.srq = Some(srq.clone());
        let qb = b.rnic.create_qp(attr)?;
        pair_up(&a.rnic, &qa, &b.rnic, &qb, &l)?;
        pairs.push((qa, qb));
    }
    let src = a.mr(QPS * MSGS * SIZE)?;
    let start = Instant::now();
    for (k, (qa, _)) in pairs.iter().enumerate() {
        for m in 0..MSGS {
            let id = (k * MSGS + m) as u64;
            let off = id as usize * SIZE;
            src.buf().write_at(off, &tagged_message(id, SIZE))?;
            qa.post_send(SendWr::send(id, vec![src.sge(off as u64, SIZE as u32)]))?;
        }
    }
    let mut seen = [false; QPS * MSGS];
    let mut verified = true;
    for _ in 0..QPS * MSGS {
        let wc = wait_wc(&cq_b)?;
        let recv = usize::try_from(wc.wr_id).unwrap_or(usize::MAX);
        let data = sink.buf().to_vec();
        let Some(msg) = data.get(recv * SIZE..(recv + 1) * SIZE) else {
            return Err(DemoError::Failed(format!("unexpected completion {wc}")));
        };
        let id = u64::from_be_bytes(msg[..8].try_into().unwrap_or_default());
        let k = id as usize / MSGS;
        verified &= wc.status.is_success()
            && wc.byte_len as usize == SIZE
            && msg == tagged_message(id, SIZE).as_slice()
            && pairs.get(k).is_some_and(|(_, qb)| qb.id() == wc.qp)
            && !std::mem::replace(seen.get_mut(id as usize).unwrap_or(&mut true), true);
    }
    for _ in 0..QPS * MSGS {
        verified &= wait_wc(&cq_a)?.status.is_success();
    }
    let time = start.elapsed();
    let id = srq.id();
    wait_event(&b.rnic, |e| {
        matches!(e, Event::SrqLimitReached { srq, .. } if *srq == id).then_some(())
    })?;
    verified &= srq.len() == SPARE && seen.iter().all(|&s| s);
    Ok(Row {
        op: "Shared receive queue",
        ops: (QPS * MSGS) as u64,
        bytes: (QPS * MSGS * SIZE) as u64,
        time,
        verified,
        note: format!(
            "{QPS} QPs took {} receives from one SRQ; limit event with {SPARE} left",
            QPS * MSGS
        ),
    })
}

/// Completion events (RDMA Verbs "Request Completion Notification"; ibverbs' completion
/// channel): b's receive CQ is on a completion channel; b arms it, drains it, and sleeps in
/// `poll(2)` on the channel's file descriptor until the next completion, instead of spinning.
fn completion_events(a: &Side, b: &Side, at: &TransportAddr) -> Result<Row, DemoError> {
    const MSGS: usize = 64;
    const SIZE: usize = 1024;
    let channel = CompletionChannel::new().map_err(|e| DemoError::Failed(e.to_string()))?;
    let cq_a = Cq::new(256);
    let cq_b = Cq::with_channel(256, &channel);
    let qa = a
        .rnic
        .create_qp(QpAttr::new(a.pd, cq_a.clone(), cq_a.clone()))?;
    let qb = b
        .rnic
        .create_qp(QpAttr::new(b.pd, cq_b.clone(), cq_b.clone()))?;
    let l = b.rnic.listen_on(at)?;
    pair_up(&a.rnic, &qa, &b.rnic, &qb, &l)?;
    let sink = b.mr(MSGS * SIZE)?;
    for i in 0..MSGS {
        qb.post_recv(RecvWr::new(
            i as u64,
            vec![sink.sge((i * SIZE) as u64, SIZE as u32)],
        ))?;
    }
    let src = a.mr(MSGS * SIZE)?;
    let start = Instant::now();
    let sender = std::thread::scope(|s| {
        let h = s.spawn(|| -> Result<(), DemoError> {
            for i in 0..MSGS {
                src.buf()
                    .write_at(i * SIZE, &tagged_message(i as u64, SIZE))?;
                qa.post_send(SendWr::send(
                    i as u64,
                    vec![src.sge((i * SIZE) as u64, SIZE as u32)],
                ))?;
                // Spread out, so that the receiver sleeps between completions.
                if i % 8 == 7 {
                    std::thread::sleep(Duration::from_millis(2));
                }
            }
            for _ in 0..MSGS {
                wait_wc(&cq_a)?;
            }
            Ok(())
        });
        let mut got = Vec::new();
        let mut wakeups = 0u64;
        while got.len() < MSGS {
            // Arm first, then drain: a completion queued in between still signals.
            cq_b.arm(Arm::NextCompletion);
            while let Some(wc) = cq_b.poll_one() {
                got.push(wc);
            }
            if got.len() == MSGS {
                break;
            }
            if !channel.wait(TIMEOUT) {
                return Err(DemoError::Failed(format!(
                    "no completion event within {} s",
                    TIMEOUT.as_secs()
                )));
            }
            channel.get_events();
            wakeups += 1;
        }
        let sent = h
            .join()
            .map_err(|_| DemoError::Failed("sender panicked".into()))?;
        sent.map(|()| (got, wakeups))
    });
    let (got, wakeups) = sender?;
    let time = start.elapsed();
    let data = sink.buf().to_vec();
    let verified = got.iter().enumerate().all(|(i, wc)| {
        wc.status.is_success()
            && wc.wr_id == i as u64
            && data[i * SIZE..(i + 1) * SIZE] == tagged_message(i as u64, SIZE)[..]
    }) && wakeups >= 1
        && wakeups <= MSGS as u64;
    Ok(Row {
        op: "Completion events",
        ops: MSGS as u64,
        bytes: (MSGS * SIZE) as u64,
        time,
        verified,
        note: format!("receiver woke {wakeups} times on the channel's fd for {MSGS} receives"),
    })
}

fn wait_event<T>(rnic: &Rnic, mut pick: impl FnMut(&Event) -> Option<T>) -> Result<T, DemoError> {
    let start = Instant::now();
    while start.elapsed() < TIMEOUT {
        if let Some(e) = rnic.wait_event(Duration::from_millis(100))
            && let Some(v) = pick(&e)
        {
            return Ok(v);
        }
    }
    Err(DemoError::Failed("expected event did not arrive".into()))
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:<22} {:>6} {:>12} {:>10} {:>10} {:>10}  {:<8} note",
            "operation", "ops", "bytes", "time[ms]", "MB/s", "us/op", "verified"
        )?;
        for r in &self.rows {
            let secs = r.time.as_secs_f64().max(1e-9);
            writeln!(
                f,
                "{:<22} {:>6} {:>12} {:>10.3} {:>10.1} {:>10.2}  {:<8} {}",
                r.op,
                r.ops,
                r.bytes,
                secs * 1e3,
                r.bytes as f64 / secs / 1e6,
                secs * 1e6 / r.ops.max(1) as f64,
                if r.verified { "ok" } else { "FAILED" },
                r.note
            )?;
        }
        Ok(())
    }
}
