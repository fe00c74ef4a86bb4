//! The packet transports under SCTP: UDP encapsulation (RFC 6951) and raw IPv4 (protocol
//! 132). One socket per local address; the engine's addresses carry port 0 and this module
//! maps them to UDP ports.

use std::collections::HashMap;
use std::io::{self, Read};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::os::fd::AsFd;

use sctp::wire::Packet;
use sctp::{Endpoint, State};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

/// The IANA port for SCTP over UDP (RFC 6951 §5.1).
pub const SCTP_UDP_PORT: u16 = 9899;
/// The IP protocol number of SCTP.
pub const IPPROTO_SCTP: u8 = 132;

/// How SCTP packets reach the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// RFC 6951 UDP encapsulation: every SCTP packet is the payload of one UDP datagram.
    Udp {
        /// Local UDP encapsulation port, the same on every local address (RFC 6951 §5.1).
        /// 0 picks an ephemeral port (then shared by all local addresses).
        local_port: u16,
        /// UDP port used towards a peer address until a verified packet from it shows its
        /// real encapsulation port (RFC 6951 §5.4).
        remote_port: u16,
    },
    /// SCTP directly over IPv4 through raw sockets (needs root or CAP_NET_RAW). The host
    /// must have no kernel SCTP, or the kernel answers our peers too.
    RawIpv4,
}

impl Transport {
    /// UDP encapsulation on the standard port 9899 at both ends.
    pub fn udp() -> Transport {
        Transport::Udp {
            local_port: SCTP_UDP_PORT,
            remote_port: SCTP_UDP_PORT,
        }
    }

    /// Bytes below SCTP besides the IP header (the UDP header for encapsulation, RFC 6951
    /// §5.6: the path MTU seen by SCTP shrinks by 8 bytes).
    pub fn overhead(&self) -> usize {
        match self {
            Transport::Udp { .. } => 8,
            Transport::RawIpv4 => 0,
        }
    }
}

impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Transport::Udp {
                local_port,
                remote_port,
            } => write!(
                f,
                "UDP encapsulation (RFC 6951), local UDP port {local_port}, remote UDP port {remote_port}"
            ),
            Transport::RawIpv4 => write!(f, "raw IPv4 (protocol 132)"),
        }
    }
}

/// A received IPv4 header, as far as SCTP needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Header {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// Protocol number.
    pub protocol: u8,
    /// Header length in bytes (IHL × 4).
    pub header_len: usize,
    /// Total length field.
    pub total_len: usize,
}

/// Why a raw IPv4 packet was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Ipv4Error {
    /// Shorter than the header.
    #[error("IPv4 packet of {0} bytes is shorter than its header")]
    Short(usize),
    /// Not version 4.
    #[error("IP version {0} is not 4")]
    Version(u8),
    /// IHL below 5 or beyond the data.
    #[error("IPv4 header length {0} is invalid")]
    HeaderLength(usize),
    /// A fragment (the kernel reassembles before raw delivery, so this is unexpected).
    #[error("IPv4 fragment")]
    Fragment,
}

/// Parses the IPv4 header a raw socket delivers in front of the payload (RFC 791 §3.1).
/// Returns the header and the payload, cut to the Total Length.
pub fn parse_ipv4(pkt: &[u8]) -> Result<(Ipv4Header, &[u8]), Ipv4Error> {
    if pkt.len() < 20 {
        return Err(Ipv4Error::Short(pkt.len()));
    }
    let version = pkt[0] >> 4;
    if version != 4 {
        return Err(Ipv4Error::Version(version));
    }
    let header_len = usize::from(pkt[0] & 0x0f) * 4;
    if header_len < 20 || header_len > pkt.len() {
        return Err(Ipv4Error::HeaderLength(header_len));
    }
    let total_len = usize::from(u16::from_be_bytes([pkt[2], pkt[3]]));
    // Linux hands raw sockets the datagram as received; a Total Length beyond the data
    // (or below the header) is cut to what is there.
    let end = total_len.clamp(header_len, pkt.len());
    let frag = u16::from_be_bytes([pkt[6], pkt[7]]);
    if frag & 0x3fff != 0 {
        return Err(Ipv4Error::Fragment);
    }
    let h = Ipv4Header {
        src: Ipv4Addr::new(pkt[12], pkt[13], pkt[14], pkt[15]),
        dst: Ipv4Addr::new(pkt[16], pkt[17], pkt[18], pkt[19]),
        protocol: pkt[9],
        header_len,
        total_len,
    };
    Ok((h, &pkt[header_len..end]))
}

