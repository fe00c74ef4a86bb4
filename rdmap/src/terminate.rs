//! The Terminate header (RFC 5040 §4.8, Figures 7 and 8).
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! | Layer | EType |  Error Code   |M|D|R|        Reserved         |
//! |  DDP Segment Length (if any)  |  Terminated DDP Header (if any) ...
//! |  ... (14 octets tagged, 18 untagged)  |  Terminated RDMA Header (if any, 28 octets) ...
//! ```
//!
//! The header control bits say what follows: M — the DDP Segment Length is valid; D — the
//! DDP Segment Length and the Terminated DDP Header are present; R — the Terminated RDMA
//! Header (the RDMA Read Request header) is present. The length field is read when M or D is
//! set ("MUST be valid if the M bit is set. It MUST be present when the D bit is set"). The size
//! of the copied DDP header follows from its own T bit.
//!
//! Two receive-side tolerances, both for real peers:
//! * octets after the announced fields are accepted (RFC 5040 §7.1 case 1 describes Terminates
//!   whose unused header fields are present but zeroed); they are returned as the message's
//!   payload by [`crate::Message::parse`];
//! * R set with nothing after the DDP header is accepted with no RDMA header: Linux siw sets R
//!   for Remote Protection errors on Send with Invalidate but attaches only the DDP header.

use crate::Opcode;
use crate::codes::{RdmapCode, TermCause};
use crate::headers::{HeaderTooShort, ReadRequest};
use crate::message::EncodeError;

/// M bit of the Terminate control (bit 16 of the header).
pub const HDRCT_M: u8 = 0x80;
/// D bit of the Terminate control (bit 17 of the header).
pub const HDRCT_D: u8 = 0x40;
/// R bit of the Terminate control (bit 18 of the header).
pub const HDRCT_R: u8 = 0x20;

/// The DDP header of the message a Terminate reports, copied verbatim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TerminatedDdpHeader {
    /// A tagged DDP header (112 bits).
    Tagged([u8; ddp::TAGGED_HEADER_LEN]),
    /// An untagged DDP header (144 bits).
    Untagged([u8; ddp::UNTAGGED_HEADER_LEN]),
}

impl TerminatedDdpHeader {
    /// Copy the DDP header from the start of a DDP segment (ULPDU), choosing its length by the
    /// T bit. `None` if the segment is shorter than that header.
    pub fn from_segment(segment: &[u8]) -> Option<TerminatedDdpHeader> {
        let tagged = segment.first()? & ddp::wire::FLAG_TAGGED != 0;
        if tagged {
            segment
                .first_chunk()
                .map(|h| TerminatedDdpHeader::Tagged(*h))
        } else {
            segment
                .first_chunk()
                .map(|h| TerminatedDdpHeader::Untagged(*h))
        }
    }

    /// The copied octets.
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            TerminatedDdpHeader::Tagged(b) => b,
            TerminatedDdpHeader::Untagged(b) => b,
        }
    }

    /// Decode the copied header.
    pub fn parse(&self) -> Result<ddp::Header, ddp::DdpError> {
        ddp::Segment::parse(self.as_bytes()).map(|(h, _)| h)
    }

    /// The opcode of the RDMAP control field in the copied header, if it is a defined one.
    pub fn opcode(&self) -> Option<Opcode> {
        self.as_bytes()
            .get(1)
            .and_then(|b| Opcode::from_code(b & crate::control::MASK_OPCODE))
    }
}

/// The Terminate Control word read as a peer that lays its fields out from the low bits
/// (a C bitfield on a little-endian host) writes it: Layer in the low and Error Type in the
/// high four bits of the first octet, and M, D, R in the three low bits of the third octet,
/// which RFC 5040 §4.8 reserves (they must be zero). Returns that reading — cause, M, D, R —
/// when the word has reserved bits set exactly where that layout puts M/D/R and nowhere
/// else; `None` for a conformant word (reserved bits clear) or any other pattern.
pub fn low_bit_first_reading(ctrl: [u8; 4]) -> Option<(TermCause, bool, bool, bool)> {
    let flags = ctrl[2];
    if flags & 0x07 == 0 || flags & !0x07 != 0 || ctrl[3] != 0 {
        return None;
    }
    let cause = TermCause::from_wire(ctrl[0] & 0x0f, ctrl[0] >> 4, ctrl[1]);
    Some((cause, flags & 1 != 0, flags & 2 != 0, flags & 4 != 0))
}

