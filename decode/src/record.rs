//! Typed records of what the decoder found: one [`Record`] per output line, holding the
//! protocol crates' own header types ([`mpa::ConnFrame`], [`rdmap::Header`],
//! [`mpa::DeframeError`], ...), with its [`Layer`], its verdict ([`EventKind`]), its text
//! (the line `softrnic decode` prints) and its [`Fields`] (named values for printers such as
//! the JSON one).
//!
//! The text printer, the JSON printer and tests all read the same records: the text of a
//! line is [`Record::describe`] of its record.

use std::fmt::{self, Write as _};

use mpa::{ConnFrame, CrcStatus, DeframeError, FrameError, FrameKind, RtrSet};
use rdmap::{DecodeError, Header, Message, TermCause};
use serde::ser::{Serialize, SerializeMap, Serializer};

use crate::EventKind;
use crate::sctp_decode::SctpRecord;

/// The protocol layer a record is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Layer {
    /// TCP (reassembly: capture gaps).
    Tcp,
    /// MPA (RFC 5044, RFC 6581): connection setup, FPDU framing, markers, CRC.
    Mpa,
    /// DDP (RFC 5041) and the DDP over SCTP adaptation (RFC 5043).
    Ddp,
    /// RDMAP (RFC 5040, RFC 7306).
    Rdmap,
    /// SCTP (RFC 9260, RFC 6951): packets and chunks.
    Sctp,
}

impl Layer {
    /// Lower-case name (`"mpa"`, `"rdmap"`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Layer::Tcp => "tcp",
            Layer::Mpa => "mpa",
            Layer::Ddp => "ddp",
            Layer::Rdmap => "rdmap",
            Layer::Sctp => "sctp",
        }
    }
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl EventKind {
    /// Lower-case name (`"info"`, `"warning"`, `"error"`).
    pub fn name(self) -> &'static str {
        match self {
            EventKind::Info => "info",
            EventKind::Warning => "warning",
            EventKind::Error => "error",
        }
    }
}

/// The value of one decoded field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// A flag.
    Bool(bool),
    /// A number (lengths, STags, offsets, sequence numbers, codes).
    Num(u64),
    /// A name or description.
    Str(String),
}

impl Value {
    /// The number, if this is one.
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Value::Num(n) => Some(*n),
            _ => None,
        }
    }

    /// The flag, if this is one.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Bool(b) => write!(f, "{b}"),
            Value::Num(n) => write!(f, "{n}"),
            Value::Str(s) => f.write_str(s),
        }
    }
}

impl Serialize for Value {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Value::Bool(b) => s.serialize_bool(*b),
            Value::Num(n) => s.serialize_u64(*n),
            Value::Str(t) => s.serialize_str(t),
        }
    }
}

macro_rules! value_from_uint {
    ($($t:ty),*) => {$(
        impl From<$t> for Value {
            fn from(v: $t) -> Self {
                Value::Num(v as u64)
            }
        }
    )*};
}
value_from_uint!(u8, u16, u32, u64, usize);

impl From<bool> for Value {
    fn from(v: bool) -> Self {
        Value::Bool(v)
    }
}

impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Value::Str(v.to_string())
    }
}

impl From<String> for Value {
    fn from(v: String) -> Self {
        Value::Str(v)
    }
}

/// Named values of a record, in protocol order (serialised as a JSON object in that order).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fields(pub Vec<(&'static str, Value)>);

impl Fields {
    /// Appends a field.
    pub fn push(&mut self, name: &'static str, v: impl Into<Value>) {
        self.0.push((name, v.into()));
    }

    /// The value of the first field named `name`.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.0.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    /// The fields as (name, value) pairs.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, &Value)> {
        self.0.iter().map(|(n, v)| (*n, v))
    }
}

impl Serialize for Fields {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (n, v) in &self.0 {
            m.serialize_entry(n, v)?;
        }
        m.end()
    }
}

/// The name of an enum variant from its `Debug` form (`BadLength { .. }` → `BadLength`):
/// the error name of a typed error.
pub fn variant_name<T: fmt::Debug>(v: &T) -> String {
    let d = format!("{v:?}");
    d.split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
        .next()
        .unwrap_or_default()
        .to_string()
}

