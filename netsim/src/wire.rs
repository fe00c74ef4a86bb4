//! Just enough Ethernet/IPv4/TCP/UDP parsing for impairments that must keep a frame valid.
//!
//! [`CorruptScope::PayloadFixChecksums`](crate::link::CorruptScope::PayloadFixChecksums)
//! flips bits inside the transport payload and then repairs the checksums, so the damage is
//! not caught by IP or TCP and reaches the application protocol (for iWARP, MPA's CRC32c).
//! These helpers find that payload and recompute the checksums (RFC 791 header checksum,
//! RFC 793/768 pseudo-header checksum). Everything is bounds-checked: a frame that is not a
//! well-formed Ethernet II + IPv4 + TCP/UDP frame yields `None` and is left alone.

use core::ops::Range;

use crate::link::ETHERNET_HEADER_LEN;

const ETHERTYPE_IPV4: u16 = 0x0800;
/// IP protocol number of TCP.
pub const PROTO_TCP: u8 = 6;
/// IP protocol number of UDP.
pub const PROTO_UDP: u8 = 17;

/// Where the parts of an Ethernet II + IPv4 + TCP/UDP frame sit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ipv4Layout {
    /// The IPv4 header.
    pub ip_header: Range<usize>,
    /// The transport header plus payload (the IPv4 payload, as long as the Total Length says).
    pub transport: Range<usize>,
    /// The transport payload (after the TCP header with options, or the 8-byte UDP header).
    pub payload: Range<usize>,
    /// [`PROTO_TCP`] or [`PROTO_UDP`].
    pub protocol: u8,
}

/// Locates the IPv4 header, transport segment and payload of an unfragmented IPv4 TCP or UDP
/// frame; `None` for anything else (other EtherTypes, fragments, truncated or inconsistent
/// lengths).
pub fn ipv4_layout(frame: &[u8]) -> Option<Ipv4Layout> {
    if u16::from_be_bytes(*frame.get(12..)?.first_chunk()?) != ETHERTYPE_IPV4 {
        return None;
    }
    let ip = ETHERNET_HEADER_LEN;
    let vihl = *frame.get(ip)?;
    if vihl >> 4 != 4 {
        return None;
    }
    let ihl = usize::from(vihl & 0x0f) * 4;
    if ihl < 20 {
        return None;
    }
    let total = usize::from(u16::from_be_bytes(*frame.get(ip + 2..)?.first_chunk()?));
    let ip_end = ip.checked_add(total)?;
    if total < ihl || ip_end > frame.len() {
        return None;
    }
    // More Fragments set or a non-zero offset: the transport header may be elsewhere.
    if u16::from_be_bytes(*frame.get(ip + 6..)?.first_chunk()?) & 0x3fff != 0 {
        return None;
    }
    let protocol = *frame.get(ip + 9)?;
    let l4 = ip + ihl;
    let header_len = match protocol {
        PROTO_TCP => usize::from(*frame.get(l4 + 12)? >> 4) * 4,
        PROTO_UDP => 8,
        _ => return None,
    };
    let payload_start = l4.checked_add(header_len)?;
    if header_len < 8 || payload_start > ip_end {
        return None;
    }
    Some(Ipv4Layout {
        ip_header: ip..l4,
        transport: l4..ip_end,
        payload: payload_start..ip_end,
        protocol,
    })
}

/// Ones' complement sum of `data` (odd length padded with a zero byte), not yet folded.
fn sum16(data: &[u8], mut acc: u64) -> u64 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        acc += u64::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        acc += u64::from(u16::from_be_bytes([*last, 0]));
    }
    acc
}

fn fold(mut acc: u64) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// Recomputes the IPv4 header checksum and the TCP or UDP checksum of a frame in place.
/// Returns `false` (and changes nothing) if the frame is not an IPv4 TCP/UDP frame. A UDP
/// checksum of zero ("not computed", RFC 768) stays zero.
pub fn fix_checksums(frame: &mut [u8]) -> bool {
    let Some(l) = ipv4_layout(frame) else {
        return false;
    };
    // IPv4 header checksum at offset 10 of the header.
    let ck = l.ip_header.start + 10;
    frame[ck] = 0;
    frame[ck + 1] = 0;
    let ip_sum = !fold(sum16(&frame[l.ip_header.clone()], 0));
    frame[ck..ck + 2].copy_from_slice(&ip_sum.to_be_bytes());

    let ck = match l.protocol {
        PROTO_TCP => l.transport.start + 16,
        _ => l.transport.start + 6,
    };
    if l.protocol == PROTO_UDP && frame[ck] == 0 && frame[ck + 1] == 0 {
        return true;
    }
    frame[ck] = 0;
    frame[ck + 1] = 0;
    let src_dst = l.ip_header.start + 12..l.ip_header.start + 20;
    let len = (l.transport.end - l.transport.start) as u64;
    let pseudo = sum16(&frame[src_dst], u64::from(l.protocol) + len);
    let mut sum = !fold(sum16(&frame[l.transport.clone()], pseudo));
    if l.protocol == PROTO_UDP && sum == 0 {
        sum = 0xffff;
    }
    frame[ck..ck + 2].copy_from_slice(&sum.to_be_bytes());
    true
}