/// Error decoding a Terminate header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TerminateError {
    /// A field the control bits announce is cut short.
    #[error(transparent)]
    Truncated(#[from] HeaderTooShort),
}

/// A Terminate header (RFC 5040 §4.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Terminate {
    /// Layer, Error Type and Error Code.
    pub cause: TermCause,
    /// M: the DDP Segment Length is valid.
    pub m: bool,
    /// D: the DDP Segment Length and the Terminated DDP Header are present.
    pub d: bool,
    /// R: the Terminated RDMA Header is present.
    pub r: bool,
    /// DDP Segment Length: the length of the segment the error was found in, as handed up by
    /// the DDP layer. On the wire when M or D is set; zero otherwise.
    pub ddp_segment_length: u16,
    /// The copied DDP header; present exactly when D is set.
    pub ddp_header: Option<TerminatedDdpHeader>,
    /// The copied (or updated) RDMA Read Request header; present when R is set (see the module
    /// notes for R without it).
    pub rdma_header: Option<ReadRequest>,
}

impl Terminate {
    /// Minimum length: the 32-bit Terminate Control and Reserved word.
    pub const MIN_LEN: usize = 4;

    /// A Terminate carrying only the cause, for errors not tied to an incoming message (RFC
    /// 5040 §7.1 case 1, RFC 7306 §8.1 case 1) and for Local Catastrophic and LLP errors
    /// (RFC 5040 Figure 10).
    pub const fn bare(cause: TermCause) -> Terminate {
        Terminate {
            cause,
            m: false,
            d: false,
            r: false,
            ddp_segment_length: 0,
            ddp_header: None,
            rdma_header: None,
        }
    }

    /// The Terminate reporting `cause` found in the incoming DDP segment `segment` (the whole
    /// ULPDU), with the headers RFC 5040 Figure 10 and §7.1 cases 2–3 call for:
    ///
    /// * LLP errors, Local Catastrophic errors and unknown causes: no headers;
    /// * DDP errors and RDMAP Remote Operation Errors: M and D with the segment's length and
    ///   DDP header (if the segment holds a whole DDP header);
    /// * RDMAP Remote Protection Errors: the same, plus R with the RDMA Read Request header
    ///   when the segment is an RDMA Read Request.
    ///
    /// The DDP Segment Length reported is the length of the whole segment, saturated to 16
    /// bits. (Linux siw reports the payload length after the headers instead.)
    pub fn for_segment(cause: TermCause, segment: &[u8]) -> Terminate {
        let mut t = Terminate::bare(cause);
        let headers = match cause {
            TermCause::Mpa(_) | TermCause::Unknown { .. } => false,
            c if c.is_local_catastrophic() => false,
            _ => true,
        };
        if !headers {
            return t;
        }
        let Some(h) = TerminatedDdpHeader::from_segment(segment) else {
            return t;
        };
        t.m = true;
        t.d = true;
        t.ddp_segment_length = u16::try_from(segment.len()).unwrap_or(u16::MAX);
        t.ddp_header = Some(h);
        if matches!(cause, TermCause::Rdmap(RdmapCode::RemoteProtection(_)))
            && let TerminatedDdpHeader::Untagged(_) = h
            && h.opcode() == Some(Opcode::ReadRequest)
            && let Ok((rr, _)) = ReadRequest::parse(&segment[ddp::UNTAGGED_HEADER_LEN..])
        {
            t.r = true;
            t.rdma_header = Some(rr);
        }
        t
    }

