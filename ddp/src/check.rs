//! Receive-side validation at the Data Sink (RFC 5041 §7.1), as pure functions.
//!
//! The caller describes what the segment targets — the registered buffer its STag resolves
//! to, or the state of the untagged queues — and gets back `Ok(())` or the [`DdpError`] whose
//! [`DdpError::layer_etype_ecode`] is the Terminate to send.
//!
//! # Tagged segments (RFC 5041 §7.1, second list)
//!
//! Checked in this order, the first failure wins:
//!
//! 1. the STag names a registered, valid buffer with the same 8-bit key → else
//!    *Invalid STag* (0x1/0x1/0x00);
//! 2. the buffer is associated with this stream / protection domain (§8.2) → else
//!    *STag not associated with DDP Stream* (0x1/0x1/0x02);
//! 3. the buffer grants the access right the message needs → else RDMAP *Access rights
//!    violation* (0x0/0x1/0x02; DDP has no code for it);
//! 4. the 64-bit sum TO + payload length does not wrap → else *TO wrap* (0x1/0x1/0x03). This
//!    is checked before the bounds because a wrapped sum is the case the bounds check would
//!    otherwise misjudge;
//! 5. TO and TO + length lie within the registered range → else *Base or bounds violation*
//!    (0x1/0x1/0x01). Ending exactly at the end of the buffer is legal.
//!
//! A zero-length tagged segment is not checked at all: "The STag and TO fields MUST NOT be
//! checked for a zero-length Tagged DDP Message" (RFC 5041 §5.2).
//!
//! # Untagged segments (RFC 5041 §7.1, first list)
//!
//! 1. the QN names a queue of this stream → else *Invalid QN* (0x1/0x2/0x01);
//! 2. the MSN has a buffer, or lies in the range of MSNs the peer may legitimately use →
//!    *Invalid MSN - no buffer available* (0x1/0x2/0x02) when the message is one the peer was
//!    entitled to send but no buffer is posted for it, *Invalid MSN - MSN range is not valid*
//!    (0x1/0x2/0x03) when the MSN is outside that range (see [`QueueState`]);
//! 3. MO is a legal offset → else *Invalid MO* (0x1/0x2/0x04);
//! 4. MO + payload length fits the buffer → else *DDP Message too long for available buffer*
//!    (0x1/0x2/0x05). Filling the buffer exactly is legal.
//!
//! An MO equal to the buffer length (a message continuing past a buffer its earlier segments
//! filled exactly) is reported as too long, which is what happened; an MO beyond the buffer
//! length, which no in-order sender can produce, as *Invalid MO*.
//!
//! RFC 5041 §7.1 exempts zero-length segments from validation before Placement; a zero-length
//! segment still names a queue and consumes a buffer (RFC 5040 §5.3), so checks 1 and 2 are
//! applied to it and checks 3 and 4, which only concern Placement, are not.
//!
//! The version check (*Invalid DDP version*, 0x1/0x1/0x04 and 0x1/0x2/0x06) is made by the
//! parser, [`crate::Segment::parse`], before the header is interpreted.

use core::fmt;
use core::ops::{BitAnd, BitOr, BitOrAssign};

use crate::error::{DdpError, MoExpectation, StagProblem};
use crate::wire::{TaggedRepr, UntaggedRepr};

/// Access rights of a registered buffer (a small bit set).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Access(u8);

impl Access {
    /// No rights.
    pub const NONE: Access = Access(0);
    /// The local ULP may write into the buffer.
    pub const LOCAL_WRITE: Access = Access(0x01);
    /// The remote peer may read from the buffer (Data Source of an RDMA Read).
    pub const REMOTE_READ: Access = Access(0x02);
    /// The remote peer may place into the buffer (RDMA Write, RDMA Read Response).
    pub const REMOTE_WRITE: Access = Access(0x04);
    /// The remote peer may run Atomic Operations on the buffer (RFC 7306).
    pub const REMOTE_ATOMIC: Access = Access(0x08);
    /// Memory windows may be bound to the region (a verbs right; nothing on the wire
    /// checks it).
    pub const MW_BIND: Access = Access(0x10);
    /// The rights a peer uses through an STag.
    pub const REMOTE: Access = Access(0x0e);

    const NAMES: [(Access, &'static str); 5] = [
        (Access::LOCAL_WRITE, "local write"),
        (Access::REMOTE_READ, "remote read"),
        (Access::REMOTE_WRITE, "remote write"),
        (Access::REMOTE_ATOMIC, "remote atomic"),
        (Access::MW_BIND, "window bind"),
    ];

    /// The raw bits.
    pub const fn bits(self) -> u8 {
        self.0
    }

    /// From raw bits; unknown bits are dropped.
    pub const fn from_bits_truncate(bits: u8) -> Access {
        Access(bits & 0x1f)
    }

    /// Whether every right in `other` is also in `self`.
    pub const fn contains(self, other: Access) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether no right is set.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }
}

