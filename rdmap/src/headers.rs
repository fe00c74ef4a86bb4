//! Fixed-length RDMAP headers: RDMA Read Request (RFC 5040 §4.4), Atomic Request and
//! Atomic Response (RFC 7306 §5.2.1–§5.2.2) and Immediate Data (RFC 7306 §6.2).
//!
//! Each header immediately follows the untagged DDP header. All fields are big-endian.

use core::fmt;

/// A header shorter than its fixed length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{what} needs {needed} bytes, {got} present")]
pub struct HeaderTooShort {
    /// Which header.
    pub what: &'static str,
    /// Bytes needed.
    pub needed: usize,
    /// Bytes present.
    pub got: usize,
}

fn take<'a, const N: usize>(
    b: &'a [u8],
    what: &'static str,
) -> Result<&'a [u8; N], HeaderTooShort> {
    b.first_chunk::<N>().ok_or(HeaderTooShort {
        what,
        needed: N,
        got: b.len(),
    })
}

// Fields of a header whose length `take` checked.
use ddp::be::{field32 as be32, field64 as be64};

/// RDMA Read Request Header (RFC 5040 §4.4, Figure 6), 28 octets.
///
/// ```text
///  0..4   Data Sink STag (SinkSTag)
///  4..12  Data Sink Tagged Offset (SinkTO)
/// 12..16  RDMA Read Message Size (RDMARDSZ)
/// 16..20  Data Source STag (SrcSTag)
/// 20..28  Data Source Tagged Offset (SrcTO)
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReadRequest {
    /// Data Sink STag: where the Read Response is placed (copied into it unchanged).
    pub sink_stag: u32,
    /// Data Sink Tagged Offset.
    pub sink_to: u64,
    /// RDMA Read Message Size: octets to read, 0 to 2^32 − 1.
    pub size: u32,
    /// Data Source STag: the buffer read at the responder.
    pub source_stag: u32,
    /// Data Source Tagged Offset.
    pub source_to: u64,
}

impl ReadRequest {
    /// Length of the header.
    pub const LEN: usize = 28;

    /// Parse the header from the start of `b`; returns it and the bytes after it.
    pub fn parse(b: &[u8]) -> Result<(ReadRequest, &[u8]), HeaderTooShort> {
        let h = take::<{ Self::LEN }>(b, "RDMA Read Request header")?;
        Ok((
            ReadRequest {
                sink_stag: be32(h, 0),
                sink_to: be64(h, 4),
                size: be32(h, 12),
                source_stag: be32(h, 16),
                source_to: be64(h, 20),
            },
            &b[Self::LEN..],
        ))
    }

    /// The header as bytes.
    pub fn to_bytes(&self) -> [u8; Self::LEN] {
        let mut b = [0u8; Self::LEN];
        b[0..4].copy_from_slice(&self.sink_stag.to_be_bytes());
        b[4..12].copy_from_slice(&self.sink_to.to_be_bytes());
        b[12..16].copy_from_slice(&self.size.to_be_bytes());
        b[16..20].copy_from_slice(&self.source_stag.to_be_bytes());
        b[20..28].copy_from_slice(&self.source_to.to_be_bytes());
        b
    }

    /// The header updated after `done` octets of the read were sent, as a Terminate reports it
    /// (RFC 5040 §4.8, "Terminated RDMA Header"): both Tagged Offsets advanced by `done`, the
    /// size reduced to the octets left. Offsets wrap modulo 2^64; `done` beyond the size
    /// leaves a size of zero.
    pub fn advanced_by(&self, done: u32) -> ReadRequest {
        ReadRequest {
            sink_stag: self.sink_stag,
            sink_to: self.sink_to.wrapping_add(u64::from(done)),
            size: self.size.saturating_sub(done),
            source_stag: self.source_stag,
            source_to: self.source_to.wrapping_add(u64::from(done)),
        }
    }
}

/// The Atomic Operation Code of an Atomic Request (RFC 7306 §5.2.1 Figure 5 and the IANA
/// "RDMAP Message Atomic Operation Subcodes" registry, RFC 7306 §10.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AtomicOp {
    /// 0000b FetchAdd.
    FetchAdd,
    /// 0010b CmpSwap.
    CmpSwap,
    /// Any other 4-bit value: 0001b is registered as Reserved, the rest are unassigned. An
    /// RNIC "MUST" surface an error on receiving one (RFC 7306 §5.2.1 item 4).
    Reserved(u8),
}