/// What the decoder found at one point of a TCP stream or SCTP association.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// The capture misses octets of a TCP direction; decoding of that direction stops.
    CaptureGap {
        /// Stream offset of the first missing octet.
        offset: u64,
        /// Octets missing.
        len: u64,
    },
    /// An MPA Request or Reply (RFC 5044 §7.1, RFC 6581 enhanced data).
    MpaFrame(ConnFrame),
    /// The capture holds only the start of an MPA Request or Reply.
    MpaIncomplete {
        /// The frame expected there.
        expected: FrameKind,
        /// Octets the capture holds.
        have: usize,
        /// Octets still needed (lower bound).
        needed: usize,
    },
    /// An MPA Request or Reply that does not parse.
    MpaMalformed {
        /// The frame expected there.
        expected: FrameKind,
        /// Why.
        error: FrameError,
    },
    /// The MPA exchange breaks a rule.
    MpaSetup(SetupIssue),
    /// One FPDU and the DDP/RDMAP message it carries.
    Fpdu(FpduRecord),
    /// An FPDU that could not be taken off the stream (bad CRC, length or marker).
    Deframe(DeframeError),
    /// FPDUs of a direction whose pad octets were not zero.
    NonzeroPad {
        /// How many FPDUs.
        fpdus: u64,
    },
    /// A TCP direction ends inside an FPDU.
    EndsInsideFpdu {
        /// Octets of the unfinished FPDU.
        octets: usize,
    },
    /// A line of the SCTP decode.
    Sctp(SctpRecord),
}

/// A rule the MPA exchange breaks (or a condition RFC 6581 makes the initiator act on).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetupIssue {
    /// The initiator sent data after its Request with no Reply in the capture.
    DataBeforeReply {
        /// Octets after the Request.
        octets: usize,
    },
    /// The responder's frame carries the Request key.
    ReplyWithRequestKey,
    /// Octets follow a rejected exchange.
    DataAfterReject {
        /// Octets after the frame.
        octets: usize,
    },
    /// The Reply breaks a negotiation rule of the initiator.
    Negotiation(mpa::NegotiationError),
    /// The responder's ORD exceeds the initiator's IRD (RFC 6581).
    OrdExceedsIrd {
        /// Responder ORD.
        ord: u16,
        /// Initiator IRD.
        ird: u16,
    },
}

/// A Terminate Control field laid out from the low bits (reserved bits set, RFC 5040 §4.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LowBitFirst {
    /// The four Terminate Control octets as received.
    pub control: [u8; 4],
    /// The cause read with Layer/EType laid out from the low bits.
    pub cause: TermCause,
    /// M, D and R read that way.
    pub m: bool,
    /// D flag.
    pub d: bool,
    /// R flag.
    pub r: bool,
}

/// One FPDU: its MPA framing and the DDP/RDMAP message of its ULPDU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FpduRecord {
    /// Octets on the wire (markers, length, pad and CRC included).
    pub wire_len: usize,
    /// ULPDU_Length.
    pub ulpdu_len: usize,
    /// Markers stripped from it.
    pub markers: usize,
    /// CRC outcome.
    pub crc: CrcStatus,
    /// Pad octets not all zero.
    pub nonzero_pad: bool,
    /// The initiator's first FPDU of a peer-to-peer session: the RTR message (RFC 6581).
    pub p2p_rtr: bool,
    /// The DDP/RDMAP header, or why the ULPDU is not valid DDP/RDMAP.
    pub message: Result<Header, DecodeError>,
    /// ULP payload octets after the headers.
    pub payload_len: usize,
    /// When the ULPDU is not valid RDMAP but its DDP header parses: that header.
    pub ddp_header: Option<ddp::Header>,
    /// For a Terminate with reserved control bits set: the low-bit-first reading.
    pub low_bit_first: Option<LowBitFirst>,
}

