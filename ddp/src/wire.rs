//! DDP header wire format (RFC 5041 §4).
//!
//! ```text
//! DDP Control Field (RFC 5041 §4.1):      |T|L| Rsvd  |DV |
//!                                          7 6 5 4 3 2 1 0   (bit 7 sent first)
//!
//! Tagged header, 14 bytes (RFC 5041 §4.2):
//!   0: control   1: RsvdULP   2..6: STag   6..14: TO
//!
//! Untagged header, 18 bytes (RFC 5041 §4.3):
//!   0: control   1..6: RsvdULP[0:39]   6..10: QN   10..14: MSN   14..18: MO
//! ```
//!
//! All multi-octet fields are big-endian. [`TaggedPacket`] and [`UntaggedPacket`] are
//! zero-copy views with checked construction; [`TaggedRepr`] and [`UntaggedRepr`] are the
//! plain values that [`Segment::parse`] produces and `emit` writes.

use crate::error::DdpError;

/// The DDP version this crate speaks: DV is 1 for RFC 5041 (§4.1).
pub const DDP_VERSION: u8 = 1;

/// Length of the tagged DDP header (RFC 5041 §4.2).
pub const TAGGED_HEADER_LEN: usize = 14;

/// Length of the untagged DDP header (RFC 5041 §4.3).
pub const UNTAGGED_HEADER_LEN: usize = 18;

/// T (tagged) flag in the DDP Control Field.
pub const FLAG_TAGGED: u8 = 0x80;
/// L (last) flag in the DDP Control Field.
pub const FLAG_LAST: u8 = 0x40;
/// Reserved bits of the DDP Control Field (sent as zero, not checked on receive).
pub const MASK_RESERVED: u8 = 0x3c;
/// DV (version) bits of the DDP Control Field.
pub const MASK_VERSION: u8 = 0x03;

/// Header length of the given buffer model.
pub const fn header_len(tagged: bool) -> usize {
    if tagged {
        TAGGED_HEADER_LEN
    } else {
        UNTAGGED_HEADER_LEN
    }
}

/// The control byte this crate emits: DV = 1, reserved bits zero.
pub const fn control_byte(tagged: bool, last: bool) -> u8 {
    let mut b = DDP_VERSION;
    if tagged {
        b |= FLAG_TAGGED;
    }
    if last {
        b |= FLAG_LAST;
    }
    b
}

// Fields of a segment whose header `new_checked` validated.
use crate::be::{field32 as be32, field64 as be64};

/// Validate the control byte and length of a segment: version first (the header layout is
/// unknown under another version), then length.
fn check_segment(buf: &[u8]) -> Result<bool, DdpError> {
    let Some(&ctrl) = buf.first() else {
        return Err(DdpError::Truncated {
            tagged: false,
            needed: UNTAGGED_HEADER_LEN,
            got: 0,
        });
    };
    let tagged = ctrl & FLAG_TAGGED != 0;
    let version = ctrl & MASK_VERSION;
    if version != DDP_VERSION {
        return Err(DdpError::InvalidVersion { tagged, version });
    }
    let needed = header_len(tagged);
    if buf.len() < needed {
        return Err(DdpError::Truncated {
            tagged,
            needed,
            got: buf.len(),
        });
    }
    Ok(tagged)
}

mod field {
    use core::ops::Range;
    pub const CONTROL: usize = 0;
    pub const RSVD_ULP: usize = 1;
    pub const STAG: usize = 2;
    pub const TO: usize = 6;
    pub const U_RSVD_ULP: Range<usize> = 1..6;
    pub const QN: usize = 6;
    pub const MSN: usize = 10;
    pub const MO: usize = 14;
}

macro_rules! control_accessors {
    () => {
        /// The T flag.
        pub fn tagged_flag(&self) -> bool {
            self.buffer.as_ref()[field::CONTROL] & FLAG_TAGGED != 0
        }

        /// The L flag: this is the last segment of its DDP message.
        pub fn last_flag(&self) -> bool {
            self.buffer.as_ref()[field::CONTROL] & FLAG_LAST != 0
        }

        /// The 4 reserved bits of the control field (not checked on receive, RFC 5041 §4.1).
        pub fn reserved(&self) -> u8 {
            (self.buffer.as_ref()[field::CONTROL] & MASK_RESERVED) >> 2
        }

        /// The DV field.
        pub fn version(&self) -> u8 {
            self.buffer.as_ref()[field::CONTROL] & MASK_VERSION
        }
    };
}

