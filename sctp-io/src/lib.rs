//! # softrnic-sctp-io — real sockets under the sans-IO SCTP engine
//!
//! [`SctpSocket`] runs one association of the [`sctp`] engine over the network:
//!
//! - **UDP encapsulation (RFC 6951)**, [`Transport::Udp`]: each SCTP packet is the payload of
//!   one UDP datagram, by default on port 9899 at both ends; no privileges needed. The SCTP
//!   CRC32c is still computed and checked (§5.3, §5.4); the UDP checksum is computed by the
//!   host on send and checked by it on receive. The peer's UDP source port is remembered per
//!   peer address once a packet from it passed the verification-tag check (§5.4), and the
//!   path MTU SCTP sees is 8 bytes smaller (§5.6).
//! - **raw IPv4**, [`Transport::RawIpv4`]: protocol 132 through raw sockets (root or
//!   CAP_NET_RAW, and no kernel SCTP on the host). The kernel builds the IPv4 header on send;
//!   on receive this crate reads the header the kernel delivers and keeps only packets for
//!   its SCTP port.
//! - **Multihoming**: one socket per local address; every local address is announced to the
//!   peer, every peer address it announces becomes a path. Path changes are reported as
//!   [`Notification`]s.
//!
//! One background thread per socket polls the sockets and runs the engine's timers; user
//! calls (`send`, `recv`, …) work on the shared engine under a mutex and send the packets
//! they produce at once. No `unsafe` code.
//!
//! ```no_run
//! use sctp_io::{Config, SctpSocket, Transport};
//! let cfg = Config::new(Transport::udp(), vec!["127.0.0.1".parse().unwrap()], 5001);
//! let server = SctpSocket::listen(cfg).unwrap();
//! server.accept(None).unwrap();
//! while let Ok(m) = server.recv(None) {
//!     println!("{} bytes on stream {}", m.data.len(), m.stream);
//! }
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod driver;
pub mod net;

use std::collections::VecDeque;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant as StdInstant};

use rustix::event::{PollFd, PollFlags, Timespec};
use sctp::{AssocId, Endpoint, EndpointConfig, Event, State};
use thiserror::Error;

pub use net::{SCTP_UDP_PORT, Transport, UdpPortMap};
pub use sctp::{
    AbortReason, AssociationConfig, AssociationStats, Message, PathState, PathStats, SendError,
};

use net::LocalSocket;

/// Socket configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Transport under SCTP.
    pub transport: Transport,
    /// Local IP addresses (one socket each; all announced to the peer).
    pub local_addrs: Vec<IpAddr>,
    /// Local SCTP port (0: a random port from 49152-65535, for clients).
    pub port: u16,
    /// Protocol parameters. `encapsulation_overhead` is set from the transport.
    pub association: AssociationConfig,
    /// A 64-bit seed for tags, TSNs and the cookie key, for reproducible tests only;
    /// `None` (the default) keys the generator with 256 bits from the OS's generator and
    /// draws the ephemeral port from it separately.
    pub seed: Option<u64>,
}

impl Config {
    /// A configuration with default protocol parameters.
    pub fn new(transport: Transport, local_addrs: Vec<IpAddr>, port: u16) -> Config {
        Config {
            transport,
            local_addrs,
            port,
            association: AssociationConfig::default(),
            seed: None,
        }
    }
}

/// What went wrong.
#[derive(Debug, Error)]
pub enum Error {
    /// Socket setup or I/O failed.
    #[error("{0}")]
    Io(#[from] io::Error),
    /// Bad configuration.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The engine refused the association start.
    #[error("cannot connect: {0}")]
    Connect(#[from] sctp::ConnectError),
    /// The engine refused a message.
    #[error("send failed: {0}")]
    Send(#[from] SendError),
    /// The association was aborted.
    #[error("association aborted: {0}")]
    Aborted(String),
    /// The association is closed (shut down or never established).
    #[error("association closed")]
    Closed,
    /// Nothing happened within the time allowed.
    #[error("timed out")]
    TimedOut,
}

/// Association and path changes, for the application to report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notification {
    /// The association is up.
    Connected,
    /// The peer restarted the association; data in flight was lost.
    Restarted,
    /// A path became active.
    PathUp(IpAddr),
    /// A path became Potentially Failed (RFC 7829).
    PathPotentiallyFailed(IpAddr),
    /// A path failed (RFC 9260 §8.2).
    PathDown(IpAddr),
    /// New data now goes to this peer address.
    PrimaryChanged(IpAddr),
    /// The peer sent an ERROR chunk.
    PeerError(String),
    /// Graceful shutdown finished.
    ShutdownComplete,
    /// The association was aborted.
    Aborted(String),
}

impl std::fmt::Display for Notification {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Notification::Connected => write!(f, "association up"),
            Notification::Restarted => write!(f, "association restarted by the peer"),
            Notification::PathUp(a) => write!(f, "path {a}: UP"),
            Notification::PathPotentiallyFailed(a) => write!(f, "path {a}: POTENTIALLY-FAILED"),
            Notification::PathDown(a) => write!(f, "path {a}: DOWN"),
            Notification::PrimaryChanged(a) => write!(f, "primary -> {a}"),
            Notification::PeerError(e) => write!(f, "peer reported error: {e}"),
            Notification::ShutdownComplete => write!(f, "association shut down"),
            Notification::Aborted(r) => write!(f, "association aborted: {r}"),
        }
    }
}

