//! FPDU framing for MPA full operation (RFC 5044 §4: §4.1 FPDU format,
//! §4.2 marker format, §4.3 marker placement, §4.4 CRC, §4.5 MULPDU).
//!
//! ```text
//! +-------------------------------+-------------------------------+
//! |  ULPDU_Length (16 bits, BE)   |                               |
//! +-------------------------------+                               |
//! ~                 ULPDU (ULPDU_Length octets)                   ~
//! |                               +-------------------------------+
//! |                               |  PAD (0-3 octets, zero)       |
//! +-------------------------------+-------------------------------+
//! |                 CRC (32 bits, see crate::crc)                 |
//! +---------------------------------------------------------------+
//! ```
//!
//! PAD brings ULPDU_Length + ULPDU + PAD to a multiple of four octets (§4.1).
//! The CRC field is always present; when CRC was not negotiated its content is
//! meaningless (Linux siw sends zeros, which is what [`FpduEncoder`] sends) and a
//! receiver must treat it as valid whatever it holds (§7.1.1, C flag).
//!
//! ## Markers
//!
//! When a direction uses markers, a 4-octet marker (16 reserved bits, zero on
//! send and ignored on receive, then the 16-bit FPDUPTR) is inserted at every
//! stream position that is a multiple of 512 octets from the *origin*: the first
//! octet of the first FPDU the sender transmits, i.e. the first octet after its
//! MPA Request or Reply. So the first marker immediately precedes the first FPDU
//! and has FPDUPTR 0. Markers are counted in the 512 octets (a 512-octet period
//! holds 508 octets of FPDU data and one marker).
//!
//! Interpretation implemented here (RFC 5044 §4.2 defines FPDUPTR as the
//! number of octets from the beginning of the ULPDU_Length field to the first
//! octet of the marker; §4.3 places the markers):
//! * A marker position that coincides with an FPDU boundary belongs to the FPDU
//!   that *starts* there: it is emitted immediately before that FPDU's
//!   ULPDU_Length, carries FPDUPTR = 0, is part of that FPDU's wire length and is
//!   covered by that FPDU's CRC. (A marker right after an FPDU's last CRC octet is
//!   therefore never sent until the next FPDU is.) Independent decoders agree:
//!   Wireshark's MPA dissector reads the ULPDU_Length after such an opening
//!   marker and computes the CRC from the marker's first octet.
//! * Any other marker inside an FPDU carries FPDUPTR = the number of octets from
//!   the first octet of that FPDU's ULPDU_Length field to the first octet of the
//!   marker (the §4.2 wording, taken literally). In an FPDU that opens with a
//!   marker, the next marker is thus 508 octets after the ULPDU_Length field,
//!   not 512. [`Deframer`] also accepts the other reading (a pointer to the
//!   FPDU's first octet, the opening marker, i.e. 512; some early
//!   implementations sent that), because both locate the same FPDU.
//! * The CRC covers every octet of the FPDU that precedes the CRC field (§4.4):
//!   ULPDU_Length, ULPDU, PAD and all markers in between, including an opening
//!   marker and a marker that falls between PAD and CRC.
//! * Receivers treat the two low bits of FPDUPTR as zero and ignore the
//!   reserved half of the marker (§4.2).
//! * A marker that disagrees with the ULPDU_Length framing is LLP error 3, but
//!   only if the FPDU's CRC is valid (§8); a bad CRC is reported as error 2.
//!
//! On a real connection every FPDU and marker starts 4-octet aligned relative to
//! the origin, so a marker never splits a field. The encoder and deframer still
//! accept any start offset (0..511) and then split fields where a marker falls,
//! so that every offset can be exercised in tests.

use std::collections::VecDeque;

use thiserror::Error;

use crate::crc::{self, CRC_LEN, Crc32c};
use crate::term::LlpErrorCode;

/// Marker spacing in the TCP octet stream.
pub const MARKER_INTERVAL: u32 = 512;
/// Length of a marker.
pub const MARKER_LEN: usize = 4;
/// Length of the ULPDU_Length field.
pub const ULPDU_LENGTH_LEN: usize = 2;
/// Largest ULPDU the 16-bit ULPDU_Length field can describe.
pub const MAX_ULPDU: usize = u16::MAX as usize;
/// Fixed framing overhead of an FPDU without pad and markers (ULPDU_Length + CRC).
pub const FPDU_OVERHEAD: usize = ULPDU_LENGTH_LEN + CRC_LEN;

const PERIOD: usize = MARKER_INTERVAL as usize;
/// FPDU octets between two markers.
const DATA_PER_PERIOD: usize = PERIOD - MARKER_LEN;

/// Number of PAD octets for a ULPDU of `ulpdu_len` octets (RFC 5044 §4.1).
pub fn pad_len(ulpdu_len: usize) -> usize {
    (4 - (ULPDU_LENGTH_LEN + ulpdu_len) % 4) % 4
}

/// Maximum ULPDU size for an effective MSS (RFC 5044 §4.5, "MULPDU").
///
/// Without markers: `EMSS - (6 + EMSS mod 4)`; with markers:
/// `EMSS - (6 + 4 * ceil(EMSS / 512) + EMSS mod 4)`. An FPDU carrying MULPDU
/// octets of ULPDU then fits in one EMSS-sized segment at any (4-octet aligned)
/// marker phase. Linux siw (EMSS 1448, no markers) uses 1442. Saturates at
/// zero for tiny EMSS values.
pub fn mulpdu(emss: u32, markers: bool) -> u32 {
    let marker_room = if markers {
        4u32.saturating_mul(emss.div_ceil(MARKER_INTERVAL))
    } else {
        0
    };
    let overhead = 6u32.saturating_add(emss % 4).saturating_add(marker_room);
    emss.saturating_sub(overhead)
}

/// Where the markers of one FPDU fall.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Layout {
    /// Number of markers inside the FPDU (opening marker included).
    markers: usize,
    /// Whether the FPDU opens with a marker (starts on a marker position).
    leading: bool,
    /// Wire offset, from the FPDU's first octet, of the ULPDU_Length field.
    header_off: usize,
    /// Total octets on the wire.
    wire_len: usize,
    /// Largest FPDUPTR value among the markers (0 if none).
    max_ptr: usize,
}

/// Computes the marker layout of an FPDU of `logical_len` octets (ULPDU_Length,
/// ULPDU, PAD and CRC) whose first octet sits `grid` octets past a marker position.
fn layout(grid: usize, logical_len: usize, markers: bool) -> Layout {
    let to_first = (PERIOD - grid % PERIOD) % PERIOD;
    let count = if !markers || logical_len <= to_first {
        0
    } else {
        1 + (logical_len - to_first - 1) / DATA_PER_PERIOD
    };
    let leading = markers && to_first == 0;
    let header_off = if leading { MARKER_LEN } else { 0 };
    let max_ptr = match count {
        0 => 0,
        1 if leading => 0,
        n => to_first + PERIOD * (n - 1) - header_off,
    };
    Layout {
        markers: count,
        leading,
        header_off,
        wire_len: logical_len + MARKER_LEN * count,
        max_ptr,
    }
}

/// Transmit settings of one direction, as negotiated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct TxConfig {
    /// Compute and send CRC32c (otherwise the CRC field is zero).
    pub crc: bool,
    /// Insert markers (the peer asked for them with M = 1).
    pub markers: bool,
}

/// Errors from [`FpduEncoder::encode`]. Nothing is written when one is returned.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum EncodeError {
    /// The ULPDU is larger than the 16-bit ULPDU_Length field allows.
    #[error("ULPDU of {len} octets exceeds the ULPDU_Length maximum of {MAX_ULPDU}")]
    UlpduTooLong {
        /// The offending ULPDU length.
        len: usize,
    },
    /// With markers on, a marker would sit more than 65535 octets after the
    /// ULPDU_Length field, which FPDUPTR cannot express; segment the ULPDU
    /// smaller (see [`mulpdu`]).
    #[error(
        "ULPDU of {len} octets is too long for markers: an FPDUPTR of {ptr} does not fit 16 bits"
    )]
    MarkerPointerOverflow {
        /// The ULPDU length.
        len: usize,
        /// The FPDUPTR value that would be needed.
        ptr: usize,
    },
    /// [`FpduEncoder::encode_split`] was asked to frame an FPDU on a stream with markers:
    /// markers cut the payload into runs, so it cannot be sent as one piece (use
    /// [`FpduEncoder::encode_append`]).
    #[error("split FPDU framing needs markers off (markers cut the payload)")]
    SplitWithMarkers,
}

/// The trailer of an FPDU framed by [`FpduEncoder::encode_split`]: PAD and CRC field
/// (3 to 7 octets), sent right after the payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FpduTail {
    bytes: [u8; 3 + CRC_LEN],
    len: usize,
}

impl FpduTail {
    /// The octets to send after the payload.
    pub fn as_bytes(&self) -> &[u8] {
        self.bytes.get(..self.len).unwrap_or(&[])
    }
}

/// Writes FPDUs for one direction of a connection, tracking the stream position
/// so that markers land every 512 octets from the origin.
///
/// The encoder assumes everything it emits is sent, in order, on the TCP stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FpduEncoder {
    cfg: TxConfig,
    origin: u32,
    emitted: u64,
}

