//! The iWARP decoder for packet captures, behind `softrnic decode`: pcap/pcapng reading
//! ([`capture`]), TCP reassembly ([`tcp`]), MPA/DDP/RDMAP and DDP over SCTP
//! ([`sctp_decode`]).
//!
//! For every TCP connection in a capture ([`crate::tcp`]) the decoder
//!
//! 1. finds the MPA Request at the start of one direction (that side is the initiator) and the
//!    MPA Reply at the start of the other, and parses both ([`mpa::ConnFrame`]);
//! 2. derives the session the two frames establish, with the initiator's own negotiation rules
//!    ([`mpa::complete`]) run under the most permissive local settings, so that any rule the
//!    Reply breaks (for instance a P2P flag not echoed, or several RTR types chosen) shows up
//!    as a setup error rather than being papered over;
//! 3. runs an [`mpa::Deframer`] over each direction from the first octet after its MPA frame,
//!    with that direction's marker setting and the negotiated CRC, and decodes each ULPDU as
//!    DDP + RDMAP ([`rdmap::Message::parse`]).
//!
//! Each decoded FPDU is attributed to the capture frame that carried its last octet (the frame
//! in which it became complete), so the output interleaves both directions in capture order.
//!
//! Errors (a bad CRC, a broken FPDU framing or marker, a ULPDU that is not valid DDP/RDMAP, an
//! MPA frame or negotiation that breaks the RFCs, data sent before the MPA exchange allows it)
//! make the decode fail; observations that are legal for a receiver to accept (non-zero pad
//! octets, a capture that misses bytes or ends inside an FPDU) are reported as warnings.
//!
//! Every line of the output is an [`Event`] (or an SCTP [`sctp_decode::Line`]) holding a typed
//! [`Record`]: the protocol crates' own types (the MPA frame, the DDP/RDMAP header, the
//! deframing error, ...), its [`Layer`], its verdict ([`EventKind`]) and its named
//! [`Fields`]. The text printer prints [`Record::describe`]; the JSON Lines printer
//! ([`json`], `softrnic decode --json`) prints layer, verdict, text and fields.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use mpa::{ConnFrame, CrcPolicy, CrcStatus, Deframer, FrameError, FrameKind, RtrSet, RxConfig};
use rdmap::Opcode;

use crate::capture::{CaptureError, Frame};
use crate::tcp::{Connection, Skipped, Stream};

pub mod capture;
pub mod json;
pub mod record;
pub mod sctp_decode;
pub mod tcp;
pub mod terminate;

use record::describe_rtr;
pub use record::{
    Fields, FpduRecord, Layer, LowBitFirst, Record, SetupIssue, Value, describe_header,
    describe_message,
};
pub use sctp_decode::{SctpOptions, SctpRecord, SctpReport};

/// What `decode` prints.
#[derive(Debug, Clone, Default)]
pub struct DecodeOptions {
    /// One line per MPA frame and FPDU.
    pub frames: bool,
    /// A summary per connection and per capture.
    pub summary: bool,
    /// Only per-opcode totals, `0xNN name count`.
    pub counts: bool,
    /// Hex dump of every ULPDU.
    pub hex: bool,
    /// Only this connection.
    pub conn: Option<usize>,
    /// JSON Lines instead of text: one object per record, then a summary ([`json`]).
    pub json: bool,
}

/// Direction of a byte stream within an MPA connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Dir {
    /// Initiator → responder.
    ToResponder,
    /// Responder → initiator.
    ToInitiator,
}

impl Dir {
    fn arrow(self) -> &'static str {
        match self {
            Dir::ToResponder => "I>R",
            Dir::ToInitiator => "R>I",
        }
    }
}

/// What became of a TCP connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConnStatus {
    /// No payload in either direction (refused or empty connection).
    NoPayload,
    /// Neither direction begins with an MPA Request.
    NotMpa,
    /// An MPA Request without a Reply in the capture.
    RequestOnly,
    /// The responder rejected the Request (R = 1).
    Rejected,
    /// The MPA exchange failed: a frame is malformed or the Reply breaks a negotiation rule.
    SetupFailed,
    /// Full operation: FPDUs follow.
    Established,
}

impl ConnStatus {
    fn label(&self) -> &'static str {
        match self {
            ConnStatus::NoPayload => "no payload",
            ConnStatus::NotMpa => "not MPA",
            ConnStatus::RequestOnly => "request only",
            ConnStatus::Rejected => "rejected",
            ConnStatus::SetupFailed => "setup failed",
            ConnStatus::Established => "established",
        }
    }
}