/// Transport-level counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IoStats {
    /// Packets handed to the engine.
    pub packets_in: u64,
    /// Packets sent.
    pub packets_out: u64,
    /// Packets the host refused to send (counted as lost).
    pub send_failures: u64,
    /// Packets dropped by [`SctpSocket::set_blackhole`].
    pub blackholed: u64,
    /// Raw packets for other SCTP ports or unparsable IP headers.
    pub foreign: u64,
}

struct Inner {
    ep: Endpoint,
    assoc: Option<AssocId>,
    socks: Vec<(IpAddr, LocalSocket)>,
    ports: UdpPortMap,
    udp: bool,
    blackhole: Vec<IpAddr>,
    events: VecDeque<Notification>,
    closed: Option<Result<(), String>>,
    io: IoStats,
    last_stats: Option<(Vec<PathStats>, AssociationStats)>,
}

struct Shared {
    inner: Mutex<Inner>,
    cond: Condvar,
    /// Threads blocked on `cond`: the I/O thread skips the wake-up syscall when none is.
    waiters: AtomicUsize,
    /// Messages taken from the engine in a batch, handed out by `recv` without touching
    /// the engine lock (which the I/O thread needs for every packet).
    rx_cache: Mutex<VecDeque<Message>>,
    stop: AtomicBool,
    epoch: StdInstant,
}

impl Shared {
    fn now(&self) -> sctp::Instant {
        sctp::Instant::from_duration(self.epoch.elapsed())
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn engine_addr(ip: IpAddr) -> SocketAddr {
    SocketAddr::new(ip, 0)
}

impl Inner {
    /// Sends everything the engine has queued, in batches of one `sendmmsg` per socket.
    fn flush(&mut self, now: sctp::Instant) {
        let mut batch = Vec::new();
        let ports = self.udp.then_some(&self.ports);
        let r = net::transmit(
            &mut self.ep,
            now,
            &self.socks,
            ports,
            &self.blackhole,
            &mut batch,
        );
        self.io.packets_out += r.sent;
        self.io.send_failures += r.failed;
        self.io.blackholed += r.blackholed;
    }

    fn drain_events(&mut self) -> bool {
        let mut any = false;
        while let Some((id, e)) = self.ep.poll_event() {
            any = true;
            if self.assoc.is_none() {
                self.assoc = Some(id);
            }
            if self.assoc != Some(id) {
                // A second association on a socket that serves one: refuse it.
                if let Some(a) = self.ep.association_mut(id) {
                    a.abort();
                }
                continue;
            }
            let n = match e {
                Event::DataReadable { .. } => continue,
                Event::Connected => Notification::Connected,
                Event::Restarted => Notification::Restarted,
                Event::PathUp { remote } => Notification::PathUp(remote.ip()),
                Event::PathPotentiallyFailed { remote } => {
                    Notification::PathPotentiallyFailed(remote.ip())
                }
                Event::PathDown { remote } => Notification::PathDown(remote.ip()),
                Event::PrimaryChanged { remote } => Notification::PrimaryChanged(remote.ip()),
                Event::ErrorReceived { causes } => Notification::PeerError(format!("{causes:?}")),
                Event::ShutdownComplete => {
                    self.closed = Some(Ok(()));
                    Notification::ShutdownComplete
                }
                Event::Aborted { reason } => {
                    let r = describe_abort(&reason);
                    self.closed = Some(Err(r.clone()));
                    Notification::Aborted(r)
                }
            };
            self.events.push_back(n);
        }
        if let Some(id) = self.assoc
            && let Some(a) = self.ep.association(id)
        {
            self.last_stats = Some((a.path_stats(), a.stats().clone()));
        }
        any
    }

    fn association_mut(&mut self) -> Result<&mut sctp::Association, Error> {
        let id = self.assoc.ok_or(Error::Closed)?;
        self.ep.association_mut(id).ok_or(Error::Closed)
    }
}

fn describe_abort(r: &AbortReason) -> String {
    match r {
        AbortReason::Peer(c) if c.is_empty() => "ABORT from the peer".into(),
        AbortReason::Peer(c) => format!("ABORT from the peer: {c:?}"),
        AbortReason::Local => "aborted locally".into(),
        AbortReason::Timeout => "peer unreachable (retransmissions exhausted)".into(),
        AbortReason::ProtocolViolation(s) => format!("protocol violation: {s}"),
        AbortReason::SetupFailed(s) => format!("setup failed: {s}"),
    }
}

/// One SCTP association over real sockets (see the crate docs).
pub struct SctpSocket {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    transport: Transport,
    local_addrs: Vec<IpAddr>,
    port: u16,
    udp_port: u16,
}

impl std::fmt::Debug for SctpSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SctpSocket")
            .field("transport", &self.transport)
            .field("local_addrs", &self.local_addrs)
            .field("port", &self.port)
            .finish()
    }
}