struct Writer<'a> {
    out: &'a mut Vec<u8>,
    /// Wire offset within the FPDU.
    off: usize,
    /// Position of the FPDU's first octet within the marker period.
    grid: usize,
    markers: bool,
    header_off: usize,
    digest: Option<Crc32c>,
}

impl Writer<'_> {
    fn at_marker(&self) -> bool {
        self.markers && (self.grid + self.off).is_multiple_of(PERIOD)
    }

    fn marker(&mut self) {
        let ptr = if self.off == 0 {
            0
        } else {
            self.off.saturating_sub(self.header_off)
        };
        // The caller checked that every pointer fits 16 bits.
        let [hi, lo] = u16::try_from(ptr).unwrap_or(u16::MAX).to_be_bytes();
        let m = [0, 0, hi, lo];
        self.out.extend_from_slice(&m);
        if let Some(d) = self.digest.as_mut() {
            d.update(&m);
        }
        self.off += MARKER_LEN;
    }

    fn put(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            if self.at_marker() {
                self.marker();
            }
            let room = if self.markers {
                PERIOD - (self.grid + self.off) % PERIOD
            } else {
                data.len()
            };
            let (now, rest) = data.split_at(room.min(data.len()));
            self.out.extend_from_slice(now);
            if let Some(d) = self.digest.as_mut() {
                d.update(now);
            }
            self.off += now.len();
            data = rest;
        }
    }

    /// Appends `len` octets produced by `fill`, which is called once per run of octets
    /// between markers with the run's offset within those `len` octets, its length and the
    /// output to append it to.
    fn put_with(&mut self, len: usize, fill: &mut dyn FnMut(usize, usize, &mut Vec<u8>)) {
        let mut done = 0;
        while done < len {
            if self.at_marker() {
                self.marker();
            }
            let left = len - done;
            let room = if self.markers {
                PERIOD - (self.grid + self.off) % PERIOD
            } else {
                left
            };
            let n = room.min(left);
            let start = self.out.len();
            fill(done, n, self.out);
            // A `fill` that broke its contract still yields a well-formed FPDU.
            debug_assert_eq!(
                self.out.len(),
                start + n,
                "fill must append exactly n octets"
            );
            if self.out.len() != start + n {
                self.out.resize(start + n, 0);
            }
            let run = self.out.get(start..).unwrap_or(&[]);
            if let Some(d) = self.digest.as_mut() {
                d.update(run);
            }
            self.off += n;
            done += n;
        }
    }
}

impl FpduEncoder {
    /// An encoder whose first FPDU starts at the marker origin (the normal case).
    pub fn new(cfg: TxConfig) -> Self {
        Self::with_offset(cfg, 0)
    }

    /// An encoder whose first octet sits `offset` octets past a marker position
    /// (reduced modulo 512). Real connections start at 0; other offsets are for
    /// tests and for picking up a stream in the middle.
    pub fn with_offset(cfg: TxConfig, offset: u32) -> Self {
        FpduEncoder {
            cfg,
            origin: offset % MARKER_INTERVAL,
            emitted: 0,
        }
    }

    /// The transmit settings.
    pub fn config(&self) -> TxConfig {
        self.cfg
    }

    /// Octets emitted so far.
    pub fn stream_offset(&self) -> u64 {
        self.emitted
    }

    /// Position of the next octet within the marker period (0..512).
    pub fn marker_phase(&self) -> u32 {
        // The remainder is below 512, so it fits u32.
        ((u64::from(self.origin) + self.emitted) % u64::from(MARKER_INTERVAL)) as u32
    }

    fn layout(&self, ulpdu_len: usize) -> Layout {
        let logical = FPDU_OVERHEAD + ulpdu_len + pad_len(ulpdu_len);
        layout(self.marker_phase() as usize, logical, self.cfg.markers)
    }

    /// Wire length of an FPDU carrying `ulpdu_len` octets if it were encoded next
    /// (ULPDU_Length, ULPDU, PAD, markers and CRC).
    pub fn fpdu_len(&self, ulpdu_len: usize) -> usize {
        self.layout(ulpdu_len).wire_len
    }

    /// Appends one FPDU whose ULPDU is the concatenation of `ulpdu_parts` (for
    /// example a DDP header and a payload slice) to `out`.
    ///
    /// Returns the number of octets appended. On error nothing is appended and
    /// the stream position is unchanged.
    pub fn encode(
        &mut self,
        ulpdu_parts: &[&[u8]],
        out: &mut Vec<u8>,
    ) -> Result<usize, EncodeError> {
        self.encode_inner(ulpdu_parts, 0, out, &mut |_, _, _| {})
    }

    /// Appends one FPDU whose ULPDU is the concatenation of `head` (for example a DDP
    /// header) and `payload_len` further octets that `fill` writes in place, straight
    /// into `out`, so the payload is copied only once (from wherever it lives into the
    /// FPDU).
    ///
    /// `fill(offset, dst)` is called for consecutive runs of the payload, in order: `offset`
    /// is the run's position within the payload and `dst` (zeroed beforehand) is where its
    /// octets go. Runs are split where markers fall, which is why there may be several;
    /// markers, PAD and the CRC (computed over what `fill` wrote) are added around them.
    ///
    /// Returns the number of octets appended. On error nothing is appended, `fill` is not
    /// called and the stream position is unchanged.
    pub fn encode_with<F>(
        &mut self,
        head: &[&[u8]],
        payload_len: usize,
        out: &mut Vec<u8>,
        mut fill: F,
    ) -> Result<usize, EncodeError>
    where
        F: FnMut(usize, &mut [u8]),
    {
        self.encode_inner(head, payload_len, out, &mut |off, n, out: &mut Vec<u8>| {
            let start = out.len();
            out.resize(start + n, 0);
            fill(off, out.get_mut(start..).unwrap_or(&mut []));
        })
    }

    /// Like [`FpduEncoder::encode_with`], but `fill(offset, len, out)` *appends* each run
    /// of `len` payload octets to `out` itself (for example with `extend_from_slice`, or a
    /// copy into spare capacity), so the output is not zero-filled first.
    ///
    /// `fill` must append exactly `len` octets and leave what is already in `out` alone;
    /// if it appends a different number, the run is cut or zero-padded to `len` (a bug in
    /// the caller, caught by a debug assertion).
    pub fn encode_append<F>(
        &mut self,
        head: &[&[u8]],
        payload_len: usize,
        out: &mut Vec<u8>,
        mut fill: F,
    ) -> Result<usize, EncodeError>
    where
        F: FnMut(usize, usize, &mut Vec<u8>),
    {
        self.encode_inner(head, payload_len, out, &mut fill)
    }

    /// Frames one FPDU whose payload is not copied into the output (markers off only):
    /// appends ULPDU_Length and `head` to `out` and returns the PAD + CRC trailer. The
    /// caller sends `payload_len` payload octets between the two, e.g. with a vectored
    /// write straight from where the payload lives, so the wire carries exactly what
    /// [`FpduEncoder::encode_append`] would have produced.
    ///
    /// With CRC on, `crc_payload` is called once and must feed those same payload octets,
    /// in order, to the digest it is given (RFC 5044 §4.4: the CRC covers ULPDU_Length,
    /// ULPDU and PAD); with CRC off it is not called.
    ///
    /// On error nothing is appended and the stream position is unchanged.
    pub fn encode_split<F>(
        &mut self,
        head: &[&[u8]],
        payload_len: usize,
        out: &mut Vec<u8>,
        crc_payload: F,
    ) -> Result<FpduTail, EncodeError>
    where
        F: FnOnce(&mut Crc32c),
    {
        if self.cfg.markers {
            return Err(EncodeError::SplitWithMarkers);
        }
        let len = head
            .iter()
            .fold(payload_len, |acc, p| acc.saturating_add(p.len()));
        if len > MAX_ULPDU {
            return Err(EncodeError::UlpduTooLong { len });
        }
        let start = out.len();
        // len <= 65535 was checked above.
        out.extend_from_slice(&(len as u16).to_be_bytes());
        for part in head {
            out.extend_from_slice(part);
        }
        let pad = pad_len(len);
        let mut bytes = [0u8; 3 + CRC_LEN];
        if self.cfg.crc {
            let mut d = Crc32c::new();
            d.update(out.get(start..).unwrap_or(&[]));
            crc_payload(&mut d);
            d.update(bytes.get(..pad).unwrap_or(&[]));
            if let Some(f) = bytes.get_mut(pad..pad + CRC_LEN) {
                f.copy_from_slice(&crc::to_wire(d.value()));
            }
        }
        let tail = FpduTail {
            bytes,
            len: pad + CRC_LEN,
        };
        self.emitted += (FPDU_OVERHEAD + len + pad) as u64;
        Ok(tail)
    }