/// Whether the IPv4 header checksum and the TCP/UDP checksum of a frame are correct
/// (`None` if it is not an IPv4 TCP/UDP frame).
pub fn checksums_valid(frame: &[u8]) -> Option<bool> {
    let l = ipv4_layout(frame)?;
    let ip_ok = fold(sum16(&frame[l.ip_header.clone()], 0)) == 0xffff;
    let ck = match l.protocol {
        PROTO_TCP => l.transport.start + 16,
        _ => l.transport.start + 6,
    };
    if l.protocol == PROTO_UDP && frame[ck] == 0 && frame[ck + 1] == 0 {
        return Some(ip_ok);
    }
    let src_dst = l.ip_header.start + 12..l.ip_header.start + 20;
    let len = (l.transport.end - l.transport.start) as u64;
    let pseudo = sum16(&frame[src_dst], u64::from(l.protocol) + len);
    Some(ip_ok && fold(sum16(&frame[l.transport.clone()], pseudo)) == 0xffff)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// An Ethernet + IPv4 + TCP frame whose checksums smoltcp computed.
    fn smoltcp_tcp_frame(payload: &[u8]) -> Vec<u8> {
        use smoltcp::phy::ChecksumCapabilities;
        use smoltcp::wire::{
            EthernetAddress, EthernetFrame, EthernetProtocol, EthernetRepr, IpAddress, IpProtocol,
            Ipv4Address, Ipv4Packet, Ipv4Repr, TcpControl, TcpPacket, TcpRepr, TcpSeqNumber,
        };
        let src = Ipv4Address::new(192, 0, 2, 1);
        let dst = Ipv4Address::new(192, 0, 2, 2);
        let tcp = TcpRepr {
            src_port: 40000,
            dst_port: 5000,
            control: TcpControl::Psh,
            seq_number: TcpSeqNumber(12345),
            ack_number: Some(TcpSeqNumber(999)),
            window_len: 4096,
            window_scale: None,
            max_seg_size: None,
            sack_permitted: false,
            sack_ranges: [None, None, None],
            timestamp: None,
            payload,
        };
        let ip = Ipv4Repr {
            src_addr: src,
            dst_addr: dst,
            next_header: IpProtocol::Tcp,
            payload_len: tcp.buffer_len(),
            hop_limit: 64,
        };
        let eth = EthernetRepr {
            src_addr: EthernetAddress([2, 0, 0, 0, 0, 1]),
            dst_addr: EthernetAddress([2, 0, 0, 0, 0, 2]),
            ethertype: EthernetProtocol::Ipv4,
        };
        let mut buf = vec![0; 14 + ip.buffer_len() + tcp.buffer_len()];
        let caps = ChecksumCapabilities::default();
        let mut f = EthernetFrame::new_unchecked(&mut buf);
        eth.emit(&mut f);
        let mut p = Ipv4Packet::new_unchecked(f.payload_mut());
        ip.emit(&mut p, &caps);
        let mut t = TcpPacket::new_unchecked(p.payload_mut());
        tcp.emit(&mut t, &IpAddress::Ipv4(src), &IpAddress::Ipv4(dst), &caps);
        buf
    }

    fn smoltcp_accepts(frame: &[u8]) -> bool {
        use smoltcp::wire::{EthernetFrame, IpAddress, Ipv4Packet, TcpPacket};
        let Ok(f) = EthernetFrame::new_checked(frame) else {
            return false;
        };
        let Ok(p) = Ipv4Packet::new_checked(f.payload()) else {
            return false;
        };
        let Ok(t) = TcpPacket::new_checked(p.payload()) else {
            return false;
        };
        p.verify_checksum()
            && t.verify_checksum(
                &IpAddress::Ipv4(p.src_addr()),
                &IpAddress::Ipv4(p.dst_addr()),
            )
    }

    #[test]
    fn layout_finds_the_tcp_payload() {
        let frame = smoltcp_tcp_frame(b"hello world");
        let l = ipv4_layout(&frame).unwrap();
        assert_eq!(l.protocol, PROTO_TCP);
        assert_eq!(l.ip_header, 14..34);
        assert_eq!(&frame[l.payload.clone()], b"hello world");
        assert_eq!(checksums_valid(&frame), Some(true));
    }

    #[test]
    fn non_ip_frames_are_left_alone() {
        let mut arp = vec![0u8; 60];
        arp[12] = 0x08;
        arp[13] = 0x06;
        assert_eq!(ipv4_layout(&arp), None);
        assert!(!fix_checksums(&mut arp));
        assert!(arp[14..].iter().all(|&b| b == 0));
        assert_eq!(ipv4_layout(&[]), None);
    }

    proptest! {
        /// RFC 793 §3.1: after a payload bit flip the checksum no longer matches, and after
        /// the repair both this module and smoltcp accept the frame again.
        #[test]
        fn repaired_frames_pass_smoltcp_checks(
            payload in proptest::collection::vec(any::<u8>(), 1..300),
            bit in any::<usize>(),
        ) {
            let mut frame = smoltcp_tcp_frame(&payload);
            let l = ipv4_layout(&frame).unwrap();
            let nbits = (l.payload.end - l.payload.start) * 8;
            let b = bit % nbits;
            frame[l.payload.start + b / 8] ^= 1 << (b % 8);
            prop_assert!(!smoltcp_accepts(&frame));
            prop_assert_eq!(checksums_valid(&frame), Some(false));
            prop_assert!(fix_checksums(&mut frame));
            prop_assert!(smoltcp_accepts(&frame));
            prop_assert_eq!(checksums_valid(&frame), Some(true));
        }

        /// Arbitrary bytes never panic the parser.
        #[test]
        fn parsing_garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            let mut b = bytes;
            if b.len() > 14 {
                b[12] = 0x08;
                b[13] = 0x00;
            }
            let _ = ipv4_layout(&b);
            let _ = checksums_valid(&b);
            let _ = fix_checksums(&mut b);
        }
    }
}
