//! A Terminate message (RFC 5040 §4.8) read as its sender meant it, from its raw octets: in
//! the RFC's layout or in the low-bit-first layout of Linux siw 6.1 (Layer and Error Type
//! exchanged, M/D/R in the reserved low bits), with the segment length and copied headers
//! the flags announce, as far as the octets go. The capture decoder reports a low-bit-first
//! Terminate with it ([`crate::LowBitFirst`]); the conformance runner judges a peer's cause
//! and copied headers apart from the layout (which one case judges on its own).

use ddp::{TAGGED_HEADER_LEN, UNTAGGED_HEADER_LEN};
use rdmap::{ReadRequest, TermCause, low_bit_first_reading};

/// How the Terminate Control word was laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// RFC 5040 §4.8: Layer in the high nibble, M/D/R the three high bits of the third
    /// octet, the reserved bits zero.
    Rfc,
    /// Linux siw 6.1 on little-endian hosts: Layer and Error Type exchanged, M/D/R in the
    /// three low bits of the third octet.
    LowBitFirst,
    /// Reserved bits set in some other pattern (read as the RFC layout).
    ReservedBitsSet,
}

/// A Terminate as the peer meant it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerTerminate {
    /// The Terminate Control word as received.
    pub control: [u8; 4],
    /// The layout it was read in.
    pub layout: Layout,
    /// Layer, Error Type, Error Code.
    pub cause: TermCause,
    /// M bit.
    pub m: bool,
    /// D bit.
    pub d: bool,
    /// R bit.
    pub r: bool,
    /// The DDP Segment Length (with M or D).
    pub segment_length: Option<u16>,
    /// The copied DDP header (with D), as many octets as its T bit says.
    pub ddp_header: Option<Vec<u8>>,
    /// The copied RDMA Read Request header (with R, when present).
    pub rdma_header: Option<ReadRequest>,
}

/// The RDMAP opcode of a Terminate (in the first RsvdULP octet).
const TERMINATE_OPCODE: u8 = 0x7;

/// Reads `ulpdu` as a Terminate: `None` if it is not an untagged segment on queue 2 with
/// the Terminate opcode, or too short for the Terminate Control.
pub fn read(ulpdu: &[u8]) -> Option<PeerTerminate> {
    let ctrl = *ulpdu.first()?;
    if ctrl & 0x80 != 0 {
        return None;
    }
    if ulpdu.get(1)? & 0x0f != TERMINATE_OPCODE {
        return None;
    }
    let qn = u32::from_be_bytes(ulpdu.get(6..10)?.try_into().ok()?);
    if qn != ddp::qn::TERMINATE {
        return None;
    }
    let control: [u8; 4] = ulpdu
        .get(UNTAGGED_HEADER_LEN..UNTAGGED_HEADER_LEN + 4)?
        .try_into()
        .ok()?;
    let reserved_clear = control[2] & 0x1f == 0 && control[3] == 0;
    let (layout, cause, m, d, r) = if reserved_clear {
        let (m, d, r) = (
            control[2] & 0x80 != 0,
            control[2] & 0x40 != 0,
            control[2] & 0x20 != 0,
        );
        (
            Layout::Rfc,
            TermCause::from_wire(control[0] >> 4, control[0] & 0x0f, control[1]),
            m,
            d,
            r,
        )
    } else if let Some((cause, m, d, r)) = low_bit_first_reading(control) {
        (Layout::LowBitFirst, cause, m, d, r)
    } else {
        let (m, d, r) = (
            control[2] & 0x80 != 0,
            control[2] & 0x40 != 0,
            control[2] & 0x20 != 0,
        );
        (
            Layout::ReservedBitsSet,
            TermCause::from_wire(control[0] >> 4, control[0] & 0x0f, control[1]),
            m,
            d,
            r,
        )
    };
    let mut rest = ulpdu.get(UNTAGGED_HEADER_LEN + 4..).unwrap_or(&[]);
    let mut segment_length = None;
    let mut ddp_header = None;
    let mut rdma_header = None;
    if (m || d)
        && let Some(&[hi, lo]) = rest.get(..2)
    {
        segment_length = Some(u16::from_be_bytes([hi, lo]));
        rest = rest.get(2..).unwrap_or(&[]);
    }
    if d && let Some(&first) = rest.first() {
        let n = if first & 0x80 != 0 {
            TAGGED_HEADER_LEN
        } else {
            UNTAGGED_HEADER_LEN
        };
        if let Some(h) = rest.get(..n) {
            ddp_header = Some(h.to_vec());
            rest = rest.get(n..).unwrap_or(&[]);
        }
    }
    if r && let Ok((rr, _)) = ReadRequest::parse(rest) {
        rdma_header = Some(rr);
    }
    Some(PeerTerminate {
        control,
        layout,
        cause,
        m,
        d,
        r,
        segment_length,
        ddp_header,
        rdma_header,
    })
}

impl PeerTerminate {
    /// A one-line description.
    pub fn describe(&self) -> String {
        let mut s = format!("Terminate: {}", self.cause);
        let flags: String = [(self.m, 'M'), (self.d, 'D'), (self.r, 'R')]
            .iter()
            .filter(|(on, _)| *on)
            .map(|(_, c)| *c)
            .collect();
        if !flags.is_empty() {
            let _ = std::fmt::Write::write_fmt(&mut s, format_args!(", {flags}"));
        }
        match self.layout {
            Layout::Rfc => {}
            Layout::LowBitFirst => s.push_str(" (control word in siw 6.1's low-bit-first layout)"),
            Layout::ReservedBitsSet => s.push_str(" (reserved bits set)"),
        }
        s
    }
}
