//! Direct Data Placement (DDP, RFC 5041) for softrnic: wire format, segmentation and
//! receive-side validation. Sans-IO: every function takes bytes or plain values and returns
//! bytes, values or errors; nothing here does I/O, keeps time or holds global state.
//!
//! # Layout
//!
//! * [`wire`] — the DDP Control Field and the tagged (14-byte) and untagged (18-byte) headers
//!   of RFC 5041 §4. Zero-copy views ([`TaggedPacket`], [`UntaggedPacket`]) with checked
//!   construction sit beside plain values ([`TaggedRepr`], [`UntaggedRepr`], [`Header`]) that
//!   `parse` and `emit`. [`Segment::parse`] dispatches on the T bit. The RsvdULP field is kept
//!   raw: RDMAP gives it meaning (the `rdmap` crate).
//! * [`be`] — big-endian field readers, shared with the protocols built on DDP.
//! * [`segmentation`] — cutting a message into segments that fit the MULPDU
//!   (RFC 5041 §5.2), with TO or MO advancing per segment.
//! * [`check`] — the Data Sink's validation before Placement (RFC 5041 §7.1) as pure functions
//!   over a description of the target buffer or queues.
//! * [`delivery`] — in-order message completion and the ULP Message Length (§4.1, §5.4).
//! * [`error`] — the RFC 5041 §7.2 error numbers ([`DdpCode`]) and [`DdpError`], whose
//!   [`DdpError::layer_etype_ecode`] is the Terminate triple to send.
//!
//! # Versions
//!
//! DV is 1 on everything this crate emits. A received segment with any other DV is rejected
//! with [`DdpError::InvalidVersion`] before the rest of the header is interpreted, because
//! another version's layout is unknown; it maps to *Invalid DDP version* of the tagged or
//! untagged Error Type according to the T bit. The four reserved bits of the control field are
//! sent as zero and not checked on receive (§4.1).
//!
//! # Untagged queue numbers
//!
//! DDP only carries queue numbers; their meaning comes from the ULP. RDMAP's assignments
//! (RFC 5040 §4.1, RFC 7306 §4.1, IANA "RDMAP DDP Untagged Queue Numbers") are in [`qn`].

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod be;
pub mod check;
pub mod delivery;
pub mod error;
pub mod segmentation;
pub mod wire;

pub use check::{
    Access, QueueState, TaggedBuffer, TaggedFault, check_tagged, check_untagged,
    validate_tagged_access,
};
pub use delivery::{Progress, Reassembly, ulp_message_length};
pub use error::{DdpCode, DdpError, MoExpectation, StagProblem, TaggedCode, UntaggedCode};
pub use segmentation::{
    INITIAL_MSN, SegmentationError, Span, Spans, max_payload, next_msn, tagged_segments,
    untagged_segments,
};
pub use wire::{
    BufferTooSmall, DDP_VERSION, Header, Segment, TAGGED_HEADER_LEN, TaggedPacket, TaggedRepr,
    UNTAGGED_HEADER_LEN, UntaggedPacket, UntaggedRepr,
};

/// The untagged queue numbers RDMAP uses (RFC 5040 §4.1 Figure 4, RFC 7306 §4.1 Figure 2 and
/// §10.2).
pub mod qn {
    /// Queue 0: Send, Send with Invalidate, Send with SE, Send with SE and Invalidate, and
    /// (RFC 7306) Immediate Data and Immediate Data with SE.
    pub const SEND: u32 = 0;
    /// Queue 1: RDMA Read Requests and (RFC 7306) Atomic Requests.
    pub const READ_REQUEST: u32 = 1;
    /// Queue 2: Terminate.
    pub const TERMINATE: u32 = 2;
    /// Queue 3 (RFC 7306): Atomic Responses.
    pub const ATOMIC_RESPONSE: u32 = 3;
    /// Number of queues RDMAP defines (QNs `0..COUNT`).
    pub const COUNT: u32 = 4;
}