impl FpduRecord {
    /// The record of a deframed FPDU.
    pub fn new(fpdu: &mpa::Fpdu, p2p_rtr: bool) -> FpduRecord {
        let parsed = Message::parse(&fpdu.ulpdu);
        let low_bit_first = parsed
            .as_ref()
            .ok()
            .and_then(|m| low_bit_first_terminate(m, &fpdu.ulpdu));
        FpduRecord {
            wire_len: fpdu.wire_len,
            ulpdu_len: fpdu.ulpdu.len(),
            markers: fpdu.markers,
            crc: fpdu.crc,
            nonzero_pad: fpdu.nonzero_pad,
            p2p_rtr,
            payload_len: parsed.as_ref().map_or(0, |m| m.payload.len()),
            ddp_header: match parsed {
                Err(_) => ddp::Segment::parse(&fpdu.ulpdu).ok().map(|(h, _)| h),
                Ok(_) => None,
            },
            message: parsed.map(|m| m.header),
            low_bit_first,
        }
    }
}

/// For a Terminate whose control word has reserved bits set the way a low-bit-first
/// bitfield layout sets them (RFC 5040 §4.8 reserves them), what that layout means.
fn low_bit_first_terminate(m: &Message<'_>, ulpdu: &[u8]) -> Option<LowBitFirst> {
    if !matches!(m.header, Header::Terminate { .. }) {
        return None;
    }
    let t = crate::terminate::read(ulpdu)?;
    (t.layout == crate::terminate::Layout::LowBitFirst).then_some(LowBitFirst {
        control: t.control,
        cause: t.cause,
        m: t.m,
        d: t.d,
        r: t.r,
    })
}

impl Record {
    /// The layer the record is about.
    pub fn layer(&self) -> Layer {
        match self {
            Record::CaptureGap { .. } => Layer::Tcp,
            Record::MpaFrame(_)
            | Record::MpaIncomplete { .. }
            | Record::MpaMalformed { .. }
            | Record::MpaSetup(_)
            | Record::Deframe(_)
            | Record::NonzeroPad { .. }
            | Record::EndsInsideFpdu { .. } => Layer::Mpa,
            Record::Fpdu(f) => match f.message {
                Err(DecodeError::Ddp(_)) => Layer::Ddp,
                _ => Layer::Rdmap,
            },
            Record::Sctp(s) => s.layer(),
        }
    }

    /// The verdict: information, a warning (legal but worth knowing) or a protocol error.
    pub fn verdict(&self) -> EventKind {
        match self {
            Record::MpaFrame(_) => EventKind::Info,
            Record::CaptureGap { .. }
            | Record::MpaIncomplete { .. }
            | Record::NonzeroPad { .. }
            | Record::EndsInsideFpdu { .. }
            | Record::MpaSetup(SetupIssue::OrdExceedsIrd { .. }) => EventKind::Warning,
            Record::MpaMalformed { .. } | Record::MpaSetup(_) | Record::Deframe(_) => {
                EventKind::Error
            }
            Record::Fpdu(f) => match (&f.message, f.low_bit_first) {
                (Err(_), _) => EventKind::Error,
                (Ok(_), Some(_)) => EventKind::Warning,
                (Ok(_), None) => EventKind::Info,
            },
            Record::Sctp(s) => s.verdict(),
        }
    }

    /// The line `softrnic decode` prints for the record.
    pub fn describe(&self) -> String {
        match self {
            Record::CaptureGap { offset, len } => format!(
                "capture misses {len} octets at stream offset {offset}; decoding of this direction stops there"
            ),
            Record::MpaFrame(f) => describe_frame(f),
            Record::MpaIncomplete {
                expected,
                have,
                needed,
            } => format!(
                "{} incomplete: the capture holds {have} octets, {needed} more needed",
                frame_name(*expected)
            ),
            Record::MpaMalformed { expected, error } => {
                format!("malformed {}: {error}", frame_name(*expected))
            }
            Record::MpaSetup(s) => match s {
                SetupIssue::DataBeforeReply { octets } => format!(
                    "initiator sent {octets} octets after its MPA Request without an MPA Reply (RFC 5044 §7.1.2)"
                ),
                SetupIssue::ReplyWithRequestKey => {
                    "responder answered with an MPA Request key instead of \"MPA ID Rep Frame\""
                        .into()
                }
                SetupIssue::DataAfterReject { octets } => {
                    format!("{octets} octets follow a rejected MPA exchange")
                }
                SetupIssue::Negotiation(e) => format!("MPA Reply breaks negotiation: {e}"),
                SetupIssue::OrdExceedsIrd { ord, ird } => format!(
                    "responder ORD {ord} exceeds initiator IRD {ird}: the initiator must raise its IRD or close (RFC 6581)"
                ),
            },
            Record::Fpdu(f) => describe_fpdu(f),
            Record::Deframe(e) => format!("{e} (Terminate: LLP/MPA {})", e.llp_error()),
            Record::NonzeroPad { fpdus } => format!(
                "{fpdus} FPDU(s) carry non-zero pad octets (a sender must zero them, a receiver ignores them: RFC 5044 §4.2)"
            ),
            Record::EndsInsideFpdu { octets } => {
                format!("stream ends inside an FPDU ({octets} octets not decoded)")
            }
            Record::Sctp(s) => s.describe(),
        }
    }