    fn encode_inner(
        &mut self,
        ulpdu_parts: &[&[u8]],
        payload_len: usize,
        out: &mut Vec<u8>,
        fill: &mut dyn FnMut(usize, usize, &mut Vec<u8>),
    ) -> Result<usize, EncodeError> {
        let len = ulpdu_parts
            .iter()
            .fold(payload_len, |acc, p| acc.saturating_add(p.len()));
        if len > MAX_ULPDU {
            return Err(EncodeError::UlpduTooLong { len });
        }
        let lay = self.layout(len);
        if lay.max_ptr > usize::from(u16::MAX) {
            return Err(EncodeError::MarkerPointerOverflow {
                len,
                ptr: lay.max_ptr,
            });
        }
        out.reserve(lay.wire_len);
        let mut w = Writer {
            out,
            off: 0,
            grid: self.marker_phase() as usize,
            markers: self.cfg.markers,
            header_off: lay.header_off,
            digest: self.cfg.crc.then(Crc32c::new),
        };
        // len <= 65535 was checked above.
        w.put(&(len as u16).to_be_bytes());
        for part in ulpdu_parts {
            w.put(part);
        }
        if payload_len > 0 {
            w.put_with(payload_len, fill);
        }
        let pad = [0u8; 3];
        w.put(pad.get(..pad_len(len)).unwrap_or(&[]));
        let field = match w.digest {
            Some(_) => {
                // A marker due right before the CRC field precedes it and is covered.
                if w.at_marker() {
                    w.marker();
                }
                let value = w.digest.take().map_or(0, |d| d.value());
                crc::to_wire(value)
            }
            None => [0u8; CRC_LEN],
        };
        w.put(&field);
        let written = w.off;
        debug_assert_eq!(written, lay.wire_len);
        self.emitted += written as u64;
        Ok(written)
    }
}

/// Receive settings of one direction, as negotiated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RxConfig {
    /// Check CRC32c (otherwise the CRC field is ignored).
    pub crc: bool,
    /// The peer inserts markers (we sent M = 1).
    pub markers: bool,
    /// Position of the first octet pushed within the marker period (0..512;
    /// reduced modulo 512). 0 when the deframer starts right after the MPA frame.
    pub start_offset: u32,
    /// Largest acceptable ULPDU_Length (at most 65535, e.g. the local MULPDU).
    pub max_ulpdu: usize,
    /// Smallest acceptable ULPDU_Length.
    pub min_ulpdu: usize,
}

impl RxConfig {
    /// Settings with the given CRC and marker use, start offset 0 and any
    /// ULPDU_Length from 0 to 65535 accepted.
    pub fn new(crc: bool, markers: bool) -> Self {
        RxConfig {
            crc,
            markers,
            start_offset: 0,
            max_ulpdu: MAX_ULPDU,
            min_ulpdu: 0,
        }
    }

    /// Sets the start offset within the marker period.
    pub fn with_start_offset(mut self, offset: u32) -> Self {
        self.start_offset = offset % MARKER_INTERVAL;
        self
    }

    /// Sets the largest acceptable ULPDU_Length.
    pub fn with_max_ulpdu(mut self, max: usize) -> Self {
        self.max_ulpdu = max.min(MAX_ULPDU);
        self
    }

    /// Sets the smallest acceptable ULPDU_Length (DDP headers need at least 14).
    pub fn with_min_ulpdu(mut self, min: usize) -> Self {
        self.min_ulpdu = min;
        self
    }
}

/// What is known about an FPDU's CRC field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CrcStatus {
    /// CRC was negotiated and the field matched.
    Good,
    /// CRC was not negotiated; the field (siw sends zeros) was not checked, as
    /// RFC 5044 requires. Its octets are kept for display.
    NotNegotiated {
        /// The CRC field octets as received.
        field: [u8; CRC_LEN],
    },
}

/// One FPDU taken off the stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fpdu {
    /// The ULPDU (markers, ULPDU_Length, PAD and CRC removed).
    pub ulpdu: Vec<u8>,
    /// Offset of the FPDU's first octet (an opening marker, if any) counted from
    /// the first octet pushed into the deframer.
    pub stream_offset: u64,
    /// Octets the FPDU occupied on the wire, markers included.
    pub wire_len: usize,
    /// Number of markers inside the FPDU.
    pub markers: usize,
    /// CRC outcome.
    pub crc: CrcStatus,
    /// The PAD octets were not all zero. RFC 5044 §4.1 requires the sender to
    /// zero them and the receiver to ignore them (apart from the CRC), so this
    /// is only a conformance note about the peer; Linux siw 6.1 sometimes sends
    /// stale PAD octets.
    pub nonzero_pad: bool,
}

impl Fpdu {
    /// A borrowed view of this FPDU.
    pub fn as_view(&self) -> FpduRef<'_> {
        FpduRef {
            ulpdu: &self.ulpdu,
            stream_offset: self.stream_offset,
            wire_len: self.wire_len,
            markers: self.markers,
            crc: self.crc,
            nonzero_pad: self.nonzero_pad,
        }
    }
}

/// One FPDU taken off the stream by [`Deframer::push_with`], its ULPDU borrowed (from
/// the pushed input when the FPDU arrived whole and without markers, otherwise from the
/// deframer). The fields mean what they mean in [`Fpdu`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FpduRef<'a> {
    /// The ULPDU (markers, ULPDU_Length, PAD and CRC removed).
    pub ulpdu: &'a [u8],
    /// Offset of the FPDU's first octet counted from the first octet pushed.
    pub stream_offset: u64,
    /// Octets the FPDU occupied on the wire, markers included.
    pub wire_len: usize,
    /// Number of markers inside the FPDU.
    pub markers: usize,
    /// CRC outcome.
    pub crc: CrcStatus,
    /// The PAD octets were not all zero (see [`Fpdu::nonzero_pad`]).
    pub nonzero_pad: bool,
}

impl FpduRef<'_> {
    /// An owned copy.
    pub fn to_fpdu(&self) -> Fpdu {
        Fpdu {
            ulpdu: self.ulpdu.to_vec(),
            stream_offset: self.stream_offset,
            wire_len: self.wire_len,
            markers: self.markers,
            crc: self.crc,
            nonzero_pad: self.nonzero_pad,
        }
    }
}

/// How the next FPDU at the front of some input can be taken.
enum Peek {
    /// Whole, without markers: ULPDU_Length and wire length.
    Whole(usize, usize),
    /// Whole, with markers inside: wire length.
    Marked(usize),
    /// Not all there yet: the wire length, once the ULPDU_Length is there.
    Partial(Option<usize>),
    /// The ULPDU_Length is out of range.
    BadLength,
}

/// Errors reported by [`Deframer`].
///
/// [`DeframeError::Crc`] and [`DeframeError::BadMarker`] are *recoverable*: the
/// FPDU was consumed using its ULPDU_Length and deframing continues after it
/// (useful for capture decoding; a live connection must still terminate).
/// [`DeframeError::BadLength`] is *fatal*: the FPDU boundary is lost and the
/// deframer stops. Use [`DeframeError::is_fatal`] and [`DeframeError::term_code`].
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum DeframeError {
    /// The FPDU's CRC field does not match the CRC32c of its contents.
    #[error(
        "MPA CRC error in FPDU at stream offset {offset}: computed {expected:#010x}, field holds {found:#010x}"
    )]
    Crc {
        /// CRC32c computed over the received FPDU.
        expected: u32,
        /// CRC32c value carried in the field.
        found: u32,
        /// Stream offset of the FPDU.
        offset: u64,
    },
    /// The ULPDU_Length is outside the configured range; the FPDU boundary is lost.
    #[error(
        "ULPDU_Length {len} at stream offset {offset} is outside the accepted range {min}..={max}; FPDU alignment lost"
    )]
    BadLength {
        /// The ULPDU_Length value.
        len: usize,
        /// Configured minimum.
        min: usize,
        /// Configured maximum.
        max: usize,
        /// Stream offset of the FPDU.
        offset: u64,
    },
    /// A marker's FPDUPTR does not point at the FPDU it sits in (RFC 5044 §8,
    /// code 3). With CRC negotiated this is only reported for an FPDU whose CRC
    /// is valid; otherwise the FPDU yields [`DeframeError::Crc`].
    #[error(
        "MPA marker at stream offset {offset} has FPDUPTR {found}, expected {expected} (marker and ULPDU_Length disagree)"
    )]
    BadMarker {
        /// Stream offset of the marker.
        offset: u64,
        /// FPDUPTR found.
        found: u16,
        /// FPDUPTR implied by the ULPDU_Length framing.
        expected: u32,
    },
}

impl DeframeError {
    /// Whether the deframer stopped (no further FPDUs will be produced).
    pub fn is_fatal(&self) -> bool {
        matches!(self, DeframeError::BadLength { .. })
    }

    /// The LLP error to report in a Terminate message.
    pub fn llp_error(&self) -> LlpErrorCode {
        match self {
            DeframeError::Crc { .. } => LlpErrorCode::CrcError,
            DeframeError::BadLength { .. } | DeframeError::BadMarker { .. } => {
                LlpErrorCode::MarkerLengthMismatch
            }
        }
    }

    /// The Terminate *Error Code* octet (Layer LLP, Error Type MPA).
    pub fn term_code(&self) -> u8 {
        self.llp_error().code()
    }

