//! One SCTP association: the state machine of RFC 9260 §4 with data transfer (§6),
//! congestion control (§7), path management (§8) and shutdown (§9), plus SCTP-PF (RFC 7829).
//!
//! The association is sans-IO. Feed it packets with [`Association::handle_packet`] and expiry
//! with [`Association::handle_timeout`]; drain [`Association::poll_transmit`],
//! [`Association::poll_event`] and [`Association::recv`]; sleep until
//! [`Association::poll_timeout`].
//!
//! Internally TSNs are 64-bit: the wire's 32-bit serial numbers (RFC 1982 arithmetic) are
//! unwrapped against the nearest known value, so comparisons are plain integer comparisons.

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::time::Duration;

use thiserror::Error;

use crate::config::{AssociationConfig, CmtConfig, RtxPolicy, Scheduler};
use crate::cookie::Cookie;
use crate::init::{
    InitReply, Responder, adaptation_of, adaptation_param, address_params, answer_init,
    peer_addresses, unrecognized_params,
};
use crate::path::{HbPending, Path, PathState, PathStats, choose_local};
use crate::rng::Rng;
use crate::time::Instant;
use crate::wire::{
    self, COMMON_HEADER_LEN, Chunk, ChunkIter, CommonHeader, DATA_HEADER_LEN, DataChunk,
    ErrorCause, GapBlock, InitChunk, Packet, Param, RawChunk, SackChunk, UnknownAction, be16, be64,
    chunk_type, data_flags, pad4,
};

/// A packet to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transmit {
    /// Local address to send from.
    pub local: SocketAddr,
    /// Destination address.
    pub remote: SocketAddr,
    /// The SCTP packet (common header, chunks, CRC32c).
    pub bytes: Vec<u8>,
}

/// Association states (RFC 9260 §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// INIT sent, waiting for INIT ACK.
    CookieWait,
    /// COOKIE ECHO sent, waiting for COOKIE ACK.
    CookieEchoed,
    /// Up.
    Established,
    /// The user asked to shut down; outstanding data is still being delivered.
    ShutdownPending,
    /// SHUTDOWN sent.
    ShutdownSent,
    /// SHUTDOWN received; outstanding data is still being delivered.
    ShutdownReceived,
    /// SHUTDOWN ACK sent.
    ShutdownAckSent,
    /// Gone.
    Closed,
}

/// Why an association ended abnormally.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AbortReason {
    /// The peer sent an ABORT with these causes.
    Peer(Vec<ErrorCause>),
    /// [`Association::abort`] was called.
    Local,
    /// Retransmissions were exhausted (RFC 9260 §8.1 Association.Max.Retrans, or
    /// Max.Init.Retransmits during setup): the peer is unreachable.
    Timeout,
    /// The peer broke the protocol; an ABORT with a Protocol Violation cause was sent.
    ProtocolViolation(String),
    /// The peer refused the setup (missing or invalid INIT ACK content).
    SetupFailed(String),
}

/// Something the application should know about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The association is up (COMMUNICATION UP).
    Connected,
    /// The peer restarted (RFC 9260 §5.2.4 case A); queued and in-flight data were dropped.
    Restarted,
    /// A message became readable; call [`Association::recv`] until it returns `None`.
    DataReadable {
        /// Stream of the message.
        stream: u16,
    },
    /// A path became active (confirmed, or recovered).
    PathUp {
        /// Peer address.
        remote: SocketAddr,
    },
    /// A path entered the Potentially Failed state (RFC 7829).
    PathPotentiallyFailed {
        /// Peer address.
        remote: SocketAddr,
    },
    /// A path became inactive (RFC 9260 §8.2).
    PathDown {
        /// Peer address.
        remote: SocketAddr,
    },
    /// New data now goes to a different path (failover, switchback or
    /// [`Association::set_primary`]).
    PrimaryChanged {
        /// Peer address now used for new data.
        remote: SocketAddr,
    },
    /// The peer reported errors in an ERROR chunk.
    ErrorReceived {
        /// The causes.
        causes: Vec<ErrorCause>,
    },
    /// Shutdown finished; the association is closed.
    ShutdownComplete,
    /// The association was aborted.
    Aborted {
        /// Why.
        reason: AbortReason,
    },
}

/// A received user message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Stream identifier.
    pub stream: u16,
    /// Payload protocol identifier.
    pub ppid: u32,
    /// Stream sequence number (0 for unordered messages).
    pub ssn: u16,
    /// Sent unordered.
    pub unordered: bool,
    /// The message.
    pub data: Vec<u8>,
}

/// Why [`Association::send`] refused a message.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SendError {
    /// Not in a state that accepts new data.
    #[error("the association is not accepting data in state {0:?}")]
    InvalidState(State),
    /// The stream does not exist.
    #[error("stream {stream} does not exist: the association has {streams} outbound streams")]
    InvalidStream {
        /// Requested stream.
        stream: u16,
        /// Outbound streams negotiated.
        streams: u16,
    },
    /// Empty messages cannot be sent (RFC 9260 §6.2: a DATA chunk carries user data).
    #[error("empty messages cannot be sent")]
    Empty,
    /// Larger than the peer's receive buffer, so it could never be reassembled.
    #[error("message of {len} bytes exceeds the peer's receive window of {max} bytes")]
    TooLarge {
        /// Message length.
        len: usize,
        /// Largest message accepted.
        max: usize,
    },
    /// The send buffer is full; retry after acknowledgements free space.
    #[error("send buffer full: {queued} bytes queued, limit {limit}")]
    BufferFull {
        /// Bytes waiting.
        queued: usize,
        /// Configured limit.
        limit: usize,
    },
}

/// Why a path operation failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PathError {
    /// The address is not one of the peer's.
    #[error("{0} is not a transport address of the peer")]
    UnknownAddress(SocketAddr),
    /// The path is not confirmed yet.
    #[error("{0} has not been confirmed by a heartbeat yet")]
    Unconfirmed(SocketAddr),
}

/// Association-wide counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AssociationStats {
    /// Packets accepted.
    pub packets_received: u64,
    /// Packets discarded (bad checksum, wrong tag, malformed framing, wrong ports).
    pub packets_discarded: u64,
    /// Messages delivered to the application.
    pub messages_received: u64,
    /// Messages accepted by `send`.
    pub messages_sent: u64,
    /// Duplicate TSNs received.
    pub duplicate_tsns: u64,
    /// SACKs sent.
    pub sacks_sent: u64,
    /// T3-rtx expirations.
    pub t3_expirations: u64,
    /// Fast retransmit events (entries into fast recovery or single marks).
    pub fast_retransmits: u64,
    /// Tail loss probes sent (CMT, RFC 8985 §7 per destination).
    pub tail_loss_probes: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rtx {
    No,
    Fast,
    Timeout,
}

#[derive(Debug)]
struct Pending {
    stream: u16,
    ssn: u16,
    ppid: u32,
    flags: u8,
    data: Vec<u8>,
    /// Length of the whole message this fragment belongs to (for the CMT scheduler).
    msg_len: usize,
}

#[derive(Debug)]
struct Sent {
    tsn: u64,
    stream: u16,
    ssn: u16,
    ppid: u32,
    flags: u8,
    data: Vec<u8>,
    path: usize,
    sent_at: Instant,
    tx_count: u32,
    misses: u32,
    acked: bool,
    in_flight: bool,
    rtx: Rtx,
    fast_retransmitted: bool,
    /// The highest TSN sent when this chunk was last retransmitted. With CMT's split fast
    /// retransmit, a fast retransmission that is lost again is reported missing only by
    /// SACKs acknowledging a higher TSN sent to its destination: data sent after it.
    fast_retransmitted_below: Option<u64>,
    /// Sent as a zero window probe (RFC 9260 §6.1 A): into a closed window with nothing
    /// else in flight.
    zero_window_probe: bool,
    /// Retransmitted by a tail loss probe: like a fast retransmission under split fast
    /// retransmit, misses count only against data sent after the retransmission.
    probed: bool,
}

impl Sent {
    fn size(&self) -> usize {
        DATA_HEADER_LEN + self.data.len()
    }
}

#[derive(Debug)]
struct RxChunk {
    stream: u16,
    ssn: u16,
    ppid: u32,
    flags: u8,
    data: Vec<u8>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SackState {
    None,
    Delayed(Instant),
    Now,
}

/// The verdict of the verification tag rules on a packet.
enum TagCheck {
    /// Handle its chunks.
    Accept,
    /// Drop it (counted).
    Discard,
    /// Answered already (an INIT, or a SHUTDOWN ACK out of the blue).
    Answered,
}

/// What one received packet carried, for the acknowledgement decision.
#[derive(Default)]
struct RxTally {
    /// DATA arrived.
    got_data: bool,
    /// New DATA (not only duplicates).
    got_new_data: bool,
    /// DATA arrived out of order.
    ooo: bool,
    /// A SACK is due at once (immediate bit, duplicate or dropped DATA).
    immediate: bool,
    /// Unrecognized chunks to report in an ERROR.
    reports: Vec<ErrorCause>,
}

/// What one SACK newly acknowledged, per path (RFC 9260 §6.2.1, §7.2).
struct SackTally {
    /// Octets newly acknowledged on each path.
    acked_bytes: Vec<usize>,
    /// Per path, the latest send time among newly acknowledged chunks: only data sent after
    /// a path's last timeout proves that the path works now.
    acked_sent_at: Vec<Option<Instant>>,
    /// The highest TSN newly acknowledged (HTNA, §7.2.4).
    htna: Option<u64>,
    /// Round-trip samples: (path, RTT), from chunks sent once (Karn's rule).
    rtt_samples: Vec<(usize, Duration)>,
    /// Per path, the highest TSN last sent to it that this SACK acknowledges, newly or not
    /// (CMT's highest_in_sack_for_dest, for split fast retransmit).
    highest_in_sack: Vec<Option<u64>>,
    /// The lowest TSN newly acknowledged (CMT DAC).
    lowest_newack: Option<u64>,
}

impl SackTally {
    /// The TSN below which this SACK, whose highest gap-acknowledged TSN is `hg`, reports
    /// a chunk missing (§7.2.4): every chunk below `hg` in Fast Recovery once the
    /// cumulative TSN advanced, else (the HTNA rule) those below the highest TSN newly
    /// acknowledged.
    fn miss_limit(&self, hg: u64, in_fast_recovery: bool, cum_advanced: bool) -> u64 {
        if in_fast_recovery && cum_advanced {
            hg
        } else {
            self.htna.map_or(0, |h| h.min(hg))
        }
    }

    fn new(paths: usize) -> SackTally {
        SackTally {
            acked_bytes: vec![0; paths],
            acked_sent_at: vec![None; paths],
            htna: None,
            rtt_samples: Vec::new(),
            highest_in_sack: vec![None; paths],
            lowest_newack: None,
        }
    }

    /// `tsn`, last sent to `path`, is acknowledged by this SACK.
    fn in_sack(&mut self, path: usize, tsn: u64) {
        if let Some(h) = self.highest_in_sack.get_mut(path) {
            *h = (*h).max(Some(tsn));
        }
    }

    /// Counts a newly acknowledged chunk: out of its path's flight, into the tally, and an
    /// RTT sample if it was the path's probe.
    fn count(&mut self, paths: &mut [Path], c: &mut Sent, now: Instant) {
        let Some(p) = paths.get_mut(c.path) else {
            return;
        };
        if c.in_flight {
            p.flight = p.flight.saturating_sub(c.size());
            c.in_flight = false;
        }
        self.acked_bytes[c.path] += c.size();
        self.acked_sent_at[c.path] = self.acked_sent_at[c.path].max(Some(c.sent_at));
        self.lowest_newack = Some(self.lowest_newack.map_or(c.tsn, |l| l.min(c.tsn)));
        self.in_sack(c.path, c.tsn);
        if let Some((t, at)) = p.rtt_probe
            && t == c.tsn
        {
            p.rtt_probe = None;
            if c.tx_count == 1 {
                self.rtt_samples.push((c.path, now - at));
            }
        }
    }
}

/// Unwraps a 32-bit serial number to the 64-bit value nearest `reference`.
fn unwrap32(reference: u64, wire: u32) -> u64 {
    let diff = i64::from(wire.wrapping_sub(reference as u32) as i32);
    reference.wrapping_add_signed(diff)
}

const TSN_BASE: u64 = 1 << 32;

/// Parameters shared by every association of an endpoint.
#[derive(Debug, Clone)]
pub(crate) struct Shared {
    pub config: AssociationConfig,
    pub key: [u8; 32],
    pub local_port: u16,
    pub local_addrs: Vec<SocketAddr>,
}

/// An SCTP association.
#[derive(Debug)]
pub struct Association {
    shared: Shared,
    rng: Rng,
    state: State,
    peer_port: u16,
    local_tag: u32,
    peer_tag: u32,
    paths: Vec<Path>,
    primary: usize,
    data_path: usize,
    /// CMT: the path the striped scheduler tries first for the next packet of new data.
    rr_next: usize,
    // Setup.
    init_packet: Option<Vec<u8>>,
    cookie_echo: Option<Vec<u8>>,
    t1: Option<Instant>,
    t1_path: usize,
    t1_sent: Option<Instant>,
    t1_retransmits: u32,
    local_initial_tsn: u32,
    // Send side.
    out_streams: u16,
    out_ssn: Vec<u16>,
    queue: VecDeque<Pending>,
    queued_bytes: usize,
    next_tsn: u64,
    cum_ack: u64,
    outstanding: VecDeque<Sent>,
    gap_acked: usize,
    /// The peer's Adaptation Layer Indication (RFC 5061 §4.2.7), from INIT or INIT ACK.
    peer_adaptation: Option<u32>,
    /// User bytes of outstanding chunks not gap-acknowledged (kept so a SACK costs no scan).
    unacked_bytes: usize,
    rtx_fast: usize,
    rtx_timeout: usize,
    fast_once: bool,
    t3_once: bool,
    peer_rwnd: usize,
    peer_initial_rwnd: usize,
    peer_window_closed: bool,
    last_sack_at: Option<Instant>,
    fast_recovery_exit: Option<u64>,
    assoc_errors: u32,
    burst_budget: u32,
    // Receive side.
    in_streams: u16,
    peer_cum: u64,
    highest_rx: u64,
    rx_ranges: Vec<(u64, u64)>,
    dups: Vec<u32>,
    reasm: BTreeMap<u64, RxChunk>,
    in_ssn: Vec<u16>,
    ordered: Vec<BTreeMap<u16, Message>>,
    ready: VecDeque<Message>,
    rx_held: usize,
    sack: SackState,
    packets_since_sack: u32,
    sack_path: usize,
    last_rwnd: usize,
    // Control.
    ctrl: VecDeque<Transmit>,
    pending_errors: Vec<ErrorCause>,
    t2: Option<Instant>,
    t2_path: usize,
    events: VecDeque<Event>,
    stats: AssociationStats,
    /// The association's span (see [`assoc_span`]), entered by the entry points so that its
    /// events carry its addresses and tags.
    span: tracing::Span,
}

impl Association {
    fn blank(shared: Shared, seed: [u8; 32], peer_port: u16) -> Association {
        let mut rng = Rng::from_key(seed);
        let local_tag = rng.nonzero_u32();
        let local_initial_tsn = rng.next_u32();
        let next = TSN_BASE + u64::from(local_initial_tsn);
        let rbuf = shared.config.recv_buffer as usize;
        Association {
            rng,
            state: State::Closed,
            peer_port,
            local_tag,
            peer_tag: 0,
            paths: Vec::new(),
            primary: 0,
            data_path: 0,
            rr_next: 0,
            init_packet: None,
            cookie_echo: None,
            t1: None,
            t1_path: 0,
            t1_sent: None,
            t1_retransmits: 0,
            local_initial_tsn,
            out_streams: shared.config.outbound_streams,
            out_ssn: Vec::new(),
            queue: VecDeque::new(),
            queued_bytes: 0,
            next_tsn: next,
            cum_ack: next - 1,
            outstanding: VecDeque::new(),
            gap_acked: 0,
            peer_adaptation: None,
            unacked_bytes: 0,
            rtx_fast: 0,
            rtx_timeout: 0,
            fast_once: false,
            t3_once: false,
            peer_rwnd: 0,
            peer_initial_rwnd: 0,
            peer_window_closed: false,
            last_sack_at: None,
            fast_recovery_exit: None,
            assoc_errors: 0,
            burst_budget: shared.config.max_burst,
            in_streams: 0,
            peer_cum: 0,
            highest_rx: 0,
            rx_ranges: Vec::new(),
            dups: Vec::new(),
            reasm: BTreeMap::new(),
            in_ssn: Vec::new(),
            ordered: Vec::new(),
            ready: VecDeque::new(),
            rx_held: 0,
            sack: SackState::None,
            packets_since_sack: 0,
            sack_path: 0,
            last_rwnd: rbuf,
            ctrl: VecDeque::new(),
            pending_errors: Vec::new(),
            t2: None,
            t2_path: 0,
            events: VecDeque::new(),
            stats: AssociationStats::default(),
            span: assoc_span(&shared, peer_port),
            shared,
        }
    }