/// The SCTP destination port of a packet (0 when too short).
pub fn sctp_dst_port(sctp: &[u8]) -> u16 {
    if sctp.len() < 12 {
        return 0;
    }
    u16::from_be_bytes([sctp[2], sctp[3]])
}

/// RFC 6951 §5.1 and §5.4: the remote UDP encapsulation port per peer endpoint — address
/// and SCTP port, so that two peers behind one address each get their replies. A port is
/// stored only from a packet that passed the CRC32c check and the verification-tag check of
/// one of our associations with that peer; until then replies go to the source port of the
/// last packet from that endpoint whose checksum was right (an INIT's, whose tag cannot be
/// checked), else to the configured default. A spoofed packet therefore cannot redirect an
/// association's replies.
#[derive(Debug, Clone, Default)]
pub struct UdpPortMap {
    default: u16,
    verified: HashMap<(IpAddr, u16), u16>,
    seen: HashMap<(IpAddr, u16), u16>,
}

/// The SCTP source and destination ports of a packet.
pub fn sctp_ports(pkt: &[u8]) -> (u16, u16) {
    match pkt.get(..4) {
        Some(b) => (
            u16::from_be_bytes([b[0], b[1]]),
            u16::from_be_bytes([b[2], b[3]]),
        ),
        None => (0, 0),
    }
}

impl UdpPortMap {
    /// A map that sends to `default` until told otherwise.
    pub fn new(default: u16) -> UdpPortMap {
        UdpPortMap {
            default,
            ..UdpPortMap::default()
        }
    }

    /// A packet from `ip`, SCTP port `sctp_port`, arrived from UDP port `udp_port`;
    /// `verified` when it passed the checksum and verification-tag checks.
    pub fn observe(&mut self, ip: IpAddr, sctp_port: u16, udp_port: u16, verified: bool) {
        if verified {
            self.verified.insert((ip, sctp_port), udp_port);
        }
        self.seen.insert((ip, sctp_port), udp_port);
    }

    /// Learns from a packet `ep` has just handled: checks its CRC32c and whether its
    /// verification tag is that of a live association of `ep` with the sending port.
    pub fn learn(&mut self, ep: &Endpoint, from: IpAddr, udp_port: u16, pkt: &[u8]) {
        let crc_ok = Packet::new_checked(pkt).is_ok_and(|p| p.verify_checksum().is_ok());
        if !crc_ok {
            return;
        }
        let (src_port, _) = sctp_ports(pkt);
        let vtag = pkt
            .get(4..8)
            .map_or(0, |b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
        let verified = vtag != 0
            && ep.associations().iter().any(|id| {
                ep.association(*id).is_some_and(|a| {
                    a.local_tag() == vtag && a.peer_port() == src_port && a.state() != State::Closed
                })
            });
        self.observe(from, src_port, udp_port, verified);
    }

    /// The UDP destination port for a packet to `ip`, SCTP port `sctp_port`.
    pub fn port_for(&self, ip: IpAddr, sctp_port: u16) -> u16 {
        let k = (ip, sctp_port);
        self.verified
            .get(&k)
            .or_else(|| self.seen.get(&k))
            .copied()
            .unwrap_or(self.default)
    }
}

/// One local address and its socket.
#[derive(Debug)]
pub(crate) enum LocalSocket {
    Udp(UdpSocket),
    Raw(Socket),
}

impl LocalSocket {
    pub(crate) fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        match self {
            LocalSocket::Udp(s) => s.as_fd(),
            LocalSocket::Raw(s) => s.as_fd(),
        }
    }

    /// The same socket under a duplicated descriptor.
    pub(crate) fn try_clone(&self) -> io::Result<LocalSocket> {
        Ok(match self {
            LocalSocket::Udp(s) => LocalSocket::Udp(s.try_clone()?),
            LocalSocket::Raw(s) => LocalSocket::Raw(s.try_clone()?),
        })
    }
}

const SOCKET_BUFFER: usize = 4 << 20;

