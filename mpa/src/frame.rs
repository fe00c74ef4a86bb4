//! MPA Request and Reply frames (RFC 5044 §7.1.1, enhanced by RFC 6581).
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |     Key: 16 octets, "MPA ID Req Frame" or "MPA ID Rep Frame"  |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |M|C|R|H|  Res  |     Rev       |          PD_Length            |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ~         Private Data (PD_Length octets, at most 512)          ~
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! * **M** — the sender of the frame wants to *receive* markers.
//! * **C** — the sender prefers CRC; CRC is used if either frame sets it.
//! * **R** — set in a Reply to reject the connection.
//! * **H** — RFC 6581 enhanced connection establishment (one of the bits that
//!   RFC 5044 reserved). Only meaningful with Rev = 2.
//! * **Res** — the remaining reserved bits: zero on send, ignored on receive.
//! * **Rev** — MPA revision: 1 (RFC 5044) or 2 (RFC 6581). Parsing accepts any
//!   value; [`crate::negotiate`] decides what to do with it.
//!
//! When Rev = 2 and H = 1 the private data starts with the RFC 6581 enhanced
//! connection data ([`EnhancedData`]); the ULP's own private data follows it and
//! PD_Length counts both:
//!
//! ```text
//! +-+-+-----------------------------+-+-+-----------------------------+
//! |A|B|        IRD (14 bits)        |C|D|        ORD (14 bits)        |
//! +-+-+-----------------------------+-+-+-----------------------------+
//!  A: peer-to-peer   B: zero-length Send RTR
//!  C: zero-length RDMA Write RTR   D: zero-length RDMA Read RTR
//! ```

use core::fmt;

use thiserror::Error;

use crate::term::LlpErrorCode;

/// Length of the key at the start of every frame.
pub const KEY_LEN: usize = 16;
/// Key of an MPA Request frame.
pub const REQUEST_KEY: &[u8; KEY_LEN] = b"MPA ID Req Frame";
/// Key of an MPA Reply frame.
pub const REPLY_KEY: &[u8; KEY_LEN] = b"MPA ID Rep Frame";
/// Length of the fixed part of a frame (key, flags, revision, PD_Length).
pub const HEADER_LEN: usize = 20;
/// Largest private data length a frame may carry (RFC 5044 §7.1.1), enhanced data included.
pub const MAX_PRIVATE_DATA: usize = 512;
/// Length of the RFC 6581 enhanced connection data at the start of the private data.
pub const ENHANCED_DATA_LEN: usize = 4;
/// Largest IRD or ORD value the 14-bit fields can carry.
pub const IRD_ORD_MAX: u16 = 0x3FFF;

/// M flag: the sender wants to receive markers.
pub const FLAG_MARKERS: u8 = 0x80;
/// C flag: the sender prefers CRC.
pub const FLAG_CRC: u8 = 0x40;
/// R flag: the connection is rejected (Reply only).
pub const FLAG_REJECT: u8 = 0x20;
/// H flag: RFC 6581 enhanced connection establishment.
pub const FLAG_ENHANCED: u8 = 0x10;
/// The reserved bits left in the flags octet.
pub const FLAG_RESERVED_MASK: u8 = 0x0F;

const OFF_FLAGS: usize = 16;
const OFF_REV: usize = 17;
const OFF_PD_LEN: usize = 18;

const WORD_FLAG_HIGH: u16 = 0x8000;
const WORD_FLAG_LOW: u16 = 0x4000;

/// Errors from parsing or emitting an MPA Request/Reply frame.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum FrameError {
    /// The buffer ends before the frame does; feed at least `needed` more octets.
    /// This is not a protocol error.
    #[error("MPA frame incomplete: at least {needed} more octet(s) needed")]
    Truncated {
        /// Lower bound on the number of further octets the frame needs.
        needed: usize,
    },
    /// The first octets are neither "MPA ID Req Frame" nor "MPA ID Rep Frame":
    /// the peer is not speaking MPA (or the stream is misaligned).
    #[error(
        "not an MPA Request/Reply frame: key starts with {found:02x?}, expected \"MPA ID Req Frame\" or \"MPA ID Rep Frame\""
    )]
    BadKey {
        /// The key octets that were available (up to 16).
        found: Vec<u8>,
    },
    /// PD_Length is larger than the 512 octets RFC 5044 allows.
    #[error(
        "MPA private data length {len} exceeds the maximum of {MAX_PRIVATE_DATA} octets (RFC 5044 §7.1.1)"
    )]
    PrivateDataTooLong {
        /// The offending private data length (enhanced data included).
        len: usize,
    },
    /// An IRD or ORD value does not fit the 14-bit field (emit only).
    #[error("{field} value {value} does not fit the 14-bit field (max {IRD_ORD_MAX})")]
    IrdOrdTooLarge {
        /// "IRD" or "ORD".
        field: &'static str,
        /// The offending value.
        value: u16,
    },
}

