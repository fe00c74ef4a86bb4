//! SCTP packet format (RFC 9260 §3): the common header, CRC32c, chunks, parameters and error
//! causes.
//!
//! Two layers, as everywhere in softrnic:
//!
//! - [`Packet`] is a zero-copy view over any `AsRef<[u8]>` buffer with checked accessors for
//!   the common header, the checksum and an iterator over the raw chunks ([`RawChunk`]).
//! - [`Chunk`], [`Param`] and [`ErrorCause`] are plain representations that `parse` from and
//!   `emit` to bytes. DATA payloads and COOKIE ECHO cookies borrow from the packet; everything
//!   else (rare control traffic) is owned.
//!
//! Nothing here panics on bad input: every length is checked before it is used, and a chunk or
//! parameter whose length field is wrong is an error, never an out-of-bounds read.
//!
//! The CRC32c of RFC 9260 Appendix A is carried in the octet order that results from the
//! reflected algorithm: the least significant octet of the CRC value comes first on the wire
//! (little-endian), see [`compute_checksum`].

use std::net::{Ipv4Addr, Ipv6Addr};

use crc_fast::{CrcAlgorithm, Digest};
use thiserror::Error;

/// Length of the SCTP common header.
pub const COMMON_HEADER_LEN: usize = 12;
/// Length of a chunk header (type, flags, length).
pub const CHUNK_HEADER_LEN: usize = 4;
/// Length of a DATA chunk header, up to the user data (RFC 9260 §3.3.1).
pub const DATA_HEADER_LEN: usize = 16;

/// Chunk type codes (RFC 9260 §3.2).
pub mod chunk_type {
    /// Payload Data.
    pub const DATA: u8 = 0;
    /// Initiation.
    pub const INIT: u8 = 1;
    /// Initiation Acknowledgement.
    pub const INIT_ACK: u8 = 2;
    /// Selective Acknowledgement.
    pub const SACK: u8 = 3;
    /// Heartbeat Request.
    pub const HEARTBEAT: u8 = 4;
    /// Heartbeat Acknowledgement.
    pub const HEARTBEAT_ACK: u8 = 5;
    /// Abort.
    pub const ABORT: u8 = 6;
    /// Shutdown.
    pub const SHUTDOWN: u8 = 7;
    /// Shutdown Acknowledgement.
    pub const SHUTDOWN_ACK: u8 = 8;
    /// Operation Error.
    pub const ERROR: u8 = 9;
    /// State Cookie.
    pub const COOKIE_ECHO: u8 = 10;
    /// Cookie Acknowledgement.
    pub const COOKIE_ACK: u8 = 11;
    /// Shutdown Complete.
    pub const SHUTDOWN_COMPLETE: u8 = 14;
}

/// Parameter type codes used by this crate (RFC 9260 §3.2.1, §3.3.2.1, §3.3.3.1, §3.3.5).
pub mod param_type {
    /// Heartbeat Info (in HEARTBEAT and HEARTBEAT ACK).
    pub const HEARTBEAT_INFO: u16 = 1;
    /// IPv4 Address.
    pub const IPV4_ADDRESS: u16 = 5;
    /// IPv6 Address.
    pub const IPV6_ADDRESS: u16 = 6;
    /// State Cookie.
    pub const STATE_COOKIE: u16 = 7;
    /// Unrecognized Parameter.
    pub const UNRECOGNIZED_PARAMETER: u16 = 8;
    /// Cookie Preservative.
    pub const COOKIE_PRESERVATIVE: u16 = 9;
    /// Host Name Address (deprecated; RFC 9260 §3.3.2.1 says reject with Unresolvable Address).
    pub const HOST_NAME_ADDRESS: u16 = 11;
    /// Supported Address Types.
    pub const SUPPORTED_ADDRESS_TYPES: u16 = 12;
    /// Reserved for ECN Capable.
    pub const ECN_CAPABLE: u16 = 0x8000;
    /// Adaptation Layer Indication (RFC 5061 §4.2.7; RFC 5043 §5.1 assigns 1 to DDP). Kept
    /// as `Param::Unknown` by the codec; the association engine interprets it.
    pub const ADAPTATION_LAYER_INDICATION: u16 = 0xC006;
}

/// Error cause codes (RFC 9260 §3.3.10).
pub mod cause_code {
    /// Invalid Stream Identifier.
    pub const INVALID_STREAM_ID: u16 = 1;
    /// Missing Mandatory Parameter.
    pub const MISSING_MANDATORY_PARAM: u16 = 2;
    /// Stale Cookie Error.
    pub const STALE_COOKIE: u16 = 3;
    /// Out of Resource.
    pub const OUT_OF_RESOURCE: u16 = 4;
    /// Unresolvable Address.
    pub const UNRESOLVABLE_ADDRESS: u16 = 5;
    /// Unrecognized Chunk Type.
    pub const UNRECOGNIZED_CHUNK: u16 = 6;
    /// Invalid Mandatory Parameter.
    pub const INVALID_MANDATORY_PARAM: u16 = 7;
    /// Unrecognized Parameters.
    pub const UNRECOGNIZED_PARAMS: u16 = 8;
    /// No User Data.
    pub const NO_USER_DATA: u16 = 9;
    /// Cookie Received While Shutting Down.
    pub const COOKIE_WHILE_SHUTTING_DOWN: u16 = 10;
    /// Restart of an Association with New Addresses.
    pub const RESTART_WITH_NEW_ADDRESSES: u16 = 11;
    /// User-Initiated Abort.
    pub const USER_INITIATED_ABORT: u16 = 12;
    /// Protocol Violation.
    pub const PROTOCOL_VIOLATION: u16 = 13;
}

