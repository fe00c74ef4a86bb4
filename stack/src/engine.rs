//! The sans-IO per-QP protocol engine: MPA setup, FPDU framing, DDP segmentation and
//! reassembly, the RDMAP operations and error handling of one queue pair.
//!
//! # Surface
//!
//! * In: [`QpEngine::post_send`], [`QpEngine::post_recv`], [`QpEngine::handle_stream`] (bytes
//!   read from TCP; [`QpEngine::handle_stream_partial`] lets the driver keep an incomplete
//!   FPDU so that whole FPDUs are placed from its buffer without an intermediate copy),
//!   [`QpEngine::handle_closed`] (the TCP connection ended),
//!   [`QpEngine::handle_timeout`], [`QpEngine::close`] (graceful disconnect).
//! * Out: [`QpEngine::poll_transmit`] / [`QpEngine::transmit_done`] (bytes to write to TCP; a
//!   short write consumes part of them), completions pushed to the QP's CQs,
//!   [`QpEngine::poll_event`] ([`QpEvent`]s), [`QpEngine::poll_timeout`] (next deadline) and
//!   [`QpEngine::should_close_transport`] (close the TCP connection once the transmit
//!   buffer is written).
//!
//! Time is a [`Duration`] since any origin the driver picks (virtual time in the simulator,
//! a monotonic clock's elapsed time on real sockets); it is only used for MPA setup timeouts.
//!
//! # Behaviour
//!
//! * **Setup.** [`Setup::Initiator`] sends the MPA Request at once and waits for the Reply;
//!   [`Setup::Responder`] waits for the Request and answers (accept or reject). The
//!   responder sends nothing after its Reply until it has received and validated the
//!   initiator's first FPDU (RFC 5044 §7.1.2); in peer-to-peer mode the initiator's first
//!   FPDU is the agreed RTR message (RFC 6581), which the responder consumes without
//!   involving the application. [`Setup::Established`] starts in full operation with a
//!   session negotiated elsewhere.
//! * **States.** `Idle` (setup) → `Rts` → `Closing` (graceful) or `Terminate` (a Terminate was
//!   sent or received) → `Error`. Entering `Error` flushes every outstanding work request.
//!   Posting in `Closing` or `Terminate` is refused at once; posting in `Error` completes the
//!   request with [`WcStatus::Flushed`] (the verbs model).
//! * **Send queue.** Work requests start in order and their messages go out in order. Sends
//!   and Writes are segmented at the MULPDU (RFC 5041 §5.2, `mpa::mulpdu` of the configured
//!   EMSS). RDMA Reads use one Read Request per SGE, each using the SGE's STag as Data Sink
//!   STag and one ORD credit; a Read that finds no credit waits, keeping the order.
//!   Atomics (RFC 7306) use ORD credits too. Completions are reported in posting order: a
//!   Send or Write completes when its last byte has been accepted by the transport, a Read
//!   or Atomic when its response has been placed.
//! * **Responder.** Incoming Read and Atomic Requests are validated, admitted against the
//!   IRD and queued; their responses are interleaved FPDU by FPDU with the QP's own traffic,
//!   subject to DDP's rule that at most one tagged and one untagged message are in progress
//!   per direction, so a long Send never blocks Read Responses and vice versa.
//! * **Errors.** Every incoming segment is validated whole before any byte of it is placed.
//!   A failed check sends the Terminate RFC 5040 §7 prescribes (with the copied headers
//!   of Figure 10, from [`rdmap::Terminate::for_segment`]), completes the affected work
//!   request with an error status carrying that cause, and moves the QP to `Terminate`, then
//!   `Error` once the Terminate is written. Local work-request errors (bad lkey, rights,
//!   bounds) complete the request with a local error and send an RDMAP Local Catastrophic
//!   Terminate; receive-side local errors send a DDP Local Catastrophic Terminate.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use arrayvec::ArrayVec;
use ddp::{
    Access, DdpCode, DdpError, Progress, QueueState, Reassembly, StagProblem, TaggedRepr,
    UntaggedRepr, qn,
};
use mpa::{
    ConnFrame, DeframeError, Deframer, FpduEncoder, FrameError, NegotiationError, RejectReason,
    RtrType, Session, TxConfig,
};
use rdmap::{
    AtomicRequest, AtomicResponse, Header, Ird, Message, OperationCode, RdmapCode, ReadRequest,
    TermCause, Terminate,
};
use thiserror::Error;

use crate::cq::{Cq, CqId, QpId, TermInfo, TermOrigin, Wc, WcOpcode, WcStatus};
use crate::mem::{LocalError, MAX_TX_PARTS, MemTable, Pd, RegisteredBuf, SgList, Span, TxPart};
use crate::wr::{MIN_MAX_SGE, RecvWr, SendOp, SendWr};

/// Default effective MSS: Ethernet MTU 1500 with TCP timestamps, as Linux siw sees it.
pub const DEFAULT_EMSS: u32 = 1448;

/// STag used in the zero-length tagged RTR messages (Write or Read) and other zero-length
/// tagged messages without a sink: the STag is not checked for zero-length messages
/// (RFC 5041 §5.2), but some peers reject STag 0.
pub const RTR_STAG: u32 = 1;

/// Transmit data is generated lazily, up to this many bytes ahead of the transport.
const TX_HIGH_WATER: usize = 256 * 1024;

/// Smallest FPDU payload sent from registered memory without a copy
/// ([`QpConfig::zero_copy_tx`]); smaller ones are cheaper to copy than to describe.
pub const ZERO_COPY_MIN: usize = 2048;

/// A range of registered memory in the transmit stream, sent as it is.
#[derive(Debug)]
struct TxRef {
    /// Position in the stream of generated bytes it follows (counted from the first
    /// generated byte ever).
    at: u64,
    buf: Arc<RegisteredBuf>,
    offset: usize,
    len: usize,
}

/// Where an FPDU's payload comes from.
enum PayloadSrc<'a> {
    /// Bytes `offset..` of a work request's SGL.
    Sgl(&'a SgList, u64),
    /// Bytes `offset..` of a span (an RDMA Read source); `None`: invalid (zeros go out).
    Span(Option<&'a Span>, usize),
}

impl PayloadSrc<'_> {
    /// Calls `f(buf, offset, len)` for each registered range of the next `len` payload
    /// bytes; false (maybe after some calls) when they are not all there.
    fn ranges(&self, len: usize, mut f: impl FnMut(&Arc<RegisteredBuf>, usize, usize)) -> bool {
        match *self {
            PayloadSrc::Sgl(sgl, off) => sgl.for_each_range(off, len, f),
            PayloadSrc::Span(Some(span), off) => match off.checked_add(len) {
                Some(end) if end <= span.len => {
                    f(&span.buf, span.off + off, len);
                    true
                }
                _ => false,
            },
            PayloadSrc::Span(None, _) => false,
        }
    }

    /// Appends `len` bytes at payload offset `at` to `out`; false when not all there.
    fn append(&self, at: usize, len: usize, out: &mut Vec<u8>) -> bool {
        match *self {
            PayloadSrc::Sgl(sgl, off) => sgl.gather_append(off + at as u64, len, out),
            PayloadSrc::Span(Some(span), off) => span.append_to(off + at, len, out),
            PayloadSrc::Span(None, _) => false,
        }
    }
}

/// Number of untagged queues (RFC 5040 QNs 0–2 plus RFC 7306 QN 3).
const QUEUES: usize = qn::COUNT as usize;

/// Queue-pair settings.
#[derive(Clone, Debug)]
pub struct QpConfig {
    /// The QP's id, reported in completions.
    pub qp: QpId,
    /// Its protection domain.
    pub pd: Pd,
    /// CQ for send-queue completions.
    pub send_cq: Cq,
    /// CQ for receive-queue completions.
    pub recv_cq: Cq,
    /// Maximum outstanding send work requests.
    pub sq_depth: usize,
    /// Maximum posted receive work requests.
    pub rq_depth: usize,
    /// Maximum SGEs per work request (at least [`MIN_MAX_SGE`]).
    pub max_sge: usize,
    /// Effective MSS of the TCP connection, for the MULPDU (RFC 5044 §6).
    pub emss: u32,
    /// Interop quirk, initiator only (zero: off): after the MPA Reply has been accepted,
    /// hold every outgoing byte (the first FPDU, e.g. the first Send or a P2P RTR) for this
    /// long. Linux siw 6.1 sends its Reply before it moves the socket to its QP receive
    /// path; an FPDU arriving in between gets no receive upcall and sits unread until
    /// another segment arrives, so a ULP that sends one message and waits for the answer
    /// (rping) hangs. Holding the first FPDU lets the responder finish that switch. The
    /// wire content is unchanged; only the timing of the first FPDU is.
    pub first_fpdu_delay: Duration,
    /// Zero-copy transmit (default off): FPDU payloads of at least [`ZERO_COPY_MIN`] bytes
    /// are not copied into the transmit buffer but handed to the driver as ranges of
    /// registered memory ([`QpEngine::transmit_with`], e.g. one gather `sendmsg` with the
    /// headers, the payload straight from the application's buffer and PAD + CRC). The CRC is
    /// computed over those ranges when the FPDU is framed, so an application that
    /// modifies a buffer while its work request is outstanding (which verbs forbid) may
    /// make the peer see a CRC error. Used only with markers off (markers cut payloads;
    /// then payloads are copied as before). [`QpEngine::poll_transmit`] still works: it
    /// copies such a range when it comes up.
    pub zero_copy_tx: bool,
}

impl QpConfig {
    /// Settings with depth 256 per queue, 6 SGEs and [`DEFAULT_EMSS`].
    pub fn new(qp: QpId, pd: Pd, send_cq: Cq, recv_cq: Cq) -> QpConfig {
        QpConfig {
            qp,
            pd,
            send_cq,
            recv_cq,
            sq_depth: 256,
            rq_depth: 256,
            max_sge: MIN_MAX_SGE,
            emss: DEFAULT_EMSS,
            first_fpdu_delay: Duration::ZERO,
            zero_copy_tx: false,
        }
    }
}

/// How the engine starts.
#[derive(Clone, Debug)]
pub enum Setup {
    /// Active side: send the MPA Request for this configuration, then wait for the Reply.
    Initiator(mpa::Config),
    /// Passive side: wait for the MPA Request and answer it with this configuration.
    Responder(mpa::Config),
    /// Full operation at once, with a session negotiated elsewhere.
    Established(Session),
}

/// QP states (the verbs state machine).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QpState {
    /// Not connected yet (MPA setup in progress).
    Idle,
    /// Ready to send: full operation.
    Rts,
    /// Graceful close requested; outstanding work finishes, then the transport is closed.
    Closing,
    /// A Terminate was sent or received; the stream is being torn down.
    Terminate,
    /// Failed or closed; every work request is flushed.
    Error,
}

/// Why the transport closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CloseReason {
    /// The peer closed the connection (FIN).
    PeerClosed,
    /// The connection was reset or timed out.
    Reset,
    /// The local side closed it (after [`QpEngine::should_close_transport`]).
    Local,
}