impl FrameError {
    /// The LLP error code for this error, if it is a protocol error.
    ///
    /// RFC 5044 §7.1.1 (PD_Length) and §7.1.2 make a receiver of a malformed
    /// MPA Request or Reply (wrong key, private data over 512 octets) close the
    /// TCP connection; §8 names that condition code 4, "Invalid MPA Request
    /// Frame or MPA Response Frame". [`FrameError::Truncated`] is not an error
    /// on the wire (more octets are needed) and yields `None`;
    /// [`FrameError::IrdOrdTooLarge`] is a local emit error and is reported as
    /// a local catastrophic error (code 5).
    pub fn llp_error(&self) -> Option<LlpErrorCode> {
        match self {
            FrameError::Truncated { .. } => None,
            FrameError::BadKey { .. } | FrameError::PrivateDataTooLong { .. } => {
                Some(LlpErrorCode::InvalidRequestReply)
            }
            FrameError::IrdOrdTooLarge { .. } => Some(LlpErrorCode::LocalCatastrophic),
        }
    }
}

/// Whether a frame is a Request (initiator) or a Reply (responder).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FrameKind {
    /// "MPA ID Req Frame", sent by the initiator.
    Request,
    /// "MPA ID Rep Frame", sent by the responder.
    Reply,
}

impl FrameKind {
    /// The 16-octet key for this kind of frame.
    pub fn key(self) -> &'static [u8; KEY_LEN] {
        match self {
            FrameKind::Request => REQUEST_KEY,
            FrameKind::Reply => REPLY_KEY,
        }
    }

    /// The kind whose key is `key`, if any.
    pub fn from_key(key: &[u8]) -> Option<Self> {
        if key == REQUEST_KEY {
            Some(FrameKind::Request)
        } else if key == REPLY_KEY {
            Some(FrameKind::Reply)
        } else {
            None
        }
    }
}

/// One of the RFC 6581 ready-to-receive (RTR) message types: the zero-length
/// message the initiator sends first in peer-to-peer mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RtrType {
    /// Zero-length Send (an FPDU carrying an empty untagged Send) — flag B.
    Send,
    /// Zero-length RDMA Write — flag C.
    Write,
    /// Zero-length RDMA Read (a Read Request for 0 octets) — flag D.
    Read,
}

impl RtrType {
    /// All RTR types, in the order this crate prefers them when it has to pick:
    /// Write needs no receive buffer and no IRD/ORD credit, Read needs one
    /// IRD/ORD credit, Send consumes a posted receive buffer.
    pub const PREFERENCE: [RtrType; 3] = [RtrType::Write, RtrType::Read, RtrType::Send];
}

impl fmt::Display for RtrType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RtrType::Send => "zero-length Send",
            RtrType::Write => "zero-length RDMA Write",
            RtrType::Read => "zero-length RDMA Read",
        })
    }
}

/// A set of [`RtrType`]s (the B, C and D flags of the enhanced data).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RtrSet {
    /// Zero-length Send (B).
    pub send: bool,
    /// Zero-length RDMA Write (C).
    pub write: bool,
    /// Zero-length RDMA Read (D).
    pub read: bool,
}

impl RtrSet {
    /// No RTR type.
    pub const EMPTY: RtrSet = RtrSet {
        send: false,
        write: false,
        read: false,
    };
    /// All three RTR types.
    pub const ALL: RtrSet = RtrSet {
        send: true,
        write: true,
        read: true,
    };

    /// The set holding only `t`.
    pub fn only(t: RtrType) -> Self {
        let mut s = Self::EMPTY;
        s.insert(t);
        s
    }

    /// Whether `t` is in the set.
    pub fn contains(&self, t: RtrType) -> bool {
        match t {
            RtrType::Send => self.send,
            RtrType::Write => self.write,
            RtrType::Read => self.read,
        }
    }

    /// Adds `t`.
    pub fn insert(&mut self, t: RtrType) {
        match t {
            RtrType::Send => self.send = true,
            RtrType::Write => self.write = true,
            RtrType::Read => self.read = true,
        }
    }

