//! DDP over SCTP: the RFC 5043 adaptation layer (sans-IO).
//!
//! - **Adaptation Layer Indication** (§5.1, §11.1): an association for DDP carries the
//!   Adaptation Layer Indication parameter (type 0xC006, RFC 5061) with the value
//!   [`ADAPTATION_DDP`] (0x00000001) in its INIT or INIT ACK. Set
//!   [`AssociationConfig::adaptation_indication`](crate::AssociationConfig) to announce it;
//!   [`Association::peer_adaptation_indication`](crate::Association) gives the peer's, and
//!   [`PeerAdaptation::classify`] applies the §11.1 table.
//! - **Messages** (§5.2): every message is one unordered SCTP user message (§10) whose PPID
//!   is [`PPID_DDP_SEGMENT`] (16) or [`PPID_DDP_STREAM_SESSION_CONTROL`] (17) and whose first
//!   two bytes are the DDP Source Sequence Number (DDP-SSN, §5.2.1). A DDP Segment is carried
//!   as is: no MPA framing, no MPA length, no markers, no CRC — SCTP's CRC32c protects it.
//!   [`parse`] gives a typed view of a received message (for decoders and the receive path),
//!   [`SessionControl`] and [`segment_message`] build them.
//! - **DDP Stream Sessions** (§6): [`StreamSession`] is the per-stream state machine: the
//!   active side sends Initiate, the passive side Accept or Reject (or Terminate when it
//!   cannot pass the request to its ULP, §6.4); DDP-SSNs start at 0 per session and have no
//!   gaps; received messages are put back in DDP-SSN order, checked for validity (§10) and
//!   against the legal sequences (§6.2-§6.4); anything else terminates the session.
//! - **Segment size** (§9): [`max_ddp_segment`] is the largest DDP Segment that needs
//!   neither IP nor SCTP fragmentation (at least 516 bytes of user data); larger segments are
//!   refused.

use std::collections::BTreeMap;

use thiserror::Error;

/// Adaptation Layer Indication parameter type (RFC 5061 §4.2.7).
pub const PARAM_ADAPTATION_LAYER_INDICATION: u16 = 0xC006;
/// The Adaptation Indication assigned to DDP (RFC 5043 §5.1, §12).
pub const ADAPTATION_DDP: u32 = 0x0000_0001;
/// PPID of a DDP Segment Chunk (RFC 5043 §5.2).
pub const PPID_DDP_SEGMENT: u32 = 16;
/// PPID of a DDP Stream Session Control message (RFC 5043 §5.2).
pub const PPID_DDP_STREAM_SESSION_CONTROL: u32 = 17;
/// Most Private Data a session control message may carry (RFC 5043 §5.2.3).
pub const MAX_PRIVATE_DATA: usize = 512;
/// Smallest maximum user-data size the adaptation supports: a control message with 512
/// bytes of Private Data (RFC 5043 §9).
pub const MIN_USER_DATA: usize = 516;
/// Length of the RFC 6581 IRD/ORD words at the start of an enhanced message's Private Data.
pub const ENHANCED_DATA_LEN: usize = 4;
/// The smallest maximum DDP Segment size (RFC 5043 §9: "or 516 bytes, whichever is
/// larger").
pub const MIN_MAX_SEGMENT: usize = 516;
/// DDP-SSN distance beyond which a received DDP-SSN is invalid (RFC 5043 §10).
pub const SSN_WINDOW: u16 = 32768;
/// Most DATA chunks a sender has on one stream without acknowledgment, so that every
/// DDP-SSN in flight stays inside the receiver's window (RFC 5043 §10).
pub const MAX_UNACKED_CHUNKS: usize = 32767;

/// What the peer's Adaptation Layer Indication allows (RFC 5043 §11.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerAdaptation {
    /// No indication: the peer supports no DDP or RDMA adaptation.
    None,
    /// DDP/SCTP.
    Ddp,
    /// Another adaptation: DDP procedures must not run.
    Other(u32),
}

impl PeerAdaptation {
    /// Classifies the peer's indication.
    pub fn classify(indication: Option<u32>) -> PeerAdaptation {
        match indication {
            None => PeerAdaptation::None,
            Some(ADAPTATION_DDP) => PeerAdaptation::Ddp,
            Some(x) => PeerAdaptation::Other(x),
        }
    }

    /// Whether DDP and RDMAP may be performed on the association.
    pub fn ddp_allowed(self) -> bool {
        self == PeerAdaptation::Ddp
    }
}

/// Function codes of DDP Stream Session Control (RFC 5043 §5.2.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FunctionCode {
    /// DDP Stream Session Initiate (0x001).
    Initiate,
    /// DDP Stream Session Accept (0x002).
    Accept,
    /// DDP Stream Session Reject (0x003).
    Reject,
    /// DDP Stream Session Terminate (0x004).
    Terminate,
    /// Enhanced DDP Stream Session Initiate (0x005, RFC 6581 §7): the Private Data starts
    /// with the RFC 6581 IRD/ORD words.
    EnhancedInitiate,
    /// Enhanced DDP Stream Session Accept (0x006, RFC 6581 §7).
    EnhancedAccept,
    /// Enhanced DDP Stream Session Reject (0x007, RFC 6581 §7).
    EnhancedReject,
}

impl FunctionCode {
    /// The wire value.
    pub fn code(self) -> u16 {
        match self {
            FunctionCode::Initiate => 1,
            FunctionCode::Accept => 2,
            FunctionCode::Reject => 3,
            FunctionCode::Terminate => 4,
            FunctionCode::EnhancedInitiate => 5,
            FunctionCode::EnhancedAccept => 6,
            FunctionCode::EnhancedReject => 7,
        }
    }

    /// The RFC 5043 function an enhanced code stands for (Initiate, Accept, Reject).
    pub fn base(self) -> FunctionCode {
        match self {
            FunctionCode::EnhancedInitiate => FunctionCode::Initiate,
            FunctionCode::EnhancedAccept => FunctionCode::Accept,
            FunctionCode::EnhancedReject => FunctionCode::Reject,
            f => f,
        }
    }

    /// An RFC 6581 enhanced code (its Private Data starts with IRD/ORD).
    pub fn is_enhanced(self) -> bool {
        self.base() != self
    }

    /// The enhanced code of Initiate, Accept or Reject (others are returned unchanged).
    pub fn enhanced(self) -> FunctionCode {
        match self {
            FunctionCode::Initiate => FunctionCode::EnhancedInitiate,
            FunctionCode::Accept => FunctionCode::EnhancedAccept,
            FunctionCode::Reject => FunctionCode::EnhancedReject,
            f => f,
        }
    }

