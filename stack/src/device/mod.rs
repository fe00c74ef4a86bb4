//! Raw-Ethernet devices under softrnic's own TCP/IP: kernel bypass for MPA/TCP and for
//! DDP over SCTP.
//!
//! A device is a source and sink of Ethernet frames ([`Link`]): an AF_XDP socket on one
//! queue of an interface (feature `xdp`: the `xdp` module), a TAP device, or one end of a datagram
//! socket pair (each datagram one frame; two RNICs in one process, or a frame pipe to another
//! program). On it the progress core runs an IPv4/TCP stack of its own (smoltcp, the one
//! netsim drives in virtual time): it answers ARP, owns its IP addresses and carries the
//! QPs' TCP connections, whose MPA/DDP/RDMAP bytes are the same as over the kernel's TCP, and
//! SCTP packets as raw IPv4 (protocol 132) for softrnic's SCTP. The kernel never sees these
//! connections: the stack's addresses are not the host's, so nothing on the host answers (or
//! resets) them.
//!
//! A device is named; a transport address picks it (`tap://tap0/10.0.0.2:7174`, see
//! [`crate::addr`]). [`crate::Rnic::attach_device`] adds a device made by the application
//! (for example a [`Link::datagram_pair`] end).
//!
//! [`FrameDevice`] is the same stack with the frames and the clock in the caller's hands: a
//! simulator (netsim) runs it in virtual time, deterministically (its randomness from a seed).

use std::collections::HashMap;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixDatagram;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::Instant;

use smoltcp::iface::{Config, Interface, PollResult, SocketHandle, SocketSet};
use smoltcp::phy::{self, DeviceCapabilities, Medium};
use smoltcp::socket::tcp;
use smoltcp::wire::{EthernetAddress, HardwareAddress, IpAddress, IpCidr, IpEndpoint, Ipv4Cidr};

use crate::mem::TxPart;

#[cfg(feature = "xdp")]
pub mod xdp;

/// Ethernet header length (the MTU counts the IP packet only).
const ETH_HEADER: usize = 14;

/// Largest frame read from a device: a 64 KiB IP packet (jumbo frames and more) with its
/// Ethernet header and a VLAN tag.
const MAX_FRAME: usize = 65_535 + ETH_HEADER + 4;

/// TCP socket buffers of device connections (the receive buffer bounds the advertised
/// window; window scaling follows).
const SOCKET_BUFFER: usize = 1024 * 1024;

/// A device's connections closed by their QPs stay in its stack at most this long to
/// finish their FIN exchange; then they are aborted.
const CLOSE_LINGER: Duration = Duration::from_secs(10);

/// An active connection gives up when the peer does not complete the handshake within this
/// long (cleared once established).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);

/// A device cannot be opened or configured.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    /// Opening or configuring the device failed; the message says what to do.
    #[error("{0}")]
    Open(String),
    /// The device exists with another configuration.
    #[error("device {name}: {why}")]
    Conflict {
        /// The device name.
        name: String,
        /// What conflicts.
        why: String,
    },
}

/// Where a device's Ethernet frames go.
pub enum Link {
    /// A TAP device (layer 2 tun/tap).
    Tap(tun_rs::SyncDevice),
    /// A datagram socket: one datagram per frame.
    Datagram(UnixDatagram),
    /// An AF_XDP socket on one queue of an interface.
    #[cfg(feature = "xdp")]
    Xdp(Box<std::cell::RefCell<xdp::XdpLink>>),
    /// Frames handed in and out by the caller: a [`FrameDevice`] (in a simulator) owns it.
    Frames(Box<std::cell::RefCell<FrameQueues>>),
}

/// The two frame queues of a [`FrameDevice`]'s link.
#[derive(Debug, Default)]
pub struct FrameQueues {
    rx: std::collections::VecDeque<Vec<u8>>,
    tx: std::collections::VecDeque<Vec<u8>>,
}

impl Link {
    /// Opens the TAP device `name` (creating it, up, when it does not exist).
    ///
    /// Needs `CAP_NET_ADMIN`, unless `name` is a persistent TAP device owned by the
    /// calling user (`ip tuntap add NAME mode tap user USER`), which any process of that
    /// user may open.
    pub fn open_tap(name: &str) -> Result<Link, DeviceError> {
        if name.is_empty() || name.len() > 15 || name.contains('/') {
            return Err(DeviceError::Open(format!(
                "{name:?} is not an interface name (1-15 characters, no '/')"
            )));
        }
        let dev = tun_rs::DeviceBuilder::new()
            .name(name)
            .layer(tun_rs::Layer::L2)
            .build_sync()
            .map_err(|e| DeviceError::Open(tap_error(name, &e)))?;
        dev.set_nonblocking(true)
            .map_err(|e| DeviceError::Open(format!("TAP device {name}: non-blocking mode: {e}")))?;
        Ok(Link::Tap(dev))
    }

    /// Two connected datagram links: what one sends, the other receives (a cable).
    pub fn datagram_pair() -> io::Result<(Link, Link)> {
        let (a, b) = UnixDatagram::pair()?;
        a.set_nonblocking(true)?;
        b.set_nonblocking(true)?;
        Ok((Link::Datagram(a), Link::Datagram(b)))
    }

    /// Binds an AF_XDP socket to queue `queue` of interface `name` (copy mode unless
    /// `native`), taking every frame of the queue if `take_all`, else only the frames of
    /// the stack's addresses ([`xdp::XdpTake`]). Needs root.
    #[cfg(feature = "xdp")]
    pub fn open_xdp(
        name: &str,
        queue: u32,
        native: bool,
        take_all: bool,
    ) -> Result<Link, DeviceError> {
        let mode = if native {
            xdp::XdpMode::Native
        } else {
            xdp::XdpMode::Skb
        };
        let take = if take_all {
            xdp::XdpTake::All
        } else {
            xdp::XdpTake::Addresses
        };
        Ok(Link::Xdp(Box::new(std::cell::RefCell::new(
            xdp::XdpLink::open(name, queue, mode, take)?,
        ))))
    }

