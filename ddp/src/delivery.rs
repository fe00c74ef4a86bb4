//! Message completion and Delivery at the Data Sink (RFC 5041 §4.1, §5.3, §5.4) for an LLP
//! that hands segments over in order (MPA over TCP).
//!
//! RFC 5041 §5.4 lets DDP Deliver a message only when its last segment (L set) has arrived and
//! it and every earlier message have been Placed. Over an in-order LLP that means: a message
//! is complete exactly when the segment with L set is accepted, and the segments before it
//! must continue the message without gaps. [`Reassembly`] tracks the message in progress of
//! each buffer model (a tagged and an untagged message may be interleaved, since they are
//! Placed independently) and reports the ULP Message Length on completion.

use crate::error::{DdpError, MoExpectation, StagProblem};
use crate::wire::{Header, TaggedRepr, UntaggedRepr};

/// The ULP Message Length of an untagged message, from its last segment: MO plus the
/// payload length of the segment with L set (RFC 5041 §5.4). `None` if the sum does not fit
/// in 32 bits (a message is shorter than 2^32 octets, §5.2).
pub fn ulp_message_length(last: &UntaggedRepr, payload_len: usize) -> Option<u32> {
    u32::try_from(payload_len)
        .ok()
        .and_then(|len| last.mo.checked_add(len))
}

/// What accepting a segment did to its message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Progress {
    /// The message continues; more segments follow.
    Partial,
    /// The segment had L set: the message is complete and may be Delivered.
    Complete {
        /// Octets of ULP payload in the message (for an untagged message, the ULP Message
        /// Length of RFC 5041 §5.4).
        len: u64,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct TaggedInProgress {
    stag: u32,
    next_to: u64,
    len: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct UntaggedInProgress {
    qn: u32,
    msn: u32,
    next_mo: u32,
}

/// In-order message tracker for one direction of a DDP stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Reassembly {
    tagged: Option<TaggedInProgress>,
    untagged: Option<UntaggedInProgress>,
}

impl Reassembly {
    /// A tracker with no message in progress.
    pub const fn new() -> Self {
        Reassembly {
            tagged: None,
            untagged: None,
        }
    }

    /// Whether a message of the given model is in progress (its last segment not yet seen).
    pub const fn in_progress(&self, tagged: bool) -> bool {
        if tagged {
            self.tagged.is_some()
        } else {
            self.untagged.is_some()
        }
    }

    /// Accept the next segment (already validated against the buffers).
    ///
    /// Errors, which leave the tracker unchanged:
    /// * a tagged segment continuing a message with another STag → *Invalid STag*; with a TO
    ///   that is not the next in order → *Base or bounds violation*;
    /// * an untagged segment continuing a message with another QN or MSN → *MSN range is not
    ///   valid*; an MO that is not the next in order (a new message must start at MO 0,
    ///   §5.2) → *Invalid MO*.
    pub fn accept(&mut self, header: &Header, payload_len: usize) -> Result<Progress, DdpError> {
        let len = payload_len as u64;
        match header {
            Header::Tagged(t) => self.accept_tagged(t, len),
            Header::Untagged(u) => self.accept_untagged(u, len),
        }
    }

    fn accept_tagged(&mut self, t: &TaggedRepr, len: u64) -> Result<Progress, DdpError> {
        let so_far = match self.tagged {
            None => 0,
            Some(p) => {
                if p.stag != t.stag {
                    return Err(DdpError::InvalidStag {
                        stag: t.stag,
                        problem: StagProblem::ChangedMidMessage { first: p.stag },
                    });
                }
                if p.next_to != t.to {
                    return Err(DdpError::TaggedGap {
                        stag: t.stag,
                        to: t.to,
                        expected_to: p.next_to,
                    });
                }
                p.len
            }
        };
        let total = so_far.saturating_add(len);
        if t.last {
            self.tagged = None;
            Ok(Progress::Complete { len: total })
        } else {
            self.tagged = Some(TaggedInProgress {
                stag: t.stag,
                next_to: t.to.wrapping_add(len),
                len: total,
            });
            Ok(Progress::Partial)
        }
    }

    fn accept_untagged(&mut self, u: &UntaggedRepr, len: u64) -> Result<Progress, DdpError> {
        let expected_mo = match self.untagged {
            None => 0,
            Some(p) => {
                if p.qn != u.qn || p.msn != u.msn {
                    return Err(DdpError::MsnRange {
                        qn: u.qn,
                        msn: u.msn,
                        first_msn: p.msn,
                    });
                }
                p.next_mo
            }
        };
        if u.mo != expected_mo {
            return Err(DdpError::InvalidMo {
                qn: u.qn,
                msn: u.msn,
                mo: u.mo,
                expected: MoExpectation::Exactly(expected_mo),
            });
        }
        let end = u64::from(u.mo).saturating_add(len);
        if u.last {
            self.untagged = None;
            Ok(Progress::Complete { len: end })
        } else {
            let Ok(next_mo) = u32::try_from(end) else {
                return Err(DdpError::InvalidMo {
                    qn: u.qn,
                    msn: u.msn,
                    mo: u.mo,
                    expected: MoExpectation::AtMost(u64::from(u32::MAX) - len),
                });
            };
            self.untagged = Some(UntaggedInProgress {
                qn: u.qn,
                msn: u.msn,
                next_mo,
            });
            Ok(Progress::Partial)
        }
    }
}
