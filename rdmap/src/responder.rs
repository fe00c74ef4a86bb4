//! Responder-side rules as pure functions: RDMA Read Request validation (RFC 5040 §5.2.1,
//! §7.2), Send with Invalidate (RFC 5040 §5.3, §7.2), Atomic Request validation (RFC 7306
//! §5.1–§5.2, §8.2) and inbound Read Request accounting against the IRD (RFC 5040 §5.2.2,
//! §6.1); and, for the requester, the optional check of a Read Response against its Read
//! Request (RFC 5040 §5.2.2).
//!
//! The buffer an STag resolves to is described by [`ddp::TaggedBuffer`]; the same fault
//! classification as DDP's is used ([`ddp::validate_tagged_access`]) but reported with the
//! RDMAP Remote Protection codes of RFC 5040 §4.8.

use ddp::{Access, TaggedBuffer, TaggedFault};

use crate::codes::{DdpCode, OperationCode, ProtectionCode, TaggedCode, TermCause, UntaggedCode};
use crate::control::Opcode;
use crate::headers::{AtomicRequest, ReadRequest};

/// The access right the Data Sink's buffer must grant for a tagged message to be Placed in
/// it: remote write for RDMA Write, and also for RDMA Read Response — in iWARP the Read
/// Response is Placed through the Data Sink STag the requester advertised in its Read Request
/// (RFC 5040 §4.4, §5.2.2), so that buffer is a remotely writable Tagged Buffer. `None` for
/// untagged messages.
pub const fn sink_access(opcode: Opcode) -> Option<Access> {
    match opcode {
        Opcode::RdmaWrite | Opcode::ReadResponse => Some(Access::REMOTE_WRITE),
        _ => None,
    }
}

fn protection(fault: TaggedFault) -> TermCause {
    TermCause::protection(match fault {
        TaggedFault::InvalidStag(_) => ProtectionCode::InvalidStag,
        TaggedFault::NotAssociated => ProtectionCode::StagNotAssociated,
        TaggedFault::AccessRights { .. } => ProtectionCode::AccessRights,
        TaggedFault::ToWrap => ProtectionCode::ToWrap,
        TaggedFault::BaseOrBounds => ProtectionCode::BaseOrBounds,
    })
}

/// Validate an incoming RDMA Read Request against the Data Source buffer its Source STag
/// resolves to (`None` if nothing is registered under the STag's index).
///
/// RFC 5040 §5.2.1: a zero-length read is not validated ("MUST NOT validate the Data Source
/// STag and Data Source Tagged Offset") and is answered with a zero-length Read Response.
/// Otherwise, §7.2 item 4 in this order, each failure a Remote Protection Error:
/// a. the Source STag is valid → *Invalid STag*;
/// b. it is associated with this stream → *STag not associated with RDMAP Stream*;
/// then the buffer grants remote read → *Access rights violation*;
/// e. SrcTO + size does not wrap → *TO wrap* (checked before the bounds, which a wrapped
///    sum would otherwise pass);
/// c./d. SrcTO and SrcTO + size fall within the buffer → *Base or bounds violation*.
pub fn validate_read_request(
    request: &ReadRequest,
    source: Option<&TaggedBuffer>,
) -> Result<(), TermCause> {
    if request.size == 0 {
        return Ok(());
    }
    ddp::validate_tagged_access(
        request.source_stag,
        request.source_to,
        u64::from(request.size),
        source,
        Access::REMOTE_READ,
    )
    .map_err(protection)
}

/// Whether a Send with Invalidate may invalidate `stag` (RFC 5040 §5.3, §7.2 items 4–5),
/// given what the STag resolves to.
///
/// * The STag does not name a valid buffer (nothing registered, key mismatch, already
///   invalidated) → Remote Operation Error, *STag cannot be Invalidated* (0x0/0x2/0x09);
/// * it names a buffer not associated with this stream → Remote Protection Error, *STag
///   cannot be Invalidated* (0x0/0x1/0x09).
///
/// RFC 5040 lists the code under both error types without saying which case gets which; this
/// split (an STag that is not valid is an operation error, one belonging to someone else a
/// protection error) is the one Linux siw and Chelsio's driver make.
pub fn validate_invalidate(stag: u32, target: Option<&TaggedBuffer>) -> Result<(), TermCause> {
    match target {
        Some(b) if b.stag == stag && b.valid => {
            if b.associated {
                Ok(())
            } else {
                Err(TermCause::protection(ProtectionCode::CannotInvalidate))
            }
        }
        _ => Err(TermCause::operation(OperationCode::CannotInvalidate)),
    }
}

/// Size of an atomic target: Atomic Operations work on 64-bit values (RFC 7306 §5).
pub const ATOMIC_OPERAND_LEN: u64 = 8;