    /// Removes `t`.
    pub fn remove(&mut self, t: RtrType) {
        match t {
            RtrType::Send => self.send = false,
            RtrType::Write => self.write = false,
            RtrType::Read => self.read = false,
        }
    }

    /// Types in both sets.
    pub fn intersection(&self, other: &RtrSet) -> RtrSet {
        RtrSet {
            send: self.send && other.send,
            write: self.write && other.write,
            read: self.read && other.read,
        }
    }

    /// Number of types in the set.
    pub fn len(&self) -> usize {
        usize::from(self.send) + usize::from(self.write) + usize::from(self.read)
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The single member, if the set holds exactly one type.
    pub fn single(&self) -> Option<RtrType> {
        let mut it = self.iter();
        match (it.next(), it.next()) {
            (Some(t), None) => Some(t),
            _ => None,
        }
    }

    /// The members in [`RtrType::PREFERENCE`] order.
    pub fn iter(&self) -> impl Iterator<Item = RtrType> + '_ {
        RtrType::PREFERENCE
            .into_iter()
            .filter(move |t| self.contains(*t))
    }
}

/// The RFC 6581 enhanced connection data: the first four octets of the private
/// data when Rev = 2 and H = 1.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct EnhancedData {
    /// Incoming RDMA Read queue depth of the frame's sender (14 bits).
    pub ird: u16,
    /// Outgoing RDMA Read queue depth of the frame's sender (14 bits).
    pub ord: u16,
    /// Peer-to-peer flag (A).
    pub p2p: bool,
    /// RTR message types: offered (Request) or chosen (Reply).
    pub rtr: RtrSet,
}

impl EnhancedData {
    /// Decodes the two 16-bit words (IRD word, ORD word) in host order.
    pub fn from_words(ird_word: u16, ord_word: u16) -> Self {
        EnhancedData {
            ird: ird_word & IRD_ORD_MAX,
            ord: ord_word & IRD_ORD_MAX,
            p2p: ird_word & WORD_FLAG_HIGH != 0,
            rtr: RtrSet {
                send: ird_word & WORD_FLAG_LOW != 0,
                write: ord_word & WORD_FLAG_HIGH != 0,
                read: ord_word & WORD_FLAG_LOW != 0,
            },
        }
    }

    /// Encodes the (IRD word, ORD word) pair; fails if IRD or ORD exceeds 14 bits.
    pub fn to_words(&self) -> Result<(u16, u16), FrameError> {
        if self.ird > IRD_ORD_MAX {
            return Err(FrameError::IrdOrdTooLarge {
                field: "IRD",
                value: self.ird,
            });
        }
        if self.ord > IRD_ORD_MAX {
            return Err(FrameError::IrdOrdTooLarge {
                field: "ORD",
                value: self.ord,
            });
        }
        let mut ird_word = self.ird;
        let mut ord_word = self.ord;
        if self.p2p {
            ird_word |= WORD_FLAG_HIGH;
        }
        if self.rtr.send {
            ird_word |= WORD_FLAG_LOW;
        }
        if self.rtr.write {
            ord_word |= WORD_FLAG_HIGH;
        }
        if self.rtr.read {
            ord_word |= WORD_FLAG_LOW;
        }
        Ok((ird_word, ord_word))
    }

    /// Decodes the enhanced data from the first four octets of `pd`.
    pub fn parse(pd: &[u8]) -> Option<Self> {
        let ird_word = u16::from_be_bytes(*pd.first_chunk()?);
        let ord_word = u16::from_be_bytes(*pd.get(2..)?.first_chunk()?);
        Some(Self::from_words(ird_word, ord_word))
    }

    /// The four wire octets.
    pub fn to_bytes(&self) -> Result<[u8; ENHANCED_DATA_LEN], FrameError> {
        let (i, o) = self.to_words()?;
        let [i0, i1] = i.to_be_bytes();
        let [o0, o1] = o.to_be_bytes();
        Ok([i0, i1, o0, o1])
    }
}

