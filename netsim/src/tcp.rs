//! Simulated TCP/IP hosts: a smoltcp stack on an in-memory device, driven in virtual time.
//!
//! A [`TcpHost`] is a [`Node`] with one Ethernet interface. It owns a smoltcp [`Interface`], a
//! [`SocketSet`] and an application ([`TcpApp`]). Whenever a frame arrives or a timer fires the
//! host polls the stack, lets the application act on its sockets, and polls again so whatever
//! the application wrote goes out at the same instant. smoltcp answers ARP itself, so hosts
//! need no static neighbour entries.
//!
//! smoltcp measures time in microseconds: virtual time is rounded down to the microsecond
//! when handed to the stack, and the stack's deadlines map back exactly.
//!
//! # Socket defaults
//!
//! smoltcp's own defaults suit small embedded devices: Nagle's algorithm on, a 10 ms delayed
//! ACK and tiny buffers chosen by the caller. Sockets made through [`TcpCtx::new_socket`] use
//! [`TcpSocketConfig::default`] instead: Nagle off (protocols that frame their own messages,
//! such as MPA, set `TCP_NODELAY` on real hosts too), a 1 ms delayed ACK (smoltcp still
//! acknowledges every second full segment and every out-of-order segment at once), Reno
//! congestion control and 256 KiB buffers (window scaling follows). The minimum
//! retransmission timeout is fixed at 1 s inside smoltcp 0.14 (as RFC 6298 recommends;
//! Linux uses 200 ms) and cannot be changed from outside; recovery by timeout therefore takes
//! at least a second of virtual time.
//!
//! smoltcp has no sender-side silly-window avoidance apart from Nagle: with Nagle off it sends
//! whatever the congestion window (counted in bytes) or the peer's window allows, so a bulk
//! transfer under Reno mixes full segments with short ones (measured: about 1.5 frames per
//! full segment's worth of data, against 1.0 with Nagle on). Real peers count their window in
//! segments and rarely do this; tests that care about segment boundaries on the wire should
//! set [`TcpSocketConfig::nagle`].

use core::any::Any;
use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

pub use smoltcp;
use smoltcp::iface::{Config, Interface, SocketHandle, SocketSet};
use smoltcp::phy::{self, DeviceCapabilities, Medium};
use smoltcp::socket::tcp;
use smoltcp::wire::{EthernetAddress, HardwareAddress, IpAddress, IpCidr, IpEndpoint};

use crate::link::ETHERNET_HEADER_LEN;
use crate::node::Node;
use crate::time::Instant;

/// Options for TCP sockets made through [`TcpCtx::new_socket`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpSocketConfig {
    /// Receive buffer size in bytes (also bounds the advertised window).
    pub rx_buffer: usize,
    /// Send buffer size in bytes.
    pub tx_buffer: usize,
    /// Nagle's algorithm.
    pub nagle: bool,
    /// Delayed-ACK timeout; `None` acknowledges every segment at once.
    pub ack_delay: Option<Duration>,
    /// Congestion control algorithm.
    pub congestion: tcp::CongestionControl,
    /// Keep-alive interval.
    pub keep_alive: Option<Duration>,
    /// Abort the connection after this long without an answer from the peer.
    pub timeout: Option<Duration>,
}

impl Default for TcpSocketConfig {
    fn default() -> Self {
        TcpSocketConfig {
            rx_buffer: 256 * 1024,
            tx_buffer: 256 * 1024,
            nagle: false,
            ack_delay: Some(Duration::from_millis(1)),
            congestion: tcp::CongestionControl::Reno,
            keep_alive: None,
            timeout: None,
        }
    }
}

/// Addresses and options of a [`TcpHost`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcpHostConfig {
    /// Ethernet address of the host's interface.
    pub mac: [u8; 6],
    /// IPv4 address.
    pub addr: Ipv4Addr,
    /// Prefix length of the directly attached subnet.
    pub prefix_len: u8,
    /// Default gateway, if any.
    pub gateway: Option<Ipv4Addr>,
    /// IP MTU of the interface (the largest IP packet it sends).
    pub mtu: usize,
    /// Seed of the stack's own generator (initial sequence numbers, ephemeral ports). Derive
    /// it from the simulation seed with [`Sim::derive_seed`](crate::Sim::derive_seed) to make
    /// runs with different seeds differ here too.
    pub seed: u64,
    /// Defaults for sockets made through [`TcpCtx::new_socket`].
    pub socket: TcpSocketConfig,
}

impl TcpHostConfig {
    /// Host number `n` on 192.0.2.0/24 (the documentation network): MAC `02:00:00:00:00:n`,
    /// address `192.0.2.n`, MTU 1500, seed `n`.
    pub fn numbered(n: u8) -> TcpHostConfig {
        TcpHostConfig {
            mac: [0x02, 0, 0, 0, 0, n],
            addr: Ipv4Addr::new(192, 0, 2, n),
            prefix_len: 24,
            gateway: None,
            mtu: 1500,
            seed: u64::from(n),
            socket: TcpSocketConfig::default(),
        }
    }