/// Why bytes could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum WireError {
    /// Fewer bytes than the common header.
    #[error("packet of {len} bytes is shorter than the 12-byte SCTP common header")]
    TooShort {
        /// Bytes received.
        len: usize,
    },
    /// The CRC32c does not match (RFC 9260 §6.8: such packets are silently discarded).
    #[error("CRC32c mismatch: packet carries {carried:#010x}, content gives {computed:#010x}")]
    BadChecksum {
        /// Value in the packet.
        carried: u32,
        /// Value computed over the packet.
        computed: u32,
    },
    /// A chunk length below 4 or past the end of the packet.
    #[error(
        "chunk at offset {offset}: length field {length} is below 4 or runs past the end of \
         the packet ({remaining} bytes left)"
    )]
    BadChunkLength {
        /// Offset of the chunk within the packet payload.
        offset: usize,
        /// Its length field.
        length: usize,
        /// Bytes left in the packet from that offset.
        remaining: usize,
    },
    /// A known chunk whose contents do not fit its format.
    #[error("malformed {chunk} chunk: {reason}")]
    MalformedChunk {
        /// Chunk name.
        chunk: &'static str,
        /// What is wrong.
        reason: &'static str,
    },
    /// A parameter or error cause whose length field is wrong.
    #[error("malformed parameter or error cause (type {code}): {reason}")]
    MalformedParam {
        /// Parameter type or cause code.
        code: u16,
        /// What is wrong.
        reason: &'static str,
    },
}

pub(crate) use ddp::be::{be16, be32, be64};

/// `n` rounded up to a multiple of 4 (saturating).
#[inline]
pub fn pad4(n: usize) -> usize {
    n.saturating_add(3) & !3
}

/// The CRC32c (Castagnoli) of an SCTP packet, computed with the checksum field taken as zero
/// (RFC 9260 §6.8 and Appendix A). The result is the CRC value; on the wire it is stored
/// least significant octet first (see [`Packet::checksum`]).
///
/// Returns 0 for buffers shorter than the common header.
pub fn compute_checksum(packet: &[u8]) -> u32 {
    let (Some(head), Some(tail)) = (packet.get(..8), packet.get(COMMON_HEADER_LEN..)) else {
        return 0;
    };
    let mut d = Digest::new(CrcAlgorithm::Crc32Iscsi);
    d.update(head);
    d.update(&[0u8; 4]);
    d.update(tail);
    d.finalize() as u32
}

// ------------------------------------------------------------------------------------------
// Common header view
// ------------------------------------------------------------------------------------------

/// A zero-copy view of an SCTP packet: common header plus chunks (RFC 9260 §3.1).
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps `buffer` without checking its length; accessors then return defaults for
    /// missing bytes rather than panic.
    pub fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps `buffer`, checking that it holds at least a common header.
    pub fn new_checked(buffer: T) -> Result<Packet<T>, WireError> {
        let len = buffer.as_ref().len();
        if len < COMMON_HEADER_LEN {
            return Err(WireError::TooShort { len });
        }
        Ok(Packet { buffer })
    }

    /// Wraps a received `buffer` as [`Packet::new_checked`] does and checks its CRC32c:
    /// the packet the receiver may look into (RFC 9260 §6.8: one that fails is discarded).
    pub fn new_verified(buffer: T) -> Result<Packet<T>, WireError> {
        let pkt = Packet::new_checked(buffer)?;
        pkt.verify_checksum()?;
        Ok(pkt)
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        be16(self.buffer.as_ref(), 0).unwrap_or(0)
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        be16(self.buffer.as_ref(), 2).unwrap_or(0)
    }

    /// Verification tag.
    pub fn verification_tag(&self) -> u32 {
        be32(self.buffer.as_ref(), 4).unwrap_or(0)
    }

    /// The CRC32c value carried in the packet (decoded from its little-endian wire order).
    pub fn checksum(&self) -> u32 {
        self.buffer
            .as_ref()
            .get(8..12)
            .and_then(|b| b.try_into().ok())
            .map(u32::from_le_bytes)
            .unwrap_or(0)
    }

    /// The common header as a value.
    pub fn header(&self) -> CommonHeader {
        CommonHeader {
            src_port: self.src_port(),
            dst_port: self.dst_port(),
            verification_tag: self.verification_tag(),
        }
    }

    /// Checks the CRC32c (RFC 9260 §6.8).
    pub fn verify_checksum(&self) -> Result<(), WireError> {
        let carried = self.checksum();
        let computed = compute_checksum(self.buffer.as_ref());
        if carried == computed {
            Ok(())
        } else {
            Err(WireError::BadChecksum { carried, computed })
        }
    }

    /// The bytes after the common header.
    pub fn payload(&self) -> &[u8] {
        self.buffer.as_ref().get(COMMON_HEADER_LEN..).unwrap_or(&[])
    }

    /// Iterates over the chunks. After the first error the iterator ends.
    pub fn chunks(&self) -> ChunkIter<'_> {
        ChunkIter::new(self.payload())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Writes the common header (the checksum field is left alone).
    pub fn set_header(&mut self, h: &CommonHeader) {
        if let Some(b) = self.buffer.as_mut().get_mut(..8) {
            b[0..2].copy_from_slice(&h.src_port.to_be_bytes());
            b[2..4].copy_from_slice(&h.dst_port.to_be_bytes());
            b[4..8].copy_from_slice(&h.verification_tag.to_be_bytes());
        }
    }

    /// Computes and stores the CRC32c.
    pub fn fill_checksum(&mut self) {
        let c = compute_checksum(self.buffer.as_ref());
        if let Some(b) = self.buffer.as_mut().get_mut(8..12) {
            b.copy_from_slice(&c.to_le_bytes());
        }
    }
}

/// The SCTP common header (RFC 9260 §3.1) without the checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CommonHeader {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Verification tag.
    pub verification_tag: u32,
}

impl CommonHeader {
    /// Appends the header with a zero checksum field to `out`.
    pub fn emit(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.src_port.to_be_bytes());
        out.extend_from_slice(&self.dst_port.to_be_bytes());
        out.extend_from_slice(&self.verification_tag.to_be_bytes());
        out.extend_from_slice(&[0; 4]);
    }
}

// ------------------------------------------------------------------------------------------
// Raw chunks
// ------------------------------------------------------------------------------------------

/// A chunk as it sits in the packet: type, flags and value (without padding).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawChunk<'a> {
    /// Chunk type.
    pub chunk_type: u8,
    /// Chunk flags.
    pub flags: u8,
    /// The chunk value (after the 4-byte header, up to the length field).
    pub value: &'a [u8],
    /// The whole chunk including its header, without padding (what an Unrecognized Chunk
    /// Type error cause reports).
    pub bytes: &'a [u8],
}

/// What to do with a chunk of unknown type, from its two most significant bits
/// (RFC 9260 §3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnknownAction {
    /// `00`: stop processing this packet and discard it.
    Discard,
    /// `01`: stop processing, discard, and report in an ERROR chunk.
    DiscardAndReport,
    /// `10`: skip this chunk and continue.
    Skip,
    /// `11`: skip this chunk, continue, and report in an ERROR chunk.
    SkipAndReport,
}