/// One line of the per-frame output: where it is, and the typed [`Record`] of what was
/// decoded there.
#[derive(Debug, Clone)]
pub struct Event {
    /// Capture frame that completed it.
    pub frame: u64,
    /// That frame's timestamp.
    pub timestamp: Duration,
    /// Direction.
    pub dir: Dir,
    /// Offset of its first octet in the direction's TCP stream.
    pub offset: u64,
    /// Text of the line ([`Record::describe`]).
    pub text: String,
    /// Severity: the verdict ([`Record::verdict`]).
    pub kind: EventKind,
    /// The ULPDU, kept for `--hex`.
    pub ulpdu: Option<Vec<u8>>,
    /// What was decoded.
    pub record: Record,
}

impl Event {
    /// The layer the line is about.
    pub fn layer(&self) -> Layer {
        self.record.layer()
    }

    /// The decoded fields.
    pub fn fields(&self) -> Fields {
        self.record.fields()
    }
}

/// Severity of an [`Event`]: the verdict on a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// A decoded MPA frame or FPDU.
    Info,
    /// Legal but worth knowing.
    Warning,
    /// A protocol error.
    Error,
}

/// Everything decoded from one TCP connection.
#[derive(Debug, Clone)]
pub struct ConnReport {
    /// Connection number in the capture (1-based, order of first appearance).
    pub id: usize,
    /// MPA initiator (the TCP client when the connection is not MPA).
    pub initiator: SocketAddr,
    /// MPA responder.
    pub responder: SocketAddr,
    /// Outcome.
    pub status: ConnStatus,
    /// The MPA Request.
    pub request: Option<ConnFrame>,
    /// The MPA Reply.
    pub reply: Option<ConnFrame>,
    /// The session the frames establish, seen from the initiator.
    pub session: Option<mpa::Session>,
    /// Lines in capture order.
    pub events: Vec<Event>,
    /// RDMAP messages (segments) decoded, by opcode.
    pub counts: BTreeMap<Opcode, u64>,
    /// FPDUs decoded per direction (I>R, R>I).
    pub fpdus: [u64; 2],
    /// FPDUs whose CRC was checked and good.
    pub crc_good: u64,
    /// FPDUs with a bad CRC.
    pub crc_bad: u64,
    /// Errors found.
    pub errors: u64,
    /// Warnings given.
    pub warnings: u64,
}

impl ConnReport {
    fn push(&mut self, ev: Event) {
        match ev.kind {
            EventKind::Error => self.errors += 1,
            EventKind::Warning => self.warnings += 1,
            EventKind::Info => {}
        }
        self.events.push(ev);
    }
}

/// The decode of one capture.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Frames in the capture.
    pub frames: usize,
    /// Every TCP connection.
    pub connections: Vec<ConnReport>,
    /// Frames that held no TCP.
    pub skipped: Skipped,
    /// The SCTP associations (raw IP and UDP-encapsulated).
    pub sctp: SctpReport,
}

impl Report {
    /// Whether any TCP connection or SCTP association had a protocol error.
    pub fn has_errors(&self) -> bool {
        self.errors() > 0 || self.sctp.errors() > 0
    }

    /// Protocol errors in all connections.
    pub fn errors(&self) -> u64 {
        self.connections.iter().map(|c| c.errors).sum()
    }

    /// Connections that carried MPA.
    pub fn mpa_connections(&self) -> impl Iterator<Item = &ConnReport> {
        self.connections
            .iter()
            .filter(|c| !matches!(c.status, ConnStatus::NoPayload | ConnStatus::NotMpa))
    }

    /// Per-opcode totals over all connections.
    pub fn counts(&self) -> BTreeMap<Opcode, u64> {
        let mut total = BTreeMap::new();
        for c in &self.connections {
            for (op, n) in &c.counts {
                *total.entry(*op).or_insert(0) += n;
            }
        }
        total
    }
}

/// Decodes a capture file and prints what `opts` asks for to `out`.
pub fn decode_file(
    path: &Path,
    opts: &DecodeOptions,
    out: &mut dyn Write,
) -> Result<Report, CaptureError> {
    decode_file_with(path, opts, &SctpOptions::default(), out)
}

