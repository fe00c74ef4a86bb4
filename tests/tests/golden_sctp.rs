//! The SCTP codec against real traffic: `kernel-sctp-usrsctp.pcap` holds four associations
//! between Linux kernel SCTP and usrsctp — over raw IP (protocol 132) both ways, then over
//! RFC 6951 UDP encapsulation (port 9899) both ways. tshark (with `-d udp.port==9899,sctp` and
//! CRC-32c checking) finds 44 SCTP packets, each with a good checksum and one chunk, in the
//! order INIT, INIT ACK, COOKIE ECHO, COOKIE ACK, DATA, SACK, DATA, SACK, SHUTDOWN,
//! SHUTDOWN ACK, SHUTDOWN COMPLETE per association.

use sctp::wire::{Chunk, build_packet, parse_packet};
use softrnic::capture;
use softrnic::tcp::{Transport, transport};
use softrnic_tests::data_path;

const UDP_ENCAPS_PORT: u16 = 9899;

/// The SCTP packets of the capture, with whether each came UDP-encapsulated.
fn sctp_packets() -> Vec<(bool, Vec<u8>)> {
    let frames = capture::read_file(&data_path("golden/kernel-sctp-usrsctp.pcap")).unwrap();
    let mut out = Vec::new();
    for f in &frames {
        match transport(f) {
            Transport::OtherIp(_, _, 132, payload) => out.push((false, payload.to_vec())),
            Transport::OtherIp(_, _, 17, udp) if udp.len() >= 8 => {
                let sport = u16::from_be_bytes([udp[0], udp[1]]);
                let dport = u16::from_be_bytes([udp[2], udp[3]]);
                // RFC 6951 §5: SCTP packets in UDP to or from the encapsulation port.
                assert!(sport == UDP_ENCAPS_PORT || dport == UDP_ENCAPS_PORT);
                out.push((true, udp[8..].to_vec()));
            }
            other => panic!("frame {}: unexpected {other:?}", f.number),
        }
    }
    out
}