/// Checks that `buf` starts with a complete, well-formed frame header and
/// private data; returns the frame kind and total frame length.
fn check_prefix(buf: &[u8]) -> Result<(FrameKind, usize), FrameError> {
    let avail_key = buf.get(..KEY_LEN.min(buf.len())).unwrap_or(&[]);
    if !REQUEST_KEY.starts_with(avail_key) && !REPLY_KEY.starts_with(avail_key) {
        return Err(FrameError::BadKey {
            found: avail_key.to_vec(),
        });
    }
    if buf.len() < HEADER_LEN {
        return Err(FrameError::Truncated {
            needed: HEADER_LEN - buf.len(),
        });
    }
    let kind = buf
        .get(..KEY_LEN)
        .and_then(FrameKind::from_key)
        .ok_or_else(|| FrameError::BadKey {
            found: avail_key.to_vec(),
        })?;
    let pd_len = usize::from(ConnFramePacket::new_unchecked(buf).pd_length());
    if pd_len > MAX_PRIVATE_DATA {
        return Err(FrameError::PrivateDataTooLong { len: pd_len });
    }
    let total = HEADER_LEN + pd_len;
    if buf.len() < total {
        return Err(FrameError::Truncated {
            needed: total - buf.len(),
        });
    }
    Ok((kind, total))
}

/// Zero-copy view of an MPA Request/Reply frame at the start of a buffer.
///
/// Accessors never panic: on a buffer too short for a field they return zero or
/// an empty slice. Use [`ConnFramePacket::new_checked`] to know the frame is
/// complete and well formed. Octets after the frame are ignored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnFramePacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ConnFramePacket<T> {
    /// Wraps a buffer without checking it.
    pub fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Wraps a buffer after checking that it starts with a complete, well-formed frame.
    pub fn new_checked(buffer: T) -> Result<Self, FrameError> {
        let p = Self::new_unchecked(buffer);
        p.check()?;
        Ok(p)
    }

    /// Checks key, PD_Length limit and completeness (see [`FrameError`]).
    pub fn check(&self) -> Result<(), FrameError> {
        check_prefix(self.buffer.as_ref()).map(|_| ())
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The 16 key octets (shorter if the buffer is).
    pub fn key(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        b.get(..KEY_LEN.min(b.len())).unwrap_or(&[])
    }

    /// Request or Reply, if the key is one of the two MPA keys.
    pub fn kind(&self) -> Option<FrameKind> {
        FrameKind::from_key(self.key())
    }

    /// The raw flags octet (M, C, R, H and the reserved bits).
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref().get(OFF_FLAGS).copied().unwrap_or(0)
    }

    /// M: the sender wants to receive markers.
    pub fn markers(&self) -> bool {
        self.flags() & FLAG_MARKERS != 0
    }

    /// C: the sender prefers CRC.
    pub fn crc(&self) -> bool {
        self.flags() & FLAG_CRC != 0
    }

    /// R: reject.
    pub fn reject(&self) -> bool {
        self.flags() & FLAG_REJECT != 0
    }

    /// H: RFC 6581 enhanced connection establishment.
    pub fn enhanced_flag(&self) -> bool {
        self.flags() & FLAG_ENHANCED != 0
    }

    /// The reserved flag bits (low four bits of the flags octet).
    pub fn reserved(&self) -> u8 {
        self.flags() & FLAG_RESERVED_MASK
    }

    /// Rev: the MPA revision.
    pub fn revision(&self) -> u8 {
        self.buffer.as_ref().get(OFF_REV).copied().unwrap_or(0)
    }

    /// PD_Length: private data length, enhanced data included.
    pub fn pd_length(&self) -> u16 {
        self.buffer
            .as_ref()
            .get(OFF_PD_LEN..)
            .and_then(<[u8]>::first_chunk)
            .map_or(0, |b| u16::from_be_bytes(*b))
    }

    /// Total frame length: header plus private data.
    pub fn frame_len(&self) -> usize {
        HEADER_LEN + usize::from(self.pd_length())
    }

    /// All private data octets (enhanced data included), as far as the buffer holds them.
    pub fn private_data(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        let end = self.frame_len().min(b.len());
        b.get(HEADER_LEN..end).unwrap_or(&[])
    }

    /// Whether the private data starts with RFC 6581 enhanced data
    /// (Rev = 2, H = 1 and at least four octets of private data).
    pub fn has_enhanced_data(&self) -> bool {
        self.revision() == 2
            && self.enhanced_flag()
            && self.private_data().len() >= ENHANCED_DATA_LEN
    }

    /// The RFC 6581 enhanced data, if present.
    pub fn enhanced_data(&self) -> Option<EnhancedData> {
        if self.has_enhanced_data() {
            EnhancedData::parse(self.private_data())
        } else {
            None
        }
    }

    /// The ULP's private data: the private data after any enhanced data.
    pub fn ulp_private_data(&self) -> &[u8] {
        let pd = self.private_data();
        if self.has_enhanced_data() {
            pd.get(ENHANCED_DATA_LEN..).unwrap_or(&[])
        } else {
            pd
        }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ConnFramePacket<T> {
    fn set_octet(&mut self, off: usize, v: u8) {
        if let Some(x) = self.buffer.as_mut().get_mut(off) {
            *x = v;
        }
    }

    /// Writes the key for `kind` (as far as the buffer reaches).
    pub fn set_kind(&mut self, kind: FrameKind) {
        for (dst, src) in self.buffer.as_mut().iter_mut().zip(kind.key().iter()) {
            *dst = *src;
        }
    }

    /// Writes the raw flags octet.
    pub fn set_flags(&mut self, flags: u8) {
        self.set_octet(OFF_FLAGS, flags);
    }

    /// Writes Rev.
    pub fn set_revision(&mut self, rev: u8) {
        self.set_octet(OFF_REV, rev);
    }

    /// Writes PD_Length.
    pub fn set_pd_length(&mut self, len: u16) {
        let [a, b] = len.to_be_bytes();
        self.set_octet(OFF_PD_LEN, a);
        self.set_octet(OFF_PD_LEN + 1, b);
    }

    /// Mutable private data, as far as PD_Length and the buffer reach.
    pub fn private_data_mut(&mut self) -> &mut [u8] {
        let end = self.frame_len();
        let b = self.buffer.as_mut();
        let end = end.min(b.len());
        b.get_mut(HEADER_LEN..end).unwrap_or(&mut [])
    }
}

/// An MPA Request or Reply frame as plain values.
///
/// `enhanced` is `Some` exactly when the frame has Rev = 2, H = 1 and at least
/// four octets of private data — the case in which [`ConnFrame::parse`] splits
/// off the RFC 6581 enhanced data; `private_data` then holds only the ULP's part.
/// A frame with Rev = 2, H = 1 but fewer than four private data octets parses
/// with `enhanced: None` so that negotiation can reject it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ConnFrame {
    /// Request or Reply.
    pub kind: FrameKind,
    /// M: the sender wants to receive markers.
    pub markers: bool,
    /// C: the sender prefers CRC.
    pub crc: bool,
    /// R: reject (meaningful in a Reply).
    pub reject: bool,
    /// H: RFC 6581 enhanced connection establishment.
    pub enhanced_flag: bool,
    /// Reserved flag bits (low four bits); sent as given, must be 0 per RFC.
    pub reserved: u8,
    /// Rev: MPA revision.
    pub revision: u8,
    /// RFC 6581 enhanced data (see the type documentation for when it is present).
    pub enhanced: Option<EnhancedData>,
    /// The ULP's private data (after any enhanced data).
    pub private_data: Vec<u8>,
}