    /// The decoded fields as (name, value) pairs.
    pub fn fields(&self) -> Fields {
        let mut f = Fields::default();
        match self {
            Record::CaptureGap { offset, len } => {
                f.push("gap_offset", *offset);
                f.push("gap_length", *len);
            }
            Record::MpaFrame(fr) => frame_fields(&mut f, fr),
            Record::MpaIncomplete {
                expected,
                have,
                needed,
            } => {
                f.push("frame_type", frame_type(*expected));
                f.push("captured", *have);
                f.push("needed", *needed);
            }
            Record::MpaMalformed { expected, error } => {
                f.push("frame_type", frame_type(*expected));
                f.push("error", variant_name(error));
                if let Some(c) = error.llp_error() {
                    f.push("llp_error", c.code());
                }
                f.push("rfc", "RFC 5044 §7.1");
            }
            Record::MpaSetup(s) => setup_fields(&mut f, s),
            Record::Fpdu(r) => fpdu_fields(&mut f, r),
            Record::Deframe(e) => {
                f.push("error", variant_name(e));
                match e {
                    DeframeError::Crc {
                        expected,
                        found,
                        offset,
                    } => {
                        f.push("fpdu_offset", *offset);
                        f.push("crc", "bad");
                        f.push("crc_computed", *expected);
                        f.push("crc_field", *found);
                    }
                    DeframeError::BadLength {
                        len,
                        min,
                        max,
                        offset,
                    } => {
                        f.push("fpdu_offset", *offset);
                        f.push("ulpdu_length", *len);
                        f.push("ulpdu_length_min", *min);
                        f.push("ulpdu_length_max", *max);
                    }
                    DeframeError::BadMarker {
                        offset,
                        found,
                        expected,
                    } => {
                        f.push("marker_offset", *offset);
                        f.push("fpduptr", *found);
                        f.push("fpduptr_expected", *expected);
                    }
                }
                let llp = e.llp_error();
                f.push("term_layer", 2u8);
                f.push("term_etype", 0u8);
                f.push("term_ecode", llp.code());
                f.push("term_cause", llp.to_string());
                f.push("rfc", "RFC 5044 §8");
            }
            Record::NonzeroPad { fpdus } => {
                f.push("fpdus", *fpdus);
                f.push("rfc", "RFC 5044 §4.2");
            }
            Record::EndsInsideFpdu { octets } => f.push("undecoded", *octets),
            Record::Sctp(s) => s.fields(&mut f),
        }
        f
    }
}

fn frame_name(k: FrameKind) -> &'static str {
    match k {
        FrameKind::Request => "MPA Request",
        FrameKind::Reply => "MPA Reply",
    }
}

fn frame_type(k: FrameKind) -> &'static str {
    match k {
        FrameKind::Request => "request",
        FrameKind::Reply => "reply",
    }
}

fn frame_fields(f: &mut Fields, fr: &ConnFrame) {
    f.push("frame_type", frame_type(fr.kind));
    f.push("revision", fr.revision);
    f.push("m", fr.markers);
    f.push("c", fr.crc);
    f.push("r", fr.reject);
    f.push("h", fr.enhanced_flag);
    f.push("reserved", fr.reserved);
    if let Some(e) = fr.enhanced {
        f.push("ird", e.ird);
        f.push("ord", e.ord);
        f.push("p2p", e.p2p);
        f.push("rtr_write", e.rtr.write);
        f.push("rtr_read", e.rtr.read);
        f.push("rtr_send", e.rtr.send);
    }
    f.push("private_data_length", fr.private_data.len());
}