/// Opens the sockets: one per local address. For UDP all share one port (the first
/// address's, when `local_port` is 0).
pub(crate) fn open(transport: Transport, locals: &[IpAddr]) -> io::Result<Vec<LocalSocket>> {
    let mut out = Vec::with_capacity(locals.len());
    match transport {
        Transport::Udp { local_port, .. } => {
            let mut port = local_port;
            for ip in locals {
                let domain = Domain::for_address(SocketAddr::new(*ip, 0));
                let s = Socket::new(domain, Type::DGRAM, Some(Protocol::UDP))?;
                // Larger buffers: a burst of a full congestion window must not be dropped
                // by the host before SCTP sees it.
                let _ = s.set_recv_buffer_size(SOCKET_BUFFER);
                let _ = s.set_send_buffer_size(SOCKET_BUFFER);
                s.bind(&SockAddr::from(SocketAddr::new(*ip, port)))
                    .map_err(|e| {
                        io::Error::new(e.kind(), format!("cannot bind UDP {ip}:{port}: {e}"))
                    })?;
                if port == 0 {
                    port = s.local_addr()?.as_socket().map_or(0, |a| a.port());
                }
                s.set_nonblocking(true)?;
                out.push(LocalSocket::Udp(s.into()));
            }
        }
        Transport::RawIpv4 => {
            for ip in locals {
                if !ip.is_ipv4() {
                    return Err(io::Error::new(
                        io::ErrorKind::Unsupported,
                        format!("raw transport is IPv4 only; {ip} is IPv6"),
                    ));
                }
                let s = Socket::new(
                    Domain::IPV4,
                    Type::RAW,
                    Some(Protocol::from(i32::from(IPPROTO_SCTP))),
                )
                .map_err(|e| {
                    io::Error::new(
                        e.kind(),
                        format!(
                            "cannot open a raw IPv4 socket for protocol 132 ({e}); run as root, \
                             grant CAP_NET_RAW, or use UDP encapsulation"
                        ),
                    )
                })?;
                let _ = s.set_recv_buffer_size(SOCKET_BUFFER);
                let _ = s.set_send_buffer_size(SOCKET_BUFFER);
                s.bind(&SockAddr::from(SocketAddr::new(*ip, 0)))
                    .map_err(|e| io::Error::new(e.kind(), format!("cannot bind raw {ip}: {e}")))?;
                s.set_nonblocking(true)?;
                out.push(LocalSocket::Raw(s));
            }
        }
    }
    Ok(out)
}

/// The UDP port the sockets got (0 for raw).
pub(crate) fn bound_udp_port(socks: &[LocalSocket]) -> u16 {
    match socks.first() {
        Some(LocalSocket::Udp(s)) => s.local_addr().map_or(0, |a| a.port()),
        _ => 0,
    }
}

/// A received SCTP packet: peer IP, UDP source port (0 for raw), bytes range in `buf`.
pub(crate) struct Received {
    pub from: IpAddr,
    pub udp_port: u16,
    pub start: usize,
    pub end: usize,
}

/// Reads one packet. `Ok(None)` when nothing is waiting; non-SCTP or foreign packets
/// return `Ok(Some)` with an empty range.
pub(crate) fn recv(
    sock: &LocalSocket,
    sctp_port: u16,
    buf: &mut [u8],
) -> io::Result<Option<Received>> {
    match sock {
        LocalSocket::Udp(s) => match s.recv_from(buf) {
            Ok((n, from)) => Ok(Some(Received {
                from: from.ip(),
                udp_port: from.port(),
                start: 0,
                end: n,
            })),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                // ICMP port unreachable from an earlier send: the peer is not (yet)
                // listening; SCTP's own timers deal with it.
                Ok(Some(Received {
                    from: Ipv4Addr::UNSPECIFIED.into(),
                    udp_port: 0,
                    start: 0,
                    end: 0,
                }))
            }
            Err(e) => Err(e),
        },
        LocalSocket::Raw(s) => {
            let mut r: &Socket = s;
            match r.read(buf) {
                Ok(n) => {
                    let empty = Received {
                        from: Ipv4Addr::UNSPECIFIED.into(),
                        udp_port: 0,
                        start: 0,
                        end: 0,
                    };
                    let Ok((h, payload)) = parse_ipv4(&buf[..n]) else {
                        return Ok(Some(empty));
                    };
                    // Every raw socket of protocol 132 sees every SCTP packet for its
                    // address: keep only ours.
                    if h.protocol != IPPROTO_SCTP || sctp_dst_port(payload) != sctp_port {
                        return Ok(Some(empty));
                    }
                    Ok(Some(Received {
                        from: IpAddr::V4(h.src),
                        udp_port: 0,
                        start: h.header_len,
                        end: h.header_len + payload.len(),
                    }))
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
                Err(e) => Err(e),
            }
        }
    }
}

/// Most packets handed to one `sendmmsg`.
const BATCH: usize = 64;

