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
//! Time is an [`Instant`] on a time line the driver picks (virtual time in the simulator,
//! the time since the RNIC started on real sockets); it is used for the setup timeouts and
//! the first-FPDU hold.
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

use crate::Instant;

use ddp::{
    Access, DdpCode, DdpError, Progress, QueueState, Reassembly, StagProblem, TaggedRepr,
    UntaggedRepr, qn,
};
use mpa::{DeframeError, FrameError, NegotiationError, RejectReason, RtrType};
use rdmap::{
    AtomicRequest, AtomicResponse, Header, Ird, Message, OperationCode, RdmapCode, ReadRequest,
    TermCause, Terminate,
};
use thiserror::Error;

use crate::cq::{Cq, CqId, QpId, TermInfo, TermOrigin, Wc, WcOpcode, WcStatus};
use crate::llp::mpa::{MpaLlp, MpaStart};
use crate::llp::sctp::{RxItem, SctpConfig, SctpLlp, SctpSetupError};
use crate::llp::{Llp, PayloadSrc, Session, SetupStep};
use crate::mem::{LocalError, MemTable, Pd, SgList, Span, TxPart};
use crate::wr::{MIN_MAX_SGE, RecvWr, SendOp, SendWr};

/// Default effective MSS: Ethernet MTU 1500 with TCP timestamps, as Linux siw sees it.
pub const DEFAULT_EMSS: u32 = 1448;

/// STag used in the zero-length tagged RTR messages (Write or Read) and other zero-length
/// tagged messages without a sink: the STag is not checked for zero-length messages
/// (RFC 5041 §5.2), but some peers reject STag 0.
pub const RTR_STAG: u32 = 1;

/// Transmit data is generated lazily, up to this many bytes ahead of the transport.
const TX_HIGH_WATER: usize = 256 * 1024;

pub use crate::llp::mpa::ZERO_COPY_MIN;

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
    /// A shared receive queue of the QP's PD to take receives from (then the QP refuses
    /// receives of its own); see [`crate::srq`].
    pub srq: Option<crate::Srq>,
    /// A deliberate protocol fault ([`crate::Fault`]; off by default).
    #[doc(hidden)]
    pub fault: Option<crate::Fault>,
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
            srq: None,
            fault: None,
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
    /// Full operation at once, with an MPA session negotiated elsewhere.
    Established(mpa::Session),
    /// Active side over SCTP (RFC 5043): send the DDP Stream Session Initiate once the
    /// association is up, then wait for the Accept.
    SctpInitiator(SctpConfig),
    /// Passive side over SCTP: wait for the Initiate and accept it with this configuration.
    SctpResponder(SctpConfig),
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
    #[error("{0} not received in time")]
    Timeout(&'static str),
    /// The transport closed during setup.
    #[error("connection closed during setup ({0:?})")]
    Closed(CloseReason),
    /// DDP over SCTP session setup failed.
    #[error("{0}")]
    Sctp(SctpSetupError),
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
    /// A QP may only use a shared receive queue of its own protection domain.
    #[error("the shared receive queue belongs to another protection domain than the QP")]
    SrqPd,
    /// The SCTP segment size leaves no room for a DDP segment, or the session cannot start.
    #[error("{0}")]
    Sctp(SctpSetupError),
}

