//! Transport addresses: where a connection goes (or a listener listens) and over which lower
//! layer, in one syntax for the API and every tool.
//!
//! | spec | lower layer |
//! |---|---|
//! | `HOST:PORT` or `tcp://HOST:PORT` | MPA over the kernel's TCP |
//! | `sctp+udp://A[,B...]:PORT` | DDP over softrnic's SCTP (RFC 5043), UDP encapsulation (RFC 6951), no privileges |
//! | `sctp://A[,B...]:PORT` | DDP over softrnic's SCTP directly on IPv4 (protocol 132; root or CAP_NET_RAW) |
//! | `ksctp://A[,B...]:PORT` | DDP over the kernel's SCTP (one-to-one sockets; a kernel with SCTP, no privileges) |
//! | `tap://IFACE/HOST:PORT` | MPA over softrnic's own TCP/IP on the TAP device IFACE (kernel bypass) |
//! | `xdp://IFACE/HOST:PORT` | the same on an AF_XDP socket on IFACE (kernel bypass; root; builds with the `xdp` feature) |
//! | `dev://NAME/HOST:PORT` | the same on a device attached with [`crate::Rnic::attach_device`] |
//!
//! Several addresses make the SCTP association multihomed: a connect names the peer's
//! addresses (the first is tried; the peer announces all of its own), a listener its local
//! ones. IPv6 addresses go in brackets (`[::1]:7174`). Options after `?`, `&`-separated:
//! `udp-port=N` (the listener's UDP encapsulation port, default 9899; 0 picks one; on a
//! connect, the peer's), `local=A[,B...]` (a connect's local addresses; by default the
//! ones the host routes the peer's addresses from), `mtu=N` (path MTU at the IP level,
//! default 1500: DDP segments are sized to fit it, RFC 5043 §9); for `sctp://`,
//! `dev=tap:IFACE`, `dev=xdp:IFACE` or `dev=NAME` (an attached device) carries the packets as
//! raw IPv4 on that device with softrnic's own IP instead of the host's raw sockets (kernel
//! bypass; the addresses are the stack's own on the device); `cmt=on|pf|nopf|off` stripes new
//! data over every active path (Concurrent Multipath Transfer; `on` and `pf` with CMT-PF,
//! `nopf` without it; default `off`: one path at a time, the others for failover).
//! `ksctp://` takes IPv4 addresses (a listener's are bound with `sctp_bindx`, none or
//! `0.0.0.0` for all; a connect's peer addresses go to `sctp_connectx`, at most four),
//! `bind=A[,B...]` (or `local=`: a connect's own addresses, bound with `sctp_bindx`; by
//! default the kernel's choice) and `mtu=N` (the path MTU used until the kernel reports
//! the association's own).
//!
//! On a device (`tap://`, `dev://`) softrnic's stack owns its own IPv4 address. A listener
//! names that address (`tap://tap0/10.0.0.2:7174`); a connect names the peer and gives its
//! own address with `local=` (`tap://tap0/10.0.0.1:7174?local=10.0.0.2`), unless the device
//! already has one. Options: `prefix=N` (the on-link prefix length of the stack's address,
//! default 24), `gw=A` (default gateway), `mtu=N` (IP MTU, default the device's),
//! `mac=aa:bb:cc:dd:ee:ff` (default: an AF_XDP interface's own, otherwise 02:53 and the four
//! octets of the stack's address); for `xdp://` also
//! `queue=N` (the interface queue, default 0), `mode=skb|native` (generic XDP in copy
//! mode, the default, or the driver's native XDP) and `take=addr|all` (softrnic's XDP
//! program hands the socket the frames of the stack's addresses and leaves the rest to the
//! kernel, the default; or takes every frame of the queue).

use std::fmt;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs, UdpSocket};
use std::str::FromStr;

/// The RFC 6951 port for SCTP over UDP.
pub const SCTP_UDP_PORT: u16 = 9899;
/// Default path MTU for SCTP connections.
pub const DEFAULT_SCTP_MTU: usize = 1500;