    /// From the wire value.
    pub fn from_code(c: u16) -> Option<FunctionCode> {
        Some(match c {
            1 => FunctionCode::Initiate,
            2 => FunctionCode::Accept,
            3 => FunctionCode::Reject,
            4 => FunctionCode::Terminate,
            5 => FunctionCode::EnhancedInitiate,
            6 => FunctionCode::EnhancedAccept,
            7 => FunctionCode::EnhancedReject,
            _ => return None,
        })
    }
}

impl std::fmt::Display for FunctionCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FunctionCode::Initiate => "Session Initiate",
            FunctionCode::Accept => "Session Accept",
            FunctionCode::Reject => "Session Reject",
            FunctionCode::Terminate => "Session Terminate",
            FunctionCode::EnhancedInitiate => "Enhanced Session Initiate",
            FunctionCode::EnhancedAccept => "Enhanced Session Accept",
            FunctionCode::EnhancedReject => "Enhanced Session Reject",
        })
    }
}

/// Why a DDP-over-SCTP message is invalid.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AdaptError {
    /// The PPID is neither 16 nor 17.
    #[error("PPID {0} is not DDP over SCTP (16: DDP Segment, 17: DDP Stream Session Control)")]
    NotDdp(u32),
    /// Too short for the DDP-SSN (and function code).
    #[error("{ppid_name} message of {len} bytes is too short (needs {need})")]
    Truncated {
        /// Which message.
        ppid_name: &'static str,
        /// Its length.
        len: usize,
        /// Minimum length.
        need: usize,
    },
    /// Unknown function code.
    #[error("unknown DDP Stream Session Control function code {0:#05x}")]
    UnknownFunction(u16),
    /// More than 512 bytes of Private Data (§5.2.3).
    #[error("{0} bytes of Private Data exceed the limit of 512 (RFC 5043 §5.2.3)")]
    PrivateDataTooLong(usize),
    /// A Terminate carrying Private Data (§5.2.3).
    #[error("a DDP Stream Session Terminate must not carry Private Data ({0} bytes present)")]
    TerminateWithData(usize),
    /// A DDP Segment larger than the negotiated maximum (§9).
    #[error("DDP Segment of {len} bytes exceeds the maximum of {max} (RFC 5043 §9)")]
    SegmentTooLarge {
        /// Segment length.
        len: usize,
        /// Maximum.
        max: usize,
    },
    /// An enhanced session control message without the IRD/ORD words (RFC 6581 §7).
    #[error(
        "an enhanced session control message carries {0} bytes of Private Data, fewer than the 4 of IRD/ORD (RFC 6581 §7)"
    )]
    EnhancedDataMissing(usize),
    /// A message sent ordered; the adaptation uses unordered delivery only (§10).
    #[error("DDP over SCTP messages must be sent unordered (RFC 5043 §10)")]
    Ordered,
}

/// A DDP Stream Session Control message (RFC 5043 §5.2.3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionControl {
    /// DDP-SSN.
    pub ddp_ssn: u16,
    /// Function.
    pub function: FunctionCode,
    /// ULP Private Data (none for Terminate).
    pub private_data: Vec<u8>,
}

impl SessionControl {
    /// Checks the §5.2.3 rules.
    pub fn validate(&self) -> Result<(), AdaptError> {
        if self.private_data.len() > MAX_PRIVATE_DATA {
            return Err(AdaptError::PrivateDataTooLong(self.private_data.len()));
        }
        if self.function == FunctionCode::Terminate && !self.private_data.is_empty() {
            return Err(AdaptError::TerminateWithData(self.private_data.len()));
        }
        // RFC 6581 §7, §9: the IRD/ORD words lead the Private Data of the Enhanced Initiate
        // and Accept; an Enhanced Reject need not carry them.
        if matches!(
            self.function,
            FunctionCode::EnhancedInitiate | FunctionCode::EnhancedAccept
        ) && self.private_data.len() < ENHANCED_DATA_LEN
        {
            return Err(AdaptError::EnhancedDataMissing(self.private_data.len()));
        }
        Ok(())
    }

    /// The user message (send with PPID 17, unordered).
    pub fn emit(&self) -> Result<Vec<u8>, AdaptError> {
        self.validate()?;
        let mut v = Vec::with_capacity(4 + self.private_data.len());
        v.extend_from_slice(&self.ddp_ssn.to_be_bytes());
        v.extend_from_slice(&self.function.code().to_be_bytes());
        v.extend_from_slice(&self.private_data);
        Ok(v)
    }

    /// Parses the user data of a PPID 17 message.
    pub fn parse(data: &[u8]) -> Result<SessionControl, AdaptError> {
        if data.len() < 4 {
            return Err(AdaptError::Truncated {
                ppid_name: "DDP Stream Session Control",
                len: data.len(),
                need: 4,
            });
        }
        let code = u16::from_be_bytes([data[2], data[3]]);
        let function = FunctionCode::from_code(code).ok_or(AdaptError::UnknownFunction(code))?;
        let c = SessionControl {
            ddp_ssn: u16::from_be_bytes([data[0], data[1]]),
            function,
            private_data: data[4..].to_vec(),
        };
        c.validate()?;
        Ok(c)
    }
}

/// The user message of a DDP Segment Chunk (RFC 5043 §5.2.2): DDP-SSN, then the segment.
pub fn segment_message(ddp_ssn: u16, segment: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(2 + segment.len());
    v.extend_from_slice(&ddp_ssn.to_be_bytes());
    v.extend_from_slice(segment);
    v
}

/// A received DDP Segment Chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentChunk<'a> {
    /// DDP-SSN.
    pub ddp_ssn: u16,
    /// The DDP Segment (RFC 5041 §4): DDP header, RDMAP header, payload.
    pub segment: &'a [u8],
}

impl<'a> SegmentChunk<'a> {
    /// The DDP header and ULP payload.
    pub fn ddp(&self) -> Result<(ddp::Header, &'a [u8]), ddp::DdpError> {
        ddp::Segment::parse(self.segment)
    }

    /// The DDP and RDMAP headers and payload, when DDP carries RDMAP.
    pub fn rdmap(&self) -> Result<rdmap::Message<'a>, rdmap::DecodeError> {
        rdmap::Message::parse(self.segment)
    }
}

/// A received DDP-over-SCTP message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DdpSctpMessage<'a> {
    /// PPID 17.
    Control(SessionControl),
    /// PPID 16.
    Segment(SegmentChunk<'a>),
}

impl DdpSctpMessage<'_> {
    /// The DDP-SSN.
    pub fn ddp_ssn(&self) -> u16 {
        match self {
            DdpSctpMessage::Control(c) => c.ddp_ssn,
            DdpSctpMessage::Segment(s) => s.ddp_ssn,
        }
    }
}