/// [`decode_file`] with SCTP options (UDP encapsulation ports, association filter).
pub fn decode_file_with(
    path: &Path,
    opts: &DecodeOptions,
    sctp_opts: &SctpOptions,
    out: &mut dyn Write,
) -> Result<Report, CaptureError> {
    // The frames before a damage (a last frame cut short) are decoded and printed, then the
    // damage is reported (as tshark does).
    let (frames, damage) = capture::read_file_lenient(path)?;
    let report = decode_frames_with(&frames, sctp_opts);
    let name = path.display().to_string();
    // A closed pipe (e.g. `| head`) is not an error of the decode.
    let _ = print_report_with(&name, &report, opts, sctp_opts, out);
    match damage {
        Some(e) => Err(e),
        None => Ok(report),
    }
}

/// Decodes captured frames (SCTP over UDP recognised on port 9899).
pub fn decode_frames(frames: &[Frame]) -> Report {
    decode_frames_with(frames, &SctpOptions::default())
}

/// Decodes captured frames with SCTP options.
pub fn decode_frames_with(frames: &[Frame], sctp_opts: &SctpOptions) -> Report {
    let reasm = tcp::reassemble(frames);
    let connections = reasm.connections.iter().map(decode_connection).collect();
    Report {
        frames: frames.len(),
        connections,
        skipped: reasm.skipped,
        sctp: sctp_decode::decode_frames(frames, sctp_opts),
    }
}

const REQ_KEY: &[u8] = mpa::frame::REQUEST_KEY;

fn starts_like_request(data: &[u8]) -> bool {
    let n = data.len().min(REQ_KEY.len());
    n > 0 && data[..n] == REQ_KEY[..n]
}

/// Decodes one TCP connection.
pub fn decode_connection(conn: &Connection) -> ConnReport {
    // The side whose stream opens with the Request key is the initiator.
    let (i2r, r2i, initiator, responder) = if starts_like_request(&conn.to_server.data)
        || !starts_like_request(&conn.to_client.data)
    {
        (&conn.to_server, &conn.to_client, conn.client, conn.server)
    } else {
        (&conn.to_client, &conn.to_server, conn.server, conn.client)
    };
    let mut rep = ConnReport {
        id: conn.id,
        initiator,
        responder,
        status: ConnStatus::NotMpa,
        request: None,
        reply: None,
        session: None,
        events: Vec::new(),
        counts: BTreeMap::new(),
        fpdus: [0; 2],
        crc_good: 0,
        crc_bad: 0,
        errors: 0,
        warnings: 0,
    };
    if i2r.data.is_empty() && r2i.data.is_empty() {
        rep.status = if i2r.hole.is_some() || r2i.hole.is_some() {
            ConnStatus::NotMpa
        } else {
            ConnStatus::NoPayload
        };
        return rep;
    }
    if !starts_like_request(&i2r.data) {
        return rep;
    }
    decode_mpa(&mut rep, i2r, r2i);
    for (dir, s) in [(Dir::ToResponder, i2r), (Dir::ToInitiator, r2i)] {
        if let Some((at, len)) = s.hole {
            rep.push(event_at(s, dir, at, Record::CaptureGap { offset: at, len }));
        }
    }
    rep.events
        .sort_by_key(|e| (e.frame, e.dir == Dir::ToInitiator, e.offset));
    rep
}

fn event_at(s: &Stream, dir: Dir, offset: u64, record: Record) -> Event {
    // Attribute to the frame carrying the octet before `offset` when `offset` is the end.
    let o = s
        .origin_of(offset)
        .or_else(|| s.origin_of(offset.saturating_sub(1)));
    Event {
        frame: o.map_or(0, |o| o.frame),
        timestamp: o.map_or(Duration::ZERO, |o| o.timestamp),
        dir,
        offset,
        text: record.describe(),
        kind: record.verdict(),
        ulpdu: None,
        record,
    }
}

/// Parses an MPA frame at the start of `s`; on success returns it and its length.
fn parse_frame(
    rep: &mut ConnReport,
    s: &Stream,
    dir: Dir,
    expected: FrameKind,
) -> Option<(ConnFrame, usize)> {
    match ConnFrame::parse(&s.data) {
        Ok((f, used)) => {
            // Attributed to the frame carrying its last octet, listed at its first.
            let mut ev = event_at(s, dir, used as u64 - 1, Record::MpaFrame(f.clone()));
            ev.offset = 0;
            rep.push(ev);
            Some((f, used))
        }
        Err(FrameError::Truncated { needed }) => {
            rep.push(event_at(
                s,
                dir,
                s.data.len() as u64,
                Record::MpaIncomplete {
                    expected,
                    have: s.data.len(),
                    needed,
                },
            ));
            None
        }
        Err(error) => {
            rep.push(event_at(
                s,
                dir,
                0,
                Record::MpaMalformed { expected, error },
            ));
            None
        }
    }
}

