//! DDP error numbers (RFC 5041 §7.2) and the errors this crate reports.
//!
//! Two kinds of type live here:
//!
//! * the *codes* — [`TaggedCode`], [`UntaggedCode`] and [`DdpCode`] — which are exactly the
//!   Error Type / Error Code pairs of RFC 5041 §7.2 (and the IANA "DDP Errors" registry of
//!   RFC 6580 §3.2), each with its numeric value and the RFC's name;
//! * [`DdpError`], the error values returned by parsing and by the receive-side checks. Each
//!   carries the context a user needs (which STag, which offsets) and knows the Terminate
//!   triple (layer, error type, error code) that reports it to the peer.

use core::fmt;

use crate::check::Access;

/// Terminate "Layer" value of the DDP layer (RFC 5040 §4.8, Figure 9).
pub const LAYER_DDP: u8 = 0x1;

/// Terminate "Layer" value of the RDMAP layer (RFC 5040 §4.8, Figure 9).
///
/// DDP has no code for a missing access right or for a segment too short to carry its own
/// header; those are reported with RDMAP-layer codes (see [`DdpError::layer_etype_ecode`]).
pub const LAYER_RDMAP: u8 = 0x0;

/// DDP Error Type values (RFC 5041 §7.2).
pub mod etype {
    /// Local Catastrophic.
    pub const LOCAL_CATASTROPHIC: u8 = 0x0;
    /// Tagged Buffer Error.
    pub const TAGGED: u8 = 0x1;
    /// Untagged Buffer Error.
    pub const UNTAGGED: u8 = 0x2;
    /// Reserved for the use by the LLP.
    pub const LLP_RESERVED: u8 = 0x3;
}

/// Error codes of the Tagged Buffer Error type (RFC 5041 §7.2, Error Type 0x1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum TaggedCode {
    /// 0x00 Invalid STag.
    InvalidStag = 0x00,
    /// 0x01 Base or bounds violation.
    BaseOrBounds = 0x01,
    /// 0x02 STag not associated with DDP Stream.
    StagNotAssociated = 0x02,
    /// 0x03 TO wrap.
    ToWrap = 0x03,
    /// 0x04 Invalid DDP version.
    InvalidVersion = 0x04,
}

impl TaggedCode {
    /// All codes, in numeric order.
    pub const ALL: [TaggedCode; 5] = [
        TaggedCode::InvalidStag,
        TaggedCode::BaseOrBounds,
        TaggedCode::StagNotAssociated,
        TaggedCode::ToWrap,
        TaggedCode::InvalidVersion,
    ];

    /// The numeric Error Code.
    pub const fn code(self) -> u8 {
        self as u8
    }

    /// The code with numeric value `code`, if RFC 5041 defines one.
    pub const fn from_code(code: u8) -> Option<Self> {
        Some(match code {
            0x00 => TaggedCode::InvalidStag,
            0x01 => TaggedCode::BaseOrBounds,
            0x02 => TaggedCode::StagNotAssociated,
            0x03 => TaggedCode::ToWrap,
            0x04 => TaggedCode::InvalidVersion,
            _ => return None,
        })
    }

    /// The RFC's name for the code.
    pub const fn name(self) -> &'static str {
        match self {
            TaggedCode::InvalidStag => "Invalid STag",
            TaggedCode::BaseOrBounds => "Base or bounds violation",
            TaggedCode::StagNotAssociated => "STag not associated with DDP Stream",
            TaggedCode::ToWrap => "TO wrap",
            TaggedCode::InvalidVersion => "Invalid DDP version",
        }
    }
}

