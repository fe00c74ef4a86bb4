//! Conformance against real traffic: the golden Linux siw captures in
//! `tests/data/golden/` (workspace root). Each MPA connection's TCP streams are
//! reassembled, the Request/Reply parsed, and every FPDU deframed; then the
//! encoder must reproduce the captured FPDU octets exactly.
//!
//! Expected counts come from tshark 4.0's MPA dissector (independent decoder).

use std::collections::BTreeMap;
use std::path::PathBuf;

use mpa::fpdu::{CrcStatus, Deframer, FpduEncoder, RxConfig, TxConfig, mulpdu};
use mpa::frame::{ConnFrame, FrameKind};

fn golden(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data/golden")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Flow {
    src: [u8; 4],
    sport: u16,
    dst: [u8; 4],
    dport: u16,
}

/// TCP payloads per flow (keyed by flow and ISN), with relative sequence numbers.
type Segments = BTreeMap<(Flow, u32), Vec<(u32, Vec<u8>)>>;

fn be16(b: &[u8], o: usize) -> u16 {
    u16::from_be_bytes(*b[o..].first_chunk().expect("truncated capture"))
}

fn be32(b: &[u8], o: usize) -> u32 {
    u32::from_be_bytes(*b[o..].first_chunk().expect("truncated capture"))
}

/// Minimal pcap (Ethernet, IPv4, TCP) reader; enough for the golden captures.
fn tcp_segments(pcap: &[u8]) -> Segments {
    let magic = u32::from_le_bytes([pcap[0], pcap[1], pcap[2], pcap[3]]);
    let le = match magic {
        0xa1b2c3d4 | 0xa1b23c4d => true,
        0xd4c3b2a1 | 0x4d3cb2a1 => false,
        other => panic!("not a pcap file (magic {other:#x})"),
    };
    let rd32 = |o: usize| {
        let b = [pcap[o], pcap[o + 1], pcap[o + 2], pcap[o + 3]];
        if le {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        }
    };
    assert_eq!(rd32(20), 1, "Ethernet link type expected");
    let mut isn: BTreeMap<Flow, u32> = BTreeMap::new();
    let mut out = Segments::new();
    let mut off = 24;
    while off + 16 <= pcap.len() {
        let incl = rd32(off + 8) as usize;
        let frame = &pcap[off + 16..off + 16 + incl];
        off += 16 + incl;
        let mut l2 = 14;
        let mut ethertype = be16(frame, 12);
        while ethertype == 0x8100 {
            ethertype = be16(frame, l2 + 2);
            l2 += 4;
        }
        if ethertype != 0x0800 {
            continue;
        }
        let ip = &frame[l2..];
        if ip[9] != 6 {
            continue;
        }
        let ihl = usize::from(ip[0] & 0x0f) * 4;
        let total = usize::from(be16(ip, 2));
        let tcp = &ip[ihl..total];
        let flow = Flow {
            src: [ip[12], ip[13], ip[14], ip[15]],
            dst: [ip[16], ip[17], ip[18], ip[19]],
            sport: be16(tcp, 0),
            dport: be16(tcp, 2),
        };
        let seq = be32(tcp, 4);
        let doff = usize::from(tcp[12] >> 4) * 4;
        let flags = tcp[13];
        if flags & 0x02 != 0 {
            isn.insert(flow, seq);
            continue;
        }
        let payload = &tcp[doff..];
        if payload.is_empty() {
            continue;
        }
        let Some(&base) = isn.get(&flow) else {
            continue;
        };
        out.entry((flow, base))
            .or_default()
            .push((seq.wrapping_sub(base).wrapping_sub(1), payload.to_vec()));
    }
    out
}

/// Reassembles one direction; retransmitted and overlapping octets are dropped.
fn reassemble(mut segs: Vec<(u32, Vec<u8>)>) -> Vec<u8> {
    segs.sort_by_key(|(s, _)| *s);
    let mut stream = Vec::new();
    for (rel, data) in segs {
        let rel = rel as usize;
        assert!(rel <= stream.len(), "gap in captured TCP stream");
        let skip = stream.len() - rel;
        if skip < data.len() {
            stream.extend_from_slice(&data[skip..]);
        }
    }
    stream
}

struct Connection {
    request: ConnFrame,
    reply: ConnFrame,
    /// Initiator → responder octets after the Request.
    to_responder: Vec<u8>,
    /// Responder → initiator octets after the Reply.
    to_initiator: Vec<u8>,
}

fn mpa_connections(pcap: &[u8]) -> Vec<Connection> {
    let segs = tcp_segments(pcap);
    let streams: BTreeMap<(Flow, u32), Vec<u8>> =
        segs.into_iter().map(|(k, v)| (k, reassemble(v))).collect();
    let mut conns = Vec::new();
    for ((flow, _), data) in &streams {
        let Ok((request, used)) = ConnFrame::parse(data) else {
            continue;
        };
        if request.kind != FrameKind::Request {
            continue;
        }
        let back = Flow {
            src: flow.dst,
            sport: flow.dport,
            dst: flow.src,
            dport: flow.sport,
        };
        let Some((_, rdata)) = streams.iter().find(|((f, _), _)| *f == back) else {
            continue; // request only, never answered
        };
        let (reply, rused) = ConnFrame::parse(rdata).expect("reply parses");
        assert_eq!(reply.kind, FrameKind::Reply);
        conns.push(Connection {
            request,
            reply,
            to_responder: data[used..].to_vec(),
            to_initiator: rdata[rused..].to_vec(),
        });
    }
    conns
}

struct Summary {
    connections: usize,
    fpdus: usize,
    good_crc: usize,
    max_ulpdu: usize,
    nonzero_pad: usize,
}