/// Why MPA connection setup failed.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum SetupError {
    /// The peer's MPA frame is malformed.
    #[error("invalid MPA frame from the peer: {0}")]
    Frame(#[from] FrameError),
    /// We (the responder) rejected the peer's Request.
    #[error("MPA Request rejected: {0}")]
    Rejected(RejectReason),
    /// We (the initiator) cannot accept the Reply, or the responder rejected us.
    #[error("MPA negotiation failed: {0}")]
    Negotiation(NegotiationError),
    /// The peer's frame did not arrive in time.
    #[error("MPA {0} not received in time")]
    Timeout(&'static str),
    /// The transport closed during setup.
    #[error("connection closed during MPA setup ({0:?})")]
    Closed(CloseReason),
}

/// Errors creating an engine.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum EngineError {
    /// The MPA configuration is unusable.
    #[error("MPA configuration: {0}")]
    Mpa(#[from] mpa::negotiate::ConfigError),
    /// The EMSS leaves no room for a DDP segment.
    #[error("EMSS {emss} gives a MULPDU of {mulpdu}, too small for DDP segments")]
    EmssTooSmall {
        /// The EMSS.
        emss: u32,
        /// The MULPDU it gives.
        mulpdu: u32,
    },
    /// The QP must accept at least six SGEs per work request.
    #[error("max_sge {0} is below the minimum of {MIN_MAX_SGE}")]
    MaxSgeTooSmall(usize),
}

/// Immediate errors of [`QpEngine::post_send`] and [`QpEngine::post_recv`]; the work
/// request was not queued.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum PostError {
    /// The QP's state does not accept this post.
    #[error("cannot post to a QP in state {0:?}")]
    InvalidState(QpState),
    /// The queue is full.
    #[error("queue full ({depth} work requests outstanding)")]
    QueueFull {
        /// The queue's depth.
        depth: usize,
    },
    /// Too many SGEs.
    #[error("{given} SGEs given, at most {max} allowed")]
    TooManySge {
        /// SGEs given.
        given: usize,
        /// The QP's maximum.
        max: usize,
    },
    /// A DDP message is shorter than 2^32 bytes (RFC 5041 §5.2).
    #[error("message of {len} bytes is too long (DDP messages are shorter than 2^32 bytes)")]
    MessageTooLong {
        /// Total SGL length.
        len: u64,
    },
    /// The work request is malformed for its operation.
    #[error("invalid work request: {0}")]
    InvalidWr(&'static str),
}

/// Events for the QP's owner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QpEvent {
    /// The state changed.
    StateChanged {
        /// Old state.
        from: QpState,
        /// New state.
        to: QpState,
    },
    /// MPA setup finished; full operation starts with this session.
    Established(Box<Session>),
    /// MPA setup failed.
    SetupFailed(SetupError),
    /// A Terminate was sent to the peer.
    TerminateSent(Terminate),
    /// The peer sent a Terminate.
    TerminateReceived(Terminate),
    /// A completion did not fit a CQ (also recorded on the CQ); the QP failed.
    CqOverflow(CqId),
    /// The transport closed.
    TransportClosed(CloseReason),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stream {
    Sq,
    Resp,
}

#[derive(Debug)]
enum SetupPhase {
    AwaitReply {
        cfg: mpa::Config,
        sent: ConnFrame,
        buf: Vec<u8>,
    },
    AwaitRequest {
        cfg: mpa::Config,
        buf: Vec<u8>,
    },
    Done,
}

#[derive(Debug)]
struct SqEntry {
    seq: u64,
    wr: SendWr,
    /// Every message of the request has been generated.
    generated: bool,
    /// Bytes of the transmit stream that must be accepted before it completes.
    tx_end: Option<u64>,
    /// Read or Atomic responses still awaited.
    pending: u32,
    byte_len: u32,
    /// An error found for this request.
    error: Option<(WcStatus, Option<TermInfo>)>,
    /// What identifies its messages on the wire, to match a Terminate's copied header.
    wire: Option<WireId>,
}

/// How a peer's Terminate names one of our messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WireId {
    /// Untagged messages on `qn` with MSNs `first..=last`.
    Untagged { qn: u32, first: u32, last: u32 },
    /// A tagged RDMA Write to `stag`.
    Write { stag: u32 },
}

impl WireId {
    fn matches(&self, h: &ddp::Header) -> bool {
        match (self, h) {
            (WireId::Untagged { qn, first, last }, ddp::Header::Untagged(u)) => {
                u.qn == *qn && u.msn.wrapping_sub(*first) <= last.wrapping_sub(*first)
            }
            (WireId::Write { stag }, ddp::Header::Tagged(t)) => {
                t.stag == *stag && t.rsvd_ulp & 0x0f == rdmap::Opcode::RdmaWrite.code()
            }
            _ => false,
        }
    }
}

#[derive(Debug)]
enum SqMsg {
    /// A Send or Write being segmented.
    Stream {
        seq: u64,
        first: Header,
        sgl: SgList,
        total: u32,
        sent: u32,
        tagged: bool,
    },
    /// RDMA Read Requests, one per sink SGE.
    Reads {
        seq: u64,
        sinks: Vec<(u32, u64, u32)>,
        next: usize,
        source_stag: u32,
        source_to: u64,
    },
    /// A single-segment message (Atomic Request, Immediate Data).
    Single { seq: u64, kind: SingleKind },
}

#[derive(Debug)]
enum SingleKind {
    Atomic { req: AtomicRequest, result: Span },
    Immediate { data: [u8; 8], solicited: bool },
}

#[derive(Debug)]
struct OutRead {
    /// The work request (`None` for the RTR).
    seq: Option<u64>,
    stag: u32,
    to: u64,
    size: u32,
    received: u64,
}

#[derive(Debug)]
struct OutAtomic {
    seq: u64,
    request_id: u32,
    result: Span,
}

#[derive(Debug)]
enum RespJob {
    Read {
        req: ReadRequest,
        src: Option<Span>,
        sent: u32,
    },
    Atomic {
        req: AtomicRequest,
        target: Span,
    },
}

#[derive(Debug)]
struct RqEntry {
    wr: RecvWr,
    sgl: Option<SgList>,
    error: Option<(WcStatus, Option<TermInfo>)>,
}

/// The protocol engine of one queue pair. See the [module documentation](self).
#[derive(Debug)]
pub struct QpEngine {
    cfg: QpConfig,
    mem: Arc<MemTable>,
    state: QpState,
    phase: SetupPhase,
    session: Option<Session>,
    enc: Option<FpduEncoder>,
    deframer: Option<Deframer>,
    mulpdu: usize,
    deadline: Option<Duration>,
    /// Output held until this time ([`QpConfig::first_fpdu_delay`]).
    tx_hold: Option<Duration>,
    /// The latest time the driver passed in.
    last_now: Duration,

    /// Where FPDUs (and MPA frames) are generated.
    tx: Vec<u8>,
    /// Generated bytes being handed to the transport (`tx_out[tx_head..]`); swapped with
    /// `tx` when used up, so that unsent bytes are never moved.
    tx_out: Vec<u8>,
    tx_head: usize,
    tx_produced: u64,
    tx_consumed: u64,
    /// Registered-memory ranges interleaved with the generated bytes (zero-copy transmit).
    tx_refs: VecDeque<TxRef>,
    /// Bytes of the first of `tx_refs` already handed to the transport.
    tx_ref_done: usize,
    /// Bytes of `tx_refs` not yet handed to the transport.
    tx_ref_bytes: usize,
    /// Generated bytes handed to the transport so far (positions of `tx_refs`).
    tx_gen_consumed: u64,
    /// A registered range copied for [`QpEngine::poll_transmit`].
    tx_scratch: Vec<u8>,

    sq: VecDeque<SqEntry>,
    next_seq: u64,
    /// Index in `sq` of the next request to start.
    sq_next: usize,
    cur_sq: Option<SqMsg>,
    orq: VecDeque<OutRead>,
    atomics: VecDeque<OutAtomic>,
    ord: u32,
    next_request_id: u32,
    msn_tx: [u32; QUEUES],

    rq: VecDeque<RqEntry>,
    rq_lens: VecDeque<u64>,
    rx_msn: [u32; QUEUES],
    reasm: Reassembly,
    ird: Ird,
    zeros: Vec<u64>,
    resp: VecDeque<RespJob>,

    busy: [Option<Stream>; 2],
    prefer: Stream,

    awaiting_first_fpdu: bool,
    rtr_send: Option<RtrType>,
    rtr_expect: Option<RtrType>,

    term_end: Option<u64>,
    term_done: bool,
    rx_stopped: bool,
    close_transport: bool,
    pending_fatal: bool,

    events: VecDeque<QpEvent>,
}

fn model(tagged: bool) -> usize {
    usize::from(!tagged)
}

fn emit_fpdu(enc: &mut FpduEncoder, tx: &mut Vec<u8>, parts: &[&[u8]]) -> usize {
    // Segments are cut at the MULPDU, so they always fit the ULPDU_Length field and the
    // marker pointer; an error here would be a bug, and emits nothing.
    enc.encode(parts, tx).unwrap_or(0)
}

/// Replaces whatever a failed gather appended after `start` by `len` zero bytes: stale or
/// partial data never goes out.
fn zero_run(out: &mut Vec<u8>, start: usize, len: usize) {
    out.truncate(start);
    out.resize(start + len, 0);
}

fn header_bytes(h: &Header) -> ([u8; 96], usize) {
    let mut b = [0u8; 96];
    let n = h.emit(&mut b).unwrap_or(0);
    (b, n)
}

fn wc_opcode(op: &SendOp) -> WcOpcode {
    match op {
        SendOp::Send { .. } => WcOpcode::Send,
        SendOp::Write { .. } => WcOpcode::RdmaWrite,
        SendOp::Read { .. } => WcOpcode::RdmaRead,
        SendOp::FetchAdd { .. } => WcOpcode::FetchAdd,
        SendOp::CmpSwap { .. } => WcOpcode::CmpSwap,
        SendOp::ImmediateData { .. } => WcOpcode::ImmediateData,
        SendOp::LocalInvalidate { .. } => WcOpcode::LocalInvalidate,
    }
}

/// The completion status for a work request hit by a Terminate the peer sent.
fn status_for_remote(cause: TermCause) -> WcStatus {
    match cause {
        TermCause::Rdmap(RdmapCode::RemoteProtection(_)) | TermCause::Ddp(DdpCode::Tagged(_)) => {
            WcStatus::RemoteAccess
        }
        TermCause::Mpa(_) => WcStatus::Transport,
        _ => WcStatus::RemoteOperation,
    }
}

fn local_status(e: &LocalError) -> WcStatus {
    match e {
        LocalError::InvalidStag { .. }
        | LocalError::PdMismatch { .. }
        | LocalError::Rights { .. }
        | LocalError::Bounds { .. } => WcStatus::LocalProtection,
    }
}