/// How SCTP packets travel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SctpEncap {
    /// RFC 6951 UDP encapsulation with this UDP port (the listener's own, or on a connect
    /// the peer's).
    Udp(u16),
    /// IPv4 protocol 132 through raw sockets.
    RawIpv4,
    /// The kernel's SCTP (`ksctp://`): one-to-one SCTP sockets.
    Kernel,
}

/// An SCTP transport address.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SctpAddr {
    /// Peer addresses (connect) or local addresses (listen).
    pub addrs: Vec<IpAddr>,
    /// SCTP port.
    pub port: u16,
    /// Packet transport.
    pub encap: SctpEncap,
    /// A connect's own addresses (empty: chosen by route).
    pub local: Vec<IpAddr>,
    /// Path MTU at the IP level.
    pub mtu: usize,
    /// Raw IPv4 on a raw-Ethernet device with softrnic's own IP (`dev=`), instead of the
    /// host's raw sockets: the device's kind and name.
    pub device: Option<(DevKind, String)>,
    /// How a multihomed association uses its paths (`cmt=`).
    pub multipath: Multipath,
}

/// How a multihomed SCTP association uses its paths.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Multipath {
    /// One path carries new data, the others take over when it fails (RFC 9260 §6.4,
    /// with SCTP-PF's quick failover, RFC 7829). `cmt=off`, the default.
    #[default]
    Failover,
    /// Concurrent Multipath Transfer with CMT-PF: new data striped over every active path;
    /// a path that times out carries nothing until a heartbeat answers. `cmt=on` or `cmt=pf`.
    CmtPf,
    /// Concurrent Multipath Transfer without the Potentially Failed state (paths stay in use
    /// until Path.Max.Retrans timeouts mark them failed). `cmt=nopf`.
    Cmt,
}

impl Multipath {
    /// Applies the mode to an association configuration.
    pub fn apply(self, c: &mut sctp::AssociationConfig) {
        match self {
            Multipath::Failover => c.cmt = None,
            Multipath::CmtPf => {
                c.cmt = Some(sctp::CmtConfig::default());
                c.pf_max_retrans = c.pf_max_retrans.or(Some(0));
            }
            Multipath::Cmt => {
                c.cmt = Some(sctp::CmtConfig::default());
                c.pf_max_retrans = None;
            }
        }
    }
}

/// Which raw-Ethernet device carries softrnic's own TCP/IP.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DevKind {
    /// A TAP device, opened by name (created if missing).
    Tap,
    /// A device attached to the RNIC by the application ([`crate::Rnic::attach_device`]).
    Attached,
    /// An AF_XDP socket on one queue of an interface.
    Xdp,
}

/// An MPA/TCP address on a raw-Ethernet device.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DevAddr {
    /// The kind of device.
    pub kind: DevKind,
    /// Its name (interface name for TAP).
    pub device: String,
    /// The peer (connect) or the stack's own address (listen).
    pub addr: std::net::SocketAddrV4,
    /// A connect's own address (`None`: the device's first).
    pub local: Option<std::net::Ipv4Addr>,
    /// Prefix length of the stack's address.
    pub prefix: u8,
    /// Default gateway.
    pub gateway: Option<std::net::Ipv4Addr>,
    /// IP MTU (`None`: the device's).
    pub mtu: Option<usize>,
    /// MAC address (`None`: the default of [`crate::device::DeviceConfig::mac`]).
    pub mac: Option<[u8; 6]>,
    /// AF_XDP: the interface queue.
    pub queue: u32,
    /// AF_XDP: native (driver) XDP rather than generic (copy) mode.
    pub native: bool,
    /// AF_XDP: every frame of the queue to the stack, not only its addresses' frames.
    pub take_all: bool,
}