    /// Starts an association towards `remote` (port `peer_port`): sends INIT.
    pub(crate) fn connect(
        now: Instant,
        shared: Shared,
        seed: [u8; 32],
        remote: SocketAddr,
        peer_port: u16,
    ) -> Association {
        let mut a = Association::blank(shared, seed, peer_port);
        a.span
            .record("peer", tracing::field::display(addr_list([remote].iter())));
        a.span.record("vtag", a.local_tag);
        let _span = a.enter_span();
        let local = choose_local(&a.shared.local_addrs, &remote);
        a.paths
            .push(Path::new(remote, local, true, &a.shared.config, now));
        a.state = State::CookieWait;
        let cfg = &a.shared.config;
        let mut params = address_params(&a.shared.local_addrs, |_| true);
        let mut types = Vec::new();
        if a.shared.local_addrs.iter().any(|x| x.is_ipv4()) {
            types.push(wire::param_type::IPV4_ADDRESS);
        }
        if a.shared.local_addrs.iter().any(|x| x.is_ipv6()) {
            types.push(wire::param_type::IPV6_ADDRESS);
        }
        if !types.is_empty() {
            params.push(Param::SupportedAddressTypes(types));
        }
        if let Some(x) = cfg.adaptation_indication {
            params.push(adaptation_param(x));
        }
        let init = InitChunk {
            initiate_tag: a.local_tag,
            a_rwnd: cfg.recv_buffer,
            outbound_streams: cfg.outbound_streams,
            inbound_streams: cfg.max_inbound_streams,
            initial_tsn: a.local_initial_tsn,
            params,
        };
        let mut chunk = Vec::new();
        Chunk::Init(init).emit(&mut chunk);
        a.init_packet = Some(chunk);
        a.send_t1(now, false);
        a
    }

    /// Creates the association described by a validated cookie (RFC 9260 §5.1 step D). The
    /// caller then hands it the COOKIE ECHO packet, which is answered with COOKIE ACK.
    pub(crate) fn from_cookie(
        now: Instant,
        shared: Shared,
        seed: [u8; 32],
        cookie: &Cookie,
        source: SocketAddr,
    ) -> Association {
        let mut a = Association::blank(shared, seed, cookie.peer_port);
        a.span
            .record("peer", tracing::field::display(addr_list([source].iter())));
        let _span = a.enter_span();
        a.install_cookie(now, cookie, source);
        a.state = State::Established;
        a.emit(Event::Connected);
        drop(_span);
        a
    }

    fn install_cookie(&mut self, now: Instant, c: &Cookie, source: SocketAddr) {
        self.local_tag = c.local_tag;
        self.peer_tag = c.peer_tag;
        self.local_initial_tsn = c.local_tsn;
        self.next_tsn = TSN_BASE + u64::from(c.local_tsn);
        self.cum_ack = self.next_tsn - 1;
        self.outstanding.clear();
        self.gap_acked = 0;
        self.peer_adaptation = c.peer_adaptation;
        self.unacked_bytes = 0;
        self.rtx_fast = 0;
        self.rtx_timeout = 0;
        self.set_peer_params(
            c.peer_tsn,
            c.peer_rwnd,
            c.outbound_streams,
            c.inbound_streams,
        );
        let cfg = self.shared.config.clone();
        if self.paths.is_empty() {
            for (i, addr) in c.peer_addrs.iter().enumerate() {
                if i > 0 && !self.reachable(addr) {
                    continue;
                }
                let local = if i == 0 {
                    c.local_addr
                } else {
                    choose_local(&self.shared.local_addrs, addr)
                };
                self.paths.push(Path::new(*addr, local, i == 0, &cfg, now));
            }
        }
        let idx = self.path_index_or_add(now, source, c.local_addr);
        self.confirm_path(idx, false);
        self.primary = 0;
        self.data_path = 0;
        for p in &mut self.paths {
            p.ssthresh = (c.peer_rwnd as usize).max(p.initial_cwnd());
        }
        self.span.record("vtag", self.local_tag);
        self.record_handshake();
    }

    /// Enters the association's span; with logging off (the span disabled) this is a
    /// single test.
    fn enter_span(&self) -> Option<tracing::span::EnteredSpan> {
        (!self.span.is_disabled()).then(|| self.span.clone().entered())
    }

    /// Names the peer's tag and addresses, once the handshake has given them, in the
    /// association's span.
    fn record_handshake(&self) {
        if self.span.is_disabled() {
            return;
        }
        self.span.record("peer_vtag", self.peer_tag);
        let paths = addr_list(self.paths.iter().map(|p| &p.remote));
        self.span
            .record("peer_addrs", tracing::field::display(paths));
    }

    fn set_peer_params(&mut self, peer_tsn: u32, peer_rwnd: u32, out: u16, inb: u16) {
        self.peer_cum = TSN_BASE + u64::from(peer_tsn) - 1;
        self.highest_rx = self.peer_cum;
        self.rx_ranges.clear();
        self.reasm.clear();
        self.peer_rwnd = peer_rwnd as usize;
        self.peer_initial_rwnd = peer_rwnd as usize;
        self.out_streams = out;
        self.in_streams = inb;
        self.out_ssn = vec![0; usize::from(out)];
        self.in_ssn = vec![0; usize::from(inb)];
        self.ordered = (0..inb).map(|_| BTreeMap::new()).collect();
    }

    // --------------------------------------------------------------------------------------
    // Public API
    // --------------------------------------------------------------------------------------

    /// Current state.
    pub fn state(&self) -> State {
        self.state
    }

    /// Whether the association has closed (shutdown complete or aborted) and has nothing
    /// left to send and nothing left for the application to read (a graceful shutdown
    /// delivers every message, RFC 9260 §9.2, also to a reader that comes late).
    pub fn is_drained(&self) -> bool {
        self.state == State::Closed && self.ctrl.is_empty() && self.ready.is_empty()
    }

    /// Our verification tag (what the peer puts in its packets).
    pub fn local_tag(&self) -> u32 {
        self.local_tag
    }

    /// The peer's verification tag (0 before it is known).
    pub fn peer_tag(&self) -> u32 {
        self.peer_tag
    }

    /// The peer's SCTP port.
    pub fn peer_port(&self) -> u16 {
        self.peer_port
    }

    /// Peer transport addresses, in the order they were learned.
    pub fn remote_addresses(&self) -> Vec<SocketAddr> {
        self.paths.iter().map(|p| p.remote).collect()
    }

    /// The peer's Adaptation Layer Indication (RFC 5061 §4.2.7), from its INIT or INIT ACK;
    /// [`crate::ddp_adapt::PeerAdaptation::classify`] applies RFC 5043 §11.1 to it.
    pub fn peer_adaptation_indication(&self) -> Option<u32> {
        self.peer_adaptation
    }

    /// Negotiated (outbound, inbound) stream counts.
    pub fn streams(&self) -> (u16, u16) {
        (self.out_streams, self.in_streams)
    }

