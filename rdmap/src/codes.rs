//! Terminate error codes of every layer (RFC 5040 §4.8 Figure 9, RFC 5041 §7.2,
//! RFC 5044 §8, RFC 6581 §8, and the IANA registries of RFC 6580 §3).
//!
//! A Terminate carries a (Layer, Error Type, Error Code) triple. [`TermCause`] is that
//! triple as a typed value: [`TermCause::from_wire`] never fails — a combination no RFC
//! defines becomes [`TermCause::Unknown`], keeping the raw numbers — and
//! [`TermCause::layer_etype_ecode`] gives the triple back. `Display` gives the RFC's names, as
//! a user should see them.
//!
//! | Layer | Error Types |
//! |---|---|
//! | 0x0 RDMAP | 0x0 Local Catastrophic (any code), 0x1 Remote Protection ([`ProtectionCode`]), 0x2 Remote Operation ([`OperationCode`]) |
//! | 0x1 DDP | see [`ddp::DdpCode`] |
//! | 0x2 LLP | 0x0 MPA ([`MpaCode`]); RFC 5043 (SCTP) defines no LLP codes |

use core::fmt;

pub use ddp::{DdpCode, TaggedCode, UntaggedCode};

/// Terminate Layer values (RFC 5040 §4.8 Figure 9).
pub mod layer {
    /// RDMAP.
    pub const RDMAP: u8 = 0x0;
    /// DDP.
    pub const DDP: u8 = 0x1;
    /// The LLP (MPA over TCP; SCTP's adaptation defines no codes).
    pub const LLP: u8 = 0x2;
}

/// RDMAP Error Type values (RFC 5040 §4.8 Figure 9).
pub mod rdmap_etype {
    /// Local Catastrophic Error.
    pub const LOCAL_CATASTROPHIC: u8 = 0x0;
    /// Remote Protection Error.
    pub const REMOTE_PROTECTION: u8 = 0x1;
    /// Remote Operation Error.
    pub const REMOTE_OPERATION: u8 = 0x2;
}

/// The MPA Error Type of the LLP layer (RFC 6581 §8: "Layer: 0x2 - LLP Error Type: 0x0 -
/// MPA").
pub const MPA_ETYPE: u8 = 0x0;

