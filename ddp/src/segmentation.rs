//! Segmentation of a DDP message at the Data Source (RFC 5041 §5.2).
//!
//! A ULP message of `N < 2^32` octets is cut into DDP segments that each fit the LLP's
//! MULPDU: every segment carries at most `MULPDU - header length` payload octets. The
//! segments are produced in increasing offset order (RFC 5041 §5.3), only the final one has
//! the L flag (§4.1), and a zero-length message is exactly one segment with L set (§5.2).
//!
//! For a tagged message each segment's TO is the message's initial TO plus the segment's
//! offset; for an untagged message each segment's MO is its offset and the QN and MSN stay the
//! same for the whole message (§5.2).

use core::num::NonZeroU32;
use core::ops::Range;

use crate::wire::{TaggedRepr, UntaggedRepr, header_len};

/// Largest ULP message a DDP message can carry: the length MUST be less than 2^32 (§5.2).
pub const MAX_MESSAGE_LEN: u64 = u32::MAX as u64;

/// Errors of segmentation at the Data Source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SegmentationError {
    /// The message is 2^32 octets or longer (RFC 5041 §5.2).
    #[error("a DDP message must be shorter than 2^32 octets; {len} given")]
    MessageTooLong {
        /// Message length given.
        len: u64,
    },
    /// The MULPDU leaves no room for payload after the header.
    #[error("MULPDU {mulpdu} leaves no room for payload after the {header_len}-byte DDP header")]
    MulpduTooSmall {
        /// MULPDU given.
        mulpdu: usize,
        /// Header length of the buffer model.
        header_len: usize,
    },
    /// The message's initial TO plus its length wraps past 2^64; the Data Sink would reject it
    /// with "TO wrap" (RFC 5041 §7.1 check 5).
    #[error("initial TO {to:#018x} plus message length {len} wraps past 2^64")]
    ToWrap {
        /// Initial TO.
        to: u64,
        /// Message length.
        len: u64,
    },
}

/// Payload octets per segment for a MULPDU and buffer model: `mulpdu - header length`,
/// saturated to `u32::MAX` (no segment can usefully carry more than a whole message).
pub fn max_payload(mulpdu: usize, tagged: bool) -> Result<NonZeroU32, SegmentationError> {
    let header_len = header_len(tagged);
    let room = mulpdu.saturating_sub(header_len);
    NonZeroU32::new(u32::try_from(room).unwrap_or(u32::MAX))
        .ok_or(SegmentationError::MulpduTooSmall { mulpdu, header_len })
}

/// One segment of a message: the payload octets `offset .. offset + len` and the L flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Span {
    /// Offset of the segment's first payload octet within the message.
    pub offset: u32,
    /// Payload octets in the segment.
    pub len: u32,
    /// Whether this is the last segment (L flag).
    pub last: bool,
}

impl Span {
    /// The payload range within the message, for slicing the message buffer.
    pub fn range(&self) -> Range<usize> {
        let start = self.offset as usize;
        start..start + self.len as usize
    }
}

/// Iterator over the [`Span`]s of one message, in increasing offset order.
#[derive(Debug, Clone)]
pub struct Spans {
    len: u32,
    max_payload: u32,
    next: u32,
    done: bool,
}

impl Spans {
    /// Spans of a message of `message_len` octets, each at most `max_payload` octets.
    pub fn new(message_len: u64, max_payload: NonZeroU32) -> Result<Self, SegmentationError> {
        let len = u32::try_from(message_len)
            .map_err(|_| SegmentationError::MessageTooLong { len: message_len })?;
        Ok(Spans {
            len,
            max_payload: max_payload.get(),
            next: 0,
            done: false,
        })
    }

    /// Spans of a message for the given MULPDU and buffer model.
    pub fn for_mulpdu(
        message_len: u64,
        mulpdu: usize,
        tagged: bool,
    ) -> Result<Self, SegmentationError> {
        Spans::new(message_len, max_payload(mulpdu, tagged)?)
    }

    /// Number of segments the message needs (at least one).
    pub fn segment_count(&self) -> u64 {
        if self.len == 0 {
            1
        } else {
            u64::from(self.len).div_ceil(u64::from(self.max_payload))
        }
    }
}

impl Iterator for Spans {
    type Item = Span;

    fn next(&mut self) -> Option<Span> {
        if self.done {
            return None;
        }
        let remaining = self.len - self.next;
        let take = remaining.min(self.max_payload);
        let span = Span {
            offset: self.next,
            len: take,
            last: take == remaining,
        };
        self.next += take;
        self.done = span.last;
        Some(span)
    }
}

/// Segments of a tagged DDP message (RFC 5041 §5.2): the header of each segment and the
/// payload range it carries.
///
/// `rsvd_ulp`, `stag` are the same in every segment; TO advances with the offset. Fails with
/// [`SegmentationError::ToWrap`] when the message would run past TO 2^64 − 1 (a zero-length
/// message never does: its STag and TO are not checked, §5.2).
pub fn tagged_segments(
    rsvd_ulp: u8,
    stag: u32,
    to: u64,
    message_len: u64,
    mulpdu: usize,
) -> Result<impl Iterator<Item = (TaggedRepr, Range<usize>)> + Clone, SegmentationError> {
    let spans = Spans::for_mulpdu(message_len, mulpdu, true)?;
    if to.checked_add(message_len).is_none() {
        return Err(SegmentationError::ToWrap {
            to,
            len: message_len,
        });
    }
    Ok(spans.map(move |s| {
        let repr = TaggedRepr {
            last: s.last,
            rsvd_ulp,
            stag,
            // Cannot wrap: to + message_len was checked above and offset < message_len.
            to: to.wrapping_add(u64::from(s.offset)),
        };
        (repr, s.range())
    }))
}

/// Segments of an untagged DDP message (RFC 5041 §5.2): the header of each segment and the
/// payload range it carries. QN, MSN and RsvdULP are the same in every segment; MO is the
/// segment's offset.
pub fn untagged_segments(
    rsvd_ulp: [u8; 5],
    qn: u32,
    msn: u32,
    message_len: u64,
    mulpdu: usize,
) -> Result<impl Iterator<Item = (UntaggedRepr, Range<usize>)> + Clone, SegmentationError> {
    let spans = Spans::for_mulpdu(message_len, mulpdu, false)?;
    Ok(spans.map(move |s| {
        let repr = UntaggedRepr {
            last: s.last,
            rsvd_ulp,
            qn,
            msn,
            mo: s.offset,
        };
        (repr, s.range())
    }))
}

/// The MSN that follows `msn` on a queue: increased by one modulo 2^32 (RFC 5041 §4.3).
pub const fn next_msn(msn: u32) -> u32 {
    msn.wrapping_add(1)
}

/// The MSN of the first DDP message on every queue of a new stream (RFC 5041 §4.3).
pub const INITIAL_MSN: u32 = 1;
