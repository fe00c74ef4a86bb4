//! The packet side of an SCTP endpoint for an event loop that is not this crate's: the
//! sockets of one endpoint (one per local address), receiving packets into a
//! [`sctp::Endpoint`] and sending what it has to send. The caller owns the loop: it polls
//! [`PacketIo::fds`] for readability, calls [`PacketIo::receive`] when one is readable and
//! [`PacketIo::flush`] after anything that may have produced packets. softrnic's RNIC
//! progress thread runs its SCTP connections this way, beside its TCP sockets.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::BorrowedFd;

use sctp::Endpoint;

use crate::net::{self, LocalSocket, Transport, UdpPortMap};

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
    ports: UdpPortMap,
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
            ports: UdpPortMap::new(default_port),
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
                    // RFC 6951 §5.4: ports are learned from verified packets only.
                    self.ports.learn(ep, r.from, r.udp_port, pkt);
                }
            }
        }
        n
    }

    /// Sends every packet `ep` has for the network.
    pub fn flush(&mut self, ep: &mut Endpoint, now: sctp::Instant) {
        let ports = self.udp.then_some(&self.ports);
        let r = net::transmit(ep, now, &self.socks, ports, &[], &mut self.batch);
        self.stats.packets_out += r.sent;
        self.stats.send_failures += r.failed;
    }
}