    /// Without AF_XDP support in this build: says how to get it.
    #[cfg(not(feature = "xdp"))]
    pub fn open_xdp(
        name: &str,
        _queue: u32,
        _native: bool,
        _take_all: bool,
    ) -> Result<Link, DeviceError> {
        Err(DeviceError::Open(format!(
            "AF_XDP on {name}: this build has no AF_XDP support: build with `--features xdp` \
             (scripts/install-xdp-deps.sh installs the C toolchain it needs)"
        )))
    }

    /// The frames of `ip`, one of the stack's addresses, are the stack's (AF_XDP: the XDP
    /// program hands them to the socket; other links see every frame anyway).
    fn steer(&self, ip: Ipv4Addr) -> io::Result<()> {
        match self {
            #[cfg(feature = "xdp")]
            Link::Xdp(x) => x.borrow_mut().steer(ip),
            _ => {
                let _ = ip;
                Ok(())
            }
        }
    }

    fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Link::Tap(d) => d.recv(buf),
            Link::Datagram(s) => s.recv(buf),
            Link::Frames(q) => {
                let f = q
                    .borrow_mut()
                    .rx
                    .pop_front()
                    .ok_or(io::ErrorKind::WouldBlock)?;
                let n = f.len().min(buf.len());
                buf[..n].copy_from_slice(&f[..n]);
                Ok(n)
            }
            #[cfg(feature = "xdp")]
            Link::Xdp(x) => x.borrow_mut().recv(buf),
        }
    }

    fn send(&self, frame: &[u8]) -> io::Result<usize> {
        match self {
            Link::Tap(d) => d.send(frame),
            Link::Datagram(s) => s.send(frame),
            Link::Frames(q) => {
                q.borrow_mut().tx.push_back(frame.to_vec());
                Ok(frame.len())
            }
            #[cfg(feature = "xdp")]
            Link::Xdp(x) => x.borrow_mut().send(frame),
        }
    }

    /// Sends what the link batched (AF_XDP: one wakeup for the frames of a poll).
    fn flush(&self) -> io::Result<()> {
        #[cfg(feature = "xdp")]
        if let Link::Xdp(x) = self {
            return x.borrow_mut().kick();
        }
        Ok(())
    }

    /// The interface MTU a TAP device or an AF_XDP interface reports.
    fn mtu(&self) -> Option<usize> {
        match self {
            Link::Tap(d) => d.mtu().ok().map(usize::from),
            Link::Datagram(_) | Link::Frames(_) => None,
            #[cfg(feature = "xdp")]
            Link::Xdp(x) => x.borrow().iface_mtu(),
        }
    }

    /// The interface's own MAC address (AF_XDP: the stack takes the interface's identity).
    fn mac(&self) -> Option<[u8; 6]> {
        match self {
            #[cfg(feature = "xdp")]
            Link::Xdp(x) => x.borrow().iface_mac(),
            _ => None,
        }
    }

    /// The largest MTU the link can carry.
    fn max_mtu(&self) -> usize {
        match self {
            #[cfg(feature = "xdp")]
            Link::Xdp(x) => x.borrow().max_mtu(),
            _ => 65_535,
        }
    }
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Link::Tap(d) => write!(f, "Tap({:?})", d.name().ok()),
            Link::Datagram(s) => write!(f, "Datagram({s:?})"),
            #[cfg(feature = "xdp")]
            Link::Xdp(x) => write!(f, "Xdp({:?})", x.borrow().name()),
            Link::Frames(_) => f.write_str("Frames"),
        }
    }
}

impl AsRawFd for Link {
    fn as_raw_fd(&self) -> RawFd {
        match self {
            Link::Tap(d) => d.as_raw_fd(),
            Link::Datagram(s) => s.as_raw_fd(),
            #[cfg(feature = "xdp")]
            Link::Xdp(x) => x.borrow().as_raw_fd(),
            // Not pollable: a frame link is driven by its FrameDevice, never by a core.
            Link::Frames(_) => -1,
        }
    }
}

/// What went wrong opening a TAP device, and what to do about it.
fn tap_error(name: &str, e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => format!(
            "TAP device {name}: permission denied: opening a TAP device needs CAP_NET_ADMIN \
             (run as root), or create a persistent one for your user first: \
             `sudo ip tuntap add {name} mode tap user $USER && sudo ip link set {name} up`"
        ),
        Some(libc::ENOENT) | Some(libc::ENODEV) => format!(
            "TAP device {name}: /dev/net/tun is missing: load the tun module (`modprobe tun`) \
             or, in a container, pass the device in (--device /dev/net/tun)"
        ),
        Some(libc::EBUSY) => format!(
            "TAP device {name}: busy: another process holds it (a TAP device has one owner \
             at a time; close the other program or pick another name)"
        ),
        Some(libc::EINVAL) => format!(
            "TAP device {name}: an interface of that name exists and is not a TAP device \
             (pick another name)"
        ),
        _ => format!("TAP device {name}: {e}"),
    }
}

/// A device's IP configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceConfig {
    /// The stack's IPv4 address on the device.
    pub addr: Ipv4Addr,
    /// Its prefix length (the on-link subnet).
    pub prefix: u8,
    /// The default gateway, for peers off the subnet.
    pub gateway: Option<Ipv4Addr>,
    /// IP MTU (`None`: what the device reports, else 1500).
    pub mtu: Option<usize>,
    /// MAC address (`None`: an AF_XDP interface's own; otherwise 02:53 followed by the four
    /// octets of `addr`, locally administered and stable across restarts).
    pub mac: Option<[u8; 6]>,
}

impl DeviceConfig {
    /// `addr/prefix`, no gateway, the device's MTU, a random MAC.
    pub fn new(addr: Ipv4Addr, prefix: u8) -> DeviceConfig {
        DeviceConfig {
            addr,
            prefix,
            gateway: None,
            mtu: None,
            mac: None,
        }
    }
}

