//! JSON Lines output of a decode (`softrnic decode --json`): one object per record, then one
//! summary object per capture.
//!
//! A record line: `{"type":"record","frame":N,"timestamp":SECONDS,"direction":"I>R",
//! "connection":ID,"offset":N,"layer":"rdmap","verdict":"info","text":"...","fields":{...}}`
//! (SCTP lines name an `association` instead of a `connection` and have no `offset`). The
//! summary: `{"type":"summary","file":...,"connections":N,"mpa_connections":N,"fpdus":N,
//! "crc_good":N,"crc_bad":N,"errors":N,"warnings":N,"opcodes":[{"code":N,"name":"...",
//! "count":N}],"sctp":{...}}`; its `opcodes` and `sctp.chunks` hold what `--counts` prints.

use std::io::{self, Write};

use serde::Serialize;

use crate::record::{Fields, Layer};
use crate::sctp_decode::{Line, chunk_name};
use crate::{ConnStatus, DecodeOptions, Dir, Event, EventKind, Report, SctpOptions};

/// One record line.
#[derive(Debug, Serialize)]
pub struct JsonRecord<'a> {
    /// Always `"record"`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// Capture frame number.
    pub frame: u64,
    /// Capture timestamp, seconds.
    pub timestamp: f64,
    /// `"I>R"` or `"R>I"`, absent for SCTP packets no association holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub direction: Option<&'static str>,
    /// TCP connection number.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connection: Option<usize>,
    /// SCTP association number.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub association: Option<usize>,
    /// Offset in the direction's TCP stream.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    /// Layer.
    pub layer: &'static str,
    /// `"info"`, `"warning"` or `"error"`.
    pub verdict: &'static str,
    /// The text line.
    pub text: &'a str,
    /// Decoded fields.
    pub fields: Fields,
}

/// One per-opcode or per-chunk-type count.
#[derive(Debug, Serialize)]
pub struct Count {
    /// Opcode or chunk type.
    pub code: u8,
    /// Its name.
    pub name: &'static str,
    /// How many.
    pub count: u64,
}

/// SCTP part of the summary.
#[derive(Debug, Serialize)]
pub struct SctpSummary {
    /// SCTP packets.
    pub packets: u64,
    /// Of which over UDP.
    pub udp_packets: u64,
    /// Associations.
    pub associations: usize,
    /// Errors.
    pub errors: u64,
    /// Warnings.
    pub warnings: u64,
    /// Chunks by type.
    pub chunks: Vec<Count>,
}

/// The summary line of a capture.
#[derive(Debug, Serialize)]
pub struct Summary<'a> {
    /// Always `"summary"`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// Capture file.
    pub file: &'a str,
    /// Frames in the capture.
    pub frames: usize,
    /// TCP connections.
    pub connections: usize,
    /// Of which MPA.
    pub mpa_connections: usize,
    /// FPDUs (both directions, bad CRCs included).
    pub fpdus: u64,
    /// FPDUs with a good CRC.
    pub crc_good: u64,
    /// FPDUs with a bad CRC.
    pub crc_bad: u64,
    /// Errors (TCP connections).
    pub errors: u64,
    /// Warnings (TCP connections).
    pub warnings: u64,
    /// RDMAP messages by opcode.
    pub opcodes: Vec<Count>,
    /// SCTP, when the capture holds any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sctp: Option<SctpSummary>,
}

fn arrow(d: Dir) -> &'static str {
    match d {
        Dir::ToResponder => "I>R",
        Dir::ToInitiator => "R>I",
    }
}

fn line(out: &mut dyn Write, v: &impl Serialize) -> io::Result<()> {
    serde_json::to_writer(&mut *out, v)?;
    out.write_all(b"\n")
}

/// The record line of a TCP event.
pub fn tcp_record(conn: usize, e: &Event) -> JsonRecord<'_> {
    JsonRecord {
        kind: "record",
        frame: e.frame,
        timestamp: e.timestamp.as_secs_f64(),
        direction: Some(arrow(e.dir)),
        connection: Some(conn),
        association: None,
        offset: Some(e.offset),
        layer: e.layer().name(),
        verdict: e.kind.name(),
        text: &e.text,
        fields: e.fields(),
    }
}

/// The summary of a report.
pub fn summary<'a>(name: &'a str, report: &Report) -> Summary<'a> {
    let c = &report.connections;
    let sctp = &report.sctp;
    Summary {
        kind: "summary",
        file: name,
        frames: report.frames,
        connections: c.len(),
        mpa_connections: report.mpa_connections().count(),
        fpdus: c.iter().map(|c| c.fpdus[0] + c.fpdus[1]).sum(),
        crc_good: c.iter().map(|c| c.crc_good).sum(),
        crc_bad: c.iter().map(|c| c.crc_bad).sum(),
        errors: report.errors(),
        warnings: c.iter().map(|c| c.warnings).sum(),
        opcodes: report
            .counts()
            .into_iter()
            .map(|(op, n)| Count {
                code: op.code(),
                name: op.name(),
                count: n,
            })
            .collect(),
        sctp: (!sctp.is_empty()).then(|| SctpSummary {
            packets: sctp.packets,
            udp_packets: sctp.udp_packets,
            associations: sctp.associations.len(),
            errors: sctp.errors(),
            warnings: sctp.warnings(),
            chunks: sctp
                .chunk_counts()
                .into_iter()
                .map(|(t, n)| Count {
                    code: t,
                    name: chunk_name(t),
                    count: n,
                })
                .collect(),
        }),
    }
}

/// Prints a report as JSON Lines: every record of the selected MPA connections and SCTP
/// associations in output order, then the summary.
pub fn print_report(
    name: &str,
    report: &Report,
    opts: &DecodeOptions,
    sctp_opts: &SctpOptions,
    out: &mut dyn Write,
) -> io::Result<()> {
    for c in &report.connections {
        if opts.conn.is_some_and(|n| n != c.id)
            || matches!(c.status, ConnStatus::NoPayload | ConnStatus::NotMpa)
        {
            continue;
        }
        for e in &c.events {
            line(out, &tcp_record(c.id, e))?;
        }
    }
    for (frame, ts, text) in &report.sctp.orphans {
        line(
            out,
            &JsonRecord {
                kind: "record",
                frame: *frame,
                timestamp: ts.as_secs_f64(),
                direction: None,
                connection: None,
                association: None,
                offset: None,
                layer: Layer::Sctp.name(),
                verdict: EventKind::Error.name(),
                text,
                fields: Fields::default(),
            },
        )?;
    }
    for a in &report.sctp.associations {
        if sctp_opts.assoc.is_some_and(|n| n != a.id) {
            continue;
        }
        for e in &a.events {
            for Line { kind, text, record } in &e.lines {
                let mut fields = Fields::default();
                fields.push("src", e.src.to_string());
                fields.push("dst", e.dst.to_string());
                fields.push("vtag", e.vtag);
                fields.0.extend(record.fields().0);
                line(
                    out,
                    &JsonRecord {
                        kind: "record",
                        frame: e.frame,
                        timestamp: e.timestamp.as_secs_f64(),
                        direction: Some(arrow(e.dir)),
                        connection: None,
                        association: Some(a.id),
                        offset: None,
                        layer: record.layer().name(),
                        verdict: kind.name(),
                        text,
                        fields,
                    },
                )?;
            }
        }
    }
    line(out, &summary(name, report))
}
