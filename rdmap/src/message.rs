//! Whole-ULPDU decoding and header encoding: one DDP segment carrying RDMAP.
//!
//! [`Message::parse`] takes one ULPDU (the DDP segment an MPA FPDU carries, without the MPA
//! length, pad and CRC) and returns a typed [`Header`] — DDP fields, opcode and the
//! opcode-specific RDMAP header — plus the payload slice. Malformed input is a
//! [`DecodeError`] whose [`DecodeError::term_cause`] is the Terminate to send.
//!
//! [`Header::emit`] writes the DDP + RDMAP header bytes for any message so a sender can
//! prepend them to a payload slice; [`segments`] cuts a Write, Read Response or Send into
//! MULPDU-sized segments with their headers.
//!
//! # Validation order and Terminate causes
//!
//! 1. DDP (RFC 5041): DV must be 1 → DDP *Invalid DDP version*; the segment must hold its DDP
//!    header → see [`ddp::DdpError::Truncated`].
//! 2. RV must be 1 (RFC 5040 §4.1, §7.2 item 3) → RDMAP Remote Operation *Invalid RDMAP
//!    version* (0x0/0x2/0x05).
//! 3. The opcode must be defined (RFC 5040 §7.2 item 2; 0xC–0xF are reserved) and used with
//!    its buffer model (RFC 5040 Figure 4: e.g. a tagged Send is not valid) → RDMAP Remote
//!    Operation *Unexpected OpCode* (0x0/0x2/0x06).
//! 4. An untagged message must name its opcode's queue (RFC 5040 §5.2.1, §5.3, §5.4; RFC 7306
//!    §5.2, §6.3) → DDP *Invalid QN* (0x1/0x2/0x01).
//! 5. Messages that carry an RDMAP header but no ULP payload (Read Request, Terminate,
//!    Immediate Data, Atomic Request/Response) must be one segment: MO 0 → else DDP *Invalid
//!    MO* (0x1/0x2/0x04); L set → else, like a header of the wrong length, RDMAP Remote
//!    Operation *Catastrophic error, localized to RDMAP Stream* (0x0/0x2/0x07). The RFCs name
//!    no code for a header of the wrong length; 0x07 is what RFC 7306 §8.2 prescribes for a
//!    malformed Atomic Request, and is used for all of them. A Terminate may be followed by
//!    extra octets (see [`crate::terminate`]).

use core::ops::Range;

use ddp::{Header as DdpHeader, TaggedRepr, UntaggedRepr, qn};

use crate::codes::{OperationCode, TermCause};
use crate::control::{MASK_OPCODE, Opcode, RDMAP_VERSION, RdmapControl, control_byte};
use crate::headers::{
    AtomicRequest, AtomicResponse, HeaderTooShort, IMMEDIATE_DATA_LEN, ReadRequest,
};
use crate::terminate::{Terminate, TerminateError};

/// The header of one DDP segment carrying RDMAP: DDP fields, opcode and any RDMAP header.
///
/// Each variant holds exactly the fields its message has on the wire; fields that are fixed
/// for the opcode (buffer model, queue number, zero Invalidate STag) are implied. Messages that
/// are always a single segment have no `last` or `mo` field (L is 1 and MO is 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Header {
    /// RDMA Write (tagged).
    RdmaWrite {
        /// L flag.
        last: bool,
        /// Data Sink STag.
        stag: u32,
        /// Data Sink Tagged Offset of this segment.
        to: u64,
    },
    /// RDMA Read Request (untagged, QN 1).
    ReadRequest {
        /// MSN on queue 1.
        msn: u32,
        /// The Read Request header.
        request: ReadRequest,
    },
    /// RDMA Read Response (tagged).
    ReadResponse {
        /// L flag.
        last: bool,
        /// Data Sink STag (from the Read Request).
        stag: u32,
        /// Data Sink Tagged Offset of this segment.
        to: u64,
    },
    /// Send, Send with Invalidate, Send with SE, Send with SE and Invalidate (untagged, QN 0).
    Send {
        /// Send with Solicited Event (opcodes 0x5, 0x6).
        solicited_event: bool,
        /// The STag to invalidate (opcodes 0x4, 0x6).
        invalidate_stag: Option<u32>,
        /// L flag.
        last: bool,
        /// MSN on queue 0.
        msn: u32,
        /// Message Offset of this segment.
        mo: u32,
    },
    /// Terminate (untagged, QN 2).
    Terminate {
        /// MSN on queue 2.
        msn: u32,
        /// The Terminate header.
        terminate: Terminate,
    },
    /// Immediate Data, Immediate Data with SE (RFC 7306; untagged, QN 0).
    ImmediateData {
        /// Immediate Data with Solicited Event (opcode 0x9).
        solicited_event: bool,
        /// MSN on queue 0.
        msn: u32,
        /// The 8 octets of Immediate Data.
        data: [u8; IMMEDIATE_DATA_LEN],
    },
    /// Atomic Request (RFC 7306; untagged, QN 1).
    AtomicRequest {
        /// MSN on queue 1.
        msn: u32,
        /// The Atomic Request header.
        request: AtomicRequest,
    },
    /// Atomic Response (RFC 7306; untagged, QN 3).
    AtomicResponse {
        /// MSN on queue 3.
        msn: u32,
        /// The Atomic Response header.
        response: AtomicResponse,
    },
}

