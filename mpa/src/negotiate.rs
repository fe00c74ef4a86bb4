//! MPA connection setup negotiation (RFC 5044 §7.1, RFC 6581), as pure functions.
//!
//! * [`request`] builds the initiator's MPA Request from a local [`Config`].
//! * [`respond`] is the responder's decision: given its [`Config`] and the
//!   received Request it returns the Reply to send plus the agreed [`Session`]
//!   ([`Accepted`]), or a rejecting Reply plus the reason ([`Rejected`]).
//! * [`complete`] is the initiator's view: given what it sent and the Reply it
//!   received, the agreed [`Session`] or a [`NegotiationError`].
//! * [`reject_reply`] builds a Reply with R = 1 when the ULP itself refuses a
//!   Request it has inspected (for example because of its private data).
//!
//! Nothing here does I/O or keeps time. The caller owns the timers; see
//! [`REPLY_TIMEOUT`] and [`REQUEST_TIMEOUT`].
//!
//! ## Rules implemented
//!
//! RFC 5044 §7.1.1 (frame fields):
//! * **Rev** — a responder accepts revision 1 (unless configured not to) and
//!   revision 2 if it speaks RFC 6581; it answers with the revision it will use.
//!   Any other revision is rejected with a Reply carrying the responder's own
//!   revision. An initiator refuses a Reply with a revision it did not offer.
//! * **M** — per direction: a frame's M asks the *other* side to send markers.
//!   A side that cannot insert markers ([`Config::markers_tx`] off) refuses a
//!   peer's M = 1, as Linux siw does.
//! * **C** — CRC is used in both directions if either frame has C = 1. A side
//!   that cannot do CRC ([`CrcPolicy::Off`]) must therefore refuse.
//!   [`CrcPolicy::RequireStrict`] additionally refuses a peer frame with C = 0
//!   (the strict CRC of Linux siw built with `mpa_crc_required`, and of Chelsio T404).
//! * **R** — only in a Reply; the initiator reports it as
//!   [`NegotiationError::Rejected`] with the responder's private data. In a
//!   Request it is sent as zero and not checked on receipt.
//! * **Res** — sent as zero, ignored on receipt.
//! * **PD_Length** — at most 512 octets, RFC 6581 enhanced data included.
//!
//! RFC 5044 §7.1.2 (startup): the initiator sends the first FPDU, only after a
//! Reply without R; the responder must receive and validate one FPDU before it
//! sends any FPDU or marker ([`Session::must_await_first_fpdu`]).
//!
//! RFC 6581 (enhanced connection establishment, Rev = 2 with H = 1):
//! * The responder echoes H and the enhanced data layout.
//! * IRD/ORD: the responder's ORD must not exceed the initiator's IRD, so it
//!   lowers its ORD; the initiator lowers its ORD to the responder's IRD; if the
//!   responder's ORD exceeds the initiator's IRD the initiator must raise its IRD
//!   or fail with "insufficient IRD resources" (LLP error 6). With
//!   [`Config::relaxed_ird_ord`] (the behaviour of Linux siw) a side raises its
//!   own IRD up to [`Config::ird_max`] instead of under-provisioning. (Linux siw
//!   with relaxed negotiation switched off, and cxgb4 in its strict mode, also
//!   terminate with error 6 when the initiator's ORD exceeds the responder's
//!   IRD; lowering the ORD, as done here and by cxgb4's relaxed mode, never
//!   exceeds what the peer granted, so it is kept.)
//! * Peer-to-peer: a responder that accepts P2P echoes the P2P flag and selects
//!   exactly one of the offered RTR types; if it supports none it rejects
//!   ("no matching RTR option", LLP error 7). The initiator then sends that RTR
//!   message as its first FPDU ([`Session::rtr_to_send`]).
//! * A zero-length RDMA Read RTR consumes one Read credit: it is only chosen when
//!   the initiator's ORD and the responder's IRD are at least 1.

use core::fmt;
use core::time::Duration;

use thiserror::Error;

use crate::fpdu::{Deframer, FpduEncoder, RxConfig, TxConfig};
use crate::frame::{
    ConnFrame, ENHANCED_DATA_LEN, EnhancedData, FrameKind, IRD_ORD_MAX, MAX_PRIVATE_DATA, RtrSet,
    RtrType,
};
use crate::term::LlpErrorCode;

/// How long an initiator should wait for the MPA Reply before closing the TCP
/// connection. RFC 5044 asks for a timeout but leaves the value to the
/// implementation; this is the value Linux siw uses.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a responder should wait for the MPA Request after the TCP
/// connection is up. Value used by Linux siw; the RFC leaves it open.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Which end of the connection this side is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// Sent the MPA Request (active side).
    Initiator,
    /// Sent the MPA Reply (passive side).
    Responder,
}

/// Local CRC policy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CrcPolicy {
    /// This side cannot (or will not) use CRC: it sends C = 0 and refuses a
    /// connection on which the peer sets C = 1, since RFC 5044 makes CRC
    /// mandatory in both directions as soon as either side asks.
    Off,
    /// Sends C = 0 but uses CRC when the peer asks for it (the usual setting).
    #[default]
    Accept,
    /// Sends C = 1, which forces CRC in both directions.
    Require,
    /// Sends C = 1 and insists that the peer's frame carries C = 1 as well: a
    /// Request (responder) or Reply (initiator) with C = 0 is refused, although
    /// RFC 5044 §7.1.1 would run CRC anyway because our own C = 1 forces it.
    /// This is "CRC required and strict": Linux siw built with
    /// `mpa_crc_required` refuses a Reply without C (`siw_proc_mpareply`), and
    /// Chelsio T404 peers are reported to behave this way
    /// (`shared/notes/interop-and-platform-facts.md`). (siw's own `mpa_crc_strict`
    /// without `mpa_crc_required` means "never CRC", which is [`CrcPolicy::Off`].)
    RequireStrict,
}

impl CrcPolicy {
    /// Whether this side sets C = 1 in its own Request or Reply.
    pub fn sends_c(self) -> bool {
        matches!(self, CrcPolicy::Require | CrcPolicy::RequireStrict)
    }
}

/// Local MPA settings, used for both roles.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Config {
    /// Highest MPA revision spoken (1 or 2); the revision of our Requests.
    pub revision: u8,
    /// Whether a responder configured for revision 2 also accepts revision 1 Requests.
    pub accept_rev1: bool,
    /// CRC policy.
    pub crc: CrcPolicy,
    /// We want the peer to send markers to us (our M flag).
    pub markers_rx: bool,
    /// We can insert markers when the peer asks for them.
    pub markers_tx: bool,
    /// Send RFC 6581 enhanced data (H) in our Request (needs revision 2).
    /// A responder always honours a peer's enhanced Request when speaking revision 2.
    pub enhanced: bool,
    /// Our IRD: incoming RDMA Read Requests we can have outstanding (≤ 0x3FFF).
    pub ird: u16,
    /// Our ORD: outgoing RDMA Read Requests we want outstanding (≤ 0x3FFF).
    pub ord: u16,
    /// With `relaxed_ird_ord`, how far we may raise our IRD to match the peer's ORD.
    pub ird_max: u16,
    /// Raise our IRD (up to `ird_max`) to meet the peer's ORD instead of
    /// advertising less (responder) or failing (initiator), as Linux siw does.
    pub relaxed_ird_ord: bool,
    /// Peer-to-peer mode: as initiator, ask for it (offering `rtr_supported`);
    /// as responder, accept it.
    pub p2p: bool,
    /// RTR message types we can send (initiator) or receive (responder).
    pub rtr_supported: RtrSet,
    /// The RTR type a responder picks when the initiator offers it.
    pub rtr_preferred: Option<RtrType>,
    /// The ULP's private data for our Request or Reply.
    pub private_data: Vec<u8>,
}