/// Parses the user data of a message with `ppid` (a decoder's entry point).
pub fn parse(ppid: u32, data: &[u8]) -> Result<DdpSctpMessage<'_>, AdaptError> {
    match ppid {
        PPID_DDP_STREAM_SESSION_CONTROL => SessionControl::parse(data).map(DdpSctpMessage::Control),
        PPID_DDP_SEGMENT => {
            if data.len() < 2 {
                return Err(AdaptError::Truncated {
                    ppid_name: "DDP Segment",
                    len: data.len(),
                    need: 2,
                });
            }
            Ok(DdpSctpMessage::Segment(SegmentChunk {
                ddp_ssn: u16::from_be_bytes([data[0], data[1]]),
                segment: &data[2..],
            }))
        }
        p => Err(AdaptError::NotDdp(p)),
    }
}

/// The largest DDP Segment (RFC 5043 §9) for a path MTU: what fits one DATA chunk of one
/// packet without IP fragmentation, less the DDP-SSN and a 16-byte margin so a SACK can be
/// bundled — or [`MIN_MAX_SEGMENT`] (516) bytes, whichever is larger, as §9 has it.
/// `below_ip` is the IP header plus any encapsulation (20 + 8 for IPv4 over UDP).
pub fn max_ddp_segment(pmtu: usize, below_ip: usize) -> usize {
    const SCTP_COMMON: usize = 12;
    const DATA_CHUNK_HEADER: usize = 16;
    const BUNDLING_MARGIN: usize = 16;
    pmtu.saturating_sub(below_ip + SCTP_COMMON + DATA_CHUNK_HEADER + BUNDLING_MARGIN + 2)
        .max(MIN_MAX_SEGMENT)
}

/// Role in a DDP Stream Session (RFC 5043 §6.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Sends the Initiate.
    Active,
    /// Answers it.
    Passive,
}

/// Session state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionState {
    /// Active: Initiate sent, waiting for the answer.
    InitiateSent,
    /// Passive: waiting for the Initiate.
    Listening,
    /// Passive: Initiate received, waiting for the ULP's decision.
    AwaitingUlp,
    /// Accepted: DDP Segments flow.
    Established,
    /// Over (rejected, terminated by either side, or a sequence violation).
    Closed,
}

/// What the session hands the ULP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionEvent {
    /// Passive: the peer asks for a session (Private Data attached).
    InitiateReceived(Vec<u8>),
    /// Active: the peer accepted.
    Accepted(Vec<u8>),
    /// Active: the peer's ULP rejected.
    Rejected(Vec<u8>),
    /// A DDP Segment, in DDP-SSN order.
    Segment(Vec<u8>),
    /// A Tagged DDP Segment that arrived ahead of earlier messages (session established).
    /// Placement may happen in any order, Delivery may not (RFC 5041 §1.2, §2.1): the ULP
    /// may place its payload now and say so with [`StreamSession::mark_placed`]`(pos)`;
    /// the segment is handed over again in order, as [`SessionEvent::Segment`] or, once
    /// placed, as [`SessionEvent::PlacedSegment`].
    Ahead {
        /// Its position in the stream, for [`StreamSession::mark_placed`].
        pos: u64,
        /// The DDP Segment.
        segment: Vec<u8>,
    },
    /// A DDP Segment, in DDP-SSN order, whose payload the ULP placed when it arrived
    /// (see [`SessionEvent::Ahead`]): only its in-order processing remains.
    PlacedSegment(Vec<u8>),
    /// The peer terminated the session.
    Terminated,
    /// The received sequence broke RFC 5043 §6 or §10; the session is closed and a
    /// Terminate was queued for the peer.
    Violation(String),
}

/// Why a session operation is refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SessionError {
    /// Not allowed in this state.
    #[error("not allowed in session state {0:?}")]
    State(SessionState),
    /// A DDP Segment before the peer answered the Initiate (RFC 5043 §6.2: Initiate,
    /// Accept, then DDP Segments).
    #[error(
        "no DDP Segment may be sent before the peer accepted the Session Initiate (RFC 5043 §6.2)"
    )]
    NotAccepted,
    /// A control message that could overtake the previous one (§6.6).
    #[error("the previous session control message may still be in flight (RFC 5043 §6.6)")]
    ControlInFlight,
    /// Message format problem.
    #[error(transparent)]
    Format(#[from] AdaptError),
}

/// An outgoing message: send on `stream` with `ppid`, unordered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outgoing {
    /// SCTP stream (= the DDP stream).
    pub stream: u16,
    /// PPID 16 or 17.
    pub ppid: u32,
    /// The user data.
    pub data: Vec<u8>,
}

impl Outgoing {
    /// Always true: RFC 5043 §10 sends every message unordered.
    pub fn unordered(&self) -> bool {
        true
    }
}

/// One DDP Stream Session over SCTP stream `stream` (sans-IO).
#[derive(Debug, Clone)]
pub struct StreamSession {
    stream: u16,
    role: Role,
    state: SessionState,
    max_segment: usize,
    tx_ssn: u16,
    rx_next: u16,
    /// Messages delivered so far: the position of `rx_next` in an unwrapped count.
    rx_delivered: u64,
    /// Messages waiting for earlier ones, keyed by unwrapped position.
    rx_buf: BTreeMap<u64, DdpSctpMessageOwned>,
    control_in_flight: bool,
    out: Vec<Outgoing>,
    /// RFC 6581 enhanced session control: we sent, or the peer sent, an enhanced Initiate.
    enhanced: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum DdpSctpMessageOwned {
    Control(SessionControl),
    /// A DDP Segment; `placed`: the ULP placed its payload when it arrived.
    Segment {
        data: Vec<u8>,
        placed: bool,
    },
}

impl StreamSession {
    /// Starts an active session: the Initiate with `private_data` is queued.
    pub fn initiate(
        stream: u16,
        max_segment: usize,
        private_data: &[u8],
    ) -> Result<StreamSession, SessionError> {
        StreamSession::start_active(stream, max_segment, FunctionCode::Initiate, private_data)
    }

    /// Starts an active session with the RFC 6581 Enhanced Initiate: `private_data` must
    /// start with the IRD/ORD words.
    pub fn initiate_enhanced(
        stream: u16,
        max_segment: usize,
        private_data: &[u8],
    ) -> Result<StreamSession, SessionError> {
        StreamSession::start_active(
            stream,
            max_segment,
            FunctionCode::EnhancedInitiate,
            private_data,
        )
    }

    /// An active session that has queued `initiate` (a plain or an Enhanced Initiate) with
    /// `private_data`.
    fn start_active(
        stream: u16,
        max_segment: usize,
        initiate: FunctionCode,
        private_data: &[u8],
    ) -> Result<StreamSession, SessionError> {
        let mut s = StreamSession::new(stream, Role::Active, max_segment);
        s.state = SessionState::InitiateSent;
        s.enhanced = initiate == FunctionCode::EnhancedInitiate;
        s.send_control(initiate, private_data)?;
        Ok(s)
    }