impl QpEngine {
    /// A new engine. `now` starts the MPA setup timer.
    pub fn new(
        cfg: QpConfig,
        mem: Arc<MemTable>,
        setup: Setup,
        now: Duration,
    ) -> Result<QpEngine, EngineError> {
        if cfg.max_sge < MIN_MAX_SGE {
            return Err(EngineError::MaxSgeTooSmall(cfg.max_sge));
        }
        let mut e = QpEngine {
            cfg,
            mem,
            state: QpState::Idle,
            phase: SetupPhase::Done,
            session: None,
            enc: None,
            deframer: None,
            mulpdu: 0,
            deadline: None,
            tx_hold: None,
            last_now: now,
            tx: Vec::new(),
            tx_out: Vec::new(),
            tx_head: 0,
            tx_produced: 0,
            tx_consumed: 0,
            tx_refs: VecDeque::new(),
            tx_ref_done: 0,
            tx_ref_bytes: 0,
            tx_gen_consumed: 0,
            tx_scratch: Vec::new(),
            sq: VecDeque::new(),
            next_seq: 0,
            sq_next: 0,
            cur_sq: None,
            orq: VecDeque::new(),
            atomics: VecDeque::new(),
            ord: 0,
            next_request_id: 1,
            msn_tx: [ddp::INITIAL_MSN; QUEUES],
            rq: VecDeque::new(),
            rq_lens: VecDeque::new(),
            rx_msn: [ddp::INITIAL_MSN; QUEUES],
            reasm: Reassembly::new(),
            ird: Ird::new(0),
            zeros: Vec::new(),
            resp: VecDeque::new(),
            busy: [None, None],
            prefer: Stream::Sq,
            awaiting_first_fpdu: false,
            rtr_send: None,
            rtr_expect: None,
            term_end: None,
            term_done: false,
            rx_stopped: false,
            close_transport: false,
            pending_fatal: false,
            events: VecDeque::new(),
        };
        // Both setup paths and the direct one need a usable MULPDU.
        let markers = match &setup {
            Setup::Established(s) => s.markers_tx,
            Setup::Initiator(c) | Setup::Responder(c) => c.markers_tx,
        };
        let m = mpa::mulpdu(e.cfg.emss, markers);
        if (m as usize) <= ddp::UNTAGGED_HEADER_LEN + AtomicRequest::LEN {
            return Err(EngineError::EmssTooSmall {
                emss: e.cfg.emss,
                mulpdu: m,
            });
        }
        match setup {
            Setup::Established(s) => e.enter_full(s),
            Setup::Initiator(cfg) => {
                let req = mpa::request(&cfg)?;
                // A validated configuration always emits.
                let _ = req.emit(&mut e.tx);
                e.tx_produced = e.tx.len() as u64;
                e.deadline = Some(now.saturating_add(mpa::negotiate::REPLY_TIMEOUT));
                e.phase = SetupPhase::AwaitReply {
                    cfg,
                    sent: req,
                    buf: Vec::new(),
                };
            }
            Setup::Responder(cfg) => {
                cfg.validate()?;
                e.deadline = Some(now.saturating_add(mpa::negotiate::REQUEST_TIMEOUT));
                e.phase = SetupPhase::AwaitRequest {
                    cfg,
                    buf: Vec::new(),
                };
            }
        }
        Ok(e)
    }

    // ----------------------------------------------------------------------------------
    // Accessors
    // ----------------------------------------------------------------------------------

    /// Current state.
    pub fn state(&self) -> QpState {
        self.state
    }

    /// The QP's id.
    pub fn qp_id(&self) -> QpId {
        self.cfg.qp
    }

    /// The negotiated session, once in full operation.
    pub fn session(&self) -> Option<&Session> {
        self.session.as_ref()
    }

    /// The MULPDU used for segmentation (0 before full operation).
    pub fn mulpdu(&self) -> usize {
        self.mulpdu
    }

    /// Send work requests not yet completed.
    pub fn sq_outstanding(&self) -> usize {
        self.sq.len()
    }

    /// Receive work requests posted and not yet completed.
    pub fn rq_posted(&self) -> usize {
        self.rq.len()
    }

    /// Outbound Read and Atomic requests awaiting their response (counted against ORD).
    pub fn ord_in_use(&self) -> usize {
        self.orq.len() + self.atomics.len()
    }