/// Deframes both directions of every connection and re-encodes them.
fn check_capture(name: &str) -> Summary {
    let conns = mpa_connections(&golden(name));
    let mut s = Summary {
        connections: conns.len(),
        fpdus: 0,
        good_crc: 0,
        max_ulpdu: 0,
        nonzero_pad: 0,
    };
    for c in &conns {
        assert!(!c.reply.reject, "{name}: unexpected reject");
        assert!(
            !c.request.markers && !c.reply.markers,
            "siw never uses markers"
        );
        let crc = c.request.crc || c.reply.crc;
        for stream in [&c.to_responder, &c.to_initiator] {
            let mut d = Deframer::new(RxConfig::new(crc, false));
            // Feed in odd-sized pieces to exercise reassembly across boundaries.
            for piece in stream.chunks(97) {
                d.push(piece);
            }
            assert!(!d.in_progress(), "{name}: stream ends inside an FPDU");
            let mut enc = FpduEncoder::new(TxConfig {
                crc,
                markers: false,
            });
            let mut again = Vec::new();
            // The captured stream with PAD octets zeroed, as RFC 5044 §4.1 requires
            // of a sender (siw does not always zero them).
            let mut expected = stream.clone();
            for r in d.by_ref() {
                let f = r.unwrap_or_else(|e| panic!("{name}: {e}"));
                match f.crc {
                    CrcStatus::Good => s.good_crc += 1,
                    CrcStatus::NotNegotiated { field } => {
                        assert!(!crc);
                        assert_eq!(field, [0; 4], "siw sends a zero CRC field without CRC");
                    }
                }
                s.fpdus += 1;
                s.max_ulpdu = s.max_ulpdu.max(f.ulpdu.len());
                let pad_at = f.stream_offset as usize + 2 + f.ulpdu.len();
                let pad = (4 - (2 + f.ulpdu.len()) % 4) % 4;
                let pad_octets = &mut expected[pad_at..pad_at + pad];
                assert_eq!(f.nonzero_pad, pad_octets.iter().any(|b| *b != 0));
                if f.nonzero_pad {
                    s.nonzero_pad += 1;
                }
                pad_octets.fill(0);
                let before = again.len();
                enc.encode(&[&f.ulpdu], &mut again).expect("encodable");
                assert_eq!(again.len() - before, f.wire_len);
            }
            if let Some(i) = again.iter().zip(expected.iter()).position(|(a, b)| a != b) {
                let lo = i.saturating_sub(24);
                panic!(
                    "{name}: re-encoded FPDUs differ from siw's at stream offset {i}:\n ours {:02x?}\n siw  {:02x?}",
                    &again[lo..(i + 16).min(again.len())],
                    &expected[lo..(i + 16).min(expected.len())]
                );
            }
            assert_eq!(again.len(), stream.len(), "{name}: length differs");
        }
    }
    s
}

/// RFC 5044 §4.1, §4.4, §4.5 against siw: the CRC connection's FPDUs all carry a good
/// CRC32c, the other connection's CRC fields are zero, and our encoder
/// reproduces every FPDU octet. siw's largest ULPDU is MULPDU(1448) = 1442.
#[test]
fn rfc5044_4_siw_rping_crc_capture() {
    let s = check_capture("siw-rping-crc.pcap");
    assert_eq!(s.connections, 2);
    assert_eq!(s.fpdus, 32);
    assert_eq!(s.good_crc, 18);
    assert_eq!(s.max_ulpdu, mulpdu(1448, false) as usize);
    assert_eq!(s.nonzero_pad, 0);
}

/// RFC 5044 §4.1 / §4.5 against siw ↔ siw rdma_cm traffic (7 connections,
/// 189 FPDUs, some spanning TCP segments and some segments holding several
/// FPDUs; no ULPDU above MULPDU(1448) = 1442).
#[test]
fn rfc5044_4_siw_siw_rdmacm_capture() {
    let s = check_capture("siw-siw-rdmacm.pcap");
    assert_eq!(s.connections, 7);
    assert_eq!(s.fpdus, 189);
    assert_eq!(s.good_crc, 0);
    assert_eq!(s.max_ulpdu, 1442);
    // tshark shows PAD "00 40" in six FPDUs: siw leaves stale PAD octets.
    assert_eq!(s.nonzero_pad, 6);
}

/// RFC 5044 §4.1: the accept-race capture frames cleanly too (the quirk is above MPA).
#[test]
fn rfc5044_4_siw_accept_race_capture() {
    let s = check_capture("siw-accept-race.pcap");
    assert_eq!(s.connections, 6);
    assert_eq!(s.fpdus, 151);
    assert_eq!(s.nonzero_pad, 4);
}

/// RFC 5044 §7.1.1 / RFC 6581 against siw: every captured Request and Reply
/// parses and re-emits byte-identically.
#[test]
fn rfc5044_7_1_1_captured_frames_round_trip() {
    let mut seen = 0;
    for name in [
        "siw-mpa-setup.pcap",
        "siw-rping-crc.pcap",
        "siw-siw-rdmacm.pcap",
        "siw-accept-race.pcap",
    ] {
        for ((_, _), segs) in tcp_segments(&golden(name)) {
            let stream = reassemble(segs);
            if let Ok((f, used)) = ConnFrame::parse(&stream) {
                assert_eq!(f.to_bytes().expect("emit"), &stream[..used], "{name}");
                assert_eq!(f.revision, 2);
                assert!(f.enhanced.is_some());
                seen += 1;
            }
        }
    }
    // 5 + 4 + 14 + 12 frames (tshark count).
    assert_eq!(seen, 35);
}
