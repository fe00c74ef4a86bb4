//! RDMA over MPA/TCP on simulated lossy links: the softrnic QP engine inside the deterministic
//! network simulator, and the named scenarios the `softrnic sim` command runs.
//!
//! # Design
//!
//! Two simulated hosts ([`netsim::tcp::TcpHost`], smoltcp TCP/IP) are joined by one link with
//! the scenario's impairments. Each host's application is an RDMA host:
//!
//! * [`RdmaResponder`] listens; every TCP connection it accepts gets a fresh
//!   [`stack::QpEngine`] in the MPA responder role, fresh CQs and the receive buffers posted.
//!   A new listening socket replaces the one that turned into a connection, so a reconnecting
//!   peer is accepted again.
//! * [`RdmaInitiator`] connects, creates its engine in the MPA initiator role once TCP is
//!   established, and drives the workload.
//!
//! Both pump bytes between their smoltcp socket and the engine on every poll (`recv` →
//! [`QpEngine::handle_stream`], [`QpEngine::poll_transmit`] → `send_slice` →
//! [`QpEngine::transmit_done`]), close the socket when the engine asks to, report the
//! transport's end with [`QpEngine::handle_closed`], and ask to be polled at the engine's
//! deadline. Everything runs in virtual time and is a pure function of the seed.
//!
//! # The workload and what is counted
//!
//! The transfer is cut into rounds ([`RoundShape`]): one RDMA Write into a region of the
//! responder, a few Sends into the responder's receive buffers and one RDMA Read from a region
//! of the responder, posted in that order. Before a round starts, every source is filled with
//! a pseudo-random pattern derived from the seed, the round and the operation
//! ([`pattern_fill`]), and every target with that pattern's bitwise complement (the
//! "poison"). The Read comes last: its completion means the responder has processed every
//! earlier message of the round, so all targets can be checked. A byte of a target is then
//!
//! * **verified** if it holds the pattern,
//! * **lost** if it still holds the poison (expected but never arrived),
//! * **misplaced** otherwise (arrived, but wrong or at the wrong place).
//!
//! If the connection fails during a round (a Terminate, e.g. for an MPA CRC error, or a failed
//! MPA setup), the initiator waits for the connection to close on both sides, counts the
//! misplaced bytes already in the targets, reconnects on a new port and runs the round again
//! from fresh targets. Rounds that never complete count as lost.

use std::net::SocketAddrV4;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use netsim::rng::splitmix64_mix;
use netsim::tcp::smoltcp::iface::SocketHandle;
use netsim::tcp::smoltcp::socket::tcp::State as TcpState;
use netsim::tcp::{TcpApp, TcpCtx, TcpHost, TcpHostConfig};
use netsim::{
    CapturePoint, CaptureSink, CorruptScope, Dir, GilbertElliott, Instant, LinkId, LinkParams,
    NodeHandle, Sim, SimError,
};
use stack::mpa::{self, CrcPolicy};
use stack::rdmap::{MpaCode, TermCause};
use stack::{
    Access, CloseReason, Cq, MemTable, MemoryRegion, MrOptions, Pd, QpConfig, QpEngine, QpEvent,
    QpId, QpState, RecvWr, SendWr, Setup, WcStatus,
};
use thiserror::Error;

/// TCP port the responder listens on.
pub const RDMA_PORT: u16 = 4791;

/// First local port of the initiator; each reconnection takes the next one.
const FIRST_LOCAL_PORT: u16 = 40000;

/// How long the initiator waits for a failed connection to close before resetting it.
const CLOSE_GUARD: Duration = Duration::from_secs(30);

/// Pause before connecting again after a connection attempt failed at the TCP level.
const RECONNECT_BACKOFF: Duration = Duration::from_millis(10);

// ---------------------------------------------------------------------------------------------
// Patterns
// ---------------------------------------------------------------------------------------------

/// The key of the pattern of operation `op` in round `round` of a run with `seed`.
pub fn pattern_key(seed: u64, round: u64, op: u64) -> u64 {
    splitmix64_mix(splitmix64_mix(splitmix64_mix(seed) ^ round) ^ op)
}

/// `len` bytes of the xorshift64 sequence (shifts 13, 7, 17) from `seed` (made odd, so never
/// zero): the low byte of each step. The SCTP runs and the transfer checks of the
/// experiments draw their patterns from it.
pub(crate) fn xorshift_bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn read_u64(chunk: &[u8]) -> u64 {
    let mut b = [0; 8];
    b.copy_from_slice(chunk);
    u64::from_ne_bytes(b)
}

fn pattern_word(key: u64, i: usize) -> [u8; 8] {
    splitmix64_mix(key ^ (i as u64).wrapping_mul(0xd1b5_4a32_d192_ed03)).to_le_bytes()
}

/// Fills `out` with the pseudo-random pattern of `key` (byte `i` depends on `key` and `i`
/// only).
pub fn pattern_fill(key: u64, out: &mut [u8]) {
    let mut chunks = out.chunks_exact_mut(8);
    let mut n = 0;
    for (i, chunk) in (&mut chunks).enumerate() {
        chunk.copy_from_slice(&pattern_word(key, i));
        n = i + 1;
    }
    let rest = chunks.into_remainder();
    let w = pattern_word(key, n);
    rest.copy_from_slice(&w[..rest.len()]);
}

/// The poison a target is filled with before a transfer: the pattern's bitwise complement,
/// so every byte differs from the byte expected there.
pub fn poison_fill(key: u64, out: &mut [u8]) {
    pattern_fill(key, out);
    for b in out {
        *b = !*b;
    }
}