/// Frame counters of a device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceStats {
    /// Frames received.
    pub rx_frames: u64,
    /// Frames sent.
    pub tx_frames: u64,
    /// Frames the device refused (link down, or its queue full while the backlog was
    /// too): TCP retransmits them.
    pub tx_dropped: u64,
    /// Times the device's queue was full: frames waited in the backlog and the stack
    /// stopped sending until the device took them.
    pub tx_full: u64,
    /// The largest frame received (bytes, from the Ethernet header on).
    pub rx_largest: u64,
    /// The largest frame sent (bytes, from the Ethernet header on).
    pub tx_largest: u64,
    /// Times the stack was polled (frames in and out, its timers): how often the progress
    /// loop turned for this device.
    pub polls: u64,
    /// Reads and sends the link failed with an error (not a full or empty queue): an
    /// interface removed or down, a closed cable.
    pub link_errors: u64,
    /// The device is down: its link failed persistently (errors meaning the link is gone,
    /// several in a row with no frame between them), its connections were closed and it
    /// takes no new ones.
    pub link_down: bool,
}

impl DeviceStats {
    /// Counts a frame of `len` bytes the device took.
    fn sent(&mut self, len: usize) {
        self.tx_frames += 1;
        self.tx_largest = self.tx_largest.max(len as u64);
    }
}

/// Link errors meaning the link is gone (interface removed or down, cable closed) in a row,
/// with no frame read or sent between them, after which the device is down.
const DOWN_AFTER: u32 = 3;

/// Whether a link error means the link is gone rather than a passing condition: the
/// interface was removed (ENXIO, ENODEV, EBADF, EBADFD: a TAP device or AF_XDP socket
/// whose interface went away) or is down (ENETDOWN), or the far end of a cable closed
/// (ECONNREFUSED, ENOTCONN, EPIPE, ECONNRESET).
fn link_gone(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(
            libc::ENXIO
                | libc::ENODEV
                | libc::EBADF
                | libc::EBADFD
                | libc::ENETDOWN
                | libc::ECONNREFUSED
                | libc::ENOTCONN
                | libc::EPIPE
                | libc::ECONNRESET
        )
    ) || matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::NotConnected
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::ConnectionReset
    )
}

/// How a device's link is doing: failed reads and sends, reported once per run of errors,
/// and the device down when they persist (as a NIC reports link down).
#[derive(Debug, Default)]
struct LinkHealth {
    /// Link errors meaning the link is gone since the link last read or sent a frame.
    streak: u32,
    /// The current run of errors was reported.
    reported: bool,
    /// The latest error of the current poll, for the report.
    last: Option<io::Error>,
    /// Why the device is down.
    down: Option<String>,
}

impl LinkHealth {
    /// The link read or sent a frame.
    fn ok(&mut self) {
        self.streak = 0;
        self.reported = false;
    }

    /// The link failed with `e` (not a full or empty queue).
    fn fail(&mut self, stats: &mut DeviceStats, e: io::Error) {
        stats.link_errors += 1;
        if link_gone(&e) {
            self.streak += 1;
        }
        self.last = Some(e);
    }
}

/// Frames kept while the device's queue is full (a NIC ring's worth): the stack sends
/// nothing new until they are out, so a burst waits instead of being lost.
const TX_BACKLOG: usize = 256;

/// While frames wait in the backlog of a device whose link signals room again (datagram
/// sockets, TAP), the progress loop sleeps until the link is writable; it looks at the
/// backlog at least this often all the same.
const BACKLOG_RECHECK: Duration = Duration::from_millis(100);

/// One device and the TCP/IP stack on it, owned by the progress core.
pub(crate) struct DevStack {
    name: String,
    link: Link,
    iface: Interface,
    sockets: SocketSet<'static>,
    mtu: usize,
    rx: Vec<u8>,
    tx: Vec<u8>,
    stats: DeviceStats,
    /// Frames the device's full queue refused, oldest first.
    backlog: std::collections::VecDeque<Vec<u8>>,
    /// The device's queue refused a frame since the progress core last asked
    /// ([`DevStack::take_blocked`]): the core arms the wake-up for room again.
    blocked: bool,
    /// Failed reads and sends, and whether the device is down.
    health: LinkHealth,
    /// A poll outside the progress core's (removing a raw socket) may have changed sockets:
    /// the core's next poll says so, so that it services their connections.
    unreported: bool,
    /// Connections their QPs closed: finishing their FIN exchange until the deadline.
    closing: Vec<(SocketHandle, Instant)>,
    /// Local ports in use (listeners and connections).
    ports: HashMap<u16, usize>,
    /// The time of the last poll.
    now: Instant,
    next_port: u16,
}

impl std::fmt::Debug for DevStack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DevStack")
            .field("name", &self.name)
            .field("mtu", &self.mtu)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

/// The phy::Device view of a link for one poll.
struct Phy<'a> {
    link: &'a Link,
    rx: &'a mut Vec<u8>,
    tx: &'a mut Vec<u8>,
    mtu: usize,
    stats: &'a mut DeviceStats,
    backlog: &'a mut std::collections::VecDeque<Vec<u8>>,
    blocked: &'a mut bool,
    health: &'a mut LinkHealth,
}

struct RxTok<'a> {
    frame: &'a [u8],
}

struct TxTok<'a> {
    link: &'a Link,
    buf: &'a mut Vec<u8>,
    stats: &'a mut DeviceStats,
    backlog: &'a mut std::collections::VecDeque<Vec<u8>>,
    blocked: &'a mut bool,
    health: &'a mut LinkHealth,
}

impl phy::RxToken for RxTok<'_> {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(self.frame)
    }
}