fn setup_fields(f: &mut Fields, s: &SetupIssue) {
    f.push("error", variant_name(s));
    match s {
        SetupIssue::DataBeforeReply { octets } => {
            f.push("octets", *octets);
            f.push("rfc", "RFC 5044 §7.1.2");
        }
        SetupIssue::ReplyWithRequestKey => {}
        SetupIssue::DataAfterReject { octets } => f.push("octets", *octets),
        SetupIssue::Negotiation(e) => f.push("negotiation_error", variant_name(e)),
        SetupIssue::OrdExceedsIrd { ord, ird } => {
            f.push("ord", *ord);
            f.push("ird", *ird);
            f.push("rfc", "RFC 6581");
        }
    }
}

fn term_cause_fields(f: &mut Fields, c: TermCause) {
    let (l, t, e) = c.layer_etype_ecode();
    f.push("term_layer", l);
    f.push("term_etype", t);
    f.push("term_ecode", e);
    f.push("term_cause", c.to_string());
}

/// DDP fields of a header.
fn ddp_fields(f: &mut Fields, h: &ddp::Header) {
    match h {
        ddp::Header::Tagged(t) => {
            f.push("ddp_tagged", true);
            f.push("ddp_last", t.last);
            f.push("stag", t.stag);
            f.push("to", t.to);
        }
        ddp::Header::Untagged(u) => {
            f.push("ddp_tagged", false);
            f.push("ddp_last", u.last);
            f.push("qn", u.qn);
            f.push("msn", u.msn);
            f.push("mo", u.mo);
        }
    }
}

/// DDP and RDMAP fields of a header (shared with the DDP over SCTP records).
pub(crate) fn header_fields(f: &mut Fields, h: &Header, payload_len: usize) {
    ddp_fields(f, &h.ddp_header());
    let op = h.opcode();
    f.push("opcode", op.code());
    f.push("opcode_name", op.name());
    match h {
        Header::RdmaWrite { .. } | Header::ReadResponse { .. } => {}
        Header::ReadRequest { request: r, .. } => {
            f.push("sink_stag", r.sink_stag);
            f.push("sink_to", r.sink_to);
            f.push("read_size", r.size);
            f.push("source_stag", r.source_stag);
            f.push("source_to", r.source_to);
        }
        Header::Send {
            invalidate_stag, ..
        } => {
            if let Some(s) = invalidate_stag {
                f.push("invalidate_stag", *s);
            }
        }
        Header::Terminate { terminate: t, .. } => {
            term_cause_fields(f, t.cause);
            f.push("term_m", t.m);
            f.push("term_d", t.d);
            f.push("term_r", t.r);
            if t.m || t.d {
                f.push("ddp_segment_length", t.ddp_segment_length);
            }
            if let Some(dh) = &t.ddp_header {
                match dh.parse() {
                    Ok(ddp::Header::Tagged(th)) => {
                        f.push("copied_ddp_tagged", true);
                        f.push("copied_stag", th.stag);
                        f.push("copied_to", th.to);
                    }
                    Ok(ddp::Header::Untagged(u)) => {
                        f.push("copied_ddp_tagged", false);
                        f.push("copied_qn", u.qn);
                        f.push("copied_msn", u.msn);
                        f.push("copied_mo", u.mo);
                    }
                    Err(_) => {}
                }
                if let Some(op) = dh.opcode() {
                    f.push("copied_opcode", op.code());
                }
            }
            if let Some(r) = &t.rdma_header {
                f.push("copied_sink_stag", r.sink_stag);
                f.push("copied_sink_to", r.sink_to);
                f.push("copied_read_size", r.size);
                f.push("copied_source_stag", r.source_stag);
                f.push("copied_source_to", r.source_to);
            }
        }
        Header::ImmediateData { data, .. } => {
            f.push("immediate_data", u64::from_be_bytes(*data));
        }
        Header::AtomicRequest { request: r, .. } => {
            f.push("atomic_op", r.op.to_string());
            f.push("request_id", r.request_id);
            f.push("atomic_stag", r.stag);
            f.push("atomic_to", r.to);
            f.push("add_swap_data", r.add_swap_data);
            f.push("add_swap_mask", r.add_swap_mask);
            f.push("compare_data", r.compare_data);
            f.push("compare_mask", r.compare_mask);
        }
        Header::AtomicResponse { response: r, .. } => {
            f.push("request_id", r.request_id);
            f.push("original_value", r.original_value);
        }
    }
    f.push("payload_length", payload_len);
}