impl ConnFrame {
    /// A frame of `kind` with all flags clear, the given revision and no private data.
    pub fn new(kind: FrameKind, revision: u8) -> Self {
        ConnFrame {
            kind,
            markers: false,
            crc: false,
            reject: false,
            enhanced_flag: false,
            reserved: 0,
            revision,
            enhanced: None,
            private_data: Vec::new(),
        }
    }

    /// Parses the frame at the start of `buf`.
    ///
    /// Returns the frame and the number of octets it occupies; octets after it
    /// (for instance the first FPDU in the same TCP segment) are left alone.
    /// [`FrameError::Truncated`] means "call again with more data"; every other
    /// error means the input can never become a valid frame.
    pub fn parse(buf: &[u8]) -> Result<(ConnFrame, usize), FrameError> {
        let (kind, total) = check_prefix(buf)?;
        let p = ConnFramePacket::new_unchecked(buf);
        let enhanced = p.enhanced_data();
        let frame = ConnFrame {
            kind,
            markers: p.markers(),
            crc: p.crc(),
            reject: p.reject(),
            enhanced_flag: p.enhanced_flag(),
            reserved: p.reserved(),
            revision: p.revision(),
            enhanced,
            private_data: p.ulp_private_data().to_vec(),
        };
        Ok((frame, total))
    }

    /// PD_Length of this frame: enhanced data (if any) plus the ULP's private data.
    pub fn pd_length(&self) -> usize {
        self.private_data.len() + self.enhanced.map_or(0, |_| ENHANCED_DATA_LEN)
    }