impl phy::TxToken for TxTok<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        // AF_XDP: the stack writes the frame straight into a UMEM frame when it fits one and
        // nothing waits before it.
        #[cfg(feature = "xdp")]
        if let Link::Xdp(x) = self.link
            && self.backlog.is_empty()
        {
            let mut x = x.borrow_mut();
            if x.tx_room(len) {
                let (r, queued) = x.send_in_place(len, f);
                if queued {
                    self.stats.sent(len);
                } else {
                    self.stats.tx_dropped += 1;
                }
                return r;
            }
        }
        self.buf.resize(len, 0);
        let r = f(self.buf.get_mut(..len).unwrap_or_default());
        let frame = self.buf.get(..len).unwrap_or_default();
        if !self.backlog.is_empty() {
            // Frames already wait: this one goes after them (ACKs and ARP replies made
            // while receiving).
            if self.backlog.len() < TX_BACKLOG {
                self.backlog.push_back(frame.to_vec());
            } else {
                self.stats.tx_dropped += 1;
            }
            return r;
        }
        match self.link.send(frame) {
            Ok(_) => {
                self.stats.sent(frame.len());
                self.health.ok();
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                // The queue is full: keep the frame and stop sending until it drains.
                self.stats.tx_full += 1;
                *self.blocked = true;
                self.backlog.push_back(frame.to_vec());
            }
            Err(e) => {
                // A link that is down: the frame is lost, as on a wire (the poll reports
                // the error, and marks the device down when it persists).
                self.stats.tx_dropped += 1;
                self.health.fail(self.stats, e);
            }
        }
        r
    }
}

impl phy::Device for Phy<'_> {
    type RxToken<'b>
        = RxTok<'b>
    where
        Self: 'b;
    type TxToken<'b>
        = TxTok<'b>
    where
        Self: 'b;

    fn receive(
        &mut self,
        _now: smoltcp::time::Instant,
    ) -> Option<(Self::RxToken<'_>, Self::TxToken<'_>)> {
        let n = match self.link.recv(self.rx) {
            Ok(n) => n,
            Err(e) => {
                if !matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) {
                    // Reported by the poll (once per run of errors); a link gone for good
                    // marks the device down.
                    self.health.fail(self.stats, e);
                }
                return None;
            }
        };
        self.health.ok();
        self.stats.rx_frames += 1;
        self.stats.rx_largest = self.stats.rx_largest.max(n as u64);
        Some((
            RxTok {
                frame: self.rx.get(..n).unwrap_or_default(),
            },
            TxTok {
                link: self.link,
                buf: self.tx,
                stats: self.stats,
                backlog: self.backlog,
                blocked: self.blocked,
                health: self.health,
            },
        ))
    }

    fn transmit(&mut self, _now: smoltcp::time::Instant) -> Option<Self::TxToken<'_>> {
        // A full device queue holds the stack back (as a full NIC ring does).
        if !self.backlog.is_empty() {
            return None;
        }
        Some(TxTok {
            link: self.link,
            buf: self.tx,
            stats: self.stats,
            backlog: self.backlog,
            blocked: self.blocked,
            health: self.health,
        })
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ethernet;
        caps.max_transmission_unit = self.mtu + ETH_HEADER;
        caps
    }
}

fn instant(now: Instant) -> smoltcp::time::Instant {
    smoltcp::time::Instant::from_micros(i64::try_from(now.as_micros()).unwrap_or(i64::MAX))
}

/// The default MAC of a stack with IPv4 address `ip`: locally administered, unicast, and the
/// same for the same address every time, so that peers' neighbour caches stay right when a
/// program using the address restarts.
fn addr_mac(ip: Ipv4Addr) -> [u8; 6] {
    let o = ip.octets();
    [0x02, 0x53, o[0], o[1], o[2], o[3]]
}

impl DevStack {
    /// A stack on `link` configured by `cfg`, its randomness (TCP initial sequence
    /// numbers, the first ephemeral port) from the OS.
    pub(crate) fn new(name: &str, link: Link, cfg: &DeviceConfig, now: Instant) -> DevStack {
        let mut seed = [0u8; 8];
        let _ = getrandom::fill(&mut seed);
        DevStack::with_seed(name, link, cfg, now, u64::from_le_bytes(seed))
    }