/// Byte counts of a check of a target against the pattern it should hold.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Bytes holding the pattern.
    pub verified: u64,
    /// Bytes still holding the poison.
    pub lost: u64,
    /// Bytes holding anything else.
    pub misplaced: u64,
}

impl Tally {
    /// Checks `actual` against the pattern of `key`.
    pub fn check(key: u64, actual: &[u8]) -> Tally {
        let mut t = Tally::default();
        let mut chunks = actual.chunks_exact(8);
        let mut n = 0;
        for (i, chunk) in (&mut chunks).enumerate() {
            n = i + 1;
            let w = pattern_word(key, i);
            if u64::from_ne_bytes(w) == read_u64(chunk) {
                t.verified += 8;
            } else {
                t.count_bytes(&w, chunk);
            }
        }
        let rest = chunks.remainder();
        let w = pattern_word(key, n);
        t.count_bytes(&w[..rest.len()], rest);
        t
    }

    fn count_bytes(&mut self, expected: &[u8], actual: &[u8]) {
        for (&e, &a) in expected.iter().zip(actual) {
            if a == e {
                self.verified += 1;
            } else if a == !e {
                self.lost += 1;
            } else {
                self.misplaced += 1;
            }
        }
    }

    fn add(&mut self, o: Tally) {
        self.verified += o.verified;
        self.lost += o.lost;
        self.misplaced += o.misplaced;
    }
}

// ---------------------------------------------------------------------------------------------
// Workload shape
// ---------------------------------------------------------------------------------------------

/// The operations of one round: an RDMA Write of `write` bytes, `sends` Sends of `send` bytes
/// each, then an RDMA Read of `read` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoundShape {
    /// RDMA Write length.
    pub write: u32,
    /// Length of each Send.
    pub send: u32,
    /// Number of Sends (at most 16).
    pub sends: u32,
    /// RDMA Read length (at least 1: the Read closes the round).
    pub read: u32,
}

impl Default for RoundShape {
    /// 1 MiB per round: a 512 KiB Write, four 64 KiB Sends and a 256 KiB Read.
    fn default() -> Self {
        RoundShape {
            write: 512 * 1024,
            send: 64 * 1024,
            sends: 4,
            read: 256 * 1024,
        }
    }
}

impl RoundShape {
    /// Bytes one round moves.
    pub fn bytes(&self) -> u64 {
        u64::from(self.write) + u64::from(self.send) * u64::from(self.sends) + u64::from(self.read)
    }