impl SctpSocket {
    fn open(cfg: Config, listen: bool) -> Result<SctpSocket, Error> {
        if cfg.local_addrs.is_empty() {
            return Err(Error::Config("no local address".into()));
        }
        let os_err =
            |e: getrandom::Error| Error::Io(io::Error::other(format!("OS random generator: {e}")));
        // Secrets from the OS: 256 bits for the generator behind tags, TSNs and the cookie
        // key, and the ephemeral port from a separate draw (so it reveals nothing of them).
        let entropy = match cfg.seed {
            Some(_) => None,
            None => {
                let mut k = [0u8; 32];
                getrandom::fill(&mut k).map_err(os_err)?;
                Some(k)
            }
        };
        let port = if cfg.port != 0 {
            cfg.port
        } else {
            49152 + (getrandom::u32().map_err(os_err)? % 16384) as u16
        };
        let socks = net::open(cfg.transport, &cfg.local_addrs)?;
        let udp_port = net::bound_udp_port(&socks);
        let mut assoc_cfg = cfg.association.clone();
        assoc_cfg.encapsulation_overhead = cfg.transport.overhead();
        let mut ecfg = EndpointConfig::new(
            port,
            cfg.local_addrs.iter().map(|ip| engine_addr(*ip)).collect(),
            cfg.seed.unwrap_or(0),
        );
        ecfg.entropy = entropy;
        ecfg.accept_incoming = listen;
        ecfg.association = assoc_cfg;
        let (udp, default_port) = match cfg.transport {
            Transport::Udp { remote_port, .. } => (true, remote_port),
            Transport::RawIpv4 => (false, 0),
        };
        let inner = Inner {
            ep: Endpoint::new(ecfg),
            assoc: None,
            socks: cfg.local_addrs.iter().copied().zip(socks).collect(),
            ports: UdpPortMap::new(default_port),
            udp,
            blackhole: Vec::new(),
            events: VecDeque::new(),
            closed: None,
            io: IoStats::default(),
            last_stats: None,
        };
        let shared = Arc::new(Shared {
            inner: Mutex::new(inner),
            cond: Condvar::new(),
            waiters: AtomicUsize::new(0),
            rx_cache: Mutex::new(VecDeque::new()),
            stop: AtomicBool::new(false),
            epoch: StdInstant::now(),
        });
        let s2 = shared.clone();
        let thread = std::thread::Builder::new()
            .name("sctp-io".into())
            .spawn(move || io_loop(&s2, port))?;
        Ok(SctpSocket {
            shared,
            thread: Some(thread),
            transport: cfg.transport,
            local_addrs: cfg.local_addrs,
            port,
            udp_port,
        })
    }

    /// Opens a listening socket; [`SctpSocket::accept`] waits for the association. The
    /// socket serves one association: later ones are aborted.
    pub fn listen(cfg: Config) -> Result<SctpSocket, Error> {
        SctpSocket::open(cfg, true)
    }