impl UnknownAction {
    /// The action for an unknown chunk type (upper two bits of the type octet).
    pub fn for_chunk(chunk_type: u8) -> UnknownAction {
        Self::from_bits(chunk_type >> 6)
    }

    /// The action for an unknown parameter type (upper two bits of the 16-bit type;
    /// RFC 9260 §3.2.1). "Discard" there means: stop processing parameters in this chunk.
    pub fn for_param(param_type: u16) -> UnknownAction {
        Self::from_bits((param_type >> 14) as u8)
    }

    fn from_bits(b: u8) -> UnknownAction {
        match b & 3 {
            0 => UnknownAction::Discard,
            1 => UnknownAction::DiscardAndReport,
            2 => UnknownAction::Skip,
            _ => UnknownAction::SkipAndReport,
        }
    }

    /// Whether processing continues after the unknown item.
    pub fn continues(self) -> bool {
        matches!(self, UnknownAction::Skip | UnknownAction::SkipAndReport)
    }

    /// Whether the unknown item is reported to the peer.
    pub fn reports(self) -> bool {
        matches!(
            self,
            UnknownAction::DiscardAndReport | UnknownAction::SkipAndReport
        )
    }
}

/// Iterator over the chunks of a packet payload.
#[derive(Debug, Clone)]
pub struct ChunkIter<'a> {
    buf: &'a [u8],
    offset: usize,
    failed: bool,
}

impl<'a> ChunkIter<'a> {
    /// Iterates over the chunks in `payload` (the bytes after the common header).
    pub fn new(payload: &'a [u8]) -> ChunkIter<'a> {
        ChunkIter {
            buf: payload,
            offset: 0,
            failed: false,
        }
    }
}

impl<'a> Iterator for ChunkIter<'a> {
    type Item = Result<RawChunk<'a>, WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.offset >= self.buf.len() {
            return None;
        }
        let rest = self.buf.get(self.offset..).unwrap_or(&[]);
        let length = be16(rest, 2).map(usize::from).unwrap_or(0);
        if rest.len() < CHUNK_HEADER_LEN || length < CHUNK_HEADER_LEN || length > rest.len() {
            self.failed = true;
            return Some(Err(WireError::BadChunkLength {
                offset: self.offset,
                length,
                remaining: rest.len(),
            }));
        }
        let bytes = &rest[..length];
        let chunk = RawChunk {
            chunk_type: rest[0],
            flags: rest[1],
            value: &bytes[CHUNK_HEADER_LEN..],
            bytes,
        };
        // A last chunk without its padding is tolerated (RFC 9260 §3.2: the receiver ignores
        // padding); anything that follows must start on the padded boundary.
        self.offset = self.offset.saturating_add(pad4(length));
        Some(Ok(chunk))
    }
}

// ------------------------------------------------------------------------------------------
// Parameters (TLVs shared by parameters and error causes)
// ------------------------------------------------------------------------------------------

/// A raw type-length-value item (a parameter or an error cause).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawTlv<'a> {
    /// Type or cause code.
    pub code: u16,
    /// The value after the 4-byte header.
    pub value: &'a [u8],
    /// The whole TLV including its header, without padding.
    pub bytes: &'a [u8],
}

/// Splits `buf` into TLVs (parameters or error causes), each padded to 4 bytes.
pub fn parse_tlvs(buf: &[u8]) -> Result<Vec<RawTlv<'_>>, WireError> {
    let mut out = Vec::new();
    let mut off = 0usize;
    while off < buf.len() {
        let rest = &buf[off..];
        let code = be16(rest, 0).unwrap_or(0);
        let len = be16(rest, 2).map(usize::from).unwrap_or(0);
        if rest.len() < 4 || len < 4 || len > rest.len() {
            return Err(WireError::MalformedParam {
                code,
                reason: "length field below 4 or past the end of the enclosing chunk",
            });
        }
        out.push(RawTlv {
            code,
            value: &rest[4..len],
            bytes: &rest[..len],
        });
        off = off.saturating_add(pad4(len));
    }
    Ok(out)
}

/// Appends a TLV padded to 4 bytes; returns the end offset before the padding.
fn emit_tlv(out: &mut Vec<u8>, code: u16, value: &[u8]) -> usize {
    let len = (4 + value.len()).min(u16::MAX as usize);
    out.extend_from_slice(&code.to_be_bytes());
    out.extend_from_slice(&(len as u16).to_be_bytes());
    out.extend_from_slice(&value[..len - 4]);
    let end = out.len();
    pad_to4(out);
    end
}

fn pad_to4(out: &mut Vec<u8>) {
    while !out.len().is_multiple_of(4) {
        out.push(0);
    }
}

/// A parameter of INIT, INIT ACK, HEARTBEAT or HEARTBEAT ACK (RFC 9260 §3.3.2.1, §3.3.3.1,
/// §3.3.5, §3.3.6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Param {
    /// Heartbeat Info: opaque sender-specific data.
    HeartbeatInfo(Vec<u8>),
    /// An IPv4 address of the sender.
    Ipv4(Ipv4Addr),
    /// An IPv6 address of the sender.
    Ipv6(Ipv6Addr),
    /// The State Cookie (INIT ACK only).
    StateCookie(Vec<u8>),
    /// An unrecognized parameter of the INIT, returned in the INIT ACK: the whole TLV.
    UnrecognizedParam(Vec<u8>),
    /// Cookie Preservative: suggested lifetime increment in milliseconds.
    CookiePreservative(u32),
    /// Host Name Address (deprecated); the raw name bytes.
    HostNameAddress(Vec<u8>),
    /// Supported Address Types: a list of parameter type codes.
    SupportedAddressTypes(Vec<u16>),
    /// Reserved for ECN Capable (no value).
    EcnCapable,
    /// Any other parameter: its type and value.
    Unknown {
        /// Parameter type.
        code: u16,
        /// Value bytes.
        value: Vec<u8>,
    },
}