    /// Whether RFC 6581 enhanced session control is in use: we sent an Enhanced Initiate,
    /// or (passive) the peer's Initiate was enhanced, so our Accept or Reject is too.
    pub fn enhanced(&self) -> bool {
        self.enhanced
    }

    /// A passive session waiting for the peer's Initiate.
    pub fn listen(stream: u16, max_segment: usize) -> StreamSession {
        let mut s = StreamSession::new(stream, Role::Passive, max_segment);
        s.state = SessionState::Listening;
        s
    }

    fn new(stream: u16, role: Role, max_segment: usize) -> StreamSession {
        StreamSession {
            stream,
            role,
            state: SessionState::Listening,
            max_segment,
            tx_ssn: 0,
            rx_next: 0,
            rx_delivered: 0,
            rx_buf: BTreeMap::new(),
            control_in_flight: false,
            out: Vec::new(),
            enhanced: false,
        }
    }

    /// State.
    pub fn state(&self) -> SessionState {
        self.state
    }

    /// Role.
    pub fn role(&self) -> Role {
        self.role
    }

    /// Messages to send (each unordered on this stream).
    pub fn poll_outgoing(&mut self) -> Vec<Outgoing> {
        std::mem::take(&mut self.out)
    }

    /// The driver saw SCTP acknowledge every message sent so far: a further control message
    /// can no longer overtake an earlier one (RFC 5043 §6.6).
    pub fn all_acknowledged(&mut self) {
        self.control_in_flight = false;
    }

    fn next_ssn(&mut self) -> u16 {
        let s = self.tx_ssn;
        self.tx_ssn = self.tx_ssn.wrapping_add(1);
        s
    }

    fn send_control(&mut self, f: FunctionCode, private_data: &[u8]) -> Result<(), SessionError> {
        let c = SessionControl {
            ddp_ssn: self.tx_ssn,
            function: f,
            private_data: private_data.to_vec(),
        };
        let data = c.emit()?;
        self.next_ssn();
        self.control_in_flight = true;
        self.out.push(Outgoing {
            stream: self.stream,
            ppid: PPID_DDP_STREAM_SESSION_CONTROL,
            data,
        });
        Ok(())
    }

    /// Passive: the ULP accepts (RFC 5043 §6.2).
    pub fn accept(&mut self, private_data: &[u8]) -> Result<(), SessionError> {
        self.answer_initiate(
            [FunctionCode::Accept, FunctionCode::EnhancedAccept],
            private_data,
            SessionState::Established,
        )
    }

    /// Passive: the ULP rejects (RFC 5043 §6.3); only the ULP may reject.
    pub fn reject(&mut self, private_data: &[u8]) -> Result<(), SessionError> {
        self.answer_initiate(
            [FunctionCode::Reject, FunctionCode::EnhancedReject],
            private_data,
            SessionState::Closed,
        )
    }

    /// Passive: answers the Initiate the ULP holds with `codes` (the plain one, or the
    /// enhanced one in an enhanced session) and moves to `next`.
    fn answer_initiate(
        &mut self,
        codes: [FunctionCode; 2],
        private_data: &[u8],
        next: SessionState,
    ) -> Result<(), SessionError> {
        if self.state != SessionState::AwaitingUlp {
            return Err(SessionError::State(self.state));
        }
        let [plain, enhanced] = codes;
        let f = if self.enhanced { enhanced } else { plain };
        self.send_control(f, private_data)?;
        self.state = next;
        Ok(())
    }

    /// Passive: the Initiate cannot be passed to the ULP (too many pending): answer with
    /// Terminate (RFC 5043 §5.2.3, §6.4).
    pub fn refuse_pending_limit(&mut self) -> Result<(), SessionError> {
        if self.state != SessionState::AwaitingUlp {
            return Err(SessionError::State(self.state));
        }
        self.send_control(FunctionCode::Terminate, &[])?;
        self.state = SessionState::Closed;
        Ok(())
    }

    /// Ends the session with a Terminate (RFC 5043 §6.2).
    pub fn terminate(&mut self) -> Result<(), SessionError> {
        if self.state != SessionState::Established {
            return Err(SessionError::State(self.state));
        }
        if self.control_in_flight {
            return Err(SessionError::ControlInFlight);
        }
        self.send_control(FunctionCode::Terminate, &[])?;
        self.state = SessionState::Closed;
        Ok(())
    }

    /// Queues a DDP Segment (RFC 5043 §5.2.2).
    pub fn send_segment(&mut self, segment: &[u8]) -> Result<(), SessionError> {
        match self.state {
            SessionState::Established => {}
            SessionState::InitiateSent => return Err(SessionError::NotAccepted),
            s => return Err(SessionError::State(s)),
        }
        if segment.len() > self.max_segment {
            return Err(AdaptError::SegmentTooLarge {
                len: segment.len(),
                max: self.max_segment,
            }
            .into());
        }
        let ssn = self.next_ssn();
        self.out.push(Outgoing {
            stream: self.stream,
            ppid: PPID_DDP_SEGMENT,
            data: segment_message(ssn, segment),
        });
        Ok(())
    }

    /// Queues a DDP Segment that `fill` appends to the message being built (after the
    /// DDP-SSN): the segment is written in place, with no copy of its own.
    pub fn send_segment_with(
        &mut self,
        fill: impl FnOnce(&mut Vec<u8>),
    ) -> Result<(), SessionError> {
        match self.state {
            SessionState::Established => {}
            SessionState::InitiateSent => return Err(SessionError::NotAccepted),
            s => return Err(SessionError::State(s)),
        }
        let mut data = Vec::with_capacity(2 + self.max_segment);
        data.extend_from_slice(&self.tx_ssn.to_be_bytes());
        fill(&mut data);
        let len = data.len() - 2;
        if len > self.max_segment {
            return Err(AdaptError::SegmentTooLarge {
                len,
                max: self.max_segment,
            }
            .into());
        }
        self.next_ssn();
        self.out.push(Outgoing {
            stream: self.stream,
            ppid: PPID_DDP_SEGMENT,
            data,
        });
        Ok(())
    }

