//! The decoder's typed records against the golden captures (tests/data/golden, see its
//! README): assertions on the protocol types and fields each line carries, not on its text.

use std::collections::BTreeMap;
use std::path::PathBuf;

use decode::sctp_decode::{ChunkInfo, Line};
use decode::{EventKind, FpduRecord, Layer, Record, Report, SctpRecord, Value, decode_frames};
use mpa::{CrcStatus, FrameKind};
use rdmap::{Header, Opcode, ProtectionCode, TermCause};

fn golden(name: &str) -> Report {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data/golden")
        .join(name);
    decode_frames(&decode::capture::read_file(&path).expect("capture reads"))
}

/// Every FPDU record of a report, with its connection number.
fn fpdus(r: &Report) -> Vec<(usize, &FpduRecord)> {
    r.connections
        .iter()
        .flat_map(|c| {
            c.events.iter().filter_map(move |e| match &e.record {
                Record::Fpdu(f) => Some((c.id, f)),
                _ => None,
            })
        })
        .collect()
}

/// Every event's kind and text are its record's verdict and description; every line's
/// fields are unique by name.
fn assert_consistent(r: &Report) {
    for c in &r.connections {
        for e in &c.events {
            assert_eq!(e.kind, e.record.verdict(), "{}", e.text);
            assert_eq!(e.text, e.record.describe());
            let f = e.fields();
            let mut names: Vec<&str> = f.iter().map(|(n, _)| n).collect();
            names.sort_unstable();
            names.dedup();
            assert_eq!(names.len(), f.0.len(), "{}: {f:?}", e.text);
        }
    }
    for a in &r.sctp.associations {
        for p in &a.events {
            for l in &p.lines {
                assert_eq!(l.kind, l.record.verdict());
                assert_eq!(l.text, l.record.describe());
            }
        }
    }
}

