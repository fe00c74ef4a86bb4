//! Every ULPDU in the golden Linux siw captures (tests/data/golden, see its README) decodes,
//! the opcode counts match the README, and re-encoding each decoded header in front of its
//! payload gives back the captured bytes exactly.
//!
//! The captures are read with a small pcap / IPv4 / TCP reader written for this test: it
//! reassembles each TCP direction in sequence order, skips the MPA Request or Reply (RFC 5044
//! §7.1) and cuts FPDUs (16-bit ULPDU length, ULPDU, pad to 4 octets, 4-octet CRC; no markers
//! in these captures).

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use rdmap::{Message, Opcode};

fn golden(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data/golden")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

fn u16be(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32be(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

type Flow = ([u8; 4], u16, [u8; 4], u16);

#[derive(Default)]
struct Direction {
    isn: Option<u32>,
    segments: BTreeMap<u32, Vec<u8>>,
}

/// The in-order byte stream of every TCP direction in a little-endian, Ethernet pcap.
fn tcp_streams(pcap: &[u8]) -> HashMap<Flow, Vec<u8>> {
    assert_eq!(&pcap[..4], &[0xd4, 0xc3, 0xb2, 0xa1], "little-endian pcap");
    let mut dirs: HashMap<Flow, Direction> = HashMap::new();
    let mut off = 24;
    while off + 16 <= pcap.len() {
        let incl =
            u32::from_le_bytes(pcap[off + 8..off + 12].try_into().expect("4 bytes")) as usize;
        let frame = &pcap[off + 16..off + 16 + incl];
        off += 16 + incl;
        if u16be(frame, 12) != Some(0x0800) {
            continue;
        }
        let ip = &frame[14..];
        let ihl = usize::from(ip[0] & 0x0f) * 4;
        let total = usize::from(u16be(ip, 2).expect("IPv4 length"));
        if ip[9] != 6 {
            continue;
        }
        let src: [u8; 4] = ip[12..16].try_into().expect("4 bytes");
        let dst: [u8; 4] = ip[16..20].try_into().expect("4 bytes");
        let tcp = &ip[ihl..total];
        let flow = (
            src,
            u16be(tcp, 0).expect("port"),
            dst,
            u16be(tcp, 2).expect("port"),
        );
        let seq = u32be(tcp, 4).expect("seq");
        let data_off = usize::from(tcp[12] >> 4) * 4;
        let d = dirs.entry(flow).or_default();
        if tcp[13] & 0x02 != 0 {
            d.isn = Some(seq.wrapping_add(1));
            continue;
        }
        let data = &tcp[data_off..];
        if !data.is_empty() {
            d.segments.entry(seq).or_insert_with(|| data.to_vec());
        }
    }
    let mut out = HashMap::new();
    for (flow, d) in dirs {
        let Some(isn) = d.isn else { continue };
        let mut stream = Vec::new();
        let mut next = isn;
        let mut segs: Vec<_> = d.segments.into_iter().collect();
        segs.sort_by_key(|(seq, _)| seq.wrapping_sub(isn));
        for (seq, data) in segs {
            let skip = next.wrapping_sub(seq) as usize;
            if seq.wrapping_sub(isn) > next.wrapping_sub(isn) {
                break;
            }
            if skip < data.len() {
                stream.extend_from_slice(&data[skip..]);
                next = next.wrapping_add((data.len() - skip) as u32);
            }
        }
        out.insert(flow, stream);
    }
    out
}

/// The ULPDUs of one MPA stream direction.
fn ulpdus(stream: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    if !stream.starts_with(b"MPA ID Req Frame") && !stream.starts_with(b"MPA ID Rep Frame") {
        return out;
    }
    let pd_len = usize::from(u16be(stream, 18).expect("MPA header"));
    let mut pos = 20 + pd_len;
    while let Some(len) = u16be(stream, pos) {
        let len = usize::from(len);
        let Some(ulpdu) = stream.get(pos + 2..pos + 2 + len) else {
            break;
        };
        out.push(ulpdu);
        let pad = (4 - (2 + len) % 4) % 4;
        pos += 2 + len + pad + 4;
    }
    out
}

fn decode_all(name: &str) -> BTreeMap<Opcode, usize> {
    let mut counts = BTreeMap::new();
    for stream in tcp_streams(&golden(name)).values() {
        for ulpdu in ulpdus(stream) {
            let m = Message::parse(ulpdu)
                .unwrap_or_else(|e| panic!("{name}: {e} in ULPDU {ulpdu:02x?}"));
            *counts.entry(m.opcode()).or_default() += 1;
            let again = m.header.encode(m.payload).expect("encodes");
            assert_eq!(again, ulpdu, "{name}: re-encoding differs");
        }
    }
    counts
}

/// RFC 5040 §4 / RFC 5041 §4 on real traffic: siw ↔ siw rdma_cm runs (rping, ib_write_bw,
/// ib_read_bw, ib_send_bw): 35 RDMA Write, 8 Read Request, 33 Read Response, 113 Send.
#[test]
fn golden_siw_siw_rdmacm_decodes() {
    let c = decode_all("siw-siw-rdmacm.pcap");
    assert_eq!(c.get(&Opcode::RdmaWrite), Some(&35));
    assert_eq!(c.get(&Opcode::ReadRequest), Some(&8));
    assert_eq!(c.get(&Opcode::ReadResponse), Some(&33));
    assert_eq!(c.get(&Opcode::Send), Some(&113));
    assert_eq!(c.len(), 4);
}

/// RFC 5040 §4 on real traffic, with and without MPA CRC: 6 Write, 4 Read Request, 6 Read
/// Response, 16 Send, including multi-segment Writes and Read Responses.
#[test]
fn golden_siw_rping_crc_decodes() {
    let c = decode_all("siw-rping-crc.pcap");
    assert_eq!(c.get(&Opcode::RdmaWrite), Some(&6));
    assert_eq!(c.get(&Opcode::ReadRequest), Some(&4));
    assert_eq!(c.get(&Opcode::ReadResponse), Some(&6));
    assert_eq!(c.get(&Opcode::Send), Some(&16));
}

/// The remaining siw captures decode without error.
#[test]
fn golden_other_siw_captures_decode() {
    let setup = decode_all("siw-mpa-setup.pcap");
    assert_eq!(setup.get(&Opcode::Send), Some(&1));
    let race = decode_all("siw-accept-race.pcap");
    assert!(race.values().sum::<usize>() > 100);
}