/// A decoded ULPDU: the header and the ULP payload that follows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Message<'a> {
    /// DDP and RDMAP header.
    pub header: Header,
    /// ULP payload (Write, Read Response, Send); for a Terminate, any octets after its
    /// announced fields; empty otherwise.
    pub payload: &'a [u8],
}

/// A ULPDU that is not a valid RDMAP message. [`DecodeError::term_cause`] is the Terminate
/// that reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The DDP header is invalid (wrong DV, or the segment is shorter than the header).
    #[error(transparent)]
    Ddp(#[from] ddp::DdpError),
    /// RV is not 1.
    #[error("RDMAP version {version}; only version 1 (RFC 5040) is spoken")]
    InvalidVersion {
        /// The RV received.
        version: u8,
    },
    /// The opcode is reserved (0xC–0xF).
    #[error("reserved RDMAP opcode {opcode:#x}")]
    ReservedOpcode {
        /// The 4-bit opcode.
        opcode: u8,
    },
    /// The opcode arrived on the wrong buffer model (e.g. a tagged Send).
    #[error(
        "{opcode} arrived {} but must be {}",
        if *.tagged { "tagged" } else { "untagged" },
        if *.tagged { "untagged" } else { "tagged" }
    )]
    WrongBufferModel {
        /// The opcode.
        opcode: Opcode,
        /// The T bit received.
        tagged: bool,
    },
    /// The untagged message names another queue than its opcode's.
    #[error("{opcode} arrived on queue {qn} but belongs on queue {expected}")]
    WrongQueue {
        /// The opcode.
        opcode: Opcode,
        /// The QN received.
        qn: u32,
        /// The opcode's QN.
        expected: u32,
    },
    /// A single-segment message has a non-zero Message Offset.
    #[error("{opcode} must be a single segment at MO 0, but has MO {mo}")]
    NotAtOffsetZero {
        /// The opcode.
        opcode: Opcode,
        /// The MO received.
        mo: u32,
    },
    /// A single-segment message has L clear: it would continue beyond its header.
    #[error("{opcode} must be a single segment, but has the L flag clear")]
    NotLastSegment {
        /// The opcode.
        opcode: Opcode,
    },
    /// The RDMAP header is cut short.
    #[error("{opcode}: {source}")]
    Truncated {
        /// The opcode.
        opcode: Opcode,
        /// What is missing.
        source: HeaderTooShort,
    },
    /// A message without ULP payload carries octets after its header.
    #[error(
        "{opcode} carries {extra} octets after its {header_len}-octet header; it allows no payload"
    )]
    TrailingData {
        /// The opcode.
        opcode: Opcode,
        /// Header length.
        header_len: usize,
        /// Octets after the header.
        extra: usize,
    },
}