impl Default for Config {
    /// Revision 2 with enhanced data, IRD = ORD = 1, no P2P, CRC on request, no
    /// markers: the Request this produces is byte-identical to Linux siw's.
    fn default() -> Self {
        Config {
            revision: 2,
            accept_rev1: true,
            crc: CrcPolicy::Accept,
            markers_rx: false,
            markers_tx: false,
            enhanced: true,
            ird: 1,
            ord: 1,
            ird_max: 1,
            relaxed_ird_ord: false,
            p2p: false,
            rtr_supported: RtrSet {
                send: false,
                write: true,
                read: true,
            },
            rtr_preferred: None,
            private_data: Vec::new(),
        }
    }
}

/// A local [`Config`] that cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Error)]
pub enum ConfigError {
    /// Only MPA revisions 1 and 2 exist.
    #[error("MPA revision {0} is not supported (use 1 or 2)")]
    UnsupportedRevision(u8),
    /// RFC 6581 enhanced data exists only in revision 2.
    #[error("enhanced connection establishment (RFC 6581) needs MPA revision 2")]
    EnhancedNeedsRevision2,
    /// Peer-to-peer mode is signalled in the enhanced data.
    #[error("peer-to-peer mode needs enhanced connection establishment (RFC 6581)")]
    P2pNeedsEnhanced,
    /// IRD and ORD are 14-bit fields.
    #[error("{field} {value} does not fit the 14-bit field (max {IRD_ORD_MAX})")]
    IrdOrdTooLarge {
        /// "IRD", "ORD" or "IRD max".
        field: &'static str,
        /// Offending value.
        value: u16,
    },
    /// Peer-to-peer needs at least one RTR type.
    #[error("peer-to-peer mode enabled but no RTR message type supported")]
    NoRtrSupported,
    /// The preferred RTR type must be one we support.
    #[error("preferred RTR type ({0}) is not in the supported set")]
    PreferredRtrUnsupported(RtrType),
    /// Private data (plus enhanced data) exceeds 512 octets.
    #[error("private data of {len} octets exceeds the {max} available")]
    PrivateDataTooLong {
        /// ULP private data length.
        len: usize,
        /// Space left for it.
        max: usize,
    },
}

impl Config {
    /// Checks the settings.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(1..=2).contains(&self.revision) {
            return Err(ConfigError::UnsupportedRevision(self.revision));
        }
        if self.enhanced && self.revision != 2 {
            return Err(ConfigError::EnhancedNeedsRevision2);
        }
        if self.p2p && !self.enhanced {
            return Err(ConfigError::P2pNeedsEnhanced);
        }
        for (field, value) in [
            ("IRD", self.ird),
            ("ORD", self.ord),
            ("IRD max", self.ird_max),
        ] {
            if value > IRD_ORD_MAX {
                return Err(ConfigError::IrdOrdTooLarge { field, value });
            }
        }
        if self.p2p && self.rtr_supported.is_empty() {
            return Err(ConfigError::NoRtrSupported);
        }
        if let Some(t) = self.rtr_preferred
            && !self.rtr_supported.contains(t)
        {
            return Err(ConfigError::PreferredRtrUnsupported(t));
        }
        let max = self.private_data_room(self.enhanced);
        if self.private_data.len() > max {
            return Err(ConfigError::PrivateDataTooLong {
                len: self.private_data.len(),
                max,
            });
        }
        Ok(())
    }

    fn private_data_room(&self, enhanced: bool) -> usize {
        if enhanced {
            MAX_PRIVATE_DATA - ENHANCED_DATA_LEN
        } else {
            MAX_PRIVATE_DATA
        }
    }

    fn ird_ceiling(&self) -> u16 {
        if self.relaxed_ird_ord {
            self.ird.max(self.ird_max)
        } else {
            self.ird
        }
    }
}

/// What both sides agreed on; everything needed to run full operation.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Session {
    /// Our role.
    pub role: Role,
    /// MPA revision in use.
    pub revision: u8,
    /// CRC32c in both directions.
    pub crc: bool,
    /// We insert markers in what we send.
    pub markers_tx: bool,
    /// The peer inserts markers in what it sends.
    pub markers_rx: bool,
    /// RFC 6581 enhanced data was exchanged (IRD/ORD below are negotiated;
    /// otherwise they are just our configured values).
    pub enhanced: bool,
    /// Our IRD.
    pub ird: u16,
    /// Our ORD.
    pub ord: u16,
    /// Peer-to-peer mode (an RTR message opens full operation).
    pub p2p: bool,
    /// The one RTR message type agreed in peer-to-peer mode.
    pub rtr: Option<RtrType>,
    /// The peer's ULP private data.
    pub peer_private_data: Vec<u8>,
}

impl Session {
    /// FPDU transmit settings for our direction.
    pub fn tx_config(&self) -> TxConfig {
        TxConfig {
            crc: self.crc,
            markers: self.markers_tx,
        }
    }

    /// FPDU receive settings for the peer's direction (start offset 0: the
    /// deframer must start at the first octet after the peer's MPA frame).
    pub fn rx_config(&self) -> RxConfig {
        RxConfig::new(self.crc, self.markers_rx)
    }

    /// An encoder for our direction, starting at the marker origin (the first
    /// octet after our MPA frame).
    pub fn encoder(&self) -> FpduEncoder {
        FpduEncoder::new(self.tx_config())
    }

    /// A deframer for the peer's direction, to be fed from the first octet after
    /// the peer's MPA frame.
    pub fn deframer(&self) -> Deframer {
        Deframer::new(self.rx_config())
    }

    /// Who sends the first FPDU: always the initiator (RFC 5044 §7.1.2).
    pub fn first_sender(&self) -> Role {
        Role::Initiator
    }

    /// Whether we must receive and validate one FPDU from the peer before we
    /// send any FPDU or marker (true for the responder, RFC 5044 §7.1.2).
    pub fn must_await_first_fpdu(&self) -> bool {
        self.role == Role::Responder
    }

    /// The RTR message we must send as our first FPDU (initiator in P2P mode).
    pub fn rtr_to_send(&self) -> Option<RtrType> {
        match self.role {
            Role::Initiator => self.rtr,
            Role::Responder => None,
        }
    }

    /// The RTR message we expect as the peer's first FPDU (responder in P2P mode).
    pub fn rtr_to_expect(&self) -> Option<RtrType> {
        match self.role {
            Role::Responder => self.rtr,
            Role::Initiator => None,
        }
    }
}

/// Why a responder rejected a Request.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Error)]
pub enum RejectReason {
    /// The frame is a Reply, not a Request.
    #[error("received an MPA Reply where a Request was expected")]
    NotARequest,
    /// We do not speak the requested revision.
    #[error("MPA revision {requested} requested, this side speaks revision {supported}")]
    UnsupportedRevision {
        /// Revision in the Request.
        requested: u8,
        /// Our revision (sent in the reject).
        supported: u8,
    },
    /// Rev 2 with H set, but fewer than four private data octets.
    #[error("enhanced (RFC 6581) Request without the 4-octet IRD/ORD data (PD_Length {pd_len})")]
    MissingEnhancedData {
        /// PD_Length of the Request.
        pd_len: usize,
    },
    /// The initiator set C = 1 and we cannot do CRC.
    #[error("peer requires MPA CRC, which this side has disabled")]
    CrcRefused,
    /// [`CrcPolicy::RequireStrict`]: the Request does not carry C = 1.
    #[error(
        "MPA Request has C = 0 but this side requires the initiator to ask for CRC (strict CRC)"
    )]
    CrcNotRequested,
    /// The initiator asked for markers and we cannot insert them.
    #[error("peer asks for MPA markers, which this side cannot send")]
    MarkersUnsupported,
    /// Peer-to-peer requested but no offered RTR type is acceptable.
    #[error("no matching RTR option: peer offers {offered:?}, this side accepts {supported:?}")]
    NoMatchingRtr {
        /// RTR types the initiator offered.
        offered: RtrSet,
        /// RTR types we accept (empty if we do not do peer-to-peer).
        supported: RtrSet,
    },
    /// The local configuration is unusable.
    #[error("local MPA configuration error: {0}")]
    LocalConfig(ConfigError),
}

