//! The capture of a run: every byte the runner sent and received on each connection, with
//! its time, written as a pcap file of IPv4 (or IPv6) TCP packets (link type RAW) that the
//! capture decoder and Wireshark read like a capture taken on the wire.
//!
//! The runner talks through the kernel's TCP, so it sees streams, not segments: each write
//! and each read becomes one packet, with a synthesised handshake before and FIN after, and
//! sequence numbers counted from a fixed initial number per connection, so a run's capture
//! depends on what was exchanged only (and the times).

use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use etherparse::PacketBuilder;
use pcap_file::DataLink;
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};

/// Direction of recorded bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    /// From the runner to the peer.
    ToPeer,
    /// From the peer to the runner.
    FromPeer,
}

/// What happened on a recorded connection, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Item {
    /// Stream bytes.
    Data(Dir, Vec<u8>),
    /// The sender of this direction closed its side.
    Fin(Dir),
}

/// One TCP connection of a run.
#[derive(Clone, Debug)]
pub struct ConnRecord {
    /// The case the connection belongs to.
    pub case: String,
    /// The runner's address.
    pub local: SocketAddr,
    /// The peer's address.
    pub peer: SocketAddr,
    /// Time of the connection's opening (since the Unix epoch).
    pub opened: Duration,
    /// The peer opened the connection (the runner listened).
    pub peer_opened: bool,
    /// What was exchanged, with the time since the Unix epoch.
    pub items: Vec<(Duration, Item)>,
}

impl ConnRecord {
    /// A new record, opened now.
    pub fn new(case: &str, local: SocketAddr, peer: SocketAddr) -> ConnRecord {
        ConnRecord {
            case: case.to_string(),
            local,
            peer,
            opened: now(),
            peer_opened: false,
            items: Vec::new(),
        }
    }

    /// Records bytes.
    pub fn data(&mut self, dir: Dir, bytes: &[u8]) {
        if !bytes.is_empty() {
            self.items.push((now(), Item::Data(dir, bytes.to_vec())));
        }
    }

    /// Records a FIN (once per direction).
    pub fn fin(&mut self, dir: Dir) {
        if !self
            .items
            .iter()
            .any(|(_, i)| matches!(i, Item::Fin(d) if *d == dir))
        {
            self.items.push((now(), Item::Fin(dir)));
        }
    }

    /// Every byte sent in `dir`, in order.
    pub fn stream(&self, dir: Dir) -> Vec<u8> {
        let mut v = Vec::new();
        for (_, i) in &self.items {
            if let Item::Data(d, b) = i
                && *d == dir
            {
                v.extend_from_slice(b);
            }
        }
        v
    }
}

fn now() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

/// Initial sequence numbers of the runner's and the peer's side (fixed: reproducible).
const ISN_LOCAL: u32 = 0x1000_0000;
const ISN_PEER: u32 = 0x2000_0000;
/// Largest TCP payload per packet (fits an IPv4 total length).
const MAX_PAYLOAD: usize = 65_000;

struct Side {
    addr: SocketAddr,
    seq: u32,
}

fn packet(
    from: &Side,
    to: &Side,
    syn: bool,
    fin: bool,
    ack: Option<u32>,
    payload: &[u8],
) -> Result<Vec<u8>, String> {
    let ip = match (from.addr.ip(), to.addr.ip()) {
        (IpAddr::V4(a), IpAddr::V4(b)) => PacketBuilder::ipv4(a.octets(), b.octets(), 64),
        (a, b) => {
            let v6 = |x: IpAddr| match x {
                IpAddr::V4(v) => v.to_ipv6_mapped().octets(),
                IpAddr::V6(v) => v.octets(),
            };
            PacketBuilder::ipv6(v6(a), v6(b), 64)
        }
    };
    let mut tcp = ip.tcp(from.addr.port(), to.addr.port(), from.seq, 65_535);
    if syn {
        tcp = tcp.syn();
    }
    if fin {
        tcp = tcp.fin();
    }
    if let Some(a) = ack {
        tcp = tcp.ack(a);
    }
    if !payload.is_empty() {
        tcp = tcp.psh();
    }
    let mut out = Vec::with_capacity(tcp.size(payload.len()));
    tcp.write(&mut out, payload).map_err(|e| e.to_string())?;
    Ok(out)
}

/// Writes `conns` as one pcap file (link type RAW) to `w`.
pub fn write_pcap<W: Write>(conns: &[ConnRecord], w: W) -> Result<(), String> {
    let header = PcapHeader {
        datalink: DataLink::RAW,
        ..PcapHeader::default()
    };
    let mut pw = PcapWriter::with_header(w, header).map_err(|e| e.to_string())?;
    let mut put = |t: Duration, p: Vec<u8>| -> Result<(), String> {
        let len = u32::try_from(p.len()).unwrap_or(u32::MAX);
        pw.write_packet(&PcapPacket::new(t, len, &p))
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    for c in conns {
        let mut l = Side {
            addr: c.local,
            seq: ISN_LOCAL,
        };
        let mut p = Side {
            addr: c.peer,
            seq: ISN_PEER,
        };
        {
            let (opener, other) = if c.peer_opened {
                (&mut p, &mut l)
            } else {
                (&mut l, &mut p)
            };
            put(c.opened, packet(opener, other, true, false, None, &[])?)?;
            opener.seq = opener.seq.wrapping_add(1);
            put(
                c.opened,
                packet(other, opener, true, false, Some(opener.seq), &[])?,
            )?;
            other.seq = other.seq.wrapping_add(1);
            put(
                c.opened,
                packet(opener, other, false, false, Some(other.seq), &[])?,
            )?;
        }
        for (t, item) in &c.items {
            let (dir, data, fin) = match item {
                Item::Data(d, b) => (*d, b.as_slice(), false),
                Item::Fin(d) => (*d, &[][..], true),
            };
            let chunks: Vec<&[u8]> = if data.is_empty() {
                vec![data]
            } else {
                data.chunks(MAX_PAYLOAD).collect()
            };
            for chunk in chunks {
                let (from, to) = match dir {
                    Dir::ToPeer => (&mut l, &mut p),
                    Dir::FromPeer => (&mut p, &mut l),
                };
                put(*t, packet(from, to, false, fin, Some(to.seq), chunk)?)?;
                from.seq = from
                    .seq
                    .wrapping_add(chunk.len() as u32)
                    .wrapping_add(u32::from(fin));
            }
        }
    }
    Ok(())
}