impl AtomicOp {
    /// The operation for a 4-bit code.
    pub const fn from_code(code: u8) -> AtomicOp {
        match code & 0xf {
            0x0 => AtomicOp::FetchAdd,
            0x2 => AtomicOp::CmpSwap,
            c => AtomicOp::Reserved(c),
        }
    }

    /// The 4-bit code.
    pub const fn code(self) -> u8 {
        match self {
            AtomicOp::FetchAdd => 0x0,
            AtomicOp::CmpSwap => 0x2,
            AtomicOp::Reserved(c) => c & 0xf,
        }
    }

    /// Whether RFC 7306 defines the operation.
    pub const fn is_defined(self) -> bool {
        !matches!(self, AtomicOp::Reserved(_))
    }
}

impl fmt::Display for AtomicOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AtomicOp::FetchAdd => f.write_str("FetchAdd"),
            AtomicOp::CmpSwap => f.write_str("CmpSwap"),
            AtomicOp::Reserved(c) => write!(f, "reserved atomic operation {c:#x}"),
        }
    }
}

/// Atomic Operation Request Header (RFC 7306 §5.2.1, Figure 4), 52 octets.
///
/// ```text
///  0..4   Reserved (28 bits, sent 0, ignored) | AOpCode (4 bits)
///  4..8   Request Identifier
///  8..12  Remote STag
/// 12..20  Remote Tagged Offset
/// 20..28  Add or Swap Data
/// 28..36  Add or Swap Mask
/// 36..44  Compare Data
/// 44..52  Compare Mask
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AtomicRequest {
    /// The operation.
    pub op: AtomicOp,
    /// Request Identifier, chosen by the requester and reflected in the response.
    pub request_id: u32,
    /// Remote STag of the target Tagged Buffer.
    pub stag: u32,
    /// Remote Tagged Offset of the 64-bit target.
    pub to: u64,
    /// Add Data (FetchAdd) or Swap Data (CmpSwap).
    pub add_swap_data: u64,
    /// Add Mask (FetchAdd) or Swap Mask (CmpSwap).
    pub add_swap_mask: u64,
    /// Compare Data (CmpSwap; zero for FetchAdd).
    pub compare_data: u64,
    /// Compare Mask (CmpSwap; all ones for FetchAdd).
    pub compare_mask: u64,
}

impl AtomicRequest {
    /// Length of the header.
    pub const LEN: usize = 52;

    /// A FetchAdd request. The fields FetchAdd does not use are set as RFC 7306 §5.2.1
    /// prescribes on transmit: Compare Data zero, Compare Mask all ones.
    pub const fn fetch_add(request_id: u32, stag: u32, to: u64, add: u64, add_mask: u64) -> Self {
        AtomicRequest {
            op: AtomicOp::FetchAdd,
            request_id,
            stag,
            to,
            add_swap_data: add,
            add_swap_mask: add_mask,
            compare_data: 0,
            compare_mask: u64::MAX,
        }
    }

    /// A CmpSwap request.
    pub const fn cmp_swap(
        request_id: u32,
        stag: u32,
        to: u64,
        compare: u64,
        compare_mask: u64,
        swap: u64,
        swap_mask: u64,
    ) -> Self {
        AtomicRequest {
            op: AtomicOp::CmpSwap,
            request_id,
            stag,
            to,
            add_swap_data: swap,
            add_swap_mask: swap_mask,
            compare_data: compare,
            compare_mask,
        }
    }

    /// Parse the header from the start of `b`; returns it and the bytes after it. The 28
    /// reserved bits are ignored (RFC 7306 §5.2.1).
    pub fn parse(b: &[u8]) -> Result<(AtomicRequest, &[u8]), HeaderTooShort> {
        let h = take::<{ Self::LEN }>(b, "Atomic Request header")?;
        Ok((
            AtomicRequest {
                op: AtomicOp::from_code(h[3] & 0x0f),
                request_id: be32(h, 4),
                stag: be32(h, 8),
                to: be64(h, 12),
                add_swap_data: be64(h, 20),
                add_swap_mask: be64(h, 28),
                compare_data: be64(h, 36),
                compare_mask: be64(h, 44),
            },
            &b[Self::LEN..],
        ))
    }