impl RejectReason {
    /// The LLP error code that describes the reason.
    pub fn llp_error(&self) -> LlpErrorCode {
        match self {
            RejectReason::NoMatchingRtr { .. } => LlpErrorCode::NoMatchingRtr,
            RejectReason::LocalConfig(_) => LlpErrorCode::LocalCatastrophic,
            _ => LlpErrorCode::InvalidRequestReply,
        }
    }
}

/// The responder accepted: send `reply`, then run full operation with `session`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Accepted {
    /// The MPA Reply to send (R = 0).
    pub reply: ConnFrame,
    /// What was agreed.
    pub session: Session,
}

/// The responder rejects: send `reply` (R = 1), then close the TCP connection.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("MPA connection rejected: {reason}")]
pub struct Rejected {
    /// The MPA Reply to send (R = 1).
    pub reply: ConnFrame,
    /// Why.
    pub reason: RejectReason,
}

/// Why the initiator cannot complete the connection.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Error)]
pub enum NegotiationError {
    /// The frame is a Request, not a Reply.
    #[error("received an MPA Request where a Reply was expected")]
    NotAReply,
    /// The responder rejected the connection (R = 1).
    #[error("MPA connection rejected by the responder (revision {revision})")]
    Rejected {
        /// Revision in the reject (the responder's revision if it could not use ours).
        revision: u8,
        /// Enhanced data in the reject, if any (the IRD/ORD the responder could offer).
        enhanced: Option<EnhancedData>,
        /// The responder's ULP private data.
        private_data: Vec<u8>,
    },
    /// The Reply's revision was not offered.
    #[error("MPA Reply has revision {received}, but revision {sent} was requested")]
    UnexpectedRevision {
        /// Revision we sent.
        sent: u8,
        /// Revision received.
        received: u8,
    },
    /// We sent RFC 6581 enhanced data; the Reply lacks Rev 2, H or the data.
    #[error("enhanced MPA Request answered without enhanced data (Rev 2 + H expected)")]
    EnhancedNotEchoed,
    /// CRC is in use but this side has CRC disabled.
    #[error("responder requires MPA CRC, which this side has disabled")]
    CrcRefused,
    /// [`CrcPolicy::RequireStrict`]: the Reply does not carry C = 1.
    #[error(
        "MPA Reply has C = 0 but this side requires the responder to set the CRC flag (strict CRC)"
    )]
    CrcNotEchoed,
    /// The responder wants markers and we cannot insert them.
    #[error("responder asks for MPA markers, which this side cannot send")]
    MarkersUnsupported,
    /// The responder's ORD exceeds our IRD and we cannot raise it.
    #[error("insufficient IRD: responder ORD {peer_ord} exceeds our IRD {ird}")]
    InsufficientIrd {
        /// Our IRD.
        ird: u16,
        /// The responder's ORD.
        peer_ord: u16,
    },
    /// We asked for peer-to-peer and the Reply does not echo the P2P flag.
    #[error("peer-to-peer requested but the MPA Reply does not echo the P2P flag")]
    P2pNotEchoed,
    /// The Reply selects no RTR type, or one we did not offer.
    #[error("no matching RTR option: offered {offered:?}, responder chose {chosen:?}")]
    NoMatchingRtr {
        /// What we offered.
        offered: RtrSet,
        /// What the Reply selected.
        chosen: RtrSet,
    },
    /// The Reply selects more than one RTR type.
    #[error("MPA Reply selects {chosen:?}; exactly one RTR type is allowed")]
    MultipleRtr {
        /// What the Reply selected.
        chosen: RtrSet,
    },
    /// A zero-length Read RTR was chosen but our negotiated ORD is 0.
    #[error("responder chose a zero-length RDMA Read RTR but the negotiated ORD is 0")]
    ReadRtrWithoutOrd,
    /// The local configuration is unusable.
    #[error("local MPA configuration error: {0}")]
    Config(ConfigError),
}

impl NegotiationError {
    /// The LLP error code to send in a Terminate before closing, if any. A
    /// reject needs none: the initiator just closes the TCP connection.
    pub fn llp_error(&self) -> Option<LlpErrorCode> {
        Some(match self {
            NegotiationError::Rejected { .. } => return None,
            NegotiationError::InsufficientIrd { .. } => LlpErrorCode::InsufficientIrd,
            NegotiationError::P2pNotEchoed
            | NegotiationError::NoMatchingRtr { .. }
            | NegotiationError::ReadRtrWithoutOrd => LlpErrorCode::NoMatchingRtr,
            NegotiationError::Config(_) => LlpErrorCode::LocalCatastrophic,
            NegotiationError::NotAReply
            | NegotiationError::UnexpectedRevision { .. }
            | NegotiationError::EnhancedNotEchoed
            | NegotiationError::CrcRefused
            | NegotiationError::CrcNotEchoed
            | NegotiationError::MarkersUnsupported
            | NegotiationError::MultipleRtr { .. } => LlpErrorCode::InvalidRequestReply,
        })
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Role::Initiator => "initiator",
            Role::Responder => "responder",
        })
    }
}

/// The initiator's MPA Request for `local`.
pub fn request(local: &Config) -> Result<ConnFrame, ConfigError> {
    local.validate()?;
    let mut f = ConnFrame::new(FrameKind::Request, local.revision);
    f.markers = local.markers_rx;
    f.crc = local.crc.sends_c();
    if local.enhanced {
        f.enhanced_flag = true;
        f.enhanced = Some(EnhancedData {
            ird: local.ird,
            ord: local.ord,
            p2p: local.p2p,
            rtr: if local.p2p {
                local.rtr_supported
            } else {
                RtrSet::EMPTY
            },
        });
    }
    f.private_data = local.private_data.clone();
    Ok(f)
}

/// Whether `frame` carries usable RFC 6581 enhanced data.
fn enhanced_of(frame: &ConnFrame) -> Option<EnhancedData> {
    if frame.revision == 2 && frame.enhanced_flag {
        frame.enhanced
    } else {
        None
    }
}

/// Builds a rejecting Reply.
///
/// If the Request used RFC 6581 enhanced data and the Reply is revision 2, the
/// reject keeps H and the 4-octet enhanced block (as Linux siw does), filled
/// with the IRD/ORD this side could offer and no RTR selection.
fn reject_frame(
    local: &Config,
    request: &ConnFrame,
    revision: u8,
    private_data: &[u8],
) -> ConnFrame {
    let mut f = ConnFrame::new(FrameKind::Reply, revision);
    f.reject = true;
    f.crc = local.crc.sends_c();
    if let Some(req) = enhanced_of(request).filter(|_| revision == 2) {
        f.enhanced_flag = true;
        f.enhanced = Some(EnhancedData {
            ird: local.ird.min(IRD_ORD_MAX),
            ord: local.ord.min(req.ird).min(IRD_ORD_MAX),
            p2p: req.p2p && local.p2p,
            rtr: RtrSet::EMPTY,
        });
    }
    f.private_data = private_data.to_vec();
    f
}