fn kind(c: &Chunk<'_>) -> &'static str {
    match c {
        Chunk::Init(_) => "INIT",
        Chunk::InitAck(_) => "INIT ACK",
        Chunk::CookieEcho(_) => "COOKIE ECHO",
        Chunk::CookieAck => "COOKIE ACK",
        Chunk::Data(_) => "DATA",
        Chunk::Sack(_) => "SACK",
        Chunk::Shutdown { .. } => "SHUTDOWN",
        Chunk::ShutdownAck => "SHUTDOWN ACK",
        Chunk::ShutdownComplete { .. } => "SHUTDOWN COMPLETE",
        _ => "other",
    }
}

/// RFC 9260 §3 and §6.8 (CRC32c): every packet of both peers parses with a good checksum, and
/// the chunk sequence is the one tshark shows.
#[test]
fn every_packet_parses_with_good_crc_and_expected_chunks() {
    let pkts = sctp_packets();
    assert_eq!(pkts.len(), 44);
    assert_eq!(pkts.iter().filter(|(udp, _)| *udp).count(), 22);
    let expected = [
        "INIT",
        "INIT ACK",
        "COOKIE ECHO",
        "COOKIE ACK",
        "DATA",
        "SACK",
        "DATA",
        "SACK",
        "SHUTDOWN",
        "SHUTDOWN ACK",
        "SHUTDOWN COMPLETE",
    ];
    for (i, (_, bytes)) in pkts.iter().enumerate() {
        let p = parse_packet(bytes, true).unwrap_or_else(|e| panic!("packet {i}: {e}"));
        assert_eq!(p.chunks.len(), 1, "packet {i}");
        assert_eq!(
            kind(&p.chunks[0]),
            expected[i % expected.len()],
            "packet {i}"
        );
    }
}

/// Re-emitting every parsed packet reproduces the captured bytes exactly (chunk and parameter
/// padding per RFC 9260 §3.2, checksum placement per §6.8).
#[test]
fn every_packet_reencodes_byte_identically() {
    for (i, (_, bytes)) in sctp_packets().iter().enumerate() {
        let p = parse_packet(bytes, true).unwrap();
        assert_eq!(&build_packet(&p.header, &p.chunks), bytes, "packet {i}");
    }
}

/// A single flipped bit anywhere in a packet is caught by the CRC32c (RFC 9260 §6.8).
#[test]
fn any_flipped_bit_fails_the_checksum() {
    let pkts = sctp_packets();
    let (_, bytes) = &pkts[4]; // a DATA packet
    for bit in 0..bytes.len() * 8 {
        let mut b = bytes.clone();
        b[bit / 8] ^= 1 << (bit % 8);
        assert!(parse_packet(&b, true).is_err(), "bit {bit} not caught");
    }
}

// ------------------------------------------------------------------------------------------
// `softrnic decode` on the same capture. Expected values are tshark's view of the file
// (`tshark -r kernel-sctp-usrsctp.pcap -d udp.port==9899,sctp -o sctp.relative_tsns:FALSE
// -T fields -e sctp.chunk_type -e sctp.verification_tag -e sctp.init_initiate_tag
// -e sctp.initack_initiate_tag -e sctp.init_initial_tsn -e sctp.initack_initial_tsn
// -e sctp.chunk_length`).
// ------------------------------------------------------------------------------------------

use softrnic::decode::{
    DecodeOptions, SctpOptions, decode_frames, decode_frames_with, print_report_with,
    sctp_decode::{AssocState, Encap},
};

fn golden_report() -> softrnic::decode::Report {
    let frames = capture::read_file(&data_path("golden/kernel-sctp-usrsctp.pcap")).unwrap();
    decode_frames(&frames)
}

/// RFC 9260 §3.2: per-chunk-type totals as tshark counts them (`sort | uniq -c` over
/// sctp.chunk_type), 44 packets, 22 of them over UDP (RFC 6951), no error.
#[test]
fn decode_counts_chunk_types_like_tshark() {
    let rep = golden_report();
    assert!(!rep.has_errors());
    assert_eq!((rep.sctp.packets, rep.sctp.udp_packets), (44, 22));
    let counts: Vec<(u8, u64)> = rep.sctp.chunk_counts().into_iter().collect();
    assert_eq!(
        counts,
        vec![
            (0, 8),
            (1, 4),
            (2, 4),
            (3, 8),
            (7, 4),
            (8, 4),
            (10, 4),
            (11, 4),
            (14, 4)
        ]
    );
    let mut out = Vec::new();
    let opts = DecodeOptions {
        counts: true,
        ..Default::default()
    };
    print_report_with("g", &rep, &opts, &SctpOptions::default(), &mut out).unwrap();
    let out = String::from_utf8(out).unwrap();
    assert!(out.lines().any(|l| l == "sctp 0x00 DATA 8"), "{out}");
    assert!(
        out.lines().any(|l| l == "sctp 0x0e SHUTDOWN-COMPLETE 4"),
        "{out}"
    );
}

/// RFC 9260 §5.1 and §8.5: four associations, each identified by its two Initiate Tags, with
/// the initial TSNs of both sides and one DATA message each way, closed by SHUTDOWN.
#[test]
fn decode_associations_match_tshark() {
    let rep = golden_report();
    let a = &rep.sctp.associations;
    assert_eq!(a.len(), 4);
    // (initiator port, responder port, INIT tag, INIT ACK tag, INIT TSN, INIT ACK TSN,
    //  UDP-encapsulated, user bytes each way) from tshark.
    let expected = [
        (
            62001,
            5001,
            0x2e6d51a7,
            0x8fb7fd63,
            2523474251u32,
            770580664u32,
            false,
            23,
        ),
        (
            50217, 5002, 0xbc4fea9e, 0x4d4125bc, 2185577331, 1105279043, false, 28,
        ),
        (
            49974, 5003, 0x672c0f0d, 0xa6d0b62d, 4224833801, 232656209, true, 23,
        ),
        (
            59694, 5004, 0x707167c0, 0x4584c756, 1102974319, 3652093575, true, 28,
        ),
    ];
    for (a, e) in a.iter().zip(expected) {
        assert_eq!((a.initiator.1, a.responder.1), (e.0, e.1), "assoc {}", a.id);
        assert_eq!((a.tag_initiator, a.tag_responder), (Some(e.2), Some(e.3)));
        assert_eq!(a.dirs[0].initial_tsn, Some(e.4));
        assert_eq!(a.dirs[1].initial_tsn, Some(e.5));
        // The first DATA of each side carries its initial TSN (RFC 9260 §5.1).
        assert_eq!(a.dirs[0].first_tsn, Some(e.4));
        assert_eq!(a.dirs[1].first_tsn, Some(e.5));
        let udp = a.encaps == [Encap::Udp(9899, 9899)];
        assert_eq!(udp, e.6, "assoc {}", a.id);
        for d in &a.dirs {
            assert_eq!(
                (d.data_chunks, d.data_bytes, d.retransmissions),
                (1, e.7, 0)
            );
            assert_eq!(d.sacks, 1);
        }
        assert_eq!(a.state, AssocState::Closed);
        // One path each way, the hosts' only addresses.
        assert_eq!(a.paths.len(), 2);
        assert_eq!((a.errors, a.warnings), (0, 0));
    }
}

/// RFC 6951: without port 9899 in the list, the UDP half of the capture is not SCTP.
#[test]
fn decode_udp_port_option_selects_encapsulated_packets() {
    let frames = capture::read_file(&data_path("golden/kernel-sctp-usrsctp.pcap")).unwrap();
    let opts = SctpOptions {
        udp_ports: vec![],
        assoc: None,
    };
    let rep = decode_frames_with(&frames, &opts);
    assert_eq!((rep.sctp.packets, rep.sctp.associations.len()), (22, 2));
}

/// RFC 9260 §6.8: one flipped bit in one captured DATA packet makes the decode fail.
#[test]
fn decode_reports_a_corrupted_packet() {
    let mut frames = capture::read_file(&data_path("golden/kernel-sctp-usrsctp.pcap")).unwrap();
    // Frame 5 is the first DATA (tshark); flip a bit of its last octet (chunk padding, which
    // the CRC32c covers as well).
    let f = &mut frames[4];
    let last = f.data.len() - 1;
    f.data[last] ^= 0x01;
    let rep = decode_frames(&frames);
    assert!(rep.has_errors());
    assert_eq!(rep.sctp.errors(), 1);
    assert_eq!(rep.sctp.associations[0].dirs[0].data_chunks, 0);
}

/// Multihoming and failover in real kernel SCTP traffic (RFC 9260 §6.4, §6.3.3, §8.3):
/// `lab-kernel-sctp-multihomed-failover.pcap` (see tests/data/golden/README.md). Chunk totals,
/// DATA per path and the retransmission count are tshark's.
#[test]
fn decode_multihomed_failover_capture_like_tshark() {
    let frames = capture::read_file(&data_path(
        "golden/lab-kernel-sctp-multihomed-failover.pcap",
    ))
    .unwrap();
    let rep = decode_frames(&frames);
    assert!(!rep.has_errors());
    let counts: Vec<(u8, u64)> = rep.sctp.chunk_counts().into_iter().collect();
    assert_eq!(
        counts,
        vec![
            (0, 134),
            (1, 1),
            (2, 1),
            (3, 78),
            (4, 2),
            (5, 2),
            (7, 1),
            (8, 1),
            (10, 1),
            (11, 1),
            (14, 1)
        ]
    );
    assert_eq!(rep.sctp.associations.len(), 1);
    let a = &rep.sctp.associations[0];
    assert_eq!(a.state, AssocState::Closed);
    let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
    // Both ends announced both addresses in INIT / INIT ACK (RFC 9260 §3.3.2.1).
    assert_eq!(a.dirs[0].addresses, vec![ip("10.99.0.3"), ip("10.99.1.3")]);
    assert_eq!(a.dirs[1].addresses, vec![ip("10.99.0.2"), ip("10.99.1.2")]);
    let data_on = |s: &str, d: &str| {
        a.paths
            .iter()
            .find(|p| p.src == ip(s) && p.dst == ip(d))
            .map_or(0, |p| p.data_chunks)
    };
    assert_eq!(data_on("10.99.0.3", "10.99.0.2"), 24);
    assert_eq!(data_on("10.99.0.2", "10.99.0.3"), 33);
    assert_eq!(data_on("10.99.1.3", "10.99.1.2"), 50);
    assert_eq!(data_on("10.99.1.2", "10.99.1.3"), 27);
    assert_eq!(a.dirs[0].retransmissions + a.dirs[1].retransmissions, 8);
}