impl BitOr for Access {
    type Output = Access;
    fn bitor(self, rhs: Access) -> Access {
        Access(self.0 | rhs.0)
    }
}

impl BitOrAssign for Access {
    fn bitor_assign(&mut self, rhs: Access) {
        self.0 |= rhs.0;
    }
}

impl BitAnd for Access {
    type Output = Access;
    fn bitand(self, rhs: Access) -> Access {
        Access(self.0 & rhs.0)
    }
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("no access");
        }
        let mut first = true;
        for (a, name) in Access::NAMES {
            if self.contains(a) {
                if !first {
                    f.write_str(" + ")?;
                }
                f.write_str(name)?;
                first = false;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Access({self})")
    }
}

/// A registered Tagged Buffer as the Data Sink knows it: what an STag resolves to.
///
/// The caller looks the buffer up by the STag's index (its upper 24 bits) and passes what it
/// found; the 8-bit key (lower bits) is compared here against [`TaggedBuffer::stag`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TaggedBuffer {
    /// The full STag (index and key) the buffer is currently registered with.
    pub stag: u32,
    /// Whether the registration is valid (false once invalidated).
    pub valid: bool,
    /// Whether the buffer is associated with this stream (same protection domain, or bound to
    /// this DDP stream; RFC 5041 §8.2).
    pub associated: bool,
    /// First legal Tagged Offset.
    pub base_to: u64,
    /// Length of the registered range in octets.
    pub len: u64,
    /// Rights the buffer grants.
    pub access: Access,
}

impl TaggedBuffer {
    /// One past the last legal Tagged Offset, as a 128-bit value (cannot overflow).
    pub fn end(&self) -> u128 {
        u128::from(self.base_to) + u128::from(self.len)
    }

    /// Whether `len` octets at `to` lie inside the registered range.
    pub fn contains_range(&self, to: u64, len: u64) -> bool {
        to >= self.base_to && u128::from(to) + u128::from(len) <= self.end()
    }
}

/// Why a tagged access is refused, independent of which layer reports it.
///
/// DDP reports these with Tagged Buffer codes ([`check_tagged`]); RDMAP reports the same
/// faults on a Read Request's Data Source or an atomic target with Remote Protection codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaggedFault {
    /// The STag does not name a usable buffer.
    InvalidStag(StagProblem),
    /// The buffer belongs to another stream / protection domain.
    NotAssociated,
    /// The buffer does not grant the needed right.
    AccessRights {
        /// Rights needed.
        needed: Access,
        /// Rights granted.
        granted: Access,
    },
    /// TO + length wraps the 64-bit offset space.
    ToWrap,
    /// The range falls outside the registered range.
    BaseOrBounds,
}

/// Validate an access of `len` octets at `to` through `stag` against the buffer it resolves to
/// (`None`: nothing is registered under the STag's index), needing the rights `needed`.
///
/// The order is the one documented at the top of this module. Zero-length accesses are
/// *not* exempted here; callers apply their layer's zero-length rule.
pub fn validate_tagged_access(
    stag: u32,
    to: u64,
    len: u64,
    buffer: Option<&TaggedBuffer>,
    needed: Access,
) -> Result<(), TaggedFault> {
    let Some(b) = buffer else {
        return Err(TaggedFault::InvalidStag(StagProblem::NotRegistered));
    };
    if b.stag != stag {
        return Err(TaggedFault::InvalidStag(StagProblem::KeyMismatch {
            registered: b.stag,
        }));
    }
    if !b.valid {
        return Err(TaggedFault::InvalidStag(StagProblem::Invalidated));
    }
    if !b.associated {
        return Err(TaggedFault::NotAssociated);
    }
    if !b.access.contains(needed) {
        return Err(TaggedFault::AccessRights {
            needed,
            granted: b.access,
        });
    }
    if to.checked_add(len).is_none() {
        return Err(TaggedFault::ToWrap);
    }
    if !b.contains_range(to, len) {
        return Err(TaggedFault::BaseOrBounds);
    }
    Ok(())
}