impl DecodeError {
    /// The Terminate cause that reports this error (see the module documentation).
    pub fn term_cause(&self) -> TermCause {
        use crate::codes::{DdpCode, UntaggedCode};
        match self {
            DecodeError::Ddp(e) => TermCause::from(*e),
            DecodeError::InvalidVersion { .. } => {
                TermCause::operation(OperationCode::InvalidVersion)
            }
            DecodeError::ReservedOpcode { .. } | DecodeError::WrongBufferModel { .. } => {
                TermCause::operation(OperationCode::UnexpectedOpcode)
            }
            DecodeError::WrongQueue { .. } => {
                TermCause::Ddp(DdpCode::Untagged(UntaggedCode::InvalidQn))
            }
            DecodeError::NotAtOffsetZero { .. } => {
                TermCause::Ddp(DdpCode::Untagged(UntaggedCode::InvalidMo))
            }
            DecodeError::NotLastSegment { .. }
            | DecodeError::Truncated { .. }
            | DecodeError::TrailingData { .. } => {
                TermCause::operation(OperationCode::CatastrophicStream)
            }
        }
    }

    /// The Terminate for this error found in `segment` (the ULPDU that failed to decode),
    /// with the copied headers RFC 5040 Figure 10 calls for. When the DDP version, the RDMAP
    /// version or the opcode is what is wrong, the segment's layout is unknown and no headers
    /// are copied (Linux siw does the same).
    pub fn terminate(&self, segment: &[u8]) -> Terminate {
        match self {
            DecodeError::InvalidVersion { .. } | DecodeError::ReservedOpcode { .. } => {
                Terminate::bare(self.term_cause())
            }
            DecodeError::Ddp(ddp::DdpError::InvalidVersion { .. }) => {
                Terminate::bare(self.term_cause())
            }
            _ => Terminate::for_segment(self.term_cause(), segment),
        }
    }
}

/// Errors of header encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// The output buffer is too short.
    #[error("output buffer of {got} bytes cannot hold the {needed}-byte header")]
    BufferTooSmall {
        /// Bytes needed.
        needed: usize,
        /// Bytes available.
        got: usize,
    },
    /// A field value does not fit its wire width.
    #[error("{field} does not fit its wire field")]
    FieldRange {
        /// Which field.
        field: &'static str,
    },
    /// A Terminate has the D bit set but no DDP header to copy.
    #[error("Terminate has the D bit set but no Terminated DDP Header")]
    MissingTerminatedHeader,
}

impl Header {
    /// The message's opcode.
    pub const fn opcode(&self) -> Opcode {
        match self {
            Header::RdmaWrite { .. } => Opcode::RdmaWrite,
            Header::ReadRequest { .. } => Opcode::ReadRequest,
            Header::ReadResponse { .. } => Opcode::ReadResponse,
            Header::Send {
                solicited_event,
                invalidate_stag,
                ..
            } => match (*solicited_event, invalidate_stag.is_some()) {
                (false, false) => Opcode::Send,
                (false, true) => Opcode::SendInvalidate,
                (true, false) => Opcode::SendSe,
                (true, true) => Opcode::SendSeInvalidate,
            },
            Header::Terminate { .. } => Opcode::Terminate,
            Header::ImmediateData {
                solicited_event, ..
            } => {
                if *solicited_event {
                    Opcode::ImmediateDataSe
                } else {
                    Opcode::ImmediateData
                }
            }
            Header::AtomicRequest { .. } => Opcode::AtomicRequest,
            Header::AtomicResponse { .. } => Opcode::AtomicResponse,
        }
    }

    /// The L flag of the segment.
    pub const fn last(&self) -> bool {
        match self {
            Header::RdmaWrite { last, .. }
            | Header::ReadResponse { last, .. }
            | Header::Send { last, .. } => *last,
            _ => true,
        }
    }

    /// The RDMAP Control Field (RsvdULP octet 0).
    pub const fn rdmap_control(&self) -> u8 {
        control_byte(self.opcode())
    }