/// The revision a responder answers `requested` with, or `None` if it cannot
/// interoperate.
fn reply_revision(local: &Config, requested: u8) -> Option<u8> {
    match requested {
        1 if local.revision == 1 || local.accept_rev1 => Some(1),
        2 if local.revision >= 2 => Some(2),
        _ => None,
    }
}

/// A Reply with R = 1 for a Request the ULP decided to refuse, carrying
/// `private_data` (at most 512 octets minus any enhanced data, or
/// [`ConnFrame::emit`] fails).
pub fn reject_reply(local: &Config, request: &ConnFrame, private_data: &[u8]) -> ConnFrame {
    let revision =
        reply_revision(local, request.revision).unwrap_or_else(|| local.revision.clamp(1, 2));
    reject_frame(local, request, revision, private_data)
}

/// The responder's decision on an MPA Request.
pub fn respond(local: &Config, request: &ConnFrame) -> Result<Accepted, Rejected> {
    let fallback_rev = local.revision.clamp(1, 2);
    let reject = |revision: u8, reason: RejectReason| Rejected {
        reply: reject_frame(local, request, revision, &[]),
        reason,
    };
    if let Err(e) = local.validate() {
        return Err(reject(fallback_rev, RejectReason::LocalConfig(e)));
    }
    if request.kind != FrameKind::Request {
        return Err(reject(fallback_rev, RejectReason::NotARequest));
    }

    // RFC 5044 §7.1.1 Rev.
    let Some(revision) = reply_revision(local, request.revision) else {
        return Err(reject(
            local.revision,
            RejectReason::UnsupportedRevision {
                requested: request.revision,
                supported: local.revision,
            },
        ));
    };

    // RFC 6581: enhanced data present with Rev 2 + H.
    let req_enh = if revision == 2 && request.enhanced_flag {
        match request.enhanced {
            Some(e) => Some(e),
            None => {
                return Err(reject(
                    revision,
                    RejectReason::MissingEnhancedData {
                        pd_len: request.pd_length(),
                    },
                ));
            }
        }
    } else {
        None
    };

    // RFC 5044 §7.1.1 C: either side's C forces CRC.
    let reply_crc = match local.crc {
        CrcPolicy::Off if request.crc => {
            return Err(reject(revision, RejectReason::CrcRefused));
        }
        CrcPolicy::Off => false,
        CrcPolicy::Accept => request.crc,
        CrcPolicy::Require => true,
        CrcPolicy::RequireStrict if !request.crc => {
            return Err(reject(revision, RejectReason::CrcNotRequested));
        }
        CrcPolicy::RequireStrict => true,
    };

    // RFC 5044 §7.1.1 M: the initiator's M asks us to send markers.
    if request.markers && !local.markers_tx {
        return Err(reject(revision, RejectReason::MarkersUnsupported));
    }

    // RFC 6581 IRD/ORD and RTR.
    let mut ird = local.ird;
    let mut ord = local.ord;
    let mut p2p = false;
    let mut rtr = None;
    let reply_enh = match req_enh {
        None => None,
        Some(req) => {
            let ceiling = local.ird_ceiling();
            if local.relaxed_ird_ord && ird < req.ord {
                ird = req.ord.min(ceiling);
            }
            ord = ord.min(req.ird);
            if req.p2p {
                let supported = if local.p2p {
                    local.rtr_supported
                } else {
                    RtrSet::EMPTY
                };
                let mut feasible = req.rtr.intersection(&supported);
                if req.ord == 0 || ceiling == 0 {
                    feasible.remove(RtrType::Read);
                }
                let chosen = local
                    .rtr_preferred
                    .filter(|t| feasible.contains(*t))
                    .or_else(|| feasible.iter().next());
                let Some(t) = chosen else {
                    return Err(reject(
                        revision,
                        RejectReason::NoMatchingRtr {
                            offered: req.rtr,
                            supported,
                        },
                    ));
                };
                if t == RtrType::Read && ird == 0 {
                    ird = 1;
                }
                p2p = true;
                rtr = Some(t);
            }
            Some(EnhancedData {
                ird,
                ord,
                p2p,
                rtr: rtr.map_or(RtrSet::EMPTY, RtrSet::only),
            })
        }
    };

    let room = local.private_data_room(reply_enh.is_some());
    if local.private_data.len() > room {
        return Err(reject(
            revision,
            RejectReason::LocalConfig(ConfigError::PrivateDataTooLong {
                len: local.private_data.len(),
                max: room,
            }),
        ));
    }

    let mut reply = ConnFrame::new(FrameKind::Reply, revision);
    reply.markers = local.markers_rx;
    reply.crc = reply_crc;
    reply.enhanced_flag = reply_enh.is_some();
    reply.enhanced = reply_enh;
    reply.private_data = local.private_data.clone();

    let session = Session {
        role: Role::Responder,
        revision,
        crc: request.crc || reply_crc,
        markers_tx: request.markers,
        markers_rx: local.markers_rx,
        enhanced: reply_enh.is_some(),
        ird,
        ord,
        p2p,
        rtr,
        peer_private_data: request.private_data.clone(),
    };
    Ok(Accepted { reply, session })
}

