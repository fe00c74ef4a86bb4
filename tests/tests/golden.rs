//! The decoder against captures of real Linux siw traffic (tests/data/golden, see its README).
//!
//! Each capture is reassembled per TCP direction, run through the MPA deframer and the DDP/RDMAP
//! decoders, and checked against facts established independently of this code: the README of
//! the captures (written from the tools that produced the traffic) and tshark's dissectors
//! (scripts/tshark-crosscheck.sh compares every per-opcode count with tshark in CI).

use std::collections::BTreeMap;

use mpa::{ConnFrame, FrameKind};
use rdmap::Opcode;
use softrnic::capture;
use softrnic::decode::{ConnReport, ConnStatus, FpduRecord, Record, Report, decode_frames};
use softrnic_tests::data_path;

fn decode(name: &str) -> Report {
    let frames = capture::read_file(&data_path(&format!("golden/{name}"))).expect("capture reads");
    decode_frames(&frames)
}

fn counts(pairs: &[(Opcode, u64)]) -> BTreeMap<Opcode, u64> {
    pairs.iter().copied().collect()
}

fn established(r: &Report) -> Vec<&ConnReport> {
    r.connections
        .iter()
        .filter(|c| c.status == ConnStatus::Established)
        .collect()
}

fn enhanced(f: &Option<ConnFrame>) -> (u16, u16) {
    let e = f.as_ref().and_then(|f| f.enhanced).expect("RFC 6581 data");
    (e.ird, e.ord)
}

/// README: 7 MPA connections, rev 2, no CRC; 35 RDMA Write, 8 Read Request, 33 Read Response,
/// 113 Send; FPDUs spanning TCP segments and segments holding several FPDUs.
#[test]
fn siw_siw_rdmacm() {
    let r = decode("siw-siw-rdmacm.pcap");
    assert_eq!(r.errors(), 0, "{:#?}", r.connections);
    let conns = established(&r);
    assert_eq!(conns.len(), 7);
    for c in &conns {
        let s = c.session.as_ref().unwrap();
        assert_eq!(s.revision, 2);
        assert!(!s.crc);
        assert!(!s.markers_tx && !s.markers_rx);
        assert!(!s.p2p && s.rtr.is_none());
        assert_eq!(c.crc_bad, 0);
    }
    // rping asks for IRD/ORD 1/1, ib_read_bw for 128/128, the other perftest tools for 0/0
    // (README of the captures and ../shared/interop/RECIPE.md); siw answers in kind.
    let ird_ord: Vec<(u16, u16)> = conns.iter().map(|c| enhanced(&c.request)).collect();
    assert_eq!(
        ird_ord,
        [(1, 1), (0, 0), (0, 0), (0, 0), (128, 128), (0, 0), (0, 0)]
    );
    for c in &conns {
        assert_eq!(enhanced(&c.request), enhanced(&c.reply));
    }
    assert_eq!(
        r.counts(),
        counts(&[
            (Opcode::RdmaWrite, 35),
            (Opcode::ReadRequest, 8),
            (Opcode::ReadResponse, 33),
            (Opcode::Send, 113),
        ])
    );
    assert_eq!(
        conns.iter().map(|c| c.fpdus[0] + c.fpdus[1]).sum::<u64>(),
        189
    );
}

/// README: first connection without CRC, second with MPA CRC requested and granted; every
/// CRC-bearing FPDU has a good CRC32c. 6 Write, 4 Read Request, 6 Read Response, 16 Send.
#[test]
fn siw_rping_crc() {
    let r = decode("siw-rping-crc.pcap");
    assert_eq!(r.errors(), 0, "{:#?}", r.connections);
    let conns = established(&r);
    assert_eq!(conns.len(), 2);
    let (plain, crc) = (conns[0], conns[1]);
    assert!(!plain.session.as_ref().unwrap().crc);
    assert!(!plain.request.as_ref().unwrap().crc);
    assert_eq!(plain.crc_good, 0);
    let s = crc.session.as_ref().unwrap();
    assert!(s.crc);
    assert!(crc.request.as_ref().unwrap().crc, "initiator asked for CRC");
    assert!(crc.reply.as_ref().unwrap().crc, "siw granted it");
    assert_eq!(crc.crc_bad, 0);
    assert_eq!(crc.crc_good, crc.fpdus[0] + crc.fpdus[1]);
    assert_eq!(crc.crc_good, 18);
    // -S 2000: the 2000-octet Read Response and Write each span two FPDUs.
    assert_eq!(crc.counts[&Opcode::ReadResponse], 4);
    assert_eq!(
        r.counts(),
        counts(&[
            (Opcode::RdmaWrite, 6),
            (Opcode::ReadRequest, 4),
            (Opcode::ReadResponse, 6),
            (Opcode::Send, 16),
        ])
    );
}