    /// A stack whose randomness comes from `seed` (deterministic: the simulator's).
    fn with_seed(name: &str, link: Link, cfg: &DeviceConfig, now: Instant, seed: u64) -> DevStack {
        let mtu = cfg
            .mtu
            .or_else(|| link.mtu())
            .unwrap_or(1500)
            .clamp(576, link.max_mtu());
        let mac = cfg
            .mac
            .or_else(|| link.mac())
            .unwrap_or_else(|| addr_mac(cfg.addr));
        let mut icfg = Config::new(HardwareAddress::Ethernet(EthernetAddress(mac)));
        icfg.random_seed = seed;
        let mut rx = vec![0u8; MAX_FRAME];
        let mut tx = Vec::new();
        let mut stats = DeviceStats::default();
        let mut backlog = std::collections::VecDeque::new();
        let mut blocked = false;
        let mut health = LinkHealth::default();
        let iface = {
            let mut phy = Phy {
                link: &link,
                rx: &mut rx,
                tx: &mut tx,
                mtu,
                stats: &mut stats,
                backlog: &mut backlog,
                blocked: &mut blocked,
                health: &mut health,
            };
            Interface::new(icfg, &mut phy, instant(now))
        };
        // The first ephemeral port from the seed's top bits.
        let port = (seed >> 50) as u16;
        let mut s = DevStack {
            name: name.to_string(),
            link,
            iface,
            sockets: SocketSet::new(Vec::new()),
            mtu,
            rx,
            tx,
            stats,
            backlog,
            blocked,
            health,
            unreported: false,
            closing: Vec::new(),
            ports: HashMap::new(),
            now,
            next_port: 49_152 + port,
        };
        s.add_addr(cfg.addr, cfg.prefix);
        if let Some(gw) = cfg.gateway {
            let _ = s.iface.routes_mut().add_default_ipv4_route(gw);
        }
        s
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn mtu(&self) -> usize {
        self.mtu
    }

    pub(crate) fn stats(&self) -> DeviceStats {
        self.stats
    }

    pub(crate) fn fd(&self) -> RawFd {
        self.link.as_raw_fd()
    }

    /// Whether the device's queue refused a frame since the last call: the caller arms the
    /// link's writability wake-up again (`EPOLL_CTL_MOD` makes the kernel look at the
    /// link afresh, so room that came already is reported at once, and a datagram socket
    /// whose peer's queue is full registers for the peer's wake-up, which it does only
    /// when polled while full).
    pub(crate) fn take_blocked(&mut self) -> bool {
        std::mem::take(&mut self.blocked)
    }

    /// Frames wait for room in the device's queue and the link signals when it has room
    /// (not AF_XDP, see [`DevStack::poll_at`]): polling sooner does no good.
    pub(crate) fn waits_for_room(&self) -> bool {
        match self.link {
            #[cfg(feature = "xdp")]
            Link::Xdp(_) => false,
            _ => !self.backlog.is_empty(),
        }
    }

    /// Whether `ip` is one of the stack's addresses.
    pub(crate) fn has_addr(&self, ip: Ipv4Addr) -> bool {
        self.iface.has_ip_addr(IpAddress::Ipv4(ip))
    }

    /// Adds `ip/prefix` (no effect if present). `false`: the interface holds no more.
    pub(crate) fn add_addr(&mut self, ip: Ipv4Addr, prefix: u8) -> bool {
        if self.has_addr(ip) {
            return true;
        }
        if let Err(e) = self.link.steer(ip) {
            tracing::warn!(device = %self.name, %ip, error = %e, "address not steered to the device");
            return false;
        }
        let mut ok = true;
        self.iface.update_ip_addrs(|a| {
            ok = a
                .push(IpCidr::Ipv4(Ipv4Cidr::new(ip, prefix.min(32))))
                .is_ok();
        });
        ok
    }

    /// The first address (a connect's source when none is named).
    pub(crate) fn first_addr(&self) -> Option<Ipv4Addr> {
        self.iface.ipv4_addr()
    }

    fn new_socket(&mut self) -> SocketHandle {
        let mut s = tcp::Socket::new(
            tcp::SocketBuffer::new(vec![0; SOCKET_BUFFER]),
            tcp::SocketBuffer::new(vec![0; SOCKET_BUFFER]),
        );
        // MPA frames its own messages (as TCP_NODELAY on kernel sockets).
        s.set_nagle_enabled(false);
        s.set_ack_delay(Some(smoltcp::time::Duration::from_millis(1)));
        s.set_congestion_control(tcp::CongestionControl::Reno);
        self.sockets.add(s)
    }

    /// A socket listening on `port`.
    pub(crate) fn listen(&mut self, port: u16) -> Result<SocketHandle, tcp::ListenError> {
        let h = self.new_socket();
        let r = self.sockets.get_mut::<tcp::Socket>(h).listen(port);
        match r {
            Ok(()) => {
                *self.ports.entry(port).or_default() += 1;
                Ok(h)
            }
            Err(e) => {
                self.sockets.remove(h);
                Err(e)
            }
        }
    }

    /// A free local port from the dynamic range.
    pub(crate) fn listen_port(&mut self) -> u16 {
        for _ in 0..16_384 {
            let p = self.next_port;
            self.next_port = if p == u16::MAX { 49_152 } else { p + 1 };
            if !self.ports.contains_key(&p) {
                return p;
            }
        }
        self.next_port
    }

    /// An active open to `peer` from `local` (an address of the stack, or its first).
    pub(crate) fn connect(
        &mut self,
        peer: SocketAddrV4,
        local: Option<Ipv4Addr>,
    ) -> Result<(SocketHandle, u16), String> {
        if let Some(why) = self.down() {
            return Err(format!("device {} is down ({why})", self.name));
        }
        let src = local
            .or_else(|| self.first_addr())
            .ok_or_else(|| format!("device {} has no IPv4 address", self.name))?;
        let port = self.listen_port();
        let h = self.new_socket();
        let ctx = self.iface.context();
        let sock = self.sockets.get_mut::<tcp::Socket>(h);
        sock.set_timeout(Some(smoltcp::time::Duration::from_millis(
            CONNECT_TIMEOUT.as_millis() as u64,
        )));
        let r = sock.connect(
            ctx,
            IpEndpoint::new(IpAddress::Ipv4(*peer.ip()), peer.port()),
            IpEndpoint::new(IpAddress::Ipv4(src), port),
        );
        match r {
            Ok(()) => {
                *self.ports.entry(port).or_default() += 1;
                Ok((h, port))
            }
            Err(e) => {
                self.sockets.remove(h);
                Err(format!("connect to {peer} on device {}: {e}", self.name))
            }
        }
    }

    /// A raw IPv4 socket for SCTP (protocol 132): every SCTP packet to the stack's
    /// addresses is copied to it; what it sends are whole IPv4 packets.
    pub(crate) fn raw_sctp(&mut self) -> SocketHandle {
        use smoltcp::socket::raw;
        let buf =
            || raw::PacketBuffer::new(vec![raw::PacketMetadata::EMPTY; 512], vec![0; 2 << 20]);
        self.sockets.add(raw::Socket::new(
            Some(smoltcp::wire::IpVersion::Ipv4),
            Some(smoltcp::wire::IpProtocol::Unknown(132)),
            buf(),
            buf(),
        ))
    }

    /// The raw socket `h`.
    pub(crate) fn raw(&mut self, h: SocketHandle) -> &mut smoltcp::socket::raw::Socket<'static> {
        self.sockets.get_mut::<smoltcp::socket::raw::Socket>(h)
    }

    /// Removes the raw socket `h` once what it queued has gone out (one poll: a closing
    /// SCTP endpoint's last packets, e.g. its SHUTDOWN COMPLETE, are sent).
    pub(crate) fn remove_raw(&mut self, h: SocketHandle) {
        let now = self.now;
        // Frames taken in by this poll may concern other sockets: reported by the next.
        self.unreported |= self.poll(now);
        self.sockets.remove(h);
    }

