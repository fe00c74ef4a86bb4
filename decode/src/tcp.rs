//! TCP connection tracking and stream reassembly over captured frames.
//!
//! Each TCP connection found in a capture is reassembled into two byte streams, one per
//! direction, in sequence-number order: retransmitted bytes are kept once, out-of-order
//! segments are put in place, and a hole (bytes the capture never saw) ends the usable part of
//! the stream and is reported. Every stream keeps a map from stream offset to the frame that
//! carried those bytes, so that decoded protocol units can be attributed to capture frames.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use etherparse::{NetSlice, SlicedPacket, TransportSlice};

use crate::capture::{Frame, LinkType};

/// Where a run of stream bytes came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Origin {
    /// Stream offset of the first byte of the run.
    pub offset: u64,
    /// Capture frame number that carried it.
    pub frame: u64,
    /// That frame's timestamp.
    pub timestamp: Duration,
}

/// One direction of a TCP connection, reassembled.
#[derive(Debug, Clone, Default)]
pub struct Stream {
    /// The contiguous bytes from the start of the stream up to the first hole.
    pub data: Vec<u8>,
    /// Runs of `data` in offset order with the frame that first carried each.
    pub origins: Vec<Origin>,
    /// Offset and length of the first hole, when bytes are missing from the capture.
    pub hole: Option<(u64, u64)>,
    /// Bytes seen more than once (retransmissions and duplicates).
    pub retransmitted: u64,
    /// Whether the direction's initial sequence number was seen (SYN captured).
    pub syn_seen: bool,
    /// Whether a FIN was seen.
    pub fin: bool,
    /// Whether a RST was seen.
    pub rst: bool,
}

impl Stream {
    /// The frame that carried the byte at `offset`, if it is in `data`.
    pub fn origin_of(&self, offset: u64) -> Option<Origin> {
        let idx = self.origins.partition_point(|o| o.offset <= offset);
        idx.checked_sub(1).map(|i| self.origins[i])
    }
}

/// A TCP connection and its two reassembled directions.
#[derive(Debug, Clone)]
pub struct Connection {
    /// 1-based index in the order connections first appear in the capture.
    pub id: usize,
    /// The endpoint that opened the connection (sent the SYN), or the first sender seen.
    pub client: SocketAddr,
    /// The other endpoint.
    pub server: SocketAddr,
    /// Client → server bytes.
    pub to_server: Stream,
    /// Server → client bytes.
    pub to_client: Stream,
    /// First and last frame numbers of the connection.
    pub frames: (u64, u64),
}

/// Counts of frames the reassembler could not use, by reason.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Skipped {
    /// Frames that are not IPv4/IPv6 TCP (ARP, UDP, SCTP, ...).
    pub not_tcp: u64,
    /// Frames whose headers are truncated or malformed.
    pub malformed: u64,
    /// Frames of a link type the decoder does not know.
    pub unknown_link: u64,
    /// IP fragments (not reassembled).
    pub fragments: u64,
}

/// The result of reassembling all TCP connections in a capture.
#[derive(Debug, Clone, Default)]
pub struct Reassembly {
    /// Connections in order of first appearance.
    pub connections: Vec<Connection>,
    /// Frames that carried no usable TCP segment.
    pub skipped: Skipped,
}

/// A TCP segment extracted from a frame.
#[derive(Debug, Clone)]
pub struct Segment<'a> {
    /// Sender.
    pub src: SocketAddr,
    /// Receiver.
    pub dst: SocketAddr,
    /// Sequence number.
    pub seq: u32,
    /// SYN flag.
    pub syn: bool,
    /// ACK flag.
    pub ack: bool,
    /// FIN flag.
    pub fin: bool,
    /// RST flag.
    pub rst: bool,
    /// TCP payload.
    pub payload: &'a [u8],
}