fn decode_mpa(rep: &mut ConnReport, i2r: &Stream, r2i: &Stream) {
    rep.status = ConnStatus::SetupFailed;
    let Some((request, req_len)) = parse_frame(rep, i2r, Dir::ToResponder, FrameKind::Request)
    else {
        if rep.errors == 0 {
            rep.status = ConnStatus::RequestOnly;
        }
        return;
    };
    // The stream opens with the Request key (decode_connection checked), so this is a Request.
    rep.request = Some(request.clone());
    if r2i.data.is_empty() {
        rep.status = ConnStatus::RequestOnly;
        if i2r.data.len() > req_len {
            rep.push(event_at(
                i2r,
                Dir::ToResponder,
                req_len as u64,
                Record::MpaSetup(SetupIssue::DataBeforeReply {
                    octets: i2r.data.len() - req_len,
                }),
            ));
        }
        return;
    }
    let Some((reply, rep_len)) = parse_frame(rep, r2i, Dir::ToInitiator, FrameKind::Reply) else {
        return;
    };
    rep.reply = Some(reply.clone());
    if reply.kind != FrameKind::Reply {
        rep.push(event_at(
            r2i,
            Dir::ToInitiator,
            0,
            Record::MpaSetup(SetupIssue::ReplyWithRequestKey),
        ));
        return;
    }
    let observer = observer_config(&request);
    let session = match mpa::complete(&observer, &request, &reply) {
        Ok(s) => s,
        Err(mpa::NegotiationError::Rejected { .. }) => {
            rep.status = ConnStatus::Rejected;
            for (dir, s, len) in [
                (Dir::ToResponder, i2r, req_len),
                (Dir::ToInitiator, r2i, rep_len),
            ] {
                if s.data.len() > len {
                    rep.push(event_at(
                        s,
                        dir,
                        len as u64,
                        Record::MpaSetup(SetupIssue::DataAfterReject {
                            octets: s.data.len() - len,
                        }),
                    ));
                }
            }
            return;
        }
        Err(e) => {
            rep.push(event_at(
                r2i,
                Dir::ToInitiator,
                0,
                Record::MpaSetup(SetupIssue::Negotiation(e)),
            ));
            return;
        }
    };
    if let (Some(req), Some(rpl)) = (request.enhanced, reply.enhanced)
        && rpl.ord > req.ird
    {
        rep.push(event_at(
            r2i,
            Dir::ToInitiator,
            0,
            Record::MpaSetup(SetupIssue::OrdExceedsIrd {
                ord: rpl.ord,
                ird: req.ird,
            }),
        ));
    }
    rep.status = ConnStatus::Established;
    rep.session = Some(session.clone());
    decode_fpdus(rep, i2r, Dir::ToResponder, req_len, &session);
    decode_fpdus(rep, r2i, Dir::ToInitiator, rep_len, &session);
}

/// Local settings under which the initiator's rules accept every Reply the RFCs allow.
fn observer_config(request: &ConnFrame) -> mpa::Config {
    let enhanced = request.enhanced;
    mpa::Config {
        revision: request.revision.clamp(1, 2),
        accept_rev1: true,
        crc: CrcPolicy::Accept,
        markers_rx: request.markers,
        markers_tx: true,
        enhanced: enhanced.is_some() && request.revision == 2,
        ird: enhanced.map_or(0, |e| e.ird),
        ord: enhanced.map_or(0, |e| e.ord),
        ird_max: mpa::frame::IRD_ORD_MAX,
        relaxed_ird_ord: true,
        p2p: enhanced.is_some_and(|e| e.p2p),
        rtr_supported: RtrSet {
            send: true,
            write: true,
            read: true,
        },
        rtr_preferred: None,
        private_data: Vec::new(),
    }
}