    /// Per-path statistics.
    pub fn path_stats(&self) -> Vec<PathStats> {
        // With CMT every active path carries new data.
        let striped = self.shared.config.cmt.is_some()
            && self.paths.iter().any(|p| p.state == PathState::Active);
        self.paths
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let data = if striped {
                    p.state == PathState::Active
                } else {
                    i == self.data_path
                };
                p.snapshot(i == self.primary, data)
            })
            .collect()
    }

    /// Changes how CMT spreads new data over the paths, from the next packet on (for
    /// example from bandwidth to latency when the traffic changes). Returns `false`, changing
    /// nothing, when CMT is off.
    pub fn set_cmt_scheduler(&mut self, scheduler: Scheduler) -> bool {
        match self.shared.config.cmt.as_mut() {
            Some(c) => {
                c.scheduler = scheduler;
                true
            }
            None => false,
        }
    }

    /// The CMT configuration in force, if CMT is on.
    pub fn cmt(&self) -> Option<&CmtConfig> {
        self.shared.config.cmt.as_ref()
    }

    /// Association-wide counters.
    pub fn stats(&self) -> &AssociationStats {
        &self.stats
    }

    /// Bytes accepted by `send` and not yet acknowledged.
    pub fn buffered_amount(&self) -> usize {
        self.queued_bytes
    }

    /// DATA chunks of `stream` accepted by `send` and not yet acknowledged: queued, or sent
    /// and neither cumulatively nor selectively acknowledged (what RFC 5043 §10 bounds).
    pub fn unacked_chunks(&self, stream: u16) -> usize {
        self.queue.iter().filter(|p| p.stream == stream).count()
            + self
                .outstanding
                .iter()
                .filter(|c| c.stream == stream && !c.acked)
                .count()
    }

    /// Makes `remote` the primary path.
    pub fn set_primary(&mut self, remote: SocketAddr) -> Result<(), PathError> {
        let _span = self.enter_span();
        let i = self
            .path_index(remote)
            .ok_or(PathError::UnknownAddress(remote))?;
        if !self.paths[i].confirmed() {
            return Err(PathError::Unconfirmed(remote));
        }
        self.primary = i;
        self.reselect_data_path();
        Ok(())
    }

    /// Sets the path MTU (IP level) of the path to `remote`.
    pub fn set_path_mtu(&mut self, remote: SocketAddr, pmtu: usize) -> Result<(), PathError> {
        let i = self
            .path_index(remote)
            .ok_or(PathError::UnknownAddress(remote))?;
        self.paths[i].pmtu = pmtu.max(68);
        Ok(())
    }

    /// Queues a user message on `stream`. Messages larger than one packet are fragmented
    /// (RFC 9260 §6.9).
    pub fn send(
        &mut self,
        stream: u16,
        ppid: u32,
        unordered: bool,
        data: &[u8],
    ) -> Result<(), SendError> {
        self.check_send(stream, data.len())?;
        let frag = self.fragment_size();
        let n = data.len().div_ceil(frag);
        self.queue_message(stream, ppid, unordered, data.len(), n, |i| {
            data.chunks(frag).nth(i).unwrap_or_default().to_vec()
        });
        Ok(())
    }

    /// [`Association::send`] taking the message by value: one that fits a single chunk is
    /// queued as it is, without a copy.
    pub fn send_owned(
        &mut self,
        stream: u16,
        ppid: u32,
        unordered: bool,
        data: Vec<u8>,
    ) -> Result<(), SendError> {
        self.check_send(stream, data.len())?;
        let frag = self.fragment_size();
        if data.len() > frag {
            return self.send(stream, ppid, unordered, &data);
        }
        let len = data.len();
        let mut data = Some(data);
        self.queue_message(stream, ppid, unordered, len, 1, |_| {
            data.take().unwrap_or_default()
        });
        Ok(())
    }

    /// Whether a message of `len` bytes on `stream` would be queued now (the checks of
    /// [`Association::send`]).
    pub fn check_send(&self, stream: u16, len: usize) -> Result<(), SendError> {
        match self.state {
            State::CookieWait | State::CookieEchoed | State::Established => {}
            s => return Err(SendError::InvalidState(s)),
        }
        if stream >= self.out_streams {
            return Err(SendError::InvalidStream {
                stream,
                streams: self.out_streams,
            });
        }
        if len == 0 {
            return Err(SendError::Empty);
        }
        let max = if self.peer_initial_rwnd > 0 {
            self.peer_initial_rwnd
        } else {
            self.shared.config.send_buffer
        };
        if len > max {
            return Err(SendError::TooLarge { len, max });
        }
        let limit = self.shared.config.send_buffer;
        if self.queued_bytes > 0 && self.queued_bytes + len > limit {
            return Err(SendError::BufferFull {
                queued: self.queued_bytes,
                limit,
            });
        }
        Ok(())
    }

    /// Queues the `n` fragments (`part(i)`) of a checked message of `len` bytes.
    fn queue_message(
        &mut self,
        stream: u16,
        ppid: u32,
        unordered: bool,
        len: usize,
        n: usize,
        mut part: impl FnMut(usize) -> Vec<u8>,
    ) {
        if self.out_ssn.len() < usize::from(self.out_streams) {
            self.out_ssn.resize(usize::from(self.out_streams), 0);
        }
        let ssn = if unordered {
            0
        } else {
            let s = &mut self.out_ssn[usize::from(stream)];
            let v = *s;
            *s = s.wrapping_add(1);
            v
        };
        for i in 0..n {
            let mut flags = if unordered { data_flags::UNORDERED } else { 0 };
            if i == 0 {
                flags |= data_flags::BEGINNING;
            }
            if i + 1 == n {
                flags |= data_flags::END;
            }
            self.queue.push_back(Pending {
                stream,
                ssn,
                ppid,
                flags,
                data: part(i),
                msg_len: len,
            });
        }
        self.queued_bytes += len;
        self.stats.messages_sent += 1;
        if self.total_flight() == 0 {
            self.burst_budget = self.burst_budget.max(self.shared.config.max_burst);
        }
    }

    /// The next received message, in delivery order.
    pub fn recv(&mut self) -> Option<Message> {
        let m = self.ready.pop_front()?;
        self.rx_held = self.rx_held.saturating_sub(m.data.len());
        self.stats.messages_received += 1;
        // Receiver-side silly window avoidance: announce the reopened window only once it
        // has grown by at least min(half the buffer, one packet) since last advertised.
        let rwnd = self.rwnd();
        let mtu = self.paths.get(self.sack_path).map_or(1500, |p| p.pmtu);
        let step = (self.shared.config.recv_buffer as usize / 2).min(mtu);
        // Only a window that was advertised as less than half the buffer is worth an update
        // of its own; otherwise the next regular SACK carries the new value.
        let half = self.shared.config.recv_buffer as usize / 2;
        if self.state_accepts_data() && self.last_rwnd < half && rwnd >= self.last_rwnd + step {
            self.sack = SackState::Now;
        }
        Some(m)
    }

    /// Starts the graceful shutdown (RFC 9260 §9.2): queued data is still delivered.
    pub fn shutdown(&mut self, now: Instant) {
        let _span = self.enter_span();
        match self.state {
            State::Established => {
                self.state = State::ShutdownPending;
                self.progress_shutdown(now);
            }
            State::CookieWait | State::CookieEchoed => self.abort(),
            _ => {}
        }
    }

    /// Aborts the association (RFC 9260 §9.1): sends ABORT with a User-Initiated Abort cause
    /// and closes at once.
    pub fn abort(&mut self) {
        let _span = self.enter_span();
        if self.state == State::Closed {
            return;
        }
        if self.peer_tag != 0 {
            let p = self.data_path;
            let vtag = self.peer_tag;
            self.queue_ctrl(
                p,
                vtag,
                &[abort_chunk(ErrorCause::UserInitiatedAbort(Vec::new()))],
            );
        }
        self.close(Event::Aborted {
            reason: AbortReason::Local,
        });
    }

    pub(crate) fn events_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// When [`Association::handle_timeout`] should next be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.state == State::Closed {
            return None;
        }
        let mut t: Option<Instant> = None;
        let mut min = |x: Option<Instant>| {
            if let Some(x) = x {
                t = Some(t.map_or(x, |t| t.min(x)));
            }
        };
        min(self.t1);
        min(self.t2);
        if let SackState::Delayed(d) = self.sack {
            min(Some(d));
        }
        if matches!(self.state, State::CookieWait | State::CookieEchoed) {
            return t;
        }
        for p in &self.paths {
            min(p.t3);
            min(p.pto);
            min(p.hb_pending.as_ref().map(|h| h.deadline));
            min(p.hb_due(&self.shared.config));
        }
        t
    }

    /// Processes timer expiry.
    pub fn handle_timeout(&mut self, now: Instant) {
        let _span = self.enter_span();
        if self.state == State::Closed {
            return;
        }
        self.add_burst();
        if self.t1.is_some_and(|t| t <= now) {
            self.t1_expired(now);
        }
        if self.t2.is_some_and(|t| t <= now) {
            self.t2_expired(now);
        }
        if let SackState::Delayed(d) = self.sack
            && d <= now
        {
            self.sack = SackState::Now;
        }
        if matches!(
            self.state,
            State::CookieWait | State::CookieEchoed | State::Closed
        ) {
            return;
        }
        for i in 0..self.paths.len() {
            if self.state == State::Closed {
                return;
            }
            if self.paths[i].t3.is_some_and(|t| t <= now) {
                self.t3_expired(now, i);
            } else if self.paths[i].pto.is_some_and(|t| t <= now) {
                self.tail_loss_probe(now, i);
            }
            if self.state == State::Closed {
                return;
            }
            if self.paths[i]
                .hb_pending
                .as_ref()
                .is_some_and(|h| h.deadline <= now)
            {
                self.hb_timeout(now, i);
            }
            if self.state == State::Closed {
                return;
            }
            if self.paths[i]
                .hb_due(&self.shared.config)
                .is_some_and(|t| t <= now)
            {
                self.send_heartbeat(now, i);
            }
        }
    }

    // --------------------------------------------------------------------------------------
    // Paths
    // --------------------------------------------------------------------------------------

    /// Whether we have a local address of `a`'s family (paths we could never use are not
    /// created).
    fn reachable(&self, a: &SocketAddr) -> bool {
        self.shared
            .local_addrs
            .iter()
            .any(|l| l.is_ipv4() == a.is_ipv4())
    }

    fn path_index(&self, remote: SocketAddr) -> Option<usize> {
        self.paths.iter().position(|p| p.remote == remote)
    }

    fn path_index_or_add(&mut self, now: Instant, remote: SocketAddr, local: SocketAddr) -> usize {
        if let Some(i) = self.path_index(remote) {
            return i;
        }
        let cfg = self.shared.config.clone();
        self.paths.push(Path::new(remote, local, false, &cfg, now));
        self.paths.len() - 1
    }

    fn confirm_path(&mut self, i: usize, notify: bool) {
        let p = &mut self.paths[i];
        let was = p.state;
        p.errors = 0;
        p.state = PathState::Active;
        p.hb_now = false;
        if notify && was != PathState::Active {
            let remote = p.remote;
            self.emit(Event::PathUp { remote });
        }
        if was != PathState::Active {
            self.reselect_data_path();
        }
    }

    /// RFC 9260 §6.4 / RFC 7829 §5.1: new data goes to the primary if it is active,
    /// otherwise to an active alternate; with none active, to a Potentially Failed path with
    /// the fewest errors; with none of those either (dormant), to the path with the fewest
    /// errors, the primary on a tie.
    fn reselect_data_path(&mut self) {
        // Among the candidates: the primary if it is one (active paths) or if no other has
        // fewer errors (Potentially Failed and inactive paths: RFC 7829 §5.1, the one with
        // the lowest error count).
        let best =
            |pred: &dyn Fn(&Path) -> bool, paths: &[Path], primary: usize| -> Option<usize> {
                let fewest = paths
                    .iter()
                    .enumerate()
                    .filter(|(_, p)| pred(p))
                    .min_by_key(|(i, p)| (p.errors, *i != primary))
                    .map(|(i, _)| i)?;
                match paths.get(primary) {
                    Some(p) if pred(p) && p.state == PathState::Active => Some(primary),
                    _ => Some(fewest),
                }
            };
        let chosen = best(&|p| p.state == PathState::Active, &self.paths, self.primary)
            .or_else(|| {
                best(
                    &|p| p.state == PathState::PotentiallyFailed,
                    &self.paths,
                    self.primary,
                )
            })
            .or_else(|| {
                best(
                    &|p| p.state == PathState::Inactive,
                    &self.paths,
                    self.primary,
                )
            })
            .unwrap_or(self.primary);
        if chosen != self.data_path {
            self.data_path = chosen;
            if let Some(p) = self.paths.get(chosen) {
                let remote = p.remote;
                self.emit(Event::PrimaryChanged { remote });
            }
        }
    }

    /// Destination for retransmitting a chunk last sent to `last` (RFC 9260 §6.4.1: an active
    /// alternate when there is one).
    fn rtx_path(&self, last: usize) -> usize {
        if let Some(cmt) = &self.shared.config.cmt {
            return self.cmt_rtx_path(cmt.rtx_policy, last);
        }
        if self.paths.len() > 1 {
            if self.data_path != last && self.paths[self.data_path].state == PathState::Active {
                return self.data_path;
            }
            if let Some(i) = (0..self.paths.len())
                .filter(|&i| i != last && self.paths[i].state == PathState::Active)
                .min_by_key(|&i| self.paths[i].errors)
            {
                return i;
            }
        }
        self.data_path
    }

    /// CMT's retransmission policies: an active path chosen by `policy`; ties go to a path
    /// other than `last`. With no active path, the data path.
    ///
    /// A path whose error counter is not zero timed out (T3-rtx, RFC 9260 §6.3.3) and has
    /// acknowledged nothing sent since: while another active path has no errors, only those
    /// are candidates (RFC 9260 §6.4.1: a retransmission goes to an active destination
    /// "different from the last"; RTX-SSTHRESH and RTX-CWND choose among destinations that
    /// work). Without this, RTX-SSTHRESH sends retransmissions to a path that just failed
    /// whenever its halved threshold is still above the other path's (a slower path that
    /// lost to congestion), and the retransmission is lost again and waits for the failed
    /// path's backed-off timer, while the receiver's window stays blocked behind it.
    fn cmt_rtx_path(&self, policy: RtxPolicy, last: usize) -> usize {
        let healthy = self
            .paths
            .iter()
            .any(|p| p.state == PathState::Active && p.errors == 0);
        let active = |i: usize| {
            self.paths
                .get(i)
                .is_some_and(|p| p.state == PathState::Active && (!healthy || p.errors == 0))
        };
        let room = |i: usize| self.paths[i].flight < self.paths[i].cwnd;
        let by = |key: &dyn Fn(&Path) -> usize| {
            (0..self.paths.len())
                .filter(|&i| active(i))
                .max_by_key(|&i| (key(&self.paths[i]), i != last))
        };
        let chosen = match policy {
            RtxPolicy::Same => active(last).then_some(last),
            RtxPolicy::Asap => {
                if active(last) && room(last) {
                    Some(last)
                } else {
                    (0..self.paths.len()).find(|&i| active(i) && room(i))
                }
            }
            RtxPolicy::Cwnd => by(&|p| p.cwnd),
            RtxPolicy::Ssthresh => None,
        };
        chosen
            .or_else(|| by(&|p| p.ssthresh))
            .unwrap_or(self.data_path)
    }

    /// One more consecutive timeout on path `i` (RFC 9260 §8.2, RFC 7829 §5.1).
    fn path_error(&mut self, now: Instant, i: usize) {
        self.paths[i].last_error = Some(now);
        let cfg = &self.shared.config;
        let pmr = cfg.path_max_retrans;
        let pfmr = cfg.pf_max_retrans;
        let p = &mut self.paths[i];
        p.errors = p.errors.saturating_add(1);
        let remote = p.remote;
        if p.state == PathState::Unconfirmed {
            return;
        }
        if p.errors > pmr {
            if p.state != PathState::Inactive {
                p.state = PathState::Inactive;
                p.hb_now = false;
                self.emit(Event::PathDown { remote });
                self.reselect_data_path();
            }
        } else if let Some(pfmr) = pfmr
            && pfmr < pmr
            && p.errors > pfmr
            && p.state == PathState::Active
        {
            p.state = PathState::PotentiallyFailed;
            // Probe at once, then every RTO while in PF.
            p.hb_now = true;
            self.emit(Event::PathPotentiallyFailed { remote });
            self.reselect_data_path();
        }
    }

    /// One more consecutive failure of the peer (RFC 9260 §8.1). Returns `true` when the
    /// association was closed.
    fn assoc_error(&mut self) -> bool {
        self.assoc_errors = self.assoc_errors.saturating_add(1);
        if self.assoc_errors > self.shared.config.association_max_retrans {
            self.close(Event::Aborted {
                reason: AbortReason::Timeout,
            });
            return true;
        }
        false
    }

    /// Evidence that path `i` works: acknowledged data or a heartbeat reply.
    fn path_ok(&mut self, i: usize) {
        self.assoc_errors = 0;
        let p = &mut self.paths[i];
        p.errors = 0;
        if matches!(p.state, PathState::PotentiallyFailed | PathState::Inactive) {
            self.confirm_path(i, true);
        }
    }

    fn send_heartbeat(&mut self, now: Instant, i: usize) {
        let nonce = self.rng.next_u64();
        let rto = self.paths[i].rto;
        let jitter_span = rto.as_nanos() as u64;
        let jitter =
            self.rng.below(jitter_span.saturating_add(1)) as i64 - (jitter_span / 2) as i64;
        let p = &mut self.paths[i];
        p.hb_pending = Some(HbPending {
            nonce,
            deadline: now + rto,
        });
        p.hb_now = false;
        p.hb_jitter = jitter;
        p.last_active = now;
        p.stats.heartbeats_sent += 1;
        let mut info = Vec::with_capacity(32);
        info.extend_from_slice(&nonce.to_be_bytes());
        info.extend_from_slice(&now.as_nanos().to_be_bytes());
        put_addr(&mut info, &p.remote);
        let vtag = self.peer_tag;
        self.queue_ctrl(i, vtag, &[Chunk::Heartbeat(info)]);
    }

    fn hb_timeout(&mut self, now: Instant, i: usize) {
        let cfg = self.shared.config.clone();
        let p = &mut self.paths[i];
        p.hb_pending = None;
        p.last_active = now;
        p.backoff(&cfg);
        let counts = p.state != PathState::Unconfirmed;
        self.path_error(now, i);
        // RFC 7829 §5.1: a Potentially Failed (or unconfirmed) path is probed again at once,
        // so probes go out one RTO apart (with the RTO backed off).
        let p = &mut self.paths[i];
        if matches!(
            p.state,
            PathState::PotentiallyFailed | PathState::Unconfirmed
        ) {
            p.hb_now = true;
        }
        if counts {
            self.assoc_error();
        }
    }

    fn handle_heartbeat_ack(&mut self, now: Instant, info: &[u8]) {
        let (Some(nonce), Some(sent)) = (be64(info, 0), be64(info, 8)) else {
            return;
        };
        let Some(addr) = get_addr(info.get(16..).unwrap_or(&[])) else {
            return;
        };
        let Some(i) = self.path_index(addr) else {
            return;
        };
        // RFC 9260 §8.3: only a reply carrying the nonce we sent counts.
        if self.paths[i].hb_pending.as_ref().map(|h| h.nonce) != Some(nonce) {
            return;
        }
        let cfg = self.shared.config.clone();
        let p = &mut self.paths[i];
        p.hb_pending = None;
        p.last_active = now;
        let rtt = now.saturating_duration_since(Instant::from_nanos(sent));
        p.rtt_sample(rtt, &cfg);
        self.path_ok(i);
        if self.paths[i].state == PathState::Unconfirmed {
            self.confirm_path(i, true);
        }
    }

    // --------------------------------------------------------------------------------------
    // Output
    // --------------------------------------------------------------------------------------

    fn header(&self, vtag: u32) -> CommonHeader {
        CommonHeader {
            src_port: self.shared.local_port,
            dst_port: self.peer_port,
            verification_tag: vtag,
        }
    }

    fn queue_ctrl(&mut self, path: usize, vtag: u32, chunks: &[Chunk<'_>]) {
        let Some(p) = self.paths.get(path) else {
            return;
        };
        let (local, remote) = (p.local, p.remote);
        self.queue_to(local, remote, vtag, chunks);
    }

    fn queue_to(&mut self, local: SocketAddr, remote: SocketAddr, vtag: u32, chunks: &[Chunk<'_>]) {
        let bytes = wire::build_packet(&self.header(vtag), chunks);
        self.account_sent(remote, bytes.len());
        self.ctrl.push_back(Transmit {
            local,
            remote,
            bytes,
        });
    }

    fn account_sent(&mut self, remote: SocketAddr, len: usize) {
        if let Some(i) = self.path_index(remote) {
            let s = &mut self.paths[i].stats;
            s.packets_sent += 1;
            s.bytes_sent += len as u64;
        }
    }

    /// Max.Burst (RFC 9260 §6.1): every packet or timeout handled lets the output routine
    /// send up to Max.Burst packets of new data; the allowance ends when `poll_transmit`
    /// reports that nothing more can be sent.
    fn add_burst(&mut self) {
        // With CMT each active path may send a burst.
        let paths = if self.shared.config.cmt.is_some() {
            self.paths
                .iter()
                .filter(|p| p.state == PathState::Active)
                .count()
                .max(1)
        } else {
            1
        };
        let m = self
            .shared
            .config
            .max_burst
            .saturating_mul(u32::try_from(paths).unwrap_or(u32::MAX));
        self.burst_budget = self
            .burst_budget
            .saturating_add(m)
            .min(m.saturating_mul(16));
    }

    /// The next packet to send, if any.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        let _span = self.enter_span();
        if let Some(t) = self.ctrl.pop_front() {
            return Some(t);
        }
        let t = match self.state {
            State::Established
            | State::ShutdownPending
            | State::ShutdownReceived
            | State::ShutdownSent
            | State::ShutdownAckSent => self.build_data_packet(now),
            _ => None,
        };
        if t.is_none() {
            self.burst_budget = 0;
        }
        t
    }

    fn fragment_size(&self) -> usize {
        let mtu = self
            .paths
            .iter()
            .filter(|p| p.confirmed())
            .map(|p| p.mtu(&self.shared.config))
            .min()
            .unwrap_or(1200);
        // One DATA chunk filling a packet, rounded down to a multiple of 4.
        (mtu.saturating_sub(COMMON_HEADER_LEN + DATA_HEADER_LEN) & !3).max(4)
    }

    fn total_flight(&self) -> usize {
        self.paths.iter().map(|p| p.flight).sum()
    }

    fn rwnd(&self) -> usize {
        (self.shared.config.recv_buffer as usize).saturating_sub(self.rx_held)
    }

    fn state_accepts_data(&self) -> bool {
        matches!(
            self.state,
            State::Established | State::ShutdownPending | State::ShutdownSent
        )
    }

    fn make_sack(&mut self, room: usize) -> SackChunk {
        let cum = self.peer_cum;
        let max_items = room.saturating_sub(16) / 4;
        let gaps: Vec<GapBlock> = self
            .rx_ranges
            .iter()
            .filter_map(|&(s, e)| {
                let (s, e) = (s - cum, e - cum);
                (e <= 0xffff).then_some(GapBlock {
                    start: s as u16,
                    end: e as u16,
                })
            })
            .take(max_items)
            .collect();
        let dup_room = max_items.saturating_sub(gaps.len());
        let dups: Vec<u32> = self.dups.drain(..).take(dup_room).collect();
        self.dups.clear();
        let rwnd = self.rwnd();
        self.last_rwnd = rwnd;
        let dac = self.delayed_ack();
        let flags = if dac && self.packets_since_sack >= 2 {
            wire::SACK_FLAG_CMT_DAC
        } else {
            0
        };
        self.sack = SackState::None;
        self.packets_since_sack = 0;
        self.stats.sacks_sent += 1;
        SackChunk {
            flags,
            cum_tsn_ack: cum as u32,
            a_rwnd: rwnd.min(u32::MAX as usize) as u32,
            gaps,
            dup_tsns: dups,
        }
    }

    fn flush_sack(&mut self) {
        let d = self.sack_path.min(self.paths.len().saturating_sub(1));
        let Some(p) = self.paths.get(d) else {
            return;
        };
        let mtu = p.mtu(&self.shared.config);
        let sack = self.make_sack(mtu.saturating_sub(COMMON_HEADER_LEN + 64).min(1024));
        let mut chunks = vec![Chunk::Sack(sack)];
        if !self.pending_errors.is_empty() {
            chunks.push(Chunk::Error(std::mem::take(&mut self.pending_errors)));
        }
        let vtag = self.peer_tag;
        self.queue_ctrl(d, vtag, &chunks);
    }

    fn build_data_packet(&mut self, now: Instant) -> Option<Transmit> {
        // Choose what to send and where.
        let mut dest: Option<usize> = None;
        let mut kind = Rtx::No;
        if self.rtx_fast > 0 || self.rtx_timeout > 0 {
            let want = if self.rtx_fast > 0 {
                Rtx::Fast
            } else {
                Rtx::Timeout
            };
            if let Some(c) = self.outstanding.iter().find(|c| c.rtx == want) {
                let d = match want {
                    Rtx::Fast
                        if self.shared.config.cmt.is_none()
                            && self.paths[c.path].state == PathState::Active =>
                    {
                        c.path
                    }
                    _ => self.rtx_path(c.path),
                };
                let force = match want {
                    Rtx::Fast => self.fast_once,
                    _ => self.t3_once,
                };
                let p = &self.paths[d];
                if force || p.flight < p.cwnd {
                    dest = Some(d);
                    kind = want;
                }
            }
        }
        let mut new_data = false;
        if dest.is_none()
            && !self.queue.is_empty()
            && matches!(
                self.state,
                State::Established | State::ShutdownPending | State::ShutdownReceived
            )
            && self.burst_budget > 0
        {
            let d = self.new_data_path(now);
            let p = &self.paths[d];
            let first = self.queue.front().map_or(0, |c| c.data.len());
            let flight = self.total_flight();
            let rwnd_ok = first <= self.peer_rwnd || flight == 0;
            if p.confirmed() && p.flight < p.cwnd && rwnd_ok {
                dest = Some(d);
                new_data = true;
            }
        }
        let sack_due = match self.sack {
            SackState::Now => true,
            SackState::Delayed(_) => dest.is_some(),
            SackState::None => false,
        };
        let errors_due = !self.pending_errors.is_empty();
        if dest.is_none() && !sack_due && !errors_due {
            return None;
        }
        let d = dest.unwrap_or(self.sack_path.min(self.paths.len().saturating_sub(1)));
        let mtu = self.paths.get(d)?.mtu(&self.shared.config);
        let mut buf = Vec::with_capacity(mtu);
        self.header(self.peer_tag).emit(&mut buf);
        if sack_due {
            let room = mtu.saturating_sub(buf.len() + 64);
            let sack = self.make_sack(room.min(1024));
            Chunk::Sack(sack).emit(&mut buf);
        }
        if errors_due {
            let causes = std::mem::take(&mut self.pending_errors);
            Chunk::Error(causes).emit(&mut buf);
        }
        let mut last_data = None;
        if kind != Rtx::No {
            self.fill_retransmissions(now, d, kind, mtu, &mut buf, &mut last_data);
            match kind {
                Rtx::Fast => self.fast_once = false,
                _ => self.t3_once = false,
            }
        } else if new_data {
            self.fill_new_data(now, d, mtu, &mut buf, &mut last_data);
            if last_data.is_some() {
                self.burst_budget = self.burst_budget.saturating_sub(1);
            }
        }
        if let Some(at) = last_data {
            if self.paths[d].t3.is_none() {
                self.paths[d].t3 = Some(now + self.paths[d].rto);
            }
            // With CMT's tail handling: a retransmission after which nothing can be sent
            // until a SACK arrives (no other retransmission pending, no new data that fits
            // the peer's window) asks for its SACK at once with the I bit (RFC 9260
            // §3.3.1). A lone retransmission — after T3-rtx, whose window is one packet, or
            // a tail loss probe — otherwise waits for the receiver's delayed-ACK timer
            // (200 ms; a CMT receiver delays even a SACK for data that fills a gap), with
            // the sender idle all that time.
            if kind != Rtx::No
                && self.tail_handling()
                && self.is_tail()
                && let Some(flags) = buf.get_mut(at + 1)
            {
                *flags |= data_flags::IMMEDIATE;
            }
            self.arm_pto(now, d);
        }
        if buf.len() <= COMMON_HEADER_LEN {
            return None;
        }
        wire::finish_packet(&mut buf);
        let p = &mut self.paths[d];
        p.stats.packets_sent += 1;
        p.stats.bytes_sent += buf.len() as u64;
        Some(Transmit {
            local: p.local,
            remote: p.remote,
            bytes: buf,
        })
    }

    /// Whether CMT's tail handling is on (the tail loss probe, the I bit on lone
    /// retransmissions).
    fn tail_handling(&self) -> bool {
        self.cmt().is_some_and(|c| c.tail_loss_probe)
    }

    /// Whether CMT's delayed acknowledgement (DAC) is on.
    fn delayed_ack(&self) -> bool {
        self.cmt().is_some_and(|c| c.delayed_ack)
    }

    /// Whether new data could go out now: some is queued and its first chunk fits the
    /// peer's window.
    fn can_send_new(&self) -> bool {
        self.queue
            .front()
            .is_some_and(|c| c.data.len() <= self.peer_rwnd)
    }

    /// Nothing can be sent until a SACK arrives: no retransmission is pending and no new
    /// data can go out.
    fn is_tail(&self) -> bool {
        self.rtx_fast == 0 && self.rtx_timeout == 0 && !self.can_send_new()
    }

    /// RFC 9260 §7.2.1: after an idle period the window of path `i` decays to
    /// max(cwnd / 2, 4 * MTU) per RTO without transmission.
    fn decay_idle_window(&mut self, now: Instant, i: usize) {
        let p = &mut self.paths[i];
        if p.flight == 0 && !p.rto.is_zero() {
            let idle = now.saturating_duration_since(p.last_active);
            let periods = idle.as_nanos() / p.rto.as_nanos();
            for _ in 0..periods.min(32) {
                p.cwnd = (p.cwnd / 2).max(4 * p.pmtu);
            }
        }
    }

    /// The path for the next packet of new data. Without CMT, the data path (RFC 9260
    /// §6.4). With CMT, an active path with room in its window chosen by the scheduler; a
    /// full one when every active path is full (nothing is sent then); the data path when
    /// none is active (CMT-PF: the Potentially Failed path with the fewest errors).
    fn new_data_path(&mut self, now: Instant) -> usize {
        let Some(cmt) = self.shared.config.cmt.as_ref() else {
            self.decay_idle_window(now, self.data_path);
            return self.data_path;
        };
        let scheduler = cmt.scheduler;
        let n = self.paths.len();
        let active: Vec<usize> = (0..n)
            .filter(|&i| self.paths[i].state == PathState::Active)
            .collect();
        if active.is_empty() {
            self.decay_idle_window(now, self.data_path);
            return self.data_path;
        }
        for &i in &active {
            self.decay_idle_window(now, i);
        }
        let room = |p: &Path| p.flight < p.cwnd;
        if let Scheduler::LowestRtt { small_message } = scheduler
            && self
                .queue
                .front()
                .is_some_and(|c| c.msg_len <= small_message)
        {
            if let Some(&i) = active
                .iter()
                .filter(|&&i| room(&self.paths[i]))
                .min_by(|&&a, &&b| {
                    let rtt = |i: usize| self.paths[i].srtt.unwrap_or(f64::INFINITY);
                    rtt(a).total_cmp(&rtt(b))
                })
            {
                return i;
            }
            return active[0];
        }
        for k in 0..n {
            let i = (self.rr_next + k) % n;
            if self.paths[i].state == PathState::Active && room(&self.paths[i]) {
                self.rr_next = (i + 1) % n;
                return i;
            }
        }
        active[0]
    }

    fn fill_retransmissions(
        &mut self,
        now: Instant,
        d: usize,
        kind: Rtx,
        mtu: usize,
        buf: &mut Vec<u8>,
        any: &mut Option<usize>,
    ) {
        for c in self.outstanding.iter_mut() {
            if c.rtx != kind {
                continue;
            }
            let size = pad4(c.size());
            if buf.len() + size > mtu && any.is_some() {
                break;
            }
            if buf.len() + size > mtu && buf.len() > COMMON_HEADER_LEN {
                // Control chunks already fill the packet; the chunk goes in the next one.
                break;
            }
            *any = Some(buf.len());
            Chunk::Data(DataChunk {
                flags: c.flags,
                tsn: c.tsn as u32,
                stream: c.stream,
                ssn: c.ssn,
                ppid: c.ppid,
                data: &c.data,
            })
            .emit(buf);
            c.fast_retransmitted_below = Some(self.next_tsn - 1);
            c.rtx = Rtx::No;
            c.tx_count += 1;
            c.path = d;
            c.sent_at = now;
            c.in_flight = true;
            c.misses = 0;
            if kind == Rtx::Fast {
                self.rtx_fast -= 1;
            } else {
                self.rtx_timeout -= 1;
            }
            let p = &mut self.paths[d];
            p.flight += c.size();
            p.stats.chunks_retransmitted += 1;
            p.stats.bytes_retransmitted += c.data.len() as u64;
            // Karn: no RTT sample from a retransmitted chunk.
            if p.rtt_probe.is_some_and(|(t, _)| t == c.tsn) {
                p.rtt_probe = None;
            }
            self.peer_rwnd = self.peer_rwnd.saturating_sub(c.data.len());
        }
    }

    fn fill_new_data(
        &mut self,
        now: Instant,
        d: usize,
        mtu: usize,
        buf: &mut Vec<u8>,
        any: &mut Option<usize>,
    ) {
        let zero_window_probe = self.total_flight() == 0;
        while let Some(front) = self.queue.front() {
            let size = pad4(DATA_HEADER_LEN + front.data.len());
            if buf.len() + size > mtu {
                break;
            }
            if (any.is_some() || !zero_window_probe) && front.data.len() > self.peer_rwnd {
                break;
            }
            let Some(c) = self.queue.pop_front() else {
                break;
            };
            let probe = zero_window_probe && any.is_none() && c.data.len() > self.peer_rwnd;
            let tsn = self.next_tsn;
            self.next_tsn += 1;
            *any = Some(buf.len());
            Chunk::Data(DataChunk {
                flags: c.flags,
                tsn: tsn as u32,
                stream: c.stream,
                ssn: c.ssn,
                ppid: c.ppid,
                data: &c.data,
            })
            .emit(buf);
            self.peer_rwnd = self.peer_rwnd.saturating_sub(c.data.len());
            let p = &mut self.paths[d];
            let sent = Sent {
                tsn,
                stream: c.stream,
                ssn: c.ssn,
                ppid: c.ppid,
                flags: c.flags,
                data: c.data,
                path: d,
                sent_at: now,
                tx_count: 1,
                misses: 0,
                acked: false,
                in_flight: true,
                rtx: Rtx::No,
                fast_retransmitted: false,
                fast_retransmitted_below: None,
                zero_window_probe: probe,
                probed: false,
            };
            p.flight += sent.size();
            p.stats.data_chunks_sent += 1;
            p.last_active = now;
            if p.rtt_probe.is_none() {
                p.rtt_probe = Some((tsn, now));
            }
            self.unacked_bytes += sent.data.len();
            self.outstanding.push_back(sent);
        }
    }

    // --------------------------------------------------------------------------------------
    // Timers
    // --------------------------------------------------------------------------------------

    fn send_t1(&mut self, now: Instant, retransmission: bool) {
        let i = self.t1_path.min(self.paths.len().saturating_sub(1));
        let Some(p) = self.paths.get(i) else {
            return;
        };
        let (local, remote, rto) = (p.local, p.remote, p.rto);
        let mut bytes = Vec::new();
        match self.state {
            State::CookieWait => {
                // §8.5.1 A: the INIT carries verification tag 0.
                self.header(0).emit(&mut bytes);
                if let Some(c) = &self.init_packet {
                    bytes.extend_from_slice(c);
                }
            }
            State::CookieEchoed => {
                self.header(self.peer_tag).emit(&mut bytes);
                if let Some(c) = &self.cookie_echo {
                    bytes.extend_from_slice(c);
                }
            }
            _ => return,
        }
        wire::finish_packet(&mut bytes);
        tracing::debug!(
            %remote,
            retransmission,
            "SCTP {} sent",
            if self.state == State::CookieWait { "INIT" } else { "COOKIE ECHO" }
        );
        self.account_sent(remote, bytes.len());
        self.ctrl.push_back(Transmit {
            local,
            remote,
            bytes,
        });
        self.t1 = Some(now + rto);
        self.t1_sent = if retransmission { None } else { Some(now) };
    }

    fn t1_expired(&mut self, now: Instant) {
        self.t1_retransmits += 1;
        if self.t1_retransmits > self.shared.config.max_init_retransmits {
            self.close(Event::Aborted {
                reason: AbortReason::Timeout,
            });
            return;
        }
        let cfg = self.shared.config.clone();
        if let Some(p) = self.paths.get_mut(self.t1_path) {
            p.backoff(&cfg);
        }
        // RFC 9260 §5.1.6 / §6.4: try another of the peer's addresses on retransmission.
        if self.paths.len() > 1 {
            let rto = self.paths[self.t1_path].rto;
            self.t1_path = (self.t1_path + 1) % self.paths.len();
            let p = &mut self.paths[self.t1_path];
            p.rto = p.rto.max(rto);
        }
        self.send_t1(now, true);
    }

    fn send_t2(&mut self, now: Instant) {
        let d = self.t2_path.min(self.paths.len().saturating_sub(1));
        let vtag = self.peer_tag;
        match self.state {
            State::ShutdownSent => {
                let cum = self.peer_cum as u32;
                self.queue_ctrl(d, vtag, &[Chunk::Shutdown { cum_tsn_ack: cum }]);
            }
            State::ShutdownAckSent => self.queue_ctrl(d, vtag, &[Chunk::ShutdownAck]),
            _ => return,
        }
        self.t2 = Some(now + self.paths[d].rto);
    }

    fn t2_expired(&mut self, now: Instant) {
        let cfg = self.shared.config.clone();
        let d = self.t2_path;
        self.paths[d].backoff(&cfg);
        self.path_error(now, d);
        if self.assoc_error() {
            return;
        }
        self.t2_path = self.rtx_path(d);
        self.send_t2(now);
    }

    /// RFC 9260 §6.3.3: T3-rtx expired for path `i`.
    fn t3_expired(&mut self, now: Instant, i: usize) {
        self.paths[i].t3 = None;
        self.paths[i].pto = None;
        self.paths[i].tlp_tsn = None;
        self.paths[i].tlp_undecided = false;
        let mut marked = 0;
        let mut oldest_sent = now;
        let mut probes_only = true;
        let mut tsns: Option<(u64, u64)> = None;
        for c in self.outstanding.iter_mut() {
            if c.path == i && c.in_flight && !c.acked {
                tsns = Some(tsns.map_or((c.tsn, c.tsn), |(lo, _)| (lo, c.tsn)));
                oldest_sent = oldest_sent.min(c.sent_at);
                probes_only &= c.zero_window_probe;
                c.in_flight = false;
                if c.rtx == Rtx::Fast {
                    self.rtx_fast -= 1;
                }
                if c.rtx != Rtx::Timeout {
                    self.rtx_timeout += 1;
                }
                c.rtx = Rtx::Timeout;
                marked += 1;
            }
        }
        if marked == 0 {
            return;
        }
        tracing::debug!(
            remote = %self.paths[i].remote,
            at = ?now,
            chunks = marked,
            tsns = ?tsns,
            "SCTP T3-rtx timeout: retransmitting"
        );
        self.stats.t3_expirations += 1;
        let cfg = self.shared.config.clone();
        let p = &mut self.paths[i];
        let mtu = p.pmtu;
        // E1 / §7.2.3.
        p.ssthresh = (p.cwnd / 2).max(4 * mtu);
        p.cwnd = mtu;
        p.pba = 0;
        p.flight = 0;
        p.rtt_probe = None;
        p.recovery_exit = None;
        p.stats.timeouts += 1;
        // E2.
        p.backoff(&cfg);
        self.fast_recovery_exit = None;
        self.t3_once = true;
        // RFC 9260 §6.1 A: while the peer keeps its window closed and keeps acknowledging,
        // unanswered zero-window probes do not count as errors. Only probes: data sent into
        // an open window that timed out says the path failed, even when the window closed
        // since (with several paths, the peer fills its window with what arrives on the
        // others while this path's data is missing).
        let probing = probes_only
            && self.peer_window_closed
            && self.last_sack_at.is_some_and(|t| t >= oldest_sent);
        if !probing {
            self.path_error(now, i);
            self.assoc_error();
        }
    }

    // --------------------------------------------------------------------------------------
    // Input
    // --------------------------------------------------------------------------------------

    /// Processes a packet received on `local` from `remote`. Packets that fail the checksum,
    /// carry other ports or the wrong verification tag are discarded (RFC 9260 §6.8, §8.5).
    pub fn handle_packet(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        data: &[u8],
    ) {
        if Packet::new_verified(data).is_err() {
            self.stats.packets_discarded += 1;
            return;
        }
        self.handle_verified(now, local, remote, data);
    }

    /// [`Association::handle_packet`] after the checksum was verified.
    pub(crate) fn handle_verified(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        data: &[u8],
    ) {
        let _span = self.enter_span();
        if self.state == State::Closed {
            return;
        }
        let Some((vtag, raws)) = self.chunks_of(data) else {
            return;
        };
        match self.check_tag(now, local, remote, vtag, &raws) {
            TagCheck::Discard => {
                self.stats.packets_discarded += 1;
                return;
            }
            TagCheck::Answered => return,
            TagCheck::Accept => {}
        }
        self.stats.packets_received += 1;
        let path = self.path_index(remote);
        if let Some(i) = path {
            self.paths[i].stats.packets_received += 1;
            self.paths[i].local = local;
        }
        self.add_burst();
        let Some(rx) = self.handle_chunks(now, local, remote, vtag, path, &raws) else {
            return;
        };
        if !rx.reports.is_empty() && self.peer_tag != 0 {
            self.queue_to(
                local,
                remote,
                self.peer_tag,
                &[Chunk::Error(rx.reports.clone())],
            );
        }
        self.schedule_sack(now, path, &rx);
        self.progress_shutdown(now);
    }

    /// The packet's verification tag and chunks, if it is for this association (its ports)
    /// and its chunk framing holds; otherwise it is counted as discarded.
    fn chunks_of<'a>(&mut self, data: &'a [u8]) -> Option<(u32, Vec<RawChunk<'a>>)> {
        let pkt = Packet::new_unchecked(data);
        let hdr = pkt.header();
        if hdr.dst_port != self.shared.local_port || hdr.src_port != self.peer_port {
            self.stats.packets_discarded += 1;
            return None;
        }
        let mut raws: Vec<RawChunk<'a>> = Vec::with_capacity(4);
        for r in ChunkIter::new(data.get(COMMON_HEADER_LEN..).unwrap_or_default()) {
            match r {
                Ok(r) => raws.push(r),
                Err(_) => {
                    // Broken chunk framing: nothing in the packet can be trusted.
                    self.stats.packets_discarded += 1;
                    return None;
                }
            }
        }
        if raws.is_empty() {
            self.stats.packets_discarded += 1;
            return None;
        }
        Some((hdr.verification_tag, raws))
    }

    /// The verification tag rules of RFC 9260 §8.5.1: an INIT travels alone with tag 0 (A;
    /// it is handled here), ABORT and SHUTDOWN COMPLETE carry our tag or, with T set, the
    /// peer's (B, C), a COOKIE ECHO is checked against its cookie (D), a SHUTDOWN ACK while
    /// setting up is answered as out of the blue (E), anything else carries our tag.
    fn check_tag(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        vtag: u32,
        raws: &[RawChunk<'_>],
    ) -> TagCheck {
        let Some(first) = raws.first() else {
            return TagCheck::Discard;
        };
        if raws.iter().any(|c| c.chunk_type == chunk_type::INIT) {
            if raws.len() != 1 || vtag != 0 {
                return TagCheck::Discard;
            }
            return match Chunk::parse(first) {
                Ok(Chunk::Init(init)) => {
                    self.handle_init(now, local, remote, &init);
                    TagCheck::Answered
                }
                _ => TagCheck::Discard,
            };
        }
        if let Some(c) = raws.iter().find(|c| {
            c.chunk_type == chunk_type::ABORT || c.chunk_type == chunk_type::SHUTDOWN_COMPLETE
        }) {
            let t_bit = c.flags & 1 != 0;
            let ok = if t_bit {
                vtag == self.peer_tag
            } else {
                vtag == self.local_tag
            };
            return if ok {
                TagCheck::Accept
            } else {
                TagCheck::Discard
            };
        }
        if first.chunk_type == chunk_type::COOKIE_ECHO {
            // Rule D: checked against the cookie (§5.2.4).
            return TagCheck::Accept;
        }
        if first.chunk_type == chunk_type::SHUTDOWN_ACK
            && matches!(self.state, State::CookieWait | State::CookieEchoed)
        {
            // Rule E: SHUTDOWN COMPLETE with the T bit, reflecting the packet's tag.
            self.queue_to(
                local,
                remote,
                vtag,
                &[Chunk::ShutdownComplete { t_bit: true }],
            );
            return TagCheck::Answered;
        }
        if vtag == self.local_tag {
            TagCheck::Accept
        } else {
            TagCheck::Discard
        }
    }

    /// Handles the chunks of an accepted packet in order; `None` when the association
    /// ended or aborted on the way (nothing more to answer).
    fn handle_chunks(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        vtag: u32,
        path: Option<usize>,
        raws: &[RawChunk<'_>],
    ) -> Option<RxTally> {
        let mut rx = RxTally::default();
        for raw in raws {
            if self.state == State::Closed {
                break;
            }
            let chunk = match Chunk::parse(raw) {
                Ok(c) => c,
                Err(e) => {
                    self.protocol_violation(now, e.to_string());
                    return None;
                }
            };
            match chunk {
                Chunk::Data(d) => {
                    rx.got_data = true;
                    if d.immediate() {
                        rx.immediate = true;
                    }
                    match self.handle_data(&d, path) {
                        DataOutcome::New { in_order } => {
                            rx.got_new_data = true;
                            if !in_order {
                                rx.ooo = true;
                            }
                        }
                        DataOutcome::Duplicate | DataOutcome::Dropped => rx.immediate = true,
                        DataOutcome::Abort => return None,
                    }
                }
                Chunk::Sack(s) => self.handle_sack(now, &s, true),
                Chunk::InitAck(ia) => self.handle_init_ack(now, local, remote, &ia),
                Chunk::CookieEcho(c) => {
                    if !self.handle_cookie_echo(now, local, remote, vtag, c) {
                        return None;
                    }
                }
                Chunk::CookieAck => {
                    if self.state == State::CookieEchoed {
                        self.t1 = None;
                        if let (Some(sent), Some(p)) =
                            (self.t1_sent, self.paths.get_mut(self.t1_path))
                        {
                            let cfg = self.shared.config.clone();
                            p.rtt_sample(now - sent, &cfg);
                        }
                        self.cookie_echo = None;
                        self.state = State::Established;
                        self.emit(Event::Connected);
                    }
                }
                Chunk::Heartbeat(info) => {
                    self.queue_to(local, remote, self.peer_tag, &[Chunk::HeartbeatAck(info)]);
                }
                Chunk::HeartbeatAck(info) => self.handle_heartbeat_ack(now, &info),
                Chunk::Abort { causes, .. } => {
                    self.close(Event::Aborted {
                        reason: AbortReason::Peer(causes),
                    });
                    return None;
                }
                Chunk::Shutdown { cum_tsn_ack } => self.handle_shutdown(now, cum_tsn_ack, path),
                Chunk::ShutdownAck => {
                    if matches!(self.state, State::ShutdownSent | State::ShutdownAckSent) {
                        self.queue_to(
                            local,
                            remote,
                            self.peer_tag,
                            &[Chunk::ShutdownComplete { t_bit: false }],
                        );
                        self.close(Event::ShutdownComplete);
                        return None;
                    }
                }
                Chunk::ShutdownComplete { .. } => {
                    if self.state == State::ShutdownAckSent {
                        self.close(Event::ShutdownComplete);
                        return None;
                    }
                }
                Chunk::Error(causes) => self.handle_error(now, causes),
                Chunk::Init(_) => {}
                Chunk::Unknown { chunk_type, .. } => {
                    let action = UnknownAction::for_chunk(chunk_type);
                    if action.reports() {
                        rx.reports
                            .push(ErrorCause::UnrecognizedChunk(raw.bytes.to_vec()));
                    }
                    if !action.continues() {
                        break;
                    }
                }
            }
        }
        Some(rx)
    }

    /// When to acknowledge what the packet carried (RFC 9260 §6.2): at once for
    /// out-of-order, duplicate or immediate-bit DATA, every `sack_freq` packets, with an
    /// error to report, or — while shutting down — with a SHUTDOWN (§9.2); otherwise after
    /// the delayed-SACK time.
    fn schedule_sack(&mut self, now: Instant, path: Option<usize>, rx: &RxTally) {
        if rx.got_data {
            if let Some(i) = path {
                self.sack_path = i;
            }
            if self.state == State::ShutdownSent {
                // RFC 9260 §9.2: answer DATA with SHUTDOWN at once and restart T2.
                self.sack = SackState::Now;
                self.send_t2(now);
            } else {
                self.packets_since_sack += 1;
                // Delayed ACK for CMT: reordering across paths is expected, so out-of-order
                // data waits for the regular acknowledgement like in-order data.
                let dac = self.delayed_ack();
                if rx.immediate
                    || (!dac && (rx.ooo || !self.rx_ranges.is_empty()))
                    || self.packets_since_sack >= self.shared.config.sack_freq
                    || !rx.got_new_data
                {
                    self.sack = SackState::Now;
                } else if self.sack == SackState::None {
                    self.sack = SackState::Delayed(now + self.shared.config.sack_delay);
                }
            }
        }
        if !self.pending_errors.is_empty() {
            // RFC 9260 §6.5: report at once (bundled with the SACK).
            self.sack = SackState::Now;
        }
        if self.sack == SackState::Now && rx.got_data {
            // Acknowledge now rather than at the next poll: a driver that hands over a batch
            // of packets before polling still gets one SACK per `sack_freq` packets, which
            // keeps the sender's ack clock (and cwnd growth) independent of batching.
            self.flush_sack();
        }
    }

    fn protocol_violation(&mut self, _now: Instant, what: String) {
        let vtag = self.peer_tag;
        let p = self.data_path;
        self.queue_ctrl(
            p,
            vtag,
            &[abort_chunk(ErrorCause::ProtocolViolation(
                what.clone().into_bytes(),
            ))],
        );
        self.close(Event::Aborted {
            reason: AbortReason::ProtocolViolation(what),
        });
    }

    /// Reports an event to the ULP, and to the log.
    fn emit(&mut self, event: Event) {
        match &event {
            Event::DataReadable { .. } => {}
            Event::Connected => tracing::info!("SCTP association established"),
            Event::Restarted => tracing::warn!("SCTP association restarted by the peer"),
            Event::Aborted {
                reason: AbortReason::Local,
            } => tracing::info!("SCTP association aborted by the user"),
            Event::Aborted { reason } => tracing::warn!(?reason, "SCTP association aborted"),
            Event::PathDown { remote } => tracing::warn!(%remote, "SCTP path inactive"),
            Event::PathPotentiallyFailed { remote } => {
                tracing::info!(%remote, "SCTP path potentially failed")
            }
            Event::PathUp { remote } => tracing::info!(%remote, "SCTP path active"),
            Event::PrimaryChanged { remote } => {
                tracing::info!(%remote, "SCTP primary path changed")
            }
            e => tracing::debug!(event = ?e, "SCTP association"),
        }
        self.events.push_back(event);
    }

    fn close(&mut self, event: Event) {
        if self.state == State::Closed {
            return;
        }
        self.state = State::Closed;
        self.t1 = None;
        self.t2 = None;
        for p in &mut self.paths {
            p.t3 = None;
            p.hb_pending = None;
        }
        self.sack = SackState::None;
        self.emit(event);
    }

    // ---------------------------------------------------------------- setup and collisions

    /// INIT for an existing association: RFC 9260 §5.2.1, §5.2.2, §9.2.
    fn handle_init(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        init: &InitChunk,
    ) {
        if self.state == State::ShutdownAckSent {
            // §9.2: the INIT is discarded and SHUTDOWN ACK retransmitted.
            let vtag = self.peer_tag;
            self.queue_to(local, remote, vtag, &[Chunk::ShutdownAck]);
            return;
        }
        let collision = matches!(self.state, State::CookieWait | State::CookieEchoed);
        if !collision {
            // §5.2.2: an INIT adding addresses to a live association is refused.
            let (_, considered) = unrecognized_params(&init.params);
            let new: Vec<SocketAddr> = peer_addresses(remote, &init.params[..considered])
                .into_iter()
                .filter(|a| self.path_index(*a).is_none())
                .collect();
            if !new.is_empty() && init.initiate_tag != 0 {
                let mut tlvs = Vec::new();
                for p in address_params(&new, |_| true) {
                    p.emit(&mut tlvs);
                }
                self.queue_to(
                    local,
                    remote,
                    init.initiate_tag,
                    &[abort_chunk(ErrorCause::RestartWithNewAddresses(tlvs))],
                );
                return;
            }
        }
        let (tag, tsn) = if collision {
            (self.local_tag, self.local_initial_tsn)
        } else {
            (self.rng.nonzero_u32(), self.rng.next_u32())
        };
        let r = Responder {
            config: &self.shared.config,
            key: &self.shared.key,
            local_port: self.shared.local_port,
            local_addrs: &self.shared.local_addrs,
            local_tag: tag,
            local_tsn: tsn,
            tie_tags: (self.local_tag, self.peer_tag),
        };
        match answer_init(now, &r, local, remote, self.peer_port, init) {
            InitReply::Discard => {}
            InitReply::Abort(bytes) | InitReply::InitAck(bytes) => {
                self.account_sent(remote, bytes.len());
                self.ctrl.push_back(Transmit {
                    local,
                    remote,
                    bytes,
                });
            }
        }
    }

    /// INIT ACK in COOKIE-WAIT (RFC 9260 §5.1 C, §5.2.3).
    fn handle_init_ack(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        ia: &InitChunk,
    ) {
        if self.state != State::CookieWait {
            // §5.2.3: an unexpected INIT ACK is discarded.
            return;
        }
        // §3.3.3: Initiate Tag 0, or no streams, ends the attempt.
        if ia.initiate_tag == 0 || ia.outbound_streams == 0 || ia.inbound_streams == 0 {
            self.queue_to(
                local,
                remote,
                ia.initiate_tag,
                &[abort_chunk(ErrorCause::InvalidMandatoryParam)],
            );
            self.close(Event::Aborted {
                reason: AbortReason::SetupFailed(
                    "INIT ACK with invalid mandatory parameter".into(),
                ),
            });
            return;
        }
        let (report, considered) = unrecognized_params(&ia.params);
        let considered = &ia.params[..considered];
        let Some(cookie) = considered.iter().find_map(|p| match p {
            Param::StateCookie(c) => Some(c.clone()),
            _ => None,
        }) else {
            // §5.1 / §3.3.10.2: no State Cookie: ABORT with Missing Mandatory Parameter.
            self.queue_to(
                local,
                remote,
                ia.initiate_tag,
                &[abort_chunk(ErrorCause::MissingMandatoryParam(vec![
                    wire::param_type::STATE_COOKIE,
                ]))],
            );
            self.close(Event::Aborted {
                reason: AbortReason::SetupFailed("INIT ACK without a State Cookie".into()),
            });
            return;
        };
        self.peer_tag = ia.initiate_tag;
        let out = self.shared.config.outbound_streams.min(ia.inbound_streams);
        let inb = self
            .shared
            .config
            .max_inbound_streams
            .min(ia.outbound_streams);
        self.set_peer_params(ia.initial_tsn, ia.a_rwnd, out, inb);
        self.peer_adaptation = adaptation_of(considered);
        let addrs = peer_addresses(remote, considered);
        let addrs: Vec<SocketAddr> = addrs.into_iter().filter(|a| self.reachable(a)).collect();
        for a in addrs {
            let l = choose_local(&self.shared.local_addrs, &a);
            self.path_index_or_add(now, a, l);
        }
        let src = self.path_index_or_add(now, remote, local);
        self.paths[src].local = local;
        self.confirm_path(src, false);
        if let Some(sent) = self.t1_sent {
            let cfg = self.shared.config.clone();
            self.paths[src].rtt_sample(now - sent, &cfg);
        }
        for p in &mut self.paths {
            p.ssthresh = (ia.a_rwnd as usize).max(p.initial_cwnd());
        }
        let mut chunk = Vec::new();
        Chunk::CookieEcho(&cookie).emit(&mut chunk);
        if !report.is_empty() {
            // §3.2.1: unrecognised INIT ACK parameters are reported in an ERROR bundled with
            // the COOKIE ECHO.
            Chunk::Error(vec![ErrorCause::UnrecognizedParams(report.concat())]).emit(&mut chunk);
        }
        self.cookie_echo = Some(chunk);
        self.record_handshake();
        self.state = State::CookieEchoed;
        self.t1_retransmits = 0;
        self.t1_path = 0;
        self.send_t1(now, false);
    }

    /// COOKIE ECHO for an existing association (RFC 9260 §5.1.5, §5.2.4). Returns whether the
    /// rest of the packet may be processed.
    fn handle_cookie_echo(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        vtag: u32,
        bytes: &[u8],
    ) -> bool {
        let Ok(c) = Cookie::open(bytes, &self.shared.key) else {
            self.stats.packets_discarded += 1;
            return false;
        };
        if c.local_tag != vtag
            || c.local_port != self.shared.local_port
            || c.peer_port != self.peer_port
        {
            return false;
        }
        let expires = c.created_ns.saturating_add(c.lifetime_ns);
        if now.as_nanos() > expires {
            let stale_us = (now.as_nanos() - expires) / 1000;
            self.queue_to(
                local,
                remote,
                c.peer_tag,
                &[Chunk::Error(vec![ErrorCause::StaleCookie {
                    staleness_us: stale_us.min(u64::from(u32::MAX)) as u32,
                }])],
            );
            return false;
        }
        let local_match = c.local_tag == self.local_tag;
        let peer_match = c.peer_tag == self.peer_tag;
        let ack = |s: &mut Self| {
            let vtag = s.peer_tag;
            s.queue_to(local, remote, vtag, &[Chunk::CookieAck]);
        };
        if !local_match
            && !peer_match
            && c.local_tie_tag == self.local_tag
            && c.peer_tie_tag == self.peer_tag
        {
            // (A) the peer restarted.
            if self.state == State::ShutdownAckSent {
                let vtag = c.peer_tag;
                self.queue_to(
                    local,
                    remote,
                    vtag,
                    &[
                        Chunk::ShutdownAck,
                        Chunk::Error(vec![ErrorCause::CookieWhileShuttingDown]),
                    ],
                );
                return false;
            }
            self.restart(now, &c, remote);
            ack(self);
            return true;
        }
        if local_match && !peer_match {
            // (B) setup collision: take the peer's tag and parameters from the cookie.
            if matches!(self.state, State::CookieWait | State::CookieEchoed) || self.peer_tag == 0 {
                self.peer_tag = c.peer_tag;
                self.set_peer_params(
                    c.peer_tsn,
                    c.peer_rwnd,
                    c.outbound_streams,
                    c.inbound_streams,
                );
                let addrs: Vec<SocketAddr> = c
                    .peer_addrs
                    .iter()
                    .copied()
                    .filter(|a| self.reachable(a))
                    .collect();
                for a in addrs {
                    let l = choose_local(&self.shared.local_addrs, &a);
                    self.path_index_or_add(now, a, l);
                }
            } else {
                self.peer_tag = c.peer_tag;
            }
            let i = self.path_index_or_add(now, remote, local);
            self.confirm_path(i, false);
            self.t1 = None;
            if matches!(self.state, State::CookieWait | State::CookieEchoed) {
                self.state = State::Established;
                self.emit(Event::Connected);
            }
            ack(self);
            return true;
        }
        if !local_match && peer_match && c.local_tie_tag == 0 && c.peer_tie_tag == 0 {
            // (C) a late cookie from an earlier attempt: discard.
            return false;
        }
        if local_match && peer_match {
            // (D) duplicate or first COOKIE ECHO of this association.
            if self.state == State::CookieEchoed {
                self.t1 = None;
                self.state = State::Established;
                self.emit(Event::Connected);
            }
            ack(self);
            return true;
        }
        false
    }

    fn restart(&mut self, now: Instant, c: &Cookie, source: SocketAddr) {
        self.queue.clear();
        self.queued_bytes = 0;
        self.ready.clear();
        self.rx_held = 0;
        for p in &mut self.paths {
            p.flight = 0;
            p.t3 = None;
            p.cwnd = p.initial_cwnd();
            p.rtt_probe = None;
        }
        self.fast_recovery_exit = None;
        self.install_cookie(now, c, source);
        self.state = State::Established;
        self.emit(Event::Restarted);
    }

    fn handle_error(&mut self, now: Instant, causes: Vec<ErrorCause>) {
        if self.state == State::CookieEchoed
            && let Some(stale) = causes.iter().find_map(|c| match c {
                ErrorCause::StaleCookie { staleness_us } => Some(*staleness_us),
                _ => None,
            })
        {
            // RFC 9260 §5.2.6: start over with a Cookie Preservative asking for the measured
            // staleness plus the round trip (at most one second more).
            self.t1_retransmits += 1;
            if self.t1_retransmits > self.shared.config.max_init_retransmits {
                self.close(Event::Aborted {
                    reason: AbortReason::Timeout,
                });
                return;
            }
            let rtt = self
                .t1_sent
                .map_or(Duration::ZERO, |s| now - s)
                .min(Duration::from_secs(1));
            let ms = u64::from(stale) / 1000 + rtt.as_millis() as u64 + 1;
            if let Some(init) = &mut self.init_packet
                && let Some(raw) = ChunkIter::new(init).next().and_then(Result::ok)
                && let Ok(Chunk::Init(mut i)) = Chunk::parse(&raw)
            {
                i.params
                    .retain(|p| !matches!(p, Param::CookiePreservative(_)));
                i.params
                    .push(Param::CookiePreservative(ms.min(u64::from(u32::MAX)) as u32));
                let mut out = Vec::new();
                Chunk::Init(i).emit(&mut out);
                *init = out;
            }
            self.peer_tag = 0;
            self.cookie_echo = None;
            self.state = State::CookieWait;
            self.send_t1(now, false);
            return;
        }
        self.emit(Event::ErrorReceived { causes });
    }

    // ---------------------------------------------------------------- data and SACK

    fn handle_data(&mut self, d: &DataChunk<'_>, path: Option<usize>) -> DataOutcome {
        if !self.state_accepts_data() && self.state != State::ShutdownReceived {
            return DataOutcome::Dropped;
        }
        let tsn = unwrap32(self.peer_cum, d.tsn);
        if d.data.is_empty() {
            // RFC 9260 §6.2: no user data: ABORT with the No User Data cause.
            let vtag = self.peer_tag;
            let p = path.unwrap_or(self.data_path);
            self.queue_ctrl(
                p,
                vtag,
                &[abort_chunk(ErrorCause::NoUserData { tsn: d.tsn })],
            );
            self.close(Event::Aborted {
                reason: AbortReason::ProtocolViolation("DATA chunk without user data".into()),
            });
            return DataOutcome::Abort;
        }
        if tsn <= self.peer_cum || self.rx_contains(tsn) {
            self.stats.duplicate_tsns += 1;
            if self.dups.len() < 64 {
                self.dups.push(d.tsn);
            }
            return DataOutcome::Duplicate;
        }
        if tsn - self.peer_cum > 0xffff {
            // Cannot be reported in a gap block; the sender is far out of its window.
            return DataOutcome::Dropped;
        }
        if d.stream >= self.in_streams {
            // RFC 9260 §6.5: acknowledge the TSN, report Invalid Stream Identifier, drop.
            self.pending_errors
                .push(ErrorCause::InvalidStreamId { stream: d.stream });
            self.rx_insert(tsn);
            return DataOutcome::New { in_order: true };
        }
        // RFC 9260 §6.2: with no buffer left, drop chunks beyond the highest TSN received;
        // chunks filling holes are still taken.
        if self.rx_held + d.data.len() > self.shared.config.recv_buffer as usize
            && tsn > self.highest_rx
        {
            return DataOutcome::Dropped;
        }
        let in_order = tsn == self.peer_cum + 1 && self.rx_ranges.is_empty();
        self.rx_insert(tsn);
        self.rx_held += d.data.len();
        let check = d.end() || tsn < self.highest_rx || (d.beginning() && d.end());
        self.reasm.insert(
            tsn,
            RxChunk {
                stream: d.stream,
                ssn: d.ssn,
                ppid: d.ppid,
                flags: d.flags,
                data: d.data.to_vec(),
            },
        );
        if tsn > self.highest_rx {
            self.highest_rx = tsn;
        }
        if check {
            self.try_reassemble(tsn);
        }
        DataOutcome::New { in_order }
    }

    fn rx_contains(&self, tsn: u64) -> bool {
        self.rx_ranges.iter().any(|&(s, e)| s <= tsn && tsn <= e)
    }

    fn rx_insert(&mut self, tsn: u64) {
        if tsn == self.peer_cum + 1 {
            self.peer_cum = tsn;
            if let Some(&(s, e)) = self.rx_ranges.first()
                && s == self.peer_cum + 1
            {
                self.peer_cum = e;
                self.rx_ranges.remove(0);
            }
            return;
        }
        let pos = self.rx_ranges.partition_point(|&(_, e)| e + 1 < tsn);
        match self.rx_ranges.get_mut(pos) {
            Some(r) if r.0 <= tsn + 1 => {
                r.0 = r.0.min(tsn);
                r.1 = r.1.max(tsn);
                // Merge with the next range if they now touch.
                if let Some(&(ns, ne)) = self.rx_ranges.get(pos + 1)
                    && ns <= self.rx_ranges[pos].1 + 1
                {
                    self.rx_ranges[pos].1 = self.rx_ranges[pos].1.max(ne);
                    self.rx_ranges.remove(pos + 1);
                }
            }
            _ => self.rx_ranges.insert(pos, (tsn, tsn)),
        }
    }

    /// The TSN of the fragment that bounds the message of the chunk at `tsn` on one side:
    /// walking back, its B fragment; walking `forward`, its E fragment. `None` when a
    /// fragment on the way is missing or not `same` (another stream or ordering), or when
    /// the other edge of a message comes first (the chunk's own message is then incomplete).
    fn message_edge(
        &self,
        tsn: u64,
        forward: bool,
        same: impl Fn(&RxChunk) -> bool,
    ) -> Option<u64> {
        let (edge, other) = if forward {
            (data_flags::END, data_flags::BEGINNING)
        } else {
            (data_flags::BEGINNING, data_flags::END)
        };
        let mut at = tsn;
        loop {
            let c = self.reasm.get(&at)?;
            if !same(c) {
                return None;
            }
            if c.flags & edge != 0 {
                return Some(at);
            }
            if at != tsn && c.flags & other != 0 {
                return None;
            }
            if forward {
                at += 1;
            } else {
                at -= 1;
            }
        }
    }

    /// Finds the message containing the chunk at `tsn`, if complete, and delivers it.
    fn try_reassemble(&mut self, tsn: u64) {
        let Some(c) = self.reasm.get(&tsn) else {
            return;
        };
        let (stream, flags) = (c.stream, c.flags);
        let unordered = flags & data_flags::UNORDERED;
        let same =
            |x: &RxChunk| x.stream == stream && (x.flags & data_flags::UNORDERED) == unordered;
        let Some(start) = self.message_edge(tsn, false, same) else {
            return;
        };
        let Some(end) = self.message_edge(tsn, true, same) else {
            return;
        };
        let mut data = Vec::new();
        let mut ppid = 0;
        let mut ssn = 0;
        for t in start..=end {
            if let Some(c) = self.reasm.remove(&t) {
                if t == start {
                    ppid = c.ppid;
                    ssn = c.ssn;
                    if start == end {
                        data = c.data;
                        break;
                    }
                    data.reserve(c.data.len() * (end - start + 1) as usize);
                }
                data.extend_from_slice(&c.data);
            }
        }
        let msg = Message {
            stream,
            ppid,
            ssn,
            unordered: unordered != 0,
            data,
        };
        if msg.unordered {
            self.deliver(msg);
            return;
        }
        let s = usize::from(stream);
        if self.in_ssn.get(s) == Some(&ssn) {
            self.deliver(msg);
            self.in_ssn[s] = ssn.wrapping_add(1);
            while let Some(next) = self.ordered[s].remove(&self.in_ssn[s]) {
                self.in_ssn[s] = self.in_ssn[s].wrapping_add(1);
                self.deliver(next);
            }
        } else if let Some(q) = self.ordered.get_mut(s) {
            q.insert(ssn, msg);
        }
    }

    fn deliver(&mut self, m: Message) {
        if self.ready.is_empty() {
            self.emit(Event::DataReadable { stream: m.stream });
        }
        self.ready.push_back(m);
    }

    /// RFC 9260 §6.2.1: processing a SACK.
    ///
    /// `is_sack` is false for the cumulative ack carried by a SHUTDOWN, which says nothing
    /// about chunks above it.
    /// A SACK (or the cumulative TSN of a SHUTDOWN, `is_sack` false) arrived (RFC 9260
    /// §6.2.1): what it acknowledges leaves the retransmission queue, then fast retransmit,
    /// the congestion windows, the T3 timers and the peer's window follow.
    fn handle_sack(&mut self, now: Instant, s: &SackChunk, is_sack: bool) {
        let Some(cum) = self.sack_cum_ack(now, s) else {
            return;
        };
        let cfg = self.shared.config.clone();
        let mut tally = SackTally::new(self.paths.len());
        let mut flight_before: Vec<usize> = self.paths.iter().map(|p| p.flight).collect();
        let cum_advanced = cum > self.cum_ack;
        let cmt = cfg.cmt.as_ref();
        let pseudo_before = if cmt.is_some() {
            self.pseudo_cumacks()
        } else {
            Vec::new()
        };
        self.ack_cumulative(now, cum, &mut tally);
        if is_sack && (!s.gaps.is_empty() || self.gap_acked > 0) {
            self.ack_gap_blocks(now, cum, s, &mut tally);
        }
        for &(i, r) in &tally.rtt_samples {
            self.paths[i].rtt_sample(r, &cfg);
        }
        if is_sack {
            match cmt {
                Some(c) => {
                    self.cmt_fast_retransmit(c, cum, cum_advanced, s, &tally, &mut flight_before)
                }
                None => self.fast_retransmit(cum, cum_advanced, s, &tally, &mut flight_before),
            }
        }
        if self.fast_recovery_exit.is_some_and(|x| self.cum_ack >= x) {
            self.fast_recovery_exit = None;
        }
        let mut window_may_grow = vec![cum_advanced; self.paths.len()];
        if let Some(c) = cmt {
            let after = self.pseudo_cumacks();
            for (i, p) in self.paths.iter_mut().enumerate() {
                // Per-destination fast recovery ends when everything up to its exit point
                // that is still charged to this path is acknowledged.
                if let Some(x) = p.recovery_exit
                    && after[i].is_none_or(|l| l > x)
                {
                    p.recovery_exit = None;
                }
                if c.cwnd_update {
                    // CUCv2: the path's pseudo-cumulative ack moved.
                    window_may_grow[i] = pseudo_before[i].is_some() && after[i] != pseudo_before[i];
                }
            }
        }
        self.grow_windows(now, &window_may_grow, &tally, &flight_before);
        if cmt.is_some_and(|c| c.tail_loss_probe) {
            let ended = self.tlp_acknowledged(now, s, is_sack);
            for (i, &end) in ended.iter().enumerate() {
                if tally.acked_bytes[i] > 0 || self.paths[i].flight == 0 || end {
                    self.arm_pto(now, i);
                }
            }
        }
        debug_assert_eq!(
            self.unacked_bytes,
            self.outstanding
                .iter()
                .filter(|c| !c.acked)
                .map(|c| c.data.len())
                .sum::<usize>()
        );
        self.peer_rwnd = (s.a_rwnd as usize).saturating_sub(self.unacked_bytes);
        if is_sack {
            self.last_sack_at = Some(now);
            let mtu = self.paths.get(self.data_path).map_or(1500, |p| p.pmtu);
            self.peer_window_closed = self.peer_rwnd < mtu;
        }
    }

    /// The SACK's cumulative TSN ack, unwrapped; `None` when the SACK is to be ignored (the
    /// association is not sending data, or it is an old, reordered SACK: §6.2.1 D i) or
    /// acknowledges a TSN never sent (a protocol violation, which aborts).
    fn sack_cum_ack(&mut self, now: Instant, s: &SackChunk) -> Option<u64> {
        if !matches!(
            self.state,
            State::Established
                | State::ShutdownPending
                | State::ShutdownReceived
                | State::ShutdownSent
                | State::ShutdownAckSent
        ) {
            return None;
        }
        let cum = unwrap32(self.cum_ack, s.cum_tsn_ack);
        if cum < self.cum_ack {
            // D i): an old, reordered SACK.
            return None;
        }
        if cum >= self.next_tsn {
            self.protocol_violation(
                now,
                format!(
                    "SACK acknowledges TSN {} that was never sent",
                    s.cum_tsn_ack
                ),
            );
            return None;
        }
        Some(cum)
    }

    /// Everything up to `cum` leaves the retransmission queue.
    fn ack_cumulative(&mut self, now: Instant, cum: u64, tally: &mut SackTally) {
        while self.cum_ack < cum {
            let Some(mut c) = self.outstanding.pop_front() else {
                break;
            };
            self.cum_ack = c.tsn;
            self.queued_bytes = self.queued_bytes.saturating_sub(c.data.len());
            if c.acked {
                self.gap_acked -= 1;
                tally.in_sack(c.path, c.tsn);
                continue;
            }
            self.unacked_bytes = self.unacked_bytes.saturating_sub(c.data.len());
            self.forget_rtx(c.rtx);
            tally.htna = Some(c.tsn);
            tally.count(&mut self.paths, &mut c, now);
        }
        self.cum_ack = cum;
    }

    /// Chunks inside the SACK's gap ack blocks are acknowledged; chunks acknowledged by an
    /// earlier SACK and outside them now were reneged and go out again.
    fn ack_gap_blocks(&mut self, now: Instant, cum: u64, s: &SackChunk, tally: &mut SackTally) {
        let mut blocks: Vec<(u64, u64)> = s
            .gaps
            .iter()
            .filter(|g| g.start <= g.end && g.start > 0)
            .map(|g| (cum + u64::from(g.start), cum + u64::from(g.end)))
            .collect();
        blocks.sort_unstable();
        let mut bi = 0;
        for c in self.outstanding.iter_mut() {
            while bi < blocks.len() && blocks[bi].1 < c.tsn {
                bi += 1;
            }
            let in_gap = bi < blocks.len() && blocks[bi].0 <= c.tsn;
            if in_gap && c.acked {
                tally.in_sack(c.path, c.tsn);
            } else if in_gap {
                c.acked = true;
                self.gap_acked += 1;
                self.unacked_bytes = self.unacked_bytes.saturating_sub(c.data.len());
                match c.rtx {
                    Rtx::Fast => self.rtx_fast -= 1,
                    Rtx::Timeout => self.rtx_timeout -= 1,
                    Rtx::No => {}
                }
                c.rtx = Rtx::No;
                tally.htna = Some(tally.htna.map_or(c.tsn, |h| h.max(c.tsn)));
                tally.count(&mut self.paths, c, now);
            } else if !in_gap && c.acked {
                // Reneged: the peer dropped it; send it again.
                c.acked = false;
                self.gap_acked -= 1;
                self.unacked_bytes += c.data.len();
                c.rtx = Rtx::Timeout;
                self.rtx_timeout += 1;
            }
        }
    }

    /// Per path, the lowest TSN charged to it that is not acknowledged (CMT's
    /// pseudo-cumulative ack), `None` for a path with nothing outstanding.
    fn pseudo_cumacks(&self) -> Vec<Option<u64>> {
        let mut out = vec![None; self.paths.len()];
        let mut missing = out.len();
        for c in &self.outstanding {
            if missing == 0 {
                break;
            }
            if !c.acked
                && let Some(slot) = out.get_mut(c.path)
                && slot.is_none()
            {
                *slot = Some(c.tsn);
                missing -= 1;
            }
        }
        out
    }

    /// An acknowledged chunk no longer counts as waiting for retransmission.
    fn forget_rtx(&mut self, rtx: Rtx) {
        match rtx {
            Rtx::Fast => self.rtx_fast -= 1,
            Rtx::Timeout => self.rtx_timeout -= 1,
            Rtx::No => {}
        }
    }

    /// Miss indications and fast retransmit (§7.2.4). Only chunks below a gap-acked TSN are
    /// "reported missing"; outside Fast Recovery the HTNA rule further limits the count to
    /// chunks below the highest TSN newly acknowledged by this SACK. Entering Fast Recovery
    /// halves the windows of the paths with newly marked chunks.
    fn fast_retransmit(
        &mut self,
        cum: u64,
        cum_advanced: bool,
        s: &SackChunk,
        tally: &SackTally,
        flight_before: &mut [usize],
    ) {
        let mut newly_marked: Vec<usize> = Vec::new();
        let Some(hg) = s.gaps.iter().map(|g| cum + u64::from(g.end)).max() else {
            return;
        };
        let limit = tally.miss_limit(hg, self.fast_recovery_exit.is_some(), cum_advanced);
        for c in self.outstanding.iter_mut() {
            if c.tsn >= limit {
                break;
            }
            if c.acked || c.rtx != Rtx::No || c.fast_retransmitted || !c.in_flight {
                continue;
            }
            count_misses(c, 1, &mut self.paths, &mut self.rtx_fast, &mut newly_marked);
        }
        if newly_marked.is_empty() {
            return;
        }
        tracing::debug!(paths = ?newly_marked, "SCTP fast retransmit");
        self.stats.fast_retransmits += 1;
        if self.fast_recovery_exit.is_none() {
            for &i in &newly_marked {
                halve_window(&mut self.paths[i]);
                flight_before[i] = 0;
            }
            self.fast_recovery_exit = Some(self.next_tsn - 1);
        }
        self.fast_once = true;
    }

    /// Miss indications and fast retransmit with CMT. With split fast retransmit (SFR) a
    /// chunk is reported missing only when this SACK newly acknowledges data sent to the
    /// chunk's destination and acknowledges a higher TSN sent there; without it, the HTNA
    /// rule of §7.2.4. With delayed ACK for CMT, a SACK flagged as acknowledging two packets
    /// that newly acknowledges data of one destination only counts twice for chunks below
    /// the lowest TSN it newly acknowledges. Fast recovery is per destination: entering it
    /// halves only that path's window.
    fn cmt_fast_retransmit(
        &mut self,
        cmt: &CmtConfig,
        cum: u64,
        cum_advanced: bool,
        s: &SackChunk,
        tally: &SackTally,
        flight_before: &mut [usize],
    ) {
        let Some(hg) = s.gaps.iter().map(|g| cum + u64::from(g.end)).max() else {
            return;
        };
        let dests_newly_acked = tally.acked_bytes.iter().filter(|&&b| b > 0).count();
        let dac_twice =
            cmt.delayed_ack && s.flags & wire::SACK_FLAG_CMT_DAC != 0 && dests_newly_acked == 1;
        let mut newly_marked: Vec<usize> = Vec::new();
        for c in self.outstanding.iter_mut() {
            if c.tsn >= hg {
                break;
            }
            if c.acked || c.rtx != Rtx::No || !c.in_flight {
                continue;
            }
            // A fast retransmission that was lost again: without SFR the chunk waits for
            // T3-rtx (RFC 9260 §7.2.4 step 5). With SFR, misses are counted per destination
            // against data sent there after the retransmission, as for a first transmission.
            let refresh = match c.fast_retransmitted_below {
                Some(below) if (c.fast_retransmitted || c.probed) && cmt.split_fast_retransmit => {
                    Some(below)
                }
                _ if c.fast_retransmitted => continue,
                _ => None,
            };
            // The TSN the acknowledged data must lie above.
            let after = refresh.unwrap_or(c.tsn);
            let reported = if cmt.split_fast_retransmit {
                tally.acked_bytes.get(c.path).is_some_and(|&b| b > 0)
                    && tally
                        .highest_in_sack
                        .get(c.path)
                        .copied()
                        .flatten()
                        .is_some_and(|h| after < h)
            } else {
                let in_fr = self.paths[c.path].recovery_exit.is_some();
                c.tsn < tally.miss_limit(hg, in_fr, cum_advanced)
            };
            if !reported {
                continue;
            }
            let misses = if dac_twice && tally.lowest_newack.is_some_and(|l| after < l) {
                2
            } else {
                1
            };
            count_misses(
                c,
                misses,
                &mut self.paths,
                &mut self.rtx_fast,
                &mut newly_marked,
            );
        }
        if newly_marked.is_empty() {
            return;
        }
        tracing::debug!(paths = ?newly_marked, "SCTP fast retransmit (CMT)");
        self.stats.fast_retransmits += 1;
        for &i in &newly_marked {
            if self.paths[i].recovery_exit.is_some() {
                continue;
            }
            let exit = self
                .outstanding
                .iter()
                .filter(|c| c.path == i)
                .map(|c| c.tsn)
                .max()
                .unwrap_or(self.next_tsn - 1);
            let p = &mut self.paths[i];
            halve_window(p);
            p.recovery_exit = Some(exit);
            flight_before[i] = 0;
        }
        self.fast_once = true;
    }

    /// Schedules path `i`'s tail loss probe (RFC 8985 §7.2, per destination with CMT):
    /// PTO = 2·SRTT + WCDelAckT after the last transmission or newly acknowledging SACK,
    /// where WCDelAckT is the worst-case delayed-ACK time (`sack_delay`, 200 ms; a CMT
    /// receiver delays even out-of-order acknowledgements), and never later than T3-rtx.
    /// No probe is scheduled for a path with nothing in flight, without an RTT measurement,
    /// or while a probe of it is unacknowledged (one probe per tail, §7.3).
    fn arm_pto(&mut self, now: Instant, i: usize) {
        if !self.tail_handling() {
            return;
        }
        let wc_del_ack = self.shared.config.sack_delay;
        let Some(p) = self.paths.get_mut(i) else {
            return;
        };
        if p.flight == 0 || p.state != PathState::Active {
            p.pto = None;
            return;
        }
        if p.tlp_tsn.is_some() {
            return;
        }
        let Some(srtt) = p.srtt else {
            return;
        };
        let pto = now + Duration::from_nanos((2.0 * srtt) as u64) + wc_del_ack;
        p.pto = Some(p.t3.map_or(pto, |t3| t3.min(pto)));
    }

    /// Path `i`'s probe timeout expired (RFC 8985 §7.3): when no new data can go out, the
    /// path's last packet — its highest-TSN chunks still in flight, up to one packet's
    /// worth — is retransmitted at once (whatever the congestion window, like a fast
    /// retransmission). Its SACK acknowledges the probe and, through split fast retransmit,
    /// reports the chunks below it that are missing; a probe that repaired the only loss
    /// ends the tail without T3-rtx.
    fn tail_loss_probe(&mut self, now: Instant, i: usize) {
        self.paths[i].pto = None;
        // New data goes out by itself when it can (RFC 8985 §7.3: "if ... new data ...
        // send it"); a probe is for a tail. With CMT that is new data this path can carry:
        // new data the other paths send says nothing about this path's outstanding packets,
        // so a path whose window is full probes even while the others keep sending.
        let p = &self.paths[i];
        if (self.can_send_new() && p.flight < p.cwnd) || p.tlp_tsn.is_some() {
            return;
        }
        let room = self.paths[i]
            .mtu(&self.shared.config)
            .saturating_sub(COMMON_HEADER_LEN);
        let mut used = 0;
        let mut marked = Vec::new();
        let mut highest = None;
        for c in self.outstanding.iter_mut().rev() {
            if c.path != i || !c.in_flight || c.acked || c.rtx != Rtx::No || c.zero_window_probe {
                continue;
            }
            let size = pad4(c.size());
            if used > 0 && used + size > room {
                break;
            }
            used += size;
            highest = highest.max(Some(c.tsn));
            c.rtx = Rtx::Fast;
            c.in_flight = false;
            c.probed = true;
            self.rtx_fast += 1;
            marked.push(c.tsn);
            let p = &mut self.paths[i];
            p.flight = p.flight.saturating_sub(c.size());
        }
        let Some(highest) = highest else {
            return;
        };
        tracing::debug!(
            remote = %self.paths[i].remote,
            at = ?now,
            tsns = ?marked,
            "SCTP tail loss probe"
        );
        self.paths[i].tlp_tsn = Some(highest);
        self.paths[i].stats.tail_loss_probes += 1;
        self.stats.tail_loss_probes += 1;
        self.fast_once = true;
    }

    /// The end of a tail loss probe episode (RFC 8985 §7.4): once the probe's TSN is
    /// acknowledged, a SACK that reports it as a duplicate TSN (RFC 9260 §3.3.4, the DSACK of
    /// §7.4.1) says the original had arrived and nothing was lost; otherwise the probe
    /// repaired a loss and the path's window is reduced as for a fast retransmission
    /// (§7.4.2: "invoke congestion control"), unless the path is already in fast recovery.
    /// A SACK that reports another path's probe as a duplicate was sent for that probe and
    /// may come before this one's duplicate: the verdict waits for the next SACK.
    ///
    /// A probe that repaired a loss also decides the chunks its path carried before the
    /// probed ones (RFC 8985 §6.2, RACK: a segment sent before one that was delivered, more
    /// than a round trip ago, is lost): those still unacknowledged are marked for fast
    /// retransmission. The probe went out at least two smoothed round trips after them and
    /// its acknowledgement came back, so they are lost, not late; on a failed path they
    /// would otherwise wait for its T3-rtx, backed off to seconds, with the peer's receive
    /// window blocked behind them (the receive-buffer blocking of CMT).
    ///
    /// Returns, per path, whether its probe episode ended: a new probe may be scheduled for
    /// what the path sent meanwhile.
    fn tlp_acknowledged(&mut self, now: Instant, s: &SackChunk, is_sack: bool) -> Vec<bool> {
        let mut ended = vec![false; self.paths.len()];
        let dups: &[u32] = if is_sack { &s.dup_tsns } else { &[] };
        let probes: Vec<u32> = self
            .paths
            .iter()
            .filter_map(|p| p.tlp_tsn.map(|t| t as u32))
            .collect();
        for (i, end) in ended.iter_mut().enumerate() {
            let Some(t) = self.paths[i].tlp_tsn else {
                continue;
            };
            let acked = t <= self.cum_ack
                || self
                    .outstanding
                    .iter()
                    .find(|c| c.tsn == t)
                    .is_none_or(|c| c.acked);
            if !acked {
                continue;
            }
            let p = &mut self.paths[i];
            if dups.contains(&(t as u32)) {
                p.tlp_tsn = None;
                p.tlp_undecided = false;
                *end = true;
                continue;
            }
            let for_another_probe = probes.iter().any(|&o| o != t as u32 && dups.contains(&o));
            if for_another_probe && !p.tlp_undecided {
                p.tlp_undecided = true;
                continue;
            }
            p.tlp_tsn = None;
            p.tlp_undecided = false;
            *end = true;
            // Chunks the path carried before the probed ones and still unacknowledged.
            let unacked_here =
                |c: &Sent| c.path == i && c.in_flight && !c.acked && c.rtx == Rtx::No;
            let lost_before = self
                .outstanding
                .iter()
                .take_while(|c| c.tsn < t)
                .any(unacked_here);
            if lost_before && self.paths[i].errors == 0 {
                // The path lost its tail and everything before it that is not acknowledged:
                // the evidence of a T3-rtx expiry, found sooner, on a path that had none.
                // It is handled as one (RFC 9260 §6.3.3 E1-E3: everything in flight on the
                // path is retransmitted, its window drops to one MTU, the RTO backs off, the
                // error counter grows, §8.2; with SCTP-PF, RFC 7829 §5.1, the path becomes
                // Potentially Failed and is probed with heartbeats), or a failed path whose
                // losses probes repair would never be suspected, and data it took between
                // the probe and its acknowledgement would time out later as a second error.
                // Later errors come from T3-rtx and heartbeats as before.
                self.t3_expired(now, i);
                if self.state == State::Closed {
                    break;
                }
                continue;
            }
            let mut newly_marked = Vec::new();
            for c in self.outstanding.iter_mut() {
                if c.tsn >= t {
                    break;
                }
                if unacked_here(c) {
                    mark_fast_retransmit(c, &mut self.paths, &mut self.rtx_fast, &mut newly_marked);
                }
            }
            if !newly_marked.is_empty() {
                self.fast_once = true;
            }
            let p = &mut self.paths[i];
            if p.recovery_exit.is_none() {
                // A loss response never opens the window: after T3-rtx (cwnd of one MTU,
                // RFC 9260 §7.2.3) the threshold's floor of 4 MTU is above it.
                p.ssthresh = (p.cwnd / 2).max(4 * p.pmtu);
                p.cwnd = p.cwnd.min(p.ssthresh);
                p.pba = 0;
            }
        }
        ended
    }

    /// Congestion window growth (§7.2.1, §7.2.2) and T3 management (§6.3.2 R3) on each
    /// path with newly acknowledged data; a path whose data sent after its last error was
    /// acknowledged is working again.
    /// `may_grow` says, per path, whether the acknowledgement counts for growth: the
    /// cumulative ack moved, or with CMT's window update the path's pseudo-cumulative ack.
    fn grow_windows(
        &mut self,
        now: Instant,
        may_grow: &[bool],
        tally: &SackTally,
        flight_before: &[usize],
    ) {
        let cmt = self.shared.config.cmt.is_some();
        for (i, &before) in flight_before.iter().enumerate() {
            let in_fr = if cmt {
                self.paths[i].recovery_exit.is_some()
            } else {
                self.fast_recovery_exit.is_some()
            };
            let cum_advanced = may_grow.get(i).copied().unwrap_or(false);
            let acked = tally.acked_bytes[i];
            if acked > 0 {
                self.assoc_errors = 0;
                let fresh = match (tally.acked_sent_at[i], self.paths[i].last_error) {
                    (Some(sent), Some(err)) => sent > err,
                    _ => true,
                };
                if fresh {
                    self.path_ok(i);
                }
                let p = &mut self.paths[i];
                let mtu = p.pmtu;
                let full = before + mtu > p.cwnd;
                if cum_advanced && !in_fr && full {
                    if p.cwnd <= p.ssthresh {
                        p.cwnd += acked.min(mtu);
                    } else {
                        p.pba += acked;
                        if p.pba >= p.cwnd {
                            p.pba -= p.cwnd;
                            p.cwnd += mtu;
                        }
                    }
                }
                // R3: restart T3 when the earliest outstanding chunk of this path was acked.
                p.t3 = if p.flight > 0 {
                    Some(now + p.rto)
                } else {
                    None
                };
            }
            let p = &mut self.paths[i];
            if p.flight == 0 {
                p.pba = 0;
                p.t3 = None;
            }
        }
    }

    // ---------------------------------------------------------------- shutdown

    fn handle_shutdown(&mut self, now: Instant, cum_tsn_ack: u32, path: Option<usize>) {
        match self.state {
            State::Established | State::ShutdownPending | State::ShutdownReceived => {
                let sack = SackChunk {
                    flags: 0,
                    cum_tsn_ack,
                    a_rwnd: self.peer_rwnd.min(u32::MAX as usize) as u32,
                    gaps: Vec::new(),
                    dup_tsns: Vec::new(),
                };
                let a = unwrap32(self.cum_ack, cum_tsn_ack);
                if a >= self.cum_ack && a < self.next_tsn {
                    let keep = self.peer_rwnd;
                    self.handle_sack(now, &sack, false);
                    self.peer_rwnd = keep;
                }
                if self.state != State::Closed {
                    self.state = State::ShutdownReceived;
                    if let Some(i) = path {
                        self.t2_path = i;
                    }
                }
            }
            State::ShutdownSent => {
                // Both sides shut down at once: answer with SHUTDOWN ACK.
                self.state = State::ShutdownAckSent;
                self.t2_path = path.unwrap_or(self.data_path);
                self.send_t2(now);
            }
            State::ShutdownAckSent => {
                self.t2_path = path.unwrap_or(self.t2_path);
                self.send_t2(now);
            }
            _ => {}
        }
    }

    fn progress_shutdown(&mut self, now: Instant) {
        let all_acked = self.queue.is_empty() && self.outstanding.is_empty();
        match self.state {
            State::ShutdownPending if all_acked => {
                self.state = State::ShutdownSent;
                self.t2_path = self.data_path;
                self.send_t2(now);
            }
            State::ShutdownReceived if all_acked => {
                self.state = State::ShutdownAckSent;
                self.send_t2(now);
            }
            _ => {}
        }
    }

    /// Whether `remote` (with SCTP port `peer_port`) is one of this association's peer
    /// transport addresses. Used by the endpoint to demultiplex by address.
    pub(crate) fn peer_matches(&self, remote: SocketAddr, peer_port: u16) -> bool {
        self.peer_port == peer_port && self.path_index(remote).is_some()
    }
}

/// An ABORT (T bit clear) carrying the one error cause `cause`.
fn abort_chunk(cause: ErrorCause) -> Chunk<'static> {
    Chunk::Abort {
        t_bit: false,
        causes: vec![cause],
    }
}