/// Zero-copy view of a tagged DDP segment (RFC 5041 §4.2).
///
/// Built only by [`TaggedPacket::new_checked`], so every accessor is in bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaggedPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TaggedPacket<T> {
    /// Wrap `buffer` after checking it holds a complete tagged header with DV = 1.
    pub fn new_checked(buffer: T) -> Result<Self, DdpError> {
        let tagged = check_segment(buffer.as_ref())?;
        if !tagged {
            return Err(DdpError::WrongModel { tagged });
        }
        Ok(TaggedPacket { buffer })
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    control_accessors!();

    /// The RsvdULP field (8 bits; the RDMAP control field when DDP carries RDMAP).
    pub fn rsvd_ulp(&self) -> u8 {
        self.buffer.as_ref()[field::RSVD_ULP]
    }

    /// The STag field.
    pub fn stag(&self) -> u32 {
        be32(self.buffer.as_ref(), field::STAG)
    }

    /// The TO (Tagged Offset) field.
    pub fn tagged_offset(&self) -> u64 {
        be64(self.buffer.as_ref(), field::TO)
    }

    /// The ULP payload following the header.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[TAGGED_HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TaggedPacket<T> {
    /// Set or clear the L flag.
    pub fn set_last_flag(&mut self, last: bool) {
        let b = &mut self.buffer.as_mut()[field::CONTROL];
        if last {
            *b |= FLAG_LAST;
        } else {
            *b &= !FLAG_LAST;
        }
    }

    /// Set the RsvdULP field.
    pub fn set_rsvd_ulp(&mut self, v: u8) {
        self.buffer.as_mut()[field::RSVD_ULP] = v;
    }

    /// Set the STag field.
    pub fn set_stag(&mut self, v: u32) {
        self.buffer.as_mut()[field::STAG..field::STAG + 4].copy_from_slice(&v.to_be_bytes());
    }

    /// Set the TO field.
    pub fn set_tagged_offset(&mut self, v: u64) {
        self.buffer.as_mut()[field::TO..field::TO + 8].copy_from_slice(&v.to_be_bytes());
    }

    /// The ULP payload, mutable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[TAGGED_HEADER_LEN..]
    }
}

/// Zero-copy view of an untagged DDP segment (RFC 5041 §4.3).
///
/// Built only by [`UntaggedPacket::new_checked`], so every accessor is in bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UntaggedPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UntaggedPacket<T> {
    /// Wrap `buffer` after checking it holds a complete untagged header with DV = 1.
    pub fn new_checked(buffer: T) -> Result<Self, DdpError> {
        let tagged = check_segment(buffer.as_ref())?;
        if tagged {
            return Err(DdpError::WrongModel { tagged });
        }
        Ok(UntaggedPacket { buffer })
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    control_accessors!();

    /// The 40-bit RsvdULP field, in wire order (octet 0 is the RDMAP control field and
    /// octets 1..5 the Invalidate STag when DDP carries RDMAP).
    pub fn rsvd_ulp(&self) -> [u8; 5] {
        let mut a = [0u8; 5];
        a.copy_from_slice(&self.buffer.as_ref()[field::U_RSVD_ULP]);
        a
    }

    /// The QN (Queue Number) field.
    pub fn queue_number(&self) -> u32 {
        be32(self.buffer.as_ref(), field::QN)
    }

    /// The MSN (Message Sequence Number) field.
    pub fn msn(&self) -> u32 {
        be32(self.buffer.as_ref(), field::MSN)
    }

    /// The MO (Message Offset) field.
    pub fn message_offset(&self) -> u32 {
        be32(self.buffer.as_ref(), field::MO)
    }

    /// The ULP payload following the header.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[UNTAGGED_HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UntaggedPacket<T> {
    /// Set or clear the L flag.
    pub fn set_last_flag(&mut self, last: bool) {
        let b = &mut self.buffer.as_mut()[field::CONTROL];
        if last {
            *b |= FLAG_LAST;
        } else {
            *b &= !FLAG_LAST;
        }
    }

    /// Set the RsvdULP field.
    pub fn set_rsvd_ulp(&mut self, v: [u8; 5]) {
        self.buffer.as_mut()[field::U_RSVD_ULP].copy_from_slice(&v);
    }

    /// Set the QN field.
    pub fn set_queue_number(&mut self, v: u32) {
        self.buffer.as_mut()[field::QN..field::QN + 4].copy_from_slice(&v.to_be_bytes());
    }

    /// Set the MSN field.
    pub fn set_msn(&mut self, v: u32) {
        self.buffer.as_mut()[field::MSN..field::MSN + 4].copy_from_slice(&v.to_be_bytes());
    }

    /// Set the MO field.
    pub fn set_message_offset(&mut self, v: u32) {
        self.buffer.as_mut()[field::MO..field::MO + 4].copy_from_slice(&v.to_be_bytes());
    }

    /// The ULP payload, mutable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[UNTAGGED_HEADER_LEN..]
    }
}