/// Validate an incoming Atomic Request against the buffer its Remote STag resolves to.
///
/// `base_address` is the local address of the buffer's first octet (the octet at
/// `target.base_to`), used for the alignment rule, which concerns the ULP Buffer address
/// (RFC 7306 §5.2.1: the Remote Tagged Offset "MUST represent a ULP Buffer address that is
/// 64-bit aligned"). For STags whose Tagged Offsets are virtual addresses, pass
/// `target.base_to`.
///
/// In order:
/// 1. the operation is FetchAdd or CmpSwap → else Remote Operation Error *Unexpected OpCode*
///    (RFC 7306 §5.2.1 item 4 requires an error; §1.1 names "Remote Operation Error or
///    Unexpected OpCode");
/// 2. the STag checks of an RDMA access (RFC 7306 §5.1: atomics "use the same remote
///    addressing mechanism as RDMA Reads and Writes"), needing remote atomic access, as
///    Remote Protection Errors — see [`validate_read_request`] for the order;
/// 3. the address is 64-bit aligned → else Remote Operation Error *Catastrophic error,
///    localized to RDMAP Stream* (RFC 7306 §8.2).
pub fn validate_atomic_request(
    request: &AtomicRequest,
    target: Option<&TaggedBuffer>,
    base_address: u64,
) -> Result<(), TermCause> {
    if !request.op.is_defined() {
        return Err(TermCause::operation(OperationCode::UnexpectedOpcode));
    }
    ddp::validate_tagged_access(
        request.stag,
        request.to,
        ATOMIC_OPERAND_LEN,
        target,
        Access::REMOTE_ATOMIC,
    )
    .map_err(protection)?;
    let base_to = target.map_or(0, |b| b.base_to);
    let address = base_address.wrapping_add(request.to.wrapping_sub(base_to));
    if !address.is_multiple_of(ATOMIC_OPERAND_LEN) {
        return Err(TermCause::operation(OperationCode::CatastrophicStream));
    }
    Ok(())
}

/// Inbound RDMA Read Request accounting against the IRD (RFC 5040 §6.1).
///
/// RFC 5040 §5.2.2 has the Data Source keep as many Untagged Buffers on the Read Request queue
/// (QN 1) as the negotiated number of outstanding Read Requests, and RFC 7306 §5.2.2 item 4
/// adds one per outstanding Atomic Request: the IRD is the number of buffers the peer was
/// granted on QN 1. A request beyond it targets an MSN past the last available buffer, which
/// RFC 5041 §7.1 check 5 reports as DDP *Invalid MSN - MSN range is not valid*
/// (0x1/0x2/0x03). (Linux siw reports RDMAP *Catastrophic error, localized to RDMAP Stream*
/// instead; Chelsio's driver uses the MSN-range code.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ird {
    limit: u32,
    outstanding: u32,
}

impl Ird {
    /// An IRD of `limit` outstanding inbound Read (and Atomic) Requests.
    pub const fn new(limit: u32) -> Self {
        Ird {
            limit,
            outstanding: 0,
        }
    }

    /// The negotiated limit.
    pub const fn limit(&self) -> u32 {
        self.limit
    }

    /// Requests accepted and not yet answered.
    pub const fn outstanding(&self) -> u32 {
        self.outstanding
    }

    /// Account a newly arrived request; fails if it exceeds the IRD.
    pub fn admit(&mut self) -> Result<(), TermCause> {
        if self.outstanding >= self.limit {
            return Err(TermCause::Ddp(DdpCode::Untagged(UntaggedCode::MsnRange)));
        }
        self.outstanding += 1;
        Ok(())
    }

    /// Account a request whose response has been handed to DDP.
    pub fn complete(&mut self) {
        self.outstanding = self.outstanding.saturating_sub(1);
    }
}

/// Check a Read Response segment against the Read Request it answers (RFC 5040 §5.2.2: "The
/// Data Sink MAY validate that the STag, Tagged Offset, and length of the RDMA Read Response
/// Message are the same as the STag, Tagged Offset, and length included in the corresponding
/// RDMA Read Request Message").
///
/// `received` is the number of octets of this response already Placed; the segment has
/// `stag`, `to`, `len` payload octets and the L flag `last`. Errors are DDP Tagged Buffer
/// errors, since the segment targets a Tagged Buffer: another STag → *Invalid STag*; a TO that
/// is not the request's Sink TO plus `received`, more octets than requested, or a last segment
/// that leaves the read short → *Base or bounds violation* (RFC 5040 names no code for a
/// mismatch; this is the code Linux siw uses for the same checks).
pub fn check_read_response(
    request: &ReadRequest,
    received: u32,
    stag: u32,
    to: u64,
    len: usize,
    last: bool,
) -> Result<(), TermCause> {
    let bounds = TermCause::Ddp(DdpCode::Tagged(TaggedCode::BaseOrBounds));
    if stag != request.sink_stag {
        return Err(TermCause::Ddp(DdpCode::Tagged(TaggedCode::InvalidStag)));
    }
    if to != request.sink_to.wrapping_add(u64::from(received)) {
        return Err(bounds);
    }
    let end = u64::from(received).saturating_add(len as u64);
    if end > u64::from(request.size) || (last && end != u64::from(request.size)) {
        return Err(bounds);
    }
    Ok(())
}