    /// The same proportions scaled down to `budget` bytes (for the last round).
    fn scaled(&self, budget: u64) -> RoundShape {
        let full = self.bytes();
        if budget >= full || full == 0 {
            return *self;
        }
        let part = |x: u32| (u64::from(x) * budget / full) as u32;
        let write = part(self.write);
        let send = part(self.send);
        let read = budget - u64::from(write) - u64::from(send) * u64::from(self.sends);
        RoundShape {
            write,
            send,
            sends: self.sends,
            read: u32::try_from(read).unwrap_or(u32::MAX),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Engine statistics and the per-connection driver
// ---------------------------------------------------------------------------------------------

/// What the engines of one host reported over a run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EngineStats {
    /// Connections that finished MPA setup.
    pub established: u64,
    /// Terminates sent for an MPA CRC error (RFC 5044 §8, code 0x02).
    pub crc_terminates_sent: u64,
    /// Terminates sent for any other cause.
    pub other_terminates_sent: u64,
    /// Terminates received from the peer.
    pub terminates_received: u64,
    /// MPA setups that failed.
    pub setup_failures: u64,
    /// One line per Terminate or setup failure: virtual time and cause.
    pub log: Vec<String>,
}

impl EngineStats {
    fn record(&mut self, now: Instant, qp: u32, ev: &QpEvent) {
        match ev {
            QpEvent::Established(_) => self.established += 1,
            QpEvent::TerminateSent(t) => {
                if t.cause == TermCause::Mpa(MpaCode::CrcError) {
                    self.crc_terminates_sent += 1;
                } else {
                    self.other_terminates_sent += 1;
                }
                self.log
                    .push(format!("{now} qp {qp}: Terminate sent: {:?}", t.cause));
            }
            QpEvent::TerminateReceived(t) => {
                self.terminates_received += 1;
                self.log
                    .push(format!("{now} qp {qp}: Terminate received: {:?}", t.cause));
            }
            QpEvent::SetupFailed(e) => {
                self.setup_failures += 1;
                self.log.push(format!("{now} qp {qp}: setup failed: {e}"));
            }
            _ => {}
        }
    }
}

/// One TCP connection and the engine running over it.
struct Conn {
    h: SocketHandle,
    eng: Option<QpEngine>,
    scq: Cq,
    rcq: Cq,
    qp: u32,
    /// We closed the socket (or learnt that it closed) and told the engine.
    closed: bool,
    /// When the engine first reached `Error`.
    dead_since: Option<Instant>,
    /// The QP's span (`qp{qp, node}`), entered while the node works on this connection.
    span: tracing::Span,
}

impl Conn {
    fn new(h: SocketHandle, qp: u32, node: &'static str) -> Conn {
        Conn {
            span: tracing::info_span!("qp", qp, node),
            h,
            eng: None,
            scq: Cq::new(256),
            rcq: Cq::new(256),
            qp,
            closed: false,
            dead_since: None,
        }
    }

    /// Creates the engine once the TCP connection is established.
    fn ensure_engine(
        &mut self,
        cx: &mut TcpCtx<'_>,
        mem: &Arc<MemTable>,
        pd: Pd,
        setup: impl FnOnce() -> Setup,
    ) -> bool {
        if self.eng.is_some() {
            return false;
        }
        if cx.socket(self.h).state() != TcpState::Established {
            return false;
        }
        let cfg = QpConfig::new(QpId(self.qp), pd, self.scq.clone(), self.rcq.clone());
        match QpEngine::new(cfg, mem.clone(), setup(), cx.now()) {
            Ok(e) => {
                self.eng = Some(e);
                true
            }
            Err(_) => {
                // A static configuration error: nothing can run over this connection.
                cx.socket(self.h).abort();
                self.closed = true;
                false
            }
        }
    }

    /// Moves bytes both ways, follows the transport's state and collects engine events.
    fn pump(&mut self, cx: &mut TcpCtx<'_>, stats: &mut EngineStats) {
        let now = cx.now();
        let t = now;
        let s = cx.socket(self.h);
        let Some(e) = self.eng.as_mut() else {
            return;
        };
        while s.can_recv() {
            let got = s.recv(|d| {
                e.handle_stream(t, d);
                (d.len(), d.len())
            });
            if !matches!(got, Ok(n) if n > 0) {
                break;
            }
        }
        while s.can_send() {
            let Some(bytes) = e.poll_transmit() else {
                break;
            };
            match s.send_slice(bytes) {
                Ok(n) if n > 0 => e.transmit_done(n),
                _ => break,
            }
        }
        if !self.closed {
            if e.should_close_transport() {
                s.close();
                self.closed = true;
                e.handle_closed(t, CloseReason::Local);
            } else {
                match s.state() {
                    TcpState::CloseWait => {
                        // The peer sent FIN and everything before it has been read.
                        self.closed = true;
                        e.handle_closed(t, CloseReason::PeerClosed);
                        s.close();
                    }
                    TcpState::Closed | TcpState::TimeWait | TcpState::Closing => {
                        self.closed = true;
                        e.handle_closed(t, CloseReason::Reset);
                    }
                    _ => {}
                }
            }
        }
        while let Some(ev) = e.poll_event() {
            stats.record(now, self.qp, &ev);
        }
        if e.state() == QpState::Error && self.dead_since.is_none() {
            self.dead_since = Some(now);
        }
    }

    /// Whether the socket has finished (nothing more will arrive on it).
    fn socket_gone(&self, cx: &mut TcpCtx<'_>) -> bool {
        matches!(
            cx.socket(self.h).state(),
            TcpState::Closed | TcpState::TimeWait
        )
    }

    fn deadline(&self) -> Option<Instant> {
        self.eng.as_ref().and_then(|e| e.poll_timeout())
    }

    fn handle_timeout(&mut self, now: Instant) {
        if let Some(e) = self.eng.as_mut()
            && e.poll_timeout().is_some_and(|d| d <= now)
        {
            e.handle_timeout(now);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Memory layout shared by both sides
// ---------------------------------------------------------------------------------------------

/// The responder's regions, as the initiator learns them out of band (STags and TOs) and as
/// the test harness inspects them.
#[derive(Clone, Debug)]
pub struct ResponderRegions {
    /// Target of the RDMA Writes.
    pub write_dst: MemoryRegion,
    /// Source of the RDMA Reads.
    pub read_src: MemoryRegion,
    /// Receive buffers, `sends` slots of `send` bytes each.
    pub recv: MemoryRegion,
}

/// The initiator's regions.
#[derive(Clone, Debug)]
pub struct InitiatorRegions {
    /// Source of the RDMA Writes.
    pub write_src: MemoryRegion,
    /// Sources of the Sends, `sends` slots of `send` bytes each.
    pub send_src: MemoryRegion,
    /// Sink of the RDMA Reads.
    pub read_sink: MemoryRegion,
}

fn register(mem: &MemTable, pd: Pd, len: u32) -> MemoryRegion {
    let a = Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE;
    // Zero-based: the Tagged Offsets on the wire must not depend on where the heap put the
    // buffer, or runs would not be reproducible. Registration of a fresh buffer with valid
    // rights only fails if the STag table is full, which six regions cannot reach.
    mem.register_new(pd, len.max(1) as usize, MrOptions::new(a).zero_based())
        .expect("registering a fresh buffer")
}

fn fill_region(mr: &MemoryRegion, offset: u32, key: u64, len: u32, poison: bool) {
    let mut v = vec![0; len as usize];
    if poison {
        poison_fill(key, &mut v);
    } else {
        pattern_fill(key, &mut v);
    }
    let at = mr.buf_offset() + offset as usize;
    // Offsets and lengths stay within the region sizes chosen from the same RoundShape.
    let _ = mr.buf().write_at(at, &v);
}

fn check_region(mr: &MemoryRegion, offset: u32, key: u64, len: u32) -> Tally {
    let at = mr.buf_offset() + offset as usize;
    match mr.buf().read_range(at..at + len as usize) {
        Ok(v) => Tally::check(key, &v),
        Err(_) => Tally {
            lost: u64::from(len),
            ..Tally::default()
        },
    }
}

// ---------------------------------------------------------------------------------------------
// Responder
// ---------------------------------------------------------------------------------------------

/// The passive RDMA host: accepts connections and answers with an MPA responder engine each.
pub struct RdmaResponder {
    port: u16,
    mem: Arc<MemTable>,
    pd: Pd,
    mpa: mpa::Config,
    regions: ResponderRegions,
    shape: RoundShape,
    listener: Option<SocketHandle>,
    conns: Vec<Conn>,
    next_qp: u32,
    /// Events of all engines.
    pub stats: EngineStats,
    /// Receive completions with success.
    pub recv_ok: u64,
    /// Receive completions with an error (flushed on a failed connection).
    pub recv_err: u64,
}

impl RdmaResponder {
    /// A responder on `port` whose connections use `mpa` and post the receive buffers of
    /// `regions.recv` as `shape` lays them out.
    pub fn new(
        port: u16,
        mem: Arc<MemTable>,
        pd: Pd,
        mpa: mpa::Config,
        regions: ResponderRegions,
        shape: RoundShape,
    ) -> RdmaResponder {
        RdmaResponder {
            port,
            mem,
            pd,
            mpa,
            regions,
            shape,
            listener: None,
            conns: Vec::new(),
            next_qp: 1,
            stats: EngineStats::default(),
            recv_ok: 0,
            recv_err: 0,
        }
    }

    /// Connections currently held (open or closing).
    pub fn connections(&self) -> usize {
        self.conns.len()
    }

    fn post_recv(&self, eng: &mut QpEngine, slot: u32) {
        let sge = self.regions.recv.sge(
            u64::from(slot) * u64::from(self.shape.send),
            self.shape.send,
        );
        // The receive queue holds `sends` (≤ 16) buffers, far below its depth.
        let _ = eng.post_recv(RecvWr::new(u64::from(slot), vec![sge]));
    }
}

impl TcpApp for RdmaResponder {
    fn poll(&mut self, cx: &mut TcpCtx<'_>) {
        // A listener that has seen a SYN becomes a connection; listen again at once.
        if let Some(h) = self.listener
            && cx.socket(h).state() != TcpState::Listen
        {
            self.listener = None;
            let qp = self.next_qp;
            self.next_qp += 1;
            self.conns.push(Conn::new(h, qp, "responder"));
        }
        if self.listener.is_none() {
            let h = cx.new_socket();
            // A fresh socket and a non-zero port: listening cannot fail.
            let _ = cx.listen(h, self.port);
            self.listener = Some(h);
        }
        let mut conns = std::mem::take(&mut self.conns);
        for c in &mut conns {
            let _span = c.span.clone().entered();
            let (mem, pd, mpa) = (&self.mem, self.pd, &self.mpa);
            if c.ensure_engine(cx, mem, pd, || Setup::Responder(mpa.clone()))
                && let Some(mut e) = c.eng.take()
            {
                for slot in 0..self.shape.sends {
                    self.post_recv(&mut e, slot);
                }
                c.eng = Some(e);
            }
            c.handle_timeout(cx.now());
            // Two passes: receive completions repost buffers, which may let more data in.
            for _ in 0..2 {
                c.pump(cx, &mut self.stats);
                let Some(mut e) = c.eng.take() else {
                    break;
                };
                let mut reposted = false;
                while let Some(wc) = c.rcq.poll_one() {
                    if wc.status == WcStatus::Success {
                        self.recv_ok += 1;
                        if e.state() == QpState::Rts {
                            self.post_recv(&mut e, wc.wr_id as u32);
                            reposted = true;
                        }
                    } else {
                        self.recv_err += 1;
                    }
                }
                let _ = c.scq.drain();
                c.eng = Some(e);
                if !reposted {
                    break;
                }
            }
        }
        // A connection whose socket has finished is dropped with its engine.
        conns.retain(|c| {
            let gone = matches!(
                cx.socket(c.h).state(),
                TcpState::Closed | TcpState::TimeWait
            );
            if gone {
                cx.sockets().remove(c.h);
            }
            !gone
        });
        self.conns = conns;
    }

    fn poll_at(&self) -> Option<Instant> {
        self.conns.iter().filter_map(Conn::deadline).min()
    }
}

// ---------------------------------------------------------------------------------------------
// Initiator
// ---------------------------------------------------------------------------------------------

/// Progress and results of the initiator's workload.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// Bytes the workload moves in total.
    pub total: u64,
    /// Bytes of the rounds completed so far.
    pub done: u64,
    /// Rounds completed.
    pub rounds: u64,
    /// Byte counts of the checks so far.
    pub tally: Tally,
    /// TCP connections opened.
    pub connections: u64,
    /// Round attempts that failed and were repeated on a new connection.
    pub retries: u64,
    /// Work completions with an error status.
    pub wc_errors: u64,
    /// Every round completed and the connection was closed.
    pub finished: bool,
    /// When the last round completed.
    pub finished_at: Option<Instant>,
}

#[derive(Debug)]
struct RoundState {
    shape: RoundShape,
    /// Targets poisoned and sources filled for the current attempt.
    prepared: bool,
    /// Work requests posted on the current connection.
    posted: bool,
    expected_wcs: u32,
    wcs: u32,
    failed: bool,
}

/// The active RDMA host: connects, runs the workload, reconnects after failures.
pub struct RdmaInitiator {
    server: SocketAddrV4,
    next_port: u16,
    mem: Arc<MemTable>,
    pd: Pd,
    mpa: mpa::Config,
    seed: u64,
    shape: RoundShape,
    local: InitiatorRegions,
    remote: ResponderRegions,
    conn: Option<Conn>,
    round: Option<RoundState>,
    reconnect_at: Option<Instant>,
    next_qp: u32,
    progress: Progress,
    /// Events of all engines.
    pub stats: EngineStats,
}

impl RdmaInitiator {
    /// An initiator moving `total` bytes in rounds of `shape` to and from the responder at
    /// `server`, with patterns derived from `seed`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        server: SocketAddrV4,
        mem: Arc<MemTable>,
        pd: Pd,
        mpa: mpa::Config,
        seed: u64,
        total: u64,
        shape: RoundShape,
        local: InitiatorRegions,
        remote: ResponderRegions,
    ) -> RdmaInitiator {
        let mut init = RdmaInitiator {
            server,
            next_port: FIRST_LOCAL_PORT,
            mem,
            pd,
            mpa,
            seed,
            shape,
            local,
            remote,
            conn: None,
            round: None,
            reconnect_at: Some(Instant::ZERO),
            next_qp: 1,
            progress: Progress {
                total,
                ..Progress::default()
            },
            stats: EngineStats::default(),
        };
        init.next_round();
        if init.round.is_none() {
            init.progress.finished = true;
        }
        init
    }

    /// Progress so far.
    pub fn progress(&self) -> &Progress {
        &self.progress
    }

    /// Counts the bytes of rounds that never completed as lost (plus anything misplaced in
    /// the current round's targets); call once when the run is over.
    pub fn finish_accounting(&mut self) {
        if self.progress.finished {
            return;
        }
        let left = self.progress.total - self.progress.done;
        let mut wrong = 0;
        if let Some(r) = &self.round
            && r.prepared
        {
            wrong = self.check_round(r.shape).misplaced;
        }
        self.progress.tally.misplaced += wrong;
        self.progress.tally.lost += left.saturating_sub(wrong);
        self.progress.done = self.progress.total;
    }

    fn key(&self, op: u64) -> u64 {
        pattern_key(self.seed, self.progress.rounds, op)
    }

    fn prepare(&self, s: RoundShape) {
        fill_region(&self.local.write_src, 0, self.key(0), s.write, false);
        fill_region(&self.remote.write_dst, 0, self.key(0), s.write, true);
        for k in 0..s.sends {
            let key = self.key(1 + u64::from(k));
            fill_region(
                &self.local.send_src,
                k * self.shape.send,
                key,
                s.send,
                false,
            );
            fill_region(&self.remote.recv, k * self.shape.send, key, s.send, true);
        }
        fill_region(&self.remote.read_src, 0, self.key(100), s.read, false);
        fill_region(&self.local.read_sink, 0, self.key(100), s.read, true);
    }

    fn check_round(&self, s: RoundShape) -> Tally {
        let mut t = check_region(&self.remote.write_dst, 0, self.key(0), s.write);
        for k in 0..s.sends {
            let key = self.key(1 + u64::from(k));
            t.add(check_region(
                &self.remote.recv,
                k * self.shape.send,
                key,
                s.send,
            ));
        }
        t.add(check_region(
            &self.local.read_sink,
            0,
            self.key(100),
            s.read,
        ));
        t
    }

    fn post_round(&self, e: &mut QpEngine, s: RoundShape) -> Result<u32, stack::PostError> {
        let mut n = 0;
        if s.write > 0 {
            e.post_send(SendWr::write(
                1,
                vec![self.local.write_src.sge(0, s.write)],
                self.remote.write_dst.stag(),
                self.remote.write_dst.to_at(0),
            ))?;
            n += 1;
        }
        if s.send > 0 {
            for k in 0..s.sends {
                let off = u64::from(k * self.shape.send);
                e.post_send(SendWr::send(
                    2 + u64::from(k),
                    vec![self.local.send_src.sge(off, s.send)],
                ))?;
                n += 1;
            }
        }
        e.post_send(SendWr::read(
            1000,
            vec![self.local.read_sink.sge(0, s.read)],
            self.remote.read_src.stag(),
            self.remote.read_src.to_at(0),
        ))?;
        Ok(n + 1)
    }

    /// Starts the next round (or finishes) after a round completed.
    fn next_round(&mut self) {
        if self.progress.done >= self.progress.total {
            self.round = None;
            return;
        }
        let shape = self.shape.scaled(self.progress.total - self.progress.done);
        self.round = Some(RoundState {
            shape,
            prepared: false,
            posted: false,
            expected_wcs: 0,
            wcs: 0,
            failed: false,
        });
    }

    fn connect(&mut self, cx: &mut TcpCtx<'_>) {
        let h = cx.new_socket();
        let port = self.next_port;
        self.next_port = if self.next_port >= 60000 {
            FIRST_LOCAL_PORT
        } else {
            self.next_port + 1
        };
        if cx.connect(h, self.server, port).is_err() {
            cx.sockets().remove(h);
            self.reconnect_at = Some(cx.now() + RECONNECT_BACKOFF);
            return;
        }
        let qp = self.next_qp;
        self.next_qp += 1;
        self.progress.connections += 1;
        self.conn = Some(Conn::new(h, qp, "initiator"));
        self.reconnect_at = None;
    }

    /// Works on the current round over the live engine.
    fn drive_round(&mut self, now: Instant, conn: &mut Conn) {
        let Some(mut e) = conn.eng.take() else {
            return;
        };
        while let Some(r) = self.round.as_ref() {
            let (shape, prepared, posted) = (r.shape, r.prepared, r.posted);
            if !matches!(e.state(), QpState::Idle | QpState::Rts) {
                break;
            }
            if !prepared {
                self.prepare(shape);
            }
            if !posted {
                match self.post_round(&mut e, shape) {
                    Ok(n) => {
                        if let Some(r) = self.round.as_mut() {
                            r.prepared = true;
                            r.posted = true;
                            r.expected_wcs = n;
                            r.wcs = 0;
                        }
                    }
                    Err(_) => {
                        // Posting only fails on a QP that is going down; retry the round on
                        // the next connection.
                        if let Some(r) = self.round.as_mut() {
                            r.prepared = true;
                            r.failed = true;
                        }
                        break;
                    }
                }
            }
            let mut errors = 0;
            let mut ok = 0;
            while let Some(wc) = conn.scq.poll_one() {
                if wc.status == WcStatus::Success {
                    ok += 1;
                } else {
                    errors += 1;
                }
            }
            self.progress.wc_errors += errors;
            let Some(r) = self.round.as_mut() else {
                break;
            };
            r.wcs += ok;
            if errors > 0 {
                r.failed = true;
            }
            if r.failed || r.wcs < r.expected_wcs {
                break;
            }
            // Round complete: every target can be checked now.
            let t = self.check_round(shape);
            self.progress.tally.add(t);
            self.progress.done += shape.bytes();
            self.progress.rounds += 1;
            self.next_round();
            if self.round.is_none() {
                self.progress.finished_at = Some(now);
                e.close();
                break;
            }
        }
        conn.eng = Some(e);
    }
}

impl TcpApp for RdmaInitiator {
    fn poll(&mut self, cx: &mut TcpCtx<'_>) {
        let now = cx.now();
        if self.conn.is_none() && !self.progress.finished {
            if self.reconnect_at.is_some_and(|t| t <= now) {
                self.connect(cx);
            } else {
                return;
            }
        }
        let Some(mut c) = self.conn.take() else {
            return;
        };
        let _span = c.span.clone().entered();
        let (mem, pd, mpa) = (&self.mem, self.pd, &self.mpa);
        c.ensure_engine(cx, mem, pd, || Setup::Initiator(mpa.clone()));
        c.handle_timeout(now);
        // Two passes: completions found in the first may post the next round.
        for _ in 0..2 {
            c.pump(cx, &mut self.stats);
            self.drive_round(now, &mut c);
        }
        c.pump(cx, &mut self.stats);

        // A connection that never got an engine: the TCP open failed.
        let no_engine_dead = c.eng.is_none() && c.socket_gone(cx);
        let dead = c.eng.as_ref().is_some_and(|e| e.state() == QpState::Error);
        if dead
            && !c.socket_gone(cx)
            && c.dead_since
                .is_some_and(|t| now.saturating_duration_since(t) > CLOSE_GUARD)
        {
            cx.socket(c.h).abort();
        }
        if no_engine_dead || (dead && c.socket_gone(cx)) {
            cx.sockets().remove(c.h);
            if self.round.is_none() {
                // The graceful close after the last round.
                self.progress.finished = true;
                return;
            }
            if let Some(r) = self.round.as_mut()
                && r.prepared
            {
                // Count what the failed attempt put in the wrong place, then start over.
                let shape = r.shape;
                r.prepared = false;
                r.posted = false;
                r.failed = false;
                let t = self.check_round(shape);
                self.progress.tally.misplaced += t.misplaced;
                self.progress.retries += 1;
            }
            self.reconnect_at = Some(if no_engine_dead {
                now + RECONNECT_BACKOFF
            } else {
                now
            });
            return;
        }
        self.conn = Some(c);
    }

    fn poll_at(&self) -> Option<Instant> {
        let mut t = self.conn.as_ref().and_then(Conn::deadline);
        if self.conn.is_none() && !self.progress.finished {
            t = match (t, self.reconnect_at) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        if let Some(since) = self.conn.as_ref().and_then(|c| c.dead_since) {
            let guard = since + CLOSE_GUARD + Duration::from_millis(1);
            t = Some(t.map_or(guard, |x| x.min(guard)));
        }
        t
    }
}

// ---------------------------------------------------------------------------------------------
// Scenarios
// ---------------------------------------------------------------------------------------------

/// A link outage during the transfer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Flap {
    /// The link goes down once this share of the bytes (0..1) has been verified.
    pub at_progress: f64,
    /// How long it stays down.
    pub down_for: Duration,
}

/// A named experiment: link, workload, MPA settings and events.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    /// Name shown in reports.
    pub name: String,
    /// Parameters of both link directions.
    pub link: LinkParams,
    /// Bytes the workload moves.
    pub bytes: u64,
    /// The rounds' shape.
    pub shape: RoundShape,
    /// MPA settings of both hosts.
    pub mpa: mpa::Config,
    /// A link outage, if any.
    pub flap: Option<Flap>,
    /// Virtual time after which the run is abandoned (remaining bytes count as lost).
    pub deadline: Duration,
}

/// The names [`Scenario::named`] knows, with a one-line description each.
pub const SCENARIOS: &[(&str, &str)] = &[
    ("clean", "1 Gbit/s, 100 us, no impairments"),
    (
        "loss",
        "1 % loss + 1 % reordering (300 us) + 1 % duplication",
    ),
    (
        "corrupt",
        "bit flips in the TCP payload with IP/TCP checksums repaired: MPA CRC must catch them",
    ),
    (
        "corrupt-tcp",
        "bit flips anywhere past the Ethernet header: the IP/TCP checksums catch them",
    ),
    ("linkflap", "link down for 3 s half-way through, then up"),
    (
        "gilbert",
        "bursty Gilbert loss (p 0.5 %, r 25 %: ~2 % loss, bursts of ~4)",
    ),
];

/// An unknown scenario name.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("unknown scenario `{0}`; known: clean, loss, corrupt, corrupt-tcp, linkflap, gilbert")]
pub struct UnknownScenario(pub String);

impl Scenario {
    /// A built-in scenario by name (see [`SCENARIOS`]), moving 4 MiB.
    pub fn named(name: &str) -> Result<Scenario, UnknownScenario> {
        let base = LinkParams::default()
            .bandwidth(1_000_000_000)
            .delay(Duration::from_micros(100));
        let mut s = Scenario {
            name: name.to_string(),
            link: base.clone(),
            bytes: 4 * 1024 * 1024,
            shape: RoundShape::default(),
            mpa: mpa::Config {
                crc: CrcPolicy::Require,
                ..mpa::Config::default()
            },
            flap: None,
            deadline: Duration::from_secs(3600),
        };
        match name {
            "clean" => {}
            "loss" => {
                s.link = base
                    .loss(0.01)
                    .reorder(0.01, Duration::from_micros(300))
                    .duplicate(0.01);
            }
            "corrupt" => {
                s.link = base
                    .corrupt(0.0005)
                    .corrupt_scope(CorruptScope::PayloadFixChecksums);
            }
            "corrupt-tcp" => {
                let mut l = base.corrupt(0.01);
                l.corrupt_offset = netsim::link::ETHERNET_HEADER_LEN;
                s.link = l;
            }
            "linkflap" => {
                s.flap = Some(Flap {
                    at_progress: 0.5,
                    down_for: Duration::from_secs(3),
                });
            }
            "gilbert" => {
                s.link = base.gilbert_elliott(GilbertElliott::gilbert(0.005, 0.25));
            }
            _ => return Err(UnknownScenario(name.to_string())),
        }
        Ok(s)
    }

    /// Runs the scenario with `seed`; `capture` records the link.
    pub fn run(&self, seed: u64, capture: Capture) -> Result<RunReport, SimError> {
        let wall = std::time::Instant::now();
        let mut world = World::build(self, seed)?;
        let cap = match capture {
            Capture::None => None,
            Capture::Memory => Some(world.sim.capture_in_memory(world.link)?),
            Capture::File(p) => Some(world.sim.capture_with(
                world.link,
                CaptureSink::File(p),
                CapturePoint::Receive,
            )?),
        };
        let deadline = Instant::from_duration(self.deadline);
        let cli = world.initiator;
        if let Some(f) = self.flap {
            let total = self.bytes as f64;
            let reached = world.sim.run_until_condition(deadline, |sim| {
                let p = initiator(sim, cli).progress();
                p.finished || p.tally.verified as f64 >= f.at_progress * total
            });
            if reached {
                let now = world.sim.now();
                world.sim.link_down_at(world.link, now)?;
                world.sim.link_up_at(world.link, now + f.down_for)?;
            }
        }
        world
            .sim
            .run_until_condition(deadline, |sim| initiator(sim, cli).progress().finished);
        let capture_bytes = match cap {
            Some(c) => Some(world.sim.finish_capture(c)?),
            None => None,
        };
        Ok(world.report(self, seed, capture_bytes, wall.elapsed()))
    }
}

fn initiator(sim: &Sim, h: NodeHandle<TcpHost>) -> &RdmaInitiator {
    sim.node(h)
        .app::<RdmaInitiator>()
        .expect("the initiator host runs an RdmaInitiator")
}

/// Whether and where a run records the link.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Capture {
    /// No capture.
    #[default]
    None,
    /// Into memory, returned in [`RunReport::capture`].
    Memory,
    /// Into a pcap file.
    File(PathBuf),
}

/// A built simulation: two RDMA hosts on one link.
pub struct World {
    /// The simulation.
    pub sim: Sim,
    /// The link between the hosts (the initiator's side is `A`).
    pub link: LinkId,
    /// The initiator's host (runs an [`RdmaInitiator`]).
    pub initiator: NodeHandle<TcpHost>,
    /// The responder's host (runs an [`RdmaResponder`]).
    pub responder: NodeHandle<TcpHost>,
}

impl World {
    /// Sets up hosts, memory and link for `scenario` with `seed` (nothing runs yet).
    pub fn build(scenario: &Scenario, seed: u64) -> Result<World, SimError> {
        let mut sim = Sim::new(seed);
        let shape = scenario.shape;
        let slots = shape.send.saturating_mul(shape.sends);

        let rmem = MemTable::with_seed(seed ^ 0x5254);
        let rpd = rmem.alloc_pd();
        let remote = ResponderRegions {
            write_dst: register(&rmem, rpd, shape.write),
            read_src: register(&rmem, rpd, shape.read),
            recv: register(&rmem, rpd, slots),
        };
        let imem = MemTable::with_seed(seed ^ 0x494e);
        let ipd = imem.alloc_pd();
        let local = InitiatorRegions {
            write_src: register(&imem, ipd, shape.write),
            send_src: register(&imem, ipd, slots),
            read_sink: register(&imem, ipd, shape.read),
        };

        let srv_cfg = TcpHostConfig::numbered(2).with_seed(sim.derive_seed(2));
        let cli_cfg = TcpHostConfig::numbered(1).with_seed(sim.derive_seed(1));
        let server = SocketAddrV4::new(srv_cfg.addr, RDMA_PORT);
        let resp = RdmaResponder::new(
            RDMA_PORT,
            rmem,
            rpd,
            scenario.mpa.clone(),
            remote.clone(),
            shape,
        );
        let init = RdmaInitiator::new(
            server,
            imem,
            ipd,
            scenario.mpa.clone(),
            seed,
            scenario.bytes,
            shape,
            local,
            remote,
        );
        let responder = sim.add_node(TcpHost::new(srv_cfg, resp));
        let initiator = sim.add_node(TcpHost::new(cli_cfg, init));
        let link = sim.link(
            initiator.iface(0),
            responder.iface(0),
            scenario.link.clone(),
        )?;
        Ok(World {
            sim,
            link,
            initiator,
            responder,
        })
    }