impl DevAddr {
    /// `addr` on device `device` of kind `kind`, every option at its default: the
    /// device's first address as the local one, a /24 prefix ([`DEFAULT_DEV_PREFIX`]), no
    /// gateway, the device's MTU and the default MAC, AF_XDP queue 0 in generic mode taking
    /// only the stack's addresses' frames.
    pub fn new(kind: DevKind, device: impl Into<String>, addr: std::net::SocketAddrV4) -> Self {
        DevAddr {
            kind,
            device: device.into(),
            addr,
            local: None,
            prefix: DEFAULT_DEV_PREFIX,
            gateway: None,
            mtu: None,
            mac: None,
            queue: 0,
            native: false,
            take_all: false,
        }
    }
}

/// Default prefix length of a device address.
pub const DEFAULT_DEV_PREFIX: u8 = 24;

/// Where a connection goes and over which lower layer. See the [module documentation](self).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TransportAddr {
    /// MPA over the kernel's TCP.
    Tcp(SocketAddr),
    /// DDP over softrnic's SCTP.
    Sctp(SctpAddr),
    /// MPA over softrnic's own TCP/IP on a raw-Ethernet device.
    Dev(DevAddr),
}

/// A transport spec that does not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "bad transport address {spec:?}: {why} (forms: HOST:PORT, tcp://HOST:PORT, sctp+udp://A[,B]:PORT[?udp-port=N&local=A,B&mtu=N], sctp://A[,B]:PORT, ksctp://A[,B]:PORT[?bind=A,B&mtu=N], tap://IFACE/IPV4:PORT[?local=A&prefix=N&gw=A&mtu=N&mac=M], xdp://IFACE/IPV4:PORT[?...&queue=N&mode=skb|native&take=addr|all], dev://NAME/IPV4:PORT)"
)]
pub struct AddrError {
    /// The spec.
    pub spec: String,
    /// What is wrong.
    pub why: String,
}