impl fmt::Display for TaggedCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Error codes of the Untagged Buffer Error type (RFC 5041 §7.2, Error Type 0x2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum UntaggedCode {
    /// 0x01 Invalid QN.
    InvalidQn = 0x01,
    /// 0x02 Invalid MSN - no buffer available.
    NoBuffer = 0x02,
    /// 0x03 Invalid MSN - MSN range is not valid.
    MsnRange = 0x03,
    /// 0x04 Invalid MO.
    InvalidMo = 0x04,
    /// 0x05 DDP Message too long for available buffer.
    TooLong = 0x05,
    /// 0x06 Invalid DDP version.
    InvalidVersion = 0x06,
}

impl UntaggedCode {
    /// All codes, in numeric order.
    pub const ALL: [UntaggedCode; 6] = [
        UntaggedCode::InvalidQn,
        UntaggedCode::NoBuffer,
        UntaggedCode::MsnRange,
        UntaggedCode::InvalidMo,
        UntaggedCode::TooLong,
        UntaggedCode::InvalidVersion,
    ];

    /// The numeric Error Code.
    pub const fn code(self) -> u8 {
        self as u8
    }

    /// The code with numeric value `code`, if RFC 5041 defines one.
    pub const fn from_code(code: u8) -> Option<Self> {
        Some(match code {
            0x01 => UntaggedCode::InvalidQn,
            0x02 => UntaggedCode::NoBuffer,
            0x03 => UntaggedCode::MsnRange,
            0x04 => UntaggedCode::InvalidMo,
            0x05 => UntaggedCode::TooLong,
            0x06 => UntaggedCode::InvalidVersion,
            _ => return None,
        })
    }

    /// The RFC's name for the code.
    pub const fn name(self) -> &'static str {
        match self {
            UntaggedCode::InvalidQn => "Invalid QN",
            UntaggedCode::NoBuffer => "Invalid MSN - no buffer available",
            UntaggedCode::MsnRange => "Invalid MSN - MSN range is not valid",
            UntaggedCode::InvalidMo => "Invalid MO",
            UntaggedCode::TooLong => "DDP Message too long for available buffer",
            UntaggedCode::InvalidVersion => "Invalid DDP version",
        }
    }
}

impl fmt::Display for UntaggedCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A DDP-layer Terminate error (Layer 0x1): every Error Type / Error Code pair of
/// RFC 5041 §7.2 and of the IANA "DDP Errors" registry (RFC 6580 §3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DdpCode {
    /// Error Type 0x0, code 0x00: Local Catastrophic.
    LocalCatastrophic,
    /// Error Type 0x1: Tagged Buffer Error.
    Tagged(TaggedCode),
    /// Error Type 0x2: Untagged Buffer Error.
    Untagged(UntaggedCode),
    /// Error Type 0x3: reserved for the use by the LLP; any code (kept as received).
    LlpReserved(u8),
}

impl DdpCode {
    /// The (error type, error code) pair of this error.
    pub const fn etype_ecode(self) -> (u8, u8) {
        match self {
            DdpCode::LocalCatastrophic => (etype::LOCAL_CATASTROPHIC, 0x00),
            DdpCode::Tagged(c) => (etype::TAGGED, c.code()),
            DdpCode::Untagged(c) => (etype::UNTAGGED, c.code()),
            DdpCode::LlpReserved(c) => (etype::LLP_RESERVED, c),
        }
    }

    /// The Terminate triple (layer 0x1, error type, error code).
    pub const fn layer_etype_ecode(self) -> (u8, u8, u8) {
        let (t, c) = self.etype_ecode();
        (LAYER_DDP, t, c)
    }

    /// The DDP error with this error type and error code, if RFC 5041 defines one.
    pub const fn from_wire(etype: u8, ecode: u8) -> Option<Self> {
        match etype {
            etype::LOCAL_CATASTROPHIC if ecode == 0x00 => Some(DdpCode::LocalCatastrophic),
            etype::TAGGED => match TaggedCode::from_code(ecode) {
                Some(c) => Some(DdpCode::Tagged(c)),
                None => None,
            },
            etype::UNTAGGED => match UntaggedCode::from_code(ecode) {
                Some(c) => Some(DdpCode::Untagged(c)),
                None => None,
            },
            etype::LLP_RESERVED => Some(DdpCode::LlpReserved(ecode)),
            _ => None,
        }
    }