    /// Connects to `remotes[0]`, SCTP port `peer_port`, and waits until the association is
    /// up (or `timeout`). The other peer addresses are learned from its INIT ACK; addresses
    /// given here but not announced by the peer are not used.
    pub fn connect(
        cfg: Config,
        remotes: &[IpAddr],
        peer_port: u16,
        timeout: Option<Duration>,
    ) -> Result<SctpSocket, Error> {
        let first = *remotes
            .first()
            .ok_or_else(|| Error::Config("no remote address".into()))?;
        let s = SctpSocket::open(cfg, false)?;
        {
            let now = s.shared.now();
            let mut g = s.shared.lock();
            let id = g.ep.connect(now, engine_addr(first), peer_port)?;
            g.assoc = Some(id);
            g.flush(now);
        }
        s.wait_established(timeout)?;
        Ok(s)
    }

    /// Waits for the (first) association to come up.
    pub fn accept(&self, timeout: Option<Duration>) -> Result<(), Error> {
        self.wait_established(timeout)
    }

    fn wait_established(&self, timeout: Option<Duration>) -> Result<(), Error> {
        let deadline = timeout.map(|t| StdInstant::now() + t);
        let mut g = self.shared.lock();
        loop {
            if let Some(Err(r)) = &g.closed {
                return Err(Error::Aborted(r.clone()));
            }
            if let Some(id) = g.assoc {
                match g.ep.association(id).map(|a| a.state()) {
                    Some(State::CookieWait | State::CookieEchoed) => {}
                    Some(State::Closed) | None => return Err(Error::Closed),
                    Some(_) => return Ok(()),
                }
            }
            g = self.wait(g, deadline)?;
        }
    }