/// The initiator's view: the session agreed by the Request it `sent` and the
/// `reply` it received.
pub fn complete(
    local: &Config,
    sent: &ConnFrame,
    reply: &ConnFrame,
) -> Result<Session, NegotiationError> {
    local.validate().map_err(NegotiationError::Config)?;
    if reply.kind != FrameKind::Reply {
        return Err(NegotiationError::NotAReply);
    }
    if reply.reject {
        return Err(NegotiationError::Rejected {
            revision: reply.revision,
            enhanced: enhanced_of(reply),
            private_data: reply.private_data.clone(),
        });
    }
    if reply.revision == 0 || reply.revision > sent.revision {
        return Err(NegotiationError::UnexpectedRevision {
            sent: sent.revision,
            received: reply.revision,
        });
    }

    let crc = sent.crc || reply.crc;
    if crc && local.crc == CrcPolicy::Off {
        return Err(NegotiationError::CrcRefused);
    }
    if local.crc == CrcPolicy::RequireStrict && !reply.crc {
        return Err(NegotiationError::CrcNotEchoed);
    }
    if reply.markers && !local.markers_tx {
        return Err(NegotiationError::MarkersUnsupported);
    }

    let mut session = Session {
        role: Role::Initiator,
        revision: reply.revision,
        crc,
        markers_tx: reply.markers,
        markers_rx: sent.markers,
        enhanced: false,
        ird: local.ird,
        ord: local.ord,
        p2p: false,
        rtr: None,
        peer_private_data: reply.private_data.clone(),
    };

    let Some(ours) = enhanced_of(sent) else {
        // Not enhanced: any enhanced block the responder added anyway is ignored,
        // but its octets are not the ULP's.
        return Ok(session);
    };
    let Some(theirs) = enhanced_of(reply) else {
        return Err(NegotiationError::EnhancedNotEchoed);
    };
    session.enhanced = true;
    session.ord = ours.ord.min(theirs.ird);
    session.ird = ours.ird;
    if theirs.ord > ours.ird {
        let ceiling = if local.relaxed_ird_ord {
            ours.ird.max(local.ird_max)
        } else {
            ours.ird
        };
        if theirs.ord > ceiling {
            return Err(NegotiationError::InsufficientIrd {
                ird: ours.ird,
                peer_ord: theirs.ord,
            });
        }
        session.ird = theirs.ord;
    }

    if ours.p2p {
        if !theirs.p2p {
            return Err(NegotiationError::P2pNotEchoed);
        }
        let chosen = theirs.rtr;
        if chosen.len() > 1 {
            return Err(NegotiationError::MultipleRtr { chosen });
        }
        let t = chosen.single().filter(|t| ours.rtr.contains(*t)).ok_or(
            NegotiationError::NoMatchingRtr {
                offered: ours.rtr,
                chosen,
            },
        )?;
        if t == RtrType::Read && session.ord == 0 {
            return Err(NegotiationError::ReadRtrWithoutOrd);
        }
        session.p2p = true;
        session.rtr = Some(t);
    }
    Ok(session)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rev1() -> Config {
        Config {
            revision: 1,
            enhanced: false,
            ..Config::default()
        }
    }

    /// The default configuration with IRD `ird` and ORD `ord`.
    fn ird_ord(ird: u16, ord: u16) -> Config {
        Config {
            ird,
            ord,
            ..Config::default()
        }
    }

    fn p2p(rtr: RtrSet) -> Config {
        Config {
            p2p: true,
            rtr_supported: rtr,
            ..Config::default()
        }
    }

    /// Runs both halves: initiator `a` requests, responder `b` answers, initiator completes.
    fn handshake(a: &Config, b: &Config) -> (ConnFrame, Result<(Session, Session), String>) {
        let req = request(a).expect("valid initiator config");
        match respond(b, &req) {
            Err(r) => (r.reply, Err(format!("{:?}", r.reason))),
            Ok(acc) => {
                let ini = complete(a, &req, &acc.reply).map_err(|e| format!("{e:?}"));
                (acc.reply, ini.map(|s| (s, acc.session)))
            }
        }
    }

    /// Siw's captured Request comes out of the default configuration byte for byte.
    #[test]
    fn rfc6581_default_request_matches_siw() {
        let bytes = request(&Config::default())
            .expect("valid")
            .to_bytes()
            .expect("emit");
        let siw = [
            0x4d, 0x50, 0x41, 0x20, 0x49, 0x44, 0x20, 0x52, 0x65, 0x71, 0x20, 0x46, 0x72, 0x61,
            0x6d, 0x65, 0x10, 0x02, 0x00, 0x04, 0x00, 0x01, 0x00, 0x01,
        ];
        assert_eq!(bytes, siw);
    }

    /// Siw as responder to a Request with IRD = ORD = 16 (captured) replies
    /// `... 10 02 00 04 00 10 00 10`; a responder configured with 16/16 produces
    /// the same octets.
    #[test]
    fn rfc6581_reply_matches_siw_capture() {
        let host_req = ConnFrame::parse(&[
            0x4d, 0x50, 0x41, 0x20, 0x49, 0x44, 0x20, 0x52, 0x65, 0x71, 0x20, 0x46, 0x72, 0x61,
            0x6d, 0x65, 0x10, 0x02, 0x00, 0x04, 0x00, 0x10, 0x00, 0x10,
        ])
        .expect("valid")
        .0;
        let siw_reply = [
            0x4d, 0x50, 0x41, 0x20, 0x49, 0x44, 0x20, 0x52, 0x65, 0x70, 0x20, 0x46, 0x72, 0x61,
            0x6d, 0x65, 0x10, 0x02, 0x00, 0x04, 0x00, 0x10, 0x00, 0x10,
        ];
        let local = Config {
            ird_max: 16,
            ..ird_ord(16, 16)
        };
        let acc = respond(&local, &host_req).expect("accepted");
        assert_eq!(acc.reply.to_bytes().expect("emit"), siw_reply);
        assert_eq!((acc.session.ird, acc.session.ord), (16, 16));
    }

    /// RFC 5044 §7.1.1 (C): CRC is used in both directions when either frame has
    /// C = 1, and not at all when neither has.
    #[test]
    fn rfc5044_7_1_1_crc_if_either_side_asks() {
        use CrcPolicy::*;
        for (ini, resp, expect_crc, reply_c) in [
            (Accept, Accept, false, false),
            (Require, Accept, true, true),
            (Accept, Require, true, true),
            (Require, Require, true, true),
            (Off, Accept, false, false),
            (Require, Off, true, false),
        ] {
            let a = Config {
                crc: ini,
                ..Config::default()
            };
            let b = Config {
                crc: resp,
                ..Config::default()
            };
            let (reply, res) = handshake(&a, &b);
            if ini == Require && resp == Off {
                assert!(res.expect_err("refused").contains("CrcRefused"));
                assert!(reply.reject);
                continue;
            }
            let (si, sr) = res.expect("agreed");
            assert_eq!(reply.crc, reply_c, "{ini:?}/{resp:?}");
            assert_eq!(si.crc, expect_crc, "{ini:?}/{resp:?}");
            assert_eq!(sr.crc, expect_crc);
            assert_eq!(si.tx_config().crc, expect_crc);
            assert_eq!(sr.rx_config().crc, expect_crc);
        }
        // An initiator that cannot do CRC must refuse a Reply with C = 1.
        let a = Config {
            crc: Off,
            ..Config::default()
        };
        let b = Config {
            crc: Require,
            ..Config::default()
        };
        let (_, res) = handshake(&a, &b);
        assert!(res.expect_err("refused").contains("CrcRefused"));
    }

    /// RFC 5044 §7.1.1 (M): markers are decided per direction — a frame's M asks
    /// the other side to insert markers.
    #[test]
    fn rfc5044_7_1_1_markers_per_direction() {
        let a = Config {
            markers_rx: true,
            markers_tx: false,
            ..Config::default()
        };
        let b = Config {
            markers_tx: true,
            markers_rx: false,
            ..Config::default()
        };
        let (reply, res) = handshake(&a, &b);
        let (si, sr) = res.expect("agreed");
        assert!(!reply.markers);
        assert!(si.markers_rx && !si.markers_tx);
        assert!(sr.markers_tx && !sr.markers_rx);
        assert!(sr.tx_config().markers && !si.tx_config().markers);
        assert!(si.rx_config().markers);

        // Responder wants markers from the initiator, which can send them.
        let a = Config {
            markers_tx: true,
            ..Config::default()
        };
        let b = Config {
            markers_rx: true,
            ..Config::default()
        };
        let (reply, res) = handshake(&a, &b);
        let (si, sr) = res.expect("agreed");
        assert!(reply.markers);
        assert!(si.markers_tx && !si.markers_rx);
        assert!(sr.markers_rx && !sr.markers_tx);
    }

    /// RFC 5044 §7.1.1 (M): a side that cannot insert markers refuses a peer
    /// that asks for them (as Linux siw does).
    #[test]
    fn rfc5044_7_1_1_markers_refused_when_unsupported() {
        let a = Config {
            markers_rx: true,
            ..Config::default()
        };
        let (reply, res) = handshake(&a, &Config::default());
        assert!(res.expect_err("rejected").contains("MarkersUnsupported"));
        assert!(reply.reject && !reply.markers);

        let b = Config {
            markers_rx: true,
            ..Config::default()
        };
        let (_, res) = handshake(&Config::default(), &b);
        assert!(
            res.expect_err("initiator refuses")
                .contains("MarkersUnsupported")
        );
    }

    /// RFC 5044 §7.1.1 (R): a Reply with R = 1 ends the attempt; the initiator
    /// gets the responder's private data and no Terminate is due.
    #[test]
    fn rfc5044_7_1_1_reject_carries_private_data() {
        let local = Config::default();
        let req = request(&local).expect("valid");
        let rej = reject_reply(&Config::default(), &req, b"go away");
        assert!(rej.reject);
        assert_eq!(rej.kind, FrameKind::Reply);
        let err = complete(&local, &req, &rej).expect_err("rejected");
        assert_eq!(err.llp_error(), None);
        match err {
            NegotiationError::Rejected {
                revision,
                private_data,
                enhanced,
            } => {
                assert_eq!(revision, 2);
                assert_eq!(private_data, b"go away");
                assert!(enhanced.is_some());
            }
            other => panic!("unexpected {other:?}"),
        }
        // An accepting Reply never has R set.
        let acc = respond(&Config::default(), &req).expect("accepted");
        assert!(!acc.reply.reject);
    }

    /// RFC 5044 §7.1.1 (R): R is sent as zero in a Request and not checked on
    /// reception there — a Request with R = 1 is answered like any other.
    #[test]
    fn rfc5044_7_1_1_reject_bit_in_request_not_checked() {
        let mut req = request(&Config::default()).expect("valid");
        assert!(!req.reject);
        assert_eq!(req.to_bytes().expect("emit")[16] & 0x20, 0);
        req.reject = true;
        let acc = respond(&Config::default(), &req).expect("R ignored in a Request");
        assert!(!acc.reply.reject);
        assert_eq!(acc.session.role, Role::Responder);
    }

    /// RFC 6581 (responder side): a revision 2 responder honours an enhanced
    /// Request (Rev 2, H, IRD/ORD data) even when it would not send enhanced
    /// data in its own Requests; it answers with Rev 2, H and its IRD/ORD.
    #[test]
    fn rfc6581_responder_honours_enhanced_request() {
        let responder = Config {
            enhanced: false,
            ird: 3,
            ord: 2,
            ..Config::default()
        };
        let acc =
            respond(&responder, &request(&Config::default()).expect("valid")).expect("accepted");
        assert_eq!(acc.reply.revision, 2);
        assert!(acc.reply.enhanced_flag);
        let e = acc.reply.enhanced.expect("enhanced data echoed");
        // ORD lowered to the initiator's IRD (1); IRD kept.
        assert_eq!((e.ird, e.ord), (3, 1));
        assert!(acc.session.enhanced);
    }

    /// RFC 6581 (peer-to-peer): a Request that asks for peer-to-peer mode but
    /// offers no RTR type cannot be satisfied; the responder rejects it with
    /// "no matching RTR option" (LLP code 7) rather than inventing a type.
    #[test]
    fn rfc6581_p2p_request_without_rtr_types_rejected() {
        let mut req = request(&p2p(RtrSet::ALL)).expect("valid");
        if let Some(e) = req.enhanced.as_mut() {
            e.rtr = RtrSet::EMPTY;
        }
        let rej = respond(&p2p(RtrSet::ALL), &req).expect_err("nothing offered");
        assert_eq!(
            rej.reason,
            RejectReason::NoMatchingRtr {
                offered: RtrSet::EMPTY,
                supported: RtrSet::ALL
            }
        );
        assert_eq!(rej.reason.llp_error(), LlpErrorCode::NoMatchingRtr);
        assert!(rej.reply.reject);
    }

    /// RFC 5044 §7.1.1 (Rev): a revision 2 responder answers a revision 1 Request
    /// with revision 1 and no enhanced data; with `accept_rev1` off it rejects.
    #[test]
    fn rfc5044_7_1_1_rev1_request_to_rev2_responder() {
        let (reply, res) = handshake(&rev1(), &Config::default());
        let (si, sr) = res.expect("agreed");
        assert_eq!(reply.revision, 1);
        assert!(!reply.enhanced_flag && reply.enhanced.is_none());
        assert_eq!(reply.pd_length(), 0);
        assert_eq!((si.revision, sr.revision), (1, 1));
        assert!(!si.enhanced && !sr.enhanced);

        let strict = Config {
            accept_rev1: false,
            ..Config::default()
        };
        let (reply, res) = handshake(&rev1(), &strict);
        assert!(res.expect_err("rejected").contains("UnsupportedRevision"));
        assert!(reply.reject);
        assert_eq!(reply.revision, 2);
    }

    /// RFC 5044 §7.1.1 (Rev) / RFC 6581 interoperation: a revision 1 responder
    /// cannot interoperate with a revision 2 Request and rejects it with its own
    /// revision, so the initiator can retry with revision 1.
    #[test]
    fn rfc6581_rev2_request_to_rev1_responder_is_rejected_with_rev1() {
        let init = Config::default();
        let req = request(&init).expect("valid");
        let rej = respond(&rev1(), &req).expect_err("rejected");
        assert_eq!(
            rej.reason,
            RejectReason::UnsupportedRevision {
                requested: 2,
                supported: 1
            }
        );
        assert_eq!(rej.reply.revision, 1);
        assert!(rej.reply.reject && rej.reply.enhanced.is_none());
        match complete(&init, &req, &rej.reply) {
            Err(NegotiationError::Rejected { revision: 1, .. }) => {}
            other => panic!("unexpected {other:?}"),
        }
        // Retry with revision 1 succeeds.
        let (_, res) = handshake(&rev1(), &rev1());
        assert!(res.is_ok());
    }

    /// RFC 5044 §7.1.1 (Rev): unknown revisions (0, 3, 255) are rejected; an
    /// initiator refuses a Reply whose revision is above what it requested.
    #[test]
    fn rfc5044_7_1_1_unknown_revisions() {
        let mut req = request(&Config::default()).expect("valid");
        for rev in [0u8, 3, 255] {
            req.revision = rev;
            let rej = respond(&Config::default(), &req).expect_err("rejected");
            assert!(matches!(
                rej.reason,
                RejectReason::UnsupportedRevision { requested, supported: 2 } if requested == rev
            ));
            assert_eq!(rej.reason.llp_error(), LlpErrorCode::InvalidRequestReply);
        }
        let sent = request(&rev1()).expect("valid");
        let mut reply = respond(&rev1(), &sent).expect("accepted").reply;
        reply.revision = 2;
        assert_eq!(
            complete(&rev1(), &sent, &reply),
            Err(NegotiationError::UnexpectedRevision {
                sent: 1,
                received: 2
            })
        );
    }

    /// RFC 5044 §7.1.1 (Res): reserved bits are sent as zero and ignored on receipt.
    #[test]
    fn rfc5044_7_1_1_reserved_bits_ignored() {
        let mut req = request(&Config::default()).expect("valid");
        assert_eq!(req.reserved, 0);
        req.reserved = 0x0f;
        let acc = respond(&Config::default(), &req).expect("accepted");
        assert_eq!(acc.reply.reserved, 0);
        let mut reply = acc.reply;
        reply.reserved = 0x08;
        assert!(complete(&Config::default(), &req, &reply).is_ok());
    }

    /// RFC 5044 §7.1.1: a Reply where a Request is expected (and vice versa) is an error.
    #[test]
    fn rfc5044_7_1_1_frame_kind_checked() {
        let req = request(&Config::default()).expect("valid");
        let rej = respond(&Config::default(), &ConnFrame::new(FrameKind::Reply, 2))
            .expect_err("not a request");
        assert_eq!(rej.reason, RejectReason::NotARequest);
        assert_eq!(
            complete(&Config::default(), &req, &req),
            Err(NegotiationError::NotAReply)
        );
    }

    /// RFC 5044 §7.1.2: the initiator sends the first FPDU; the responder must
    /// receive and validate one before sending anything.
    #[test]
    fn rfc5044_7_1_2_initiator_sends_first() {
        let (_, res) = handshake(&Config::default(), &Config::default());
        let (si, sr) = res.expect("agreed");
        assert_eq!(si.role, Role::Initiator);
        assert_eq!(sr.role, Role::Responder);
        assert_eq!(si.first_sender(), Role::Initiator);
        assert_eq!(sr.first_sender(), Role::Initiator);
        assert!(!si.must_await_first_fpdu());
        assert!(sr.must_await_first_fpdu());
        assert_eq!(si.rtr_to_send(), None);
    }

    /// RFC 5044 §7.1.4: private data is handed to the peer; with enhanced data
    /// the ULP gets 508 octets, without it 512.
    #[test]
    fn rfc5044_7_1_4_private_data_exchange_and_limits() {
        let a = Config {
            private_data: b"hello responder".to_vec(),
            ..Config::default()
        };
        let b = Config {
            private_data: b"hello initiator".to_vec(),
            ..Config::default()
        };
        let (_, res) = handshake(&a, &b);
        let (si, sr) = res.expect("agreed");
        assert_eq!(si.peer_private_data, b"hello initiator");
        assert_eq!(sr.peer_private_data, b"hello responder");

        let too_long = Config {
            private_data: vec![0; 509],
            ..Config::default()
        };
        assert_eq!(
            request(&too_long),
            Err(ConfigError::PrivateDataTooLong { len: 509, max: 508 })
        );
        let ok_rev1 = Config {
            private_data: vec![0; 512],
            ..rev1()
        };
        assert_eq!(
            request(&ok_rev1)
                .expect("valid")
                .to_bytes()
                .expect("emit")
                .len(),
            532
        );
        // A responder whose 509-octet private data only fits without enhanced data.
        let resp = Config {
            private_data: vec![0; 509],
            enhanced: false,
            ..Config::default()
        };
        assert!(respond(&resp, &request(&rev1()).expect("valid")).is_ok());
        let rej =
            respond(&resp, &request(&Config::default()).expect("valid")).expect_err("does not fit");
        assert_eq!(rej.reason.llp_error(), LlpErrorCode::LocalCatastrophic);
    }

    /// RFC 6581 (IRD/ORD negotiation): the responder echoes Rev 2 and H with its own IRD/ORD; its ORD
    /// is lowered to the initiator's IRD, and the initiator lowers its ORD to the
    /// responder's IRD.
    #[test]
    fn rfc6581_ird_ord_lowering() {
        let a = ird_ord(4, 8);
        let b = ird_ord(2, 16);
        let (reply, res) = handshake(&a, &b);
        let (si, sr) = res.expect("agreed");
        assert!(reply.enhanced_flag);
        let e = reply.enhanced.expect("enhanced data");
        assert_eq!((e.ird, e.ord), (2, 4));
        assert_eq!((sr.ird, sr.ord), (2, 4));
        assert_eq!((si.ird, si.ord), (4, 2));
        assert!(si.enhanced && sr.enhanced);
    }

    /// RFC 6581 (IRD/ORD negotiation): an initiator whose IRD is below the responder's ORD fails with
    /// "insufficient IRD" (LLP code 6) unless it may raise its IRD.
    #[test]
    fn rfc6581_insufficient_ird() {
        let a = ird_ord(1, 1);
        let req = request(&a).expect("valid");
        let mut reply = respond(&Config::default(), &req).expect("ok").reply;
        if let Some(e) = reply.enhanced.as_mut() {
            e.ord = 8;
        }
        let err = complete(&a, &req, &reply).expect_err("insufficient");
        assert_eq!(
            err,
            NegotiationError::InsufficientIrd {
                ird: 1,
                peer_ord: 8
            }
        );
        assert_eq!(err.llp_error(), Some(LlpErrorCode::InsufficientIrd));
        assert_eq!(LlpErrorCode::InsufficientIrd.code(), 6);

        let relaxed = Config {
            relaxed_ird_ord: true,
            ird_max: 8,
            ..a.clone()
        };
        let s = complete(&relaxed, &req, &reply).expect("raised");
        assert_eq!(s.ird, 8);
        let not_enough = Config {
            relaxed_ird_ord: true,
            ird_max: 7,
            ..a
        };
        assert!(complete(&not_enough, &req, &reply).is_err());
    }

    /// RFC 6581 (relaxed responder, like Linux siw): the responder raises its IRD
    /// up to its maximum to meet the initiator's ORD; strict, it keeps its own.
    #[test]
    fn rfc6581_relaxed_responder_raises_ird() {
        let a = ird_ord(4, 8);
        let relaxed = Config {
            ird: 2,
            ird_max: 6,
            relaxed_ird_ord: true,
            ..Config::default()
        };
        let (reply, res) = handshake(&a, &relaxed);
        assert_eq!(reply.enhanced.expect("enhanced").ird, 6);
        let (si, _) = res.expect("agreed");
        assert_eq!(si.ord, 6);
        let strict = Config {
            ird: 2,
            ird_max: 6,
            ..Config::default()
        };
        let (reply, _) = handshake(&a, &strict);
        assert_eq!(reply.enhanced.expect("enhanced").ird, 2);
    }

    /// RFC 6581 (peer-to-peer): a responder echoes the P2P flag and selects exactly one of
    /// the offered RTR types, honouring its preference.
    #[test]
    fn rfc6581_p2p_echo_and_single_rtr_choice() {
        let a = p2p(RtrSet::ALL);
        let b = p2p(RtrSet::ALL);
        let (reply, res) = handshake(&a, &b);
        let e = reply.enhanced.expect("enhanced");
        assert!(e.p2p);
        assert_eq!(e.rtr.len(), 1);
        assert_eq!(e.rtr, RtrSet::only(RtrType::Write));
        let (si, sr) = res.expect("agreed");
        assert!(si.p2p && sr.p2p);
        assert_eq!(si.rtr_to_send(), Some(RtrType::Write));
        assert_eq!(sr.rtr_to_expect(), Some(RtrType::Write));
        assert_eq!(si.rtr_to_expect(), None);
        assert_eq!(sr.rtr_to_send(), None);

        let b = Config {
            rtr_preferred: Some(RtrType::Send),
            ..p2p(RtrSet::ALL)
        };
        let (reply, res) = handshake(&a, &b);
        assert_eq!(
            reply.enhanced.expect("enhanced").rtr,
            RtrSet::only(RtrType::Send)
        );
        assert_eq!(res.expect("agreed").0.rtr, Some(RtrType::Send));

        // Only what both support is eligible.
        let a = p2p(RtrSet {
            send: true,
            write: false,
            read: true,
        });
        let b = p2p(RtrSet {
            send: false,
            write: true,
            read: true,
        });
        let (reply, _) = handshake(&a, &b);
        assert_eq!(
            reply.enhanced.expect("enhanced").rtr,
            RtrSet::only(RtrType::Read)
        );
    }

    /// RFC 6581 (peer-to-peer, RTR): no common RTR type (or no P2P support) makes the responder
    /// reject with "no matching RTR option" (LLP code 7).
    #[test]
    fn rfc6581_no_matching_rtr_rejects() {
        let a = p2p(RtrSet::only(RtrType::Send));
        let b = p2p(RtrSet {
            send: false,
            write: true,
            read: true,
        });
        let req = request(&a).expect("valid");
        let rej = respond(&b, &req).expect_err("no match");
        assert!(matches!(rej.reason, RejectReason::NoMatchingRtr { .. }));
        assert_eq!(rej.reason.llp_error().code(), 7);
        assert!(rej.reply.reject && rej.reply.enhanced_flag);
        let rej = respond(&Config::default(), &req).expect_err("p2p unsupported");
        assert_eq!(
            rej.reason,
            RejectReason::NoMatchingRtr {
                offered: RtrSet::only(RtrType::Send),
                supported: RtrSet::EMPTY
            }
        );
    }

    /// RFC 6581 (peer-to-peer, RTR): the initiator checks the Reply's RTR selection — P2P must be
    /// echoed and exactly one offered type selected.
    #[test]
    fn rfc6581_initiator_checks_rtr_selection() {
        let a = p2p(RtrSet {
            send: false,
            write: true,
            read: true,
        });
        let req = request(&a).expect("valid");
        let good = respond(&p2p(RtrSet::ALL), &req).expect("accepted").reply;
        let with = |f: &dyn Fn(&mut EnhancedData)| {
            let mut r = good.clone();
            if let Some(e) = r.enhanced.as_mut() {
                f(e);
            }
            complete(&a, &req, &r)
        };
        assert!(with(&|_| {}).is_ok());
        assert_eq!(
            with(&|e| e.p2p = false),
            Err(NegotiationError::P2pNotEchoed)
        );
        let err = with(&|e| e.rtr = RtrSet::EMPTY).expect_err("none");
        assert!(matches!(err, NegotiationError::NoMatchingRtr { .. }));
        assert_eq!(err.llp_error(), Some(LlpErrorCode::NoMatchingRtr));
        assert!(matches!(
            with(&|e| e.rtr = RtrSet::only(RtrType::Send)),
            Err(NegotiationError::NoMatchingRtr { .. })
        ));
        assert!(matches!(
            with(&|e| e.rtr = RtrSet {
                send: false,
                write: true,
                read: true
            }),
            Err(NegotiationError::MultipleRtr { .. })
        ));
    }

    /// RFC 6581 (RTR, zero-length RDMA Read): a zero-length Read RTR needs one Read credit; the responder does
    /// not pick it when the initiator's ORD is 0, and the initiator refuses it
    /// when its negotiated ORD is 0.
    #[test]
    fn rfc6581_read_rtr_needs_ord() {
        let a = Config {
            ord: 0,
            ..p2p(RtrSet {
                send: true,
                write: false,
                read: true,
            })
        };
        let b = Config {
            rtr_preferred: Some(RtrType::Read),
            ..p2p(RtrSet::ALL)
        };
        let (reply, res) = handshake(&a, &b);
        assert_eq!(
            reply.enhanced.expect("enhanced").rtr,
            RtrSet::only(RtrType::Send)
        );
        assert_eq!(res.expect("agreed").0.rtr, Some(RtrType::Send));

        let a = p2p(RtrSet::only(RtrType::Read));
        let req = request(&a).expect("valid");
        let mut reply = respond(&p2p(RtrSet::ALL), &req).expect("accepted").reply;
        if let Some(e) = reply.enhanced.as_mut() {
            e.ird = 0;
        }
        assert_eq!(
            complete(&a, &req, &reply),
            Err(NegotiationError::ReadRtrWithoutOrd)
        );
    }

    /// RFC 6581 (enhanced Request) / RFC 5044 §8 (code 4): a Rev 2 Request with H set but without the 4-octet enhanced
    /// data is invalid and rejected (LLP code 4).
    #[test]
    fn rfc6581_missing_enhanced_data_rejected() {
        let mut req = request(&Config::default()).expect("valid");
        req.enhanced = None;
        req.private_data = vec![0, 1];
        let rej = respond(&Config::default(), &req).expect_err("invalid");
        assert_eq!(rej.reason, RejectReason::MissingEnhancedData { pd_len: 2 });
        assert_eq!(rej.reason.llp_error(), LlpErrorCode::InvalidRequestReply);
        assert!(rej.reply.enhanced.is_none());
    }

    /// RFC 6581 (enhanced Reply): an initiator that sent enhanced data needs Rev 2 + H + data back.
    #[test]
    fn rfc6581_enhanced_must_be_echoed() {
        let req = request(&Config::default()).expect("valid");
        let mut reply = respond(&Config::default(), &req).expect("ok").reply;
        reply.enhanced_flag = false;
        reply.enhanced = None;
        assert_eq!(
            complete(&Config::default(), &req, &reply),
            Err(NegotiationError::EnhancedNotEchoed)
        );
        let mut reply = respond(&rev1(), &request(&rev1()).expect("valid"))
            .expect("ok")
            .reply;
        reply.revision = 1;
        assert_eq!(
            complete(&Config::default(), &req, &reply),
            Err(NegotiationError::EnhancedNotEchoed)
        );
    }

    /// RFC 6581 (enhanced Reply) / RFC 5044 §7.1.1 (R): a Reject to an enhanced Request keeps the enhanced layout with
    /// the IRD/ORD the responder could offer and no RTR selection.
    #[test]
    fn rfc6581_reject_carries_ird_ord() {
        let a = Config {
            crc: CrcPolicy::Require,
            ..ird_ord(3, 5)
        };
        let b = Config {
            crc: CrcPolicy::Off,
            ..ird_ord(7, 9)
        };
        let rej = respond(&b, &request(&a).expect("valid")).expect_err("crc refused");
        assert_eq!(rej.reason, RejectReason::CrcRefused);
        let e = rej.reply.enhanced.expect("enhanced");
        assert_eq!((e.ird, e.ord), (7, 3));
        assert!(rej.reply.enhanced_flag && rej.reply.revision == 2);
        assert!(e.rtr.is_empty());
        assert!(rej.reply.to_bytes().is_ok());
    }

    /// RFC 5044 §7.1.1 (Rev, C) interop with a strict revision-1, CRC-required
    /// peer (the Chelsio T404 profile): our default revision-2 Request is
    /// rejected with Rev 1, a revision-1 retry succeeds with CRC in both
    /// directions, and the session's encoder/deframer talk to each other.
    #[test]
    fn rfc5044_7_1_1_rev1_crc_required_peer() {
        let t404 = Config {
            revision: 1,
            enhanced: false,
            crc: CrcPolicy::Require,
            ..Config::default()
        };
        let first = request(&Config::default()).expect("valid");
        let rej = respond(&t404, &first).expect_err("rev 2 refused");
        assert_eq!(rej.reply.revision, 1);
        assert!(rej.reply.crc);
        let retry_cfg = rev1();
        let (reply, res) = handshake(&retry_cfg, &t404);
        assert!(reply.crc && reply.revision == 1);
        let (si, sr) = res.expect("agreed");
        assert!(si.crc && sr.crc);
        let mut wire = Vec::new();
        si.encoder().encode(&[b"ping"], &mut wire).expect("encode");
        let mut d = sr.deframer();
        d.push(&wire);
        let f = d.next().expect("one FPDU").expect("good CRC");
        assert_eq!(f.ulpdu, b"ping");
        assert_eq!(f.crc, crate::fpdu::CrcStatus::Good);
    }

    /// Invalid local configurations are reported, not sent.
    #[test]
    fn config_validation() {
        let bad = [
            (
                Config {
                    revision: 3,
                    ..Config::default()
                },
                ConfigError::UnsupportedRevision(3),
            ),
            (
                Config {
                    enhanced: true,
                    ..rev1()
                },
                ConfigError::EnhancedNeedsRevision2,
            ),
            (
                Config {
                    p2p: true,
                    enhanced: false,
                    ..Config::default()
                },
                ConfigError::P2pNeedsEnhanced,
            ),
            (
                Config {
                    ird: 0x4000,
                    ..Config::default()
                },
                ConfigError::IrdOrdTooLarge {
                    field: "IRD",
                    value: 0x4000,
                },
            ),
            (p2p(RtrSet::EMPTY), ConfigError::NoRtrSupported),
            (
                Config {
                    rtr_preferred: Some(RtrType::Send),
                    ..Config::default()
                },
                ConfigError::PreferredRtrUnsupported(RtrType::Send),
            ),
        ];
        for (cfg, err) in bad {
            assert_eq!(request(&cfg), Err(err.clone()));
            let req = request(&Config::default()).expect("valid");
            let rej = respond(&cfg, &req).expect_err("bad config");
            assert_eq!(rej.reason, RejectReason::LocalConfig(err.clone()));
            let reply = respond(&Config::default(), &req).expect("ok").reply;
            assert_eq!(
                complete(&cfg, &req, &reply),
                Err(NegotiationError::Config(err))
            );
        }
    }
}