    /// The RFC's name of the error type.
    pub const fn type_name(self) -> &'static str {
        match self {
            DdpCode::LocalCatastrophic => "Local Catastrophic",
            DdpCode::Tagged(_) => "Tagged Buffer Error",
            DdpCode::Untagged(_) => "Untagged Buffer Error",
            DdpCode::LlpReserved(_) => "Reserved for the use by the LLP",
        }
    }
}

impl fmt::Display for DdpCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DdpCode::LocalCatastrophic => f.write_str("DDP Local Catastrophic"),
            DdpCode::Tagged(c) => write!(f, "DDP Tagged Buffer Error: {c}"),
            DdpCode::Untagged(c) => write!(f, "DDP Untagged Buffer Error: {c}"),
            DdpCode::LlpReserved(c) => {
                write!(f, "DDP error type reserved for the LLP, code {c:#04x}")
            }
        }
    }
}

/// Why an STag does not name a usable Tagged Buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StagProblem {
    /// No buffer is registered under the STag's index.
    NotRegistered,
    /// A buffer is registered under the index, but with a different 8-bit key.
    KeyMismatch {
        /// The STag the buffer is registered with.
        registered: u32,
    },
    /// The buffer was registered but has been invalidated.
    Invalidated,
    /// A later segment of a message names another STag than its first segment did
    /// (RFC 5041 §4.2: every segment of a message carries the same STag).
    ChangedMidMessage {
        /// The STag of the message in progress.
        first: u32,
    },
}

impl fmt::Display for StagProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StagProblem::NotRegistered => f.write_str("no buffer is registered under it"),
            StagProblem::KeyMismatch { registered } => write!(
                f,
                "its key does not match the registered STag {registered:#010x}"
            ),
            StagProblem::Invalidated => f.write_str("it has been invalidated"),
            StagProblem::ChangedMidMessage { first } => {
                write!(f, "the message in progress uses STag {first:#010x}")
            }
        }
    }
}

/// Terminate triple used for a segment too short to hold the header its control fields
/// announce. Neither RFC 5041 nor RFC 5040 has a code for it; this crate reports it as an RDMAP
/// Remote Operation Error, "Catastrophic error, localized to RDMAP Stream" (0x0/0x2/0x07), the
/// code RFC 7306 §8.2 itself uses for a malformed request, because the stream cannot be
/// interpreted any further.
pub const TRUNCATED_TRIPLE: (u8, u8, u8) = (LAYER_RDMAP, 0x2, 0x07);

/// Terminate triple used for a missing access right on a Tagged Buffer: RDMAP Remote
/// Protection Error, "Access rights violation" (0x0/0x1/0x02, RFC 5040 §4.8). RFC 5041 §7.2 has
/// no access-rights code.
pub const ACCESS_RIGHTS_TRIPLE: (u8, u8, u8) = (LAYER_RDMAP, 0x1, 0x02);

