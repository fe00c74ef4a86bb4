//! The packet side of an SCTP endpoint for an event loop that is not this crate's: the
//! sockets of one endpoint (one per local address), receiving packets into a
//! [`sctp::Endpoint`] and sending what it has to send. The caller owns the loop: it polls
//! [`PacketIo::fds`] for readability, calls [`PacketIo::receive`] when one is readable and
//! [`PacketIo::flush`] after anything that may have produced packets. softrnic's RNIC
//! progress thread runs its SCTP connections this way, beside its TCP sockets.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::BorrowedFd;

use sctp::{Endpoint, State};

use crate::net::{self, LocalSocket, Transport};

/// RFC 6951 §5.4: the remote UDP encapsulation port per peer endpoint (address and SCTP
/// port, so that two peers behind one address each get their own), stored from packets
/// that passed an association's verification-tag check; until one has, replies go to the
/// source port of the last packet from that endpoint (an INIT's, say), else to the default.
#[derive(Debug, Default)]
struct EncapPorts {
    default: u16,
    verified: HashMap<(IpAddr, u16), u16>,
    seen: HashMap<(IpAddr, u16), u16>,
}

impl EncapPorts {
    fn observe(&mut self, ip: IpAddr, sctp_port: u16, udp_port: u16, verified: bool) {
        if verified {
            self.verified.insert((ip, sctp_port), udp_port);
        }
        self.seen.insert((ip, sctp_port), udp_port);
    }

    fn port_for(&self, ip: IpAddr, sctp_port: u16) -> u16 {
        let k = (ip, sctp_port);
        self.verified
            .get(&k)
            .or_else(|| self.seen.get(&k))
            .copied()
            .unwrap_or(self.default)
    }
}

/// The SCTP source and destination ports of a packet.
fn sctp_ports(pkt: &[u8]) -> (u16, u16) {
    match pkt.get(..4) {
        Some(b) => (
            u16::from_be_bytes([b[0], b[1]]),
            u16::from_be_bytes([b[2], b[3]]),
        ),
        None => (0, 0),
    }
}

/// Counters of a [`PacketIo`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PacketStats {
    /// SCTP packets handed to the endpoint.
    pub packets_in: u64,
    /// SCTP packets sent.
    pub packets_out: u64,
    /// Packets the host refused to send.
    pub send_failures: u64,
}

/// The sockets of one SCTP endpoint. See the [module documentation](self).
#[derive(Debug)]
pub struct PacketIo {
    socks: Vec<(IpAddr, LocalSocket)>,
    ports: EncapPorts,
    udp: bool,
    sctp_port: u16,
    udp_port: u16,
    stats: PacketStats,
    buf: Vec<u8>,
    batch: Vec<(usize, SocketAddr, Vec<u8>)>,
}

/// The engine's view of an address: the IP with port 0 (ports are the transport's).
pub fn engine_addr(ip: IpAddr) -> SocketAddr {
    SocketAddr::new(ip, 0)
}