/// Fields of a ULPDU that is not valid DDP/RDMAP.
pub(crate) fn decode_error_fields(f: &mut Fields, e: &DecodeError) {
    match e {
        DecodeError::Ddp(d) => f.push("error", variant_name(d)),
        e => f.push("error", variant_name(e)),
    }
    term_cause_fields(f, e.term_cause());
}

fn fpdu_fields(f: &mut Fields, r: &FpduRecord) {
    f.push("mpa_ulpdu_length", r.ulpdu_len);
    f.push("fpdu_wire_length", r.wire_len);
    f.push("markers", r.markers);
    f.push(
        "crc",
        match r.crc {
            CrcStatus::Good => "good",
            CrcStatus::NotNegotiated { .. } => "not negotiated",
        },
    );
    f.push("pad_nonzero", r.nonzero_pad);
    if r.p2p_rtr {
        f.push("p2p_rtr", true);
    }
    match &r.message {
        Ok(h) => header_fields(f, h, r.payload_len),
        Err(e) => {
            if let Some(h) = &r.ddp_header {
                ddp_fields(f, h);
                let ctrl = match h {
                    ddp::Header::Tagged(t) => t.rsvd_ulp,
                    ddp::Header::Untagged(u) => u.rsvd_ulp[0],
                };
                f.push("rdmap_version", ctrl >> 6);
                f.push("opcode", ctrl & 0x0f);
            }
            decode_error_fields(f, e);
        }
    }
    if let Some(l) = r.low_bit_first {
        f.push("nonconformant", "terminate control reserved bits set");
        f.push("low_bit_first_cause", l.cause.to_string());
        f.push("low_bit_first_m", l.m);
        f.push("low_bit_first_d", l.d);
        f.push("low_bit_first_r", l.r);
        f.push("rfc", "RFC 5040 §4.8");
    }
}

fn describe_fpdu(r: &FpduRecord) -> String {
    let text = match &r.message {
        Ok(h) => {
            let mut t = describe_header(h, r.payload_len);
            if r.p2p_rtr {
                t.push_str("  [P2P RTR]");
            }
            if let Some(l) = &r.low_bit_first {
                let c = l.control;
                let _ = write!(
                    t,
                    "  [nonconformant Terminate Control {:02x} {:02x} {:02x} {:02x}: reserved bits set; \
                     read with Layer/EType and M/D/R laid out from the low bits it is {} M{} D{} R{}]",
                    c[0],
                    c[1],
                    c[2],
                    c[3],
                    l.cause,
                    u8::from(l.m),
                    u8::from(l.d),
                    u8::from(l.r)
                );
            }
            t
        }
        Err(e) => format!(
            "invalid DDP/RDMAP segment ({} octets): {e} — Terminate {}",
            r.ulpdu_len,
            e.term_cause()
        ),
    };
    let crc = match r.crc {
        CrcStatus::Good => "crc ok",
        CrcStatus::NotNegotiated { .. } => "no crc",
    };
    format!(
        "{text}  [fpdu {} B{}, {crc}{}]",
        r.wire_len,
        if r.markers > 0 {
            format!(", {} marker(s)", r.markers)
        } else {
            String::new()
        },
        if r.nonzero_pad { ", pad not zero" } else { "" }
    )
}

/// One-line description of an MPA Request or Reply.
pub fn describe_frame(f: &ConnFrame) -> String {
    let mut t = format!(
        "MPA {}  rev {}  M{} C{} R{} H{}",
        match f.kind {
            FrameKind::Request => "Request",
            FrameKind::Reply => "Reply  ",
        },
        f.revision,
        u8::from(f.markers),
        u8::from(f.crc),
        u8::from(f.reject),
        u8::from(f.enhanced_flag)
    );
    if let Some(e) = f.enhanced {
        let _ = write!(
            t,
            "  IRD {} ORD {}  P2P {}  RTR {}",
            e.ird,
            e.ord,
            u8::from(e.p2p),
            describe_rtr(&e.rtr)
        );
    }
    let _ = write!(t, "  private data {} B", f.private_data.len());
    t
}