    /// Processes a received message of this stream (any order); returns what became
    /// deliverable, in DDP-SSN order.
    pub fn receive(&mut self, ppid: u32, unordered: bool, data: &[u8]) -> Vec<SessionEvent> {
        if self.state == SessionState::Closed {
            return Vec::new();
        }
        if !unordered {
            return self.violation(AdaptError::Ordered.to_string());
        }
        let msg = match parse(ppid, data) {
            Ok(m) => m,
            Err(e) => return self.violation(e.to_string()),
        };
        let ssn = msg.ddp_ssn();
        // §10: a DDP-SSN more than 32767 ahead cannot be explained by unreceived chunks;
        // one behind the next expected is a duplicate or a replay.
        let ahead = ssn.wrapping_sub(self.rx_next);
        if ahead >= SSN_WINDOW {
            return self.violation(format!(
                "DDP-SSN {ssn} is outside the window starting at {} (RFC 5043 §10)",
                self.rx_next
            ));
        }
        let at = self.rx_delivered + u64::from(ahead);
        if self.rx_buf.contains_key(&at) {
            return self.violation(format!("DDP-SSN {ssn} received twice"));
        }
        let owned = match msg {
            DdpSctpMessage::Control(c) => DdpSctpMessageOwned::Control(c),
            DdpSctpMessage::Segment(s) => {
                if s.segment.len() > self.max_segment {
                    return self.violation(
                        AdaptError::SegmentTooLarge {
                            len: s.segment.len(),
                            max: self.max_segment,
                        }
                        .to_string(),
                    );
                }
                DdpSctpMessageOwned::Segment {
                    data: s.segment.to_vec(),
                    placed: false,
                }
            }
        };
        // A Tagged segment behind a gap: the ULP may place it now (RFC 5041 §2.1). DDP's
        // first octet carries the T flag in its top bit (RFC 5041 §5.1).
        let early = match &owned {
            DdpSctpMessageOwned::Segment { data, .. }
                if ahead > 0
                    && self.state == SessionState::Established
                    && data.first().is_some_and(|c| c & 0x80 != 0) =>
            {
                Some(SessionEvent::Ahead {
                    pos: at,
                    segment: data.clone(),
                })
            }
            _ => None,
        };
        // Keyed by unwrapped position so the map iterates in sequence order; delivering one
        // message costs O(log n) however many wait behind it.
        self.rx_buf.insert(at, owned);
        let mut events: Vec<SessionEvent> = early.into_iter().collect();
        while let Some(m) = self.rx_buf.remove(&self.rx_delivered) {
            self.rx_next = self.rx_next.wrapping_add(1);
            self.rx_delivered += 1;
            // Anything from the peer answers our last control message.
            self.control_in_flight = false;
            match self.in_order(m) {
                Ok(Some(e)) => events.push(e),
                Ok(None) => {}
                Err(v) => {
                    events.extend(self.violation(v));
                    break;
                }
            }
            if self.state == SessionState::Closed {
                break;
            }
        }
        events
    }

    /// The ULP placed the payload of the segment it was handed as
    /// [`SessionEvent::Ahead`]`{ pos, .. }`; its in-order delivery will be a
    /// [`SessionEvent::PlacedSegment`]. Unknown positions are ignored.
    pub fn mark_placed(&mut self, pos: u64) {
        if let Some(DdpSctpMessageOwned::Segment { placed, .. }) = self.rx_buf.get_mut(&pos) {
            *placed = true;
        }
    }

    /// Applies the legal sequences of RFC 5043 §6.2-§6.4 to the next message in order.
    fn in_order(&mut self, m: DdpSctpMessageOwned) -> Result<Option<SessionEvent>, String> {
        use DdpSctpMessageOwned as M;
        use FunctionCode as F;
        use SessionState as S;
        Ok(Some(match (self.state, m) {
            (S::Listening, M::Control(c)) if c.function.base() == F::Initiate => {
                self.state = S::AwaitingUlp;
                self.enhanced = c.function.is_enhanced();
                SessionEvent::InitiateReceived(c.private_data)
            }
            // RFC 6581 §10: the answer to an Enhanced Initiate is enhanced, and the answer
            // to a plain one is plain.
            (S::InitiateSent, M::Control(c))
                if matches!(c.function.base(), F::Accept | F::Reject)
                    && c.function.is_enhanced() != self.enhanced =>
            {
                return Err(format!(
                    "{} answers {} Session Initiate (RFC 6581 §10)",
                    c.function,
                    if self.enhanced {
                        "an Enhanced"
                    } else {
                        "a plain"
                    }
                ));
            }
            (S::InitiateSent, M::Control(c)) => match c.function.base() {
                F::Accept => {
                    self.state = S::Established;
                    SessionEvent::Accepted(c.private_data)
                }
                F::Reject => {
                    self.state = S::Closed;
                    SessionEvent::Rejected(c.private_data)
                }
                // §6.4: refused without the ULP.
                F::Terminate => {
                    self.state = S::Closed;
                    SessionEvent::Terminated
                }
                F::Initiate => return Err("Session Initiate answered with Initiate".into()),
                // `base()` maps the enhanced codes onto the three above.
                F::EnhancedInitiate | F::EnhancedAccept | F::EnhancedReject => {
                    return Err(format!("{} not allowed here", c.function));
                }
            },
            (S::Established, M::Segment { data, placed }) => {
                if placed {
                    SessionEvent::PlacedSegment(data)
                } else {
                    SessionEvent::Segment(data)
                }
            }
            (S::Established | S::AwaitingUlp, M::Control(c)) if c.function == F::Terminate => {
                self.state = S::Closed;
                SessionEvent::Terminated
            }
            (S::AwaitingUlp, M::Segment { .. }) => {
                return Err(
                    "DDP Segment from the active side before the session was accepted (RFC 5043 §6.2)"
                        .into(),
                );
            }
            (state, M::Control(c)) => {
                return Err(format!(
                    "{} not allowed in state {state:?} (RFC 5043 §6)",
                    c.function
                ));
            }
            (state, M::Segment { .. }) => {
                return Err(format!(
                    "DDP Segment not allowed in state {state:?} (RFC 5043 §6)"
                ));
            }
        }))
    }