    /// Inbound Read and Atomic Requests accepted and not yet fully answered (against IRD).
    pub fn ird_in_use(&self) -> u32 {
        self.ird.outstanding()
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<QpEvent> {
        self.events.pop_front()
    }

    /// The next deadline at which [`QpEngine::handle_timeout`] must be called.
    pub fn poll_timeout(&self) -> Option<Duration> {
        match (self.deadline, self.tx_hold) {
            (Some(d), Some(h)) => Some(d.min(h)),
            (d, h) => d.or(h),
        }
    }

    /// Whether the driver should close the TCP connection now: the engine has finished
    /// (graceful close done, Terminate written, setup failed) and every byte it produced
    /// has been accepted by [`QpEngine::transmit_done`].
    pub fn should_close_transport(&self) -> bool {
        self.close_transport && self.tx_pending() == 0
    }

    // ----------------------------------------------------------------------------------
    // Posting
    // ----------------------------------------------------------------------------------

    /// Posts a send-queue work request.
    pub fn post_send(&mut self, wr: SendWr) -> Result<(), PostError> {
        match self.state {
            QpState::Idle | QpState::Rts => {}
            QpState::Closing | QpState::Terminate => {
                return Err(PostError::InvalidState(self.state));
            }
            QpState::Error => {
                self.validate_send(&wr)?;
                let wc = Wc::new(self.cfg.qp, wr.wr_id, wc_opcode(&wr.op), WcStatus::Flushed);
                self.push_send_wc(wc);
                self.finish_call();
                return Ok(());
            }
        }
        self.validate_send(&wr)?;
        if self.sq.len() >= self.cfg.sq_depth {
            return Err(PostError::QueueFull {
                depth: self.cfg.sq_depth,
            });
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.sq.push_back(SqEntry {
            seq,
            wr,
            generated: false,
            tx_end: None,
            pending: 0,
            byte_len: 0,
            error: None,
            wire: None,
        });
        self.finish_call();
        Ok(())
    }

    /// Posts a send work request a driver has already accepted (its doorbell ran
    /// [`QpEngine::check_send`] when the application posted it): should the engine no
    /// longer take it — the QP left RTS in between — it completes with
    /// [`WcStatus::Flushed`] instead of failing.
    pub fn post_send_accepted(&mut self, wr: SendWr) {
        let (id, op) = (wr.wr_id, wc_opcode(&wr.op));
        if self.post_send(wr).is_err() {
            let wc = Wc::new(self.cfg.qp, id, op, WcStatus::Flushed);
            self.push_send_wc(wc);
            self.finish_call();
        }
    }

    /// The checks of [`QpEngine::post_send`] that need no engine state: SGE count against
    /// `max_sge`, message length, TO wrap-around, operation shape, and whether an RDMA Read
    /// or atomic is allowed (`ord_zero`: the session's ORD is 0).
    pub fn check_send(wr: &SendWr, max_sge: usize, ord_zero: bool) -> Result<(), PostError> {
        if wr.sgl.len() > max_sge {
            return Err(PostError::TooManySge {
                given: wr.sgl.len(),
                max: max_sge,
            });
        }
        let len = wr.sgl_len();
        if len > u64::from(u32::MAX) {
            return Err(PostError::MessageTooLong { len });
        }
        match wr.op {
            SendOp::Send { .. } => {}
            SendOp::Write { remote_to, .. } | SendOp::Read { remote_to, .. } => {
                if remote_to.checked_add(len).is_none() {
                    return Err(PostError::InvalidWr(
                        "remote TO plus length wraps past 2^64",
                    ));
                }
                if wr.op.needs_ord() && ord_zero {
                    return Err(PostError::InvalidWr(
                        "RDMA Read on a connection whose ORD is 0",
                    ));
                }
            }
            SendOp::FetchAdd { .. } | SendOp::CmpSwap { .. } => {
                if wr.sgl.len() != 1 || wr.sgl.first().is_some_and(|s| s.len != 8) {
                    return Err(PostError::InvalidWr(
                        "an atomic needs exactly one 8-byte SGE for the original value",
                    ));
                }
                if ord_zero {
                    return Err(PostError::InvalidWr(
                        "atomic on a connection whose ORD is 0",
                    ));
                }
            }
            SendOp::ImmediateData { .. } => {
                if !wr.sgl.is_empty() {
                    return Err(PostError::InvalidWr("Immediate Data carries no SGL"));
                }
            }
            SendOp::LocalInvalidate { .. } => {
                if !wr.sgl.is_empty() {
                    return Err(PostError::InvalidWr("Local Invalidate carries no SGL"));
                }
            }
        }
        Ok(())
    }

    fn validate_send(&self, wr: &SendWr) -> Result<(), PostError> {
        let ord_zero = self.session.as_ref().is_some_and(|s| s.ord == 0);
        Self::check_send(wr, self.cfg.max_sge, ord_zero)
    }

    /// Posts a receive buffer.
    pub fn post_recv(&mut self, wr: RecvWr) -> Result<(), PostError> {
        if wr.sgl.len() > self.cfg.max_sge {
            return Err(PostError::TooManySge {
                given: wr.sgl.len(),
                max: self.cfg.max_sge,
            });
        }
        let len = wr.sgl_len();
        if len > u64::from(u32::MAX) {
            return Err(PostError::MessageTooLong { len });
        }
        match self.state {
            QpState::Idle | QpState::Rts | QpState::Closing => {}
            QpState::Terminate => return Err(PostError::InvalidState(self.state)),
            QpState::Error => {
                let wc = Wc::new(self.cfg.qp, wr.wr_id, WcOpcode::Recv, WcStatus::Flushed);
                self.push_recv_wc(wc);
                self.finish_call();
                return Ok(());
            }
        }
        if self.rq.len() >= self.cfg.rq_depth {
            return Err(PostError::QueueFull {
                depth: self.cfg.rq_depth,
            });
        }
        self.rq_lens.push_back(len);
        self.rq.push_back(RqEntry {
            wr,
            sgl: None,
            error: None,
        });
        Ok(())
    }

    /// Requests a graceful close: no more posts; once every outstanding work request has
    /// completed and every response has been sent, [`QpEngine::should_close_transport`]
    /// becomes true.
    pub fn close(&mut self) {
        match self.state {
            QpState::Rts => self.set_state(QpState::Closing),
            QpState::Idle => {
                self.close_transport = true;
                self.enter_error();
            }
            _ => {}
        }
        self.finish_call();
    }

    // ----------------------------------------------------------------------------------
    // Transport input
    // ----------------------------------------------------------------------------------

    /// Bytes read from the TCP connection, in order, in chunks of any size.
    pub fn handle_stream(&mut self, now: Duration, data: &[u8]) {
        self.last_now = self.last_now.max(now);
        self.stream_in(data, false);
    }

    /// Like [`QpEngine::handle_stream`], but the engine may leave an incomplete FPDU at the
    /// end of `data` untaken; returns how many bytes it took. The caller must present the
    /// untaken bytes again, followed by the next ones read. Whole FPDUs are then placed
    /// straight from `data` into registered memory, without an intermediate copy. At most
    /// one FPDU (under 70 000 bytes) is left untaken.
    pub fn handle_stream_partial(&mut self, now: Duration, data: &[u8]) -> usize {
        self.last_now = self.last_now.max(now);
        self.stream_in(data, true)
    }

    /// How many more stream octets complete the FPDU at the front of `pending` (what
    /// [`QpEngine::handle_stream_partial`] left untaken), when known.
    pub fn rx_missing(&self, pending: &[u8]) -> Option<usize> {
        if self.rx_stopped || !matches!(self.phase, SetupPhase::Done) {
            return None;
        }
        self.deframer.as_ref()?.missing(pending)
    }

    fn stream_in(&mut self, data: &[u8], retain: bool) -> usize {
        if data.is_empty() || self.rx_stopped {
            return data.len();
        }
        let took = match std::mem::replace(&mut self.phase, SetupPhase::Done) {
            SetupPhase::Done => self.feed_fpdus(data, retain),
            SetupPhase::AwaitReply { cfg, sent, mut buf } => {
                buf.extend_from_slice(data);
                self.on_reply_bytes(cfg, sent, buf);
                data.len()
            }
            SetupPhase::AwaitRequest { cfg, mut buf } => {
                buf.extend_from_slice(data);
                self.on_request_bytes(cfg, buf);
                data.len()
            }
        };
        self.finish_call();
        took
    }

    /// The TCP connection closed (or was reset).
    pub fn handle_closed(&mut self, now: Duration, reason: CloseReason) {
        let _ = now;
        self.events.push_back(QpEvent::TransportClosed(reason));
        if !matches!(self.phase, SetupPhase::Done) {
            self.phase = SetupPhase::Done;
            self.deadline = None;
            self.events
                .push_back(QpEvent::SetupFailed(SetupError::Closed(reason)));
        }
        self.rx_stopped = true;
        // Nothing more can be written.
        self.tx.clear();
        self.tx_out.clear();
        self.tx_head = 0;
        self.tx_refs.clear();
        self.tx_ref_done = 0;
        self.tx_ref_bytes = 0;
        self.close_transport = true;
        self.enter_error();
        self.finish_call();
    }

    /// Timer expiry; call at or after [`QpEngine::poll_timeout`].
    pub fn handle_timeout(&mut self, now: Duration) {
        self.last_now = self.last_now.max(now);
        if self.tx_hold.is_some_and(|h| now >= h) {
            self.tx_hold = None;
        }
        let Some(d) = self.deadline else {
            return;
        };
        if now < d {
            return;
        }
        self.deadline = None;
        let what = match self.phase {
            SetupPhase::AwaitReply { .. } => "Reply",
            SetupPhase::AwaitRequest { .. } => "Request",
            SetupPhase::Done => return,
        };
        self.phase = SetupPhase::Done;
        self.setup_failed(SetupError::Timeout(what));
        self.finish_call();
    }

    // ----------------------------------------------------------------------------------
    // Transport output
    // ----------------------------------------------------------------------------------

    /// Bytes to write to the TCP connection (generated on demand). Report how many were
    /// written with [`QpEngine::transmit_done`].
    pub fn poll_transmit(&mut self) -> Option<&[u8]> {
        if self.tx_hold.is_some() {
            return None;
        }
        self.fill_tx();
        if self.tx_head >= self.tx_out.len() {
            self.tx_out.clear();
            self.tx_head = 0;
            std::mem::swap(&mut self.tx_out, &mut self.tx);
        }
        let pending = self.tx_out.get(self.tx_head..).unwrap_or(&[]);
        if let Some(r) = self.tx_refs.front() {
            // Generated bytes up to the next registered range, or that range (copied).
            let run = self.gen_run();
            if run == 0 {
                let (off, len) = (r.offset + self.tx_ref_done, r.len - self.tx_ref_done);
                self.tx_scratch.clear();
                if r.buf.append_to(off, len, &mut self.tx_scratch).is_err() {
                    self.tx_scratch.resize(len, 0);
                }
                return Some(&self.tx_scratch);
            }
            return pending.get(..run.min(pending.len()));
        }
        if pending.is_empty() {
            None
        } else {
            Some(pending)
        }
    }

    /// Generated bytes waiting before the next registered range (all of them if none).
    fn gen_run(&self) -> usize {
        let generated = self.tx_out.len().saturating_sub(self.tx_head) + self.tx.len();
        match self.tx_refs.front() {
            Some(r) => usize::try_from(r.at.saturating_sub(self.tx_gen_consumed))
                .unwrap_or(usize::MAX)
                .min(generated),
            None => generated,
        }
    }

    /// `n` bytes of what [`QpEngine::poll_transmit`] returned (or of what
    /// [`QpEngine::transmit_with`] offered) were accepted by the transport.
    pub fn transmit_done(&mut self, n: usize) {
        let mut left = n.min(self.tx_pending());
        self.tx_consumed += left as u64;
        while left > 0 {
            let run = self.gen_run();
            if run > 0 {
                let k = run.min(left);
                self.consume_generated(k);
                left -= k;
                continue;
            }
            let Some(r) = self.tx_refs.front() else {
                break;
            };
            let k = (r.len - self.tx_ref_done).min(left);
            self.tx_ref_done += k;
            self.tx_ref_bytes -= k;
            left -= k;
            if self.tx_ref_done == r.len {
                self.tx_refs.pop_front();
                self.tx_ref_done = 0;
            }
        }
        self.finish_call();
    }

    /// Marks `k` generated bytes (at most what is pending) as handed to the transport.
    fn consume_generated(&mut self, mut k: usize) {
        while k > 0 {
            if self.tx_head >= self.tx_out.len() {
                self.tx_out.clear();
                self.tx_head = 0;
                std::mem::swap(&mut self.tx_out, &mut self.tx);
                if self.tx_out.is_empty() {
                    break;
                }
            }
            let m = (self.tx_out.len() - self.tx_head).min(k);
            self.tx_head += m;
            self.tx_gen_consumed += m as u64;
            k -= m;
        }
        if self.tx_head == self.tx_out.len() {
            self.tx_out.clear();
            self.tx_head = 0;
        }
    }

    /// Offers everything there is to send (generated now if needed) as a gather list of at
    /// most [`MAX_TX_PARTS`] pieces — generated bytes and, with
    /// [`QpConfig::zero_copy_tx`], ranges of registered memory — to `write`, which returns
    /// how many bytes it took (e.g. [`crate::mem::write_parts`], one `sendmsg`); those are
    /// marked accepted as by [`QpEngine::transmit_done`]. `None` when there is nothing to
    /// send (`write` is not called); otherwise what `write` returned.
    pub fn transmit_with<E>(
        &mut self,
        write: impl FnOnce(&[TxPart<'_>]) -> Result<usize, E>,
    ) -> Option<Result<usize, E>> {
        if self.tx_hold.is_some() {
            return None;
        }
        self.fill_tx();
        let result = {
            let a = self.tx_out.get(self.tx_head..).unwrap_or(&[]);
            let b = self.tx.as_slice();
            let base = self.tx_gen_consumed;
            // Generated bytes at stream positions from..to (base <= from <= to <= the end of
            // `b`), as up to two slices.
            fn gen_slices<'a>(
                (a, b, base): (&'a [u8], &'a [u8], u64),
                from: u64,
                to: u64,
                parts: &mut ArrayVec<TxPart<'a>, MAX_TX_PARTS>,
            ) {
                let x = usize::try_from(from - base).unwrap_or(usize::MAX);
                let y = usize::try_from(to - base).unwrap_or(usize::MAX);
                let al = a.len();
                if x < al {
                    let s = a.get(x..y.min(al)).unwrap_or(&[]);
                    if !s.is_empty() {
                        parts.push(TxPart::Bytes(s));
                    }
                }
                if y > al {
                    let s = b.get(x.max(al) - al..y - al).unwrap_or(&[]);
                    if !s.is_empty() {
                        parts.push(TxPart::Bytes(s));
                    }
                }
            }
            let bufs = (a, b, base);
            let mut parts: ArrayVec<TxPart<'_>, MAX_TX_PARTS> = ArrayVec::new();
            let end = base + (a.len() + b.len()) as u64;
            let mut pos = base;
            let mut all = true;
            for (i, r) in self.tx_refs.iter().enumerate() {
                // Room for this reference's up to three pieces and the final two generated
                // slices: `parts` never overflows.
                if parts.len() + 3 + 2 > MAX_TX_PARTS {
                    all = false;
                    break;
                }
                let at = r.at.clamp(pos, end);
                gen_slices(bufs, pos, at, &mut parts);
                pos = at;
                let skip = if i == 0 { self.tx_ref_done } else { 0 };
                parts.push(TxPart::Mem {
                    buf: &r.buf,
                    offset: r.offset + skip,
                    len: r.len - skip,
                });
            }
            if all {
                gen_slices(bufs, pos, end, &mut parts);
            }
            if parts.is_empty() {
                return None;
            }
            write(&parts)
        };
        if let Ok(n) = result {
            self.transmit_done(n);
        }
        Some(result)
    }

    /// Convenience for drivers with an unbounded sink: appends everything there is to send
    /// to `out` and marks it accepted.
    pub fn transmit_all(&mut self, out: &mut Vec<u8>) -> usize {
        let mut total = 0;
        while let Some(b) = self.poll_transmit() {
            let n = b.len();
            out.extend_from_slice(b);
            self.transmit_done(n);
            total += n;
        }
        total
    }

    // ----------------------------------------------------------------------------------
    // State handling
    // ----------------------------------------------------------------------------------

    fn set_state(&mut self, to: QpState) {
        if self.state != to {
            let from = self.state;
            self.state = to;
            self.events.push_back(QpEvent::StateChanged { from, to });
        }
    }

    fn push_wc(&mut self, cq: Cq, wc: Wc) {
        if cq.push(wc).is_err() {
            let id = cq.id();
            if !self
                .events
                .iter()
                .any(|e| matches!(e, QpEvent::CqOverflow(c) if *c == id))
            {
                self.events.push_back(QpEvent::CqOverflow(id));
            }
            self.pending_fatal = true;
        }
    }

    fn push_send_wc(&mut self, wc: Wc) {
        let cq = self.cfg.send_cq.clone();
        self.push_wc(cq, wc);
    }

    fn push_recv_wc(&mut self, wc: Wc) {
        let cq = self.cfg.recv_cq.clone();
        self.push_wc(cq, wc);
    }

    /// Housekeeping at the end of every public entry point.
    fn finish_call(&mut self) {
        self.reap_sq();
        if self.pending_fatal {
            self.pending_fatal = false;
            if !matches!(self.state, QpState::Error | QpState::Terminate) {
                self.local_fatal(None, WcStatus::Fatal);
            }
        }
        if let Some(end) = self.term_end
            && self.tx_consumed >= end
            && !self.term_done
        {
            self.term_done = true;
            self.close_transport = true;
            self.enter_error();
        }
        if self.state == QpState::Closing
            && self.sq.is_empty()
            && self.resp.is_empty()
            && self.orq.is_empty()
            && self.atomics.is_empty()
            && self.cur_sq.is_none()
            && !self.close_transport
        {
            self.close_transport = true;
        }
    }

    fn enter_error(&mut self) {
        if self.state == QpState::Error {
            return;
        }
        self.reap_sq();
        self.set_state(QpState::Error);
        self.rx_stopped = true;
        self.deadline = None;
        self.cur_sq = None;
        self.orq.clear();
        self.atomics.clear();
        self.resp.clear();
        let qp = self.cfg.qp;
        while let Some(e) = self.sq.pop_front() {
            let (status, term) = e.error.unwrap_or((WcStatus::Flushed, None));
            let mut wc = Wc::new(qp, e.wr.wr_id, wc_opcode(&e.wr.op), status);
            wc.term = term;
            self.push_send_wc(wc);
        }
        self.sq_next = 0;
        while let Some(r) = self.rq.pop_front() {
            let (status, term) = r.error.unwrap_or((WcStatus::Flushed, None));
            let mut wc = Wc::new(qp, r.wr.wr_id, WcOpcode::Recv, status);
            wc.term = term;
            self.push_recv_wc(wc);
        }
        self.rq_lens.clear();
    }

    fn setup_failed(&mut self, err: SetupError) {
        self.deadline = None;
        self.events.push_back(QpEvent::SetupFailed(err));
        self.close_transport = true;
        self.enter_error();
    }

    /// Queues a Terminate as the last FPDU of the stream and stops everything else.
    fn send_terminate(&mut self, term: Terminate) {
        if self.term_end.is_some() || matches!(self.state, QpState::Terminate | QpState::Error) {
            return;
        }
        self.rx_stopped = true;
        self.cur_sq = None;
        self.resp.clear();
        let Some(enc) = self.enc.as_mut() else {
            self.close_transport = true;
            self.enter_error();
            return;
        };
        let header = Header::Terminate {
            msn: self.msn_tx[qn::TERMINATE as usize],
            terminate: term,
        };
        self.msn_tx[qn::TERMINATE as usize] = ddp::next_msn(self.msn_tx[qn::TERMINATE as usize]);
        let (h, n) = header_bytes(&header);
        let written = emit_fpdu(enc, &mut self.tx, &[h.get(..n).unwrap_or(&[])]);
        self.tx_produced += written as u64;
        self.term_end = Some(self.tx_produced);
        self.events.push_back(QpEvent::TerminateSent(term));
        self.set_state(QpState::Terminate);
    }

    /// A local error of send work request `seq` (or of the QP when `None`): the request
    /// completes with `status`, an RDMAP Local Catastrophic Terminate goes out.
    fn local_fatal(&mut self, seq: Option<u64>, status: WcStatus) {
        let cause = TermCause::Rdmap(RdmapCode::LOCAL_CATASTROPHIC);
        let info = TermInfo {
            cause,
            origin: TermOrigin::Sent,
        };
        if let Some(seq) = seq
            && let Some(e) = self.sq_entry_mut(seq)
        {
            e.error = Some((status, Some(info)));
        }
        self.send_terminate(Terminate::bare(cause));
    }

    /// An error found in an incoming segment: send `term`, mark the receive in progress.
    fn fail_rx(&mut self, term: Terminate, rq_status: Option<WcStatus>) {
        if let Some(status) = rq_status
            && let Some(r) = self.rq.front_mut()
        {
            r.error = Some((
                status,
                Some(TermInfo {
                    cause: term.cause,
                    origin: TermOrigin::Sent,
                }),
            ));
        }
        self.send_terminate(term);
    }

    fn fail_segment(&mut self, cause: TermCause, seg: &[u8], rq_status: Option<WcStatus>) {
        self.fail_rx(Terminate::for_segment(cause, seg), rq_status);
    }

    fn sq_entry_mut(&mut self, seq: u64) -> Option<&mut SqEntry> {
        let front = self.sq.front()?.seq;
        let i = usize::try_from(seq.checked_sub(front)?).ok()?;
        self.sq.get_mut(i)
    }

    fn reap_sq(&mut self) {
        if matches!(self.state, QpState::Error) {
            return;
        }
        while let Some(e) = self.sq.front() {
            let done = e.error.is_none()
                && e.generated
                && e.pending == 0
                && e.tx_end.is_none_or(|end| self.tx_consumed >= end);
            if !done {
                break;
            }
            let Some(e) = self.sq.pop_front() else {
                break;
            };
            self.sq_next = self.sq_next.saturating_sub(1);
            if e.wr.signaled {
                let mut wc = Wc::new(
                    self.cfg.qp,
                    e.wr.wr_id,
                    wc_opcode(&e.wr.op),
                    WcStatus::Success,
                );
                wc.byte_len = e.byte_len;
                self.push_send_wc(wc);
            }
        }
    }

    // ----------------------------------------------------------------------------------
    // MPA setup
    // ----------------------------------------------------------------------------------

    fn on_reply_bytes(&mut self, cfg: mpa::Config, sent: ConnFrame, buf: Vec<u8>) {
        let (reply, used) = match ConnFrame::parse(&buf) {
            Ok(x) => x,
            Err(FrameError::Truncated { .. }) => {
                self.phase = SetupPhase::AwaitReply { cfg, sent, buf };
                return;
            }
            Err(e) => {
                self.setup_failed(SetupError::Frame(e));
                return;
            }
        };
        self.deadline = None;
        match mpa::complete(&cfg, &sent, &reply) {
            Ok(session) => {
                if !self.cfg.first_fpdu_delay.is_zero() {
                    self.tx_hold = Some(self.last_now.saturating_add(self.cfg.first_fpdu_delay));
                }
                self.enter_full(session);
                let rest = buf.get(used..).unwrap_or(&[]);
                if !rest.is_empty() {
                    self.feed_fpdus(rest, false);
                }
            }
            Err(err) => {
                if let Some(code) = err.llp_error() {
                    // The Reply was accepted as a frame: framing is known, so the refusal
                    // goes out as a Terminate (RFC 6581 §8).
                    let tx = TxConfig {
                        crc: sent.crc || reply.crc,
                        markers: reply.markers,
                    };
                    let mut enc = FpduEncoder::new(tx);
                    let cause = TermCause::Mpa(
                        rdmap::MpaCode::from_code(code.code())
                            .unwrap_or(rdmap::MpaCode::InvalidRequestReply),
                    );
                    let t = Terminate::bare(cause);
                    let header = Header::Terminate {
                        msn: ddp::INITIAL_MSN,
                        terminate: t,
                    };
                    let (h, n) = header_bytes(&header);
                    let written = emit_fpdu(&mut enc, &mut self.tx, &[h.get(..n).unwrap_or(&[])]);
                    self.tx_produced += written as u64;
                    self.events.push_back(QpEvent::TerminateSent(t));
                }
                self.setup_failed(SetupError::Negotiation(err));
            }
        }
    }

    fn on_request_bytes(&mut self, cfg: mpa::Config, buf: Vec<u8>) {
        let (request, used) = match ConnFrame::parse(&buf) {
            Ok(x) => x,
            Err(FrameError::Truncated { .. }) => {
                self.phase = SetupPhase::AwaitRequest { cfg, buf };
                return;
            }
            Err(e) => {
                self.setup_failed(SetupError::Frame(e));
                return;
            }
        };
        self.deadline = None;
        match mpa::respond(&cfg, &request) {
            Ok(acc) => {
                let before = self.tx.len();
                let _ = acc.reply.emit(&mut self.tx);
                self.tx_produced += (self.tx.len() - before) as u64;
                self.enter_full(acc.session);
                let rest = buf.get(used..).unwrap_or(&[]);
                if !rest.is_empty() {
                    self.feed_fpdus(rest, false);
                }
            }
            Err(rej) => {
                let before = self.tx.len();
                let _ = rej.reply.emit(&mut self.tx);
                self.tx_produced += (self.tx.len() - before) as u64;
                self.setup_failed(SetupError::Rejected(rej.reason));
            }
        }
    }

    fn enter_full(&mut self, session: Session) {
        self.enc = Some(FpduEncoder::new(session.tx_config()));
        self.deframer = Some(Deframer::new(session.rx_config()));
        self.mulpdu = mpa::mulpdu(self.cfg.emss, session.markers_tx) as usize;
        self.ird = Ird::new(u32::from(session.ird));
        self.zeros = vec![0; usize::from(session.ird).max(usize::from(session.ord))];
        self.ord = u32::from(session.ord);
        self.awaiting_first_fpdu = session.must_await_first_fpdu();
        self.rtr_send = session.rtr_to_send();
        self.rtr_expect = session.rtr_to_expect();
        self.deadline = None;
        self.events
            .push_back(QpEvent::Established(Box::new(session.clone())));
        self.session = Some(session);
        self.phase = SetupPhase::Done;
        self.set_state(QpState::Rts);
    }

    // ----------------------------------------------------------------------------------
    // Receive path
    // ----------------------------------------------------------------------------------

    /// Deframes and handles `data`; returns how many bytes were taken (all of them unless
    /// `retain` and `data` ends inside an FPDU). ULPDUs of FPDUs that arrived whole are
    /// handled in place, borrowed from `data`.
    fn feed_fpdus(&mut self, data: &[u8], retain: bool) -> usize {
        let Some(mut d) = self.deframer.take() else {
            return data.len();
        };
        let took = d.push_with(data, retain, |r| {
            if self.rx_stopped {
                return false;
            }
            match r {
                Ok(fpdu) => self.on_ulpdu(fpdu.ulpdu),
                Err(e) => self.on_deframe_error(&e),
            }
            !self.rx_stopped
        });
        if self.deframer.is_none() {
            self.deframer = Some(d);
        }
        if self.rx_stopped { data.len() } else { took }
    }

    fn on_deframe_error(&mut self, e: &DeframeError) {
        // RFC 5044 §8 / RFC 5040 §7: an MPA error ends the stream with an LLP Terminate
        // without copied headers.
        let code =
            rdmap::MpaCode::from_code(e.term_code()).unwrap_or(rdmap::MpaCode::MarkerMismatch);
        self.fail_rx(Terminate::bare(TermCause::Mpa(code)), None);
    }

    fn queue_states<'a>(&'a mut self) -> [QueueState<'a>; QUEUES] {
        let rq = self.rq_lens.make_contiguous();
        let free = self.ird.limit().saturating_sub(self.ird.outstanding());
        let free_slots = self.zeros.get(..free as usize).unwrap_or(&[]);
        let atomics = self.zeros.get(..self.atomics.len()).unwrap_or(&[]);
        let term_slot: &[u64] = if self.term_done || self.rx_stopped {
            &[]
        } else {
            &[0]
        };
        [
            QueueState {
                first_msn: self.rx_msn[0],
                buffers: rq,
                granted: None,
                next_mo: None,
            },
            QueueState {
                first_msn: self.rx_msn[1],
                buffers: free_slots,
                granted: Some(free),
                next_mo: None,
            },
            QueueState {
                first_msn: self.rx_msn[2],
                buffers: term_slot,
                granted: Some(1),
                next_mo: None,
            },
            QueueState {
                first_msn: self.rx_msn[3],
                buffers: atomics,
                granted: Some(atomics.len() as u32),
                next_mo: None,
            },
        ]
    }

    /// DDP untagged checks (RFC 5041 §7.1) plus in-order MSN: over MPA/TCP the next message
    /// on a queue must carry the next MSN.
    fn check_untagged(&mut self, u: &UntaggedRepr, payload_len: usize) -> Result<(), DdpError> {
        let expected = usize::try_from(u.qn)
            .ok()
            .and_then(|q| self.rx_msn.get(q).copied());
        let queues = self.queue_states();
        ddp::check_untagged(u, payload_len, &queues)?;
        if let Some(first) = expected
            && u.msn != first
        {
            return Err(DdpError::MsnRange {
                qn: u.qn,
                msn: u.msn,
                first_msn: first,
            });
        }
        Ok(())
    }

    fn on_ulpdu(&mut self, seg: &[u8]) {
        let msg = match Message::parse(seg) {
            Ok(m) => m,
            Err(e) => {
                self.fail_rx(e.terminate(seg), None);
                return;
            }
        };
        if let Some(t) = self.rtr_expect.take()
            && !self.check_rtr(t, &msg, seg)
        {
            return;
        }
        self.awaiting_first_fpdu = false;
        match msg.header {
            Header::RdmaWrite { last, stag, to } => self.on_tagged(
                seg,
                msg.header.rdmap_control(),
                last,
                stag,
                to,
                msg.payload,
                false,
            ),
            Header::ReadResponse { last, stag, to } => self.on_tagged(
                seg,
                msg.header.rdmap_control(),
                last,
                stag,
                to,
                msg.payload,
                true,
            ),
            Header::Send {
                solicited_event,
                invalidate_stag,
                ..
            } => self.on_send(seg, &msg, solicited_event, invalidate_stag),
            Header::ImmediateData {
                solicited_event,
                data,
                ..
            } => self.on_immediate(seg, &msg, solicited_event, data),
            Header::ReadRequest { request, .. } => self.on_read_request(seg, &msg, request),
            Header::AtomicRequest { request, .. } => self.on_atomic_request(seg, &msg, request),
            Header::AtomicResponse { response, .. } => self.on_atomic_response(seg, &msg, response),
            Header::Terminate { terminate, .. } => self.on_terminate(seg, &msg, terminate),
        }
    }

    /// RFC 6581: the responder's first FPDU in peer-to-peer mode must be the agreed RTR.
    /// A zero-length Send RTR is consumed here; the others go through the normal path.
    fn check_rtr(&mut self, t: RtrType, msg: &Message<'_>, seg: &[u8]) -> bool {
        let ok = match (t, msg.header) {
            (RtrType::Write, Header::RdmaWrite { last: true, .. }) => msg.payload.is_empty(),
            (RtrType::Read, Header::ReadRequest { request, .. }) => request.size == 0,
            (
                RtrType::Send,
                Header::Send {
                    last: true,
                    mo: 0,
                    msn,
                    invalidate_stag: None,
                    ..
                },
            ) => msg.payload.is_empty() && msn == self.rx_msn[0],
            _ => false,
        };
        if !ok {
            self.fail_segment(
                TermCause::operation(OperationCode::UnexpectedOpcode),
                seg,
                None,
            );
            return false;
        }
        if t == RtrType::Send {
            self.awaiting_first_fpdu = false;
            self.rx_msn[0] = ddp::next_msn(self.rx_msn[0]);
            return false;
        }
        true
    }

    #[allow(clippy::too_many_arguments)]
    fn on_tagged(
        &mut self,
        seg: &[u8],
        control: u8,
        last: bool,
        stag: u32,
        to: u64,
        payload: &[u8],
        response: bool,
    ) {
        let repr = TaggedRepr {
            last,
            rsvd_ulp: control,
            stag,
            to,
        };
        let len = payload.len();
        if response && self.orq.is_empty() {
            // A Read Response nobody asked for.
            self.fail_segment(
                TermCause::operation(OperationCode::UnexpectedOpcode),
                seg,
                None,
            );
            return;
        }
        let span = match self
            .mem
            .check_sink(self.cfg.pd, &repr, len, Access::REMOTE_WRITE)
        {
            Ok(s) => s,
            Err(e) => {
                self.fail_segment(TermCause::from(e), seg, None);
                return;
            }
        };
        if response
            && len > 0
            && let Some(out) = self.orq.front()
        {
            let expected_to = out.to.wrapping_add(out.received);
            let err = if stag != out.stag {
                Some(DdpError::InvalidStag {
                    stag,
                    problem: StagProblem::ChangedMidMessage { first: out.stag },
                })
            } else if to != expected_to {
                Some(DdpError::TaggedGap {
                    stag,
                    to,
                    expected_to,
                })
            } else if out.received + len as u64 > u64::from(out.size) {
                Some(DdpError::BaseOrBounds {
                    stag,
                    to,
                    len: len as u64,
                    base: out.to,
                    buffer_len: u64::from(out.size),
                })
            } else {
                None
            };
            if let Some(e) = err {
                self.fail_segment(TermCause::from(e), seg, None);
                return;
            }
        }
        let progress = match self.reasm.accept(&ddp::Header::Tagged(repr), len) {
            Ok(p) => p,
            Err(e) => {
                self.fail_segment(TermCause::from(e), seg, None);
                return;
            }
        };
        if let Some(span) = span {
            span.write(0, payload);
        }
        if !response {
            return;
        }
        if let Some(out) = self.orq.front_mut() {
            out.received += len as u64;
        }
        if let Progress::Complete { .. } = progress {
            let Some(out) = self.orq.pop_front() else {
                return;
            };
            if out.received != u64::from(out.size) {
                // The response ended early: it did not deliver what was read.
                self.fail_segment(
                    TermCause::operation(OperationCode::CatastrophicStream),
                    seg,
                    None,
                );
                return;
            }
            if let Some(seq) = out.seq
                && let Some(e) = self.sq_entry_mut(seq)
            {
                e.pending = e.pending.saturating_sub(1);
            }
        }
    }

    fn on_send(&mut self, seg: &[u8], msg: &Message<'_>, solicited: bool, invalidate: Option<u32>) {
        let ddp::Header::Untagged(u) = msg.ddp_header() else {
            return;
        };
        let len = msg.payload.len();
        if let Err(e) = self.check_untagged(&u, len) {
            let status = matches!(e, DdpError::TooLong { .. }).then_some(WcStatus::LocalLength);
            self.fail_segment(TermCause::from(e), seg, status);
            return;
        }
        // Resolve the receive buffer before anything is placed in it.
        let pd = self.cfg.pd;
        let resolved = match self.rq.front() {
            Some(r) if r.sgl.is_none() => {
                Some(self.mem.resolve_sgl(pd, &r.wr.sgl, Access::LOCAL_WRITE))
            }
            _ => None,
        };
        match resolved {
            Some(Ok(sgl)) => {
                if let Some(r) = self.rq.front_mut() {
                    r.sgl = Some(sgl);
                }
            }
            Some(Err(e)) => {
                let cause = TermCause::Ddp(DdpCode::LocalCatastrophic);
                self.fail_rx(Terminate::bare(cause), Some(local_status(&e)));
                return;
            }
            None => {}
        }
        if u.last
            && let Some(stag) = invalidate
            && let Err(cause) = self.mem.check_remote_invalidate(pd, stag)
        {
            self.fail_segment(cause, seg, Some(WcStatus::Fatal));
            return;
        }
        let progress = match self.reasm.accept(&ddp::Header::Untagged(u), len) {
            Ok(p) => p,
            Err(e) => {
                self.fail_segment(TermCause::from(e), seg, Some(WcStatus::Fatal));
                return;
            }
        };
        if let Some(sgl) = self.rq.front().and_then(|r| r.sgl.as_ref()) {
            sgl.scatter(u64::from(u.mo), msg.payload);
        }
        if let Progress::Complete { len } = progress {
            let mut invalidated = None;
            if let Some(stag) = invalidate {
                if let Err(cause) = self.mem.remote_invalidate(pd, stag) {
                    self.fail_segment(cause, seg, Some(WcStatus::Fatal));
                    return;
                }
                invalidated = Some(stag);
            }
            self.complete_recv(len as u32, solicited, invalidated, None);
        }
    }

    fn complete_recv(
        &mut self,
        byte_len: u32,
        solicited: bool,
        invalidated: Option<u32>,
        imm: Option<[u8; 8]>,
    ) {
        self.rx_msn[0] = ddp::next_msn(self.rx_msn[0]);
        self.rq_lens.pop_front();
        let Some(r) = self.rq.pop_front() else {
            return;
        };
        let mut wc = Wc::new(self.cfg.qp, r.wr.wr_id, WcOpcode::Recv, WcStatus::Success);
        wc.byte_len = byte_len;
        wc.solicited = solicited;
        wc.invalidated_stag = invalidated;
        wc.imm_data = imm;
        self.push_recv_wc(wc);
    }

    fn on_immediate(&mut self, seg: &[u8], msg: &Message<'_>, solicited: bool, data: [u8; 8]) {
        let ddp::Header::Untagged(u) = msg.ddp_header() else {
            return;
        };
        if let Err(e) = self.check_untagged(&u, 0) {
            self.fail_segment(TermCause::from(e), seg, None);
            return;
        }
        if let Err(e) = self.reasm.accept(&ddp::Header::Untagged(u), 0) {
            self.fail_segment(TermCause::from(e), seg, None);
            return;
        }
        self.complete_recv(0, solicited, None, Some(data));
    }

    fn on_read_request(&mut self, seg: &[u8], msg: &Message<'_>, req: ReadRequest) {
        let ddp::Header::Untagged(u) = msg.ddp_header() else {
            return;
        };
        if let Err(e) = self.check_untagged(&u, 0) {
            self.fail_segment(TermCause::from(e), seg, None);
            return;
        }
        let src = match self.mem.check_read_source(self.cfg.pd, &req) {
            Ok(s) => s,
            Err(cause) => {
                self.fail_segment(cause, seg, None);
                return;
            }
        };
        if let Err(cause) = self.ird.admit() {
            self.fail_segment(cause, seg, None);
            return;
        }
        self.rx_msn[1] = ddp::next_msn(self.rx_msn[1]);
        self.resp.push_back(RespJob::Read { req, src, sent: 0 });
    }

    fn on_atomic_request(&mut self, seg: &[u8], msg: &Message<'_>, req: AtomicRequest) {
        let ddp::Header::Untagged(u) = msg.ddp_header() else {
            return;
        };
        if let Err(e) = self.check_untagged(&u, 0) {
            self.fail_segment(TermCause::from(e), seg, None);
            return;
        }
        let target = match self.mem.check_atomic(self.cfg.pd, &req) {
            Ok(t) => t,
            Err(cause) => {
                self.fail_segment(cause, seg, None);
                return;
            }
        };
        if let Err(cause) = self.ird.admit() {
            self.fail_segment(cause, seg, None);
            return;
        }
        self.rx_msn[1] = ddp::next_msn(self.rx_msn[1]);
        self.resp.push_back(RespJob::Atomic { req, target });
    }

    fn on_atomic_response(&mut self, seg: &[u8], msg: &Message<'_>, resp: AtomicResponse) {
        let ddp::Header::Untagged(u) = msg.ddp_header() else {
            return;
        };
        if let Err(e) = self.check_untagged(&u, 0) {
            self.fail_segment(TermCause::from(e), seg, None);
            return;
        }
        let Some(out) = self.atomics.front() else {
            return;
        };
        if out.request_id != resp.request_id {
            // RFC 7306 §5.2.2: the response reflects the request's identifier; responses
            // come in request order over an in-order stream.
            self.fail_segment(
                TermCause::operation(OperationCode::CatastrophicStream),
                seg,
                None,
            );
            return;
        }
        let Some(out) = self.atomics.pop_front() else {
            return;
        };
        self.rx_msn[3] = ddp::next_msn(self.rx_msn[3]);
        out.result.write(0, &resp.original_value.to_ne_bytes());
        if let Some(e) = self.sq_entry_mut(out.seq) {
            e.pending = e.pending.saturating_sub(1);
        }
    }

    fn on_terminate(&mut self, seg: &[u8], msg: &Message<'_>, term: Terminate) {
        let ddp::Header::Untagged(u) = msg.ddp_header() else {
            return;
        };
        if let Err(e) = self.check_untagged(&u, 0) {
            self.fail_segment(TermCause::from(e), seg, None);
            return;
        }
        self.rx_msn[2] = ddp::next_msn(self.rx_msn[2]);
        self.events.push_back(QpEvent::TerminateReceived(term));
        let info = TermInfo {
            cause: term.cause,
            origin: TermOrigin::Received,
        };
        let status = status_for_remote(term.cause);
        // The request the peer refused: the one whose message the Terminate's copied DDP
        // header names; without a copied header (LLP and catastrophic errors), the oldest
        // started one. A request that already completed keeps its completion.
        let started = self.sq_next.min(self.sq.len());
        let target = match term.ddp_header.map(|h| h.parse()) {
            Some(Ok(h)) => self
                .sq
                .iter()
                .take(started)
                .position(|e| e.wire.is_some_and(|w| w.matches(&h))),
            Some(Err(_)) => None,
            None => (started > 0).then_some(0),
        };
        if let Some(e) = target.and_then(|i| self.sq.get_mut(i))
            && e.error.is_none()
        {
            e.error = Some((status, Some(info)));
        }
        // RFC 5040 §7.1: after a Terminate nothing more is sent or received on the stream.
        self.rx_stopped = true;
        self.term_done = true;
        self.set_state(QpState::Terminate);
        self.close_transport = true;
        self.enter_error();
    }

    // ----------------------------------------------------------------------------------
    // Transmit path
    // ----------------------------------------------------------------------------------

    fn tx_pending(&self) -> usize {
        self.tx_out.len().saturating_sub(self.tx_head) + self.tx.len() + self.tx_ref_bytes
    }

    fn fill_tx(&mut self) {
        while self.tx_pending() < TX_HIGH_WATER {
            if !self.produce_one() {
                break;
            }
        }
        self.finish_call();
    }

    /// Generates one FPDU (or makes other progress); false when nothing can be done now.
    fn produce_one(&mut self) -> bool {
        if !matches!(self.state, QpState::Rts | QpState::Closing)
            || self.enc.is_none()
            || self.term_end.is_some()
        {
            return false;
        }
        if self.awaiting_first_fpdu {
            return false;
        }
        if let Some(t) = self.rtr_send.take() {
            self.emit_rtr(t);
            return true;
        }
        let order = match self.prefer {
            Stream::Sq => [Stream::Sq, Stream::Resp],
            Stream::Resp => [Stream::Resp, Stream::Sq],
        };
        for s in order {
            let progressed = match s {
                Stream::Sq => self.step_sq(),
                Stream::Resp => self.step_resp(),
            };
            if progressed {
                self.prefer = match s {
                    Stream::Sq => Stream::Resp,
                    Stream::Resp => Stream::Sq,
                };
                return true;
            }
        }
        false
    }

    fn may_use(&self, tagged: bool, s: Stream) -> bool {
        self.busy[model(tagged)].is_none_or(|b| b == s)
    }

    fn emit(&mut self, header: &Header, payload: &[u8]) {
        let (h, n) = header_bytes(header);
        if let Some(enc) = self.enc.as_mut() {
            let written = emit_fpdu(enc, &mut self.tx, &[h.get(..n).unwrap_or(&[]), payload]);
            self.tx_produced += written as u64;
        }
    }

    /// Emits one FPDU whose payload of `len` bytes `fill(offset, len, out)` appends straight
    /// to the transmit buffer (in runs split where markers fall).
    fn emit_with(
        &mut self,
        header: &Header,
        len: usize,
        fill: impl FnMut(usize, usize, &mut Vec<u8>),
    ) {
        let (h, n) = header_bytes(header);
        if let Some(enc) = self.enc.as_mut() {
            // Segments are cut at the MULPDU, so they always fit the ULPDU_Length field and
            // the marker pointer; an error here would be a bug, and emits nothing.
            let written = enc
                .encode_append(&[h.get(..n).unwrap_or(&[])], len, &mut self.tx, fill)
                .unwrap_or(0);
            self.tx_produced += written as u64;
        }
    }

    /// Emits one FPDU carrying `len` payload bytes from `src`: without copying them when
    /// zero-copy transmit applies (the payload becomes registered ranges in the transmit
    /// stream, the CRC computed over them now), else gathered into the transmit buffer
    /// (zeros if the memory is not all there: stale or partial data never goes out).
    fn emit_payload(&mut self, header: &Header, len: usize, src: &PayloadSrc<'_>) {
        let zero_copy = self.cfg.zero_copy_tx
            && len >= ZERO_COPY_MIN
            && self.enc.as_ref().is_some_and(|e| !e.config().markers)
            && src.ranges(len, |_, _, _| {});
        if !zero_copy {
            self.emit_with(header, len, |off, n, out| {
                let start = out.len();
                if !src.append(off, n, out) {
                    zero_run(out, start, n);
                }
            });
            return;
        }
        let (h, hn) = header_bytes(header);
        let Some(enc) = self.enc.as_mut() else {
            return;
        };
        let start = self.tx.len();
        let framed = enc.encode_split(&[h.get(..hn).unwrap_or(&[])], len, &mut self.tx, |d| {
            src.ranges(len, |buf, off, n| {
                // In bounds: the ranges were checked above.
                let _ = buf.read_with(off, n, |bytes| d.update(bytes));
            });
        });
        // Segments are cut at the MULPDU, so they always fit the ULPDU_Length field; an
        // error here would be a bug, and emits nothing.
        let Ok(tail) = framed else {
            return;
        };
        let head_len = self.tx.len() - start;
        let at = self.tx_gen_consumed + (self.gen_pending() as u64);
        let refs = &mut self.tx_refs;
        src.ranges(len, |buf, offset, n| {
            if n > 0 {
                refs.push_back(TxRef {
                    at,
                    buf: buf.clone(),
                    offset,
                    len: n,
                });
            }
        });
        self.tx_ref_bytes += len;
        self.tx.extend_from_slice(tail.as_bytes());
        self.tx_produced += (head_len + len + tail.as_bytes().len()) as u64;
    }

    /// Generated bytes not yet handed to the transport.
    fn gen_pending(&self) -> usize {
        self.tx_out.len().saturating_sub(self.tx_head) + self.tx.len()
    }

    fn next_msn(&mut self, q: u32) -> u32 {
        let i = q as usize;
        let m = self.msn_tx.get(i).copied().unwrap_or(ddp::INITIAL_MSN);
        if let Some(slot) = self.msn_tx.get_mut(i) {
            *slot = ddp::next_msn(m);
        }
        m
    }

    fn emit_rtr(&mut self, t: RtrType) {
        match t {
            RtrType::Write => {
                let h = Header::RdmaWrite {
                    last: true,
                    stag: RTR_STAG,
                    to: 0,
                };
                self.emit(&h, &[]);
            }
            RtrType::Read => {
                let msn = self.next_msn(qn::READ_REQUEST);
                let request = ReadRequest {
                    sink_stag: RTR_STAG,
                    sink_to: 0,
                    size: 0,
                    source_stag: RTR_STAG,
                    source_to: 0,
                };
                self.orq.push_back(OutRead {
                    seq: None,
                    stag: RTR_STAG,
                    to: 0,
                    size: 0,
                    received: 0,
                });
                self.emit(&Header::ReadRequest { msn, request }, &[]);
            }
            RtrType::Send => {
                let msn = self.next_msn(qn::SEND);
                let h = Header::Send {
                    solicited_event: false,
                    invalidate_stag: None,
                    last: true,
                    msn,
                    mo: 0,
                };
                self.emit(&h, &[]);
            }
        }
    }

    fn payload_room(&self, tagged: bool) -> usize {
        self.mulpdu
            .saturating_sub(ddp::wire::header_len(tagged))
            .max(1)
    }

    /// Starts the next send work request if possible. Returns whether progress was made.
    fn start_next_wr(&mut self) -> bool {
        let Some(entry) = self.sq.get(self.sq_next) else {
            return false;
        };
        if entry.wr.fence && (!self.orq.is_empty() || !self.atomics.is_empty()) {
            return false;
        }
        let seq = entry.seq;
        let wr = entry.wr.clone();
        let pd = self.cfg.pd;
        let total = wr.sgl_len() as u32;
        let msg = match wr.op {
            SendOp::Send {
                solicited,
                invalidate,
            } => {
                let sgl = match self.mem.resolve_sgl(pd, &wr.sgl, Access::NONE) {
                    Ok(s) => s,
                    Err(e) => return self.wr_local_error(seq, local_status(&e)),
                };
                let msn = self.next_msn(qn::SEND);
                self.set_wire(WireId::Untagged {
                    qn: qn::SEND,
                    first: msn,
                    last: msn,
                });
                let first = Header::Send {
                    solicited_event: solicited,
                    invalidate_stag: invalidate,
                    last: false,
                    msn,
                    mo: 0,
                };
                SqMsg::Stream {
                    seq,
                    first,
                    sgl,
                    total,
                    sent: 0,
                    tagged: false,
                }
            }
            SendOp::Write {
                remote_stag,
                remote_to,
            } => {
                let sgl = match self.mem.resolve_sgl(pd, &wr.sgl, Access::NONE) {
                    Ok(s) => s,
                    Err(e) => return self.wr_local_error(seq, local_status(&e)),
                };
                self.set_wire(WireId::Write { stag: remote_stag });
                let first = Header::RdmaWrite {
                    last: false,
                    stag: remote_stag,
                    to: remote_to,
                };
                SqMsg::Stream {
                    seq,
                    first,
                    sgl,
                    total,
                    sent: 0,
                    tagged: true,
                }
            }
            SendOp::Read {
                remote_stag,
                remote_to,
            } => {
                if self.ord == 0 {
                    return self.wr_local_error(seq, WcStatus::LocalQpOperation);
                }
                // Each SGE is a Data Sink the peer writes through its STag: it needs local
                // and remote write.
                let need = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
                if let Err(e) = self.mem.resolve_sgl(pd, &wr.sgl, need) {
                    return self.wr_local_error(seq, local_status(&e));
                }
                let mut sinks: Vec<(u32, u64, u32)> =
                    wr.sgl.iter().map(|s| (s.stag, s.to, s.len)).collect();
                if sinks.is_empty() {
                    sinks.push((RTR_STAG, 0, 0));
                }
                if let Some(e) = self.sq.get_mut(self.sq_next) {
                    e.pending = sinks.len() as u32;
                }
                SqMsg::Reads {
                    seq,
                    sinks,
                    next: 0,
                    source_stag: remote_stag,
                    source_to: remote_to,
                }
            }
            SendOp::FetchAdd { .. } | SendOp::CmpSwap { .. } => {
                if self.ord == 0 {
                    return self.wr_local_error(seq, WcStatus::LocalQpOperation);
                }
                let Some(sge) = wr.sgl.first() else {
                    return self.wr_local_error(seq, WcStatus::LocalLength);
                };
                let result = match self.mem.resolve_local(pd, sge, Access::LOCAL_WRITE) {
                    Ok(s) => s,
                    Err(e) => return self.wr_local_error(seq, local_status(&e)),
                };
                let id = self.next_request_id;
                self.next_request_id = self.next_request_id.wrapping_add(1);
                let req = match wr.op {
                    SendOp::FetchAdd {
                        remote_stag,
                        remote_to,
                        add,
                        add_mask,
                    } => AtomicRequest::fetch_add(id, remote_stag, remote_to, add, add_mask),
                    SendOp::CmpSwap {
                        remote_stag,
                        remote_to,
                        compare,
                        compare_mask,
                        swap,
                        swap_mask,
                    } => AtomicRequest::cmp_swap(
                        id,
                        remote_stag,
                        remote_to,
                        compare,
                        compare_mask,
                        swap,
                        swap_mask,
                    ),
                    _ => return false,
                };
                if let Some(e) = self.sq.get_mut(self.sq_next) {
                    e.pending = 1;
                }
                SqMsg::Single {
                    seq,
                    kind: SingleKind::Atomic { req, result },
                }
            }
            SendOp::ImmediateData { data, solicited } => SqMsg::Single {
                seq,
                kind: SingleKind::Immediate { data, solicited },
            },
            SendOp::LocalInvalidate { stag } => {
                if self.mem.invalidate(pd, stag).is_err() {
                    return self.wr_local_error(seq, WcStatus::LocalProtection);
                }
                if let Some(e) = self.sq.get_mut(self.sq_next) {
                    e.generated = true;
                }
                self.sq_next += 1;
                return true;
            }
        };
        if let Some(e) = self.sq.get_mut(self.sq_next) {
            e.byte_len = match wr.op {
                SendOp::FetchAdd { .. } | SendOp::CmpSwap { .. } => 8,
                _ => total,
            };
        }
        self.sq_next += 1;
        self.cur_sq = Some(msg);
        true
    }

    /// Records the wire identity of the request about to start (at `sq_next`).
    fn set_wire(&mut self, w: WireId) {
        if let Some(e) = self.sq.get_mut(self.sq_next) {
            e.wire = Some(w);
        }
    }

    /// Extends the untagged MSN range of request `seq` with `msn`.
    fn note_msn(&mut self, seq: u64, q: u32, msn: u32) {
        if let Some(e) = self.sq_entry_mut(seq) {
            e.wire = Some(match e.wire {
                Some(WireId::Untagged { qn, first, .. }) if qn == q => WireId::Untagged {
                    qn,
                    first,
                    last: msn,
                },
                _ => WireId::Untagged {
                    qn: q,
                    first: msn,
                    last: msn,
                },
            });
        }
    }

    fn wr_local_error(&mut self, seq: u64, status: WcStatus) -> bool {
        self.local_fatal(Some(seq), status);
        true
    }

    fn mark_generated(&mut self, seq: u64, with_tx_end: bool) {
        let end = self.tx_produced;
        if let Some(e) = self.sq_entry_mut(seq) {
            e.generated = true;
            if with_tx_end {
                e.tx_end = Some(end);
            }
        }
    }

    fn step_sq(&mut self) -> bool {
        if self.cur_sq.is_none() {
            if !self.start_next_wr() {
                return false;
            }
            if self.cur_sq.is_none() {
                // Local Invalidate or a local error: progress without an FPDU.
                return true;
            }
        }
        let Some(msg) = self.cur_sq.take() else {
            return false;
        };
        match msg {
            SqMsg::Stream {
                seq,
                first,
                sgl,
                total,
                sent,
                tagged,
            } => {
                if !self.may_use(tagged, Stream::Sq) {
                    self.cur_sq = Some(SqMsg::Stream {
                        seq,
                        first,
                        sgl,
                        total,
                        sent,
                        tagged,
                    });
                    return false;
                }
                let room = self.payload_room(tagged) as u32;
                let n = (total - sent).min(room);
                let last = sent + n == total;
                let header = match first {
                    Header::RdmaWrite { stag, to, .. } => Header::RdmaWrite {
                        last,
                        stag,
                        to: to.wrapping_add(u64::from(sent)),
                    },
                    Header::Send {
                        solicited_event,
                        invalidate_stag,
                        msn,
                        ..
                    } => Header::Send {
                        solicited_event,
                        invalidate_stag,
                        last,
                        msn,
                        mo: sent,
                    },
                    other => other,
                };
                // Straight from registered memory: into the FPDU being built, or as a range
                // the driver writes from (zero-copy transmit).
                self.emit_payload(&header, n as usize, &PayloadSrc::Sgl(&sgl, u64::from(sent)));
                self.busy[model(tagged)] = if last { None } else { Some(Stream::Sq) };
                if last {
                    self.mark_generated(seq, true);
                } else {
                    self.cur_sq = Some(SqMsg::Stream {
                        seq,
                        first,
                        sgl,
                        total,
                        sent: sent + n,
                        tagged,
                    });
                }
                true
            }
            SqMsg::Reads {
                seq,
                sinks,
                next,
                source_stag,
                source_to,
            } => {
                let credits = self.orq.len() + self.atomics.len();
                if credits >= self.ord as usize || !self.may_use(false, Stream::Sq) {
                    self.cur_sq = Some(SqMsg::Reads {
                        seq,
                        sinks,
                        next,
                        source_stag,
                        source_to,
                    });
                    return false;
                }
                let Some(&(stag, to, size)) = sinks.get(next) else {
                    self.mark_generated(seq, false);
                    return true;
                };
                let request = ReadRequest {
                    sink_stag: stag,
                    sink_to: to,
                    size,
                    source_stag,
                    source_to,
                };
                let msn = self.next_msn(qn::READ_REQUEST);
                self.note_msn(seq, qn::READ_REQUEST, msn);
                self.orq.push_back(OutRead {
                    seq: Some(seq),
                    stag,
                    to,
                    size,
                    received: 0,
                });
                self.emit(&Header::ReadRequest { msn, request }, &[]);
                if next + 1 == sinks.len() {
                    self.mark_generated(seq, false);
                } else {
                    self.cur_sq = Some(SqMsg::Reads {
                        seq,
                        sinks,
                        next: next + 1,
                        source_stag,
                        source_to: source_to.wrapping_add(u64::from(size)),
                    });
                }
                true
            }
            SqMsg::Single { seq, kind } => {
                let need_credit = matches!(kind, SingleKind::Atomic { .. });
                let credits = self.orq.len() + self.atomics.len();
                if !self.may_use(false, Stream::Sq) || (need_credit && credits >= self.ord as usize)
                {
                    self.cur_sq = Some(SqMsg::Single { seq, kind });
                    return false;
                }
                match kind {
                    SingleKind::Atomic { req, result } => {
                        let msn = self.next_msn(qn::READ_REQUEST);
                        self.note_msn(seq, qn::READ_REQUEST, msn);
                        self.atomics.push_back(OutAtomic {
                            seq,
                            request_id: req.request_id,
                            result,
                        });
                        self.emit(&Header::AtomicRequest { msn, request: req }, &[]);
                        self.mark_generated(seq, false);
                    }
                    SingleKind::Immediate { data, solicited } => {
                        let msn = self.next_msn(qn::SEND);
                        self.note_msn(seq, qn::SEND, msn);
                        let h = Header::ImmediateData {
                            solicited_event: solicited,
                            msn,
                            data,
                        };
                        self.emit(&h, &[]);
                        self.mark_generated(seq, true);
                    }
                }
                true
            }
        }
    }

    fn step_resp(&mut self) -> bool {
        let tagged = match self.resp.front() {
            Some(RespJob::Read { .. }) => true,
            Some(RespJob::Atomic { .. }) => false,
            None => return false,
        };
        if !self.may_use(tagged, Stream::Resp) {
            return false;
        }
        let room = self.payload_room(true) as u32;
        let Some(job) = self.resp.pop_front() else {
            return false;
        };
        match job {
            RespJob::Read { req, src, sent } => {
                let n = (req.size - sent).min(room);
                let last = sent + n == req.size;
                let h = Header::ReadResponse {
                    last,
                    stag: req.sink_stag,
                    to: req.sink_to.wrapping_add(u64::from(sent)),
                };
                // Read straight from registered memory (see `emit_payload`).
                self.emit_payload(
                    &h,
                    n as usize,
                    &PayloadSrc::Span(src.as_ref(), sent as usize),
                );
                if last {
                    self.busy[model(true)] = None;
                    self.ird.complete();
                } else {
                    self.busy[model(true)] = Some(Stream::Resp);
                    self.resp.push_front(RespJob::Read {
                        req,
                        src,
                        sent: sent + n,
                    });
                }
            }
            RespJob::Atomic { req, target } => {
                // RFC 7306 §5.1: executed atomically with respect to other atomics on the
                // same address by this RNIC, in request order with the Read Responses.
                let original = match target.buf.atomic_u64(target.off) {
                    Some(a) => a
                        .fetch_update(
                            std::sync::atomic::Ordering::SeqCst,
                            std::sync::atomic::Ordering::SeqCst,
                            |v| req.apply(v),
                        )
                        .unwrap_or_else(|v| v),
                    None => {
                        let cause = TermCause::operation(OperationCode::CatastrophicStream);
                        self.send_terminate(Terminate::bare(cause));
                        return true;
                    }
                };
                let msn = self.next_msn(qn::ATOMIC_RESPONSE);
                let h = Header::AtomicResponse {
                    msn,
                    response: AtomicResponse {
                        request_id: req.request_id,
                        original_value: original,
                    },
                };
                self.emit(&h, &[]);
                self.ird.complete();
            }
        }
        true
    }
}
