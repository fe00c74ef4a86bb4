//! The RDMAP Control Field and the RDMA message opcodes (RFC 5040 §4.1–§4.2, RFC 7306
//! §4.1–§4.2).
//!
//! The RDMAP Control Field is the first RsvdULP octet of every DDP header:
//!
//! ```text
//!  7 6 5 4 3 2 1 0
//! | RV|Rsv| Opcode|      RV: RDMA Version (01b), Rsv: reserved (sent 0, ignored),
//!                        Opcode: 4 bits
//! ```
//!
//! For each opcode, RFC 5040 Figure 4 and RFC 7306 Figure 2 fix the buffer model, the
//! queue number, whether the Invalidate STag (RsvdULP octets 1–4 of the untagged header) is
//! valid, and which RDMAP header follows the DDP header:
//!
//! | Opcode | Message | Model | QN | Invalidate STag | RDMAP header | ULP payload |
//! |---|---|---|---|---|---|---|
//! | 0x0 | RDMA Write | tagged | – | – | none | yes |
//! | 0x1 | RDMA Read Request | untagged | 1 | zero | Read Request (28 B) | no |
//! | 0x2 | RDMA Read Response | tagged | – | – | none | yes |
//! | 0x3 | Send | untagged | 0 | zero | none | yes |
//! | 0x4 | Send with Invalidate | untagged | 0 | valid | none | yes |
//! | 0x5 | Send with SE | untagged | 0 | zero | none | yes |
//! | 0x6 | Send with SE and Invalidate | untagged | 0 | valid | none | yes |
//! | 0x7 | Terminate | untagged | 2 | zero | Terminate (≥ 4 B) | no |
//! | 0x8 | Immediate Data | untagged | 0 | zero | Immediate Data (8 B) | no |
//! | 0x9 | Immediate Data with SE | untagged | 0 | zero | Immediate Data (8 B) | no |
//! | 0xA | Atomic Request | untagged | 1 | zero | Atomic Request (52 B) | no |
//! | 0xB | Atomic Response | untagged | 3 | zero | Atomic Response (12 B) | no |
//! | 0xC–0xF | reserved (0xF: experimental, RFC 6580) | | | | | |

use core::fmt;

use ddp::qn;

/// The RDMA Version this crate speaks: RV = 01b (RFC 5040 §4.1).
///
/// RFC 5040 also calls 00b valid, for RNICs of the older RDMA Consortium specification, but
/// only together with that specification's MPA revision; over MPA revisions 1 and 2 the
/// version is 01b, and Linux siw rejects anything else. Received messages with another RV are
/// rejected as *Invalid RDMAP version*.
pub const RDMAP_VERSION: u8 = 1;

/// RV bits of the RDMAP Control Field.
pub const MASK_VERSION: u8 = 0xc0;
/// Reserved bits of the RDMAP Control Field.
pub const MASK_RESERVED: u8 = 0x30;
/// Opcode bits of the RDMAP Control Field.
pub const MASK_OPCODE: u8 = 0x0f;

/// An RDMA message opcode (RFC 5040 §4.1 Figure 4, RFC 7306 §4.1 Figure 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Opcode {
    /// 0000b RDMA Write.
    RdmaWrite = 0x0,
    /// 0001b RDMA Read Request.
    ReadRequest = 0x1,
    /// 0010b RDMA Read Response.
    ReadResponse = 0x2,
    /// 0011b Send.
    Send = 0x3,
    /// 0100b Send with Invalidate.
    SendInvalidate = 0x4,
    /// 0101b Send with Solicited Event.
    SendSe = 0x5,
    /// 0110b Send with Solicited Event and Invalidate.
    SendSeInvalidate = 0x6,
    /// 0111b Terminate.
    Terminate = 0x7,
    /// 1000b Immediate Data (RFC 7306).
    ImmediateData = 0x8,
    /// 1001b Immediate Data with Solicited Event (RFC 7306).
    ImmediateDataSe = 0x9,
    /// 1010b Atomic Request (RFC 7306).
    AtomicRequest = 0xa,
    /// 1011b Atomic Response (RFC 7306).
    AtomicResponse = 0xb,
}

impl Opcode {
    /// Every defined opcode, in numeric order.
    pub const ALL: [Opcode; 12] = [
        Opcode::RdmaWrite,
        Opcode::ReadRequest,
        Opcode::ReadResponse,
        Opcode::Send,
        Opcode::SendInvalidate,
        Opcode::SendSe,
        Opcode::SendSeInvalidate,
        Opcode::Terminate,
        Opcode::ImmediateData,
        Opcode::ImmediateDataSe,
        Opcode::AtomicRequest,
        Opcode::AtomicResponse,
    ];

    /// The 4-bit opcode value.
    pub const fn code(self) -> u8 {
        self as u8
    }