    /// The DDP header of the segment.
    pub fn ddp_header(&self) -> DdpHeader {
        let ctrl = self.rdmap_control();
        let untagged = |qn: u32, msn: u32, mo: u32, inv: u32| {
            let i = inv.to_be_bytes();
            DdpHeader::Untagged(UntaggedRepr {
                last: self.last(),
                rsvd_ulp: [ctrl, i[0], i[1], i[2], i[3]],
                qn,
                msn,
                mo,
            })
        };
        match *self {
            Header::RdmaWrite { last, stag, to } | Header::ReadResponse { last, stag, to } => {
                DdpHeader::Tagged(TaggedRepr {
                    last,
                    rsvd_ulp: ctrl,
                    stag,
                    to,
                })
            }
            Header::ReadRequest { msn, .. } => untagged(qn::READ_REQUEST, msn, 0, 0),
            Header::Send {
                invalidate_stag,
                msn,
                mo,
                ..
            } => untagged(qn::SEND, msn, mo, invalidate_stag.unwrap_or(0)),
            Header::Terminate { msn, .. } => untagged(qn::TERMINATE, msn, 0, 0),
            Header::ImmediateData { msn, .. } => untagged(qn::SEND, msn, 0, 0),
            Header::AtomicRequest { msn, .. } => untagged(qn::READ_REQUEST, msn, 0, 0),
            Header::AtomicResponse { msn, .. } => untagged(qn::ATOMIC_RESPONSE, msn, 0, 0),
        }
    }

    /// Length of the RDMAP header that follows the DDP header.
    pub fn rdmap_header_len(&self) -> usize {
        match self {
            Header::ReadRequest { .. } => ReadRequest::LEN,
            Header::Terminate { terminate, .. } => terminate.len(),
            Header::ImmediateData { .. } => IMMEDIATE_DATA_LEN,
            Header::AtomicRequest { .. } => AtomicRequest::LEN,
            Header::AtomicResponse { .. } => AtomicResponse::LEN,
            _ => 0,
        }
    }

    /// Total header length: DDP header plus RDMAP header.
    pub fn header_len(&self) -> usize {
        self.ddp_header().header_len() + self.rdmap_header_len()
    }

    /// Write the DDP and RDMAP headers into `buf`; returns the number of bytes written. The
    /// payload (for Write, Read Response and Send) goes right after.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, EncodeError> {
        let needed = self.header_len();
        if buf.len() < needed {
            return Err(EncodeError::BufferTooSmall {
                needed,
                got: buf.len(),
            });
        }
        let d = self
            .ddp_header()
            .emit(buf)
            .map_err(|e| EncodeError::BufferTooSmall {
                needed: e.needed,
                got: e.got,
            })?;
        let rest = &mut buf[d..];
        let r = match self {
            Header::ReadRequest { request, .. } => copy(rest, &request.to_bytes()),
            Header::Terminate { terminate, .. } => terminate.emit(rest)?,
            Header::ImmediateData { data, .. } => copy(rest, data),
            Header::AtomicRequest { request, .. } => copy(rest, &request.to_bytes()),
            Header::AtomicResponse { response, .. } => copy(rest, &response.to_bytes()),
            _ => 0,
        };
        Ok(d + r)
    }

    /// The header as a byte vector.
    pub fn to_vec(&self) -> Result<Vec<u8>, EncodeError> {
        let mut v = vec![0u8; self.header_len()];
        let n = self.emit(&mut v)?;
        v.truncate(n);
        Ok(v)
    }

    /// The whole ULPDU: header followed by `payload`.
    pub fn encode(&self, payload: &[u8]) -> Result<Vec<u8>, EncodeError> {
        let mut v = self.to_vec()?;
        v.extend_from_slice(payload);
        Ok(v)
    }
}

/// The STag carried by the zero-length tagged RTR messages built here. RFC 5041 §5.2 forbids
/// checking the STag and TO of a zero-length tagged message, but Chelsio adapters reject an
/// RTR whose STag is 0, so a non-zero STag is sent (Linux siw sends 1 as well).
pub const RTR_STAG: u32 = 1;

impl Header {
    /// The zero-length RDMA Write used as Ready-to-Receive indication (RFC 6581 §9, control
    /// flag C): last, STag [`RTR_STAG`], TO 0.
    pub const fn rtr_write() -> Header {
        Header::RdmaWrite {
            last: true,
            stag: RTR_STAG,
            to: 0,
        }
    }

    /// The zero-length RDMA Read Request used as Ready-to-Receive indication (RFC 6581 §9,
    /// control flag D), with MSN `msn` on queue 1: size 0, both STags [`RTR_STAG`], both TOs
    /// 0. The peer answers with a zero-length Read Response (RFC 5040 §5.2.1).
    pub const fn rtr_read(msn: u32) -> Header {
        Header::ReadRequest {
            msn,
            request: ReadRequest {
                sink_stag: RTR_STAG,
                sink_to: 0,
                size: 0,
                source_stag: RTR_STAG,
                source_to: 0,
            },
        }
    }