    /// Stream offset the error refers to.
    pub fn offset(&self) -> u64 {
        match self {
            DeframeError::Crc { offset, .. }
            | DeframeError::BadLength { offset, .. }
            | DeframeError::BadMarker { offset, .. } => *offset,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Header,
    Payload,
    Pad,
    Crc,
}

/// The FPDU being received.
#[derive(Clone, Debug)]
struct Current {
    start: u64,
    leading: bool,
    header_off: u64,
    stage: Stage,
    hdr: [u8; ULPDU_LENGTH_LEN],
    hdr_have: usize,
    ulpdu_len: usize,
    ulpdu: Vec<u8>,
    pad: [u8; 3],
    pad_len: usize,
    pad_have: usize,
    field: [u8; CRC_LEN],
    field_have: usize,
    digest: Option<Crc32c>,
    /// Octets of ULPDU_Length + ULPDU + PAD already fed to the digest.
    hashed: usize,
    markers: usize,
    marker_error: Option<DeframeError>,
}

enum Step {
    /// Took this many octets; FPDU continues.
    More(usize),
    /// Took this many octets; the ULPDU_Length was out of range.
    BadLength(usize, usize),
    /// Took this many octets; the FPDU is complete.
    Done(usize),
}

impl Current {
    fn new(start: u64, leading: bool, crc: bool) -> Self {
        Current {
            start,
            leading,
            header_off: if leading { MARKER_LEN as u64 } else { 0 },
            stage: Stage::Header,
            hdr: [0; ULPDU_LENGTH_LEN],
            hdr_have: 0,
            ulpdu_len: 0,
            ulpdu: Vec::new(),
            pad: [0; 3],
            pad_len: 0,
            pad_have: 0,
            field: [0; CRC_LEN],
            field_have: 0,
            digest: crc.then(Crc32c::new),
            hashed: 0,
            markers: 0,
            marker_error: None,
        }
    }

    /// Feeds the digest with the ULPDU_Length/ULPDU/PAD octets received since the last call.
    fn hash_pending(&mut self) {
        let Some(d) = self.digest.as_mut() else {
            return;
        };
        let body_end = ULPDU_LENGTH_LEN + self.ulpdu.len();
        let received = self.hdr_have + self.ulpdu.len() + self.pad_have;
        let mut i = self.hashed;
        while i < received {
            if i < ULPDU_LENGTH_LEN {
                let end = self.hdr_have;
                d.update(self.hdr.get(i..end).unwrap_or(&[]));
                i = end.max(i + 1);
            } else if i < body_end {
                d.update(self.ulpdu.get(i - ULPDU_LENGTH_LEN..).unwrap_or(&[]));
                i = body_end;
            } else {
                d.update(self.pad.get(i - body_end..self.pad_have).unwrap_or(&[]));
                i = received;
            }
        }
        self.hashed = received;
    }

    fn enter_crc(&mut self) {
        self.hash_pending();
        self.stage = Stage::Crc;
    }

    /// Consumes FPDU octets (never marker octets) from `data`.
    fn take(&mut self, data: &[u8], min: usize, max: usize) -> Step {
        match self.stage {
            Stage::Header => {
                let want = ULPDU_LENGTH_LEN - self.hdr_have;
                let n = want.min(data.len());
                for (slot, b) in self.hdr.iter_mut().skip(self.hdr_have).zip(data.iter()) {
                    *slot = *b;
                }
                self.hdr_have += n;
                if self.hdr_have < ULPDU_LENGTH_LEN {
                    return Step::More(n);
                }
                let len = usize::from(u16::from_be_bytes(self.hdr));
                if len < min || len > max {
                    return Step::BadLength(n, len);
                }
                self.ulpdu_len = len;
                self.ulpdu = Vec::with_capacity(len);
                self.pad_len = pad_len(len);
                if len > 0 {
                    self.stage = Stage::Payload;
                } else {
                    self.after_payload();
                }
                Step::More(n)
            }
            Stage::Payload => {
                let n = (self.ulpdu_len - self.ulpdu.len()).min(data.len());
                self.ulpdu.extend_from_slice(data.get(..n).unwrap_or(&[]));
                if self.ulpdu.len() == self.ulpdu_len {
                    self.after_payload();
                }
                Step::More(n)
            }
            Stage::Pad => {
                let n = (self.pad_len - self.pad_have).min(data.len());
                for (slot, b) in self.pad.iter_mut().skip(self.pad_have).zip(data.iter()) {
                    *slot = *b;
                }
                self.pad_have += n;
                if self.pad_have == self.pad_len {
                    self.enter_crc();
                }
                Step::More(n)
            }
            Stage::Crc => {
                let n = (CRC_LEN - self.field_have).min(data.len());
                for (slot, b) in self.field.iter_mut().skip(self.field_have).zip(data.iter()) {
                    *slot = *b;
                }
                self.field_have += n;
                if self.field_have == CRC_LEN {
                    Step::Done(n)
                } else {
                    Step::More(n)
                }
            }
        }
    }

    fn after_payload(&mut self) {
        if self.pad_len > 0 {
            self.stage = Stage::Pad;
        } else {
            self.enter_crc();
        }
    }

    /// Handles a complete marker that started at stream offset `at`.
    fn marker(&mut self, at: u64, m: [u8; MARKER_LEN]) {
        // Markers before the CRC field are covered by the CRC; markers that
        // split the CRC field (possible only at unaligned start offsets) are not.
        if self.stage != Stage::Crc || self.field_have == 0 {
            self.hash_pending();
            if let Some(d) = self.digest.as_mut() {
                d.update(&m);
            }
        }
        self.markers += 1;
        let found = u16::from_be_bytes([m[2], m[3]]);
        let wire_off = at.saturating_sub(self.start);
        let expected = if wire_off == 0 {
            0
        } else {
            wire_off.saturating_sub(self.header_off)
        };
        let found_masked = u64::from(found & !3);
        let ok = found_masked == expected & !3
            || (self.leading && wire_off != 0 && found_masked == wire_off & !3);
        if !ok && self.marker_error.is_none() {
            self.marker_error = Some(DeframeError::BadMarker {
                offset: at,
                found,
                expected: u32::try_from(expected).unwrap_or(u32::MAX),
            });
        }
    }

    fn finish(self, end: u64, check_crc: bool) -> Result<Fpdu, DeframeError> {
        let wire_len = usize::try_from(end.saturating_sub(self.start)).unwrap_or(usize::MAX);
        // RFC 5044 §8: a marker/ULPDU_Length disagreement (code 3) is reported
        // only when the CRC is valid; a CRC mismatch (code 2) takes precedence,
        // since markers are covered by the CRC (§4.4). Without CRC the marker
        // check is the only one.
        let crc = if check_crc {
            let expected = self.digest.map_or(0, |d| d.value());
            let found = crc::from_wire(self.field);
            if expected != found {
                return Err(DeframeError::Crc {
                    expected,
                    found,
                    offset: self.start,
                });
            }
            CrcStatus::Good
        } else {
            CrcStatus::NotNegotiated { field: self.field }
        };
        if let Some(e) = self.marker_error {
            return Err(e);
        }
        let nonzero_pad = self
            .pad
            .get(..self.pad_have)
            .is_some_and(|p| p.iter().any(|b| *b != 0));
        Ok(Fpdu {
            ulpdu: self.ulpdu,
            stream_offset: self.start,
            wire_len,
            markers: self.markers,
            crc,
            nonzero_pad,
        })
    }
}

#[derive(Clone, Copy, Debug)]
struct PartialMarker {
    at: u64,
    buf: [u8; MARKER_LEN],
    have: usize,
}

/// Streaming FPDU parser for one direction of a connection.
///
/// Feed TCP payload in order with [`Deframer::push`], in chunks of any size
/// (down to single octets); then take results by iterating (`Deframer`
/// implements [`Iterator`]): one `Ok(Fpdu)` or `Err(DeframeError)` per FPDU, in
/// stream order.
///
/// With [`Deframer::push`], each ULPDU octet is copied exactly once, from the
/// pushed chunk into the `Vec<u8>` the [`Fpdu`] owns (allocated once at the
/// announced size). [`Deframer::push_with`] copies nothing for an FPDU that
/// arrives whole and without markers: it checks it in place and lends its ULPDU
/// out of the chunk. Work is linear in the input; partial fields are kept in
/// small fixed buffers, and the CRC is computed lazily over whole runs of
/// received octets.
///
/// After a fatal error ([`DeframeError::is_fatal`]) further input is counted but
/// ignored.
#[derive(Clone, Debug)]
pub struct Deframer {
    cfg: RxConfig,
    consumed: u64,
    cur: Option<Current>,
    marker: Option<PartialMarker>,
    ready: VecDeque<Result<Fpdu, DeframeError>>,
    failed: bool,
}

impl Deframer {
    /// A deframer with the given settings.
    pub fn new(cfg: RxConfig) -> Self {
        let mut cfg = cfg;
        cfg.start_offset %= MARKER_INTERVAL;
        cfg.max_ulpdu = cfg.max_ulpdu.min(MAX_ULPDU);
        Deframer {
            cfg,
            consumed: 0,
            cur: None,
            marker: None,
            ready: VecDeque::new(),
            failed: false,
        }
    }

    /// The settings.
    pub fn config(&self) -> RxConfig {
        self.cfg
    }

    /// Octets pushed so far.
    pub fn stream_offset(&self) -> u64 {
        self.consumed
    }

    /// Whether a fatal error stopped the deframer.
    pub fn is_failed(&self) -> bool {
        self.failed
    }

    /// Whether part of an FPDU (or marker) has been received but not completed.
    pub fn in_progress(&self) -> bool {
        self.cur.is_some() || self.marker.is_some()
    }

    /// Number of results waiting to be taken.
    pub fn ready_len(&self) -> usize {
        self.ready.len()
    }

    fn at_marker(&self, offset: u64) -> bool {
        self.cfg.markers
            && (u64::from(self.cfg.start_offset) + offset).is_multiple_of(PERIOD as u64)
    }

    fn phase(&self) -> usize {
        // Below 512.
        ((u64::from(self.cfg.start_offset) + self.consumed) % PERIOD as u64) as usize
    }

    /// Feeds the next octets of the TCP stream.
    pub fn push(&mut self, chunk: &[u8]) {
        let mut rest = chunk;
        while !rest.is_empty() {
            let n = self.push_some(rest);
            if n == 0 {
                // Not reached: every call takes at least one octet.
                self.consumed += rest.len() as u64;
                return;
            }
            rest = rest.get(n..).unwrap_or(&[]);
        }
    }

    /// Feeds octets until one result is queued or `chunk` is used up; returns the number
    /// of octets taken.
    fn push_some(&mut self, chunk: &[u8]) -> usize {
        let mut rest = chunk;
        while !rest.is_empty() {
            if self.failed {
                self.consumed += rest.len() as u64;
                return chunk.len();
            }
            if self.cur.is_none() {
                let leading = self.at_marker(self.consumed);
                self.cur = Some(Current::new(self.consumed, leading, self.cfg.crc));
            }

            // Marker octets.
            if self.marker.is_some() || self.at_marker(self.consumed) {
                let pm = self.marker.get_or_insert(PartialMarker {
                    at: self.consumed,
                    buf: [0; MARKER_LEN],
                    have: 0,
                });
                let n = (MARKER_LEN - pm.have).min(rest.len());
                for (slot, b) in pm.buf.iter_mut().skip(pm.have).zip(rest.iter()) {
                    *slot = *b;
                }
                pm.have += n;
                let done = (pm.have == MARKER_LEN).then_some((pm.at, pm.buf));
                self.consumed += n as u64;
                rest = rest.get(n..).unwrap_or(&[]);
                if let Some((at, buf)) = done {
                    self.marker = None;
                    if let Some(cur) = self.cur.as_mut() {
                        cur.marker(at, buf);
                    }
                }
                continue;
            }

            // FPDU octets, up to the next marker position.
            let limit = if self.cfg.markers {
                PERIOD - self.phase()
            } else {
                rest.len()
            };
            let window = rest.get(..limit.min(rest.len())).unwrap_or(rest);
            let (min, max) = (self.cfg.min_ulpdu, self.cfg.max_ulpdu);
            let Some(cur) = self.cur.as_mut() else {
                break;
            };
            let step = cur.take(window, min, max);
            let n = match step {
                Step::More(n) | Step::Done(n) | Step::BadLength(n, _) => n,
            };
            self.consumed += n as u64;
            rest = rest.get(n..).unwrap_or(&[]);
            match step {
                Step::More(_) => {}
                Step::Done(_) => {
                    if let Some(done) = self.cur.take() {
                        let result = done.finish(self.consumed, self.cfg.crc);
                        self.ready.push_back(result);
                    }
                    break;
                }
                Step::BadLength(_, len) => {
                    let offset = self.cur.take().map_or(self.consumed, |c| c.start);
                    self.ready.push_back(Err(DeframeError::BadLength {
                        len,
                        min: self.cfg.min_ulpdu,
                        max: self.cfg.max_ulpdu,
                        offset,
                    }));
                    self.failed = true;
                    break;
                }
            }
        }
        chunk.len() - rest.len()
    }

    /// Looks at the FPDU that starts at the front of `data` (nothing in progress).
    fn peek(&self, data: &[u8]) -> Peek {
        // ULPDU_Length, skipping any marker before or inside it.
        let mut hdr = [0u8; ULPDU_LENGTH_LEN];
        let mut got = 0;
        let mut pos = 0usize;
        while got < ULPDU_LENGTH_LEN {
            if self.at_marker(self.consumed + pos as u64) {
                pos += MARKER_LEN;
                continue;
            }
            let Some(b) = data.get(pos) else {
                return Peek::Partial(None);
            };
            if let Some(slot) = hdr.get_mut(got) {
                *slot = *b;
            }
            got += 1;
            pos += 1;
        }
        let len = usize::from(u16::from_be_bytes(hdr));
        if len < self.cfg.min_ulpdu || len > self.cfg.max_ulpdu {
            return Peek::BadLength;
        }
        let logical = FPDU_OVERHEAD + len + pad_len(len);
        let lay = layout(self.phase(), logical, self.cfg.markers);
        if data.len() < lay.wire_len {
            Peek::Partial(Some(lay.wire_len))
        } else if lay.markers == 0 {
            Peek::Whole(len, lay.wire_len)
        } else {
            Peek::Marked(lay.wire_len)
        }
    }

    /// Checks a whole, marker-free FPDU at the front of `data` in place.
    fn take_whole<'a>(
        &mut self,
        data: &'a [u8],
        len: usize,
        wire_len: usize,
    ) -> Result<FpduRef<'a>, DeframeError> {
        let start = self.consumed;
        self.consumed += wire_len as u64;
        let body_len = ULPDU_LENGTH_LEN + len + pad_len(len);
        let body = data.get(..body_len).unwrap_or(&[]);
        let mut field = [0u8; CRC_LEN];
        for (slot, b) in field.iter_mut().zip(data.get(body_len..).unwrap_or(&[])) {
            *slot = *b;
        }
        let crc = if self.cfg.crc {
            let expected = crc::crc32c(body);
            let found = crc::from_wire(field);
            if expected != found {
                return Err(DeframeError::Crc {
                    expected,
                    found,
                    offset: start,
                });
            }
            CrcStatus::Good
        } else {
            CrcStatus::NotNegotiated { field }
        };
        let nonzero_pad = body
            .get(ULPDU_LENGTH_LEN + len..)
            .is_some_and(|p| p.iter().any(|b| *b != 0));
        Ok(FpduRef {
            ulpdu: data
                .get(ULPDU_LENGTH_LEN..ULPDU_LENGTH_LEN + len)
                .unwrap_or(&[]),
            stream_offset: start,
            wire_len,
            markers: 0,
            crc,
            nonzero_pad,
        })
    }