    /// §6.1: a sequence that fits no legal pattern terminates the session.
    fn violation(&mut self, why: String) -> Vec<SessionEvent> {
        if self.state != SessionState::Closed {
            let c = SessionControl {
                ddp_ssn: self.next_ssn(),
                function: FunctionCode::Terminate,
                private_data: Vec::new(),
            };
            if let Ok(data) = c.emit() {
                self.out.push(Outgoing {
                    stream: self.stream,
                    ppid: PPID_DDP_STREAM_SESSION_CONTROL,
                    data,
                });
            }
            self.state = SessionState::Closed;
        }
        vec![SessionEvent::Violation(why)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 5043 §5.2.3: the control message layout, byte by byte.
    #[test]
    fn rfc5043_5_2_3_session_control_layout() {
        let c = SessionControl {
            ddp_ssn: 0,
            function: FunctionCode::Initiate,
            private_data: b"hi".to_vec(),
        };
        assert_eq!(c.emit().unwrap(), vec![0, 0, 0, 1, b'h', b'i']);
        let parsed = SessionControl::parse(&[0x12, 0x34, 0x00, 0x04]).unwrap();
        assert_eq!(parsed.ddp_ssn, 0x1234);
        assert_eq!(parsed.function, FunctionCode::Terminate);
        assert!(parsed.private_data.is_empty());
        for (code, f) in [
            (1, FunctionCode::Initiate),
            (2, FunctionCode::Accept),
            (3, FunctionCode::Reject),
            (4, FunctionCode::Terminate),
        ] {
            assert_eq!(FunctionCode::from_code(code), Some(f));
            assert_eq!(f.code(), code);
        }
        assert_eq!(
            SessionControl::parse(&[0, 0, 0, 8]),
            Err(AdaptError::UnknownFunction(8))
        );
        assert!(matches!(
            SessionControl::parse(&[0, 0, 0]),
            Err(AdaptError::Truncated { need: 4, .. })
        ));
    }

    /// RFC 5043 §5.2.3: Private Data at most 512 bytes; none on Terminate; zero allowed.
    #[test]
    fn rfc5043_5_2_3_private_data_limits() {
        let mut c = SessionControl {
            ddp_ssn: 0,
            function: FunctionCode::Accept,
            private_data: vec![7; 512],
        };
        assert_eq!(c.emit().unwrap().len(), 516);
        c.private_data.push(0);
        assert_eq!(c.emit(), Err(AdaptError::PrivateDataTooLong(513)));
        let mut wire = vec![0, 0, 0, 2];
        wire.extend_from_slice(&[0; 513]);
        assert_eq!(
            SessionControl::parse(&wire),
            Err(AdaptError::PrivateDataTooLong(513))
        );
        assert_eq!(
            SessionControl::parse(&[0, 3, 0, 4, 1]),
            Err(AdaptError::TerminateWithData(1))
        );
        c.private_data.clear();
        assert_eq!(c.emit().unwrap(), vec![0, 0, 0, 2]);
    }

    /// RFC 5043 §5.2.2: a DDP Segment Chunk is the DDP-SSN followed by the DDP Segment,
    /// with no MPA framing and no length field; the segment decodes as DDP/RDMAP.
    #[test]
    fn rfc5043_5_2_2_segment_chunk_carries_a_bare_ddp_segment() {
        // An untagged RDMAP Send, last segment: DDP control 0x41 (L=1, DV=1), RDMAP
        // control 0x43 (RV=1, opcode Send 3), QN 0, MSN 1, MO 0, then "abc".
        let seg = [
            0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, b'a', b'b', b'c',
        ];
        let msg = segment_message(9, &seg);
        assert_eq!(&msg[..2], &[0, 9]);
        assert_eq!(&msg[2..], &seg);
        let DdpSctpMessage::Segment(s) = parse(PPID_DDP_SEGMENT, &msg).unwrap() else {
            panic!("not a segment");
        };
        assert_eq!(s.ddp_ssn, 9);
        let (h, payload) = s.ddp().unwrap();
        assert!(!h.is_tagged() && h.last());
        assert_eq!(payload, b"abc");
        let r = s.rdmap().unwrap();
        assert_eq!(r.payload, b"abc");
        assert_eq!(parse(51, &msg), Err(AdaptError::NotDdp(51)));
        assert!(matches!(
            parse(PPID_DDP_SEGMENT, &[1]),
            Err(AdaptError::Truncated { need: 2, .. })
        ));
    }

    /// RFC 5043 §5.1/§11.1: only indication 0x00000001 allows DDP.
    #[test]
    fn rfc5043_11_1_adaptation_indication_table() {
        assert_eq!(PeerAdaptation::classify(None), PeerAdaptation::None);
        assert!(!PeerAdaptation::classify(None).ddp_allowed());
        assert!(PeerAdaptation::classify(Some(1)).ddp_allowed());
        assert_eq!(PeerAdaptation::classify(Some(2)), PeerAdaptation::Other(2));
        assert!(!PeerAdaptation::classify(Some(2)).ddp_allowed());
    }

    /// RFC 5043 §9: maximum segment from the MTU, never under 516 bytes.
    #[test]
    fn rfc5043_9_max_segment_size() {
        // 1500 - 20 (IPv4) - 12 - 16 - 16 margin = 1436 bytes of user data, 1434 of segment.
        assert_eq!(max_ddp_segment(1500, 20), 1434);
        // UDP encapsulation costs 8 more.
        assert_eq!(max_ddp_segment(1500, 28), 1426);
        // Small MTU: still 516 bytes ("or 516 bytes, whichever is larger"); below a 566-byte
        // path SCTP then fragments.
        assert_eq!(max_ddp_segment(576, 20), 516);
        assert_eq!(max_ddp_segment(68, 20), 516);
        let mut s = StreamSession::listen(0, 100);
        s.receive(PPID_DDP_STREAM_SESSION_CONTROL, true, &[0, 0, 0, 1]);
        s.accept(&[]).unwrap();
        assert_eq!(
            s.send_segment(&[0; 101]),
            Err(SessionError::Format(AdaptError::SegmentTooLarge {
                len: 101,
                max: 100
            }))
        );
    }

    fn deliver(to: &mut StreamSession, out: Vec<Outgoing>) -> Vec<SessionEvent> {
        out.into_iter()
            .flat_map(|o| to.receive(o.ppid, o.unordered(), &o.data))
            .collect()
    }

    /// RFC 5043 §6.2 and §6.1: Initiate / Accept, segments with DDP-SSNs from 0 without
    /// gaps, delivered in DDP-SSN order although received out of order, Terminate.
    #[test]
    fn rfc5043_6_2_active_passive_session_accepted() {
        let mut a = StreamSession::initiate(3, 1000, b"req").unwrap();
        // §6.6: no segment before the answer.
        assert_eq!(a.send_segment(b"x"), Err(SessionError::NotAccepted));
        let mut p = StreamSession::listen(3, 1000);
        let out = a.poll_outgoing();
        assert_eq!(out.len(), 1);
        assert_eq!(
            (out[0].stream, out[0].ppid, &out[0].data[..4]),
            (3, 17, &[0u8, 0, 0, 1][..])
        );
        assert_eq!(
            deliver(&mut p, out),
            vec![SessionEvent::InitiateReceived(b"req".to_vec())]
        );
        p.accept(b"ok").unwrap();
        assert_eq!(
            deliver(&mut a, p.poll_outgoing()),
            vec![SessionEvent::Accepted(b"ok".to_vec())]
        );
        for i in 0..5u8 {
            a.send_segment(&[i]).unwrap();
        }
        let mut segs = a.poll_outgoing();
        // DDP-SSNs 1..=5 (0 was the Initiate).
        let ssns: Vec<u16> = segs
            .iter()
            .map(|o| u16::from_be_bytes([o.data[0], o.data[1]]))
            .collect();
        assert_eq!(ssns, vec![1, 2, 3, 4, 5]);
        segs.reverse();
        let ev = deliver(&mut p, segs);
        assert_eq!(
            ev,
            (0..5u8)
                .map(|i| SessionEvent::Segment(vec![i]))
                .collect::<Vec<_>>()
        );
        a.all_acknowledged();
        a.terminate().unwrap();
        assert_eq!(
            deliver(&mut p, a.poll_outgoing()),
            vec![SessionEvent::Terminated]
        );
        assert_eq!(p.state(), SessionState::Closed);
    }

    /// RFC 5043 §6.3 and §6.4: ULP rejection, and Terminate when the request cannot reach
    /// the ULP.
    #[test]
    fn rfc5043_6_3_6_4_rejected_sessions() {
        let mut a = StreamSession::initiate(0, 1000, b"").unwrap();
        let mut p = StreamSession::listen(0, 1000);
        deliver(&mut p, a.poll_outgoing());
        p.reject(b"no").unwrap();
        assert_eq!(
            deliver(&mut a, p.poll_outgoing()),
            vec![SessionEvent::Rejected(b"no".to_vec())]
        );
        assert_eq!(a.state(), SessionState::Closed);

        let mut a = StreamSession::initiate(0, 1000, b"").unwrap();
        let mut p = StreamSession::listen(0, 1000);
        deliver(&mut p, a.poll_outgoing());
        p.refuse_pending_limit().unwrap();
        let out = p.poll_outgoing();
        assert_eq!(&out[0].data, &[0, 0, 0, 4]);
        assert_eq!(deliver(&mut a, out), vec![SessionEvent::Terminated]);
    }

    /// RFC 5043 §6.1, §6.6, §10: illegal sequences terminate the session.
    #[test]
    fn rfc5043_6_1_illegal_sequences_terminate() {
        // A segment before the Initiate was accepted.
        let mut p = StreamSession::listen(0, 1000);
        p.receive(PPID_DDP_STREAM_SESSION_CONTROL, true, &[0, 0, 0, 1]);
        let ev = p.receive(PPID_DDP_SEGMENT, true, &segment_message(1, b"early"));
        assert!(matches!(&ev[..], [SessionEvent::Violation(_)]), "{ev:?}");
        assert_eq!(p.state(), SessionState::Closed);
        let out = p.poll_outgoing();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].ppid, PPID_DDP_STREAM_SESSION_CONTROL);
        assert_eq!(&out[0].data[2..], &[0, 4]);

        // Ordered delivery is not DDP over SCTP (§10).
        let mut p = StreamSession::listen(0, 1000);
        let ev = p.receive(PPID_DDP_STREAM_SESSION_CONTROL, false, &[0, 0, 0, 1]);
        assert!(matches!(&ev[..], [SessionEvent::Violation(_)]));

        // A DDP-SSN far outside the window (§10).
        let mut p = StreamSession::listen(0, 1000);
        let ev = p.receive(PPID_DDP_SEGMENT, true, &segment_message(40000, b"x"));
        assert!(matches!(&ev[..], [SessionEvent::Violation(_)]));

        // The first message of the passive side's peer must be an Initiate.
        let mut p = StreamSession::listen(0, 1000);
        let ev = p.receive(PPID_DDP_STREAM_SESSION_CONTROL, true, &[0, 0, 0, 2]);
        assert!(matches!(&ev[..], [SessionEvent::Violation(_)]));

        // A duplicate DDP-SSN.
        let mut p = StreamSession::listen(0, 1000);
        p.receive(PPID_DDP_SEGMENT, true, &segment_message(2, b"x"));
        let ev = p.receive(PPID_DDP_SEGMENT, true, &segment_message(2, b"x"));
        assert!(matches!(&ev[..], [SessionEvent::Violation(_)]));
    }