impl TransportAddr {
    /// The lower layer's name: "tcp", "sctp+udp", "sctp", "ksctp", "tap", "xdp" or "dev".
    pub fn scheme(&self) -> &'static str {
        match self {
            TransportAddr::Tcp(_) => "tcp",
            TransportAddr::Dev(d) => match d.kind {
                DevKind::Tap => "tap",
                DevKind::Attached => "dev",
                DevKind::Xdp => "xdp",
            },
            TransportAddr::Sctp(s) => match s.encap {
                SctpEncap::Udp(_) => "sctp+udp",
                SctpEncap::RawIpv4 => "sctp",
                SctpEncap::Kernel => "ksctp",
            },
        }
    }

    /// Parses a spec, resolving a host name for TCP; `default_port` where none is given.
    pub fn parse_with_port(spec: &str, default_port: u16) -> Result<TransportAddr, AddrError> {
        let err = |why: &str| AddrError {
            spec: spec.to_string(),
            why: why.to_string(),
        };
        let (scheme, rest) = match spec.split_once("://") {
            Some((s, r)) => (s, r),
            None => ("tcp", spec),
        };
        if scheme == "tap" || scheme == "dev" || scheme == "xdp" {
            return parse_dev(scheme, rest, default_port).map_err(|w| err(&w));
        }
        let (hostport, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (hosts, port) = split_port(hostport, default_port).map_err(|w| err(&w))?;
        match scheme {
            "tcp" => {
                if !query.is_empty() {
                    return Err(err("tcp:// takes no options"));
                }
                if hosts.contains(',') {
                    return Err(err(
                        "MPA over TCP has one peer address (multihoming is SCTP's)",
                    ));
                }
                let host = hosts.trim_start_matches('[').trim_end_matches(']');
                let addr = (host, port)
                    .to_socket_addrs()
                    .map_err(|e| err(&format!("cannot resolve {host}: {e}")))?
                    .next()
                    .ok_or_else(|| err("the host resolves to no address"))?;
                Ok(TransportAddr::Tcp(addr))
            }
            "sctp+udp" | "sctp" | "ksctp" => {
                let addrs = parse_ips(hosts).map_err(|w| err(&w))?;
                let mut s = SctpAddr {
                    addrs,
                    port,
                    encap: match scheme {
                        "sctp" => SctpEncap::RawIpv4,
                        "ksctp" => SctpEncap::Kernel,
                        _ => SctpEncap::Udp(SCTP_UDP_PORT),
                    },
                    local: Vec::new(),
                    mtu: DEFAULT_SCTP_MTU,
                    device: None,
                    multipath: Multipath::Failover,
                };
                for opt in query.split('&').filter(|o| !o.is_empty()) {
                    let (k, v) = opt
                        .split_once('=')
                        .ok_or_else(|| err("option without '='"))?;
                    match k {
                        "udp-port" if scheme == "sctp+udp" => {
                            let p = v.parse().map_err(|_| err("udp-port takes 0-65535"))?;
                            s.encap = SctpEncap::Udp(p);
                        }
                        "local" => s.local = parse_ips(v).map_err(|w| err(&w))?,
                        "bind" if scheme == "ksctp" => {
                            s.local = parse_ips(v).map_err(|w| err(&w))?
                        }
                        "dev" if scheme == "sctp" => {
                            let (kind, name) = match v.split_once(':') {
                                Some(("tap", n)) => (DevKind::Tap, n),
                                Some(("xdp", n)) => (DevKind::Xdp, n),
                                Some(("dev", n)) => (DevKind::Attached, n),
                                None => (DevKind::Attached, v),
                                Some(_) => {
                                    return Err(err("dev takes tap:IFACE, xdp:IFACE or NAME"));
                                }
                            };
                            if name.is_empty() || name.len() > 15 {
                                return Err(err("dev takes a device name of 1-15 characters"));
                            }
                            s.device = Some((kind, name.to_string()));
                        }
                        "mtu" => {
                            let m: usize = v.parse().map_err(|_| err("mtu takes a number"))?;
                            if !(576..=65535).contains(&m) {
                                return Err(err(
                                    "mtu must be 576-65535 (IPv4's minimum reassembly size to the largest IP packet)",
                                ));
                            }
                            s.mtu = m;
                        }
                        "cmt" if scheme != "ksctp" => {
                            s.multipath = match v {
                                "off" => Multipath::Failover,
                                "on" | "pf" => Multipath::CmtPf,
                                "nopf" => Multipath::Cmt,
                                _ => return Err(err("cmt takes on, pf, nopf or off")),
                            }
                        }
                        _ => return Err(err(&format!("unknown option {k:?}"))),
                    }
                }
                if scheme == "ksctp" {
                    check_ksctp(&s).map_err(|w| err(&w))?;
                }
                Ok(TransportAddr::Sctp(s))
            }
            other => Err(err(&format!(
                "unknown scheme {other:?} (tcp, sctp+udp, sctp, ksctp, tap, xdp or dev)"
            ))),
        }
    }
}

impl FromStr for TransportAddr {
    type Err = AddrError;

    fn from_str(s: &str) -> Result<TransportAddr, AddrError> {
        TransportAddr::parse_with_port(s, 0)
    }
}

impl From<SocketAddr> for TransportAddr {
    fn from(a: SocketAddr) -> TransportAddr {
        TransportAddr::Tcp(a)
    }
}

fn fmt_ip(ip: &IpAddr) -> String {
    match ip {
        IpAddr::V4(v) => v.to_string(),
        IpAddr::V6(v) => format!("[{v}]"),
    }
}