    /// How many more octets complete the FPDU that starts at the front of `pending` (octets
    /// left untaken by [`Deframer::push_with`] with `retain_partial`), when its
    /// ULPDU_Length is there; `None` when that is not known (or nothing is pending). Lets a
    /// reader ask the socket for exactly the rest of a frame, so that its buffer empties
    /// and is reused from the start (a small, cache-warm read buffer).
    pub fn missing(&self, pending: &[u8]) -> Option<usize> {
        if pending.is_empty() || self.failed || self.in_progress() || !self.ready.is_empty() {
            return None;
        }
        match self.peek(pending) {
            Peek::Partial(Some(wire_len)) => wire_len.checked_sub(pending.len()),
            _ => None,
        }
    }

    /// Feeds the next octets of the TCP stream and hands each result to `on`, in stream
    /// order, without queueing it (results queued by earlier [`Deframer::push`] calls
    /// come first). Returns the number of octets of `chunk` taken.
    ///
    /// An FPDU that lies whole in `chunk` and holds no marker (the usual case) is checked
    /// in place and its ULPDU is lent straight out of `chunk`: no copy. Others go through
    /// the buffering path of [`Deframer::push`].
    ///
    /// * `retain_partial`: when `chunk` ends inside an FPDU that starts in it, leave
    ///   that FPDU's octets untaken, so that the caller can present them again, followed
    ///   by more, and still get the borrowed path. At most one FPDU (its wire length
    ///   stays below 70 000 octets) is left. Otherwise everything is taken.
    /// * `on` returns whether to go on; when it returns `false`, `push_with` returns at
    ///   once, having taken the octets up to the end of that FPDU.
    ///
    /// Results are the same as [`Deframer::push`] followed by iteration would give.
    pub fn push_with<F>(&mut self, chunk: &[u8], retain_partial: bool, mut on: F) -> usize
    where
        F: FnMut(Result<FpduRef<'_>, DeframeError>) -> bool,
    {
        let mut pos = 0usize;
        loop {
            while let Some(r) = self.ready.pop_front() {
                let go = match &r {
                    Ok(f) => on(Ok(f.as_view())),
                    Err(e) => on(Err(e.clone())),
                };
                if !go {
                    return pos;
                }
            }
            let rest = chunk.get(pos..).unwrap_or(&[]);
            if rest.is_empty() {
                return pos;
            }
            if self.failed || self.in_progress() {
                pos += self.push_some(rest);
                continue;
            }
            match self.peek(rest) {
                Peek::Whole(len, wire_len) => {
                    let r = self.take_whole(rest, len, wire_len);
                    pos += wire_len;
                    if !on(r) {
                        return pos;
                    }
                }
                Peek::Marked(wire_len) => {
                    pos += self.push_some(rest.get(..wire_len).unwrap_or(rest));
                }
                Peek::Partial(_) if retain_partial => return pos,
                Peek::Partial(_) | Peek::BadLength => pos += self.push_some(rest),
            }
        }
    }
}

impl Iterator for Deframer {
    type Item = Result<Fpdu, DeframeError>;