    pub(crate) fn socket(&mut self, h: SocketHandle) -> &mut tcp::Socket<'static> {
        self.sockets.get_mut::<tcp::Socket>(h)
    }

    /// Frees a socket's port reservation and lets it finish closing (`abort`: reset at
    /// once).
    pub(crate) fn release(&mut self, h: SocketHandle, abort: bool) {
        let now = self.now;
        let sock = self.sockets.get_mut::<tcp::Socket>(h);
        let port = sock.local_endpoint().map(|e| e.port);
        if let Some(p) = port
            && let Some(n) = self.ports.get_mut(&p)
        {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.ports.remove(&p);
            }
        }
        if abort {
            sock.abort();
        } else {
            sock.close();
        }
        self.closing.push((h, now + CLOSE_LINGER));
    }

    /// Receives and sends what there is. `true` if any socket may have changed.
    pub(crate) fn poll(&mut self, now: Instant) -> bool {
        self.now = now;
        self.stats.polls += 1;
        if self.health.down.is_some() {
            // A device that is down touches its link no more (nothing would come of it but
            // errors): its connections were closed when it went down.
            self.drop_closed(now);
            return std::mem::take(&mut self.unreported);
        }
        // Frames the full queue refused go first, in order.
        while let Some(f) = self.backlog.front() {
            match self.link.send(f) {
                Ok(_) => {
                    self.stats.sent(f.len());
                    self.health.ok();
                    self.backlog.pop_front();
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.blocked = true;
                    break;
                }
                Err(e) => {
                    self.stats.tx_dropped += 1;
                    self.backlog.pop_front();
                    self.health.fail(&mut self.stats, e);
                }
            }
        }
        let changed = {
            let mut phy = Phy {
                link: &self.link,
                rx: &mut self.rx,
                tx: &mut self.tx,
                mtu: self.mtu,
                stats: &mut self.stats,
                backlog: &mut self.backlog,
                blocked: &mut self.blocked,
                health: &mut self.health,
            };
            self.iface.poll(instant(now), &mut phy, &mut self.sockets)
        };
        if let Err(e) = self.link.flush() {
            self.health.fail(&mut self.stats, e);
        }
        let went_down = self.check_link();
        self.drop_closed(now);
        went_down
            || changed == PollResult::SocketStateChanged
            || std::mem::take(&mut self.unreported)
    }

    /// Reports the link's errors of the last poll (once per run of them) and marks the
    /// device down when the link is gone: [`DOWN_AFTER`] errors meaning so in a row, with
    /// no frame read or sent between them. `true` if the device went down now.
    fn check_link(&mut self) -> bool {
        let Some(e) = self.health.last.take() else {
            return false;
        };
        if !self.health.reported {
            self.health.reported = true;
            tracing::warn!(device = %self.name, error = %e, "device link error");
        }
        if self.health.streak < DOWN_AFTER {
            return false;
        }
        let why = format!("link failed {} times in a row: {e}", self.health.streak);
        self.go_down(why);
        true
    }

    /// Marks the device down: every connection on it is closed at once (its QP sees a
    /// reset; a connect in progress fails naming the device), frames waiting to be sent are
    /// dropped and the link is used no more.
    fn go_down(&mut self, why: String) {
        let mut closed = 0;
        for (_, s) in self.sockets.iter_mut() {
            if let smoltcp::socket::Socket::Tcp(t) = s
                && t.state() != tcp::State::Closed
            {
                t.abort();
                closed += 1;
            }
        }
        self.stats.tx_dropped += self.backlog.len() as u64;
        self.backlog.clear();
        self.stats.link_down = true;
        tracing::warn!(device = %self.name, connections = closed, reason = %why,
            "device is down: its connections are closed");
        self.health.down = Some(why);
    }

    /// Why the device is down, if it is.
    pub(crate) fn down(&self) -> Option<&str> {
        self.health.down.as_deref()
    }

    /// Connections closed by their QPs leave once closed (or at their deadline).
    fn drop_closed(&mut self, now: Instant) {
        let sockets = &mut self.sockets;
        self.closing.retain(|&(h, deadline)| {
            let s = sockets.get_mut::<tcp::Socket>(h);
            let done = matches!(s.state(), tcp::State::Closed | tcp::State::TimeWait);
            if done || now >= deadline {
                s.abort();
                sockets.remove(h);
                false
            } else {
                true
            }
        });
    }

    /// When the stack next needs a poll.
    ///
    /// While frames wait for room in the device's queue the stack can send nothing (its
    /// sockets' "send now" would keep the loop spinning, taking the CPU from the peer that
    /// must drain the queue): the loop sleeps until the link is writable (the wake-up the
    /// core arms after [`DevStack::take_blocked`]), looking again after [`BACKLOG_RECHECK`]
    /// at the latest. An AF_XDP socket is polled again at once: its queue drains by the
    /// sends the next poll kicks off (copy mode) or by the driver, whose completions wake
    /// nobody.
    pub(crate) fn poll_at(&mut self, now: Instant) -> Option<Instant> {
        if self.health.down.is_some() {
            return None;
        }
        if !self.backlog.is_empty() {
            return Some(if self.waits_for_room() {
                now + BACKLOG_RECHECK
            } else {
                now
            });
        }
        let d = self.iface.poll_delay(instant(now), &self.sockets)?;
        Some(now + Duration::from_micros(d.total_micros()))
    }
}

/// A device shared by the RNIC's API (which opens and configures it) and its progress core.
pub(crate) type SharedDev = Arc<Mutex<DevStack>>;

/// softrnic's device stack (the TCP/IP the runtime runs on TAP and AF_XDP devices) on a
/// link whose frames the caller carries and whose clock the caller keeps: how a simulator
/// (netsim) runs the very same code in virtual time. Frames go in with
/// [`FrameDevice::receive`] and come out of [`FrameDevice::transmit`]; [`FrameDevice::poll`]
/// runs the stack at an instant and [`FrameDevice::poll_at`] says when it next needs to.
#[derive(Debug)]
pub struct FrameDevice {
    stack: DevStack,
}

impl FrameDevice {
    /// A stack configured by `cfg` (MTU default 1500), its randomness (TCP initial
    /// sequence numbers, ephemeral ports) from `seed` so that a simulation repeats exactly.
    pub fn new(name: &str, cfg: &DeviceConfig, seed: u64) -> FrameDevice {
        let link = Link::Frames(Box::default());
        FrameDevice {
            stack: DevStack::with_seed(name, link, cfg, Instant::ZERO, seed),
        }
    }

    /// An Ethernet frame arrived (taken in at the next poll).
    pub fn receive(&mut self, frame: Vec<u8>) {
        // A FrameDevice's link is always a frame link (see `new`).
        if let Link::Frames(q) = &self.stack.link {
            q.borrow_mut().rx.push_back(frame);
        }
    }