/// README: siw as initiator (request only; request + reply + first Send) and as responder to a
/// host Request asking IRD/ORD 16/16. The Request siw sends is
/// `4d504120494420526571204672616d65 1002 0004 0001 0001`.
#[test]
fn siw_mpa_setup() {
    let r = decode("siw-mpa-setup.pcap");
    assert_eq!(r.errors(), 0, "{:#?}", r.connections);
    let mpa: Vec<&ConnReport> = r.mpa_connections().collect();
    assert_eq!(mpa.len(), 3);

    let siw_request = hex("4d504120494420526571204672616d65 1002 0004 0001 0001");
    let (parsed, used) = ConnFrame::parse(&siw_request).unwrap();
    assert_eq!(used, siw_request.len());

    let only = mpa[0];
    assert_eq!(only.status, ConnStatus::RequestOnly);
    assert_eq!(only.request.as_ref(), Some(&parsed));

    let first_send = mpa[1];
    assert_eq!(first_send.status, ConnStatus::Established);
    assert_eq!(first_send.request.as_ref(), Some(&parsed));
    assert_eq!(first_send.reply.as_ref().unwrap().kind, FrameKind::Reply);
    assert_eq!(first_send.counts, counts(&[(Opcode::Send, 1)]));

    let siw_responder = mpa[2];
    assert_eq!(siw_responder.status, ConnStatus::Established);
    assert_eq!(enhanced(&siw_responder.request), (16, 16));
    assert_eq!(enhanced(&siw_responder.reply), (16, 16));
    assert_eq!(siw_responder.responder.port(), 7174);
    assert_eq!(r.counts(), counts(&[(Opcode::Send, 1)]));
}

/// README: an ib_send_bw run hit siw 6.1's accept race; the traffic itself is well formed.
/// tshark counts 33 RDMA Write, 8 Read Request, 33 Read Response and 77 Send in it.
#[test]
fn siw_accept_race() {
    let r = decode("siw-accept-race.pcap");
    assert_eq!(r.errors(), 0, "{:#?}", r.connections);
    assert_eq!(established(&r).len(), 6);
    assert_eq!(
        r.counts(),
        counts(&[
            (Opcode::RdmaWrite, 33),
            (Opcode::ReadRequest, 8),
            (Opcode::ReadResponse, 33),
            (Opcode::Send, 77),
        ])
    );
}

/// The SCTP capture holds no TCP: nothing to decode, nothing wrongly reported.
#[test]
fn sctp_capture_has_no_iwarp_over_tcp() {
    let r = decode("kernel-sctp-usrsctp.pcap");
    assert!(r.connections.is_empty());
    assert_eq!(r.skipped.not_tcp as usize, r.frames);
    assert!(!r.has_errors());
}

/// RFC 5044 §4.4 (CRC): a single flipped bit in a CRC-protected FPDU is caught and reported as
/// an MPA CRC error; the rest of the stream still decodes.
#[test]
fn flipped_bit_in_crc_fpdu_is_a_crc_error() {
    let mut frames =
        capture::read_file(&data_path("golden/siw-rping-crc.pcap")).expect("capture reads");
    // The second connection runs with CRC; find a frame of it whose TCP payload holds a
    // 1400-octet Read Response (the largest FPDU) and flip a bit in its last payload octets.
    let idx = frames
        .iter()
        .position(|f| f.data.len() > 1400 && f.number > 30)
        .expect("large CRC-protected frame");
    let len = frames[idx].data.len();
    frames[idx].data[len - 100] ^= 0x10;
    let r = decode_frames(&frames);
    let c = established(&r)[1];
    assert_eq!(c.crc_bad, 1);
    assert_eq!(c.crc_good, 17);
    assert!(r.has_errors());
    assert_eq!(r.errors(), 1);
}