impl fmt::Display for TransportAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TransportAddr::Tcp(a) => write!(f, "tcp://{a}"),
            TransportAddr::Dev(d) => {
                write!(f, "{}://{}/{}", self.scheme(), d.device, d.addr)?;
                let mut opts = Vec::new();
                if let Some(l) = d.local {
                    opts.push(format!("local={l}"));
                }
                if d.prefix != DEFAULT_DEV_PREFIX {
                    opts.push(format!("prefix={}", d.prefix));
                }
                if let Some(g) = d.gateway {
                    opts.push(format!("gw={g}"));
                }
                if let Some(m) = d.mtu {
                    opts.push(format!("mtu={m}"));
                }
                if let Some(m) = d.mac {
                    let h: Vec<String> = m.iter().map(|b| format!("{b:02x}")).collect();
                    opts.push(format!("mac={}", h.join(":")));
                }
                if d.queue != 0 {
                    opts.push(format!("queue={}", d.queue));
                }
                if d.native {
                    opts.push("mode=native".into());
                }
                if d.take_all {
                    opts.push("take=all".into());
                }
                if !opts.is_empty() {
                    write!(f, "?{}", opts.join("&"))?;
                }
                Ok(())
            }
            TransportAddr::Sctp(s) => {
                let ips: Vec<String> = s.addrs.iter().map(fmt_ip).collect();
                write!(f, "{}://{}:{}", self.scheme(), ips.join(","), s.port)?;
                let mut opts = Vec::new();
                if let SctpEncap::Udp(p) = s.encap
                    && p != SCTP_UDP_PORT
                {
                    opts.push(format!("udp-port={p}"));
                }
                if !s.local.is_empty() {
                    let l: Vec<String> = s.local.iter().map(fmt_ip).collect();
                    let key = if s.encap == SctpEncap::Kernel {
                        "bind"
                    } else {
                        "local"
                    };
                    opts.push(format!("{key}={}", l.join(",")));
                }
                if s.mtu != DEFAULT_SCTP_MTU {
                    opts.push(format!("mtu={}", s.mtu));
                }
                if let Some((kind, name)) = &s.device {
                    opts.push(match kind {
                        DevKind::Tap => format!("dev=tap:{name}"),
                        DevKind::Xdp => format!("dev=xdp:{name}"),
                        DevKind::Attached => format!("dev={name}"),
                    });
                }
                match s.multipath {
                    Multipath::Failover => {}
                    Multipath::CmtPf => opts.push("cmt=pf".into()),
                    Multipath::Cmt => opts.push("cmt=nopf".into()),
                }
                if !opts.is_empty() {
                    write!(f, "?{}", opts.join("&"))?;
                }
                Ok(())
            }
        }
    }
}

/// What the kernel's SCTP sockets take: IPv4 addresses, at most four peers for
/// `sctp_connectx` (a listener binds any number).
fn check_ksctp(s: &SctpAddr) -> Result<(), String> {
    if s.addrs.iter().chain(&s.local).any(|a| !a.is_ipv4()) {
        return Err("ksctp:// takes IPv4 addresses".into());
    }
    if s.addrs.len() > crate::transport::ksctp::MAX_CONNECTX {
        return Err(format!(
            "ksctp:// names at most {} addresses",
            crate::transport::ksctp::MAX_CONNECTX
        ));
    }
    Ok(())
}