    /// RFC 5043 §6.6: a Terminate right behind the Accept could overtake it.
    #[test]
    fn rfc5043_6_6_control_messages_do_not_overtake() {
        let mut p = StreamSession::listen(0, 1000);
        p.receive(PPID_DDP_STREAM_SESSION_CONTROL, true, &[0, 0, 0, 1]);
        p.accept(&[]).unwrap();
        assert_eq!(p.terminate(), Err(SessionError::ControlInFlight));
        p.all_acknowledged();
        p.terminate().unwrap();
    }

    #[test]
    fn garbage_never_panics() {
        for len in 0..40 {
            let data: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
            for ppid in [16, 17, 0] {
                let _ = parse(ppid, &data);
                let mut s = StreamSession::listen(1, 600);
                let _ = s.receive(ppid, true, &data);
            }
        }
    }

    /// RFC 6581 §7 (updating RFC 5043 §5.2.3): Enhanced Initiate/Accept/Reject are function
    /// codes 5/6/7, carry IRD/ORD in the first four bytes of the Private Data, and follow the
    /// same legal sequences; a passive side answers an enhanced Initiate with an enhanced
    /// Accept.
    #[test]
    fn rfc6581_7_enhanced_session_control() {
        for (code, f) in [
            (5, FunctionCode::EnhancedInitiate),
            (6, FunctionCode::EnhancedAccept),
            (7, FunctionCode::EnhancedReject),
        ] {
            assert_eq!(FunctionCode::from_code(code), Some(f));
            assert_eq!(f.code(), code);
            assert!(f.is_enhanced());
            assert_eq!(f.base().enhanced(), f);
        }
        assert_eq!(
            SessionControl::parse(&[0, 0, 0, 5, 0, 16]),
            Err(AdaptError::EnhancedDataMissing(2))
        );
        let pd = [0x00, 0x10, 0x00, 0x08, b'x'];
        let mut active = StreamSession::initiate_enhanced(0, 1400, &pd).unwrap();
        let init = active.poll_outgoing().remove(0);
        assert_eq!(&init.data[2..4], &[0, 5]);
        let mut passive = StreamSession::listen(0, 1400);
        let ev = passive.receive(init.ppid, true, &init.data);
        assert_eq!(ev, vec![SessionEvent::InitiateReceived(pd.to_vec())]);
        assert!(passive.enhanced());
        passive.accept(&[0, 8, 0, 16]).unwrap();
        let acc = passive.poll_outgoing().remove(0);
        assert_eq!(&acc.data[2..4], &[0, 6]);
        let ev = active.receive(acc.ppid, true, &acc.data);
        assert_eq!(ev, vec![SessionEvent::Accepted(vec![0, 8, 0, 16])]);
        assert_eq!(active.state(), SessionState::Established);
    }