impl Param {
    /// The parameter type code.
    pub fn code(&self) -> u16 {
        use param_type::*;
        match self {
            Param::HeartbeatInfo(_) => HEARTBEAT_INFO,
            Param::Ipv4(_) => IPV4_ADDRESS,
            Param::Ipv6(_) => IPV6_ADDRESS,
            Param::StateCookie(_) => STATE_COOKIE,
            Param::UnrecognizedParam(_) => UNRECOGNIZED_PARAMETER,
            Param::CookiePreservative(_) => COOKIE_PRESERVATIVE,
            Param::HostNameAddress(_) => HOST_NAME_ADDRESS,
            Param::SupportedAddressTypes(_) => SUPPORTED_ADDRESS_TYPES,
            Param::EcnCapable => ECN_CAPABLE,
            Param::Unknown { code, .. } => *code,
        }
    }

    /// Interprets one TLV.
    pub fn parse(tlv: &RawTlv<'_>) -> Result<Param, WireError> {
        use param_type::*;
        let v = tlv.value;
        let bad = |reason| WireError::MalformedParam {
            code: tlv.code,
            reason,
        };
        Ok(match tlv.code {
            HEARTBEAT_INFO => Param::HeartbeatInfo(v.to_vec()),
            IPV4_ADDRESS => {
                let a: [u8; 4] = v
                    .try_into()
                    .map_err(|_| bad("IPv4 address must be 4 bytes"))?;
                Param::Ipv4(Ipv4Addr::from(a))
            }
            IPV6_ADDRESS => {
                let a: [u8; 16] = v
                    .try_into()
                    .map_err(|_| bad("IPv6 address must be 16 bytes"))?;
                Param::Ipv6(Ipv6Addr::from(a))
            }
            STATE_COOKIE => Param::StateCookie(v.to_vec()),
            UNRECOGNIZED_PARAMETER => Param::UnrecognizedParam(v.to_vec()),
            COOKIE_PRESERVATIVE => {
                let a: [u8; 4] = v
                    .try_into()
                    .map_err(|_| bad("Cookie Preservative must be 4 bytes"))?;
                Param::CookiePreservative(u32::from_be_bytes(a))
            }
            HOST_NAME_ADDRESS => Param::HostNameAddress(v.to_vec()),
            SUPPORTED_ADDRESS_TYPES => {
                if !v.len().is_multiple_of(2) {
                    return Err(bad("Supported Address Types has an odd length"));
                }
                Param::SupportedAddressTypes(
                    v.chunks_exact(2)
                        .map(|c| u16::from_be_bytes([c[0], c[1]]))
                        .collect(),
                )
            }
            ECN_CAPABLE if v.is_empty() => Param::EcnCapable,
            code => Param::Unknown {
                code,
                value: v.to_vec(),
            },
        })
    }

    /// Appends the parameter, padded to 4 bytes; returns the end offset before the padding.
    pub fn emit(&self, out: &mut Vec<u8>) -> usize {
        match self {
            Param::HeartbeatInfo(v)
            | Param::StateCookie(v)
            | Param::UnrecognizedParam(v)
            | Param::HostNameAddress(v) => emit_tlv(out, self.code(), v),
            Param::Ipv4(a) => emit_tlv(out, self.code(), &a.octets()),
            Param::Ipv6(a) => emit_tlv(out, self.code(), &a.octets()),
            Param::CookiePreservative(ms) => emit_tlv(out, self.code(), &ms.to_be_bytes()),
            Param::SupportedAddressTypes(types) => {
                let v: Vec<u8> = types.iter().flat_map(|t| t.to_be_bytes()).collect();
                emit_tlv(out, self.code(), &v)
            }
            Param::EcnCapable => emit_tlv(out, self.code(), &[]),
            Param::Unknown { code, value } => emit_tlv(out, *code, value),
        }
    }

    /// Parses a parameter list.
    pub fn parse_list(buf: &[u8]) -> Result<Vec<Param>, WireError> {
        parse_tlvs(buf)?.iter().map(Param::parse).collect()
    }
}

/// An error cause of an ERROR or ABORT chunk (RFC 9260 §3.3.10).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorCause {
    /// 1: a DATA chunk named a stream that does not exist.
    InvalidStreamId {
        /// The stream identifier.
        stream: u16,
    },
    /// 2: mandatory parameters were missing from an INIT or INIT ACK.
    MissingMandatoryParam(Vec<u16>),
    /// 3: a State Cookie arrived after its lifetime, by this many microseconds.
    StaleCookie {
        /// Measure of Staleness in microseconds.
        staleness_us: u32,
    },
    /// 4: out of resource.
    OutOfResource,
    /// 5: an address parameter (the TLV) could not be resolved.
    UnresolvableAddress(Vec<u8>),
    /// 6: a chunk type was not recognised; the chunk itself.
    UnrecognizedChunk(Vec<u8>),
    /// 7: a mandatory parameter was set to an invalid value.
    InvalidMandatoryParam,
    /// 8: unrecognised parameters of an INIT ACK (the TLVs).
    UnrecognizedParams(Vec<u8>),
    /// 9: a DATA chunk with no user data.
    NoUserData {
        /// Its TSN.
        tsn: u32,
    },
    /// 10: a COOKIE ECHO arrived while shutting down.
    CookieWhileShuttingDown,
    /// 11: a restart tried to add addresses (the new address TLVs).
    RestartWithNewAddresses(Vec<u8>),
    /// 12: the upper layer aborted; optional reason bytes.
    UserInitiatedAbort(Vec<u8>),
    /// 13: protocol violation; optional additional information.
    ProtocolViolation(Vec<u8>),
    /// Any other cause code.
    Unknown {
        /// Cause code.
        code: u16,
        /// Cause-specific information.
        info: Vec<u8>,
    },
}

impl ErrorCause {
    /// The cause code.
    pub fn code(&self) -> u16 {
        use cause_code::*;
        match self {
            ErrorCause::InvalidStreamId { .. } => INVALID_STREAM_ID,
            ErrorCause::MissingMandatoryParam(_) => MISSING_MANDATORY_PARAM,
            ErrorCause::StaleCookie { .. } => STALE_COOKIE,
            ErrorCause::OutOfResource => OUT_OF_RESOURCE,
            ErrorCause::UnresolvableAddress(_) => UNRESOLVABLE_ADDRESS,
            ErrorCause::UnrecognizedChunk(_) => UNRECOGNIZED_CHUNK,
            ErrorCause::InvalidMandatoryParam => INVALID_MANDATORY_PARAM,
            ErrorCause::UnrecognizedParams(_) => UNRECOGNIZED_PARAMS,
            ErrorCause::NoUserData { .. } => NO_USER_DATA,
            ErrorCause::CookieWhileShuttingDown => COOKIE_WHILE_SHUTTING_DOWN,
            ErrorCause::RestartWithNewAddresses(_) => RESTART_WITH_NEW_ADDRESSES,
            ErrorCause::UserInitiatedAbort(_) => USER_INITIATED_ABORT,
            ErrorCause::ProtocolViolation(_) => PROTOCOL_VIOLATION,
            ErrorCause::Unknown { code, .. } => *code,
        }
    }