/// An error found while parsing a DDP segment or while validating it against the local
/// buffers (RFC 5041 §7.1).
///
/// [`DdpError::layer_etype_ecode`] gives the Terminate triple that reports the error to the
/// peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DdpError {
    /// The segment is shorter than the DDP header its T bit announces.
    #[error(
        "DDP segment of {got} bytes is too short for the {needed}-byte {} DDP header",
        if *.tagged { "tagged" } else { "untagged" }
    )]
    Truncated {
        /// The T bit (true for the tagged model; false also when the segment is empty).
        tagged: bool,
        /// Header length needed.
        needed: usize,
        /// Bytes present.
        got: usize,
    },
    /// The DV field is not 1 (RFC 5041 §4.1).
    #[error(
        "DDP version {version} in a {} segment; only version 1 (RFC 5041) is spoken",
        if *.tagged { "tagged" } else { "untagged" }
    )]
    InvalidVersion {
        /// The T bit of the segment.
        tagged: bool,
        /// The DV field received.
        version: u8,
    },
    /// A typed view was asked for the other buffer model than the segment's T bit says.
    #[error(
        "segment is {} but was read as {}",
        if *.tagged { "tagged" } else { "untagged" },
        if *.tagged { "untagged" } else { "tagged" }
    )]
    WrongModel {
        /// The T bit of the segment.
        tagged: bool,
    },
    /// RFC 5041 §7.1 tagged check 1: the STag is not valid for this stream.
    #[error("invalid STag {stag:#010x}: {problem}")]
    InvalidStag {
        /// The STag of the segment.
        stag: u32,
        /// Why it is not valid.
        problem: StagProblem,
    },
    /// RFC 5041 §7.1 tagged check 2 / §8.2: the STag belongs to another stream or
    /// protection domain.
    #[error(
        "STag {stag:#010x} is not associated with this stream (stream or protection domain differs)"
    )]
    StagNotAssociated {
        /// The STag of the segment.
        stag: u32,
    },
    /// The Tagged Buffer does not grant the access the message needs.
    #[error("STag {stag:#010x} grants {granted} but the message needs {needed}")]
    AccessRights {
        /// The STag of the segment.
        stag: u32,
        /// Rights the message needs.
        needed: Access,
        /// Rights the buffer grants.
        granted: Access,
    },
    /// RFC 5041 §7.1 tagged check 5: TO plus payload length wraps the 64-bit offset space.
    #[error("TO {to:#018x} plus {len} bytes wraps past 2^64")]
    ToWrap {
        /// Tagged Offset of the segment.
        to: u64,
        /// Payload length.
        len: u64,
    },
    /// RFC 5041 §7.1 tagged checks 3–4: the payload falls outside the registered range.
    #[error(
        "bytes {to:#x}..{end:#x} of STag {stag:#010x} are outside its registered range {base:#x}..{limit:#x}",
        end = (*.to as u128) + (*.len as u128),
        limit = (*.base as u128) + (*.buffer_len as u128)
    )]
    BaseOrBounds {
        /// The STag of the segment.
        stag: u32,
        /// Tagged Offset of the segment.
        to: u64,
        /// Payload length.
        len: u64,
        /// First legal Tagged Offset of the buffer.
        base: u64,
        /// Registered length of the buffer.
        buffer_len: u64,
    },
    /// A later segment of a tagged message does not continue at the next TO (segments of a
    /// message are Placed in order over an in-order LLP, RFC 5041 §5.3).
    #[error(
        "segment of STag {stag:#010x} at TO {to:#x} does not continue the message at TO {expected_to:#x}"
    )]
    TaggedGap {
        /// The STag of the segment.
        stag: u32,
        /// Tagged Offset of the segment.
        to: u64,
        /// Tagged Offset that would continue the message.
        expected_to: u64,
    },
    /// RFC 5041 §7.1 untagged check 1: the Queue Number is not valid for this stream.
    #[error("queue number {qn} is not valid on this stream ({queues} queues exist)")]
    InvalidQn {
        /// QN of the segment.
        qn: u32,
        /// Number of valid queues (QNs `0..queues`).
        queues: usize,
    },
    /// RFC 5041 §7.1 untagged check 2: no buffer is posted for the message.
    #[error("no buffer is posted on queue {qn} for message sequence number {msn}")]
    NoBuffer {
        /// QN of the segment.
        qn: u32,
        /// MSN of the segment.
        msn: u32,
    },
    /// RFC 5041 §7.1 untagged check 5: the MSN is outside the range of available buffers.
    #[error(
        "message sequence number {msn} on queue {qn} is outside the valid range starting at {first_msn}"
    )]
    MsnRange {
        /// QN of the segment.
        qn: u32,
        /// MSN of the segment.
        msn: u32,
        /// MSN of the first available buffer.
        first_msn: u32,
    },
    /// RFC 5041 §7.1 untagged check 3: the Message Offset is not a legal offset.
    #[error(
        "message offset {mo} of message {msn} on queue {qn} is not valid (expected {expected})"
    )]
    InvalidMo {
        /// QN of the segment.
        qn: u32,
        /// MSN of the segment.
        msn: u32,
        /// MO of the segment.
        mo: u32,
        /// Description of what was legal.
        expected: MoExpectation,
    },
    /// RFC 5041 §7.1 untagged check 4: MO plus payload length exceeds the buffer.
    #[error(
        "message {msn} on queue {qn} overflows its {buffer_len}-byte buffer: {len} bytes at offset {mo}"
    )]
    TooLong {
        /// QN of the segment.
        qn: u32,
        /// MSN of the segment.
        msn: u32,
        /// MO of the segment.
        mo: u32,
        /// Payload length.
        len: u64,
        /// Length of the buffer.
        buffer_len: u64,
    },
}