/// What a frame holds at the transport layer, as far as the decoders care.
#[derive(Debug)]
pub enum Transport<'a> {
    /// A TCP segment.
    Tcp(Segment<'a>),
    /// An IP datagram of another protocol: source, destination, IP protocol number, payload.
    OtherIp(IpAddr, IpAddr, u8, &'a [u8]),
    /// Not IP (ARP, LLDP, ...).
    NotIp,
    /// An IP fragment.
    Fragment,
    /// Headers truncated or malformed.
    Malformed,
    /// Unknown link type.
    UnknownLink,
}

/// Slices a frame down to its transport layer.
pub fn transport(frame: &Frame) -> Transport<'_> {
    let sliced = match frame.link {
        LinkType::Ethernet => SlicedPacket::from_ethernet(&frame.data),
        LinkType::LinuxSll => SlicedPacket::from_linux_sll(&frame.data),
        LinkType::RawIp => SlicedPacket::from_ip(&frame.data),
        LinkType::Other(_) => return Transport::UnknownLink,
    };
    let Ok(p) = sliced else {
        return Transport::Malformed;
    };
    let (src, dst, fragmented, proto, ip_payload) = match &p.net {
        Some(NetSlice::Ipv4(v4)) => {
            let h = v4.header();
            let pl = v4.payload();
            (
                IpAddr::from(h.source_addr()),
                IpAddr::from(h.destination_addr()),
                pl.fragmented,
                pl.ip_number.0,
                pl.payload,
            )
        }
        Some(NetSlice::Ipv6(v6)) => {
            let h = v6.header();
            let pl = v6.payload();
            (
                IpAddr::from(h.source_addr()),
                IpAddr::from(h.destination_addr()),
                pl.fragmented,
                pl.ip_number.0,
                pl.payload,
            )
        }
        _ => return Transport::NotIp,
    };
    if fragmented {
        return Transport::Fragment;
    }
    match &p.transport {
        Some(TransportSlice::Tcp(tcp)) => Transport::Tcp(Segment {
            src: SocketAddr::new(src, tcp.source_port()),
            dst: SocketAddr::new(dst, tcp.destination_port()),
            seq: tcp.sequence_number(),
            syn: tcp.syn(),
            ack: tcp.ack(),
            fin: tcp.fin(),
            rst: tcp.rst(),
            payload: tcp.payload(),
        }),
        Some(_) => Transport::OtherIp(src, dst, proto, ip_payload),
        None if proto == 6 => Transport::Malformed,
        None => Transport::OtherIp(src, dst, proto, ip_payload),
    }
}

/// Per-direction collection state before reassembly.
#[derive(Debug, Default)]
struct DirCollect {
    /// Sequence number of the first stream byte (ISN + 1), once known.
    base: Option<u32>,
    syn_seen: bool,
    /// Last unwrapped relative offset, for 32-bit sequence unwrapping.
    last_rel: i64,
    segments: Vec<(i64, u64, Duration, Vec<u8>)>,
    fin: bool,
    rst: bool,
}

impl DirCollect {
    /// Stream offset of `seq`: the signed 32-bit distance from the highest offset seen so far,
    /// so streams longer than 4 GiB and sequence wrap-around are handled; bytes from before the
    /// stream start (retransmissions of data sent before the capture began) come out negative.
    fn unwrap_rel(&mut self, seq: u32) -> i64 {
        let base = *self.base.get_or_insert(seq);
        let last_seq = base.wrapping_add(self.last_rel as u32);
        let rel = self.last_rel + i64::from(seq.wrapping_sub(last_seq) as i32);
        self.last_rel = self.last_rel.max(rel);
        rel
    }

    fn finish(self) -> Stream {
        let mut segs = self.segments;
        // Sequence order; for equal offsets, capture order (first carrier wins).
        segs.sort_by_key(|s| (s.0, s.1));
        let mut st = Stream {
            syn_seen: self.syn_seen,
            fin: self.fin,
            rst: self.rst,
            ..Default::default()
        };
        let mut next: i64 = 0;
        for (rel, frame, ts, bytes) in segs {
            let end = rel + bytes.len() as i64;
            if st.hole.is_some() {
                break;
            }
            if end <= next {
                st.retransmitted += bytes.len() as u64;
                continue;
            }
            if rel > next {
                st.hole = Some((next as u64, (rel - next) as u64));
                break;
            }
            let skip = (next - rel) as usize;
            st.retransmitted += skip as u64;
            st.origins.push(Origin {
                offset: next as u64,
                frame,
                timestamp: ts,
            });
            st.data.extend_from_slice(&bytes[skip..]);
            next = end;
        }
        st
    }
}

#[derive(Debug)]
struct ConnCollect {
    client: SocketAddr,
    server: SocketAddr,
    dirs: [DirCollect; 2],
    frames: (u64, u64),
}