    /// Encoded length.
    pub fn len(&self) -> usize {
        let mut n = Self::MIN_LEN;
        if self.m || self.d {
            n += 2;
        }
        if self.d {
            n += self.ddp_header.map_or(0, |h| h.as_bytes().len());
        }
        if self.r && self.rdma_header.is_some() {
            n += ReadRequest::LEN;
        }
        n
    }

    /// Always false: a Terminate header is at least 4 octets.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Parse a Terminate header from the bytes after the DDP header; returns it and the
    /// octets after the announced fields.
    pub fn parse(b: &[u8]) -> Result<(Terminate, &[u8]), TerminateError> {
        let ctrl = b.first_chunk::<4>().ok_or(HeaderTooShort {
            what: "Terminate control",
            needed: Self::MIN_LEN,
            got: b.len(),
        })?;
        let layer = ctrl[0] >> 4;
        let etype = ctrl[0] & 0x0f;
        let ecode = ctrl[1];
        let m = ctrl[2] & HDRCT_M != 0;
        let d = ctrl[2] & HDRCT_D != 0;
        let r = ctrl[2] & HDRCT_R != 0;
        let mut rest = &b[Self::MIN_LEN..];
        let mut ddp_segment_length = 0;
        if m || d {
            let l = rest.first_chunk::<2>().ok_or(HeaderTooShort {
                what: "Terminate DDP Segment Length",
                needed: 2,
                got: rest.len(),
            })?;
            ddp_segment_length = u16::from_be_bytes(*l);
            rest = &rest[2..];
        }
        let mut ddp_header = None;
        if d {
            let needed = match rest.first() {
                Some(c) if c & ddp::wire::FLAG_TAGGED != 0 => ddp::TAGGED_HEADER_LEN,
                _ => ddp::UNTAGGED_HEADER_LEN,
            };
            let h = TerminatedDdpHeader::from_segment(rest).ok_or(HeaderTooShort {
                what: "Terminated DDP Header",
                needed,
                got: rest.len(),
            })?;
            rest = &rest[h.as_bytes().len()..];
            ddp_header = Some(h);
        }
        let mut rdma_header = None;
        if r && !rest.is_empty() {
            let (rr, after) = ReadRequest::parse(rest)?;
            rdma_header = Some(rr);
            rest = after;
        }
        Ok((
            Terminate {
                cause: TermCause::from_wire(layer, etype, ecode),
                m,
                d,
                r,
                ddp_segment_length,
                ddp_header,
                rdma_header,
            },
            rest,
        ))
    }

    /// Write the header into `buf`; returns the number of bytes written.
    ///
    /// Fails when `buf` is too short, when D is set without a DDP header to copy, or when the
    /// cause's layer or error type does not fit in 4 bits.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, EncodeError> {
        let (layer, etype, ecode) = self.cause.layer_etype_ecode();
        if layer > 0xf || etype > 0xf {
            return Err(EncodeError::FieldRange {
                field: "Terminate layer/error type",
            });
        }
        if self.d && self.ddp_header.is_none() {
            return Err(EncodeError::MissingTerminatedHeader);
        }
        let len = self.len();
        let Some(out) = buf.get_mut(..len) else {
            return Err(EncodeError::BufferTooSmall {
                needed: len,
                got: buf.len(),
            });
        };
        out[0] = (layer << 4) | etype;
        out[1] = ecode;
        out[2] = if self.m { HDRCT_M } else { 0 }
            | if self.d { HDRCT_D } else { 0 }
            | if self.r { HDRCT_R } else { 0 };
        out[3] = 0;
        let mut at = Self::MIN_LEN;
        if self.m || self.d {
            out[at..at + 2].copy_from_slice(&self.ddp_segment_length.to_be_bytes());
            at += 2;
        }
        if self.d
            && let Some(h) = &self.ddp_header
        {
            let b = h.as_bytes();
            out[at..at + b.len()].copy_from_slice(b);
            at += b.len();
        }
        if self.r
            && let Some(rr) = &self.rdma_header
        {
            out[at..at + ReadRequest::LEN].copy_from_slice(&rr.to_bytes());
            at += ReadRequest::LEN;
        }
        Ok(at)
    }
}
