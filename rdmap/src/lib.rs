//! The Remote Direct Memory Access Protocol (RDMAP, RFC 5040) with the RFC 7306 extensions
//! (Immediate Data, Atomic Operations) for softrnic. Sans-IO: bytes and values in, bytes,
//! values and errors out.
//!
//! RDMAP rides in DDP (the `ddp` crate): its control field is the first RsvdULP octet of every
//! DDP header, the Invalidate STag the next four octets of untagged headers, and some messages
//! add an RDMAP header after the DDP header.
//!
//! # Layout
//!
//! * [`control`] — the RDMAP Control Field and [`Opcode`] with, per opcode, the buffer model,
//!   queue number, Invalidate STag use and header (RFC 5040 Figure 4/5, RFC 7306 Figure 2/3).
//! * [`headers`] — RDMA Read Request (28 octets), Atomic Request (52), Atomic Response (12)
//!   and Immediate Data (8).
//! * [`terminate`] — the Terminate header with its M/D/R header control bits and copied
//!   headers (RFC 5040 §4.8).
//! * [`codes`] — the Terminate error codes of every layer and [`TermCause`], which decodes any
//!   triple without failing.
//! * [`message`] — [`Message::parse`], the decoder of a whole ULPDU shared by the capture
//!   decoder and the stack, with typed [`DecodeError`]s that know their Terminate; the header
//!   encoder ([`Header::emit`]), segmentation of Writes, Read Responses and Sends, and the
//!   zero-length Ready-to-Receive messages of RFC 6581 ([`Header::rtr_write`] and friends).
//! * [`responder`] — responder rules: Read Request and Atomic Request validation, Send with
//!   Invalidate, IRD accounting; and the requester's check of a Read Response.
//!
//! # Choices where the RFCs leave room
//!
//! Every choice below is documented at its item; in short:
//! * RV must be 01b (RFC 5040's 00b is the older RDMA Consortium version, used only with its
//!   own MPA revision).
//! * Headers of the wrong length, and single-segment messages that are not one segment, are
//!   reported as Remote Operation Error *Catastrophic error, localized to RDMAP Stream*.
//! * A missing access right on a tagged sink is RDMAP *Access rights violation* (DDP has no
//!   such code).
//! * Reads beyond the IRD are DDP *MSN range is not valid* (the IRD is QN 1's buffer count).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod codes;
pub mod control;
pub mod headers;
pub mod message;
pub mod responder;
pub mod terminate;

pub use codes::{MpaCode, OperationCode, ProtectionCode, RdmapCode, TermCause};
pub use control::{Opcode, RDMAP_VERSION, RdmapControl, control_byte};
pub use headers::{
    AtomicOp, AtomicRequest, AtomicResponse, HeaderTooShort, IMMEDIATE_DATA_LEN, ReadRequest,
};
pub use message::{DecodeError, EncodeError, Header, Message, RTR_STAG, SegmentsError, segments};
pub use responder::{
    ATOMIC_OPERAND_LEN, Ird, check_read_response, sink_access, validate_atomic_request,
    validate_invalidate, validate_read_request,
};
pub use terminate::{Terminate, TerminateError, TerminatedDdpHeader, low_bit_first_reading};

pub use ddp;