/// Entering Fast Recovery (§7.2.4): path `p`'s ssthresh becomes half its window (at least
/// 4 MTU) and the window drops to it.
fn halve_window(p: &mut Path) {
    p.ssthresh = (p.cwnd / 2).max(4 * p.pmtu);
    p.cwnd = p.ssthresh;
    p.pba = 0;
}

/// Adds `n` miss indications to chunk `c` (§7.2.4); at three it is marked for fast
/// retransmission.
fn count_misses(
    c: &mut Sent,
    n: u32,
    paths: &mut [Path],
    rtx_fast: &mut usize,
    newly_marked: &mut Vec<usize>,
) {
    c.misses += n;
    if c.misses >= 3 {
        mark_fast_retransmit(c, paths, rtx_fast, newly_marked);
    }
}

/// Marks chunk `c` for fast retransmission (§7.2.4): out of its path's flight, counted in
/// `rtx_fast` (the chunks waiting for it) and its path noted in `newly_marked`.
fn mark_fast_retransmit(
    c: &mut Sent,
    paths: &mut [Path],
    rtx_fast: &mut usize,
    newly_marked: &mut Vec<usize>,
) {
    *rtx_fast += 1;
    c.rtx = Rtx::Fast;
    c.fast_retransmitted = true;
    c.in_flight = false;
    if let Some(p) = paths.get_mut(c.path) {
        p.flight = p.flight.saturating_sub(c.size());
        p.stats.fast_retransmits += 1;
    }
    if !newly_marked.contains(&c.path) {
        newly_marked.push(c.path);
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DataOutcome {
    New { in_order: bool },
    Duplicate,
    Dropped,
    Abort,
}

/// The span of an association: its local addresses and SCTP port, the peer's address and
/// SCTP port, and, recorded as the handshake gives them, both verification tags and every
/// address of the peer (`peer_addrs`). Addresses show their port only when it means something
/// (the UDP port under UDP encapsulation).
fn assoc_span(shared: &Shared, peer_port: u16) -> tracing::Span {
    tracing::info_span!(
        "sctp",
        local = %addr_list(shared.local_addrs.iter()),
        port = shared.local_port,
        peer = tracing::field::Empty,
        peer_port,
        vtag = tracing::field::Empty,
        peer_vtag = tracing::field::Empty,
        peer_addrs = tracing::field::Empty,
    )
}

/// Addresses as `a,b,c` for the log.
fn addr_list<'a>(addrs: impl Iterator<Item = &'a SocketAddr>) -> String {
    let words: Vec<String> = addrs
        .map(|a| match a.port() {
            0 => a.ip().to_string(),
            _ => a.to_string(),
        })
        .collect();
    words.join(",")
}

fn put_addr(out: &mut Vec<u8>, a: &SocketAddr) {
    match a.ip() {
        std::net::IpAddr::V4(ip) => {
            out.push(4);
            out.extend_from_slice(&ip.octets());
        }
        std::net::IpAddr::V6(ip) => {
            out.push(6);
            out.extend_from_slice(&ip.octets());
        }
    }
    out.extend_from_slice(&a.port().to_be_bytes());
}

fn get_addr(b: &[u8]) -> Option<SocketAddr> {
    let (ip, rest): (std::net::IpAddr, &[u8]) = match b.first()? {
        4 => {
            let o: [u8; 4] = b.get(1..5)?.try_into().ok()?;
            (o.into(), b.get(5..)?)
        }
        6 => {
            let o: [u8; 16] = b.get(1..17)?.try_into().ok()?;
            (o.into(), b.get(17..)?)
        }
        _ => return None,
    };
    let port = be16(rest, 0)?;
    Some(SocketAddr::new(ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 9260 §1.6: serial number arithmetic across the 2^32 wrap.
    #[test]
    fn rfc9260_1_6_tsn_unwrapping_across_wrap() {
        let r = TSN_BASE + u64::from(u32::MAX) - 1;
        assert_eq!(unwrap32(r, 1), TSN_BASE + u64::from(u32::MAX) + 2);
        assert_eq!(unwrap32(r, u32::MAX - 5), r - 4);
        assert_eq!(unwrap32(TSN_BASE + 10, 5), TSN_BASE + 5);
    }
}