/// Validate a tagged segment before Placement (RFC 5041 §7.1).
///
/// `buffer` is what the segment's STag resolves to (`None` if nothing is registered under its
/// index); `needed` the right the message needs — [`Access::REMOTE_WRITE`] for RDMA Write and
/// RDMA Read Response sinks. A zero-length segment passes without any check (§5.2).
pub fn check_tagged(
    header: &TaggedRepr,
    payload_len: usize,
    buffer: Option<&TaggedBuffer>,
    needed: Access,
) -> Result<(), DdpError> {
    if payload_len == 0 {
        return Ok(());
    }
    let len = payload_len as u64;
    let stag = header.stag;
    let to = header.to;
    validate_tagged_access(stag, to, len, buffer, needed).map_err(|fault| match fault {
        TaggedFault::InvalidStag(problem) => DdpError::InvalidStag { stag, problem },
        TaggedFault::NotAssociated => DdpError::StagNotAssociated { stag },
        TaggedFault::AccessRights { needed, granted } => DdpError::AccessRights {
            stag,
            needed,
            granted,
        },
        TaggedFault::ToWrap => DdpError::ToWrap { to, len },
        TaggedFault::BaseOrBounds => {
            let (base, buffer_len) = buffer.map_or((0, 0), |b| (b.base_to, b.len));
            DdpError::BaseOrBounds {
                stag,
                to,
                len,
                base,
                buffer_len,
            }
        }
    })
}

/// State of one untagged queue at the Data Sink when a segment arrives.
///
/// Buffer `k` of [`QueueState::buffers`] serves the message with MSN `first_msn + k`
/// (mod 2^32), so the legal MSN range of RFC 5041 §7.1 check 5 runs from `first_msn` to the
/// MSN of the last available buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct QueueState<'a> {
    /// MSN of the first available buffer: the oldest message on this queue not yet completed.
    pub first_msn: u32,
    /// Lengths of the available buffers, in MSN order.
    pub buffers: &'a [u64],
    /// How many messages the peer was granted outstanding on this queue, if the protocol
    /// grants a number: the IRD for RDMAP's Read Request queue (QN 1), the ORD for the
    /// Atomic Response queue (QN 3), one for the Terminate queue (QN 2). `None` for the Send
    /// queue (QN 0), where the peer cannot know how many receive buffers are posted.
    ///
    /// With a grant `g`, an MSN within `first_msn .. first_msn + g` that has no buffer means
    /// the local side failed to provide one (*no buffer available*); an MSN beyond it means
    /// the peer exceeded its grant (*MSN range is not valid*). Without a grant, only the MSN
    /// right after the last available buffer counts as *no buffer available*.
    pub granted: Option<u32>,
    /// The MO the next segment of the message at `first_msn` must carry, when the caller
    /// tracks in-order progress (segments arrive in order over MPA/TCP). `None` accepts any
    /// offset inside the buffer.
    pub next_mo: Option<u32>,
}

impl<'a> QueueState<'a> {
    /// A queue whose next message is `first_msn`, with the given posted buffers, no grant and
    /// no in-order MO tracking.
    pub const fn new(first_msn: u32, buffers: &'a [u64]) -> Self {
        QueueState {
            first_msn,
            buffers,
            granted: None,
            next_mo: None,
        }
    }
}

/// Validate an untagged segment before Placement (RFC 5041 §7.1).
///
/// `queues[qn]` is the state of queue `qn`; the stream has `queues.len()` valid queues.
pub fn check_untagged(
    header: &UntaggedRepr,
    payload_len: usize,
    queues: &[QueueState<'_>],
) -> Result<(), DdpError> {
    let qn = header.qn;
    let msn = header.msn;
    let mo = header.mo;
    let Some(queue) = usize::try_from(qn).ok().and_then(|i| queues.get(i)) else {
        return Err(DdpError::InvalidQn {
            qn,
            queues: queues.len(),
        });
    };
    let k = msn.wrapping_sub(queue.first_msn);
    let available = queue.buffers.len();
    let buffer_len = match usize::try_from(k).ok().and_then(|i| queue.buffers.get(i)) {
        Some(&len) => len,
        None => {
            let no_buffer = match queue.granted {
                Some(g) => k < g,
                None => usize::try_from(k).is_ok_and(|k| k == available),
            };
            return Err(if no_buffer {
                DdpError::NoBuffer { qn, msn }
            } else {
                DdpError::MsnRange {
                    qn,
                    msn,
                    first_msn: queue.first_msn,
                }
            });
        }
    };
    if payload_len == 0 {
        return Ok(());
    }
    let len = payload_len as u64;
    if k == 0
        && let Some(expected) = queue.next_mo
        && mo != expected
    {
        return Err(DdpError::InvalidMo {
            qn,
            msn,
            mo,
            expected: MoExpectation::Exactly(expected),
        });
    }
    if u64::from(mo) > buffer_len {
        return Err(DdpError::InvalidMo {
            qn,
            msn,
            mo,
            expected: MoExpectation::AtMost(buffer_len),
        });
    }
    if u128::from(mo) + u128::from(len) > u128::from(buffer_len) {
        return Err(DdpError::TooLong {
            qn,
            msn,
            mo,
            len,
            buffer_len,
        });
    }
    Ok(())
}