/// Parses the part after `tap://`, `xdp://` or `dev://`: `NAME/IPV4[:PORT][?options]`.
fn parse_dev(scheme: &str, rest: &str, default_port: u16) -> Result<TransportAddr, String> {
    let (main, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (device, hostport) = main
        .split_once('/')
        .ok_or("a device address is DEVICE/IPV4:PORT (e.g. tap0/10.0.0.2:7174)")?;
    if device.is_empty() || device.len() > 15 {
        return Err(format!("{device:?} is not a device name (1-15 characters)"));
    }
    let (host, port) = split_port(hostport, default_port)?;
    let ip: std::net::Ipv4Addr = host
        .parse()
        .map_err(|_| format!("{host:?} is not an IPv4 address (the device stack speaks IPv4)"))?;
    let kind = match scheme {
        "tap" => DevKind::Tap,
        "xdp" => DevKind::Xdp,
        _ => DevKind::Attached,
    };
    let mut d = DevAddr::new(kind, device, std::net::SocketAddrV4::new(ip, port));
    for opt in query.split('&').filter(|o| !o.is_empty()) {
        let (k, v) = opt.split_once('=').ok_or("option without '='")?;
        let ipv4 = |v: &str| {
            v.parse::<std::net::Ipv4Addr>()
                .map_err(|_| format!("{k} takes an IPv4 address, not {v:?}"))
        };
        match k {
            "local" => d.local = Some(ipv4(v)?),
            "gw" => d.gateway = Some(ipv4(v)?),
            "prefix" => {
                d.prefix = v
                    .parse()
                    .ok()
                    .filter(|p| (1..=32).contains(p))
                    .ok_or("prefix takes 1-32")?;
            }
            "mtu" => {
                let m: usize = v.parse().map_err(|_| "mtu takes a number")?;
                if !(576..=65_535).contains(&m) {
                    return Err("mtu must be 576-65535".into());
                }
                d.mtu = Some(m);
            }
            "mac" => {
                let b: Vec<u8> = v
                    .split(':')
                    .map(|x| u8::from_str_radix(x, 16))
                    .collect::<Result<_, _>>()
                    .map_err(|_| "mac takes six hex octets, aa:bb:cc:dd:ee:ff")?;
                let m: [u8; 6] = b
                    .try_into()
                    .map_err(|_| "mac takes six hex octets, aa:bb:cc:dd:ee:ff")?;
                if m[0] & 1 == 1 {
                    return Err("mac must be a unicast address (first octet even)".into());
                }
                d.mac = Some(m);
            }
            "queue" if scheme == "xdp" => {
                d.queue = v.parse().map_err(|_| "queue takes a queue number")?;
            }
            "mode" if scheme == "xdp" => {
                d.native = match v {
                    "skb" | "generic" => false,
                    "native" | "drv" => true,
                    _ => return Err("mode takes skb (generic XDP, copy mode) or native".into()),
                };
            }
            "take" if scheme == "xdp" => {
                d.take_all = match v {
                    "addr" | "addrs" => false,
                    "all" => true,
                    _ => {
                        return Err("take takes addr (the stack's addresses' frames, the rest \
                                    to the kernel) or all (every frame of the queue)"
                            .into());
                    }
                };
            }
            _ => return Err(format!("unknown option {k:?}")),
        }
    }
    Ok(TransportAddr::Dev(d))
}

/// Splits "HOSTS:PORT" (IPv6 in brackets); no port: `default`.
fn split_port(s: &str, default: u16) -> Result<(&str, u16), String> {
    if s.is_empty() {
        return Err("no address".into());
    }
    let (hosts, port) = match s.rfind(':') {
        Some(i) if s.ends_with(']') || !s[i..].chars().skip(1).all(|c| c.is_ascii_digit()) => {
            (s, None)
        }
        Some(i) if s[..i].ends_with(']') || !s[..i].contains(':') => (&s[..i], Some(&s[i + 1..])),
        Some(_) => (s, None),
        None => (s, None),
    };
    let port = match port {
        Some(p) => p
            .parse()
            .map_err(|_| format!("port {p:?} is not 0-65535"))?,
        None => default,
    };
    Ok((hosts, port))
}

fn parse_ips(s: &str) -> Result<Vec<IpAddr>, String> {
    let mut v = Vec::new();
    for part in s.split(',') {
        let p = part.trim().trim_start_matches('[').trim_end_matches(']');
        let ip: IpAddr = p
            .parse()
            .map_err(|_| format!("{part:?} is not an IP address (SCTP takes literal addresses)"))?;
        if !v.contains(&ip) {
            v.push(ip);
        }
    }
    if v.is_empty() {
        return Err("no address".into());
    }
    Ok(v)
}

/// The local address the host would use to reach `peer` (no packet is sent).
pub(crate) fn route_source(peer: IpAddr) -> std::io::Result<IpAddr> {
    let any: SocketAddr = if peer.is_ipv4() {
        "0.0.0.0:0"
            .parse()
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)))
    } else {
        SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, 0))
    };
    let s = UdpSocket::bind(any)?;
    s.connect(SocketAddr::new(peer, 9))?;
    Ok(s.local_addr()?.ip())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ksctp_specs_parse_and_print_back() {
        let t: TransportAddr = "ksctp://10.99.0.2,10.99.1.2:7174?bind=10.99.0.1,10.99.1.1"
            .parse()
            .unwrap();
        let TransportAddr::Sctp(a) = &t else {
            panic!("{t:?}")
        };
        assert_eq!(a.encap, SctpEncap::Kernel);
        assert_eq!(t.scheme(), "ksctp");
        assert_eq!(
            a.addrs,
            vec![IpAddr::from([10, 99, 0, 2]), IpAddr::from([10, 99, 1, 2])]
        );
        assert_eq!(
            a.local,
            vec![IpAddr::from([10, 99, 0, 1]), IpAddr::from([10, 99, 1, 1])]
        );
        assert_eq!(a.port, 7174);
        assert_eq!(
            t.to_string(),
            "ksctp://10.99.0.2,10.99.1.2:7174?bind=10.99.0.1,10.99.1.1"
        );
        assert_eq!(t.to_string().parse::<TransportAddr>().unwrap(), t);
        // local= is the same as bind=; mtu= as for sctp://.
        let l: TransportAddr = "ksctp://0.0.0.0:9?local=10.0.0.1&mtu=9000".parse().unwrap();
        let TransportAddr::Sctp(la) = &l else {
            panic!()
        };
        assert_eq!((la.mtu, la.local.len()), (9000, 1));
        assert_eq!(l.to_string(), "ksctp://0.0.0.0:9?bind=10.0.0.1&mtu=9000");
        // The default port.
        let d = TransportAddr::parse_with_port("ksctp://127.0.0.1", 7174).unwrap();
        assert_eq!(d.to_string(), "ksctp://127.0.0.1:7174");
    }

    #[test]
    fn ksctp_specs_refused() {
        for bad in [
            "ksctp://[::1]:7174",                                // IPv6
            "ksctp://10.0.0.1:7174?bind=::1",                    // IPv6 bind
            "ksctp://1.0.0.1,1.0.0.2,1.0.0.3,1.0.0.4,1.0.0.5:7", // more than connectx takes
            "ksctp://10.0.0.1:7174?udp-port=9899",               // no UDP encapsulation here
            "ksctp://10.0.0.1:7174?dev=tap0",                    // no device
            "ksctp://10.0.0.1:7174?cmt=on",                      // the kernel's own path use
            "ksctp://10.0.0.1:7174?mtu=100",
            "ksctp://host.example:7174", // literal addresses only
        ] {
            assert!(bad.parse::<TransportAddr>().is_err(), "{bad} parsed");
        }
        // bind= is ksctp's alone.
        assert!(
            "sctp://10.0.0.1:7?bind=10.0.0.2"
                .parse::<TransportAddr>()
                .is_err()
        );
    }

    #[test]
    fn specs_parse_and_print_back() {
        let t: TransportAddr = "127.0.0.1:7174".parse().unwrap();
        assert_eq!(t, TransportAddr::Tcp("127.0.0.1:7174".parse().unwrap()));
        assert_eq!(t.to_string(), "tcp://127.0.0.1:7174");
        let s: TransportAddr = "sctp+udp://10.0.0.1,10.0.1.1:7174?udp-port=0&mtu=9000"
            .parse()
            .unwrap();
        let TransportAddr::Sctp(a) = &s else { panic!() };
        assert_eq!(a.addrs.len(), 2);
        assert_eq!((a.port, a.encap, a.mtu), (7174, SctpEncap::Udp(0), 9000));
        assert_eq!(
            s.to_string(),
            "sctp+udp://10.0.0.1,10.0.1.1:7174?udp-port=0&mtu=9000"
        );
        let c: TransportAddr = "sctp+udp://10.0.0.1,10.0.1.1:7174?cmt=on".parse().unwrap();
        let TransportAddr::Sctp(ca) = &c else {
            panic!()
        };
        assert_eq!(ca.multipath, Multipath::CmtPf);
        assert_eq!(c.to_string(), "sctp+udp://10.0.0.1,10.0.1.1:7174?cmt=pf");
        let n: TransportAddr = "sctp://10.0.0.1:5?cmt=nopf".parse().unwrap();
        assert_eq!(n.to_string().parse::<TransportAddr>().unwrap(), n);
        assert!(
            "sctp://10.0.0.1:5?cmt=maybe"
                .parse::<TransportAddr>()
                .is_err()
        );
        let d: TransportAddr = "sctp://10.0.0.1:5?local=10.0.0.2&dev=xdp:eth1"
            .parse()
            .unwrap();
        assert_eq!(d.to_string().parse::<TransportAddr>().unwrap(), d);
        let r: TransportAddr = "sctp://[::1]:5".parse().unwrap();
        assert_eq!(r.scheme(), "sctp");
        assert_eq!(
            TransportAddr::parse_with_port("sctp+udp://127.0.0.1", 7174)
                .unwrap()
                .to_string(),
            "sctp+udp://127.0.0.1:7174"
        );
    }

    #[test]
    fn device_specs_parse_and_print_back() {
        let t: TransportAddr = "tap://tap0/10.0.0.1:7174?local=10.0.0.2&prefix=30&mtu=9000"
            .parse()
            .unwrap();
        let TransportAddr::Dev(d) = &t else { panic!() };
        assert_eq!((d.kind, d.device.as_str()), (DevKind::Tap, "tap0"));
        assert_eq!(d.addr, "10.0.0.1:7174".parse().unwrap());
        assert_eq!(d.local, Some("10.0.0.2".parse().unwrap()));
        assert_eq!((d.prefix, d.mtu), (30, Some(9000)));
        assert_eq!(
            t.to_string(),
            "tap://tap0/10.0.0.1:7174?local=10.0.0.2&prefix=30&mtu=9000"
        );
        let x: TransportAddr =
            "xdp://eth1/10.0.0.1:7174?local=10.0.0.2&queue=3&mode=native&take=all"
                .parse()
                .unwrap();
        assert_eq!(x.scheme(), "xdp");
        let TransportAddr::Dev(d) = &x else { panic!() };
        assert!(d.native && d.take_all && d.queue == 3);
        assert_eq!(x.to_string().parse::<TransportAddr>().unwrap(), x);
        let TransportAddr::Dev(d) = "xdp://eth1/10.0.0.2:1".parse().unwrap() else {
            panic!()
        };
        assert!(
            !d.take_all,
            "the XDP program takes the stack's addresses only by default"
        );
        let a: TransportAddr = "dev://pipe0/10.1.0.1:5?mac=02:00:00:00:00:01&gw=10.1.0.254"
            .parse()
            .unwrap();
        assert_eq!(a.scheme(), "dev");
        assert_eq!(a.to_string().parse::<TransportAddr>().unwrap(), a);
        assert_eq!(
            TransportAddr::parse_with_port("tap://t/10.0.0.1", 7174)
                .unwrap()
                .to_string(),
            "tap://t/10.0.0.1:7174"
        );
    }

    #[test]
    fn bad_specs_say_why() {
        for bad in [
            "quic://1.2.3.4:5",
            "sctp+udp://host.example:5",
            "tcp://1.2.3.4,5.6.7.8:5",
            "sctp+udp://1.2.3.4:5?mtu=10",
            "sctp+udp://1.2.3.4:5?x=1",
            "sctp+udp://1.2.3.4:99999",
            "tap://10.0.0.1:5",
            "tap://tap0/host.example:5",
            "tap://tap0/10.0.0.1:5?prefix=33",
            "tap://tap0/10.0.0.1:5?mac=01:00:00:00:00:01",
            "dev://averyveryverylongname/10.0.0.1:5",
            "tap://t/10.0.0.1:5?queue=1",
            "sctp+udp://10.0.0.1:5?dev=cable0",
            "sctp://10.0.0.1:5?dev=usb:x",
            "xdp://x/10.0.0.1:5?mode=turbo",
            "xdp://x/10.0.0.1:5?take=some",
            "tap://t/10.0.0.1:5?take=all",
            "",
        ] {
            let e = bad.parse::<TransportAddr>().unwrap_err();
            assert!(!e.why.is_empty(), "{bad}");
        }
    }
}