/// A state transition the consumer may not request ([`QpEngine::modify`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
#[error(
    "a QP in state {from:?} cannot be moved to {to:?} (allowed: Rts to Closing, Rts or Closing to Terminate, any state to Error)"
)]
pub struct ModifyError {
    /// The QP's state.
    pub from: QpState,
    /// The state asked for.
    pub to: QpState,
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
    /// Connection setup finished; full operation starts with this session.
    Established(Box<Session>),
    /// Connection setup failed.
    SetupFailed(SetupError),
    /// A Terminate was sent to the peer.
    TerminateSent(Terminate),
    /// The peer sent a Terminate.
    TerminateReceived(Terminate),
    /// A completion did not fit a CQ (also recorded on the CQ); the QP failed.
    CqOverflow(CqId),
    /// The transport closed.
    TransportClosed(CloseReason),
    /// A receive taken from the QP's shared receive queue left fewer receives than its
    /// armed limit ([`crate::Srq::arm_limit`]).
    SrqLimitReached(crate::SrqId),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stream {
    Sq,
    Resp,
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

/// A Send or RDMA Write being segmented.
#[derive(Debug)]
struct StreamMsg {
    /// The work request's sequence number.
    seq: u64,
    /// The header of its first segment.
    first: Header,
    sgl: SgList,
    /// Its length, and how much of it has gone out.
    total: u32,
    sent: u32,
    /// A Write (tagged) rather than a Send.
    tagged: bool,
}

#[derive(Debug)]
enum SqMsg {
    /// A Send or Write being segmented.
    Stream(StreamMsg),
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
    /// The lower layer: MPA over a stream, or SCTP messages.
    llp: Llp,
    session: Option<Session>,
    mulpdu: usize,
    /// The latest time the driver passed in.
    last_now: Instant,

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
    /// With [`crate::Fault::PlaceAfterTerminate`]: the one Terminate went out.
    fault_term_sent: bool,
    rx_stopped: bool,
    close_transport: bool,
    pending_fatal: bool,

    events: VecDeque<QpEvent>,
}

fn model(tagged: bool) -> usize {
    usize::from(!tagged)
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
        SendOp::FastRegister { .. } => WcOpcode::FastRegister,
        SendOp::BindWindow { .. } => WcOpcode::BindWindow,
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
    /// A new engine. `now` starts the setup timer.
    pub fn new(
        cfg: QpConfig,
        mem: Arc<MemTable>,
        setup: Setup,
        now: Instant,
    ) -> Result<QpEngine, EngineError> {
        if cfg.max_sge < MIN_MAX_SGE {
            return Err(EngineError::MaxSgeTooSmall(cfg.max_sge));
        }
        if cfg.srq.as_ref().is_some_and(|s| s.pd() != cfg.pd) {
            return Err(EngineError::SrqPd);
        }
        // Every setup needs room for the largest single-segment message.
        let smallest = ddp::UNTAGGED_HEADER_LEN + AtomicRequest::LEN;
        let (llp, established) = match setup {
            Setup::Initiator(c) => Self::mpa_llp(&cfg, MpaStart::Initiator(c), now)?,
            Setup::Responder(c) => Self::mpa_llp(&cfg, MpaStart::Responder(c), now)?,
            Setup::Established(s) => Self::mpa_llp(&cfg, MpaStart::Established(s), now)?,
            Setup::SctpInitiator(c) | Setup::SctpResponder(c) if c.max_segment <= smallest => {
                return Err(EngineError::Sctp(SctpSetupError::Session(format!(
                    "a maximum DDP segment of {} octets leaves no room for DDP segments (RFC 5043 §9)",
                    c.max_segment
                ))));
            }
            Setup::SctpInitiator(c) => (
                Llp::Sctp(SctpLlp::initiator(c, now, cfg.fault).map_err(EngineError::Sctp)?),
                None,
            ),
            Setup::SctpResponder(c) => (Llp::Sctp(SctpLlp::responder(c, now, cfg.fault)), None),
        };
        let mut e = QpEngine {
            cfg,
            mem,
            state: QpState::Idle,
            llp,
            session: None,
            mulpdu: 0,
            last_now: now,
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
            fault_term_sent: false,
            rx_stopped: false,
            close_transport: false,
            pending_fatal: false,
            events: VecDeque::new(),
        };
        if let Some(s) = established {
            e.enter_full(s);
        }
        Ok(e)
    }

    fn mpa_llp(
        cfg: &QpConfig,
        start: MpaStart,
        now: Instant,
    ) -> Result<(Llp, Option<Session>), EngineError> {
        // Both setup paths and the direct one need a usable MULPDU.
        let m = MpaLlp::mulpdu_for(cfg.emss, start.markers_tx());
        if m <= ddp::UNTAGGED_HEADER_LEN + AtomicRequest::LEN {
            return Err(EngineError::EmssTooSmall {
                emss: cfg.emss,
                mulpdu: m as u32,
            });
        }
        let (m, est) = MpaLlp::new(cfg.emss, cfg.first_fpdu_delay, cfg.zero_copy_tx, start, now)?;
        let mut m = m;
        m.set_fault(cfg.fault);
        Ok((Llp::Mpa(m), est.map(Session::from)))
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
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.llp.poll_timeout()
    }

    /// Whether the driver should close the TCP connection now: the engine has finished
    /// (graceful close done, Terminate written, setup failed) and every byte it produced
    /// has been accepted by [`QpEngine::transmit_done`].
    pub fn should_close_transport(&self) -> bool {
        self.close_transport && self.llp.pending() == 0
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
            SendOp::ImmediateData { .. }
            | SendOp::LocalInvalidate { .. }
            | SendOp::FastRegister { .. }
            | SendOp::BindWindow { .. } => {
                if !wr.sgl.is_empty() {
                    return Err(PostError::InvalidWr(match wr.op {
                        SendOp::ImmediateData { .. } => "Immediate Data carries no SGL",
                        SendOp::LocalInvalidate { .. } => "Local Invalidate carries no SGL",
                        SendOp::FastRegister { .. } => "Fast Register carries no SGL",
                        _ => "Bind Memory Window carries no SGL",
                    }));
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
        if self.cfg.srq.is_some() {
            return Err(PostError::InvalidWr(
                "this QP takes its receives from a shared receive queue: post to the SRQ",
            ));
        }
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

    /// Whether [`QpEngine::modify`] would take `to` from state `from`.
    pub fn may_modify(from: QpState, to: QpState) -> bool {
        match to {
            QpState::Closing => from == QpState::Rts,
            QpState::Terminate => matches!(from, QpState::Rts | QpState::Closing),
            QpState::Error => true,
            QpState::Idle | QpState::Rts => false,
        }
    }

    /// A state transition the consumer asks for (RDMA Verbs Modify QP):
    /// * `Closing`: graceful, as [`QpEngine::close`];
    /// * `Terminate`: a Terminate (RDMAP Local Catastrophic Error, RFC 5040 §5.4, §7.1) goes
    ///   out; nothing more is sent or placed, every outstanding work request is flushed and
    ///   the transport closes once the Terminate has left;
    /// * `Error`: abortive; the transport closes at once, every work request is flushed.
    ///
    /// Moving to `Error` from `Error` does nothing; other transitions are refused.
    pub fn modify(&mut self, to: QpState) -> Result<(), ModifyError> {
        let from = self.state;
        if from == QpState::Error && to == QpState::Error {
            return Ok(());
        }
        if !Self::may_modify(from, to) {
            return Err(ModifyError { from, to });
        }
        match to {
            QpState::Closing => self.close(),
            QpState::Terminate => {
                let cause = TermCause::Rdmap(RdmapCode::LOCAL_CATASTROPHIC);
                self.send_terminate(Terminate::bare(cause));
                self.finish_call();
            }
            _ => {
                self.close_transport = true;
                self.enter_error();
                self.finish_call();
            }
        }
        Ok(())
    }

    // ----------------------------------------------------------------------------------
    // Transport input
    // ----------------------------------------------------------------------------------

    /// Bytes read from the TCP connection, in order, in chunks of any size.
    pub fn handle_stream(&mut self, now: Instant, data: &[u8]) {
        self.last_now = self.last_now.max(now);
        self.stream_in(data, false);
    }

    /// Like [`QpEngine::handle_stream`], but the engine may leave an incomplete FPDU at the
    /// end of `data` untaken; returns how many bytes it took. The caller must present the
    /// untaken bytes again, followed by the next ones read. Whole FPDUs are then placed
    /// straight from `data` into registered memory, without an intermediate copy. At most
    /// one FPDU (under 70 000 bytes) is left untaken.
    pub fn handle_stream_partial(&mut self, now: Instant, data: &[u8]) -> usize {
        self.last_now = self.last_now.max(now);
        self.stream_in(data, true)
    }

    /// How many more stream octets complete the FPDU at the front of `pending` (what
    /// [`QpEngine::handle_stream_partial`] left untaken), when known.
    pub fn rx_missing(&self, pending: &[u8]) -> Option<usize> {
        match &self.llp {
            Llp::Mpa(m) if !self.rx_stopped => m.rx_missing(pending),
            _ => None,
        }
    }

    fn stream_in(&mut self, data: &[u8], retain: bool) -> usize {
        if data.is_empty() || self.rx_stopped {
            return data.len();
        }
        let Llp::Mpa(m) = &mut self.llp else {
            // A message LLP takes no stream input.
            return data.len();
        };
        let took = if m.setup_done() {
            self.feed_fpdus(data, retain)
        } else {
            let out = m.setup_input(self.last_now, data);
            if let Some(t) = out.terminate {
                self.events.push_back(QpEvent::TerminateSent(t));
            }
            let established = matches!(out.step, SetupStep::Established(_));
            self.setup_step(out.step);
            if established && !out.rest.is_empty() {
                self.feed_fpdus(&out.rest, false);
            }
            data.len()
        };
        self.finish_call();
        took
    }

    /// A message received on the SCTP association carrying this QP's DDP stream (any
    /// order; `unordered`: the U flag it arrived with). Ignored by a stream LLP.
    pub fn handle_message(&mut self, now: Instant, ppid: u32, unordered: bool, data: &[u8]) {
        self.last_now = self.last_now.max(now);
        if self.rx_stopped {
            return;
        }
        let Llp::Sctp(l) = &mut self.llp else {
            return;
        };
        for item in l.handle_message(ppid, unordered, data) {
            if self.rx_stopped {
                break;
            }
            match item {
                RxItem::Segment { data, placed } => {
                    self.awaiting_first_fpdu = false;
                    self.on_ulpdu(&data, placed);
                }
                RxItem::Ahead { pos, data } => {
                    if self.place_ahead(&data)
                        && let Llp::Sctp(l) = &mut self.llp
                    {
                        l.mark_placed(pos);
                    }
                }
                RxItem::Setup(step) => self.setup_step(step),
                RxItem::Terminated => {
                    // RFC 5043 §6.2: the peer ended the DDP stream session: as a peer's
                    // close of the stream over MPA.
                    self.events
                        .push_back(QpEvent::TransportClosed(CloseReason::PeerClosed));
                    self.rx_stopped = true;
                    self.close_transport = true;
                    self.enter_error();
                }
                RxItem::Violation => {
                    // RFC 5043 §6.1/§10: the session is over; its Terminate is queued.
                    self.rx_stopped = true;
                    self.close_transport = true;
                    self.enter_error();
                }
            }
        }
        self.finish_call();
    }

    /// The next message for the SCTP association: (stream, PPID, data), always sent
    /// unordered (RFC 5043 §10); report it taken with [`QpEngine::message_done`]. `None`
    /// for a stream LLP or when there is nothing to send.
    pub fn poll_message(&mut self) -> Option<(u16, u32, &[u8])> {
        if !matches!(self.llp, Llp::Sctp(_)) {
            return None;
        }
        self.fill_tx();
        match &self.llp {
            Llp::Sctp(l) => l
                .poll_message()
                .map(|m| (m.stream, m.ppid, m.data.as_slice())),
            Llp::Mpa(_) => None,
        }
    }

    /// The message from [`QpEngine::poll_message`] was accepted by the association.
    pub fn message_done(&mut self) {
        if let Llp::Sctp(l) = &mut self.llp {
            l.message_done();
        }
        self.finish_call();
    }

    /// Takes the message [`QpEngine::poll_message`] showed, as accepted by the association
    /// (for an association that queues messages by value).
    pub fn take_message(&mut self) -> Option<(u16, u32, Vec<u8>)> {
        let m = match &mut self.llp {
            Llp::Sctp(l) => l.take_message(),
            Llp::Mpa(_) => None,
        };
        self.finish_call();
        m.map(|m| (m.stream, m.ppid, m.data))
    }

    /// Whether the QP runs over a message LLP (SCTP) rather than a stream (MPA).
    pub fn is_message_llp(&self) -> bool {
        matches!(self.llp, Llp::Sctp(_))
    }

    fn setup_step(&mut self, step: SetupStep) {
        match step {
            SetupStep::Pending => {}
            SetupStep::Established(s) => self.enter_full(s),
            SetupStep::Failed(e) => self.setup_failed(e),
        }
    }

    /// The transport closed (or was reset).
    pub fn handle_closed(&mut self, now: Instant, reason: CloseReason) {
        let _ = now;
        self.events.push_back(QpEvent::TransportClosed(reason));
        if self.llp.abandon_setup() {
            self.events
                .push_back(QpEvent::SetupFailed(SetupError::Closed(reason)));
        }
        self.rx_stopped = true;
        // Nothing more can be written.
        self.llp.discard();
        self.close_transport = true;
        self.enter_error();
        self.finish_call();
    }

    /// Timer expiry; call at or after [`QpEngine::poll_timeout`].
    pub fn handle_timeout(&mut self, now: Instant) {
        self.last_now = self.last_now.max(now);
        if let Some(what) = self.llp.handle_timeout(now) {
            self.setup_failed(SetupError::Timeout(what));
        }
        self.finish_call();
    }

    // ----------------------------------------------------------------------------------
    // Transport output
    // ----------------------------------------------------------------------------------

    /// Bytes to write to the TCP connection (generated on demand). Report how many were
    /// written with [`QpEngine::transmit_done`]. `None` for a message LLP.
    pub fn poll_transmit(&mut self) -> Option<&[u8]> {
        if self.llp.held() || !matches!(self.llp, Llp::Mpa(_)) {
            return None;
        }
        self.fill_tx();
        match &mut self.llp {
            Llp::Mpa(m) => m.poll_transmit(),
            Llp::Sctp(_) => None,
        }
    }

    /// `n` bytes of what [`QpEngine::poll_transmit`] returned (or of what
    /// [`QpEngine::transmit_with`] offered) were accepted by the transport.
    pub fn transmit_done(&mut self, n: usize) {
        if let Llp::Mpa(m) = &mut self.llp {
            m.transmit_done(n);
        }
        self.finish_call();
    }

    /// Offers everything there is to send (generated now if needed) as a gather list of at
    /// most [`crate::mem::MAX_TX_PARTS`] pieces — generated bytes and, with
    /// [`QpConfig::zero_copy_tx`], ranges of registered memory — to `write`, which returns
    /// how many bytes it took (e.g. [`crate::mem::write_parts`], one `sendmsg`); those are
    /// marked accepted as by [`QpEngine::transmit_done`]. `None` when there is nothing to
    /// send (`write` is not called); otherwise what `write` returned.
    pub fn transmit_with<E>(
        &mut self,
        write: impl FnOnce(&[TxPart<'_>]) -> Result<usize, E>,
    ) -> Option<Result<usize, E>> {
        if self.llp.held() || !matches!(self.llp, Llp::Mpa(_)) {
            return None;
        }
        self.fill_tx();
        let Llp::Mpa(m) = &mut self.llp else {
            return None;
        };
        let r = m.transmit_with(write);
        if matches!(r, Some(Ok(_))) {
            self.finish_call();
        }
        r
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
            tracing::debug!(qp = self.cfg.qp.0, ?from, ?to, "QP state");
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
                tracing::error!(qp = self.cfg.qp.0, cq = ?id, "CQ overflow: the QP fails");
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
            && self.llp.consumed() >= end
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
        self.llp.abandon_setup();
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
        tracing::info!(qp = self.cfg.qp.0, error = %err, "connection setup failed");
        self.llp.abandon_setup();
        self.events.push_back(QpEvent::SetupFailed(err));
        self.close_transport = true;
        self.enter_error();
    }

    /// Queues a Terminate as the last FPDU of the stream and stops everything else.
    fn send_terminate(&mut self, term: Terminate) {
        if self.term_end.is_some() || matches!(self.state, QpState::Terminate | QpState::Error) {
            return;
        }
        if self.cfg.fault == Some(crate::Fault::PlaceAfterTerminate) {
            // The fault: the Terminate goes out, but the stream stays open and inbound
            // segments go on being placed and answered (RFC 5040 §7.1 forbids both).
            if !self.fault_term_sent && self.llp.can_send() {
                self.fault_term_sent = true;
                let header = Header::Terminate {
                    msn: self.msn_tx[qn::TERMINATE as usize],
                    terminate: term,
                };
                self.msn_tx[qn::TERMINATE as usize] =
                    ddp::next_msn(self.msn_tx[qn::TERMINATE as usize]);
                self.llp.send(&header, &[]);
                tracing::warn!(qp = self.cfg.qp.0, cause = %term.cause, "Terminate sent (fault: the stream goes on)");
            }
            return;
        }
        self.rx_stopped = true;
        self.cur_sq = None;
        self.resp.clear();
        if !self.llp.can_send() {
            self.close_transport = true;
            self.enter_error();
            return;
        }
        let header = Header::Terminate {
            msn: self.msn_tx[qn::TERMINATE as usize],
            terminate: term,
        };
        self.msn_tx[qn::TERMINATE as usize] = ddp::next_msn(self.msn_tx[qn::TERMINATE as usize]);
        self.llp.send(&header, &[]);
        self.term_end = Some(self.llp.produced());
        tracing::warn!(qp = self.cfg.qp.0, cause = %term.cause, "Terminate sent");
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
        let consumed = self.llp.consumed();
        while let Some(e) = self.sq.front() {
            let done = e.error.is_none()
                && e.generated
                && e.pending == 0
                && e.tx_end.is_none_or(|end| consumed >= end);
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
    // Setup
    // ----------------------------------------------------------------------------------

    fn enter_full(&mut self, session: Session) {
        tracing::info!(
            qp = self.cfg.qp.0,
            llp = session.llp_name(),
            ird = session.ird,
            ord = session.ord,
            max_ulpdu = self.llp.max_ulpdu(),
            "connection established"
        );
        self.mulpdu = self.llp.max_ulpdu();
        // The IRD-not-enforced fault admits far more Read Requests than negotiated.
        let ird = match self.cfg.fault {
            Some(crate::Fault::IrdNotEnforced) => session.ird.saturating_add(256),
            _ => session.ird,
        };
        self.ird = Ird::new(u32::from(ird));
        self.zeros = vec![0; usize::from(ird).max(usize::from(session.ord))];
        self.ord = u32::from(session.ord);
        self.awaiting_first_fpdu = session.must_await_first_ulpdu();
        self.rtr_send = session.rtr_to_send();
        self.rtr_expect = session.rtr_to_expect();
        self.events
            .push_back(QpEvent::Established(Box::new(session.clone())));
        self.session = Some(session);
        self.set_state(QpState::Rts);
    }

    // ----------------------------------------------------------------------------------
    // Receive path
    // ----------------------------------------------------------------------------------

    /// Deframes and handles `data`; returns how many bytes were taken (all of them unless
    /// `retain` and `data` ends inside an FPDU). ULPDUs of FPDUs that arrived whole are
    /// handled in place, borrowed from `data`.
    fn feed_fpdus(&mut self, data: &[u8], retain: bool) -> usize {
        let Some(mut d) = (match &mut self.llp {
            Llp::Mpa(m) => m.take_deframer(),
            Llp::Sctp(_) => None,
        }) else {
            return data.len();
        };
        let took = d.push_with(data, retain, |r| {
            if self.rx_stopped {
                return false;
            }
            match r {
                Ok(fpdu) => self.on_ulpdu(fpdu.ulpdu, false),
                Err(e) => self.on_deframe_error(&e),
            }
            !self.rx_stopped
        });
        if let Llp::Mpa(m) = &mut self.llp {
            m.put_deframer(d);
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

    /// DDP's checks of an untagged message that places no payload (a Read Request, an atomic
    /// request or response, a Terminate): whether it passed them; a message that failed
    /// them has failed its segment.
    fn untagged_control_ok(&mut self, seg: &[u8], msg: &Message<'_>) -> bool {
        let ddp::Header::Untagged(u) = msg.ddp_header() else {
            return false;
        };
        if let Err(e) = self.check_untagged(&u, 0) {
            self.fail_segment(TermCause::from(e), seg, None);
            return false;
        }
        true
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

    /// This QP's stream, as the memory checks see it (its PD, and itself for Type 2 memory
    /// windows).
    fn stream_owner(&self) -> crate::mem::StreamOwner {
        crate::mem::StreamOwner {
            pd: self.cfg.pd,
            qp: Some(self.cfg.qp.0),
        }
    }

    /// A Tagged segment that arrived ahead of earlier messages (SCTP LLP): places its
    /// payload now when that cannot differ from placing it in order (RFC 5041 §1.2, §2.1:
    /// Placement in any order, Delivery in order). It must be an RDMA Write or Read
    /// Response segment on a QP in RTS, pass every check of its in-order processing that
    /// does not depend on the messages before it, and target an STag that cannot be
    /// invalidated ([`crate::MemTable::check_sink_ahead`]); a Read Response segment must
    /// also lie inside the sink of a Read still outstanding. Returns whether it was placed;
    /// its in-order processing then runs every check again and skips only the copy.
    fn place_ahead(&mut self, seg: &[u8]) -> bool {
        if self.rx_stopped || self.rtr_expect.is_some() || self.state() != QpState::Rts {
            return false;
        }
        let Ok(msg) = Message::parse(seg) else {
            return false;
        };
        let (last, stag, to, response) = match msg.header {
            Header::RdmaWrite { last, stag, to } => (last, stag, to, false),
            Header::ReadResponse { last, stag, to } => (last, stag, to, true),
            _ => return false,
        };
        let len = msg.payload.len() as u64;
        if response
            && !self.orq.iter().any(|o| {
                o.stag == stag
                    && to >= o.to
                    && (to - o.to)
                        .checked_add(len)
                        .is_some_and(|end| end <= u64::from(o.size))
            })
        {
            return false;
        }
        let repr = TaggedRepr {
            last,
            rsvd_ulp: msg.header.rdmap_control(),
            stag,
            to,
        };
        let Some(span) = self.mem.check_sink_ahead(
            self.stream_owner(),
            &repr,
            msg.payload.len(),
            Access::REMOTE_WRITE,
        ) else {
            return false;
        };
        span.write(0, msg.payload);
        true
    }

    /// One DDP Segment in order; `placed`: its payload was placed when it arrived
    /// ([`QpEngine::place_ahead`]), so only the copy is skipped.
    fn on_ulpdu(&mut self, seg: &[u8], placed: bool) {
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
            Header::RdmaWrite { last, stag, to } | Header::ReadResponse { last, stag, to } => self
                .on_tagged(
                    seg,
                    msg.header.rdmap_control(),
                    last,
                    stag,
                    to,
                    msg.payload,
                    matches!(msg.header, Header::ReadResponse { .. }),
                    placed,
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
        placed: bool,
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
            .check_sink(self.stream_owner(), &repr, len, Access::REMOTE_WRITE)
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
        if let Some(span) = span
            && !placed
        {
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

    /// With a shared receive queue: a QP that holds no receive takes the SRQ's oldest
    /// before a message for queue 0 is checked against its buffers.
    fn take_from_srq(&mut self) {
        if !self.rq.is_empty() || matches!(self.state, QpState::Error | QpState::Terminate) {
            return;
        }
        let Some(srq) = self.cfg.srq.as_ref() else {
            return;
        };
        let Some(t) = srq.take() else {
            return;
        };
        if t.limit_reached {
            self.events.push_back(QpEvent::SrqLimitReached(srq.id()));
        }
        self.rq_lens.push_back(t.wr.sgl_len());
        self.rq.push_back(RqEntry {
            wr: t.wr,
            sgl: None,
            error: None,
        });
    }

    fn on_send(&mut self, seg: &[u8], msg: &Message<'_>, solicited: bool, invalidate: Option<u32>) {
        let ddp::Header::Untagged(u) = msg.ddp_header() else {
            return;
        };
        self.take_from_srq();
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
            && let Err(cause) = self.mem.check_remote_invalidate(self.stream_owner(), stag)
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
                if let Err(cause) = self.mem.remote_invalidate(self.stream_owner(), stag) {
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
        self.take_from_srq();
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
        self.on_responder_request(seg, msg, |e| {
            let src = e.mem.check_read_source(e.stream_owner(), &req)?;
            Ok(RespJob::Read { req, src, sent: 0 })
        });
    }

    fn on_atomic_request(&mut self, seg: &[u8], msg: &Message<'_>, req: AtomicRequest) {
        self.on_responder_request(seg, msg, |e| {
            let target = e.mem.check_atomic(e.stream_owner(), &req)?;
            Ok(RespJob::Atomic { req, target })
        });
    }

    /// An inbound request the responder answers from its IRD queue (an RDMA Read Request
    /// or an Atomic Request, both on untagged queue 1): the untagged segment checked, then
    /// `check` validates the memory it names and gives the responder's job, then the IRD
    /// admits it; any failure terminates the stream with its cause.
    fn on_responder_request(
        &mut self,
        seg: &[u8],
        msg: &Message<'_>,
        check: impl FnOnce(&Self) -> Result<RespJob, TermCause>,
    ) {
        if !self.untagged_control_ok(seg, msg) {
            return;
        }
        let job = match check(self) {
            Ok(job) => job,
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
        self.resp.push_back(job);
    }

    fn on_atomic_response(&mut self, seg: &[u8], msg: &Message<'_>, resp: AtomicResponse) {
        if !self.untagged_control_ok(seg, msg) {
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
        if !self.untagged_control_ok(seg, msg) {
            return;
        }
        self.rx_msn[2] = ddp::next_msn(self.rx_msn[2]);
        tracing::warn!(qp = self.cfg.qp.0, cause = %term.cause, "Terminate received");
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

    fn fill_tx(&mut self) {
        while self.llp.pending() < TX_HIGH_WATER {
            if !self.produce_one() {
                break;
            }
        }
        self.finish_call();
    }

    /// Generates one FPDU (or makes other progress); false when nothing can be done now.
    fn produce_one(&mut self) -> bool {
        if !matches!(self.state, QpState::Rts | QpState::Closing)
            || !self.llp.can_send()
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
        self.llp.send(header, payload);
    }

    /// Emits one ULPDU carrying `len` payload bytes from `src`, straight from registered
    /// memory where the LLP can (see the LLPs' `send_from`).
    fn emit_payload(&mut self, header: &Header, len: usize, src: &PayloadSrc<'_>) {
        self.llp.send_from(header, len, src);
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
        let started = match wr.op {
            SendOp::Send { .. } | SendOp::Write { .. } => self.start_stream(seq, &wr),
            SendOp::Read {
                remote_stag,
                remote_to,
            } => self.start_reads(seq, &wr, remote_stag, remote_to),
            SendOp::FetchAdd { .. } | SendOp::CmpSwap { .. } => self.start_atomic(seq, &wr),
            SendOp::ImmediateData { data, solicited } => Ok(SqMsg::Single {
                seq,
                kind: SingleKind::Immediate { data, solicited },
            }),
            SendOp::LocalInvalidate { .. }
            | SendOp::FastRegister { .. }
            | SendOp::BindWindow { .. } => return self.run_local_wr(seq, &wr.op),
        };
        let msg = match started {
            Ok(msg) => msg,
            Err(status) => return self.wr_local_error(seq, status),
        };
        if let Some(e) = self.sq.get_mut(self.sq_next) {
            e.byte_len = match wr.op {
                SendOp::FetchAdd { .. } | SendOp::CmpSwap { .. } => 8,
                _ => wr.sgl_len() as u32,
            };
        }
        self.sq_next += 1;
        self.cur_sq = Some(msg);
        true
    }

    /// A Send or an RDMA Write: its local SGL resolved, its first header (a Send takes the
    /// next MSN of the Send queue), ready to be segmented.
    fn start_stream(&mut self, seq: u64, wr: &SendWr) -> Result<SqMsg, WcStatus> {
        let sgl = self
            .mem
            .resolve_sgl(self.cfg.pd, &wr.sgl, Access::NONE)
            .map_err(|e| local_status(&e))?;
        let (first, tagged) = match wr.op {
            SendOp::Send {
                solicited,
                invalidate,
            } => {
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
                (first, false)
            }
            SendOp::Write {
                remote_stag,
                remote_to,
            } => {
                self.set_wire(WireId::Write { stag: remote_stag });
                let first = Header::RdmaWrite {
                    last: false,
                    stag: remote_stag,
                    to: remote_to,
                };
                (first, true)
            }
            _ => return Err(WcStatus::LocalQpOperation),
        };
        Ok(SqMsg::Stream(StreamMsg {
            seq,
            first,
            sgl,
            total: wr.sgl_len() as u32,
            sent: 0,
            tagged,
        }))
    }

    /// An RDMA Read: one Read Request per sink SGE (one RTR-style zero-length request when
    /// the SGL is empty), each sink writable locally and remotely.
    fn start_reads(
        &mut self,
        seq: u64,
        wr: &SendWr,
        source_stag: u32,
        source_to: u64,
    ) -> Result<SqMsg, WcStatus> {
        if self.ord == 0 {
            return Err(WcStatus::LocalQpOperation);
        }
        // Each SGE is a Data Sink the peer writes through its STag: it needs local and remote
        // write.
        let need = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
        self.mem
            .resolve_sgl(self.cfg.pd, &wr.sgl, need)
            .map_err(|e| local_status(&e))?;
        let mut sinks: Vec<(u32, u64, u32)> =
            wr.sgl.iter().map(|s| (s.stag, s.to, s.len)).collect();
        if sinks.is_empty() {
            sinks.push((RTR_STAG, 0, 0));
        }
        if let Some(e) = self.sq.get_mut(self.sq_next) {
            e.pending = sinks.len() as u32;
        }
        Ok(SqMsg::Reads {
            seq,
            sinks,
            next: 0,
            source_stag,
            source_to,
        })
    }

    /// A Fetch and Add or Compare and Swap (RFC 7306): an ORD credit, a local 8-byte result
    /// buffer and a request id.
    fn start_atomic(&mut self, seq: u64, wr: &SendWr) -> Result<SqMsg, WcStatus> {
        if self.ord == 0 {
            return Err(WcStatus::LocalQpOperation);
        }
        let sge = wr.sgl.first().ok_or(WcStatus::LocalLength)?;
        let result = self
            .mem
            .resolve_local(self.cfg.pd, sge, Access::LOCAL_WRITE)
            .map_err(|e| local_status(&e))?;
        let id = self.next_request_id;
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
            _ => return Err(WcStatus::LocalQpOperation),
        };
        self.next_request_id = self.next_request_id.wrapping_add(1);
        if let Some(e) = self.sq.get_mut(self.sq_next) {
            e.pending = 1;
        }
        Ok(SqMsg::Single {
            seq,
            kind: SingleKind::Atomic { req, result },
        })
    }

    /// Local Invalidate, Fast Register and Bind Memory Window run on the STag table at once.
    fn run_local_wr(&mut self, seq: u64, op: &SendOp) -> bool {
        let pd = self.cfg.pd;
        let r = match *op {
            SendOp::LocalInvalidate { stag } => self.mem.invalidate(pd, stag),
            SendOp::FastRegister { stag, access } => self.mem.fast_register(pd, stag, access),
            SendOp::BindWindow {
                mw,
                region,
                to,
                len,
                access,
                zero_based,
            } => {
                let addressing = if zero_based {
                    crate::mem::Addressing::ZeroBased
                } else {
                    crate::mem::Addressing::VirtualAddress
                };
                let qp = Some(self.cfg.qp.0);
                self.mem
                    .bind_mw(pd, qp, mw, region, to, len, access, addressing)
            }
            _ => return false,
        };
        self.local_wr_done(seq, r)
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

    /// A work request that puts nothing on the wire (Local Invalidate, Fast Register, Bind
    /// Memory Window) ran on the STag table with result `r`: it completes in order, or
    /// fails with a local protection error.
    fn local_wr_done(&mut self, seq: u64, r: Result<(), crate::mem::MemError>) -> bool {
        if r.is_err() {
            return self.wr_local_error(seq, WcStatus::LocalProtection);
        }
        if let Some(e) = self.sq.get_mut(self.sq_next) {
            e.generated = true;
        }
        self.sq_next += 1;
        true
    }

    fn wr_local_error(&mut self, seq: u64, status: WcStatus) -> bool {
        self.local_fatal(Some(seq), status);
        true
    }

    fn mark_generated(&mut self, seq: u64, with_tx_end: bool) {
        let end = self.llp.produced();
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
        if !self.may_go(&msg) {
            self.cur_sq = Some(msg);
            return false;
        }
        match msg {
            SqMsg::Stream(m) => self.send_segment(m),
            SqMsg::Reads {
                seq,
                sinks,
                next,
                source_stag,
                source_to,
            } => self.send_read_request(seq, sinks, next, source_stag, source_to),
            SqMsg::Single { seq, kind } => self.send_single(seq, kind),
        }
    }

    /// Whether the next FPDU of `msg` may go now: its DDP stream model (tagged or untagged)
    /// is not in the middle of another message, and a Read or Atomic Request has an ORD
    /// credit left (the ORD the connection negotiated).
    fn may_go(&self, msg: &SqMsg) -> bool {
        let credit = self.orq.len() + self.atomics.len() < self.ord as usize;
        match msg {
            SqMsg::Stream(m) => self.may_use(m.tagged, Stream::Sq),
            SqMsg::Reads { .. } => credit && self.may_use(false, Stream::Sq),
            SqMsg::Single { kind, .. } => {
                self.may_use(false, Stream::Sq)
                    && (credit || !matches!(kind, SingleKind::Atomic { .. }))
            }
        }
    }

    /// The next segment of a Send or RDMA Write, at most one payload room long, straight
    /// from registered memory: into the FPDU being built, or as a range the driver writes
    /// from (zero-copy transmit).
    fn send_segment(&mut self, m: StreamMsg) -> bool {
        let StreamMsg {
            seq,
            first,
            ref sgl,
            total,
            sent,
            tagged,
        } = m;
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
        self.emit_payload(&header, n as usize, &PayloadSrc::Sgl(sgl, u64::from(sent)));
        self.busy[model(tagged)] = if last { None } else { Some(Stream::Sq) };
        if last {
            self.mark_generated(seq, true);
        } else {
            self.cur_sq = Some(SqMsg::Stream(StreamMsg {
                sent: sent + n,
                ..m
            }));
        }
        true
    }

    /// The Read Request for sink `next` of an RDMA Read, recorded in the outbound read
    /// queue so that its Read Response is placed into that sink.
    fn send_read_request(
        &mut self,
        seq: u64,
        sinks: Vec<(u32, u64, u32)>,
        next: usize,
        source_stag: u32,
        source_to: u64,
    ) -> bool {
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

    /// An Atomic Request (recorded in the outbound atomics queue) or an Immediate Data
    /// message: one segment each.
    fn send_single(&mut self, seq: u64, kind: SingleKind) -> bool {
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
