//! # softrnic-mpa — MPA framing for iWARP (RFC 5044, updated by RFC 6581)
//!
//! Marker PDU Aligned Framing sits between TCP and DDP. It has two phases, and this
//! crate covers both without doing any I/O (no sockets, clocks, threads or globals):
//!
//! 1. **Connection setup** ([`frame`], [`negotiate`]). The initiator sends an MPA
//!    Request frame, the responder answers with an MPA Reply frame (RFC 5044 §7.1,
//!    enhanced by RFC 6581 with IRD/ORD, the peer-to-peer flag and the
//!    ready-to-receive "RTR" message types). [`frame::ConnFrame`] parses and emits
//!    the frames; [`negotiate::respond`] and [`negotiate::complete`] are pure
//!    functions that turn a local [`negotiate::Config`] and the peer's frame into
//!    the agreed [`negotiate::Session`] (or a reject).
//! 2. **Full operation** ([`fpdu`]). Every ULPDU (a DDP segment) travels in an FPDU:
//!    a 16-bit ULPDU_Length, the ULPDU, 0–3 octets of pad to a 4-octet boundary,
//!    and a 32-bit CRC field; optionally a 4-octet marker is inserted every 512
//!    octets of the TCP stream. [`fpdu::FpduEncoder`] writes FPDUs (gathering
//!    header and payload slices without concatenating them first) and
//!    [`fpdu::Deframer`] is a streaming parser that accepts arbitrary chunks,
//!    strips markers, checks CRCs and yields ULPDUs.
//!
//! ## Design
//!
//! * The wire modules follow the "packet view + representation" split: a
//!   zero-copy [`frame::ConnFramePacket`] over any `AsRef<[u8]>` buffer with
//!   accessors that never panic, beside a plain [`frame::ConnFrame`] value that
//!   `parse`s from and `emit`s to bytes. Parsing distinguishes "need more bytes"
//!   ([`frame::FrameError::Truncated`]) from malformed input.
//! * Errors are typed enums ([`frame::FrameError`], [`negotiate::NegotiationError`],
//!   [`fpdu::DeframeError`], [`fpdu::EncodeError`]); those that end a connection
//!   name the LLP error code ([`term::LlpErrorCode`]) to put in an RDMAP Terminate.
//! * CRC32c comes from [`crc`], a thin wrapper that also fixes the octet order of
//!   the CRC field on the wire.
//! * Interop profiles ([`profile::Profile`]: `rfc`, `siw`, `chelsio`, `t404`,
//!   `neteffect`) turn a peer's name into the [`negotiate::Config`] it expects.
//! * Interpretation choices where the RFC text leaves room (marker pointer of a
//!   marker that opens an FPDU, lenient receive of the alternative reading, what a
//!   reject carries) are documented at the item that implements them.
//!
//! No `unsafe` code is used anywhere in this crate.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod crc;
pub mod fpdu;
pub mod frame;
pub mod negotiate;
pub mod profile;
pub mod term;

pub use fpdu::{
    CrcStatus, DeframeError, Deframer, EncodeError, Fpdu, FpduEncoder, RxConfig, TxConfig, mulpdu,
};
pub use frame::{ConnFrame, ConnFramePacket, EnhancedData, FrameError, FrameKind, RtrSet, RtrType};
pub use negotiate::{
    Accepted, Config, CrcPolicy, NegotiationError, RejectReason, Rejected, Role, Session, complete,
    reject_reply, request, respond,
};
pub use profile::{Profile, Quirks, UnknownProfile};
pub use term::LlpErrorCode;