    /// The next completed FPDU or error, in stream order; `None` until more input arrives.
    fn next(&mut self) -> Option<Self::Item> {
        self.ready.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The encoder settings with CRC `crc` and markers `markers`.
    fn tx_config(crc: bool, markers: bool) -> TxConfig {
        TxConfig { crc, markers }
    }

    fn enc(cfg: TxConfig, offset: u32, ulpdus: &[Vec<u8>]) -> (Vec<u8>, Vec<usize>) {
        let mut e = FpduEncoder::with_offset(cfg, offset);
        let mut out = Vec::new();
        let mut lens = Vec::new();
        for u in ulpdus {
            lens.push(e.encode(&[u], &mut out).expect("encodable"));
        }
        (out, lens)
    }

    fn deframe_all(cfg: RxConfig, wire: &[u8]) -> Vec<Result<Fpdu, DeframeError>> {
        let mut d = Deframer::new(cfg);
        d.push(wire);
        d.collect()
    }

    /// RFC 5044 §4.1: PAD makes ULPDU_Length + ULPDU + PAD a multiple of 4.
    #[test]
    fn rfc5044_4_1_pad_to_four_octets() {
        assert_eq!(pad_len(0), 2);
        assert_eq!(pad_len(1), 1);
        assert_eq!(pad_len(2), 0);
        assert_eq!(pad_len(3), 3);
        for len in 0..64 {
            assert_eq!((2 + len + pad_len(len)) % 4, 0);
            assert!(pad_len(len) < 4);
        }
    }

    /// RFC 5044 §4.1: layout without markers and CRC — length big-endian, data,
    /// zero pad, CRC field of zeros (what siw sends when CRC is off).
    #[test]
    fn rfc5044_4_1_plain_fpdu_layout() {
        let mut e = FpduEncoder::new(TxConfig::default());
        let mut out = Vec::new();
        let n = e.encode(&[b"abc", b"de"], &mut out).expect("ok");
        assert_eq!(n, 12);
        assert_eq!(out, [0, 5, b'a', b'b', b'c', b'd', b'e', 0, 0, 0, 0, 0]);
        assert_eq!(e.stream_offset(), 12);
        assert_eq!(e.fpdu_len(5), 12);
    }

    /// RFC 5044 §4.4: split framing (head, payload sent separately, PAD + CRC trailer) puts
    /// on the wire exactly the octets contiguous framing does, CRC over the same octets,
    /// for every PAD length, with CRC on and off; with markers it refuses.
    #[test]
    fn rfc5044_4_4_split_framing_matches_contiguous() {
        for crc in [false, true] {
            for payload_len in [0usize, 1, 2, 3, 4, 5, 1000, 1001] {
                let cfg = tx_config(crc, false);
                let payload: Vec<u8> = (0..payload_len).map(|i| (i * 7 + 3) as u8).collect();
                let head = [1u8, 2, 3, 4, 5, 6];
                let mut a = FpduEncoder::new(cfg);
                let mut want = Vec::new();
                a.encode(&[&head, &payload], &mut want).expect("ok");
                let mut b = FpduEncoder::new(cfg);
                let mut got = vec![0xee];
                let mut fed = 0;
                let tail = b
                    .encode_split(&[&head], payload_len, &mut got, |d| {
                        fed += 1;
                        d.update(&payload);
                    })
                    .expect("ok");
                assert_eq!(
                    fed,
                    usize::from(crc),
                    "payload fed to the CRC only with CRC on"
                );
                got.extend_from_slice(&payload);
                got.extend_from_slice(tail.as_bytes());
                assert_eq!(&got[1..], &want[..], "crc {crc} len {payload_len}");
                assert_eq!(b.stream_offset(), a.stream_offset());
            }
        }
        let mut m = FpduEncoder::new(tx_config(true, true));
        let mut out = Vec::new();
        assert_eq!(
            m.encode_split(&[b"x"], 4, &mut out, |_| {}),
            Err(EncodeError::SplitWithMarkers)
        );
        assert!(out.is_empty());
        assert_eq!(m.stream_offset(), 0);
    }

    /// RFC 5044 §4.4: with CRC on, the field holds CRC32c of everything before it.
    #[test]
    fn rfc5044_4_4_crc_covers_header_data_and_pad() {
        let mut e = FpduEncoder::new(tx_config(true, false));
        let mut out = Vec::new();
        e.encode(&[b"hello"], &mut out).expect("ok");
        assert_eq!(out.len(), 2 + 5 + 1 + 4);
        let (body, field) = out.split_at(8);
        assert_eq!(field, crc::to_wire(crc::crc32c(body)));
        assert_eq!(body, [0, 5, b'h', b'e', b'l', b'l', b'o', 0]);
    }

    /// RFC 5044 §4.3 / §4.2: the first marker immediately precedes the first
    /// FPDU and has FPDUPTR 0; the next one sits 512 octets later and points back
    /// to the ULPDU_Length field (508 octets before it).
    #[test]
    fn rfc5044_4_3_first_marker_precedes_first_fpdu() {
        let cfg = tx_config(false, true);
        let ulpdu = vec![0xabu8; 600];
        let (wire, lens) = enc(cfg, 0, std::slice::from_ref(&ulpdu));
        assert_eq!(&wire[..4], &[0, 0, 0, 0]);
        assert_eq!(&wire[4..6], &600u16.to_be_bytes());
        assert_eq!(&wire[512..514], &[0, 0]);
        assert_eq!(u16::from_be_bytes([wire[514], wire[515]]), 508);
        // 2 + 600 + 2 pad + 4 CRC = 608 logical octets, plus two markers.
        assert_eq!(lens, vec![616]);
        assert_eq!(wire.len(), 616);
    }

    /// RFC 5044 §4.3 / §4.4: a marker position that falls exactly at the end of
    /// an FPDU opens the next FPDU (FPDUPTR 0), is counted in that FPDU's length
    /// and is covered by its CRC.
    #[test]
    fn rfc5044_4_3_marker_at_fpdu_boundary_opens_next_fpdu() {
        let cfg = tx_config(true, true);
        // First FPDU: marker + 2 + 502 + 0 pad + 4 = 512 octets exactly.
        let a = vec![1u8; 502];
        let b = vec![2u8; 10];
        let mut e = FpduEncoder::new(cfg);
        let mut out = Vec::new();
        assert_eq!(e.encode(&[&a], &mut out).expect("ok"), 512);
        assert_eq!(e.marker_phase(), 0);
        // Opening marker, ULPDU_Length, 10 octets, no pad, CRC.
        assert_eq!(e.fpdu_len(10), 4 + 2 + 10 + 4);
        assert_eq!(e.encode(&[&b], &mut out).expect("ok"), 20);
        assert_eq!(&out[512..516], &[0, 0, 0, 0]);
        assert_eq!(&out[516..518], &10u16.to_be_bytes());
        // The opening marker is covered by the second FPDU's CRC.
        let second = &out[512..];
        assert_eq!(&second[16..], &crc::to_wire(crc::crc32c(&second[..16]))[..]);
        let got = deframe_all(RxConfig::new(true, true), &out);
        assert_eq!(got.len(), 2);
        let second = got[1].as_ref().expect("good");
        assert_eq!(second.ulpdu, b);
        assert_eq!(second.stream_offset, 512);
        assert_eq!(second.wire_len, 20);
        assert_eq!(second.markers, 1);
    }

    /// RFC 5044 §4.3 / §4.4: a marker that falls between PAD and CRC is inside
    /// the FPDU, points at its ULPDU_Length and is covered by the CRC.
    #[test]
    fn rfc5044_4_4_marker_between_pad_and_crc_is_covered() {
        let cfg = tx_config(true, true);
        // Marker + 2 + 505 + 1 pad = 512, so the next marker precedes the CRC field.
        let u = vec![7u8; 505];
        let (wire, lens) = enc(cfg, 0, std::slice::from_ref(&u));
        assert_eq!(lens, vec![520]);
        assert_eq!(u16::from_be_bytes([wire[514], wire[515]]), 508);
        assert_eq!(&wire[516..], &crc::to_wire(crc::crc32c(&wire[..516]))[..]);
        let got = deframe_all(RxConfig::new(true, true), &wire);
        assert_eq!(
            got,
            vec![Ok(Fpdu {
                ulpdu: u,
                stream_offset: 0,
                wire_len: 520,
                markers: 2,
                crc: CrcStatus::Good,
                nonzero_pad: false,
            })]
        );
    }

    /// RFC 5044 §4.2: the deframer also accepts the reading in which a marker in
    /// an FPDU that opens with a marker points at the FPDU's first octet; any
    /// other value is a marker/ULPDU_Length mismatch (§8, code 3).
    #[test]
    fn rfc5044_4_2_alternative_fpduptr_reading_accepted() {
        let cfg = tx_config(false, true);
        let (mut wire, _) = enc(cfg, 0, &[vec![3u8; 600]]);
        wire[514..516].copy_from_slice(&512u16.to_be_bytes());
        assert!(deframe_all(RxConfig::new(false, true), &wire)[0].is_ok());
        wire[514..516].copy_from_slice(&500u16.to_be_bytes());
        assert_eq!(
            deframe_all(RxConfig::new(false, true), &wire),
            vec![Err(DeframeError::BadMarker {
                offset: 512,
                found: 500,
                expected: 508
            })]
        );
    }

    /// RFC 5044 §8 (codes 2 and 3): a marker that disagrees with the
    /// ULPDU_Length framing is error 3 only when the FPDU's CRC is valid; when
    /// the CRC is bad (the marker is covered by it, §4.4) the error is 2.
    #[test]
    fn rfc5044_8_marker_mismatch_reported_only_with_valid_crc() {
        let cfg = tx_config(true, true);
        let (mut wire, lens) = enc(cfg, 0, &[vec![5u8; 600], b"next".to_vec()]);
        // Opening marker, 2 + 600 + 2 pad, a marker at 512, CRC at 612..616.
        assert_eq!(lens[0], 616);
        wire[514..516].copy_from_slice(&500u16.to_be_bytes());
        let mut d = Deframer::new(RxConfig::new(true, true));
        d.push(&wire);
        let err = d.next().expect("result").expect_err("corrupted marker");
        assert!(
            matches!(err, DeframeError::Crc { offset: 0, .. }),
            "{err:?}"
        );
        assert_eq!(err.term_code(), 2);
        assert_eq!(d.next().expect("result").expect("good").ulpdu, b"next");

        // Same marker, but a CRC recomputed over it: now the mismatch shows.
        let field = crc::to_wire(crc::crc32c(&wire[..612]));
        wire[612..616].copy_from_slice(&field);
        let mut d = Deframer::new(RxConfig::new(true, true));
        d.push(&wire);
        let err = d.next().expect("result").expect_err("bad marker");
        assert_eq!(
            err,
            DeframeError::BadMarker {
                offset: 512,
                found: 500,
                expected: 508
            }
        );
        assert_eq!(err.term_code(), 3);
        assert!(!err.is_fatal());
        assert_eq!(d.next().expect("result").expect("good").ulpdu, b"next");
    }

    /// RFC 5044 §4.2: receivers treat the two low FPDUPTR bits as zero and
    /// ignore the reserved half of the marker.
    #[test]
    fn rfc5044_4_2_marker_low_bits_and_reserved_ignored() {
        let cfg = tx_config(false, true);
        let (mut wire, _) = enc(cfg, 0, &[vec![3u8; 600]]);
        wire[515] |= 3;
        wire[512] = 0xff;
        wire[0] = 0x12;
        wire[3] = 0x01;
        let got = deframe_all(RxConfig::new(false, true), &wire);
        assert!(got[0].is_ok(), "{got:?}");
    }

    /// RFC 5044 §4.1 / §7.1.1 (C): without CRC the field is present but never
    /// checked, whatever it holds.
    #[test]
    fn rfc5044_7_1_1_crc_field_ignored_when_not_negotiated() {
        let (mut wire, _) = enc(TxConfig::default(), 0, &[b"xyz".to_vec()]);
        let n = wire.len();
        wire[n - 4..].copy_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
        let got = deframe_all(RxConfig::new(false, false), &wire);
        assert_eq!(
            got[0].as_ref().expect("unchecked").crc,
            CrcStatus::NotNegotiated {
                field: [0xde, 0xad, 0xbe, 0xef]
            }
        );
    }

    /// RFC 5044 §4.1: PAD octets are ignored on receipt (no error), but a
    /// non-zero PAD is reported as a conformance note.
    #[test]
    fn rfc5044_4_1_nonzero_pad_ignored_but_flagged() {
        let (mut wire, _) = enc(TxConfig::default(), 0, &[vec![9u8; 20]]);
        assert!(
            !deframe_all(RxConfig::new(false, false), &wire)[0]
                .as_ref()
                .expect("ok")
                .nonzero_pad
        );
        wire[23] = 0x40;
        let got = deframe_all(RxConfig::new(false, false), &wire);
        let f = got[0].as_ref().expect("pad is ignored");
        assert!(f.nonzero_pad);
        assert_eq!(f.ulpdu, vec![9u8; 20]);
    }

    /// RFC 5044 §4.4 / §8 (code 2): a CRC mismatch is reported with both values;
    /// the FPDU is consumed and the next one is still delivered.
    #[test]
    fn rfc5044_8_crc_error_is_recoverable() {
        let cfg = tx_config(true, false);
        let (mut wire, lens) = enc(cfg, 0, &[b"first".to_vec(), b"second".to_vec()]);
        wire[3] ^= 0x01;
        let mut d = Deframer::new(RxConfig::new(true, false));
        d.push(&wire);
        let first = d.next().expect("result");
        let err = first.expect_err("corrupted");
        assert!(matches!(err, DeframeError::Crc { offset: 0, .. }));
        assert!(!err.is_fatal());
        assert_eq!(err.term_code(), 0x02);
        let second = d.next().expect("result").expect("good");
        assert_eq!(second.ulpdu, b"second");
        assert_eq!(second.stream_offset, lens[0] as u64);
        assert!(d.next().is_none());
    }

    /// RFC 5044 §8 (code 3): a ULPDU_Length outside the configured range is
    /// fatal (FPDU boundary lost) and maps to LLP error 0x03, as Linux siw
    /// reports it.
    #[test]
    fn rfc5044_8_bad_length_is_fatal() {
        let (wire, _) = enc(TxConfig::default(), 0, &[vec![0u8; 100]]);
        let mut d = Deframer::new(RxConfig::new(false, false).with_max_ulpdu(64));
        d.push(&wire);
        d.push(&wire);
        let err = d.next().expect("result").expect_err("too long");
        assert_eq!(
            err,
            DeframeError::BadLength {
                len: 100,
                min: 0,
                max: 64,
                offset: 0
            }
        );
        assert!(err.is_fatal());
        assert_eq!(err.term_code(), 0x03);
        assert!(d.is_failed());
        assert!(d.next().is_none());
        assert_eq!(d.stream_offset(), 2 * wire.len() as u64);
        let mut d = Deframer::new(RxConfig::new(false, false).with_min_ulpdu(101));
        d.push(&wire);
        assert!(matches!(
            d.next(),
            Some(Err(DeframeError::BadLength { .. }))
        ));
    }

    /// RFC 5044 §4.5 (MULPDU): `EMSS - (6 + EMSS mod 4)` without markers and
    /// `EMSS - (6 + 4 * ceil(EMSS / 512) + EMSS mod 4)` with markers; siw's EMSS
    /// of 1448 without markers gives 1442; with markers three are reserved; an
    /// FPDU of MULPDU octets never exceeds EMSS at any 4-aligned marker phase.
    #[test]
    fn rfc5044_4_5_mulpdu_formula() {
        assert_eq!(mulpdu(1448, false), 1442);
        assert_eq!(mulpdu(1460, false), 1454);
        assert_eq!(mulpdu(1461, false), 1454);
        assert_eq!(mulpdu(1448, true), 1448 - 6 - 12);
        assert_eq!(mulpdu(3, false), 0);
        for emss in [64u32, 100, 536, 1000, 1448, 1460, 4096, 8960, 9000] {
            for markers in [false, true] {
                let m = mulpdu(emss, markers) as usize;
                for phase in (0..512).step_by(4) {
                    let e = FpduEncoder::with_offset(TxConfig { crc: true, markers }, phase);
                    assert!(
                        e.fpdu_len(m) <= emss as usize,
                        "emss {emss} markers {markers} phase {phase}"
                    );
                }
            }
        }
    }

    #[test]
    fn encode_errors_leave_state_untouched() {
        let mut e = FpduEncoder::new(tx_config(true, true));
        let mut out = Vec::new();
        let big = vec![0u8; 65_536];
        assert_eq!(
            e.encode(&[&big], &mut out),
            Err(EncodeError::UlpduTooLong { len: 65_536 })
        );
        let almost = vec![0u8; 65_535];
        assert!(matches!(
            e.encode(&[&almost], &mut out),
            Err(EncodeError::MarkerPointerOverflow { .. })
        ));
        assert!(out.is_empty());
        assert_eq!(e.stream_offset(), 0);
        let mut plain = FpduEncoder::new(TxConfig::default());
        assert_eq!(
            plain.encode(&[&almost], &mut out).expect("fits"),
            2 + 65_535 + 3 + 4
        );
    }

    /// Zero-length ULPDUs (two octets of pad) frame correctly.
    #[test]
    fn empty_ulpdu_round_trip() {
        let cfg = tx_config(true, true);
        let (wire, _) = enc(cfg, 508, &[vec![], vec![], vec![]]);
        let got = deframe_all(RxConfig::new(true, true).with_start_offset(508), &wire);
        assert_eq!(got.len(), 3);
        for r in got {
            assert!(r.expect("good").ulpdu.is_empty());
        }
    }

    fn pattern(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect()
    }

    /// RFC 5044 §4.1–§4.4: the in-place encoder produces exactly the FPDUs of the copying
    /// one, with markers landing inside the payload and the CRC over what was filled in.
    #[test]
    fn in_place_encoding_matches_copying_encoding() {
        for crc in [false, true] {
            for markers in [false, true] {
                for offset in [0u32, 4, 100, 508, 511] {
                    let cfg = TxConfig { crc, markers };
                    let mut a = FpduEncoder::with_offset(cfg, offset);
                    let mut b = FpduEncoder::with_offset(cfg, offset);
                    let mut c = FpduEncoder::with_offset(cfg, offset);
                    let (mut wa, mut wb, mut wc) = (Vec::new(), Vec::new(), Vec::new());
                    for (i, len) in [0usize, 1, 3, 500, 1442, 3000, 9000].iter().enumerate() {
                        let head = pattern(14 + i % 3, 0x40);
                        let payload = pattern(*len, i as u8);
                        let na = a.encode(&[&head, &payload], &mut wa).expect("encodes");
                        let mut runs = 0;
                        let nb = b
                            .encode_with(&[&head], payload.len(), &mut wb, |off, dst| {
                                runs += 1;
                                assert!(dst.iter().all(|x| *x == 0));
                                dst.copy_from_slice(&payload[off..off + dst.len()]);
                            })
                            .expect("encodes");
                        let nc = c
                            .encode_append(&[&head], payload.len(), &mut wc, |off, n, out| {
                                out.extend_from_slice(&payload[off..off + n]);
                            })
                            .expect("encodes");
                        assert_eq!(na, nb);
                        assert_eq!(na, nc);
                        assert_eq!(wa, wb, "crc {crc} markers {markers} offset {offset}");
                        assert_eq!(wa, wc, "crc {crc} markers {markers} offset {offset}");
                        if !markers && *len > 0 {
                            assert_eq!(runs, 1);
                        }
                    }
                    assert_eq!(a, b);
                    assert_eq!(a, c);
                }
            }
        }
    }

    /// The in-place encoder rejects what the copying one rejects, without calling `fill`.
    #[test]
    fn in_place_encoding_errors_leave_state_untouched() {
        let mut e = FpduEncoder::new(TxConfig::default());
        let mut out = Vec::new();
        let err = e
            .encode_with(&[b"ab"], MAX_ULPDU, &mut out, |_, _| panic!("not called"))
            .expect_err("too long");
        assert_eq!(err, EncodeError::UlpduTooLong { len: MAX_ULPDU + 2 });
        assert!(out.is_empty());
        assert_eq!(e.stream_offset(), 0);
    }

    fn owned(r: Result<FpduRef<'_>, DeframeError>) -> Result<Fpdu, DeframeError> {
        r.map(|f| f.to_fpdu())
    }

    /// Feeds `wire` through `push_with` in the given chunk sizes; with `retain`, untaken
    /// octets are presented again in front of the next chunk, as a transport would.
    fn deframe_borrowed(
        cfg: RxConfig,
        wire: &[u8],
        chunks: &[usize],
        retain: bool,
    ) -> (Vec<Result<Fpdu, DeframeError>>, usize) {
        let mut d = Deframer::new(cfg);
        let mut out = Vec::new();
        let mut borrowed = 0;
        let mut pending: Vec<u8> = Vec::new();
        let mut at = 0;
        let mut i = 0;
        while at < wire.len() || !pending.is_empty() {
            let n = chunks[i % chunks.len()].max(1).min(wire.len() - at);
            i += 1;
            pending.extend_from_slice(&wire[at..at + n]);
            at += n;
            let last = at == wire.len();
            let base = pending.as_ptr() as usize;
            let end = base + pending.len();
            let took = d.push_with(&pending, retain && !last, |r| {
                if let Ok(f) = &r {
                    let p = f.ulpdu.as_ptr() as usize;
                    if !f.ulpdu.is_empty() && p >= base && p < end {
                        borrowed += 1;
                    }
                }
                out.push(owned(r));
                true
            });
            if !retain || last {
                assert_eq!(took, pending.len());
            }
            pending.drain(..took);
            if last {
                assert!(pending.is_empty());
            }
        }
        assert_eq!(d.stream_offset(), wire.len() as u64);
        (out, borrowed)
    }

    /// RFC 5044 §4: the borrowing receive path yields exactly what the copying one does,
    /// for any chunking, with and without markers and CRC, including CRC errors and
    /// marker mismatches; marker-free FPDUs that arrive whole are lent from the input.
    #[test]
    fn borrowed_deframing_matches_copying_deframing() {
        for crc in [false, true] {
            for markers in [false, true] {
                for offset in [0u32, 8, 510] {
                    let tx = TxConfig { crc, markers };
                    let sizes = [14usize, 0, 1, 600, 1442, 37, 5000, 20];
                    let ulpdus: Vec<Vec<u8>> =
                        sizes.iter().map(|n| pattern(*n, *n as u8)).collect();
                    let (mut wire, lens) = enc(tx, offset, &ulpdus);
                    // Corrupt one octet of the fifth FPDU (recoverable CRC error with CRC).
                    let fifth: usize = lens[..4].iter().sum();
                    wire[fifth + 9] ^= 0x10;
                    let rx = RxConfig::new(crc, markers).with_start_offset(offset);
                    let want = deframe_all(rx, &wire);
                    for chunks in [vec![wire.len()], vec![1], vec![700, 3, 1500], vec![4096]] {
                        for retain in [false, true] {
                            let (got, borrowed) = deframe_borrowed(rx, &wire, &chunks, retain);
                            assert_eq!(got, want, "{crc} {markers} {offset} {chunks:?} {retain}");
                            if !markers && chunks[0] == wire.len() {
                                assert!(borrowed >= 6, "{borrowed}");
                            }
                            if !markers && retain {
                                assert!(borrowed >= 6, "{borrowed} {chunks:?}");
                            }
                        }
                    }
                }
            }
        }
    }

    /// RFC 5044 §4: `missing` tells a reader how many octets complete a retained FPDU
    /// (ULPDU_Length, PAD, CRC and any markers inside counted). A reader that asks for
    /// exactly that many gets the FPDU taken whole, its pending octets emptied, and the
    /// same results as the copying path; with the length field itself not yet read (one
    /// octet pending) nothing is claimed.
    #[test]
    fn rfc5044_4_missing_completes_the_retained_fpdu() {
        for crc in [false, true] {
            for markers in [false, true] {
                for offset in [0u32, 8, 510] {
                    let tx = TxConfig { crc, markers };
                    let sizes = [14usize, 0, 1, 600, 1442, 37, 5000, 20, 3000];
                    let ulpdus: Vec<Vec<u8>> =
                        sizes.iter().map(|n| pattern(*n, *n as u8)).collect();
                    let (wire, _) = enc(tx, offset, &ulpdus);
                    let rx = RxConfig::new(crc, markers).with_start_offset(offset);
                    let want = deframe_all(rx, &wire);
                    for chunk in [1usize, 3, 700, 1500, 4096] {
                        let mut d = Deframer::new(rx);
                        let (mut got, mut pending, mut at) = (Vec::new(), Vec::<u8>::new(), 0);
                        let mut completed = 0;
                        while at < wire.len() {
                            let asked = d.missing(&pending);
                            if pending.len() < 2 && !markers {
                                assert_eq!(asked, None, "length field not there yet");
                            }
                            let n = asked.unwrap_or(chunk).min(wire.len() - at);
                            pending.extend_from_slice(&wire[at..at + n]);
                            at += n;
                            let last = at == wire.len();
                            let took = d.push_with(&pending, !last, |r| {
                                got.push(owned(r));
                                true
                            });
                            pending.drain(..took);
                            if asked.is_some() {
                                assert!(pending.is_empty(), "{crc} {markers} {offset} {chunk}");
                                completed += 1;
                            }
                        }
                        assert!(pending.is_empty());
                        assert_eq!(got, want, "{crc} {markers} {offset} {chunk}");
                        if chunk >= 700 {
                            assert!(completed > 0, "{crc} {markers} {offset} {chunk}");
                        }
                    }
                }
            }
        }
        // Nothing pending, or a deframer in the middle of a buffered FPDU: not known.
        let d = Deframer::new(RxConfig::new(true, false));
        assert_eq!(d.missing(&[]), None);
        let mut d = Deframer::new(RxConfig::new(true, false));
        d.push(&[0, 40, 1, 2]);
        assert_eq!(d.missing(&[3, 4]), None);
    }

    /// RFC 5044 §8: a bad ULPDU_Length is fatal on the borrowing path too, and stopping
    /// early leaves the rest untaken.
    #[test]
    fn borrowed_deframing_bad_length_and_stop() {
        let tx = TxConfig::default();
        let (mut wire, lens) = enc(tx, 0, &[pattern(20, 1), pattern(30, 2), pattern(40, 3)]);
        let rx = RxConfig::new(false, false).with_max_ulpdu(100);
        let mut d = Deframer::new(rx);
        let mut seen = 0;
        let took = d.push_with(&wire, false, |r| {
            assert!(r.is_ok());
            seen += 1;
            seen < 2
        });
        assert_eq!(took, lens[0] + lens[1]);
        assert_eq!(d.stream_offset(), took as u64);
        wire[took] = 0xff;
        let mut errs = Vec::new();
        let rest = d.push_with(&wire[took..], true, |r| {
            errs.push(r.map(|f| f.to_fpdu()));
            true
        });
        assert_eq!(rest, wire.len() - took);
        assert!(matches!(
            errs.as_slice(),
            [Err(DeframeError::BadLength { .. })]
        ));
        assert!(d.is_failed());
    }
}