    /// Interprets one TLV.
    pub fn parse(tlv: &RawTlv<'_>) -> Result<ErrorCause, WireError> {
        use cause_code::*;
        let v = tlv.value;
        let bad = |reason| WireError::MalformedParam {
            code: tlv.code,
            reason,
        };
        Ok(match tlv.code {
            INVALID_STREAM_ID => ErrorCause::InvalidStreamId {
                stream: be16(v, 0).ok_or(bad("Invalid Stream Identifier needs 4 bytes"))?,
            },
            MISSING_MANDATORY_PARAM => {
                let n = be32(v, 0).ok_or(bad("Missing Mandatory Parameter needs a count"))?;
                let list = v.get(4..).unwrap_or(&[]);
                if u64::from(n) * 2 != list.len() as u64 {
                    return Err(bad(
                        "Missing Mandatory Parameter count does not match length",
                    ));
                }
                ErrorCause::MissingMandatoryParam(
                    list.chunks_exact(2)
                        .map(|c| u16::from_be_bytes([c[0], c[1]]))
                        .collect(),
                )
            }
            STALE_COOKIE => ErrorCause::StaleCookie {
                staleness_us: be32(v, 0).ok_or(bad("Stale Cookie needs 4 bytes"))?,
            },
            OUT_OF_RESOURCE => ErrorCause::OutOfResource,
            UNRESOLVABLE_ADDRESS => ErrorCause::UnresolvableAddress(v.to_vec()),
            UNRECOGNIZED_CHUNK => ErrorCause::UnrecognizedChunk(v.to_vec()),
            INVALID_MANDATORY_PARAM => ErrorCause::InvalidMandatoryParam,
            UNRECOGNIZED_PARAMS => ErrorCause::UnrecognizedParams(v.to_vec()),
            NO_USER_DATA => ErrorCause::NoUserData {
                tsn: be32(v, 0).ok_or(bad("No User Data needs 4 bytes"))?,
            },
            COOKIE_WHILE_SHUTTING_DOWN => ErrorCause::CookieWhileShuttingDown,
            RESTART_WITH_NEW_ADDRESSES => ErrorCause::RestartWithNewAddresses(v.to_vec()),
            USER_INITIATED_ABORT => ErrorCause::UserInitiatedAbort(v.to_vec()),
            PROTOCOL_VIOLATION => ErrorCause::ProtocolViolation(v.to_vec()),
            code => ErrorCause::Unknown {
                code,
                info: v.to_vec(),
            },
        })
    }

    /// Appends the cause, padded to 4 bytes; returns the end offset before the padding.
    pub fn emit(&self, out: &mut Vec<u8>) -> usize {
        let code = self.code();
        match self {
            ErrorCause::InvalidStreamId { stream } => {
                let mut v = stream.to_be_bytes().to_vec();
                v.extend_from_slice(&[0, 0]);
                emit_tlv(out, code, &v)
            }
            ErrorCause::MissingMandatoryParam(list) => {
                let mut v = (list.len() as u32).to_be_bytes().to_vec();
                v.extend(list.iter().flat_map(|t| t.to_be_bytes()));
                emit_tlv(out, code, &v)
            }
            ErrorCause::StaleCookie { staleness_us } => {
                emit_tlv(out, code, &staleness_us.to_be_bytes())
            }
            ErrorCause::NoUserData { tsn } => emit_tlv(out, code, &tsn.to_be_bytes()),
            ErrorCause::OutOfResource
            | ErrorCause::InvalidMandatoryParam
            | ErrorCause::CookieWhileShuttingDown => emit_tlv(out, code, &[]),
            ErrorCause::UnresolvableAddress(v)
            | ErrorCause::UnrecognizedChunk(v)
            | ErrorCause::UnrecognizedParams(v)
            | ErrorCause::RestartWithNewAddresses(v)
            | ErrorCause::UserInitiatedAbort(v)
            | ErrorCause::ProtocolViolation(v)
            | ErrorCause::Unknown { info: v, .. } => emit_tlv(out, code, v),
        }
    }

    /// Parses a list of causes.
    pub fn parse_list(buf: &[u8]) -> Result<Vec<ErrorCause>, WireError> {
        parse_tlvs(buf)?.iter().map(ErrorCause::parse).collect()
    }
}

// ------------------------------------------------------------------------------------------
// Chunks
// ------------------------------------------------------------------------------------------

/// DATA chunk flag bits (RFC 9260 §3.3.1).
pub mod data_flags {
    /// I: the receiver should SACK immediately.
    pub const IMMEDIATE: u8 = 0x08;
    /// U: unordered.
    pub const UNORDERED: u8 = 0x04;
    /// B: first fragment of a user message.
    pub const BEGINNING: u8 = 0x02;
    /// E: last fragment of a user message.
    pub const END: u8 = 0x01;
}

/// A DATA chunk (RFC 9260 §3.3.1). The user data borrows from the packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataChunk<'a> {
    /// Flag octet (see [`data_flags`]); reserved bits are kept as received.
    pub flags: u8,
    /// Transmission sequence number.
    pub tsn: u32,
    /// Stream identifier.
    pub stream: u16,
    /// Stream sequence number.
    pub ssn: u16,
    /// Payload protocol identifier.
    pub ppid: u32,
    /// User data.
    pub data: &'a [u8],
}

impl DataChunk<'_> {
    /// U bit.
    pub fn unordered(&self) -> bool {
        self.flags & data_flags::UNORDERED != 0
    }
    /// B bit.
    pub fn beginning(&self) -> bool {
        self.flags & data_flags::BEGINNING != 0
    }
    /// E bit.
    pub fn end(&self) -> bool {
        self.flags & data_flags::END != 0
    }
    /// I bit.
    pub fn immediate(&self) -> bool {
        self.flags & data_flags::IMMEDIATE != 0
    }
}