/// Reassembles every TCP connection in `frames`.
pub fn reassemble(frames: &[Frame]) -> Reassembly {
    let mut skipped = Skipped::default();
    let mut conns: Vec<ConnCollect> = Vec::new();
    // Open connection per unordered endpoint pair.
    let mut open: BTreeMap<(SocketAddr, SocketAddr), usize> = BTreeMap::new();
    for frame in frames {
        let seg = match transport(frame) {
            Transport::Tcp(seg) => seg,
            Transport::OtherIp(..) | Transport::NotIp => {
                skipped.not_tcp += 1;
                continue;
            }
            Transport::Fragment => {
                skipped.fragments += 1;
                continue;
            }
            Transport::Malformed => {
                skipped.malformed += 1;
                continue;
            }
            Transport::UnknownLink => {
                skipped.unknown_link += 1;
                continue;
            }
        };
        let key = if seg.src <= seg.dst {
            (seg.src, seg.dst)
        } else {
            (seg.dst, seg.src)
        };
        let pure_syn = seg.syn && !seg.ack;
        let idx = match open.get(&key) {
            Some(&i) => {
                let c = &conns[i];
                let d = usize::from(seg.src != c.client);
                // A new SYN with another ISN on a pair already in use opens a new connection.
                let reused =
                    pure_syn && c.dirs[d].base.is_some_and(|b| b != seg.seq.wrapping_add(1));
                if reused { None } else { Some(i) }
            }
            None => None,
        };
        let idx = idx.unwrap_or_else(|| {
            // The SYN-ACK sender is the server; otherwise the first sender is the client.
            let (client, server) = if seg.syn && seg.ack {
                (seg.dst, seg.src)
            } else {
                (seg.src, seg.dst)
            };
            conns.push(ConnCollect {
                client,
                server,
                dirs: Default::default(),
                frames: (frame.number, frame.number),
            });
            open.insert(key, conns.len() - 1);
            conns.len() - 1
        });
        let c = &mut conns[idx];
        c.frames.1 = frame.number;
        let dir = &mut c.dirs[usize::from(seg.src != c.client)];
        // The SYN fixes the stream origin (data on a SYN, as in TCP fast open, starts at
        // ISN + 1 as well).
        if seg.syn && !dir.syn_seen {
            dir.base = Some(seg.seq.wrapping_add(1));
            dir.syn_seen = true;
            dir.last_rel = 0;
        }
        dir.fin |= seg.fin;
        dir.rst |= seg.rst;
        if seg.payload.is_empty() {
            continue;
        }
        let seq = if seg.syn {
            seg.seq.wrapping_add(1)
        } else {
            seg.seq
        };
        let rel = dir.unwrap_rel(seq);
        dir.segments
            .push((rel, frame.number, frame.timestamp, seg.payload.to_vec()));
    }
    let connections = conns
        .into_iter()
        .enumerate()
        .map(|(i, c)| {
            let [a, b] = c.dirs;
            Connection {
                id: i + 1,
                client: c.client,
                server: c.server,
                to_server: a.finish(),
                to_client: b.finish(),
                frames: c.frames,
            }
        })
        .collect();
    Reassembly {
        connections,
        skipped,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::PacketBuilder;

    const A: ([u8; 4], u16) = ([10, 0, 0, 1], 40000);
    const B: ([u8; 4], u16) = ([10, 0, 0, 2], 7174);

    struct Builder {
        frames: Vec<Frame>,
    }

    impl Builder {
        fn new() -> Self {
            Builder { frames: Vec::new() }
        }
        fn seg(&mut self, from_a: bool, seq: u32, flags: &str, payload: &[u8]) -> &mut Self {
            let (s, d) = if from_a { (A, B) } else { (B, A) };
            let mut b = PacketBuilder::ethernet2([1; 6], [2; 6])
                .ipv4(s.0, d.0, 64)
                .tcp(s.1, d.1, seq, 65535);
            if flags.contains('S') {
                b = b.syn();
            }
            if flags.contains('A') {
                b = b.ack(1);
            }
            if flags.contains('F') {
                b = b.fin();
            }
            let mut data = Vec::new();
            b.write(&mut data, payload).unwrap();
            let n = self.frames.len() as u64 + 1;
            self.frames.push(Frame {
                number: n,
                timestamp: Duration::from_millis(n),
                link: LinkType::Ethernet,
                orig_len: data.len() as u32,
                data,
            });
            self
        }
    }

    #[test]
    fn in_order_stream_with_handshake() {
        let mut b = Builder::new();
        b.seg(true, 999, "S", b"")
            .seg(false, 4999, "SA", b"")
            .seg(true, 1000, "A", b"hello ")
            .seg(false, 5000, "A", b"reply")
            .seg(true, 1006, "A", b"world");
        let r = reassemble(&b.frames);
        assert_eq!(r.connections.len(), 1);
        let c = &r.connections[0];
        assert_eq!(c.client.port(), 40000);
        assert_eq!(c.to_server.data, b"hello world");
        assert_eq!(c.to_client.data, b"reply");
        assert!(c.to_server.syn_seen && c.to_client.syn_seen);
        assert_eq!(c.to_server.origin_of(0).unwrap().frame, 3);
        assert_eq!(c.to_server.origin_of(7).unwrap().frame, 5);
        assert_eq!(c.to_server.origin_of(6).unwrap().offset, 6);
    }

    #[test]
    fn out_of_order_and_retransmitted_segments() {
        let mut b = Builder::new();
        b.seg(true, 99, "S", b"")
            .seg(true, 106, "A", b"world")
            .seg(true, 100, "A", b"hello ")
            .seg(true, 100, "A", b"hello ")
            .seg(true, 103, "A", b"lo wo"); // partial overlap
        let r = reassemble(&b.frames);
        let s = &r.connections[0].to_server;
        assert_eq!(s.data, b"hello world");
        assert_eq!(s.retransmitted, 6 + 5);
        assert!(s.hole.is_none());
    }

    #[test]
    fn hole_ends_the_usable_stream() {
        let mut b = Builder::new();
        b.seg(true, 99, "S", b"")
            .seg(true, 100, "A", b"abc")
            .seg(true, 110, "A", b"xyz");
        let s = &reassemble(&b.frames).connections[0].to_server;
        assert_eq!(s.data, b"abc");
        assert_eq!(s.hole, Some((3, 7)));
    }

    #[test]
    fn sequence_wrap_is_unwrapped() {
        let mut b = Builder::new();
        b.seg(true, u32::MAX - 3, "S", b"")
            .seg(true, u32::MAX - 2, "A", b"abc")
            .seg(true, 0, "A", b"def")
            .seg(true, 3, "A", b"ghi");
        let s = &reassemble(&b.frames).connections[0].to_server;
        assert_eq!(s.data, b"abcdefghi");
    }

    #[test]
    fn capture_started_mid_connection() {
        let mut b = Builder::new();
        b.seg(false, 7000, "A", b"first")
            .seg(true, 3000, "A", b"other")
            .seg(false, 7005, "A", b"-next");
        let r = reassemble(&b.frames);
        let c = &r.connections[0];
        assert_eq!(c.client.port(), 7174, "first sender taken as client");
        assert_eq!(c.to_server.data, b"first-next");
        assert!(!c.to_server.syn_seen);
    }

    #[test]
    fn new_syn_on_same_pair_is_a_new_connection() {
        let mut b = Builder::new();
        b.seg(true, 99, "S", b"")
            .seg(true, 100, "A", b"one")
            .seg(true, 100, "AF", b"")
            .seg(true, 5000, "S", b"")
            .seg(true, 5000, "S", b"") // SYN retransmission: same connection
            .seg(true, 5001, "A", b"two");
        let r = reassemble(&b.frames);
        assert_eq!(r.connections.len(), 2);
        assert_eq!(r.connections[0].to_server.data, b"one");
        assert!(r.connections[0].to_server.fin);
        assert_eq!(r.connections[1].to_server.data, b"two");
        assert_eq!(r.connections[1].id, 2);
    }

    #[test]
    fn non_tcp_and_garbage_frames_are_counted() {
        let mut frames = Builder::new().frames;
        let mut udp = Vec::new();
        PacketBuilder::ethernet2([1; 6], [2; 6])
            .ipv4([1, 1, 1, 1], [2, 2, 2, 2], 1)
            .udp(1, 2)
            .write(&mut udp, b"x")
            .unwrap();
        for (i, data) in [udp, vec![0u8; 5], vec![0xffu8; 60]]
            .into_iter()
            .enumerate()
        {
            frames.push(Frame {
                number: i as u64 + 1,
                timestamp: Duration::ZERO,
                link: LinkType::Ethernet,
                orig_len: data.len() as u32,
                data,
            });
        }
        let r = reassemble(&frames);
        assert!(r.connections.is_empty());
        assert_eq!(r.skipped.not_tcp + r.skipped.malformed, 3);
    }
}
