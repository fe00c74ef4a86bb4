//! An SCTP host for the deterministic network simulator: SCTP over raw
//! IPv4 (protocol 132) in Ethernet frames, one [`Endpoint`] per host, one IPv4 address per
//! interface, each interface on a point-to-point link to the peer's interface of the same
//! index (static ARP). An application closure runs on the endpoint at every step, so the
//! same host serves the engine's own tests and the RNIC's.

use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

use netsim::Node;

use crate::Endpoint;

const ETH_IPV4: u16 = 0x0800;
const PROTO_SCTP: u8 = 132;

/// The MAC address of a host's interface.
pub fn mac(host: u8, iface: u8) -> [u8; 6] {
    [2, 0, 0, 0, host, iface]
}

/// The IPv4 header checksum.
pub fn ip_checksum(h: &[u8]) -> u16 {
    let mut sum: u32 = h
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Ethernet + IPv4 framing of an SCTP packet.
pub fn frame(
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    src: Ipv4Addr,
    dst: Ipv4Addr,
    sctp: &[u8],
) -> Vec<u8> {
    let mut f = Vec::with_capacity(34 + sctp.len());
    f.extend_from_slice(&dst_mac);
    f.extend_from_slice(&src_mac);
    f.extend_from_slice(&ETH_IPV4.to_be_bytes());
    let total = (20 + sctp.len()) as u16;
    let mut ip = [0u8; 20];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    ip[6] = 0x40; // DF
    ip[8] = 64;
    ip[9] = PROTO_SCTP;
    ip[12..16].copy_from_slice(&src.octets());
    ip[16..20].copy_from_slice(&dst.octets());
    let c = ip_checksum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(sctp);
    f
}

/// Parses Ethernet + IPv4 and returns (src, dst, SCTP bytes) for protocol 132.
pub fn unframe(f: &[u8]) -> Option<(Ipv4Addr, Ipv4Addr, &[u8])> {
    if f.get(12..14)? != ETH_IPV4.to_be_bytes() {
        return None;
    }
    let ip = f.get(14..)?;
    let ihl = usize::from(*ip.first()? & 0x0f) * 4;
    if ip[0] >> 4 != 4 || ihl < 20 || ip.len() < ihl || ip_checksum(ip.get(..ihl)?) != 0 {
        return None;
    }
    if ip[9] != PROTO_SCTP {
        return None;
    }
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
    let dst = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
    Some((src, dst, ip.get(ihl..total)?))
}

/// What a host runs on its endpoint at every step (after packets and timers).
pub type App = Box<dyn FnMut(&mut Endpoint, crate::Instant)>;

/// A multihomed host: one SCTP endpoint, one IPv4 address per interface, static ARP (each
/// interface is on a point-to-point link to the peer's interface of the same index).
pub struct SctpHost {
    /// Host number (the MAC addresses' fifth octet).
    pub id: u8,
    /// The peer host's number.
    pub peer_id: u8,
    /// One address per interface.
    pub addrs: Vec<Ipv4Addr>,
    /// The SCTP endpoint.
    pub ep: Endpoint,
    /// The application.
    pub app: App,
    out: VecDeque<(usize, Vec<u8>)>,
}

impl SctpHost {
    /// A host running `app` on endpoint `ep`.
    pub fn new(id: u8, peer_id: u8, addrs: Vec<Ipv4Addr>, ep: Endpoint, app: App) -> SctpHost {
        SctpHost {
            id,
            peer_id,
            addrs,
            ep,
            app,
            out: VecDeque::new(),
        }
    }
}

impl SctpHost {
    /// The engine's address for an IP (port 0: ports are SCTP's).
    pub fn sock(ip: Ipv4Addr) -> SocketAddr {
        SocketAddr::V4(SocketAddrV4::new(ip, 0))
    }

    fn pump(&mut self, now: netsim::Instant) {
        (self.app)(&mut self.ep, now);
        while let Some(t) = self.ep.poll_transmit(now) {
            let (SocketAddr::V4(l), SocketAddr::V4(r)) = (t.local, t.remote) else {
                continue;
            };
            let Some(iface) = self.addrs.iter().position(|a| a == l.ip()) else {
                continue;
            };
            let f = frame(
                mac(self.id, iface as u8),
                mac(self.peer_id, iface as u8),
                *l.ip(),
                *r.ip(),
                &t.bytes,
            );
            self.out.push_back((iface, f));
        }
    }
}

impl Node for SctpHost {
    fn interface_count(&self) -> usize {
        self.addrs.len()
    }

    fn handle_frame(&mut self, now: netsim::Instant, iface: usize, f: Vec<u8>) {
        if let Some((src, dst, sctp)) = unframe(&f)
            && self.addrs.get(iface) == Some(&dst)
        {
            self.ep
                .handle_packet(now, Self::sock(dst), Self::sock(src), sctp);
        }
        self.pump(now);
    }

    fn poll_transmit(&mut self, now: netsim::Instant) -> Option<(usize, Vec<u8>)> {
        if self.out.is_empty() {
            self.pump(now);
        }
        self.out.pop_front()
    }

    fn poll_timeout(&mut self) -> Option<netsim::Instant> {
        self.ep.poll_timeout()
    }

    fn handle_timeout(&mut self, now: netsim::Instant) {
        self.ep.handle_timeout(now);
        self.pump(now);
    }
}