    /// The header as bytes (reserved bits zero).
    pub fn to_bytes(&self) -> [u8; Self::LEN] {
        let mut b = [0u8; Self::LEN];
        b[3] = self.op.code();
        b[4..8].copy_from_slice(&self.request_id.to_be_bytes());
        b[8..12].copy_from_slice(&self.stag.to_be_bytes());
        b[12..20].copy_from_slice(&self.to.to_be_bytes());
        b[20..28].copy_from_slice(&self.add_swap_data.to_be_bytes());
        b[28..36].copy_from_slice(&self.add_swap_mask.to_be_bytes());
        b[36..44].copy_from_slice(&self.compare_data.to_be_bytes());
        b[44..52].copy_from_slice(&self.compare_mask.to_be_bytes());
        b
    }

    /// The value the target holds after the operation, given the value it held before
    /// (RFC 7306 §5.1.1 masked FetchAdd, §5.1.2 masked CmpSwap). `None` for a reserved
    /// operation.
    ///
    /// FetchAdd adds independently in fields whose most significant bit is marked by a set
    /// bit of the Add Mask: the carry out of a marked bit is discarded. An Add Mask of zero is
    /// a plain 64-bit add. CmpSwap replaces the Swap-Mask bits with Swap Data when the
    /// Compare-Mask bits of the original equal those of Compare Data.
    pub fn apply(&self, original: u64) -> Option<u64> {
        match self.op {
            AtomicOp::FetchAdd => {
                Some(masked_add(original, self.add_swap_data, self.add_swap_mask))
            }
            AtomicOp::CmpSwap => {
                if (self.compare_data ^ original) & self.compare_mask == 0 {
                    Some(
                        (original & !self.add_swap_mask)
                            | (self.add_swap_data & self.add_swap_mask),
                    )
                } else {
                    Some(original)
                }
            }
            AtomicOp::Reserved(_) => None,
        }
    }
}

/// Add `a` and `b` bit by bit, dropping the carry out of every bit position set in `mask`.
fn masked_add(a: u64, b: u64, mask: u64) -> u64 {
    let mut result = 0u64;
    let mut carry = 0u64;
    for bit in 0..64 {
        let x = (a >> bit) & 1;
        let y = (b >> bit) & 1;
        let sum = x + y + carry;
        result |= (sum & 1) << bit;
        carry = (sum >> 1) & !((mask >> bit) & 1);
    }
    result
}

/// Atomic Operation Response Header (RFC 7306 §5.2.2, Figure 6), 12 octets.
///
/// ```text
///  0..4   Original Request Identifier
///  4..12  Original Remote Data Value
/// ```
///
/// (RFC 7306 §4 calls this header "32 bytes long", but Figure 6 and Appendix A.2 both show the
/// 12 octets implemented here.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AtomicResponse {
    /// The Request Identifier of the request this answers.
    pub request_id: u32,
    /// The 64-bit value the target held before the operation.
    pub original_value: u64,
}

impl AtomicResponse {
    /// Length of the header.
    pub const LEN: usize = 12;

    /// Parse the header from the start of `b`; returns it and the bytes after it.
    pub fn parse(b: &[u8]) -> Result<(AtomicResponse, &[u8]), HeaderTooShort> {
        let h = take::<{ Self::LEN }>(b, "Atomic Response header")?;
        Ok((
            AtomicResponse {
                request_id: be32(h, 0),
                original_value: be64(h, 4),
            },
            &b[Self::LEN..],
        ))
    }

    /// The header as bytes.
    pub fn to_bytes(&self) -> [u8; Self::LEN] {
        let mut b = [0u8; Self::LEN];
        b[0..4].copy_from_slice(&self.request_id.to_be_bytes());
        b[4..12].copy_from_slice(&self.original_value.to_be_bytes());
        b
    }
}

/// Length of the Immediate Data header of RFC 7306 §6.2: the message carries exactly 8 octets.
pub const IMMEDIATE_DATA_LEN: usize = 8;