/// INIT and INIT ACK body (RFC 9260 §3.3.2, §3.3.3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitChunk {
    /// Initiate Tag.
    pub initiate_tag: u32,
    /// Advertised receiver window credit.
    pub a_rwnd: u32,
    /// Number of outbound streams.
    pub outbound_streams: u16,
    /// Number of inbound streams.
    pub inbound_streams: u16,
    /// Initial TSN.
    pub initial_tsn: u32,
    /// Optional and variable-length parameters.
    pub params: Vec<Param>,
}

/// A gap ack block: offsets from the cumulative TSN ack, inclusive (RFC 9260 §3.3.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GapBlock {
    /// Start offset.
    pub start: u16,
    /// End offset.
    pub end: u16,
}

/// The CMT DAC flag of a SACK chunk: the SACK acknowledges two or more DATA packets received
/// since the previous one (delayed ACK for CMT, as FreeBSD and usrsctp define it).
pub const SACK_FLAG_CMT_DAC: u8 = 0x80;

/// A SACK chunk (RFC 9260 §3.3.4).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SackChunk {
    /// Chunk flags: 0 in RFC 9260 (reserved, ignored on receipt); [`SACK_FLAG_CMT_DAC`]
    /// when a CMT receiver with delayed ACK for CMT acknowledges two or more packets.
    pub flags: u8,
    /// Cumulative TSN ack.
    pub cum_tsn_ack: u32,
    /// Advertised receiver window credit.
    pub a_rwnd: u32,
    /// Gap ack blocks.
    pub gaps: Vec<GapBlock>,
    /// Duplicate TSNs.
    pub dup_tsns: Vec<u32>,
}