/// Sends SCTP packets (destination address with the UDP port when encapsulating; port 0
/// for raw IP) with as few system calls as possible. Returns (sent, failed); transient
/// failures (full buffers, unreachable) count as losses: SCTP retransmits.
pub(crate) fn send_batch(sock: &LocalSocket, pkts: &[(usize, SocketAddr, Vec<u8>)]) -> (u64, u64) {
    use rustix::net::{MMsgHdr, SendAncillaryBuffer, SendFlags, SocketAddrAny};
    let fd = sock.fd();
    let (mut sent, mut failed) = (0u64, 0u64);
    for group in pkts.chunks(BATCH) {
        let addrs: Vec<SocketAddrAny> = group.iter().map(|p| SocketAddrAny::from(p.1)).collect();
        let iovs: Vec<[std::io::IoSlice<'_>; 1]> = group
            .iter()
            .map(|p| [std::io::IoSlice::new(&p.2)])
            .collect();
        let mut controls: Vec<SendAncillaryBuffer<'_, '_, '_>> = group
            .iter()
            .map(|_| SendAncillaryBuffer::default())
            .collect();
        let mut msgs: Vec<MMsgHdr<'_>> = addrs
            .iter()
            .zip(iovs.iter())
            .zip(controls.iter_mut())
            .map(|((a, iov), c)| MMsgHdr::new_with_addr(a, iov, c))
            .collect();
        let mut at = 0;
        while at < msgs.len() {
            match rustix::net::sendmmsg(fd, &mut msgs[at..], SendFlags::empty()) {
                Ok(0) => {
                    failed += (msgs.len() - at) as u64;
                    break;
                }
                Ok(n) => {
                    sent += n as u64;
                    at += n;
                }
                Err(rustix::io::Errno::INTR) => {}
                Err(_) => {
                    // The first message failed (full buffer, unreachable): drop it, go on.
                    failed += 1;
                    at += 1;
                }
            }
        }
    }
    (sent, failed)
}

/// What [`transmit`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Sent {
    pub sent: u64,
    pub failed: u64,
    pub blackholed: u64,
}