    /// The zero-length Send used as Ready-to-Receive indication (RFC 6581 §9, control flag
    /// B), with MSN `msn` on queue 0. It consumes a receive buffer at the peer (RFC 5040 §5.3).
    pub const fn rtr_send(msn: u32) -> Header {
        Header::Send {
            solicited_event: false,
            invalidate_stag: None,
            last: true,
            msn,
            mo: 0,
        }
    }
}

fn copy(dst: &mut [u8], src: &[u8]) -> usize {
    dst[..src.len()].copy_from_slice(src);
    src.len()
}

fn single_segment(opcode: Opcode, u: &UntaggedRepr) -> Result<(), DecodeError> {
    if u.mo != 0 {
        return Err(DecodeError::NotAtOffsetZero { opcode, mo: u.mo });
    }
    if !u.last {
        return Err(DecodeError::NotLastSegment { opcode });
    }
    Ok(())
}

fn no_trailing(opcode: Opcode, header_len: usize, rest: &[u8]) -> Result<(), DecodeError> {
    if rest.is_empty() {
        Ok(())
    } else {
        Err(DecodeError::TrailingData {
            opcode,
            header_len,
            extra: rest.len(),
        })
    }
}

impl<'a> Message<'a> {
    /// Decode one ULPDU (see the module documentation for the checks and their order).
    pub fn parse(ulpdu: &'a [u8]) -> Result<Message<'a>, DecodeError> {
        let (ddp, body) = ddp::Segment::parse(ulpdu)?;
        let ctrl = RdmapControl::from_byte(ddp.rsvd_ulp_first());
        if ctrl.version != RDMAP_VERSION {
            return Err(DecodeError::InvalidVersion {
                version: ctrl.version,
            });
        }
        let opcode =
            Opcode::from_code(ctrl.opcode & MASK_OPCODE).ok_or(DecodeError::ReservedOpcode {
                opcode: ctrl.opcode,
            })?;
        let u = match ddp {
            DdpHeader::Tagged(t) => {
                let header = match opcode {
                    Opcode::RdmaWrite => Header::RdmaWrite {
                        last: t.last,
                        stag: t.stag,
                        to: t.to,
                    },
                    Opcode::ReadResponse => Header::ReadResponse {
                        last: t.last,
                        stag: t.stag,
                        to: t.to,
                    },
                    _ => {
                        return Err(DecodeError::WrongBufferModel {
                            opcode,
                            tagged: true,
                        });
                    }
                };
                return Ok(Message {
                    header,
                    payload: body,
                });
            }
            DdpHeader::Untagged(u) => u,
        };
        let Some(expected) = opcode.queue_number() else {
            return Err(DecodeError::WrongBufferModel {
                opcode,
                tagged: false,
            });
        };
        if u.qn != expected {
            return Err(DecodeError::WrongQueue {
                opcode,
                qn: u.qn,
                expected,
            });
        }
        let truncated = |source: HeaderTooShort| DecodeError::Truncated { opcode, source };
        let msn = u.msn;
        let (header, payload) = match opcode {
            Opcode::Send | Opcode::SendInvalidate | Opcode::SendSe | Opcode::SendSeInvalidate => {
                let [_, a, b, c, d] = u.rsvd_ulp;
                let header = Header::Send {
                    solicited_event: opcode.solicited_event(),
                    invalidate_stag: opcode
                        .has_invalidate_stag()
                        .then(|| u32::from_be_bytes([a, b, c, d])),
                    last: u.last,
                    msn,
                    mo: u.mo,
                };
                (header, body)
            }
            Opcode::ReadRequest => {
                single_segment(opcode, &u)?;
                let (request, rest) = ReadRequest::parse(body).map_err(truncated)?;
                no_trailing(opcode, ReadRequest::LEN, rest)?;
                (Header::ReadRequest { msn, request }, rest)
            }
            Opcode::Terminate => {
                single_segment(opcode, &u)?;
                let (terminate, rest) = Terminate::parse(body).map_err(|e| match e {
                    TerminateError::Truncated(s) => truncated(s),
                })?;
                (Header::Terminate { msn, terminate }, rest)
            }
            Opcode::ImmediateData | Opcode::ImmediateDataSe => {
                single_segment(opcode, &u)?;
                let data = *body.first_chunk::<IMMEDIATE_DATA_LEN>().ok_or_else(|| {
                    truncated(HeaderTooShort {
                        what: "Immediate Data",
                        needed: IMMEDIATE_DATA_LEN,
                        got: body.len(),
                    })
                })?;
                let rest = &body[IMMEDIATE_DATA_LEN..];
                no_trailing(opcode, IMMEDIATE_DATA_LEN, rest)?;
                let header = Header::ImmediateData {
                    solicited_event: opcode.solicited_event(),
                    msn,
                    data,
                };
                (header, rest)
            }
            Opcode::AtomicRequest => {
                single_segment(opcode, &u)?;
                let (request, rest) = AtomicRequest::parse(body).map_err(truncated)?;
                no_trailing(opcode, AtomicRequest::LEN, rest)?;
                (Header::AtomicRequest { msn, request }, rest)
            }
            Opcode::AtomicResponse => {
                single_segment(opcode, &u)?;
                let (response, rest) = AtomicResponse::parse(body).map_err(truncated)?;
                no_trailing(opcode, AtomicResponse::LEN, rest)?;
                (Header::AtomicResponse { msn, response }, rest)
            }
            Opcode::RdmaWrite | Opcode::ReadResponse => {
                return Err(DecodeError::WrongBufferModel {
                    opcode,
                    tagged: false,
                });
            }
        };
        Ok(Message { header, payload })
    }

    /// The message's opcode.
    pub const fn opcode(&self) -> Opcode {
        self.header.opcode()
    }

    /// The DDP header of the segment.
    pub fn ddp_header(&self) -> DdpHeader {
        self.header.ddp_header()
    }
}

/// Errors of [`segments`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SegmentsError {
    /// DDP segmentation failed (MULPDU too small, message too long, TO wrap).
    #[error(transparent)]
    Ddp(#[from] ddp::SegmentationError),
    /// The header is not of a segmentable message; single-segment messages are sent whole.
    #[error("{opcode} is always a single segment")]
    NotSegmentable {
        /// The opcode.
        opcode: Opcode,
    },
}

/// Cut a Write, Read Response or Send of `payload_len` octets into segments for `mulpdu`
/// (RFC 5041 §5.2): the header of each segment and the payload range it carries.
///
/// `first` is the header of the first segment: its TO (tagged) is the message's initial TO,
/// its `last` and `mo` are ignored. Single-segment messages are refused.
pub fn segments(
    first: &Header,
    payload_len: u64,
    mulpdu: usize,
) -> Result<Vec<(Header, Range<usize>)>, SegmentsError> {
    let ctrl = first.rdmap_control();
    match *first {
        Header::RdmaWrite { stag, to, .. } | Header::ReadResponse { stag, to, .. } => {
            let write = matches!(first, Header::RdmaWrite { .. });
            Ok(ddp::tagged_segments(ctrl, stag, to, payload_len, mulpdu)?
                .map(|(t, r)| {
                    let h = if write {
                        Header::RdmaWrite {
                            last: t.last,
                            stag: t.stag,
                            to: t.to,
                        }
                    } else {
                        Header::ReadResponse {
                            last: t.last,
                            stag: t.stag,
                            to: t.to,
                        }
                    };
                    (h, r)
                })
                .collect())
        }
        Header::Send {
            solicited_event,
            invalidate_stag,
            msn,
            ..
        } => {
            let i = invalidate_stag.unwrap_or(0).to_be_bytes();
            let rsvd = [ctrl, i[0], i[1], i[2], i[3]];
            Ok(
                ddp::untagged_segments(rsvd, qn::SEND, msn, payload_len, mulpdu)?
                    .map(|(u, r)| {
                        let h = Header::Send {
                            solicited_event,
                            invalidate_stag,
                            last: u.last,
                            msn,
                            mo: u.mo,
                        };
                        (h, r)
                    })
                    .collect(),
            )
        }
        _ => Err(SegmentsError::NotSegmentable {
            opcode: first.opcode(),
        }),
    }
}
