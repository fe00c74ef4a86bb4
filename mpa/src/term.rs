//! LLP (MPA) error codes carried in an RDMAP Terminate message.
//!
//! When MPA detects an error that ends the stream, the RNIC reports it to the peer
//! in an RDMAP Terminate message (RFC 5040) whose *Layer* nibble is
//! [`TERM_LAYER_LLP`] and whose *Error Type* nibble is [`TERM_ETYPE_MPA`]; the
//! *Error Code* octet is one of [`LlpErrorCode`]. Codes 1–4 are the MPA errors of
//! RFC 5044 §8; codes 5–7 were added by RFC 6581 for enhanced connection setup.
//! The values are those registered for MPA by RFC 6580 (and used by Linux siw,
//! cxgb4 and Wireshark's iWARP dissector).

use core::fmt;

/// Terminate *Layer* value for errors detected by the lower-layer protocol (MPA).
pub const TERM_LAYER_LLP: u8 = 0x2;

/// Terminate *Error Type* value for MPA within [`TERM_LAYER_LLP`].
pub const TERM_ETYPE_MPA: u8 = 0x0;

/// MPA error codes for a Terminate message with Layer = LLP, Error Type = MPA.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum LlpErrorCode {
    /// 0x01: the TCP connection was closed, terminated or lost (RFC 5044 §8).
    TcpConnectionLost = 0x01,
    /// 0x02: an FPDU failed its CRC32c check (RFC 5044 §8).
    CrcError = 0x02,
    /// 0x03: with a valid CRC, a marker and the ULPDU_Length fields disagree
    /// about where an FPDU starts (RFC 5044 §8). Also used here, as Linux siw
    /// does, for an ULPDU_Length that cannot be valid, which likewise means the
    /// FPDU boundary is lost.
    MarkerLengthMismatch = 0x03,
    /// 0x04: an invalid MPA Request or Reply frame (RFC 5044 §8); the TCP
    /// connection is closed.
    InvalidRequestReply = 0x04,
    /// 0x05: local catastrophic error (RFC 6581).
    LocalCatastrophic = 0x05,
    /// 0x06: the initiator cannot provide the IRD the responder's ORD needs (RFC 6581).
    InsufficientIrd = 0x06,
    /// 0x07: no RTR message type both sides support (RFC 6581).
    NoMatchingRtr = 0x07,
}

impl LlpErrorCode {
    /// The octet that goes into the Terminate *Error Code* field.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// Decodes a Terminate *Error Code* octet; `None` for values MPA does not define.
    pub fn from_code(code: u8) -> Option<Self> {
        Some(match code {
            0x01 => Self::TcpConnectionLost,
            0x02 => Self::CrcError,
            0x03 => Self::MarkerLengthMismatch,
            0x04 => Self::InvalidRequestReply,
            0x05 => Self::LocalCatastrophic,
            0x06 => Self::InsufficientIrd,
            0x07 => Self::NoMatchingRtr,
            _ => return None,
        })
    }
}

impl fmt::Display for LlpErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match self {
            Self::TcpConnectionLost => "TCP connection closed, terminated or lost",
            Self::CrcError => "MPA CRC error",
            Self::MarkerLengthMismatch => "MPA marker and ULPDU_Length field mismatch",
            Self::InvalidRequestReply => "invalid MPA Request or Reply frame",
            Self::LocalCatastrophic => "local catastrophic error",
            Self::InsufficientIrd => "insufficient IRD resources",
            Self::NoMatchingRtr => "no matching RTR option",
        };
        write!(f, "{text} (LLP/MPA code {:#04x})", self.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 5044 §8 / RFC 6581 (registry RFC 6580): the seven MPA LLP error codes
    /// have the values 1..=7 and survive a decode/encode round trip; other octets
    /// are not MPA codes.
    #[test]
    fn rfc6580_llp_error_code_values() {
        let expected = [
            (LlpErrorCode::TcpConnectionLost, 1u8),
            (LlpErrorCode::CrcError, 2),
            (LlpErrorCode::MarkerLengthMismatch, 3),
            (LlpErrorCode::InvalidRequestReply, 4),
            (LlpErrorCode::LocalCatastrophic, 5),
            (LlpErrorCode::InsufficientIrd, 6),
            (LlpErrorCode::NoMatchingRtr, 7),
        ];
        for (code, value) in expected {
            assert_eq!(code.code(), value);
            assert_eq!(LlpErrorCode::from_code(value), Some(code));
        }
        assert_eq!(LlpErrorCode::from_code(0), None);
        assert_eq!(LlpErrorCode::from_code(8), None);
        assert_eq!(TERM_LAYER_LLP, 2);
        assert!(LlpErrorCode::CrcError.to_string().contains("0x02"));
    }
}