    /// The next frame the stack sent, if any.
    pub fn transmit(&mut self) -> Option<Vec<u8>> {
        match &self.stack.link {
            Link::Frames(q) => q.borrow_mut().tx.pop_front(),
            _ => None,
        }
    }

    /// Runs the stack at `now` (on the device's time line, which starts at zero); `true` if a socket may
    /// have changed.
    pub fn poll(&mut self, now: Instant) -> bool {
        self.stack.poll(now)
    }

    /// When the stack next needs a poll.
    pub fn poll_at(&mut self, now: Instant) -> Option<Instant> {
        self.stack.poll_at(now)
    }

    /// A socket listening on `port`, with the runtime's socket settings.
    pub fn listen(&mut self, port: u16) -> Result<SocketHandle, tcp::ListenError> {
        self.stack.listen(port)
    }

    /// A connection to `peer` from `local` (default: the device's address) and an
    /// ephemeral port, with the runtime's socket settings and connect timeout.
    pub fn connect(
        &mut self,
        peer: SocketAddrV4,
        local: Option<Ipv4Addr>,
    ) -> Result<SocketHandle, String> {
        self.stack.connect(peer, local).map(|(h, _)| h)
    }

    /// A socket of the stack.
    pub fn socket(&mut self, h: SocketHandle) -> &mut tcp::Socket<'static> {
        self.stack.socket(h)
    }

    /// Frame counters.
    pub fn stats(&self) -> DeviceStats {
        self.stack.stats()
    }
}

pub(crate) fn lock(d: &SharedDev) -> MutexGuard<'_, DevStack> {
    d.lock().unwrap_or_else(|p| p.into_inner())
}

/// A TCP connection on a device: what a kernel `TcpStream` is to the kernel path.
#[derive(Debug)]
pub(crate) struct DevSock {
    pub(crate) dev: SharedDev,
    pub(crate) h: SocketHandle,
    /// Abort (reset) rather than close when dropped.
    abort: bool,
}

impl DevSock {
    pub(crate) fn new(dev: SharedDev, h: SocketHandle) -> DevSock {
        DevSock {
            dev,
            h,
            abort: false,
        }
    }

    fn with<R>(&self, f: impl FnOnce(&mut tcp::Socket<'static>) -> R) -> R {
        let mut d = lock(&self.dev);
        f(d.socket(self.h))
    }

    /// Reads like a non-blocking socket: `WouldBlock` when nothing is there, `Ok(0)` at the
    /// peer's FIN, `ConnectionReset` when the connection is gone.
    pub(crate) fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.with(|s| match s.recv_slice(buf) {
            Ok(0) if !buf.is_empty() => Err(io::ErrorKind::WouldBlock.into()),
            Ok(n) => Ok(n),
            Err(tcp::RecvError::Finished) => Ok(0),
            Err(tcp::RecvError::InvalidState) => Err(io::ErrorKind::ConnectionReset.into()),
        })
    }

    /// Writes like a non-blocking socket.
    pub(crate) fn write(&self, buf: &[u8]) -> io::Result<usize> {
        self.with(|s| match s.send_slice(buf) {
            Ok(0) if !buf.is_empty() => Err(io::ErrorKind::WouldBlock.into()),
            Ok(n) => Ok(n),
            Err(_) => Err(io::ErrorKind::BrokenPipe.into()),
        })
    }