/// A ULPDU that is not valid RDMAP (an undefined opcode) is an error naming the Terminate
/// RFC 5040 §7 prescribes; the connection without CRC still frames correctly.
#[test]
fn reserved_opcode_is_a_decode_error() {
    let mut frames =
        capture::read_file(&data_path("golden/siw-rping-crc.pcap")).expect("capture reads");
    // In the first connection (no CRC) the first Send follows the MPA Reply: find the frame
    // whose TCP payload starts with the FPDU header 00 22 41 43 (len 34, untagged last, Send).
    let needle = [0x00, 0x22, 0x41, 0x43];
    let (fi, pos) = frames
        .iter()
        .enumerate()
        .find_map(|(i, f)| f.data.windows(4).position(|w| w == needle).map(|p| (i, p)))
        .expect("a Send FPDU");
    frames[fi].data[pos + 3] = 0x4c; // RV 1, opcode 0xC (reserved)
    let r = decode_frames(&frames);
    assert_eq!(r.errors(), 1);
    let ev = r
        .connections
        .iter()
        .flat_map(|c| &c.events)
        .find(|e| e.kind == softrnic::decode::EventKind::Error)
        .expect("error event");
    let Record::Fpdu(FpduRecord {
        message: Err(e), ..
    }) = &ev.record
    else {
        panic!("not an invalid FPDU: {}", ev.text)
    };
    assert_eq!(*e, rdmap::DecodeError::ReservedOpcode { opcode: 0xc });
    assert_eq!(e.term_cause().layer_etype_ecode(), (0, 2, 6));
    assert_eq!(ev.layer(), softrnic::decode::Layer::Rdmap);
    // The DDP header still parses: an untagged Send on queue 0 with opcode 0xC.
    let f = ev.fields();
    let num = |n: &str| f.get(n).and_then(softrnic::decode::Value::as_u64);
    assert_eq!(f.get("ddp_tagged").and_then(|v| v.as_bool()), Some(false));
    assert_eq!(
        (num("qn"), num("opcode"), num("rdmap_version")),
        (Some(0), Some(0xc), Some(1))
    );
    assert_eq!(
        (num("term_layer"), num("term_etype"), num("term_ecode")),
        (Some(0), Some(2), Some(6))
    );
    assert_eq!(
        f.get("error").and_then(|v| v.as_str()),
        Some("ReservedOpcode")
    );
    assert!(
        ev.text.contains("reserved RDMAP opcode")
            && ev.text.contains("layer 0x0, type 0x2, code 0x06"),
        "{}",
        ev.text
    );
}

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// A lab capture in which the bridge recorded an MPA Reply after the ACK that covers it
/// (tests/data/golden/README.md): reassembly by sequence number still finds the Reply, and all
/// six connections decode. tshark agrees only with out-of-order reassembly switched on.
#[test]
fn lab_capture_with_reply_recorded_after_its_ack() {
    let r = decode("lab-siw-perftest-ooo-reply.pcap");
    assert_eq!(r.errors(), 0, "{:#?}", r.connections);
    assert_eq!(established(&r).len(), 6);
    let late = r
        .connections
        .iter()
        .find(|c| c.initiator.port() == 44186)
        .expect("the connection with the late-recorded Reply");
    assert_eq!(late.status, ConnStatus::Established);
    assert_eq!(late.counts, counts(&[(Opcode::Send, 32)]));
    assert_eq!(
        r.counts(),
        counts(&[
            (Opcode::RdmaWrite, 124),
            (Opcode::ReadRequest, 20),
            (Opcode::ReadResponse, 120),
            (Opcode::Send, 146),
        ])
    );
}

/// Terminates from Linux siw 6.1 (lab scenario `error-softrnic-to-siw`: softrnic Writes and
/// Reads with an invalid STag and out of bounds): siw lays the Terminate Control out from
/// the low bits, so Layer/EType are exchanged and M/D/R sit in bits RFC 5040 §4.8 reserves.
/// The decoder reports each as a nonconformant Terminate (a warning, not an error) and
/// names what that layout means — for the Read cases an RDMAP Remote Protection error,
/// where the conformant reading would be a DDP cause.
#[test]
fn rfc5040_4_8_siw_terminate_control_laid_out_from_low_bits() {
    let r = decode("lab-siw-terminate-low-bit-first.pcap");
    assert_eq!(r.errors(), 0);
    let terms: Vec<_> = r
        .connections
        .iter()
        .flat_map(|c| &c.events)
        .filter(|e| e.text.contains("Terminate  "))
        .collect();
    assert_eq!(terms.len(), 4);
    let expect = [
        (
            "11 00 03 00",
            "DDP Tagged Buffer Error: Invalid STag (layer 0x1, type 0x1, code 0x00) M1 D1 R0",
        ),
        (
            "11 01 03 00",
            "DDP Tagged Buffer Error: Base or bounds violation (layer 0x1, type 0x1, code 0x01) M1 D1 R0",
        ),
        (
            "10 00 07 00",
            "RDMAP Remote Protection Error: Invalid STag (layer 0x0, type 0x1, code 0x00) M1 D1 R1",
        ),
        (
            "10 01 07 00",
            "RDMAP Remote Protection Error: Base or bounds violation (layer 0x0, type 0x1, code 0x01) M1 D1 R1",
        ),
    ];
    for (ev, (ctrl, meaning)) in terms.iter().zip(expect) {
        assert_eq!(ev.kind, softrnic::decode::EventKind::Warning, "{}", ev.text);
        assert!(
            ev.text
                .contains(&format!("nonconformant Terminate Control {ctrl}"))
                && ev.text.contains(meaning),
            "{}",
            ev.text
        );
    }
}