macro_rules! code_enum {
    (
        $(#[$doc:meta])*
        $name:ident { $( $(#[$vdoc:meta])* $variant:ident = $value:literal => $text:literal, )* }
    ) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(u8)]
        pub enum $name {
            $( $(#[$vdoc])* $variant = $value, )*
        }

        impl $name {
            /// Every code, in numeric order.
            pub const ALL: &'static [$name] = &[ $( $name::$variant, )* ];

            /// The numeric Error Code.
            pub const fn code(self) -> u8 {
                self as u8
            }

            /// The code with numeric value `code`, if the RFCs define one.
            pub const fn from_code(code: u8) -> Option<Self> {
                match code {
                    $( $value => Some($name::$variant), )*
                    _ => None,
                }
            }

            /// The RFC's name for the code.
            pub const fn name(self) -> &'static str {
                match self {
                    $( $name::$variant => $text, )*
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

code_enum! {
    /// Error Codes of the RDMAP Remote Protection Error type (RFC 5040 §4.8, Error Type 0x1).
    ProtectionCode {
        /// 0x00 Invalid STag.
        InvalidStag = 0x00 => "Invalid STag",
        /// 0x01 Base or bounds violation.
        BaseOrBounds = 0x01 => "Base or bounds violation",
        /// 0x02 Access rights violation.
        AccessRights = 0x02 => "Access rights violation",
        /// 0x03 STag not associated with RDMAP Stream.
        StagNotAssociated = 0x03 => "STag not associated with RDMAP Stream",
        /// 0x04 TO wrap.
        ToWrap = 0x04 => "TO wrap",
        /// 0x09 STag cannot be Invalidated.
        CannotInvalidate = 0x09 => "STag cannot be Invalidated",
        /// 0xFF Unspecified Error.
        Unspecified = 0xff => "Unspecified Error",
    }
}

code_enum! {
    /// Error Codes of the RDMAP Remote Operation Error type (RFC 5040 §4.8, Error Type 0x2).
    OperationCode {
        /// 0x05 Invalid RDMAP version.
        InvalidVersion = 0x05 => "Invalid RDMAP version",
        /// 0x06 Unexpected OpCode.
        UnexpectedOpcode = 0x06 => "Unexpected OpCode",
        /// 0x07 Catastrophic error, localized to RDMAP Stream.
        CatastrophicStream = 0x07 => "Catastrophic error, localized to RDMAP Stream",
        /// 0x08 Catastrophic error, global.
        CatastrophicGlobal = 0x08 => "Catastrophic error, global",
        /// 0x09 STag cannot be Invalidated.
        CannotInvalidate = 0x09 => "STag cannot be Invalidated",
        /// 0xFF Unspecified Error.
        Unspecified = 0xff => "Unspecified Error",
    }
}

code_enum! {
    /// MPA error codes (Layer 0x2, Error Type 0x0): RFC 5044 §8 codes 1–4 and the Enhanced
    /// Connection Establishment codes 5–7 of RFC 6581 §8.
    MpaCode {
        /// 0x01 TCP connection closed, terminated, or lost (RFC 5044 §8).
        ConnectionLost = 0x01 => "TCP connection closed, terminated, or lost",
        /// 0x02 MPA CRC Error: received CRC does not match the FPDU (RFC 5044 §8).
        CrcError = 0x02 => "MPA CRC Error",
        /// 0x03 MPA Marker and ULPDU Length field mismatch (RFC 5044 §8).
        MarkerMismatch = 0x03 => "MPA Marker and ULPDU Length field mismatch",
        /// 0x04 Invalid MPA Request Frame or MPA Response Frame (RFC 5044 §8).
        InvalidRequestReply = 0x04 => "Invalid MPA Request Frame or MPA Response Frame",
        /// 0x05 Local catastrophic (RFC 6581 §8).
        LocalCatastrophic = 0x05 => "Local catastrophic",
        /// 0x06 Insufficient IRD resources (RFC 6581 §8).
        InsufficientIrd = 0x06 => "Insufficient IRD resources",
        /// 0x07 No matching RTR option (RFC 6581 §8).
        NoMatchingRtr = 0x07 => "No matching RTR option",
    }
}

/// An RDMAP-layer Terminate error (Layer 0x0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RdmapCode {
    /// Error Type 0x0, Local Catastrophic Error. "This error type does not have an error code.
    /// Any value in this field is acceptable" (RFC 5040 §4.8); the value received is kept.
    LocalCatastrophic {
        /// The Error Code field as sent (meaningless; kept for exact re-encoding).
        ecode: u8,
    },
    /// Error Type 0x1, Remote Protection Error.
    RemoteProtection(ProtectionCode),
    /// Error Type 0x2, Remote Operation Error.
    RemoteOperation(OperationCode),
}

impl RdmapCode {
    /// Local Catastrophic Error with error code zero.
    pub const LOCAL_CATASTROPHIC: RdmapCode = RdmapCode::LocalCatastrophic { ecode: 0 };

    /// The (error type, error code) pair.
    pub const fn etype_ecode(self) -> (u8, u8) {
        match self {
            RdmapCode::LocalCatastrophic { ecode } => (rdmap_etype::LOCAL_CATASTROPHIC, ecode),
            RdmapCode::RemoteProtection(c) => (rdmap_etype::REMOTE_PROTECTION, c.code()),
            RdmapCode::RemoteOperation(c) => (rdmap_etype::REMOTE_OPERATION, c.code()),
        }
    }

    /// The RDMAP error with this error type and error code, if RFC 5040 defines one.
    pub const fn from_wire(etype: u8, ecode: u8) -> Option<Self> {
        match etype {
            rdmap_etype::LOCAL_CATASTROPHIC => Some(RdmapCode::LocalCatastrophic { ecode }),
            rdmap_etype::REMOTE_PROTECTION => match ProtectionCode::from_code(ecode) {
                Some(c) => Some(RdmapCode::RemoteProtection(c)),
                None => None,
            },
            rdmap_etype::REMOTE_OPERATION => match OperationCode::from_code(ecode) {
                Some(c) => Some(RdmapCode::RemoteOperation(c)),
                None => None,
            },
            _ => None,
        }
    }
}

impl fmt::Display for RdmapCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RdmapCode::LocalCatastrophic { .. } => f.write_str("RDMAP Local Catastrophic Error"),
            RdmapCode::RemoteProtection(c) => write!(f, "RDMAP Remote Protection Error: {c}"),
            RdmapCode::RemoteOperation(c) => write!(f, "RDMAP Remote Operation Error: {c}"),
        }
    }
}

/// The cause carried by a Terminate: a (Layer, Error Type, Error Code) triple, typed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TermCause {
    /// Layer 0x0: an RDMAP error.
    Rdmap(RdmapCode),
    /// Layer 0x1: a DDP error (RFC 5041 §7.2).
    Ddp(DdpCode),
    /// Layer 0x2, Error Type 0x0: an MPA error.
    Mpa(MpaCode),
    /// A combination no RFC defines, kept as received.
    Unknown {
        /// Layer (4 bits on the wire).
        layer: u8,
        /// Error Type (4 bits on the wire).
        etype: u8,
        /// Error Code.
        ecode: u8,
    },
}

impl TermCause {
    /// The typed cause for a triple. Never fails: combinations no RFC defines become
    /// [`TermCause::Unknown`].
    pub const fn from_wire(layer: u8, etype: u8, ecode: u8) -> TermCause {
        let known = match layer {
            layer::RDMAP => match RdmapCode::from_wire(etype, ecode) {
                Some(c) => Some(TermCause::Rdmap(c)),
                None => None,
            },
            layer::DDP => match DdpCode::from_wire(etype, ecode) {
                Some(c) => Some(TermCause::Ddp(c)),
                None => None,
            },
            layer::LLP if etype == MPA_ETYPE => match MpaCode::from_code(ecode) {
                Some(c) => Some(TermCause::Mpa(c)),
                None => None,
            },
            _ => None,
        };
        match known {
            Some(c) => c,
            None => TermCause::Unknown {
                layer,
                etype,
                ecode,
            },
        }
    }

    /// The (layer, error type, error code) triple.
    pub const fn layer_etype_ecode(self) -> (u8, u8, u8) {
        match self {
            TermCause::Rdmap(c) => {
                let (t, e) = c.etype_ecode();
                (layer::RDMAP, t, e)
            }
            TermCause::Ddp(c) => c.layer_etype_ecode(),
            TermCause::Mpa(c) => (layer::LLP, MPA_ETYPE, c.code()),
            TermCause::Unknown {
                layer,
                etype,
                ecode,
            } => (layer, etype, ecode),
        }
    }

    /// Remote Protection Error with the given code.
    pub const fn protection(code: ProtectionCode) -> TermCause {
        TermCause::Rdmap(RdmapCode::RemoteProtection(code))
    }

    /// Remote Operation Error with the given code.
    pub const fn operation(code: OperationCode) -> TermCause {
        TermCause::Rdmap(RdmapCode::RemoteOperation(code))
    }

    /// Whether this is a Local Catastrophic error of RDMAP or DDP, for which a Terminate
    /// carries no copied headers (RFC 5040 §4.8, "Terminated DDP Header").
    pub const fn is_local_catastrophic(self) -> bool {
        matches!(
            self,
            TermCause::Rdmap(RdmapCode::LocalCatastrophic { .. })
                | TermCause::Ddp(DdpCode::LocalCatastrophic)
        )
    }

    /// The cause for a triple as reported by [`ddp::DdpError::layer_etype_ecode`] or any
    /// other source of raw triples.
    pub const fn from_triple(t: (u8, u8, u8)) -> TermCause {
        TermCause::from_wire(t.0, t.1, t.2)
    }
}

impl From<RdmapCode> for TermCause {
    fn from(c: RdmapCode) -> Self {
        TermCause::Rdmap(c)
    }
}

impl From<DdpCode> for TermCause {
    fn from(c: DdpCode) -> Self {
        TermCause::Ddp(c)
    }
}

impl From<MpaCode> for TermCause {
    fn from(c: MpaCode) -> Self {
        TermCause::Mpa(c)
    }
}

impl From<ddp::DdpError> for TermCause {
    fn from(e: ddp::DdpError) -> Self {
        TermCause::from_triple(e.layer_etype_ecode())
    }
}

impl fmt::Display for TermCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (l, t, c) = self.layer_etype_ecode();
        match self {
            TermCause::Rdmap(x) => write!(f, "{x}")?,
            TermCause::Ddp(x) => write!(f, "{x}")?,
            TermCause::Mpa(x) => write!(f, "LLP (MPA) Error: {x}")?,
            TermCause::Unknown { .. } => f.write_str("unknown Terminate cause")?,
        }
        write!(f, " (layer {l:#x}, type {t:#x}, code {c:#04x})")
    }
}