fn decode_fpdus(rep: &mut ConnReport, s: &Stream, dir: Dir, start: usize, session: &mpa::Session) {
    let markers = match dir {
        Dir::ToResponder => session.markers_tx,
        Dir::ToInitiator => session.markers_rx,
    };
    let Some(data) = s.data.get(start..) else {
        return;
    };
    if data.is_empty() {
        return;
    }
    let mut deframer = Deframer::new(RxConfig::new(session.crc, markers));
    deframer.push(data);
    let base = start as u64;
    let mut first = true;
    let mut nonzero_pad = 0u64;
    let dir_idx = usize::from(dir == Dir::ToInitiator);
    for item in &mut deframer {
        match item {
            Ok(fpdu) => {
                rep.fpdus[dir_idx] += 1;
                let offset = base + fpdu.stream_offset;
                let last = offset + fpdu.wire_len as u64 - 1;
                if fpdu.crc == CrcStatus::Good {
                    rep.crc_good += 1;
                }
                if fpdu.nonzero_pad {
                    nonzero_pad += 1;
                }
                let rtr = first && dir == Dir::ToResponder && session.p2p;
                first = false;
                let record = FpduRecord::new(&fpdu, rtr);
                if let Ok(h) = &record.message {
                    *rep.counts.entry(h.opcode()).or_insert(0) += 1;
                }
                let mut ev = event_at(s, dir, last, Record::Fpdu(record));
                ev.offset = offset;
                ev.ulpdu = Some(fpdu.ulpdu);
                rep.push(ev);
            }
            Err(e) => {
                if matches!(e, mpa::DeframeError::Crc { .. }) {
                    rep.crc_bad += 1;
                    rep.fpdus[dir_idx] += 1;
                }
                let offset = base + e.offset();
                let mut ev = event_at(s, dir, offset, Record::Deframe(e));
                ev.offset = offset;
                rep.push(ev);
            }
        }
    }
    if nonzero_pad > 0 {
        let end = s.data.len() as u64;
        rep.push(event_at(
            s,
            dir,
            end,
            Record::NonzeroPad { fpdus: nonzero_pad },
        ));
    }
    if deframer.in_progress() && !deframer.is_failed() {
        let end = s.data.len() as u64;
        let octets = deframer.ready_len().max(1);
        rep.push(event_at(s, dir, end, Record::EndsInsideFpdu { octets }));
    }
}