impl PacketIo {
    /// Opens one socket per local address for the endpoint with SCTP port `sctp_port`.
    pub fn open(transport: Transport, locals: &[IpAddr], sctp_port: u16) -> io::Result<PacketIo> {
        if locals.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "an SCTP endpoint needs at least one local address",
            ));
        }
        let socks = net::open(transport, locals)?;
        let udp_port = net::bound_udp_port(&socks);
        let (udp, default_port) = match transport {
            Transport::Udp { remote_port, .. } => (true, remote_port),
            Transport::RawIpv4 => (false, 0),
        };
        Ok(PacketIo {
            socks: locals.iter().copied().zip(socks).collect(),
            ports: EncapPorts {
                default: default_port,
                ..EncapPorts::default()
            },
            udp,
            sctp_port,
            udp_port,
            stats: PacketStats::default(),
            buf: vec![0; 65536],
            batch: Vec::new(),
        })
    }

    /// The sockets' descriptors, to poll for readability.
    pub fn fds(&self) -> Vec<BorrowedFd<'_>> {
        self.socks.iter().map(|(_, s)| s.fd()).collect()
    }

    /// The local UDP port (UDP encapsulation; 0 for raw IP).
    pub fn udp_port(&self) -> u16 {
        self.udp_port
    }

    /// The local addresses.
    pub fn local_addrs(&self) -> Vec<IpAddr> {
        self.socks.iter().map(|(ip, _)| *ip).collect()
    }

    /// Counters.
    pub fn stats(&self) -> &PacketStats {
        &self.stats
    }

    /// Reads every waiting packet (at most `limit` per socket, so one busy socket cannot
    /// starve the rest) into `ep`; returns how many were handed over.
    pub fn receive(&mut self, ep: &mut Endpoint, now: sctp::Instant, limit: usize) -> usize {
        let mut n = 0;
        for i in 0..self.socks.len() {
            for _ in 0..limit {
                let (local, sock) = &self.socks[i];
                let r = match net::recv(sock, self.sctp_port, &mut self.buf) {
                    Ok(Some(r)) => r,
                    Ok(None) | Err(_) => break,
                };
                if r.end <= r.start {
                    continue;
                }
                let pkt = &self.buf[r.start..r.end];
                ep.handle_packet(now, engine_addr(*local), engine_addr(r.from), pkt);
                self.stats.packets_in += 1;
                n += 1;
                if self.udp {
                    // RFC 6951 §5.4: a port is learned from a packet of an association
                    // (its verification tag matched one of ours).
                    let vtag = pkt
                        .get(4..8)
                        .map_or(0, |b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
                    let verified = vtag != 0
                        && ep.associations().iter().any(|id| {
                            ep.association(*id).is_some_and(|a| {
                                a.local_tag() == vtag && a.state() != State::Closed
                            })
                        });
                    let (src_port, _) = sctp_ports(pkt);
                    self.ports.observe(r.from, src_port, r.udp_port, verified);
                }
            }
        }
        n
    }

    /// Sends every packet `ep` has for the network.
    pub fn flush(&mut self, ep: &mut Endpoint, now: sctp::Instant) {
        self.batch.clear();
        while let Some(t) = ep.poll_transmit(now) {
            let (local, remote) = (t.local.ip(), t.remote.ip());
            let idx = self
                .socks
                .iter()
                .position(|(ip, _)| *ip == local)
                .or_else(|| {
                    self.socks
                        .iter()
                        .position(|(ip, _)| ip.is_ipv4() == remote.is_ipv4())
                });
            let Some(idx) = idx else {
                self.stats.send_failures += 1;
                continue;
            };
            let port = if self.udp {
                self.ports.port_for(remote, sctp_ports(&t.bytes).1)
            } else {
                0
            };
            self.batch
                .push((idx, SocketAddr::new(remote, port), t.bytes));
        }
        let mut start = 0;
        while start < self.batch.len() {
            let idx = self.batch[start].0;
            let end = self.batch[start..]
                .iter()
                .position(|b| b.0 != idx)
                .map_or(self.batch.len(), |n| start + n);
            let (sent, failed) = net::send_batch(&self.socks[idx].1, &self.batch[start..end]);
            self.stats.packets_out += sent;
            self.stats.send_failures += failed;
            start = end;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 6951 §5.4: ports are learned per peer endpoint, a verified one wins over one
    /// merely seen, and two peers on one address keep their own ports.
    #[test]
    fn rfc6951_5_4_encapsulation_port_per_peer_endpoint() {
        let ip: IpAddr = "10.0.0.9".parse().unwrap();
        let mut p = EncapPorts {
            default: 9899,
            ..EncapPorts::default()
        };
        assert_eq!(p.port_for(ip, 5000), 9899);
        p.observe(ip, 5000, 40000, false);
        assert_eq!(p.port_for(ip, 5000), 40000);
        p.observe(ip, 5000, 40001, true);
        // A later unverified packet (spoofed, say) does not redirect the association.
        p.observe(ip, 5000, 666, false);
        assert_eq!(p.port_for(ip, 5000), 40001);
        // A second client behind the same address has its own port.
        p.observe(ip, 5001, 50000, false);
        assert_eq!(p.port_for(ip, 5001), 50000);
        assert_eq!(p.port_for(ip, 5000), 40001);
    }
}