    /// RFC 6581 §7, §9: only the Enhanced Initiate and Accept lead with the IRD/ORD words;
    /// an Enhanced Reject with less (or no) Private Data is a Reject, not a violation.
    #[test]
    fn rfc6581_9_enhanced_reject_needs_no_ird_ord() {
        let rej = SessionControl {
            ddp_ssn: 0,
            function: FunctionCode::EnhancedReject,
            private_data: vec![1, 2],
        };
        assert_eq!(rej.validate(), Ok(()));
        let mut active = StreamSession::initiate_enhanced(0, 1400, &[0, 1, 0, 1]).unwrap();
        let _ = active.poll_outgoing();
        let ev = active.receive(PPID_DDP_STREAM_SESSION_CONTROL, true, &rej.emit().unwrap());
        assert_eq!(ev, vec![SessionEvent::Rejected(vec![1, 2])]);
        let acc = SessionControl {
            ddp_ssn: 0,
            function: FunctionCode::EnhancedAccept,
            private_data: vec![1, 2],
        };
        assert_eq!(acc.validate(), Err(AdaptError::EnhancedDataMissing(2)));
    }

    /// RFC 6581 §10: an Enhanced Initiate is answered with an Enhanced Accept or Reject and
    /// a plain one with a plain answer; a mismatched answer is a violation that terminates
    /// the session (the IRD/ORD words would otherwise be read from, or handed to, the wrong
    /// place).
    #[test]
    fn rfc6581_10_answer_matches_the_initiate() {
        for (enhanced_init, answer) in [
            (true, FunctionCode::Accept),
            (true, FunctionCode::Reject),
            (false, FunctionCode::EnhancedAccept),
            (false, FunctionCode::EnhancedReject),
        ] {
            let mut active = if enhanced_init {
                StreamSession::initiate_enhanced(0, 1400, &[0, 1, 0, 1]).unwrap()
            } else {
                StreamSession::initiate(0, 1400, b"").unwrap()
            };
            let _ = active.poll_outgoing();
            let c = SessionControl {
                ddp_ssn: 0,
                function: answer,
                private_data: vec![0, 4, 0, 4],
            };
            let ev = active.receive(PPID_DDP_STREAM_SESSION_CONTROL, true, &c.emit().unwrap());
            assert!(
                matches!(&ev[..], [SessionEvent::Violation(w)] if w.contains("RFC 6581 §10")),
                "{answer:?} to enhanced={enhanced_init}: {ev:?}"
            );
            assert_eq!(active.state(), SessionState::Closed);
            let out = active.poll_outgoing();
            assert_eq!(&out[0].data[2..4], &[0, 4], "a Session Terminate goes out");
        }
    }

    /// An active and a passive session on stream 0 (100-octet segments), established.
    fn established_pair() -> (StreamSession, StreamSession) {
        let mut active = StreamSession::initiate(0, 100, b"").unwrap();
        let mut passive = StreamSession::listen(0, 100);
        let init = active.poll_outgoing().remove(0);
        passive.receive(init.ppid, true, &init.data);
        passive.accept(b"").unwrap();
        let acc = passive.poll_outgoing().remove(0);
        active.receive(acc.ppid, true, &acc.data);
        (active, passive)
    }

    /// RFC 5043 §10: messages are put back in DDP-SSN order however far they arrive out of
    /// order within the window: 20 000 segments delivered last-first come out first-last,
    /// across a DDP-SSN wrap (the session starts near 65535).
    #[test]
    fn rfc5043_10_deep_reordering_across_the_ssn_wrap() {
        let (mut active, mut passive) = established_pair();
        // Move both ends close to the wrap: 65 000 segments in order.
        for i in 0..65_000u32 {
            active.send_segment(&i.to_be_bytes()).unwrap();
            let m = active.poll_outgoing().remove(0);
            assert_eq!(passive.receive(m.ppid, true, &m.data).len(), 1);
        }
        let mut batch = Vec::new();
        for i in 0..20_000u32 {
            active.send_segment(&i.to_be_bytes()).unwrap();
            batch.push(active.poll_outgoing().remove(0));
        }
        let mut got = Vec::new();
        for m in batch.iter().rev() {
            for e in passive.receive(m.ppid, true, &m.data) {
                let SessionEvent::Segment(s) = e else {
                    panic!("{e:?}");
                };
                got.push(u32::from_be_bytes(s.try_into().unwrap()));
            }
        }
        assert_eq!(got, (0..20_000).collect::<Vec<_>>());
    }

    /// RFC 5041 §1.2, §2.1 over RFC 5043 §10: a Tagged segment that arrives ahead of an
    /// earlier message is offered for placement at once; an Untagged one is not (its
    /// Delivery must wait). In order, the Tagged one comes again, marked as placed when the
    /// ULP said so.
    #[test]
    fn rfc5041_2_1_tagged_segments_ahead_of_a_gap_are_offered_for_placement() {
        let (mut active, mut passive) = established_pair();
        // Untagged (T = 0), Tagged (T = 1), Tagged, Untagged.
        let segs: [&[u8]; 4] = [&[0x41, 1], &[0xC1, 2], &[0x81, 3], &[0x01, 4]];
        let mut msgs = Vec::new();
        for s in segs {
            active.send_segment(s).unwrap();
            msgs.push(active.poll_outgoing().remove(0));
        }
        let rx = |p: &mut StreamSession, i: usize| p.receive(msgs[i].ppid, true, &msgs[i].data);
        // The last Untagged one: nothing yet.
        assert_eq!(rx(&mut passive, 3), vec![]);
        // The second: offered at its position; the ULP places it.
        let e = rx(&mut passive, 1);
        let [SessionEvent::Ahead { pos, segment }] = &e[..] else {
            panic!("{e:?}");
        };
        assert_eq!(segment, &[0xC1, 2]);
        passive.mark_placed(*pos);
        // The third: offered, not placed by the ULP.
        let e = rx(&mut passive, 2);
        assert!(matches!(&e[..], [SessionEvent::Ahead { .. }]), "{e:?}");
        // The first fills the gap: all four in order, the placed one marked.
        assert_eq!(
            rx(&mut passive, 0),
            vec![
                SessionEvent::Segment(vec![0x41, 1]),
                SessionEvent::PlacedSegment(vec![0xC1, 2]),
                SessionEvent::Segment(vec![0x81, 3]),
                SessionEvent::Segment(vec![0x01, 4]),
            ]
        );
        // In order, nothing is offered ahead.
        active.send_segment(&[0x81, 5]).unwrap();
        let m = active.poll_outgoing().remove(0);
        assert_eq!(
            passive.receive(m.ppid, true, &m.data),
            vec![SessionEvent::Segment(vec![0x81, 5])]
        );
    }
}