fn counts_line(counts: &BTreeMap<Opcode, u64>) -> String {
    if counts.is_empty() {
        return "-".into();
    }
    counts
        .iter()
        .map(|(op, n)| format!("{op} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn hexdump(out: &mut dyn Write, bytes: &[u8]) -> io::Result<()> {
    for (i, chunk) in bytes.chunks(16).enumerate() {
        let hex: Vec<String> = chunk.iter().map(|b| format!("{b:02x}")).collect();
        let ascii: String = chunk
            .iter()
            .map(|&b| {
                if b.is_ascii_graphic() || b == b' ' {
                    b as char
                } else {
                    '.'
                }
            })
            .collect();
        writeln!(
            out,
            "            {:04x}  {:<47}  {ascii}",
            i * 16,
            hex.join(" ")
        )?;
    }
    Ok(())
}

fn yes_no(b: bool) -> &'static str {
    if b { "on" } else { "off" }
}

/// Prints a report.
pub fn print_report(
    name: &str,
    report: &Report,
    opts: &DecodeOptions,
    out: &mut dyn Write,
) -> io::Result<()> {
    print_report_with(name, report, opts, &SctpOptions::default(), out)
}

/// Prints a report: the TCP/MPA part, then the SCTP part when the capture has SCTP.
pub fn print_report_with(
    name: &str,
    report: &Report,
    opts: &DecodeOptions,
    sctp_opts: &SctpOptions,
    out: &mut dyn Write,
) -> io::Result<()> {
    if opts.json {
        return json::print_report(name, report, opts, sctp_opts, out);
    }
    if opts.counts {
        for (op, n) in report.counts() {
            let label = op.to_string().replace(' ', "-");
            writeln!(out, "{:#04x} {label} {n}", op.code())?;
        }
        return sctp_decode::print_counts(&report.sctp, out);
    }
    writeln!(out, "{name}: {} frames", report.frames)?;
    // A capture of SCTP only gets no (empty) TCP summary.
    let sctp_only = report.connections.is_empty() && !report.sctp.is_empty();
    if !sctp_only {
        print_tcp(name, report, opts, out)?;
    }
    sctp_decode::print_report(
        name,
        &report.sctp,
        sctp_opts,
        opts.frames,
        opts.summary,
        out,
    )
}

fn print_tcp(
    name: &str,
    report: &Report,
    opts: &DecodeOptions,
    out: &mut dyn Write,
) -> io::Result<()> {
    let selected = |c: &&ConnReport| opts.conn.is_none_or(|n| n == c.id);
    if opts.frames {
        for c in report.connections.iter().filter(selected) {
            if matches!(c.status, ConnStatus::NoPayload | ConnStatus::NotMpa) {
                continue;
            }
            writeln!(
                out,
                "\nconnection {}: {} (initiator) -> {} (responder)",
                c.id, c.initiator, c.responder
            )?;
            let t0 = c.events.first().map_or(Duration::ZERO, |e| e.timestamp);
            for e in &c.events {
                let mark = match e.kind {
                    EventKind::Info => "",
                    EventKind::Warning => "WARNING: ",
                    EventKind::Error => "ERROR: ",
                };
                writeln!(
                    out,
                    "  frame {:>6} {:>+11.6} {}  {mark}{}",
                    e.frame,
                    e.timestamp.saturating_sub(t0).as_secs_f64(),
                    e.dir.arrow(),
                    e.text
                )?;
                if opts.hex
                    && let Some(u) = &e.ulpdu
                {
                    hexdump(out, u)?;
                }
            }
        }
    }
    if !opts.summary {
        return Ok(());
    }
    writeln!(out, "\nsummary of {name}:")?;
    writeln!(
        out,
        "{:>4}  {:<45} {:<13} {:>3} {:>4} {:>9} {:>11} {:>11} {:>9} {:>6} {:>6} {:>6}",
        "conn",
        "initiator -> responder",
        "status",
        "rev",
        "crc",
        "mkr I/R",
        "IRD/ORD I",
        "IRD/ORD R",
        "P2P/RTR",
        "fpdus",
        "crc ok",
        "errors"
    )?;
    for c in report.connections.iter().filter(selected) {
        let pair = format!("{} -> {}", c.initiator, c.responder);
        let (rev, crc, mkr, p2p) = match &c.session {
            Some(s) => (
                s.revision.to_string(),
                yes_no(s.crc).to_string(),
                format!("{}/{}", yes_no(s.markers_tx), yes_no(s.markers_rx)),
                match (s.p2p, s.rtr) {
                    (true, Some(t)) => format!("on/{}", describe_rtr(&RtrSet::only(t))),
                    (true, None) => "on/-".into(),
                    _ => "off".into(),
                },
            ),
            None => (
                c.request
                    .as_ref()
                    .map_or("-".into(), |r| r.revision.to_string()),
                "-".into(),
                "-".into(),
                "-".into(),
            ),
        };
        let irdord = |f: &Option<ConnFrame>| {
            f.as_ref()
                .and_then(|f| f.enhanced)
                .map_or("-".into(), |e| format!("{}/{}", e.ird, e.ord))
        };
        writeln!(
            out,
            "{:>4}  {:<45} {:<13} {:>3} {:>4} {:>9} {:>11} {:>11} {:>9} {:>6} {:>6} {:>6}",
            c.id,
            pair,
            c.status.label(),
            rev,
            crc,
            mkr,
            irdord(&c.request),
            irdord(&c.reply),
            p2p,
            c.fpdus[0] + c.fpdus[1],
            c.crc_good,
            c.errors
        )?;
        if !c.counts.is_empty() {
            writeln!(out, "{:>6}{}", "", counts_line(&c.counts))?;
        }
    }
    let mpa = report.mpa_connections().count();
    let fpdus: u64 = report
        .connections
        .iter()
        .map(|c| c.fpdus[0] + c.fpdus[1])
        .sum();
    let crc_good: u64 = report.connections.iter().map(|c| c.crc_good).sum();
    let crc_bad: u64 = report.connections.iter().map(|c| c.crc_bad).sum();
    let warnings: u64 = report.connections.iter().map(|c| c.warnings).sum();
    writeln!(
        out,
        "total: {} TCP connections, {mpa} MPA; {fpdus} FPDUs, CRC {crc_good} good / {crc_bad} bad; {} errors, {warnings} warnings",
        report.connections.len(),
        report.errors()
    )?;
    writeln!(out, "opcodes: {}", counts_line(&report.counts()))?;
    let sk = &report.skipped;
    let other = sk.not_tcp + sk.malformed + sk.unknown_link + sk.fragments;
    if other > 0 {
        writeln!(
            out,
            "frames without TCP: {} (not TCP {}, malformed {}, unknown link type {}, IP fragments {})",
            other, sk.not_tcp, sk.malformed, sk.unknown_link, sk.fragments
        )?;
    }
    Ok(())
}