/// README: the MPA Request siw sends is rev 2, H set, IRD 1 ORD 1; siw answers a host
/// Request asking IRD/ORD 16/16 in kind.
#[test]
fn siw_mpa_request_carries_rfc6581_ird_ord() {
    let r = golden("siw-mpa-setup.pcap");
    assert_consistent(&r);
    let frames: Vec<(FrameKind, u8, bool, u16, u16)> = r
        .connections
        .iter()
        .flat_map(|c| &c.events)
        .filter_map(|e| match &e.record {
            Record::MpaFrame(f) => {
                let en = f.enhanced.expect("RFC 6581 enhanced data");
                Some((f.kind, f.revision, f.enhanced_flag, en.ird, en.ord))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        frames,
        [
            (FrameKind::Request, 2, true, 1, 1),
            (FrameKind::Request, 2, true, 1, 1),
            (FrameKind::Reply, 2, true, 16, 16),
            (FrameKind::Request, 2, true, 16, 16),
            (FrameKind::Reply, 2, true, 16, 16),
        ]
    );
    // The same through the named fields, as printers see them.
    let first = r.connections[0]
        .events
        .iter()
        .find(|e| matches!(e.record, Record::MpaFrame(_)))
        .unwrap();
    let f = first.fields();
    assert_eq!(first.layer(), Layer::Mpa);
    assert_eq!(f.get("frame_type"), Some(&Value::from("request")));
    assert_eq!(f.get("revision"), Some(&Value::Num(2)));
    assert_eq!(f.get("h"), Some(&Value::Bool(true)));
    assert_eq!(f.get("ird"), Some(&Value::Num(1)));
    assert_eq!(f.get("ord"), Some(&Value::Num(1)));
    assert_eq!(f.get("p2p"), Some(&Value::Bool(false)));
    assert_eq!(f.get("private_data_length"), Some(&Value::Num(0)));
}

/// README: rping -S 64 without CRC, then -S 2000 with CRC; the server's Read Requests ask
/// for the client's whole buffer, from the STag and offset the client advertised.
#[test]
fn rping_read_requests_and_crc() {
    let r = golden("siw-rping-crc.pcap");
    assert_consistent(&r);
    let all = fpdus(&r);
    let reads: Vec<(usize, u32, u32, u64)> = all
        .iter()
        .filter_map(|(c, f)| match f.message {
            Ok(Header::ReadRequest { msn, request }) => {
                Some((*c, msn, request.size, request.source_to))
            }
            _ => None,
        })
        .collect();
    let ids: Vec<usize> = r.mpa_connections().map(|c| c.id).collect();
    let [c1, c2] = ids[..] else {
        panic!("two MPA connections: {ids:?}")
    };
    assert_eq!(
        reads,
        [
            (c1, 1, 64, 0x1000_0000_0000),
            (c1, 2, 64, 0x1000_0000_0000),
            (c2, 1, 2000, 0x1000_0000_0000),
            (c2, 2, 2000, 0x1000_0000_0000),
        ]
    );
    // Every FPDU of the CRC connection has a good CRC, none of the other is checked.
    for (c, f) in &all {
        if *c == c2 {
            assert_eq!(f.crc, CrcStatus::Good);
        } else {
            assert!(matches!(f.crc, CrcStatus::NotNegotiated { .. }));
        }
    }
    let good = all.iter().filter(|(_, f)| f.crc == CrcStatus::Good).count() as u64;
    assert_eq!(good, r.connections.iter().map(|c| c.crc_good).sum::<u64>());
    // The Read Request's fields: DDP untagged on queue 1, opcode 1, sizes and STags.
    let ev = r
        .connections
        .iter()
        .flat_map(|c| &c.events)
        .find(|e| {
            matches!(
                e.record,
                Record::Fpdu(FpduRecord {
                    message: Ok(Header::ReadRequest { .. }),
                    ..
                })
            )
        })
        .unwrap();
    let f = ev.fields();
    assert_eq!(ev.layer(), Layer::Rdmap);
    assert_eq!(f.get("ddp_tagged"), Some(&Value::Bool(false)));
    assert_eq!(f.get("qn"), Some(&Value::Num(1)));
    assert_eq!(f.get("opcode"), Some(&Value::Num(1)));
    assert_eq!(f.get("read_size").and_then(Value::as_u64), Some(64));
    assert_eq!(
        f.get("sink_stag").and_then(Value::as_u64),
        Some(0x32ae_6100)
    );
    assert_eq!(
        f.get("source_stag").and_then(Value::as_u64),
        Some(0x1111_1100)
    );
    assert_eq!(f.get("crc").and_then(Value::as_str), Some("not negotiated"));
    // Per-opcode counts from the records equal the report's.
    let mut counts = BTreeMap::new();
    for (_, f) in &all {
        if let Ok(h) = &f.message {
            *counts.entry(h.opcode()).or_insert(0u64) += 1;
        }
    }
    assert_eq!(counts, r.counts());
    assert_eq!(counts[&Opcode::Send], 16);
}

/// README: siw lays the Terminate Control out from the low bits: `11 00 03 00` and
/// `11 01 03 00` for the DDP tagged errors, `10 00 07 00` and `10 01 07 00` for RDMAP
/// Remote Protection Invalid STag and Base or bounds. Each Terminate is a warning whose
/// record holds both readings.
#[test]
fn siw_terminates_low_bit_first() {
    let r = golden("lab-siw-terminate-low-bit-first.pcap");
    assert_consistent(&r);
    let terms: Vec<([u8; 4], TermCause, TermCause)> = r
        .connections
        .iter()
        .flat_map(|c| &c.events)
        .filter_map(|e| match &e.record {
            Record::Fpdu(FpduRecord {
                message: Ok(Header::Terminate { terminate, .. }),
                low_bit_first: Some(l),
                ..
            }) => {
                assert_eq!(e.kind, EventKind::Warning);
                assert!(l.m && l.d);
                Some((l.control, terminate.cause, l.cause))
            }
            _ => None,
        })
        .collect();
    assert_eq!(terms.len(), 4);
    let controls: Vec<[u8; 4]> = terms.iter().map(|t| t.0).collect();
    assert_eq!(
        controls,
        [
            [0x11, 0, 3, 0],
            [0x11, 1, 3, 0],
            [0x10, 0, 7, 0],
            [0x10, 1, 7, 0]
        ]
    );
    // As sent (RFC 5040 §4.8 layout): layer/type/code.
    let as_sent: Vec<(u8, u8, u8)> = terms.iter().map(|t| t.1.layer_etype_ecode()).collect();
    assert_eq!(as_sent, [(1, 1, 0), (1, 1, 1), (1, 0, 0), (1, 0, 1)]);
    // As meant: the DDP errors stay, the last two are RDMAP Remote Protection errors.
    assert_eq!(terms[0].2, terms[0].1);
    assert_eq!(
        terms[2].2,
        TermCause::protection(ProtectionCode::InvalidStag)
    );
    assert_eq!(
        terms[3].2,
        TermCause::protection(ProtectionCode::BaseOrBounds)
    );
    // Fields: the Terminate's code and the RFC clause it breaks.
    let ev = r
        .connections
        .iter()
        .flat_map(|c| &c.events)
        .find(|e| e.kind == EventKind::Warning)
        .unwrap();
    let f = ev.fields();
    assert_eq!(f.get("opcode"), Some(&Value::Num(7)));
    assert_eq!(f.get("qn"), Some(&Value::Num(2)));
    assert_eq!(f.get("term_layer"), Some(&Value::Num(1)));
    assert_eq!(f.get("term_etype"), Some(&Value::Num(1)));
    assert_eq!(f.get("term_ecode"), Some(&Value::Num(0)));
    assert_eq!(f.get("rfc").and_then(Value::as_str), Some("RFC 5040 §4.8"));
}

/// Every FPDU and MPA frame of the siw captures decodes without an error record.
#[test]
fn siw_captures_have_no_error_records() {
    for name in [
        "siw-siw-rdmacm.pcap",
        "siw-accept-race.pcap",
        "lab-siw-perftest-ooo-reply.pcap",
    ] {
        let r = golden(name);
        assert_consistent(&r);
        for c in &r.connections {
            for e in &c.events {
                assert_ne!(e.kind, EventKind::Error, "{name}: {}", e.text);
                assert!(matches!(e.layer(), Layer::Mpa | Layer::Rdmap | Layer::Tcp));
            }
        }
        let n: u64 = r.connections.iter().map(|c| c.fpdus[0] + c.fpdus[1]).sum();
        assert_eq!(fpdus(&r).len() as u64, n, "{name}");
    }
}

/// README: four associations of kernel SCTP and usrsctp, each with two DATA chunks; the
/// DATA records carry TSN, stream, SSN and PPID.
#[test]
fn sctp_data_chunk_records() {
    let r = golden("kernel-sctp-usrsctp.pcap");
    assert_consistent(&r);
    let mut data = Vec::new();
    for a in &r.sctp.associations {
        for p in &a.events {
            for Line { record, .. } in &p.lines {
                assert_eq!(record.layer(), Layer::Sctp);
                if let Record::Sctp(SctpRecord::Chunk {
                    chunk_type: 0,
                    info:
                        ChunkInfo::Data {
                            tsn,
                            stream,
                            retransmission,
                            ..
                        },
                    ..
                }) = record
                {
                    data.push((a.id, *tsn, *stream, *retransmission));
                    let f = record.fields();
                    assert_eq!(f.get("tsn").and_then(Value::as_u64), Some(u64::from(*tsn)));
                    assert_eq!(f.get("chunk_name").and_then(Value::as_str), Some("DATA"));
                }
            }
        }
    }
    assert_eq!(data.len(), 8);
    assert!(data.iter().all(|d| !d.3));
    for a in &r.sctp.associations {
        let tsns: Vec<u32> = data.iter().filter(|d| d.0 == a.id).map(|d| d.1).collect();
        assert_eq!(tsns.len(), 2);
        assert_eq!(a.dirs.iter().map(|d| d.data_chunks).sum::<u64>(), 2);
    }
}