    /// The opcode with this value, if defined (0xC–0xF are reserved).
    pub const fn from_code(code: u8) -> Option<Opcode> {
        Some(match code {
            0x0 => Opcode::RdmaWrite,
            0x1 => Opcode::ReadRequest,
            0x2 => Opcode::ReadResponse,
            0x3 => Opcode::Send,
            0x4 => Opcode::SendInvalidate,
            0x5 => Opcode::SendSe,
            0x6 => Opcode::SendSeInvalidate,
            0x7 => Opcode::Terminate,
            0x8 => Opcode::ImmediateData,
            0x9 => Opcode::ImmediateDataSe,
            0xa => Opcode::AtomicRequest,
            0xb => Opcode::AtomicResponse,
            _ => return None,
        })
    }

    /// Whether the message uses the tagged buffer model (T = 1).
    pub const fn is_tagged(self) -> bool {
        matches!(self, Opcode::RdmaWrite | Opcode::ReadResponse)
    }

    /// The untagged queue number the message targets (`None` for tagged messages).
    pub const fn queue_number(self) -> Option<u32> {
        match self {
            Opcode::RdmaWrite | Opcode::ReadResponse => None,
            Opcode::Send
            | Opcode::SendInvalidate
            | Opcode::SendSe
            | Opcode::SendSeInvalidate
            | Opcode::ImmediateData
            | Opcode::ImmediateDataSe => Some(qn::SEND),
            Opcode::ReadRequest | Opcode::AtomicRequest => Some(qn::READ_REQUEST),
            Opcode::Terminate => Some(qn::TERMINATE),
            Opcode::AtomicResponse => Some(qn::ATOMIC_RESPONSE),
        }
    }

    /// Whether the Invalidate STag field (RsvdULP octets 1–4) is valid for this message.
    /// For every other untagged message it is sent as zero and ignored on receive.
    pub const fn has_invalidate_stag(self) -> bool {
        matches!(self, Opcode::SendInvalidate | Opcode::SendSeInvalidate)
    }

    /// Whether the message asks for a Solicited Event at the Data Sink.
    pub const fn solicited_event(self) -> bool {
        matches!(
            self,
            Opcode::SendSe | Opcode::SendSeInvalidate | Opcode::ImmediateDataSe
        )
    }

    /// Whether the message may carry ULP payload (RFC 5040 Figure 5, RFC 7306 Figure 3).
    pub const fn carries_ulp_payload(self) -> bool {
        matches!(
            self,
            Opcode::RdmaWrite
                | Opcode::ReadResponse
                | Opcode::Send
                | Opcode::SendInvalidate
                | Opcode::SendSe
                | Opcode::SendSeInvalidate
        )
    }

    /// Length of the RDMAP header that follows the DDP header, for messages whose header has
    /// a fixed length (the Terminate header is variable: at least 4 octets).
    pub const fn fixed_header_len(self) -> Option<usize> {
        match self {
            Opcode::ReadRequest => Some(crate::ReadRequest::LEN),
            Opcode::ImmediateData | Opcode::ImmediateDataSe => Some(crate::IMMEDIATE_DATA_LEN),
            Opcode::AtomicRequest => Some(crate::AtomicRequest::LEN),
            Opcode::AtomicResponse => Some(crate::AtomicResponse::LEN),
            Opcode::Terminate => None,
            _ => Some(0),
        }
    }

    /// The RFC's name of the message.
    pub const fn name(self) -> &'static str {
        match self {
            Opcode::RdmaWrite => "RDMA Write",
            Opcode::ReadRequest => "RDMA Read Request",
            Opcode::ReadResponse => "RDMA Read Response",
            Opcode::Send => "Send",
            Opcode::SendInvalidate => "Send with Invalidate",
            Opcode::SendSe => "Send with Solicited Event",
            Opcode::SendSeInvalidate => "Send with Solicited Event and Invalidate",
            Opcode::Terminate => "Terminate",
            Opcode::ImmediateData => "Immediate Data",
            Opcode::ImmediateDataSe => "Immediate Data with Solicited Event",
            Opcode::AtomicRequest => "Atomic Request",
            Opcode::AtomicResponse => "Atomic Response",
        }
    }
}

impl fmt::Display for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The RDMAP Control Field this crate emits for an opcode: RV 01b, reserved bits zero.
pub const fn control_byte(opcode: Opcode) -> u8 {
    (RDMAP_VERSION << 6) | opcode.code()
}

/// The fields of a received RDMAP Control Field, undecoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RdmapControl {
    /// RV (2 bits).
    pub version: u8,
    /// Rsv (2 bits; ignored on receive).
    pub reserved: u8,
    /// Opcode (4 bits).
    pub opcode: u8,
}

impl RdmapControl {
    /// Split a control octet into its fields.
    pub const fn from_byte(b: u8) -> RdmapControl {
        RdmapControl {
            version: (b & MASK_VERSION) >> 6,
            reserved: (b & MASK_RESERVED) >> 4,
            opcode: b & MASK_OPCODE,
        }
    }

    /// The octet (fields masked to their widths).
    pub const fn to_byte(self) -> u8 {
        ((self.version & 0x3) << 6) | ((self.reserved & 0x3) << 4) | (self.opcode & 0xf)
    }
}