/// RTR types of a set, `write+read+send` or `-`.
pub fn describe_rtr(set: &RtrSet) -> String {
    let names: Vec<&str> = [(set.write, "write"), (set.read, "read"), (set.send, "send")]
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, n)| *n)
        .collect();
    if names.is_empty() {
        "-".into()
    } else {
        names.join("+")
    }
}

fn last_flag(last: bool) -> &'static str {
    if last { " L" } else { "" }
}

/// One-line description of a decoded DDP/RDMAP message.
pub fn describe_message(m: &Message<'_>) -> String {
    describe_header(&m.header, m.payload.len())
}

/// One-line description of a DDP/RDMAP header followed by `len` octets of payload.
pub fn describe_header(h: &Header, len: usize) -> String {
    match h {
        Header::RdmaWrite { last, stag, to } => format!(
            "RDMA Write          STag {stag:#010x} TO {to:#x} len {len}{}",
            last_flag(*last)
        ),
        Header::ReadResponse { last, stag, to } => format!(
            "RDMA Read Response  STag {stag:#010x} TO {to:#x} len {len}{}",
            last_flag(*last)
        ),
        Header::ReadRequest { msn, request: r } => format!(
            "RDMA Read Request   MSN {msn} sink {:#010x}@{:#x} size {} source {:#010x}@{:#x}",
            r.sink_stag, r.sink_to, r.size, r.source_stag, r.source_to
        ),
        Header::Send {
            solicited_event: _,
            invalidate_stag,
            last,
            msn,
            mo,
        } => {
            let mut t = format!(
                "{:<19} MSN {msn} MO {mo} len {len}{}",
                h.opcode().to_string(),
                last_flag(*last)
            );
            if let Some(s) = invalidate_stag {
                let _ = write!(t, " invalidate STag {s:#010x}");
            }
            t
        }
        Header::Terminate { msn, terminate } => {
            let mut t = format!(
                "Terminate           MSN {msn} {}  hdrct M{} D{} R{}",
                terminate.cause,
                u8::from(terminate.m),
                u8::from(terminate.d),
                u8::from(terminate.r)
            );
            if terminate.m || terminate.d {
                let _ = write!(t, " segment length {}", terminate.ddp_segment_length);
            }
            if let Some(h) = &terminate.ddp_header {
                match h.parse() {
                    Ok(ddp::Header::Tagged(th)) => {
                        let _ = write!(
                            t,
                            "  copied DDP: tagged STag {:#010x} TO {:#x}",
                            th.stag, th.to
                        );
                    }
                    Ok(ddp::Header::Untagged(u)) => {
                        let _ = write!(
                            t,
                            "  copied DDP: untagged QN {} MSN {} MO {}",
                            u.qn, u.msn, u.mo
                        );
                    }
                    Err(_) => {
                        let _ = write!(t, "  copied DDP header unparsable");
                    }
                }
                if let Some(op) = h.opcode() {
                    let _ = write!(t, " ({op})");
                }
            }
            if let Some(r) = &terminate.rdma_header {
                let _ = write!(
                    t,
                    "  copied Read Request: sink {:#010x}@{:#x} size {} source {:#010x}@{:#x}",
                    r.sink_stag, r.sink_to, r.size, r.source_stag, r.source_to
                );
            }
            t
        }
        Header::ImmediateData {
            solicited_event: _,
            msn,
            data,
        } => format!(
            "{:<19} MSN {msn} data {:#018x}",
            h.opcode().to_string(),
            u64::from_be_bytes(*data)
        ),
        Header::AtomicRequest { msn, request: r } => format!(
            "Atomic Request      MSN {msn} {:?} id {} STag {:#010x} TO {:#x} add/swap {:#x} mask {:#x} compare {:#x} mask {:#x}",
            r.op,
            r.request_id,
            r.stag,
            r.to,
            r.add_swap_data,
            r.add_swap_mask,
            r.compare_data,
            r.compare_mask
        ),
        Header::AtomicResponse { msn, response: r } => format!(
            "Atomic Response     MSN {msn} id {} original {:#x}",
            r.request_id, r.original_value
        ),
    }
}