/// Sends every packet `ep` has: each from the socket of its local address (or one of the
/// same IP version), to the peer's UDP encapsulation port when `ports` is given, in batches
/// of one `sendmmsg` per socket; packets from a `blackhole` address are dropped (a path
/// taken down on purpose). `batch` is scratch space.
pub(crate) fn transmit(
    ep: &mut Endpoint,
    now: sctp::Instant,
    socks: &[(IpAddr, LocalSocket)],
    ports: Option<&UdpPortMap>,
    blackhole: &[IpAddr],
    batch: &mut Vec<(usize, SocketAddr, Vec<u8>)>,
) -> Sent {
    let mut r = Sent::default();
    batch.clear();
    while let Some(t) = ep.poll_transmit(now) {
        let (local, remote) = (t.local.ip(), t.remote.ip());
        if blackhole.contains(&local) {
            r.blackholed += 1;
            continue;
        }
        let idx = socks.iter().position(|(ip, _)| *ip == local).or_else(|| {
            socks
                .iter()
                .position(|(ip, _)| ip.is_ipv4() == remote.is_ipv4())
        });
        let Some(idx) = idx else {
            r.failed += 1;
            continue;
        };
        let port = ports.map_or(0, |p| p.port_for(remote, sctp_ports(&t.bytes).1));
        batch.push((idx, SocketAddr::new(remote, port), t.bytes));
    }
    let mut start = 0;
    while start < batch.len() {
        let idx = batch[start].0;
        let end = batch[start..]
            .iter()
            .position(|b| b.0 != idx)
            .map_or(batch.len(), |n| start + n);
        let (sent, failed) = send_batch(&socks[idx].1, &batch[start..end]);
        r.sent += sent;
        r.failed += failed;
        start = end;
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ipv4(total: u16, proto: u8, frag: u16, payload: &[u8]) -> Vec<u8> {
        let mut p = vec![
            0x45, 0, 0, 0, 0, 1, 0, 0, 64, proto, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ];
        p[2..4].copy_from_slice(&total.to_be_bytes());
        p[6..8].copy_from_slice(&frag.to_be_bytes());
        p.extend_from_slice(payload);
        p
    }

    /// RFC 791 §3.1: IHL, Total Length, addresses and protocol of a received header.
    #[test]
    fn rfc791_ipv4_header_of_raw_receive() {
        let p = ipv4(24, 132, 0x4000, &[1, 2, 3, 4, 9, 9]);
        let (h, payload) = parse_ipv4(&p).unwrap();
        assert_eq!(h.src, Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(h.dst, Ipv4Addr::new(10, 0, 0, 2));
        assert_eq!(h.protocol, 132);
        assert_eq!(h.header_len, 20);
        // Trailing bytes beyond Total Length (link padding) are not SCTP.
        assert_eq!(payload, &[1, 2, 3, 4]);
        // Options: IHL 6.
        let mut o = ipv4(28, 132, 0, &[0, 0, 0, 0, 7, 7, 7, 7]);
        o[0] = 0x46;
        let (h, payload) = parse_ipv4(&o).unwrap();
        assert_eq!(h.header_len, 24);
        assert_eq!(payload, &[7, 7, 7, 7]);
    }

    #[test]
    fn rfc791_bad_ipv4_headers_are_refused_not_panicking() {
        assert_eq!(parse_ipv4(&[0x45; 10]), Err(Ipv4Error::Short(10)));
        let mut v6 = ipv4(20, 132, 0, &[]);
        v6[0] = 0x65;
        assert_eq!(parse_ipv4(&v6), Err(Ipv4Error::Version(6)));
        let mut ihl = ipv4(20, 132, 0, &[]);
        ihl[0] = 0x4f;
        assert_eq!(parse_ipv4(&ihl), Err(Ipv4Error::HeaderLength(60)));
        assert_eq!(
            parse_ipv4(&ipv4(24, 132, 0x2000, &[0; 4])),
            Err(Ipv4Error::Fragment)
        );
    }

    /// RFC 6951 §5.4: only a verified packet stores the peer's encapsulation port; an
    /// unverified one is only where replies go until then; ports are per peer endpoint
    /// (address and SCTP port).
    #[test]
    fn rfc6951_5_4_port_stored_only_from_verified_packets() {
        let ip: IpAddr = Ipv4Addr::new(192, 0, 2, 1).into();
        let mut m = UdpPortMap::new(9899);
        assert_eq!(m.port_for(ip, 5000), 9899);
        m.observe(ip, 5000, 40000, false);
        assert_eq!(m.port_for(ip, 5000), 40000);
        m.observe(ip, 5000, 40001, true);
        assert_eq!(m.port_for(ip, 5000), 40001);
        // A spoofed packet with another source port does not redirect the association.
        m.observe(ip, 5000, 666, false);
        assert_eq!(m.port_for(ip, 5000), 40001);
        // A verified packet from a new port (NAT rebinding) moves it.
        m.observe(ip, 5000, 40002, true);
        assert_eq!(m.port_for(ip, 5000), 40002);
        // A second client behind the same address keeps its own port.
        m.observe(ip, 5001, 50000, false);
        assert_eq!(m.port_for(ip, 5001), 50000);
        assert_eq!(m.port_for(ip, 5000), 40002);
        // Another peer address keeps the default.
        assert_eq!(m.port_for(Ipv4Addr::new(192, 0, 2, 2).into(), 5000), 9899);
    }

    /// RFC 6951 §5.4: a packet with a wrong CRC32c or a verification tag of no association
    /// teaches nothing, whatever its UDP port.
    #[test]
    fn rfc6951_5_4_bad_checksum_or_tag_teaches_nothing() {
        let ep = Endpoint::new(sctp::EndpointConfig::new(
            5000,
            vec!["192.0.2.9:0".parse().unwrap()],
            1,
        ));
        let ip: IpAddr = Ipv4Addr::new(192, 0, 2, 1).into();
        let mut m = UdpPortMap::new(9899);
        // A HEARTBEAT-ish packet with a made-up tag and a zero checksum.
        let mut pkt = vec![0x13, 0x88, 0x13, 0x88, 0, 0, 0, 9, 0, 0, 0, 0, 4, 0, 0, 4];
        m.learn(&ep, ip, 666, &pkt);
        assert_eq!(m.port_for(ip, 5000), 9899, "bad checksum");
        let crc = sctp::wire::compute_checksum(&pkt);
        pkt[8..12].copy_from_slice(&crc.to_le_bytes());
        m.learn(&ep, ip, 667, &pkt);
        // Right checksum, unknown tag: where replies go, but not stored as verified.
        assert_eq!(m.port_for(ip, 5000), 667);
        m.observe(ip, 5000, 40000, true);
        m.learn(&ep, ip, 668, &pkt);
        assert_eq!(m.port_for(ip, 5000), 40000);
    }

    /// RFC 6951 §5.6: encapsulation costs 8 bytes of path MTU.
    #[test]
    fn rfc6951_5_6_udp_overhead() {
        assert_eq!(Transport::udp().overhead(), 8);
        assert_eq!(Transport::RawIpv4.overhead(), 0);
    }
}