    /// The same configuration with another stack seed.
    pub fn with_seed(mut self, seed: u64) -> TcpHostConfig {
        self.seed = seed;
        self
    }
}

/// The application running on a [`TcpHost`]: later the RNIC engine, in tests a small
/// sender or receiver.
///
/// [`TcpApp::poll`] is called every time the host processes input (a frame or a timer), after
/// the stack has taken that input in and before it sends, so the application sees fresh
/// socket state and its writes leave at once. Closures `FnMut(&mut TcpCtx)` are applications
/// too, and so is `()` (does nothing).
pub trait TcpApp: Any {
    /// Act on the sockets: connect, listen, read, write, close.
    fn poll(&mut self, cx: &mut TcpCtx<'_>);

    /// An instant at which the application wants to be polled even if no frame arrives.
    fn poll_at(&self) -> Option<Instant> {
        None
    }
}

impl TcpApp for () {
    fn poll(&mut self, _cx: &mut TcpCtx<'_>) {}
}

impl<F: FnMut(&mut TcpCtx<'_>) + 'static> TcpApp for F {
    fn poll(&mut self, cx: &mut TcpCtx<'_>) {
        self(cx)
    }
}

/// What an application can reach while it is polled.
pub struct TcpCtx<'a> {
    now: Instant,
    iface: &'a mut Interface,
    sockets: &'a mut SocketSet<'static>,
    config: &'a TcpSocketConfig,
}

impl<'a> TcpCtx<'a> {
    /// The current virtual time.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Adds a TCP socket with the host's [`TcpSocketConfig`].
    pub fn new_socket(&mut self) -> SocketHandle {
        let c = self.config;
        let rx = tcp::SocketBuffer::new(vec![0; c.rx_buffer]);
        let tx = tcp::SocketBuffer::new(vec![0; c.tx_buffer]);
        let mut s = tcp::Socket::new(rx, tx);
        s.set_nagle_enabled(c.nagle);
        s.set_ack_delay(c.ack_delay.map(to_smol_duration));
        s.set_congestion_control(c.congestion);
        s.set_keep_alive(c.keep_alive.map(to_smol_duration));
        s.set_timeout(c.timeout.map(to_smol_duration));
        self.sockets.add(s)
    }

    /// A TCP socket of this host.
    ///
    /// # Panics
    /// If `h` is not a TCP socket of this host (a programming error in the application).
    pub fn socket(&mut self, h: SocketHandle) -> &mut tcp::Socket<'static> {
        self.sockets.get_mut::<tcp::Socket>(h)
    }

    /// Starts an active open from `local_port` to `remote`.
    pub fn connect(
        &mut self,
        h: SocketHandle,
        remote: SocketAddrV4,
        local_port: u16,
    ) -> Result<(), tcp::ConnectError> {
        let remote = IpEndpoint::new(IpAddress::Ipv4(*remote.ip()), remote.port());
        let socket = self.sockets.get_mut::<tcp::Socket>(h);
        socket.connect(self.iface.context(), remote, local_port)
    }

    /// Starts listening on `port`.
    pub fn listen(&mut self, h: SocketHandle, port: u16) -> Result<(), tcp::ListenError> {
        self.sockets.get_mut::<tcp::Socket>(h).listen(port)
    }

    /// The smoltcp interface.
    pub fn iface(&mut self) -> &mut Interface {
        self.iface
    }

    /// All sockets of the host.
    pub fn sockets(&mut self) -> &mut SocketSet<'static> {
        self.sockets
    }
}

/// In-memory smoltcp device: frames in from the simulator, frames out to it.
struct QueueDevice {
    rx: VecDeque<Vec<u8>>,
    tx: VecDeque<Vec<u8>>,
    mtu: usize,
}

struct RxTok(Vec<u8>);
struct TxTok<'a>(&'a mut VecDeque<Vec<u8>>);

impl phy::RxToken for RxTok {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(&self.0)
    }
}

impl phy::TxToken for TxTok<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        let mut buf = vec![0; len];
        let r = f(&mut buf);
        self.0.push_back(buf);
        r
    }
}

impl phy::Device for QueueDevice {
    type RxToken<'a> = RxTok;
    type TxToken<'a> = TxTok<'a>;

    fn receive(
        &mut self,
        _timestamp: smoltcp::time::Instant,
    ) -> Option<(Self::RxToken<'_>, Self::TxToken<'_>)> {
        let frame = self.rx.pop_front()?;
        Some((RxTok(frame), TxTok(&mut self.tx)))
    }

