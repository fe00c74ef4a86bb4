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