    fn wait<'a>(
        &'a self,
        g: MutexGuard<'a, Inner>,
        deadline: Option<StdInstant>,
    ) -> Result<MutexGuard<'a, Inner>, Error> {
        self.shared.waiters.fetch_add(1, Ordering::SeqCst);
        let r = self.wait_inner(g, deadline);
        self.shared.waiters.fetch_sub(1, Ordering::SeqCst);
        r
    }

    fn wait_inner<'a>(
        &'a self,
        g: MutexGuard<'a, Inner>,
        deadline: Option<StdInstant>,
    ) -> Result<MutexGuard<'a, Inner>, Error> {
        match deadline {
            None => Ok(self.shared.cond.wait(g).unwrap_or_else(|p| p.into_inner())),
            Some(d) => {
                let now = StdInstant::now();
                if now >= d {
                    return Err(Error::TimedOut);
                }
                Ok(self
                    .shared
                    .cond
                    .wait_timeout(g, d - now)
                    .unwrap_or_else(|p| p.into_inner())
                    .0)
            }
        }
    }

    /// Sends a message; blocks while the send buffer is full.
    pub fn send(&self, stream: u16, ppid: u32, unordered: bool, data: &[u8]) -> Result<(), Error> {
        self.send_until(stream, ppid, unordered, data, None)
    }

    /// Sends a message; blocks while the send buffer is full, but not past `deadline`
    /// (`Err(TimedOut)`, nothing queued).
    pub fn send_until(
        &self,
        stream: u16,
        ppid: u32,
        unordered: bool,
        data: &[u8],
        deadline: Option<StdInstant>,
    ) -> Result<(), Error> {
        let mut g = self.shared.lock();
        loop {
            if let Some(Err(r)) = &g.closed {
                return Err(Error::Aborted(r.clone()));
            }
            let now = self.shared.now();
            match g.association_mut()?.send(stream, ppid, unordered, data) {
                Ok(()) => {
                    g.flush(now);
                    return Ok(());
                }
                Err(SendError::BufferFull { .. }) => {
                    g.flush(now);
                    g = self.wait(g, deadline)?;
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// The next message. `Err(Closed)` once the association has ended and everything
    /// received was read; `Err(TimedOut)` when `timeout` passed first.
    pub fn recv(&self, timeout: Option<Duration>) -> Result<Message, Error> {
        {
            let mut c = self
                .shared
                .rx_cache
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            if let Some(m) = c.pop_front() {
                return Ok(m);
            }
        }
        let deadline = timeout.map(|t| StdInstant::now() + t);
        let mut g = self.shared.lock();
        loop {
            let now = self.shared.now();
            if let Some(id) = g.assoc
                && let Some(a) = g.ep.association_mut(id)
                && let Some(m) = a.recv()
            {
                // Take what else is ready in the same turn of the lock.
                let mut c = self
                    .shared
                    .rx_cache
                    .lock()
                    .unwrap_or_else(|p| p.into_inner());
                while c.len() < 256 {
                    match a.recv() {
                        Some(x) => c.push_back(x),
                        None => break,
                    }
                }
                drop(c);
                // Reading may reopen the window: a window update goes out now.
                g.flush(now);
                return Ok(m);
            }
            let gone = g.assoc.is_some_and(|id| {
                g.ep.association(id)
                    .is_none_or(|a| a.state() == State::Closed)
            });
            if gone || g.closed.is_some() {
                return match &g.closed {
                    Some(Err(r)) => Err(Error::Aborted(r.clone())),
                    _ => Err(Error::Closed),
                };
            }
            g = self.wait(g, deadline)?;
        }
    }

    /// The Adaptation Layer Indication the peer announced in its INIT or INIT ACK (RFC 5061
    /// §4.2.7; RFC 5043 §5.1), if any.
    pub fn peer_adaptation_indication(&self) -> Option<u32> {
        let g = self.shared.lock();
        g.assoc
            .and_then(|id| g.ep.association(id))
            .and_then(|a| a.peer_adaptation_indication())
    }

    /// The next notification, if any (non-blocking).
    pub fn poll_notification(&self) -> Option<Notification> {
        self.shared.lock().events.pop_front()
    }

    /// Starts a graceful shutdown: queued data is delivered first.
    pub fn shutdown(&self) {
        let now = self.shared.now();
        let mut g = self.shared.lock();
        if let Ok(a) = g.association_mut() {
            a.shutdown(now);
        }
        g.flush(now);
    }

    /// Aborts the association.
    pub fn abort(&self) {
        let now = self.shared.now();
        let mut g = self.shared.lock();
        if let Ok(a) = g.association_mut() {
            a.abort();
        }
        g.flush(now);
        g.drain_events();
        drop(g);
        // Threads waiting in recv/send/wait_closed see the association gone at once.
        self.shared.cond.notify_all();
    }

    /// Waits until the association has closed (shutdown complete or abort). `Ok` after a
    /// graceful shutdown.
    pub fn wait_closed(&self, timeout: Option<Duration>) -> Result<(), Error> {
        let deadline = timeout.map(|t| StdInstant::now() + t);
        let mut g = self.shared.lock();
        loop {
            match &g.closed {
                Some(Ok(())) => return Ok(()),
                Some(Err(r)) => return Err(Error::Aborted(r.clone())),
                None => {}
            }
            if g.assoc.is_none_or(|id| g.ep.association(id).is_none()) && g.assoc.is_some() {
                return Ok(());
            }
            g = self.wait(g, deadline)?;
        }
    }

    /// Bytes sent and not yet acknowledged.
    pub fn buffered_amount(&self) -> usize {
        let g = self.shared.lock();
        g.assoc
            .and_then(|id| g.ep.association(id))
            .map_or(0, |a| a.buffered_amount())
    }

    /// Per-path statistics (the last known ones once the association is gone).
    pub fn path_stats(&self) -> Vec<PathStats> {
        let g = self.shared.lock();
        match g.assoc.and_then(|id| g.ep.association(id)) {
            Some(a) => a.path_stats(),
            None => g.last_stats.clone().map(|s| s.0).unwrap_or_default(),
        }
    }

    /// Association counters.
    pub fn stats(&self) -> AssociationStats {
        let g = self.shared.lock();
        match g.assoc.and_then(|id| g.ep.association(id)) {
            Some(a) => a.stats().clone(),
            None => g.last_stats.clone().map(|s| s.1).unwrap_or_default(),
        }
    }

    /// Transport counters.
    pub fn io_stats(&self) -> IoStats {
        self.shared.lock().io.clone()
    }

    /// Negotiated (outbound, inbound) stream counts.
    pub fn streams(&self) -> (u16, u16) {
        let g = self.shared.lock();
        g.assoc
            .and_then(|id| g.ep.association(id))
            .map_or((0, 0), |a| a.streams())
    }

    /// The peer's SCTP port (0 before an association exists).
    pub fn peer_port(&self) -> u16 {
        let g = self.shared.lock();
        g.assoc
            .and_then(|id| g.ep.association(id))
            .map_or(0, |a| a.peer_port())
    }

    /// A description of the transport as bound (actual local UDP port).
    pub fn transport_description(&self) -> String {
        match self.transport {
            Transport::Udp { remote_port, .. } => format!(
                "UDP encapsulation (RFC 6951), local UDP port {}, remote UDP port {remote_port}",
                self.udp_port
            ),
            Transport::RawIpv4 => Transport::RawIpv4.to_string(),
        }
    }

    /// Peer addresses.
    pub fn remote_addrs(&self) -> Vec<IpAddr> {
        let g = self.shared.lock();
        g.assoc
            .and_then(|id| g.ep.association(id))
            .map(|a| a.remote_addresses().iter().map(|r| r.ip()).collect())
            .unwrap_or_default()
    }

    /// Makes `remote` the primary path.
    pub fn set_primary(&self, remote: IpAddr) -> Result<(), Error> {
        let mut g = self.shared.lock();
        g.association_mut()?
            .set_primary(engine_addr(remote))
            .map_err(|e| Error::Config(e.to_string()))
    }

    /// Local addresses.
    pub fn local_addrs(&self) -> &[IpAddr] {
        &self.local_addrs
    }

    /// Local SCTP port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Local UDP encapsulation port (0 for raw IP).
    pub fn udp_port(&self) -> u16 {
        self.udp_port
    }

    /// The transport.
    pub fn transport(&self) -> Transport {
        self.transport
    }

    /// Drops every packet sent from or received on local address `local` while `on` (a
    /// fault-injection hook for failover tests and demos).
    pub fn set_blackhole(&self, local: IpAddr, on: bool) {
        let mut g = self.shared.lock();
        g.blackhole.retain(|a| *a != local);
        if on {
            g.blackhole.push(local);
        }
    }
}

impl Drop for SctpSocket {
    fn drop(&mut self) {
        {
            // A socket dropped with a live association aborts it so the peer learns at once.
            let now = self.shared.now();
            let mut g = self.shared.lock();
            if g.closed.is_none()
                && let Ok(a) = g.association_mut()
                && a.state() != State::Closed
            {
                a.abort();
                g.flush(now);
            }
        }
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Longest the I/O thread sleeps: user calls can arm timers it does not know about yet.
const MAX_SLEEP: Duration = Duration::from_millis(5);

fn io_loop(shared: &Shared, sctp_port: u16) {
    let mut buf = vec![0u8; 65536];
    let fds_owned: Vec<std::os::fd::OwnedFd> = {
        let g = shared.lock();
        g.socks
            .iter()
            .filter_map(|(_, s)| s.fd().try_clone_to_owned().ok())
            .collect()
    };
    while !shared.stop.load(Ordering::Relaxed) {
        let sleep = {
            let g = shared.lock();
            let now = shared.now();
            g.ep.poll_timeout()
                .map(|t| t.saturating_duration_since(now))
                .unwrap_or(MAX_SLEEP)
                .min(MAX_SLEEP)
        };
        let mut fds: Vec<PollFd<'_>> = fds_owned
            .iter()
            .map(|f| PollFd::new(f, PollFlags::IN))
            .collect();
        let ts = Timespec {
            tv_sec: sleep.as_secs() as i64,
            tv_nsec: i64::from(sleep.subsec_nanos()),
        };
        if let Err(e) = rustix::event::poll(&mut fds, Some(&ts))
            && e != rustix::io::Errno::INTR
        {
            break;
        }
        let ready: Vec<usize> = fds
            .iter()
            .enumerate()
            .filter(|(_, f)| !f.revents().is_empty())
            .map(|(i, _)| i)
            .collect();
        let mut g = shared.lock();
        let mut changed = false;
        for i in ready {
            // Bounded so one busy socket cannot starve timers and the others.
            for _ in 0..512 {
                let r = match net::recv(&g.socks[i].1, sctp_port, &mut buf) {
                    Ok(Some(r)) => r,
                    Ok(None) | Err(_) => break,
                };
                if r.end <= r.start {
                    g.io.foreign += 1;
                    continue;
                }
                let local = g.socks[i].0;
                if g.blackhole.contains(&local) {
                    g.io.blackholed += 1;
                    continue;
                }
                let now = shared.now();
                let pkt = &buf[r.start..r.end];
                g.ep.handle_packet(now, engine_addr(local), engine_addr(r.from), pkt);
                g.io.packets_in += 1;
                if g.udp {
                    let Inner { ep, ports, .. } = &mut *g;
                    ports.learn(ep, r.from, r.udp_port, pkt);
                }
                changed = true;
            }
        }
        let now = shared.now();
        if g.ep.poll_timeout().is_some_and(|t| t <= now) {
            g.ep.handle_timeout(now);
            changed = true;
        }
        g.flush(now);
        if (g.drain_events() || changed) && shared.waiters.load(Ordering::SeqCst) > 0 {
            shared.cond.notify_all();
        }
    }
}
