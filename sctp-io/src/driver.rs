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

/// A packet read from one of a [`PacketIo`]'s sockets: the SCTP packet (from its common
/// header on) with the addresses it came between.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inbound<'a> {
    /// The local address it arrived on.
    pub local: IpAddr,
    /// The peer address it came from.
    pub from: IpAddr,
    /// The peer's UDP source port (UDP encapsulation; 0 for raw IP).
    pub udp_port: u16,
    /// The SCTP packet.
    pub packet: &'a [u8],
}

impl Inbound<'_> {
    /// An owned copy (to pass to another thread).
    pub fn to_packet(&self) -> InboundPacket {
        InboundPacket {
            local: self.local,
            from: self.from,
            udp_port: self.udp_port,
            packet: self.packet.to_vec(),
        }
    }
}

/// An owned [`Inbound`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InboundPacket {
    /// The local address it arrived on.
    pub local: IpAddr,
    /// The peer address it came from.
    pub from: IpAddr,
    /// The peer's UDP source port (UDP encapsulation; 0 for raw IP).
    pub udp_port: u16,
    /// The SCTP packet.
    pub packet: Vec<u8>,
}

impl InboundPacket {
    /// The packet as [`PacketIo::handle_inbound`] takes it.
    pub fn as_inbound(&self) -> Inbound<'_> {
        Inbound {
            local: self.local,
            from: self.from,
            udp_port: self.udp_port,
            packet: &self.packet,
        }
    }
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
        self.receive_with(ep, now, limit, |_| false)
    }

    /// As [`PacketIo::receive`], but every packet is first shown to `divert`: one it takes
    /// (returns `true` for) is not handed to `ep` — the caller passes it on, for instance to
    /// the endpoint of another thread that runs the association it belongs to, which hands
    /// it in with [`PacketIo::handle_inbound`] on its [`PacketIo::try_clone`]. Returns how
    /// many packets were read (diverted or not).
    pub fn receive_with(
        &mut self,
        ep: &mut Endpoint,
        now: sctp::Instant,
        limit: usize,
        mut divert: impl FnMut(&Inbound<'_>) -> bool,
    ) -> usize {
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
                let inbound = Inbound {
                    local: *local,
                    from: r.from,
                    udp_port: r.udp_port,
                    packet: &self.buf[r.start..r.end],
                };
                n += 1;
                if divert(&inbound) {
                    continue;
                }
                Self::hand_in(
                    ep,
                    now,
                    &inbound,
                    &mut self.stats,
                    self.udp.then_some(&mut self.ports),
                );
            }
        }
        n
    }

    /// Hands `ep` a packet another [`PacketIo`] on the same sockets read and diverted
    /// ([`PacketIo::receive_with`]), learning the peer's UDP port from it as
    /// [`PacketIo::receive`] does.
    pub fn handle_inbound(&mut self, ep: &mut Endpoint, now: sctp::Instant, p: &Inbound<'_>) {
        Self::hand_in(
            ep,
            now,
            p,
            &mut self.stats,
            self.udp.then_some(&mut self.ports),
        );
    }

    fn hand_in(
        ep: &mut Endpoint,
        now: sctp::Instant,
        p: &Inbound<'_>,
        stats: &mut PacketStats,
        ports: Option<&mut UdpPortMap>,
    ) {
        ep.handle_packet(now, engine_addr(p.local), engine_addr(p.from), p.packet);
        stats.packets_in += 1;
        if let Some(ports) = ports {
            // RFC 6951 §5.4: ports are learned from verified packets only.
            ports.learn(ep, p.from, p.udp_port, p.packet);
        }
    }

    /// Another handle on the same sockets (duplicated descriptors) with a copy of the UDP
    /// ports learned so far: it sends from another thread what an endpoint there has, and
    /// takes the packets the first handle diverts to it. Only one of the two should be
    /// polled and read: they share the sockets' receive queues.
    pub fn try_clone(&self) -> io::Result<PacketIo> {
        let socks = self
            .socks
            .iter()
            .map(|(ip, s)| Ok((*ip, s.try_clone()?)))
            .collect::<io::Result<Vec<_>>>()?;
        Ok(PacketIo {
            socks,
            ports: self.ports.clone(),
            udp: self.udp,
            sctp_port: self.sctp_port,
            udp_port: self.udp_port,
            stats: PacketStats::default(),
            buf: Vec::new(),
            batch: Vec::new(),
        })
    }

    /// Sends every packet `ep` has for the network.
    pub fn flush(&mut self, ep: &mut Endpoint, now: sctp::Instant) {
        let ports = self.udp.then_some(&self.ports);
        let r = net::transmit(ep, now, &self.socks, ports, &[], &mut self.batch);
        self.stats.packets_out += r.sent;
        self.stats.send_failures += r.failed;
    }
}