/// Error returned by `emit` when the output buffer cannot hold the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("output buffer of {got} bytes cannot hold the {needed}-byte DDP header")]
pub struct BufferTooSmall {
    /// Bytes needed.
    pub needed: usize,
    /// Bytes available.
    pub got: usize,
}

/// A tagged DDP header (RFC 5041 §4.2) as plain values.
///
/// DV is implied (always 1) and the reserved bits are not represented: they are sent as zero
/// and ignored on receive (RFC 5041 §4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TaggedRepr {
    /// L flag.
    pub last: bool,
    /// RsvdULP (8 bits, opaque to DDP).
    pub rsvd_ulp: u8,
    /// STag of the Data Sink's Tagged Buffer.
    pub stag: u32,
    /// Tagged Offset where this segment's payload is placed.
    pub to: u64,
}

impl TaggedRepr {
    /// Length of the emitted header.
    pub const fn header_len(&self) -> usize {
        TAGGED_HEADER_LEN
    }

    /// Parse the header of a tagged segment; returns it and the payload.
    pub fn parse(segment: &[u8]) -> Result<(TaggedRepr, &[u8]), DdpError> {
        let p = TaggedPacket::new_checked(segment)?;
        let repr = TaggedRepr {
            last: p.last_flag(),
            rsvd_ulp: p.rsvd_ulp(),
            stag: p.stag(),
            to: p.tagged_offset(),
        };
        Ok((repr, &segment[TAGGED_HEADER_LEN..]))
    }

    /// Write the header into the first [`TAGGED_HEADER_LEN`] bytes of `buf`; returns the
    /// number of bytes written.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, BufferTooSmall> {
        let Some(h) = buf.get_mut(..TAGGED_HEADER_LEN) else {
            return Err(BufferTooSmall {
                needed: TAGGED_HEADER_LEN,
                got: buf.len(),
            });
        };
        h[field::CONTROL] = control_byte(true, self.last);
        h[field::RSVD_ULP] = self.rsvd_ulp;
        h[field::STAG..field::STAG + 4].copy_from_slice(&self.stag.to_be_bytes());
        h[field::TO..field::TO + 8].copy_from_slice(&self.to.to_be_bytes());
        Ok(TAGGED_HEADER_LEN)
    }

    /// The header as bytes.
    pub fn to_bytes(&self) -> [u8; TAGGED_HEADER_LEN] {
        let mut b = [0u8; TAGGED_HEADER_LEN];
        // The array has exactly the header length, so emit cannot fail.
        let _ = self.emit(&mut b);
        b
    }
}

/// An untagged DDP header (RFC 5041 §4.3) as plain values.
///
/// DV is implied (always 1) and the reserved bits are not represented: they are sent as zero
/// and ignored on receive (RFC 5041 §4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UntaggedRepr {
    /// L flag.
    pub last: bool,
    /// RsvdULP (40 bits, opaque to DDP), in wire order.
    pub rsvd_ulp: [u8; 5],
    /// Queue Number.
    pub qn: u32,
    /// Message Sequence Number.
    pub msn: u32,
    /// Message Offset of this segment's payload.
    pub mo: u32,
}

impl UntaggedRepr {
    /// Length of the emitted header.
    pub const fn header_len(&self) -> usize {
        UNTAGGED_HEADER_LEN
    }