    fn transmit(&mut self, _timestamp: smoltcp::time::Instant) -> Option<Self::TxToken<'_>> {
        Some(TxTok(&mut self.tx))
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ethernet;
        caps.max_transmission_unit = self.mtu.saturating_add(ETHERNET_HEADER_LEN);
        caps
    }
}

fn to_smol_instant(t: Instant) -> smoltcp::time::Instant {
    smoltcp::time::Instant::from_micros(i64::try_from(t.as_micros()).unwrap_or(i64::MAX))
}

fn from_smol_instant(t: smoltcp::time::Instant) -> Instant {
    Instant::from_micros(u64::try_from(t.total_micros()).unwrap_or(0))
}

fn to_smol_duration(d: Duration) -> smoltcp::time::Duration {
    smoltcp::time::Duration::from_micros(u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// A host running smoltcp's TCP/IP stack and a [`TcpApp`]; one Ethernet interface (index 0).
pub struct TcpHost {
    config: TcpHostConfig,
    iface: Interface,
    device: QueueDevice,
    sockets: SocketSet<'static>,
    app: Box<dyn TcpApp>,
    now: Instant,
    needs_poll: bool,
}

impl TcpHost {
    /// A host with the given addresses running `app`.
    pub fn new(config: TcpHostConfig, app: impl TcpApp) -> TcpHost {
        let mut device = QueueDevice {
            rx: VecDeque::new(),
            tx: VecDeque::new(),
            mtu: config.mtu,
        };
        let mut iface_config = Config::new(HardwareAddress::Ethernet(EthernetAddress(config.mac)));
        iface_config.random_seed = config.seed;
        let mut iface = Interface::new(iface_config, &mut device, to_smol_instant(Instant::ZERO));
        let cidr = IpCidr::new(IpAddress::Ipv4(config.addr), config.prefix_len);
        iface.update_ip_addrs(|addrs| {
            // One address always fits: the table holds at least one entry.
            let _ = addrs.push(cidr);
        });
        if let Some(gw) = config.gateway {
            // The route table is empty, so the default route always fits.
            let _ = iface.routes_mut().add_default_ipv4_route(gw);
        }
        TcpHost {
            config,
            iface,
            device,
            sockets: SocketSet::new(Vec::new()),
            app: Box::new(app),
            now: Instant::ZERO,
            needs_poll: true,
        }
    }

    /// The host's configuration.
    pub fn config(&self) -> &TcpHostConfig {
        &self.config
    }

    /// The host's IPv4 address.
    pub fn addr(&self) -> Ipv4Addr {
        self.config.addr
    }

    /// The application, if it is a `T`.
    pub fn app<T: TcpApp>(&self) -> Option<&T> {
        let any: &dyn Any = &*self.app;
        any.downcast_ref::<T>()
    }

    /// The application, mutably, if it is a `T`. The host polls the application again at the
    /// current instant (when reached through [`Sim::node_mut`](crate::Sim::node_mut)).
    pub fn app_mut<T: TcpApp>(&mut self) -> Option<&mut T> {
        self.needs_poll = true;
        let any: &mut dyn Any = &mut *self.app;
        any.downcast_mut::<T>()
    }

    /// A TCP socket of this host, for inspection.
    ///
    /// # Panics
    /// If `h` is not a TCP socket of this host.
    pub fn socket(&self, h: SocketHandle) -> &tcp::Socket<'static> {
        self.sockets.get::<tcp::Socket>(h)
    }

    /// The smoltcp interface.
    pub fn iface(&self) -> &Interface {
        &self.iface
    }

    fn run(&mut self, now: Instant) {
        self.now = now;
        self.needs_poll = false;
        let ts = to_smol_instant(now);
        self.iface.poll(ts, &mut self.device, &mut self.sockets);
        let mut cx = TcpCtx {
            now,
            iface: &mut self.iface,
            sockets: &mut self.sockets,
            config: &self.config.socket,
        };
        self.app.poll(&mut cx);
        self.iface.poll(ts, &mut self.device, &mut self.sockets);
    }
}

impl Node for TcpHost {
    fn interface_count(&self) -> usize {
        1
    }

    fn handle_frame(&mut self, now: Instant, _iface: usize, frame: Vec<u8>) {
        self.device.rx.push_back(frame);
        self.run(now);
    }

    fn poll_transmit(&mut self, _now: Instant) -> Option<(usize, Vec<u8>)> {
        self.device.tx.pop_front().map(|f| (0, f))
    }

    fn poll_timeout(&mut self) -> Option<Instant> {
        if self.needs_poll {
            return Some(self.now);
        }
        let stack = self
            .iface
            .poll_at(to_smol_instant(self.now), &self.sockets)
            .map(from_smol_instant);
        match (stack, self.app.poll_at()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.run(now);
    }
}