/// What Message Offset a receiver would have accepted (context for [`DdpError::InvalidMo`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MoExpectation {
    /// The next in-order offset of the message in progress.
    Exactly(u32),
    /// Any offset not beyond the end of the buffer.
    AtMost(u64),
}

impl fmt::Display for MoExpectation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MoExpectation::Exactly(v) => write!(f, "{v}"),
            MoExpectation::AtMost(v) => write!(f, "at most {v}"),
        }
    }
}

impl DdpError {
    /// The RFC 5041 §7.2 code of this error, if it has one. `None` for
    /// [`DdpError::Truncated`], [`DdpError::WrongModel`] and [`DdpError::AccessRights`],
    /// which DDP has no code for (see [`DdpError::layer_etype_ecode`]).
    pub const fn code(&self) -> Option<DdpCode> {
        Some(match self {
            DdpError::Truncated { .. } | DdpError::WrongModel { .. } => return None,
            DdpError::AccessRights { .. } => return None,
            DdpError::InvalidVersion { tagged: true, .. } => {
                DdpCode::Tagged(TaggedCode::InvalidVersion)
            }
            DdpError::InvalidVersion { tagged: false, .. } => {
                DdpCode::Untagged(UntaggedCode::InvalidVersion)
            }
            DdpError::InvalidStag { .. } => DdpCode::Tagged(TaggedCode::InvalidStag),
            DdpError::StagNotAssociated { .. } => DdpCode::Tagged(TaggedCode::StagNotAssociated),
            DdpError::ToWrap { .. } => DdpCode::Tagged(TaggedCode::ToWrap),
            DdpError::BaseOrBounds { .. } | DdpError::TaggedGap { .. } => {
                DdpCode::Tagged(TaggedCode::BaseOrBounds)
            }
            DdpError::InvalidQn { .. } => DdpCode::Untagged(UntaggedCode::InvalidQn),
            DdpError::NoBuffer { .. } => DdpCode::Untagged(UntaggedCode::NoBuffer),
            DdpError::MsnRange { .. } => DdpCode::Untagged(UntaggedCode::MsnRange),
            DdpError::InvalidMo { .. } => DdpCode::Untagged(UntaggedCode::InvalidMo),
            DdpError::TooLong { .. } => DdpCode::Untagged(UntaggedCode::TooLong),
        })
    }

    /// The Terminate triple (layer, error type, error code) that reports this error.
    ///
    /// Errors with an RFC 5041 code use it (layer 0x1). The rest:
    ///
    /// * [`DdpError::AccessRights`] → RDMAP Remote Protection Error, Access rights violation
    ///   (0x0/0x1/0x02, RFC 5040 §4.8): the only code that names the condition;
    /// * [`DdpError::Truncated`] and [`DdpError::WrongModel`] → RDMAP Remote Operation Error,
    ///   Catastrophic error localized to RDMAP Stream (0x0/0x2/0x07), see
    ///   [`TRUNCATED_TRIPLE`].
    pub const fn layer_etype_ecode(&self) -> (u8, u8, u8) {
        match self.code() {
            Some(c) => c.layer_etype_ecode(),
            None => match self {
                DdpError::AccessRights { .. } => ACCESS_RIGHTS_TRIPLE,
                _ => TRUNCATED_TRIPLE,
            },
        }
    }
}