    /// Number of octets [`ConnFrame::emit`] appends.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.pd_length()
    }

    /// The flags octet this frame is sent with.
    pub fn flags(&self) -> u8 {
        let mut f = self.reserved & FLAG_RESERVED_MASK;
        if self.markers {
            f |= FLAG_MARKERS;
        }
        if self.crc {
            f |= FLAG_CRC;
        }
        if self.reject {
            f |= FLAG_REJECT;
        }
        if self.enhanced_flag {
            f |= FLAG_ENHANCED;
        }
        f
    }

    /// Whether [`ConnFrame::parse`] of the emitted octets yields this value again
    /// (`enhanced` present exactly when Rev = 2 and H = 1, reserved bits in range).
    pub fn is_canonical(&self) -> bool {
        let split = self.revision == 2 && self.enhanced_flag;
        let enhanced_ok = match self.enhanced {
            Some(e) => split && e.ird <= IRD_ORD_MAX && e.ord <= IRD_ORD_MAX,
            None => !split || self.private_data.len() < ENHANCED_DATA_LEN,
        };
        enhanced_ok && self.reserved <= FLAG_RESERVED_MASK
    }

    /// Appends the frame's wire octets to `out`.
    ///
    /// Fails (appending nothing) if the private data would exceed 512 octets or
    /// IRD/ORD do not fit 14 bits. Only the low four bits of `reserved` are sent.
    pub fn emit(&self, out: &mut Vec<u8>) -> Result<(), FrameError> {
        let pd_len = self.pd_length();
        if pd_len > MAX_PRIVATE_DATA {
            return Err(FrameError::PrivateDataTooLong { len: pd_len });
        }
        let enhanced = self.enhanced.map(|e| e.to_bytes()).transpose()?;
        let start = out.len();
        out.resize(start + HEADER_LEN, 0);
        {
            let header = out.get_mut(start..).unwrap_or(&mut []);
            let mut p = ConnFramePacket::new_unchecked(header);
            p.set_kind(self.kind);
            p.set_flags(self.flags());
            p.set_revision(self.revision);
            // pd_len <= 512 was checked above.
            p.set_pd_length(pd_len as u16);
        }
        if let Some(e) = enhanced {
            out.extend_from_slice(&e);
        }
        out.extend_from_slice(&self.private_data);
        Ok(())
    }

    /// The frame's wire octets in a new vector.
    pub fn to_bytes(&self) -> Result<Vec<u8>, FrameError> {
        let mut v = Vec::with_capacity(self.buffer_len());
        self.emit(&mut v)?;
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The MPA Request Linux siw 6.1 sends (captured): rev 2, H, IRD = ORD = 1.
    const SIW_REQUEST: [u8; 24] = [
        0x4d, 0x50, 0x41, 0x20, 0x49, 0x44, 0x20, 0x52, 0x65, 0x71, 0x20, 0x46, 0x72, 0x61, 0x6d,
        0x65, 0x10, 0x02, 0x00, 0x04, 0x00, 0x01, 0x00, 0x01,
    ];

    /// RFC 5044 §7.1.1 + RFC 6581 (enhanced Request): siw's captured Request parses to rev 2, only
    /// H set, IRD = ORD = 1 without P2P/RTR, and emits back byte-identical.
    #[test]
    fn rfc5044_7_1_1_siw_request_known_vector() {
        let (f, used) = ConnFrame::parse(&SIW_REQUEST).expect("valid frame");
        assert_eq!(used, 24);
        assert_eq!(f.kind, FrameKind::Request);
        assert!(!f.markers && !f.crc && !f.reject);
        assert!(f.enhanced_flag);
        assert_eq!(f.reserved, 0);
        assert_eq!(f.revision, 2);
        assert_eq!(
            f.enhanced,
            Some(EnhancedData {
                ird: 1,
                ord: 1,
                p2p: false,
                rtr: RtrSet::EMPTY
            })
        );
        assert!(f.private_data.is_empty());
        assert_eq!(f.buffer_len(), 24);
        assert_eq!(f.to_bytes().expect("emit"), SIW_REQUEST);
    }

    /// RFC 5044 §7.1.1: the flag bits sit at M = 0x80, C = 0x40, R = 0x20 of the
    /// octet after the key, H (RFC 6581) at 0x10, Rev in the next octet and
    /// PD_Length big-endian after it.
    #[test]
    fn rfc5044_7_1_1_field_positions() {
        let mut f = ConnFrame::new(FrameKind::Reply, 1);
        f.markers = true;
        let b = f.to_bytes().expect("emit");
        assert_eq!(&b[..16], REPLY_KEY);
        assert_eq!(b[16], 0x80);
        assert_eq!(b[17], 1);
        assert_eq!(&b[18..20], &[0, 0]);
        f.markers = false;
        f.crc = true;
        assert_eq!(f.to_bytes().expect("emit")[16], 0x40);
        f.crc = false;
        f.reject = true;
        assert_eq!(f.to_bytes().expect("emit")[16], 0x20);
        f.reject = false;
        f.private_data = vec![7; 300];
        let b = f.to_bytes().expect("emit");
        assert_eq!(&b[18..20], &300u16.to_be_bytes());
        assert_eq!(b.len(), 320);
    }

    /// RFC 6581 (Enhanced RDMA Connection Establishment Data): A (peer-to-peer)
    /// and B (zero-length Send RTR) are the top bits of the IRD word, C
    /// (zero-length Write RTR) and D (zero-length Read RTR) the top bits of the
    /// ORD word; IRD/ORD are 14-bit values. Cross-checked with the constants of
    /// Linux siw, cxgb4 and qed.
    #[test]
    fn rfc6581_enhanced_data_bit_positions() {
        let e = EnhancedData::from_words(0x8000 | 0x4000 | 0x0123, 0x8000 | 0x0042);
        assert_eq!(e.ird, 0x123);
        assert_eq!(e.ord, 0x42);
        assert!(e.p2p);
        assert_eq!(
            e.rtr,
            RtrSet {
                send: true,
                write: true,
                read: false
            }
        );
        let e = EnhancedData::from_words(0x3fff, 0x4000 | 0x3fff);
        assert_eq!((e.ird, e.ord), (0x3fff, 0x3fff));
        assert!(!e.p2p);
        assert_eq!(e.rtr, RtrSet::only(RtrType::Read));
        assert_eq!(e.to_words().expect("fits"), (0x3fff, 0x7fff));
        let bad = EnhancedData {
            ird: 0x4000,
            ..EnhancedData::default()
        };
        assert!(matches!(
            bad.to_words(),
            Err(FrameError::IrdOrdTooLarge { field: "IRD", .. })
        ));
    }

    /// RFC 6581: the enhanced data is only present with Rev = 2 and H = 1; in a
    /// Rev 1 frame the same bit is reserved (ignored) and all private data is the ULP's.
    #[test]
    fn rfc6581_enhanced_data_only_with_rev2_and_h() {
        let mut b = SIW_REQUEST.to_vec();
        b[17] = 1;
        let (f, _) = ConnFrame::parse(&b).expect("valid");
        assert!(f.enhanced_flag);
        assert_eq!(f.enhanced, None);
        assert_eq!(f.private_data, vec![0, 1, 0, 1]);
        let mut b = SIW_REQUEST.to_vec();
        b[16] = 0;
        let (f, _) = ConnFrame::parse(&b).expect("valid");
        assert_eq!(f.enhanced, None);
        assert_eq!(f.private_data.len(), 4);
        // Rev 2 + H with fewer than 4 octets: parsed, left for negotiation to reject.
        let mut b = SIW_REQUEST[..22].to_vec();
        b[19] = 2;
        let (f, used) = ConnFrame::parse(&b).expect("valid syntax");
        assert_eq!(used, 22);
        assert!(f.enhanced_flag && f.enhanced.is_none());
        assert!(f.is_canonical());
    }

    /// RFC 5044 §7.1.1: PD_Length larger than 512 is an error (detected as soon
    /// as the header is complete), exactly 512 is fine.
    #[test]
    fn rfc5044_7_1_1_private_data_limit() {
        let mut f = ConnFrame::new(FrameKind::Request, 1);
        f.private_data = vec![1; 512];
        let b = f.to_bytes().expect("512 is allowed");
        assert_eq!(ConnFrame::parse(&b).expect("ok").1, 532);
        let mut hdr = b[..20].to_vec();
        hdr[18..20].copy_from_slice(&513u16.to_be_bytes());
        assert_eq!(
            ConnFrame::parse(&hdr),
            Err(FrameError::PrivateDataTooLong { len: 513 })
        );
        f.private_data.push(0);
        assert_eq!(
            f.to_bytes(),
            Err(FrameError::PrivateDataTooLong { len: 513 })
        );
        // With enhanced data the 4 octets count against the limit.
        let mut f = ConnFrame::new(FrameKind::Request, 2);
        f.enhanced_flag = true;
        f.enhanced = Some(EnhancedData::default());
        f.private_data = vec![0; 509];
        assert_eq!(
            f.to_bytes(),
            Err(FrameError::PrivateDataTooLong { len: 513 })
        );
    }

    /// RFC 5044 §7.1.1 / §7.1.2: a key other than the two MPA keys is rejected,
    /// even before the whole key has arrived; a partial correct key is
    /// `Truncated`.
    #[test]
    fn rfc5044_7_1_1_key_check() {
        assert!(matches!(
            ConnFrame::parse(b"GET / HTTP/1.1\r\n\0\0\0\0"),
            Err(FrameError::BadKey { .. })
        ));
        assert!(matches!(
            ConnFrame::parse(b"MPA X"),
            Err(FrameError::BadKey { .. })
        ));
        assert_eq!(
            ConnFrame::parse(b"MPA ID Re"),
            Err(FrameError::Truncated { needed: 11 })
        );
        assert_eq!(
            ConnFrame::parse(&[]),
            Err(FrameError::Truncated { needed: 20 })
        );
        assert_eq!(
            ConnFrame::parse(&SIW_REQUEST[..21]),
            Err(FrameError::Truncated { needed: 3 })
        );
    }

    /// RFC 5044 §7.1.2 / §8 (code 4): a malformed Request or Reply (bad key,
    /// PD_Length over 512) is an invalid MPA Request/Reply, LLP error 4; an
    /// incomplete frame is not an error at all.
    #[test]
    fn rfc5044_8_malformed_frame_is_llp_error_4() {
        let bad_key = ConnFrame::parse(b"MPA ID Ack Frame\0\x01\0\0").expect_err("bad key");
        assert_eq!(bad_key.llp_error(), Some(LlpErrorCode::InvalidRequestReply));
        let mut long = SIW_REQUEST[..20].to_vec();
        long[18..20].copy_from_slice(&600u16.to_be_bytes());
        let too_long = ConnFrame::parse(&long).expect_err("PD_Length > 512");
        assert_eq!(
            too_long.llp_error(),
            Some(LlpErrorCode::InvalidRequestReply)
        );
        assert_eq!(LlpErrorCode::InvalidRequestReply.code(), 4);
        let short = ConnFrame::parse(&SIW_REQUEST[..10]).expect_err("incomplete");
        assert_eq!(short.llp_error(), None);
        let emit = EnhancedData {
            ord: 0x4000,
            ..EnhancedData::default()
        }
        .to_words()
        .expect_err("15-bit ORD");
        assert_eq!(emit.llp_error(), Some(LlpErrorCode::LocalCatastrophic));
    }

    /// Trailing octets after a frame (the first FPDU in the same segment) are not consumed.
    #[test]
    fn parse_leaves_trailing_octets() {
        let mut b = SIW_REQUEST.to_vec();
        b.extend_from_slice(&[0x00, 0x22, 0x41, 0x43]);
        assert_eq!(ConnFrame::parse(&b).expect("ok").1, 24);
    }

    /// The packet view never panics on short buffers and its setters stay in bounds.
    #[test]
    fn packet_view_is_total() {
        let p = ConnFramePacket::new_unchecked(&[0x4du8][..]);
        assert_eq!(p.flags(), 0);
        assert_eq!(p.revision(), 0);
        assert_eq!(p.pd_length(), 0);
        assert!(p.private_data().is_empty());
        assert_eq!(p.kind(), None);
        let mut small = [0u8; 3];
        let mut p = ConnFramePacket::new_unchecked(&mut small[..]);
        p.set_kind(FrameKind::Reply);
        p.set_flags(0xff);
        p.set_pd_length(9);
        assert!(p.private_data_mut().is_empty());
        assert_eq!(small, *b"MPA");
        let p = ConnFramePacket::new_checked(&SIW_REQUEST[..]).expect("valid");
        assert_eq!(p.kind(), Some(FrameKind::Request));
        assert!(p.has_enhanced_data());
        assert!(p.ulp_private_data().is_empty());
    }

    #[test]
    fn rtr_set_helpers() {
        let mut s = RtrSet::EMPTY;
        assert!(s.is_empty());
        s.insert(RtrType::Read);
        s.insert(RtrType::Send);
        assert_eq!(s.len(), 2);
        assert_eq!(s.single(), None);
        assert_eq!(
            s.iter().collect::<Vec<_>>(),
            vec![RtrType::Read, RtrType::Send]
        );
        s.remove(RtrType::Send);
        assert_eq!(s.single(), Some(RtrType::Read));
        assert_eq!(
            RtrSet::ALL.intersection(&RtrSet::only(RtrType::Write)),
            RtrSet::only(RtrType::Write)
        );
    }
}