    /// Parse the header of an untagged segment; returns it and the payload.
    pub fn parse(segment: &[u8]) -> Result<(UntaggedRepr, &[u8]), DdpError> {
        let p = UntaggedPacket::new_checked(segment)?;
        let repr = UntaggedRepr {
            last: p.last_flag(),
            rsvd_ulp: p.rsvd_ulp(),
            qn: p.queue_number(),
            msn: p.msn(),
            mo: p.message_offset(),
        };
        Ok((repr, &segment[UNTAGGED_HEADER_LEN..]))
    }

    /// Write the header into the first [`UNTAGGED_HEADER_LEN`] bytes of `buf`; returns the
    /// number of bytes written.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, BufferTooSmall> {
        let Some(h) = buf.get_mut(..UNTAGGED_HEADER_LEN) else {
            return Err(BufferTooSmall {
                needed: UNTAGGED_HEADER_LEN,
                got: buf.len(),
            });
        };
        h[field::CONTROL] = control_byte(false, self.last);
        h[field::U_RSVD_ULP].copy_from_slice(&self.rsvd_ulp);
        h[field::QN..field::QN + 4].copy_from_slice(&self.qn.to_be_bytes());
        h[field::MSN..field::MSN + 4].copy_from_slice(&self.msn.to_be_bytes());
        h[field::MO..field::MO + 4].copy_from_slice(&self.mo.to_be_bytes());
        Ok(UNTAGGED_HEADER_LEN)
    }

    /// The header as bytes.
    pub fn to_bytes(&self) -> [u8; UNTAGGED_HEADER_LEN] {
        let mut b = [0u8; UNTAGGED_HEADER_LEN];
        // The array has exactly the header length, so emit cannot fail.
        let _ = self.emit(&mut b);
        b
    }
}

/// A DDP header of either buffer model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Header {
    /// Tagged Buffer Model header.
    Tagged(TaggedRepr),
    /// Untagged Buffer Model header.
    Untagged(UntaggedRepr),
}

impl Header {
    /// Whether this is a tagged header.
    pub const fn is_tagged(&self) -> bool {
        matches!(self, Header::Tagged(_))
    }

    /// The L flag.
    pub const fn last(&self) -> bool {
        match self {
            Header::Tagged(t) => t.last,
            Header::Untagged(u) => u.last,
        }
    }

    /// The first RsvdULP octet (the RDMAP control field when DDP carries RDMAP).
    pub const fn rsvd_ulp_first(&self) -> u8 {
        match self {
            Header::Tagged(t) => t.rsvd_ulp,
            Header::Untagged(u) => u.rsvd_ulp[0],
        }
    }

    /// Length of the header.
    pub const fn header_len(&self) -> usize {
        match self {
            Header::Tagged(_) => TAGGED_HEADER_LEN,
            Header::Untagged(_) => UNTAGGED_HEADER_LEN,
        }
    }

    /// Write the header into `buf`; returns the number of bytes written.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, BufferTooSmall> {
        match self {
            Header::Tagged(t) => t.emit(buf),
            Header::Untagged(u) => u.emit(buf),
        }
    }
}

/// A whole DDP segment: header plus ULP payload (RFC 5041 §4.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment<'a> {
    /// The header.
    pub header: Header,
    /// The ULP payload.
    pub payload: &'a [u8],
}

impl<'a> Segment<'a> {
    /// Parse a DDP segment (one MPA ULPDU), dispatching on the T bit.
    ///
    /// Errors: [`DdpError::InvalidVersion`] when DV is not 1 (checked first, since another
    /// version's layout is unknown), [`DdpError::Truncated`] when the segment is shorter than
    /// its header.
    pub fn parse(segment: &'a [u8]) -> Result<(Header, &'a [u8]), DdpError> {
        let tagged = check_segment(segment)?;
        if tagged {
            let (h, p) = TaggedRepr::parse(segment)?;
            Ok((Header::Tagged(h), p))
        } else {
            let (h, p) = UntaggedRepr::parse(segment)?;
            Ok((Header::Untagged(h), p))
        }
    }

    /// Parse into a [`Segment`] value.
    pub fn new(segment: &'a [u8]) -> Result<Self, DdpError> {
        let (header, payload) = Segment::parse(segment)?;
        Ok(Segment { header, payload })
    }
}