    /// Copies gathered pieces into the send buffer as far as they fit.
    pub(crate) fn write_parts(&self, parts: &[TxPart<'_>]) -> io::Result<usize> {
        self.with(|s| {
            if !s.may_send() {
                return Err(io::ErrorKind::BrokenPipe.into());
            }
            let mut total = 0;
            for part in parts {
                let want = part.len();
                let took = match *part {
                    TxPart::Bytes(b) => s
                        .send_slice(b)
                        .map_err(|_| io::Error::from(io::ErrorKind::BrokenPipe))?,
                    TxPart::Mem { buf, offset, len } => s
                        .send(|room| {
                            let n = room.len().min(len);
                            let ok = room
                                .get_mut(..n)
                                .is_some_and(|r| buf.read_at(offset, r).is_ok());
                            if ok { (n, Some(n)) } else { (0, None) }
                        })
                        .map_err(|_| io::Error::from(io::ErrorKind::BrokenPipe))?
                        .ok_or_else(|| {
                            io::Error::new(
                                io::ErrorKind::InvalidInput,
                                "registered range out of bounds",
                            )
                        })?,
                };
                total += took;
                if took < want {
                    break;
                }
            }
            if total == 0 && !parts.is_empty() {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            Ok(total)
        })
    }

    /// Shuts the write half (FIN after what is queued).
    pub(crate) fn shutdown_write(&self) {
        self.with(|s| s.close());
    }

    /// Closes with a reset when dropped.
    pub(crate) fn set_abort(&mut self) {
        self.abort = true;
    }

    /// `Ok(true)` connected, `Ok(false)` still connecting, `Err` failed.
    pub(crate) fn connect_status(&self) -> Result<bool, String> {
        {
            let d = lock(&self.dev);
            if let Some(why) = d.down() {
                return Err(format!("device {} is down ({why})", d.name()));
            }
        }
        self.with(|s| match s.state() {
            tcp::State::SynSent | tcp::State::SynReceived => Ok(false),
            tcp::State::Closed | tcp::State::TimeWait | tcp::State::Listen => {
                Err("connection refused or timed out (no answer from the peer, or a reset)".into())
            }
            _ => {
                // The connect timeout covers the handshake only: smoltcp counts it from the
                // peer's last segment, so it would end an idle connection too.
                s.set_timeout(None);
                Ok(true)
            }
        })
    }

    pub(crate) fn local_addr(&self) -> Option<SocketAddr> {
        self.with(|s| s.local_endpoint()).and_then(endpoint_addr)
    }

    pub(crate) fn peer_addr(&self) -> Option<SocketAddr> {
        self.with(|s| s.remote_endpoint()).and_then(endpoint_addr)
    }

    /// Bytes sent or queued and not yet acknowledged by the peer.
    pub(crate) fn unacked(&self) -> u64 {
        self.with(|s| s.send_queue() as u64)
    }

    /// The EMSS for MPA (its MULPDU follows from it, RFC 5044 §7.1): what one full segment
    /// of this connection carries — the device MTU less the IPv4 and TCP headers, and less
    /// the timestamp option when the connection uses it. So full FPDUs fill full segments
    /// and stay aligned with them (RFC 5044 §8) instead of drifting across segment
    /// boundaries. (A peer announcing a smaller MSS than this still splits them.)
    pub(crate) fn emss(&self) -> u32 {
        let options = if self.with(|s| s.timestamp_enabled()) {
            TCP_TIMESTAMP_OPTION
        } else {
            0
        };
        let mtu = lock(&self.dev).mtu();
        u32::try_from(mtu.saturating_sub(20 + 20 + options)).unwrap_or(u32::MAX)
    }
}

/// The TCP timestamp option with its padding, in every segment of a connection that uses it
/// (RFC 7323 §3).
const TCP_TIMESTAMP_OPTION: usize = 12;

impl Drop for DevSock {
    fn drop(&mut self) {
        let mut d = lock(&self.dev);
        d.release(self.h, self.abort);
    }
}

fn endpoint_addr(e: IpEndpoint) -> Option<SocketAddr> {
    match e.addr {
        IpAddress::Ipv4(a) => Some(SocketAddr::V4(SocketAddrV4::new(a, e.port))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two stacks on a datagram cable, a TCP connection between them established; and a
    /// second handle on a's end of the cable.
    fn connected_pair() -> (DevStack, DevStack, SocketHandle, Instant, UnixDatagram) {
        let (ua, ub) = UnixDatagram::pair().unwrap();
        ua.set_nonblocking(true).unwrap();
        ub.set_nonblocking(true).unwrap();
        let cable_a = ua.try_clone().unwrap();
        let (la, lb) = (Link::Datagram(ua), Link::Datagram(ub));
        let mut now = Instant::from_millis(1);
        let cfg_a = DeviceConfig::new(Ipv4Addr::new(10, 7, 0, 1), 24);
        let cfg_b = DeviceConfig::new(Ipv4Addr::new(10, 7, 0, 2), 24);
        let mut a = DevStack::with_seed("a", la, &cfg_a, now, 1);
        let mut b = DevStack::with_seed("b", lb, &cfg_b, now, 2);
        let lh = b.listen(7174).unwrap();
        let (h, _) = a
            .connect(SocketAddrV4::new(cfg_b.addr, 7174), None)
            .unwrap();
        for _ in 0..100 {
            a.poll(now);
            b.poll(now);
            if a.socket(h).state() == tcp::State::Established
                && b.socket(lh).state() == tcp::State::Established
            {
                return (a, b, h, now, cable_a);
            }
            now += Duration::from_millis(1);
        }
        panic!("no TCP connection on the cable");
    }

    /// Data a poll outside the progress core took in (removing a raw SCTP socket) is
    /// reported by the core's next poll: the connection it concerns is serviced, not left
    /// waiting for a frame that may never come.
    #[test]
    fn a_poll_removing_a_raw_socket_reports_what_it_took_in() {
        let (mut a, mut b, h, now, _) = connected_pair();
        let raw = b.raw_sctp();
        assert_eq!(a.socket(h).send_slice(b"ping").unwrap(), 4);
        a.poll(now);
        b.remove_raw(raw);
        assert!(b.poll(now), "the data b took in is reported");
        assert!(!b.poll(now), "once");
    }

    /// While frames wait for room in a full device queue the stack asks for no poll before
    /// the recheck (a loop polling at once would spin, taking the CPU from the peer that must
    /// drain the queue), and the link reports room again through its writability, which the
    /// progress core watches: the peer's draining wakes it.
    #[test]
    fn a_full_device_queue_waits_for_the_link_to_have_room() {
        let (mut a, mut b, h, now, cable_a) = connected_pair();
        let mut poll = mio::Poll::new().unwrap();
        let fd = a.fd();
        poll.registry()
            .register(
                &mut mio::unix::SourceFd(&fd),
                mio::Token(1),
                mio::Interest::READABLE | mio::Interest::WRITABLE,
            )
            .unwrap();
        let mut events = mio::Events::with_capacity(8);
        // The first readiness (writable at once) is consumed.
        poll.poll(&mut events, Some(Duration::ZERO)).unwrap();
        // The cable is full (b reads nothing: frames b will drop as not its own fill it),
        // and a has a segment to send.
        let junk = [0u8; 1514];
        let mut filled = 0;
        while cable_a.send(&junk).is_ok() {
            filled += 1;
            assert!(filled < 100_000, "the cable never filled");
        }
        assert_eq!(a.socket(h).send_slice(b"after the junk").unwrap(), 14);
        a.poll(now);
        assert_eq!(a.backlog.len(), 1, "{:?}", a.stats());
        assert!(a.stats().tx_full >= 1, "{:?}", a.stats());
        assert!(a.take_blocked(), "the full queue is reported to the core");
        assert!(!a.take_blocked(), "once");
        assert!(a.waits_for_room());
        // No poll asked for before the recheck, although smoltcp has data to send.
        assert_eq!(a.poll_at(now), Some(now + BACKLOG_RECHECK));
        // Still full: no readiness.
        poll.poll(&mut events, Some(Duration::ZERO)).unwrap();
        assert!(
            events.iter().all(|e| !e.is_writable()),
            "writable with the queue full"
        );
        // The peer drains the cable: the link's writability wakes the core.
        b.poll(now);
        poll.poll(&mut events, Some(Duration::ZERO)).unwrap();
        assert!(
            events
                .iter()
                .any(|e| e.token() == mio::Token(1) && e.is_writable()),
            "no wake-up when the queue had room again"
        );
        // And the next poll sends the backlog first.
        let sent = a.stats().tx_frames;
        a.poll(now);
        assert!(a.stats().tx_frames > sent, "{:?}", a.stats());
        assert_eq!(a.stats().tx_dropped, 0, "{:?}", a.stats());
    }
}