    /// The initiator application.
    pub fn initiator(&self) -> &RdmaInitiator {
        initiator(&self.sim, self.initiator)
    }

    /// The responder application.
    pub fn responder(&self) -> &RdmaResponder {
        self.sim
            .node(self.responder)
            .app::<RdmaResponder>()
            .expect("the responder host runs an RdmaResponder")
    }

    fn report(
        &mut self,
        scenario: &Scenario,
        seed: u64,
        capture: Option<Vec<u8>>,
        wall: Duration,
    ) -> RunReport {
        let init = self
            .sim
            .node_mut(self.initiator)
            .app_mut::<RdmaInitiator>()
            .expect("the initiator host runs an RdmaInitiator");
        init.finish_accounting();
        let p = init.progress().clone();
        let istats = init.stats.clone();
        let rstats = self.responder().stats.clone();
        let ab = self.sim.link_counters(self.link, Dir::AtoB);
        let ba = self.sim.link_counters(self.link, Dir::BtoA);
        let sim_time = p.finished_at.unwrap_or(self.sim.now()).since_start();
        RunReport {
            scenario: scenario.name.clone(),
            seed,
            loss: scenario.link.loss,
            bytes: p.total,
            verified: p.tally.verified,
            lost: p.tally.lost,
            misplaced: p.tally.misplaced,
            completed: p.finished_at.is_some(),
            sim_time,
            wall_time: wall,
            connections: p.connections,
            retries: p.retries,
            crc_terminates: istats.crc_terminates_sent + rstats.crc_terminates_sent,
            other_terminates: istats.other_terminates_sent + rstats.other_terminates_sent,
            setup_failures: istats.setup_failures + rstats.setup_failures,
            frames: ab.sent + ba.sent,
            frames_dropped: ab.dropped_total() + ba.dropped_total(),
            frames_corrupted: ab.corrupted + ba.corrupted,
            counters: [ab, ba],
            recv_completions: self.responder().recv_ok,
            log: istats
                .log
                .iter()
                .map(|l| format!("initiator {l}"))
                .chain(rstats.log.iter().map(|l| format!("responder {l}")))
                .collect(),
            capture,
        }
    }
}

/// The outcome of one run.
#[derive(Clone, Debug, PartialEq)]
pub struct RunReport {
    /// Scenario name.
    pub scenario: String,
    /// Seed.
    pub seed: u64,
    /// i.i.d. loss probability of the link.
    pub loss: f64,
    /// Bytes the workload moved (sent once each; retries not counted).
    pub bytes: u64,
    /// Bytes verified at their targets.
    pub verified: u64,
    /// Bytes expected but never arrived.
    pub lost: u64,
    /// Bytes that arrived wrong or at the wrong place.
    pub misplaced: u64,
    /// Every round completed before the deadline.
    pub completed: bool,
    /// Virtual time until the last round completed (or the deadline).
    pub sim_time: Duration,
    /// Wall-clock time of the run.
    pub wall_time: Duration,
    /// TCP connections opened by the initiator.
    pub connections: u64,
    /// Rounds repeated after a failed connection.
    pub retries: u64,
    /// Terminates sent for MPA CRC errors (both hosts).
    pub crc_terminates: u64,
    /// Terminates sent for other causes (both hosts).
    pub other_terminates: u64,
    /// Failed MPA setups (both hosts).
    pub setup_failures: u64,
    /// Frames offered to the link (both directions).
    pub frames: u64,
    /// Frames the link dropped.
    pub frames_dropped: u64,
    /// Frames the link corrupted.
    pub frames_corrupted: u64,
    /// Counters of the link, `A→B` (initiator to responder) first.
    pub counters: [netsim::LinkCounters; 2],
    /// Receive completions the responder reported (one per Send delivered).
    pub recv_completions: u64,
    /// Terminates and setup failures, one line each.
    pub log: Vec<String>,
    /// The pcap bytes of a [`Capture::Memory`] run.
    pub capture: Option<Vec<u8>>,
}

impl RunReport {
    /// Nothing lost, nothing misplaced, every round completed.
    pub fn ok(&self) -> bool {
        self.lost == 0 && self.misplaced == 0 && self.completed && self.verified == self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn tally_tells_pattern_poison_and_garbage_apart() {
        let key = pattern_key(1, 2, 3);
        let mut v = vec![0; 100];
        pattern_fill(key, &mut v);
        assert_eq!(Tally::check(key, &v).verified, 100);
        poison_fill(key, &mut v[..40]);
        v[50] ^= 0x10;
        assert_eq!(
            Tally::check(key, &v),
            Tally {
                verified: 59,
                lost: 40,
                misplaced: 1
            }
        );
        // Another key's pattern is misplaced data, not the expected one.
        pattern_fill(pattern_key(1, 2, 4), &mut v);
        let t = Tally::check(key, &v);
        assert!(t.misplaced > 90, "{t:?}");
    }

    #[test]
    fn patterns_depend_on_seed_round_and_op() {
        let keys = [
            pattern_key(1, 0, 0),
            pattern_key(2, 0, 0),
            pattern_key(1, 1, 0),
            pattern_key(1, 0, 1),
        ];
        for (i, a) in keys.iter().enumerate() {
            for b in &keys[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }

    #[test]
    fn every_named_scenario_exists_and_unknown_ones_are_refused() {
        for (name, _) in SCENARIOS {
            let s = Scenario::named(name).unwrap();
            assert!(s.link.validate().is_ok());
        }
        assert!(Scenario::named("nope").is_err());
    }

    proptest! {
        /// A scaled-down last round moves exactly the remaining bytes and still ends with a
        /// Read of at least one byte.
        #[test]
        fn scaled_rounds_add_up(budget in 1u64..(1 << 20)) {
            let s = RoundShape::default().scaled(budget);
            prop_assert_eq!(s.bytes(), budget);
            prop_assert!(s.read >= 1);
            prop_assert_eq!(s.sends, RoundShape::default().sends);
        }

        /// Pattern bytes are a pure function of key and position.
        #[test]
        fn pattern_prefixes_agree(key in any::<u64>(), a in 0usize..200, b in 0usize..200) {
            let (short, long) = (a.min(b), a.max(b));
            let mut x = vec![0; short];
            let mut y = vec![0; long];
            pattern_fill(key, &mut x);
            pattern_fill(key, &mut y);
            prop_assert_eq!(&x[..], &y[..short]);
        }
    }
}