/// One chunk, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Chunk<'a> {
    /// DATA.
    Data(DataChunk<'a>),
    /// INIT.
    Init(InitChunk),
    /// INIT ACK.
    InitAck(InitChunk),
    /// SACK.
    Sack(SackChunk),
    /// HEARTBEAT with its Heartbeat Info.
    Heartbeat(Vec<u8>),
    /// HEARTBEAT ACK with the echoed Heartbeat Info.
    HeartbeatAck(Vec<u8>),
    /// ABORT.
    Abort {
        /// T bit: the verification tag is the sender's own ("reflected").
        t_bit: bool,
        /// Error causes.
        causes: Vec<ErrorCause>,
    },
    /// SHUTDOWN.
    Shutdown {
        /// Cumulative TSN ack.
        cum_tsn_ack: u32,
    },
    /// SHUTDOWN ACK.
    ShutdownAck,
    /// ERROR.
    Error(Vec<ErrorCause>),
    /// COOKIE ECHO: the cookie.
    CookieEcho(&'a [u8]),
    /// COOKIE ACK.
    CookieAck,
    /// SHUTDOWN COMPLETE.
    ShutdownComplete {
        /// T bit.
        t_bit: bool,
    },
    /// A chunk type this crate does not implement.
    Unknown {
        /// Chunk type.
        chunk_type: u8,
        /// Flags.
        flags: u8,
        /// Value.
        value: &'a [u8],
    },
}

const T_BIT: u8 = 0x01;

impl<'a> Chunk<'a> {
    /// The chunk type code.
    pub fn chunk_type(&self) -> u8 {
        use chunk_type::*;
        match self {
            Chunk::Data(_) => DATA,
            Chunk::Init(_) => INIT,
            Chunk::InitAck(_) => INIT_ACK,
            Chunk::Sack(_) => SACK,
            Chunk::Heartbeat(_) => HEARTBEAT,
            Chunk::HeartbeatAck(_) => HEARTBEAT_ACK,
            Chunk::Abort { .. } => ABORT,
            Chunk::Shutdown { .. } => SHUTDOWN,
            Chunk::ShutdownAck => SHUTDOWN_ACK,
            Chunk::Error(_) => ERROR,
            Chunk::CookieEcho(_) => COOKIE_ECHO,
            Chunk::CookieAck => COOKIE_ACK,
            Chunk::ShutdownComplete { .. } => SHUTDOWN_COMPLETE,
            Chunk::Unknown { chunk_type, .. } => *chunk_type,
        }
    }

    /// A short name for messages.
    pub fn name(chunk_type: u8) -> &'static str {
        use chunk_type::*;
        match chunk_type {
            DATA => "DATA",
            INIT => "INIT",
            INIT_ACK => "INIT ACK",
            SACK => "SACK",
            HEARTBEAT => "HEARTBEAT",
            HEARTBEAT_ACK => "HEARTBEAT ACK",
            ABORT => "ABORT",
            SHUTDOWN => "SHUTDOWN",
            SHUTDOWN_ACK => "SHUTDOWN ACK",
            ERROR => "ERROR",
            COOKIE_ECHO => "COOKIE ECHO",
            COOKIE_ACK => "COOKIE ACK",
            SHUTDOWN_COMPLETE => "SHUTDOWN COMPLETE",
            _ => "unknown",
        }
    }

    /// Interprets a raw chunk. Unknown types become [`Chunk::Unknown`]; the caller applies
    /// [`UnknownAction`].
    pub fn parse(raw: &RawChunk<'a>) -> Result<Chunk<'a>, WireError> {
        use chunk_type::*;
        let v = raw.value;
        let name = Chunk::name(raw.chunk_type);
        let bad = |reason| WireError::MalformedChunk {
            chunk: name,
            reason,
        };
        Ok(match raw.chunk_type {
            DATA => {
                if v.len() < DATA_HEADER_LEN - CHUNK_HEADER_LEN {
                    return Err(bad("shorter than the 16-byte DATA header"));
                }
                Chunk::Data(DataChunk {
                    flags: raw.flags,
                    tsn: be32(v, 0).unwrap_or(0),
                    stream: be16(v, 4).unwrap_or(0),
                    ssn: be16(v, 6).unwrap_or(0),
                    ppid: be32(v, 8).unwrap_or(0),
                    data: &v[12..],
                })
            }
            INIT | INIT_ACK => {
                if v.len() < 16 {
                    return Err(bad("shorter than the 20-byte fixed part"));
                }
                let init = InitChunk {
                    initiate_tag: be32(v, 0).unwrap_or(0),
                    a_rwnd: be32(v, 4).unwrap_or(0),
                    outbound_streams: be16(v, 8).unwrap_or(0),
                    inbound_streams: be16(v, 10).unwrap_or(0),
                    initial_tsn: be32(v, 12).unwrap_or(0),
                    params: Param::parse_list(&v[16..])?,
                };
                if raw.chunk_type == INIT {
                    Chunk::Init(init)
                } else {
                    Chunk::InitAck(init)
                }
            }
            SACK => {
                if v.len() < 12 {
                    return Err(bad("shorter than the 16-byte fixed part"));
                }
                let ngaps = usize::from(be16(v, 8).unwrap_or(0));
                let ndups = usize::from(be16(v, 10).unwrap_or(0));
                if v.len() != 12 + 4 * ngaps + 4 * ndups {
                    return Err(bad(
                        "length does not match the gap block and duplicate counts",
                    ));
                }
                let gaps = v[12..12 + 4 * ngaps]
                    .chunks_exact(4)
                    .map(|c| GapBlock {
                        start: u16::from_be_bytes([c[0], c[1]]),
                        end: u16::from_be_bytes([c[2], c[3]]),
                    })
                    .collect();
                let dup_tsns = v[12 + 4 * ngaps..]
                    .chunks_exact(4)
                    .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
                    .collect();
                Chunk::Sack(SackChunk {
                    flags: raw.flags,
                    cum_tsn_ack: be32(v, 0).unwrap_or(0),
                    a_rwnd: be32(v, 4).unwrap_or(0),
                    gaps,
                    dup_tsns,
                })
            }
            HEARTBEAT | HEARTBEAT_ACK => {
                let tlvs = parse_tlvs(v)?;
                let info = match tlvs.first() {
                    Some(t) if t.code == param_type::HEARTBEAT_INFO => t.value.to_vec(),
                    _ => return Err(bad("does not start with a Heartbeat Info parameter")),
                };
                if raw.chunk_type == HEARTBEAT {
                    Chunk::Heartbeat(info)
                } else {
                    Chunk::HeartbeatAck(info)
                }
            }
            ABORT => Chunk::Abort {
                t_bit: raw.flags & T_BIT != 0,
                causes: ErrorCause::parse_list(v)?,
            },
            SHUTDOWN => {
                if v.len() != 4 {
                    return Err(bad("length must be 8"));
                }
                Chunk::Shutdown {
                    cum_tsn_ack: be32(v, 0).unwrap_or(0),
                }
            }
            SHUTDOWN_ACK => Chunk::ShutdownAck,
            ERROR => Chunk::Error(ErrorCause::parse_list(v)?),
            COOKIE_ECHO => Chunk::CookieEcho(v),
            COOKIE_ACK => Chunk::CookieAck,
            SHUTDOWN_COMPLETE => Chunk::ShutdownComplete {
                t_bit: raw.flags & T_BIT != 0,
            },
            t => Chunk::Unknown {
                chunk_type: t,
                flags: raw.flags,
                value: v,
            },
        })
    }

    /// Bytes this chunk takes on the wire, including padding.
    pub fn buffer_len(&self) -> usize {
        match self {
            Chunk::Data(d) => pad4(DATA_HEADER_LEN + d.data.len()),
            Chunk::CookieEcho(c) => pad4(CHUNK_HEADER_LEN + c.len()),
            Chunk::Sack(s) => 16 + 4 * s.gaps.len() + 4 * s.dup_tsns.len(),
            Chunk::Shutdown { .. } => 8,
            Chunk::ShutdownAck | Chunk::CookieAck | Chunk::ShutdownComplete { .. } => 4,
            _ => {
                let mut v = Vec::new();
                self.emit(&mut v);
                v.len()
            }
        }
    }

    /// Appends the chunk, padded to 4 bytes.
    pub fn emit(&self, out: &mut Vec<u8>) {
        let start = out.len();
        let t = self.chunk_type();
        let mut flags = 0u8;
        out.extend_from_slice(&[t, 0, 0, 0]);
        // End of the chunk content: excludes the padding of a trailing parameter or cause.
        let mut end = None;
        match self {
            Chunk::Data(d) => {
                flags = d.flags;
                out.extend_from_slice(&d.tsn.to_be_bytes());
                out.extend_from_slice(&d.stream.to_be_bytes());
                out.extend_from_slice(&d.ssn.to_be_bytes());
                out.extend_from_slice(&d.ppid.to_be_bytes());
                out.extend_from_slice(d.data);
            }
            Chunk::Init(i) | Chunk::InitAck(i) => {
                out.extend_from_slice(&i.initiate_tag.to_be_bytes());
                out.extend_from_slice(&i.a_rwnd.to_be_bytes());
                out.extend_from_slice(&i.outbound_streams.to_be_bytes());
                out.extend_from_slice(&i.inbound_streams.to_be_bytes());
                out.extend_from_slice(&i.initial_tsn.to_be_bytes());
                for p in &i.params {
                    end = Some(p.emit(out));
                }
            }
            Chunk::Sack(s) => {
                flags = s.flags;
                out.extend_from_slice(&s.cum_tsn_ack.to_be_bytes());
                out.extend_from_slice(&s.a_rwnd.to_be_bytes());
                out.extend_from_slice(&(s.gaps.len().min(0xffff) as u16).to_be_bytes());
                out.extend_from_slice(&(s.dup_tsns.len().min(0xffff) as u16).to_be_bytes());
                for g in s.gaps.iter().take(0xffff) {
                    out.extend_from_slice(&g.start.to_be_bytes());
                    out.extend_from_slice(&g.end.to_be_bytes());
                }
                for d in s.dup_tsns.iter().take(0xffff) {
                    out.extend_from_slice(&d.to_be_bytes());
                }
            }
            Chunk::Heartbeat(info) | Chunk::HeartbeatAck(info) => {
                end = Some(emit_tlv(out, param_type::HEARTBEAT_INFO, info));
            }
            Chunk::Abort { t_bit, causes } => {
                flags = u8::from(*t_bit);
                for c in causes {
                    end = Some(c.emit(out));
                }
            }
            Chunk::Shutdown { cum_tsn_ack } => out.extend_from_slice(&cum_tsn_ack.to_be_bytes()),
            Chunk::ShutdownAck | Chunk::CookieAck => {}
            Chunk::Error(causes) => {
                for c in causes {
                    end = Some(c.emit(out));
                }
            }
            Chunk::CookieEcho(c) => out.extend_from_slice(c),
            Chunk::ShutdownComplete { t_bit } => flags = u8::from(*t_bit),
            Chunk::Unknown {
                flags: f, value, ..
            } => {
                flags = *f;
                out.extend_from_slice(value);
            }
        }
        // RFC 9260 §3.2: the chunk length counts the padding of inner parameters but not the
        // padding of the last one, nor the chunk's own padding.
        let len = (end.unwrap_or(out.len()) - start).min(u16::MAX as usize) as u16;
        out[start + 1] = flags;
        out[start + 2..start + 4].copy_from_slice(&len.to_be_bytes());
        pad_to4(out);
    }
}

/// A whole packet, parsed: the header and every chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedPacket<'a> {
    /// Common header.
    pub header: CommonHeader,
    /// Chunks in order.
    pub chunks: Vec<Chunk<'a>>,
}

/// Parses a complete SCTP packet. With `verify_crc` the CRC32c is checked first.
///
/// This is the entry point for fuzzing the codec: it never panics, whatever `data` holds.
pub fn parse_packet(data: &[u8], verify_crc: bool) -> Result<ParsedPacket<'_>, WireError> {
    let pkt = Packet::new_checked(data)?;
    if verify_crc {
        pkt.verify_checksum()?;
    }
    let header = pkt.header();
    let payload = data.get(COMMON_HEADER_LEN..).unwrap_or(&[]);
    let mut chunks = Vec::new();
    for raw in ChunkIter::new(payload) {
        chunks.push(Chunk::parse(&raw?)?);
    }
    Ok(ParsedPacket { header, chunks })
}

/// Builds a packet: the common header followed by chunks, with the CRC32c filled in.
pub fn build_packet(header: &CommonHeader, chunks: &[Chunk<'_>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(COMMON_HEADER_LEN + 64);
    header.emit(&mut out);
    for c in chunks {
        c.emit(&mut out);
    }
    finish_packet(&mut out);
    out
}

/// Fills in the CRC32c of a packet built in `buf`.
pub fn finish_packet(buf: &mut [u8]) {
    let c = compute_checksum(buf);
    if let Some(b) = buf.get_mut(8..12) {
        b.copy_from_slice(&c.to_le_bytes());
    }
}

/// Fuzzing entry: parses `data` (ignoring the CRC), re-emits what it parsed and parses that
/// again. Returns the parse error for invalid input.
///
/// # Panics
///
/// Only if the codec is inconsistent, i.e. a packet it accepted does not survive an
/// emit/parse round trip unchanged: that is a bug for the fuzzer to find.
pub fn fuzz_roundtrip(data: &[u8]) -> Result<(), WireError> {
    let parsed = parse_packet(data, false)?;
    let bytes = build_packet(&parsed.header, &parsed.chunks);
    let again = parse_packet(&bytes, true);
    assert_eq!(
        again.as_ref(),
        Ok(&parsed),
        "codec round trip changed the packet"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 9260 §6.8: a received packet is looked into only with a good CRC32c; one shorter
    /// than the common header and one with a wrong checksum are refused, each with its
    /// reason.
    #[test]
    fn rfc9260_6_8_new_verified_refuses_short_and_corrupt_packets() {
        let header = CommonHeader {
            src_port: 5001,
            dst_port: 5002,
            verification_tag: 0x1234_5678,
        };
        let good = build_packet(&header, &[]);
        let pkt = Packet::new_verified(&good[..]).expect("a good packet");
        assert_eq!(pkt.header(), header);
        assert!(matches!(
            Packet::new_verified(&good[..11]),
            Err(WireError::TooShort { len: 11 })
        ));
        let mut bad = good.clone();
        bad[4] ^= 1;
        assert!(matches!(
            Packet::new_verified(&bad[..]),
            Err(WireError::BadChecksum { .. })
        ));
    }

    /// RFC 9260 Appendix A: CRC32c of the standard check string "123456789" is 0xE3069283.
    #[test]
    fn rfc9260_appendix_a_crc32c_check_value() {
        let mut d = Digest::new(CrcAlgorithm::Crc32Iscsi);
        d.update(b"123456789");
        assert_eq!(d.finalize() as u32, 0xE306_9283);
    }

    /// RFC 9260 §6.8 / Appendix A: checksum octet order, checked against a packet built by an
    /// independent SCTP implementation (a packet-crafting tool's regression vector: INIT with
    /// an IPv4 address parameter, checksum octets 40 2c 0b 5f on the wire).
    #[test]
    fn rfc9260_appendix_a_checksum_octet_order_matches_independent_vector() {
        let mut pkt = vec![0u8; 12];
        pkt.extend_from_slice(&[0x01, 0x00, 0x00, 0x1c]);
        pkt.extend_from_slice(&[0u8; 16]);
        pkt.extend_from_slice(&[0x00, 0x05, 0x00, 0x08, 0x7f, 0x00, 0x00, 0x01]);
        let mut wire = pkt.clone();
        wire[8..12].copy_from_slice(&[0x40, 0x2c, 0x0b, 0x5f]);
        assert!(
            Packet::new_checked(&wire[..])
                .unwrap()
                .verify_checksum()
                .is_ok()
        );
        finish_packet(&mut pkt);
        assert_eq!(pkt, wire);
    }

    /// RFC 9260 §3.2: chunk length below 4 is an error, never an endless loop.
    #[test]
    fn rfc9260_3_2_zero_chunk_length_is_an_error() {
        let payload = [0u8, 0, 0, 0, 1, 2, 3, 4];
        let mut it = ChunkIter::new(&payload);
        assert!(matches!(
            it.next(),
            Some(Err(WireError::BadChunkLength { length: 0, .. }))
        ));
        assert!(it.next().is_none());
    }

    /// RFC 9260 §3.2: the upper two bits of an unknown chunk type select the action.
    #[test]
    fn rfc9260_3_2_unknown_chunk_action_bits() {
        assert_eq!(UnknownAction::for_chunk(0x3f), UnknownAction::Discard);
        assert_eq!(
            UnknownAction::for_chunk(0x40),
            UnknownAction::DiscardAndReport
        );
        assert_eq!(UnknownAction::for_chunk(0x80), UnknownAction::Skip);
        assert_eq!(UnknownAction::for_chunk(0xc1), UnknownAction::SkipAndReport);
        assert_eq!(UnknownAction::for_param(0x8000), UnknownAction::Skip);
        assert_eq!(
            UnknownAction::for_param(0x4001),
            UnknownAction::DiscardAndReport
        );
    }
}
