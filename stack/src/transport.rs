//! The progress core: kernel TCP sockets in an epoll set, driving the QP engines.
//!
//! One [`Core`] per RNIC. Each pass ([`Core::turn`]) takes the application's commands,
//! services QPs whose doorbell rang (transmit), waits for socket readiness (edge
//! triggered), reads and writes what is ready, fires due timers, and turns engine events
//! into RNIC [`Event`]s. The sockets are non-blocking with `TCP_NODELAY` set.
//!
//! The application side ([`crate::rnic`]) reaches the core through [`Shared`]: it queues
//! [`Cmd`]s, rings the doorbell and reads the events the core publishes. The types both
//! sides name (events, errors, per-QP state) live in the shared module below them both.

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use mio::net::{TcpListener, TcpStream};
use mio::{Interest, Token};
use mpa::{ConnFrame, FrameError};
use smoltcp::iface::SocketHandle;
use smoltcp::socket::tcp;

use crate::Instant;
use crate::device::{self, DevSock, SharedDev};

use crate::engine::{CloseReason, QpConfig, QpEngine, QpEvent, QpState, Setup};
use crate::mem::MemTable;
use crate::shared::{
    CmError, ConnReqId, ConnStatus, ConnectRequest, Event, ListenerId, ProgressMode, QpShared,
    RnicConfig, RnicError, Slot, setup_event,
};

mod assoc_qp;
pub(crate) mod ksctp;
pub(crate) mod sctp;
mod timers;

use ksctp::{KsctpConnect, KsctpListen};
use sctp::{SctpConnect, SctpListen};

/// Token of the eventfd waker.
pub(crate) const WAKER: Token = Token(0);

/// After our side shuts its write half, how long we keep reading for the peer's FIN before
/// the socket is dropped.
const LINGER: Duration = Duration::from_secs(2);

/// How often a busy-polling core looks at its timers.
const TIMER_GRANULARITY: Duration = Duration::from_millis(1);

/// How often every connection's deadline is asked for, touched or not: a guard for a
/// deadline moved outside the core's view (the core marks every connection it touches).
const FULL_RESCAN: Duration = Duration::from_millis(100);

/// Largest EMSS used: an FPDU's ULPDU_Length is 16 bits.
const MAX_EMSS: u32 = 65_535;

/// Smallest EMSS accepted from `TCP_MAXSEG` (below, the default is used).
const MIN_EMSS: u32 = 128;

/// MPA Request frames longer than this (header + 512 octets of private data) cannot be.
const MAX_REQUEST_BYTES: usize = 4096;

/// A connection's byte stream: a kernel TCP socket, or a TCP connection of softrnic's own
/// stack on a raw-Ethernet device. Both read and write like non-blocking sockets.
#[derive(Debug)]
enum Stream {
    Kernel(TcpStream),
    Dev(DevSock),
}

impl Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Kernel(s) => s.read(buf),
            Stream::Dev(d) => d.read(buf),
        }
    }

    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Kernel(s) => s.write(buf),
            Stream::Dev(d) => d.write(buf),
        }
    }

    /// One gather write (payloads straight from registered memory on a kernel socket).
    fn write_parts(&self, parts: &[crate::mem::TxPart<'_>]) -> io::Result<usize> {
        match self {
            Stream::Kernel(s) => crate::mem::write_parts(s.as_fd(), parts),
            Stream::Dev(d) => d.write_parts(parts),
        }
    }

    /// `Write`: FIN after what is queued; `Both`: abortive (a reset once dropped).
    fn shutdown(&mut self, how: Shutdown) {
        match self {
            Stream::Kernel(s) => {
                let _ = s.shutdown(how);
            }
            Stream::Dev(d) if how == Shutdown::Write => d.shutdown_write(),
            Stream::Dev(d) => d.set_abort(),
        }
    }

    fn local_addr(&self) -> Option<SocketAddr> {
        match self {
            Stream::Kernel(s) => s.local_addr().ok(),
            Stream::Dev(d) => d.local_addr(),
        }
    }

    fn peer_addr(&self) -> Option<SocketAddr> {
        match self {
            Stream::Kernel(s) => s.peer_addr().ok(),
            Stream::Dev(d) => d.peer_addr(),
        }
    }

    fn deregister(&mut self, r: &mio::Registry) {
        if let Stream::Kernel(s) = self {
            let _ = r.deregister(s);
        }
    }

    /// `Ok(true)`: connected; `Ok(false)`: still connecting; `Err`: the connect failed.
    fn connect_status(&self) -> Result<bool, String> {
        match self {
            Stream::Kernel(sock) => match sock.take_error() {
                Ok(Some(e)) => Err(e.to_string()),
                Err(e) => Err(e.to_string()),
                Ok(None) => match sock.peer_addr() {
                    Ok(_) => Ok(true),
                    Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(false),
                    Err(e) => Err(e.to_string()),
                },
            },
            Stream::Dev(d) => d.connect_status(),
        }
    }

    /// Socket options of a data connection (kernel sockets only).
    fn prepare(&self, buffers: Option<usize>) {
        if let Stream::Kernel(s) = self {
            let _ = s.set_nodelay(true);
            set_buffers(s, buffers);
        }
    }

    fn emss(&self, cap: Option<u32>) -> u32 {
        match self {
            Stream::Kernel(s) => emss_of(s, cap),
            Stream::Dev(d) => {
                let mss = d.emss().clamp(MIN_EMSS, MAX_EMSS);
                cap.map_or(mss, |c| mss.min(c.max(MIN_EMSS)))
            }
        }
    }

    /// The lower layer, for logs.
    fn llp(&self) -> String {
        match self {
            Stream::Kernel(_) => "MPA/TCP".into(),
            Stream::Dev(d) => format!("MPA/TCP on device {}", device::lock(&d.dev).name()),
        }
    }

    fn on_dev(&self, dev: &SharedDev) -> bool {
        matches!(self, Stream::Dev(d) if Arc::ptr_eq(&d.dev, dev))
    }
}

#[derive(Debug)]
pub(crate) struct Active {
    sock: Stream,
    qp: Arc<QpShared>,
    /// The socket accepted our last write without blocking.
    writable: bool,
    /// Our write half is shut; reading until EOF or `linger`.
    shut: Option<Instant>,
    /// `handle_closed` was reported to the engine.
    closed: bool,
    /// Bytes read but not yet taken by the engine (an incomplete FPDU) and room for more.
    rx: RxBuf,
    /// The QP's span (its id and addresses), entered while it is serviced.
    span: tracing::Span,
    /// Counts the connection in its lane's load once it is placed (established, with
    /// several progress threads); `None` until then.
    placed: Option<LoadGuard>,
    /// A device connection placed on a lane other than the device's (lane 0): lane 0 holds
    /// a weak reference, to wake this lane when the device has something for it, for as long
    /// as the connection lasts.
    on_lane: Option<Arc<()>>,
}

/// One connection in a lane's load, taken off again when the connection goes.
#[derive(Debug)]
pub(crate) struct LoadGuard(Arc<AtomicUsize>);

impl LoadGuard {
    fn new(load: &Arc<AtomicUsize>) -> LoadGuard {
        load.fetch_add(1, Ordering::SeqCst);
        LoadGuard(load.clone())
    }
}

impl Drop for LoadGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Room kept in a connection's read buffer beyond the read size for the one incomplete
/// FPDU the engine may leave untaken (under 70 000 bytes).
const RX_SLACK: usize = 128 * 1024;

/// A connection's read buffer: `buf[start..end]` was read but not taken by the engine.
///
/// Reads go to the free space after `end`, so a whole FPDU is handed to the engine in one
/// piece (and placed straight from here) even when a read ended inside it; the untaken
/// tail is moved to the front only when the free space falls below one read size.
#[derive(Debug, Default)]
struct RxBuf {
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl RxBuf {
    /// Lends the buffer's memory out when everything read was taken (an idle connection
    /// holds none), leaving it empty.
    fn release(&mut self) -> Option<Vec<u8>> {
        if self.start != self.end || self.buf.is_empty() {
            return None;
        }
        self.start = 0;
        self.end = 0;
        Some(std::mem::take(&mut self.buf))
    }

    /// The free space to read into, at least `chunk` bytes (allocated on first use).
    fn space(&mut self, chunk: usize) -> &mut [u8] {
        let cap = 2 * chunk + RX_SLACK;
        if self.buf.len() < cap {
            self.buf.resize(cap, 0);
        }
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.buf.len() - self.end < chunk {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        self.buf.get_mut(self.end..).unwrap_or(&mut [])
    }

    /// The bytes read and not yet taken.
    fn pending(&self) -> &[u8] {
        self.buf.get(self.start..self.end).unwrap_or(&[])
    }
}

#[derive(Debug)]
enum Conn {
    Listener {
        id: ListenerId,
        sock: TcpListener,
    },
    /// A listener on a device: a few listening sockets, each replaced once it has taken a
    /// connection.
    DevListener {
        id: ListenerId,
        dev: SharedDev,
        port: u16,
        /// Listening sockets, each with when it took a SYN (its handshake has until
        /// [`DEV_HANDSHAKE`] after that).
        backlog: Vec<(SocketHandle, Option<Instant>)>,
    },
    /// Passive side: reading the MPA Request.
    Incoming {
        sock: Stream,
        listener: ListenerId,
        peer: SocketAddr,
        buf: Vec<u8>,
        deadline: Option<Instant>,
        req: Option<ConnReqId>,
    },
    /// Active side: TCP connect in progress.
    Connecting {
        sock: Stream,
        qp: Arc<QpShared>,
        cfg: mpa::Config,
    },
    /// Writing a reject Reply, then lingering.
    Rejecting {
        sock: Stream,
        out: Vec<u8>,
        shut: Option<Instant>,
        deadline: Instant,
    },
    Active(Active),
    /// An SCTP endpoint (a listener's, or an active connection's), under the token of its
    /// first socket.
    Sctp(Box<sctp::SctpEp>),
    /// A kernel SCTP listener or association (one-to-one socket).
    Ksctp(Box<ksctp::Ksctp>),
}

/// The progress core of one RNIC.
#[derive(Debug)]
pub(crate) struct Core {
    poll: mio::Poll,
    events: mio::Events,
    conns: HashMap<Token, Conn>,
    next_token: usize,
    start: std::time::Instant,
    /// Read size.
    read_chunk: usize,
    /// The read buffer connections borrow while they are serviced: a connection keeps one
    /// only while it holds part of an FPDU, so idle connections cost no read buffer.
    spare_rx: Vec<u8>,
    ready: Vec<(Token, bool, bool, bool)>,
    /// The readiness being serviced includes the peer's FIN or an error: read until
    /// `EAGAIN` even after a short read (the FIN may have come with the data).
    read_closed: bool,
    /// When the timers were last looked at.
    timers_checked: Instant,
    /// Every connection's next deadline, asked for again only of the connections touched
    /// since: one busy QP among thousands of idle ones does not pay for them.
    timerq: timers::TimerQueue,
    /// When every connection's deadline was last asked for (see [`FULL_RESCAN`]).
    rescanned: Instant,
    /// Connections that found their socket full (set when they are serviced), so that
    /// [`Core::write_blocked`] need not visit every connection.
    write_waiting: std::collections::HashSet<Token>,
    /// The tokens of an SCTP endpoint's further sockets → its key token.
    aliases: HashMap<Token, Token>,
    /// Raw-Ethernet devices with softrnic's TCP/IP, under their epoll tokens.
    devs: Vec<(Token, SharedDev)>,
    /// Lane 0: the device connections placed on other lanes, woken when their device
    /// changes (while the connection lasts: see [`Active::on_lane`]).
    dev_elsewhere: Vec<(SharedDev, Arc<QpShared>, std::sync::Weak<()>)>,
    /// The lane (progress thread) this core serves.
    lane: usize,
}

/// Listening sockets a device listener keeps ready (connections arriving together).
pub(crate) const DEV_BACKLOG: usize = 4;

/// How long a device listener's socket may sit in a TCP handshake (a SYN that nobody
/// completes, e.g. from a spoofed address) before it listens again.
const DEV_HANDSHAKE: Duration = Duration::from_secs(5);

/// Runs progress thread `lane` until the RNIC stops.
///
/// With [`crate::RnicConfig::inline_progress`] the thread lets go of its core while it sleeps, so
/// that an application thread may do the work meanwhile (a post transmits in the posting
/// thread, [`Shared::assist`] services ready connections): it waits for readiness with
/// `poll(2)` on the core's epoll fd, which reports pending events without taking them, and
/// takes the core back to serve them (unless an application thread served them first).
pub(crate) fn run_thread(shared: &Shared, lane: usize) {
    let lane = shared.lane(lane);
    let busy = shared.cfg.busy_poll;
    let inline = shared.cfg.inline_progress;
    let mut last_work = std::time::Instant::now();
    let _ = lane.thread.set(std::thread::current());
    let mut guard = lane.core.lock().unwrap_or_else(|p| p.into_inner());
    while !shared.stop.load(Ordering::SeqCst) {
        let Some(core) = guard.as_mut() else {
            return;
        };
        let done = core.turn(shared, Some(Duration::ZERO)).unwrap_or(0);
        if done > 0 {
            last_work = std::time::Instant::now();
            continue;
        }
        // Nothing to do: poll on only while the busy-poll window lasts (with none, sleep at
        // once — each idle pass is an `epoll_wait` and a `sched_yield`, CPU the peer thread
        // or the application could use). Spinning cannot speed up a socket that is full
        // (we wait for the peer to read): sleep at once then, and leave the CPU to the peer.
        // Neither does spinning while an application thread polls the core itself.
        let spin = !busy.is_zero()
            && !core.write_blocked()
            && last_work.elapsed() < busy
            && (!inline || lane.lease_left().is_zero());
        if spin {
            // Busy polling yields: on a machine with fewer cores than spinning threads the
            // peer (or the application) gets the CPU at once.
            std::thread::yield_now();
            continue;
        }
        lane.sleeping.store(true, Ordering::SeqCst);
        if lane.rung.load(Ordering::SeqCst) || shared.stop.load(Ordering::SeqCst) {
            lane.sleeping.store(false, Ordering::SeqCst);
            continue;
        }
        let timeout = core.next_timeout().unwrap_or(Duration::from_secs(1));
        if inline {
            // From here an application thread may take the core: a post rung now finds
            // `sleeping` set and either transmits itself or wakes this thread.
            drop(guard);
            let lease = lane.lease_left();
            if lease.is_zero() {
                shared.stats.thread_sleeps.fetch_add(1, Ordering::Relaxed);
                lane.wait_ready(timeout);
                last_work = std::time::Instant::now();
            } else {
                // An application thread polls the core ([`Shared::assist`]): leave the
                // sockets to it rather than be woken by every arrival, and the timers too
                // (its passes run them); take over when it stops (its lease runs out or
                // it ends it) or the doorbell rings. A renewed lease costs a wake-up per
                // lease period, not a pass over the core.
                shared
                    .stats
                    .thread_leased_sleeps
                    .fetch_add(1, Ordering::Relaxed);
                loop {
                    let left = lane.lease_left();
                    if left.is_zero()
                        || lane.rung.load(Ordering::SeqCst)
                        || shared.stop.load(Ordering::SeqCst)
                    {
                        break;
                    }
                    std::thread::park_timeout(left);
                }
            }
            guard = lane.core.lock().unwrap_or_else(|p| p.into_inner());
        } else {
            shared.stats.thread_sleeps.fetch_add(1, Ordering::Relaxed);
            let _ = core.turn(shared, Some(timeout));
            last_work = std::time::Instant::now();
        }
        lane.sleeping.store(false, Ordering::SeqCst);
    }
}

fn emss_of(sock: &TcpStream, cap: Option<u32>) -> u32 {
    let mss = socket2::SockRef::from(sock)
        .tcp_mss()
        .ok()
        .filter(|&m| m >= MIN_EMSS)
        .unwrap_or(crate::engine::DEFAULT_EMSS);
    let mss = mss.min(MAX_EMSS);
    cap.map_or(mss, |c| mss.min(c.max(MIN_EMSS)))
}

/// Sets a data connection's socket buffers when the configuration asks for a size (best
/// effort: the kernel caps them); otherwise the kernel's autotuning stays on.
fn set_buffers(sock: &TcpStream, size: Option<usize>) {
    let Some(size) = size else {
        return;
    };
    let s = socket2::SockRef::from(sock);
    let _ = s.set_send_buffer_size(size);
    let _ = s.set_recv_buffer_size(size);
}

fn is_transient(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::Interrupted
}

/// A connection's next deadline (see [`QpShared::engine_deadline`] for a QP's).
fn deadline_of(c: &Conn, now: Instant) -> Option<Instant> {
    match c {
        Conn::Incoming { deadline, .. } => *deadline,
        Conn::Rejecting { deadline, .. } => Some(*deadline),
        Conn::Active(a) => match (a.shut, a.qp.engine_deadline(now)) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        },
        Conn::Sctp(e) => e.next_deadline(now),
        Conn::Ksctp(k) => k.next_deadline(now),
        Conn::Listener { .. } | Conn::Connecting { .. } | Conn::DevListener { .. } => None,
    }
}

impl Core {
    pub(crate) fn new(
        poll: mio::Poll,
        read_chunk: usize,
        start: std::time::Instant,
        lane: usize,
    ) -> Core {
        Core {
            poll,
            events: mio::Events::with_capacity(256),
            conns: HashMap::new(),
            next_token: 1,
            start,
            read_chunk: read_chunk.max(4096),
            spare_rx: Vec::new(),
            ready: Vec::new(),
            read_closed: false,
            timers_checked: Instant::ZERO,
            timerq: timers::TimerQueue::default(),
            rescanned: Instant::ZERO,
            write_waiting: std::collections::HashSet::new(),
            aliases: HashMap::new(),
            devs: Vec::new(),
            dev_elsewhere: Vec::new(),
            lane,
        }
    }

    fn now(&self) -> Instant {
        Instant::from_duration(self.start.elapsed())
    }

    fn token(&mut self) -> Token {
        self.next_token += 1;
        Token(self.next_token)
    }

    /// Whether some connection waits for its socket to become writable, or some device for
    /// room in its queue.
    pub(crate) fn write_blocked(&self) -> bool {
        self.write_waiting.iter().any(|t| {
            matches!(self.conns.get(t), Some(Conn::Active(a)) if !a.writable && a.shut.is_none())
        }) || self
            .devs
            .iter()
            .any(|(_, d)| device::lock(d).waits_for_room())
    }

    /// The time until the next timer of any connection or device, if any.
    pub(crate) fn next_timeout(&mut self) -> Option<Duration> {
        let now = self.now();
        self.refresh_timers(now);
        let mut next = self.timerq.earliest();
        for (_, d) in &self.devs {
            if let Some(at) = device::lock(d).poll_at(now) {
                next = Some(next.map_or(at, |n| n.min(at)));
            }
        }
        next.map(|d| d.saturating_duration_since(now))
    }

    /// Asks the connections touched since the last call for their next deadline (and every
    /// connection once per [`FULL_RESCAN`]).
    fn refresh_timers(&mut self, now: Instant) {
        let tokens: Vec<Token> = if now.saturating_duration_since(self.rescanned) >= FULL_RESCAN {
            self.rescanned = now;
            self.timerq.take_dirty();
            self.conns.keys().copied().collect()
        } else if self.timerq.has_dirty() {
            self.timerq.take_dirty()
        } else {
            return;
        };
        for t in tokens {
            match self.conns.get(&t) {
                Some(c) => {
                    let d = deadline_of(c, now);
                    self.timerq.set(t, d);
                }
                None => self.timerq.forget(t),
            }
        }
    }

    /// Adds (or puts back) a connection; its deadline is asked for before the next sleep.
    fn add_conn(&mut self, t: Token, c: Conn) {
        self.conns.insert(t, c);
        self.timerq.mark(t);
    }

    /// Runs queued commands and transmits for rung doorbells, without asking the kernel
    /// for socket readiness (manual mode, right after a post: the next pass collects
    /// readiness, which epoll keeps until then). Returns how many pieces of work were done.
    pub(crate) fn kick(&mut self, shared: &Shared) -> usize {
        if shared.lane(self.lane).rung.swap(false, Ordering::SeqCst) {
            self.commands(shared) + self.doorbells(shared) + self.pump_devs(shared)
        } else {
            0
        }
    }

    /// One pass; returns how many pieces of work were done.
    pub(crate) fn turn(&mut self, shared: &Shared, timeout: Option<Duration>) -> io::Result<usize> {
        let mut work = 0;
        if shared.lane(self.lane).rung.swap(false, Ordering::SeqCst) {
            work += self.commands(shared);
            work += self.doorbells(shared);
        }
        // Work done already (commands, doorbells): only collect what is ready, do not wait.
        let timeout = if work > 0 {
            Some(Duration::ZERO)
        } else {
            timeout
        };
        // A zero timeout (busy polling) needs no look at the timers.
        let timeout = match timeout {
            Some(t) if t.is_zero() => Some(t),
            t => match (t, self.next_timeout()) {
                (Some(t), Some(n)) => Some(t.min(n)),
                (t, None) => t,
                (None, n) => n,
            },
        };
        match self.poll.poll(&mut self.events, timeout) {
            Ok(()) => {}
            Err(e) if is_transient(&e) => {}
            Err(e) => return Err(e),
        }
        let mut ready = std::mem::take(&mut self.ready);
        ready.clear();
        for ev in self.events.iter() {
            if ev.token() == WAKER || self.devs.iter().any(|(t, _)| *t == ev.token()) {
                continue;
            }
            let closed = ev.is_read_closed() || ev.is_error();
            let r = ev.is_readable() || closed;
            let w = ev.is_writable() || ev.is_write_closed() || ev.is_error();
            ready.push((ev.token(), r, w, closed));
        }
        for &(t, r, w, closed) in &ready {
            self.read_closed = closed;
            work += 1;
            self.service(shared, t, r, w);
            self.read_closed = false;
        }
        self.ready = ready;
        // Timers have millisecond granularity at most; look at them that often (each look
        // visits every connection).
        let now = self.now();
        if now.saturating_duration_since(self.timers_checked) >= TIMER_GRANULARITY {
            self.timers_checked = now;
            work += self.timers(shared);
        }
        // Frames in and out of the devices, and the connections they concern (after the
        // timers, so what they queued goes out in the same pass).
        work += self.pump_devs(shared);
        Ok(work)
    }

    fn commands(&mut self, shared: &Shared) -> usize {
        let cmds: Vec<Cmd> = shared
            .lane(self.lane)
            .cmds
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
            .collect();
        let n = cmds.len();
        for c in cmds {
            self.command(shared, c);
        }
        n
    }

    fn command(&mut self, shared: &Shared, cmd: Cmd) {
        // A QP's command queued on this lane before its connection moved to another one
        // follows the connection there.
        if cmd.lane() != self.lane {
            shared.command(cmd);
            return;
        }
        match cmd {
            Cmd::Listen(id, l) => self.listen_tcp(shared, id, l),
            Cmd::CloseListener(id) => self.close_listener(shared, id),
            Cmd::ListenDev(id, dev, port, socks) => self.listen_dev(shared, id, dev, port, socks),
            Cmd::ConnectDev(qp, dev, peer, local, cfg) => {
                self.connect_dev(shared, qp, dev, peer, local, cfg)
            }
            Cmd::Connect(qp, addr, cfg) => self.connect_tcp(shared, qp, addr, cfg),
            Cmd::Accept(req, qp, cfg) => self.accept(shared, req, qp, cfg),
            Cmd::Reject(req, pd) => self.reject(shared, req, pd),
            Cmd::Adopt(qp, stream, setup) => self.adopt(shared, qp, stream, setup),
            Cmd::SocketInode(qp, reply) => self.socket_inode(&qp, &reply),
            Cmd::ListenSctp(id, l) => self.listen_sctp(shared, id, *l),
            Cmd::ConnectSctp(qp, c, cfg) => self.connect_sctp(shared, qp, *c, cfg),
            Cmd::ListenKsctp(id, l) => self.listen_ksctp(shared, id, *l),
            Cmd::ConnectKsctp(qp, c, cfg) => self.connect_ksctp(shared, qp, *c, cfg),
            Cmd::StackUnacked(qp, reply) => self.stack_unacked(&qp, &reply),
            Cmd::Modify(qp, to) => self.disconnect(shared, qp, to),
            Cmd::Destroy(qp) => self.destroy(shared, qp),
            Cmd::Migrate(a) => self.take_over(shared, *a),
            Cmd::MigrateSctp(qp, e) => self.take_over_sctp(shared, qp, *e),
            Cmd::MigrateKsctp(qp, k) => self.take_over_ksctp(shared, qp, k),
        }
    }

    /// A kernel TCP listener joins the epoll set.
    fn listen_tcp(&mut self, shared: &Shared, id: ListenerId, l: std::net::TcpListener) {
        let mut sock = TcpListener::from_std(l);
        let t = self.token();
        if self
            .poll
            .registry()
            .register(&mut sock, t, Interest::READABLE)
            .is_ok()
        {
            self.add_conn(t, Conn::Listener { id, sock });
            // Connections may have queued before registration.
            self.accept_all(shared, t);
        }
    }

    /// Removes a listener (kernel TCP, device, softrnic's SCTP or kernel SCTP).
    fn close_listener(&mut self, shared: &Shared, id: ListenerId) {
        let t = self
            .conns
            .iter()
            .find(|(_, c)| matches!(c, Conn::Listener { id: i, .. } if *i == id))
            .map(|(t, _)| *t);
        if let Some(t) = t {
            self.remove(t);
        } else if let Some(t) = self.conns.iter().find_map(|(t, c)| match c {
            Conn::DevListener { id: i, .. } if *i == id => Some(*t),
            _ => None,
        }) {
            self.remove(t);
        } else if !self.close_sctp_listener(shared, id) {
            self.close_ksctp_listener(id);
        }
    }

    /// Connects over a device's TCP.
    fn connect_dev(
        &mut self,
        shared: &Shared,
        qp: Arc<QpShared>,
        dev: SharedDev,
        peer: std::net::SocketAddrV4,
        local: Option<std::net::Ipv4Addr>,
        cfg: mpa::Config,
    ) {
        self.watch_dev(&dev);
        let r = device::lock(&dev).connect(peer, local);
        match r {
            Ok((h, _)) => {
                tracing::debug!(qp = qp.id.0, %peer, "connecting over a device's TCP");
                let t = self.token();
                let sock = Stream::Dev(DevSock::new(dev, h));
                self.add_conn(t, Conn::Connecting { sock, qp, cfg });
                self.pump_devs(shared);
            }
            Err(e) => fail_connect(shared, &qp, CmError::Tcp(e)),
        }
    }

    /// Connects over the kernel's TCP.
    fn connect_tcp(
        &mut self,
        shared: &Shared,
        qp: Arc<QpShared>,
        addr: SocketAddr,
        cfg: mpa::Config,
    ) {
        match TcpStream::connect(addr) {
            Ok(mut sock) => {
                tracing::debug!(qp = qp.id.0, %addr, "connecting over TCP");
                let t = self.token();
                match self.poll.registry().register(
                    &mut sock,
                    t,
                    Interest::READABLE | Interest::WRITABLE,
                ) {
                    Ok(()) => {
                        let sock = Stream::Kernel(sock);
                        self.add_conn(t, Conn::Connecting { sock, qp, cfg });
                    }
                    Err(e) => fail_connect(shared, &qp, CmError::Tcp(e.to_string())),
                }
            }
            Err(e) => fail_connect(shared, &qp, CmError::Tcp(e.to_string())),
        }
    }

    /// Accepts a pending connection request on `qp` (TCP, device or SCTP).
    fn accept(&mut self, shared: &Shared, req: ConnReqId, qp: Arc<QpShared>, cfg: mpa::Config) {
        let t = self.conns.iter().find_map(|(t, c)| match c {
            Conn::Incoming { req: Some(r), .. } if *r == req => Some(*t),
            _ => None,
        });
        let Some(t) = t else {
            if !self.accept_sctp(shared, req, &qp, &cfg)
                && !self.accept_ksctp(shared, req, &qp, &cfg)
            {
                fail_connect(shared, &qp, CmError::Withdrawn);
            }
            return;
        };
        let Some(Conn::Incoming { sock, buf, .. }) = self.conns.remove(&t) else {
            return;
        };
        self.start_active(shared, t, sock, qp, Setup::Responder(cfg), Some(buf));
    }

    /// Rejects a pending connection request: an MPA Reply with the Reject bit, then close.
    fn reject(&mut self, shared: &Shared, req: ConnReqId, pd: Vec<u8>) {
        let t = self.conns.iter().find_map(|(t, c)| match c {
            Conn::Incoming { req: Some(r), .. } if *r == req => Some(*t),
            _ => None,
        });
        let Some(t) = t else {
            if !self.reject_sctp(shared, req, &pd) {
                self.reject_ksctp(shared, req, &pd);
            }
            return;
        };
        let Some(Conn::Incoming { sock, buf, .. }) = self.conns.remove(&t) else {
            return;
        };
        let mut out = Vec::new();
        if let Ok((request, _)) = ConnFrame::parse(&buf) {
            let local = mpa::Config::default();
            let reply = mpa::reject_reply(&local, &request, &pd);
            if reply.emit(&mut out).is_err() {
                out.clear();
                let _ = mpa::reject_reply(&local, &request, &[]).emit(&mut out);
            }
        }
        let deadline = self.now() + LINGER;
        self.add_conn(
            t,
            Conn::Rejecting {
                sock,
                out,
                shut: None,
                deadline,
            },
        );
        self.service(shared, t, true, true);
    }

    /// Runs MPA (or full operation) on a TCP connection the application made.
    fn adopt(
        &mut self,
        shared: &Shared,
        qp: Arc<QpShared>,
        stream: std::net::TcpStream,
        setup: Setup,
    ) {
        let mut sock = TcpStream::from_std(stream);
        let t = self.token();
        if let Err(e) =
            self.poll
                .registry()
                .register(&mut sock, t, Interest::READABLE | Interest::WRITABLE)
        {
            fail_connect(shared, &qp, CmError::Tcp(e.to_string()));
            return;
        }
        self.start_active(shared, t, Stream::Kernel(sock), qp, setup, None);
    }

    /// Answers the inode of the QP's kernel TCP socket.
    fn socket_inode(&self, qp: &Arc<QpShared>, reply: &std::sync::mpsc::SyncSender<Option<u64>>) {
        let ino = self.find_qp(qp).and_then(|t| match self.conns.get(&t) {
            Some(Conn::Active(Active {
                sock: Stream::Kernel(s),
                ..
            })) => socket_inode(s),
            _ => None,
        });
        let _ = reply.try_send(ino);
    }

    /// Answers the octets not yet acknowledged in softrnic's own stacks (device TCP, SCTP).
    fn stack_unacked(&self, qp: &Arc<QpShared>, reply: &std::sync::mpsc::SyncSender<Option<u64>>) {
        let dev = self.find_qp(qp).and_then(|t| match self.conns.get(&t) {
            Some(Conn::Active(Active {
                sock: Stream::Dev(d),
                ..
            })) => Some(d.unacked()),
            _ => None,
        });
        let _ = reply.try_send(
            dev.or_else(|| self.sctp_unacked(qp))
                .or_else(|| self.ksctp_unacked(qp)),
        );
    }

    /// A graceful disconnect: posted work completes, then the stream closes.
    /// A disconnect (`to` = `Closing`) or another consumer-requested state transition
    /// (`Terminate`, `Error`; see [`QpEngine::modify`]) of `qp`.
    fn disconnect(&mut self, shared: &Shared, qp: Arc<QpShared>, to: QpState) {
        let t = self.find_qp(&qp);
        match t.and_then(|t| self.conns.get(&t).map(|c| (t, c))) {
            Some((t, Conn::Active(a))) => {
                let _span = a.span.clone().entered();
                modify_qp(&qp, to);
                self.service(shared, t, false, false);
            }
            Some((t, Conn::Connecting { .. })) => {
                self.remove(t);
                qp.flush_early();
                fail_connect(shared, &qp, CmError::Aborted);
            }
            _ => {
                if !self.disconnect_sctp(shared, &qp, to) {
                    self.disconnect_ksctp(shared, &qp, to);
                }
            }
        }
    }

    /// Destroys a QP: an abortive close, everything outstanding flushed.
    fn destroy(&mut self, shared: &Shared, qp: Arc<QpShared>) {
        let t = self.find_qp(&qp);
        let now = self.now();
        match t.and_then(|t| self.conns.remove(&t).map(|c| (t, c))) {
            Some((_, Conn::Active(mut a))) => {
                let _span = a.span.clone().entered();
                a.sock.deregister(self.poll.registry());
                // Unread data makes the kernel send a reset: an abortive close.
                a.sock.shutdown(Shutdown::Both);
                end_engine(shared, &qp, now, (!a.closed).then_some(CloseReason::Local));
            }
            Some((_, Conn::Connecting { mut sock, .. })) => {
                sock.deregister(self.poll.registry());
                sock.shutdown(Shutdown::Both);
                fail_connect(shared, &qp, CmError::Aborted);
            }
            Some((t, other)) => {
                self.add_conn(t, other);
            }
            None => {
                if !self.destroy_sctp(shared, &qp) {
                    self.destroy_ksctp(shared, &qp);
                }
            }
        }
        qp.flush_early();
        if qp.status() == ConnStatus::Connecting {
            qp.set_status(ConnStatus::Failed(CmError::Aborted));
        }
    }

    fn find_qp(&self, qp: &Arc<QpShared>) -> Option<Token> {
        // The token the QP remembers, if its connection is still there.
        let t = Token(qp.token.load(Ordering::SeqCst));
        match self.conns.get(&t) {
            Some(Conn::Active(a)) if Arc::ptr_eq(&a.qp, qp) => return Some(t),
            Some(Conn::Connecting { qp: q, .. }) if Arc::ptr_eq(q, qp) => return Some(t),
            _ => {}
        }
        self.conns.iter().find_map(|(t, c)| match c {
            Conn::Active(a) if Arc::ptr_eq(&a.qp, qp) => Some(*t),
            Conn::Connecting { qp: q, .. } if Arc::ptr_eq(q, qp) => Some(*t),
            _ => None,
        })
    }

    fn doorbells(&mut self, shared: &Shared) -> usize {
        let rung = std::mem::take(
            &mut *shared
                .lane(self.lane)
                .rung_qps
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
        );
        // The connections of the QPs rung, found through their tokens; a QP without one
        // here (an SCTP association's, or not connected yet) makes the core visit every
        // connection, as SCTP endpoints look at their QPs themselves.
        // A device connection away from the device's lane is rung by lane 0 when the
        // device has something for it too: it is serviced as readable and writable.
        let mut tokens: Vec<(Token, bool)> = Vec::new();
        let mut visit_all = false;
        for q in &rung {
            let t = Token(q.token.load(Ordering::SeqCst));
            match self.conns.get(&t) {
                Some(Conn::Active(a)) if Arc::ptr_eq(&a.qp, q) => {
                    let posted = a.qp.tx_pending.swap(false, Ordering::SeqCst);
                    if a.on_lane.is_some() {
                        tokens.push((t, true));
                    } else if posted {
                        tokens.push((t, false));
                    }
                }
                _ => visit_all = true,
            }
        }
        if visit_all {
            tokens.extend(self.conns.iter().filter_map(|(t, c)| match c {
                Conn::Active(a) if a.qp.tx_pending.swap(false, Ordering::SeqCst) => {
                    Some((*t, a.on_lane.is_some()))
                }
                Conn::Sctp(e) if e.doorbell() => Some((*t, false)),
                Conn::Ksctp(k) if k.doorbell() => Some((*t, false)),
                _ => None,
            }));
        }
        let n = tokens.len();
        for (t, io) in tokens {
            self.service(shared, t, io, io);
        }
        n
    }

    fn remove(&mut self, t: Token) {
        self.write_waiting.remove(&t);
        self.timerq.forget(t);
        if let Some(c) = self.conns.remove(&t) {
            let r = self.poll.registry();
            match c {
                Conn::Listener { mut sock, .. } => {
                    let _ = r.deregister(&mut sock);
                }
                Conn::DevListener { dev, backlog, .. } => {
                    let mut d = device::lock(&dev);
                    for (h, _) in backlog {
                        d.release(h, true);
                    }
                }
                Conn::Incoming { mut sock, .. }
                | Conn::Connecting { mut sock, .. }
                | Conn::Rejecting { mut sock, .. } => sock.deregister(r),
                Conn::Active(mut a) => a.sock.deregister(r),
                Conn::Sctp(e) => {
                    self.add_conn(t, Conn::Sctp(e));
                    self.remove_sctp(t);
                }
                Conn::Ksctp(k) => {
                    self.add_conn(t, Conn::Ksctp(k));
                    self.remove_ksctp(t);
                }
            }
        }
    }

    /// Installs the engine of `qp` on the connected `sock` and starts serving it.
    fn start_active(
        &mut self,
        shared: &Shared,
        t: Token,
        sock: Stream,
        qp: Arc<QpShared>,
        setup: Setup,
        already_read: Option<Vec<u8>>,
    ) {
        sock.prepare(shared.cfg.socket_buffer);
        // The span is entered from here on, so that what the engine reports while it is
        // set up (a responder's engine takes the Request and is established at once) is
        // the QP's.
        let span = tracing::info_span!(
            "qp",
            qp = qp.id.0,
            llp = %sock.llp(),
            local = %sock.local_addr().map_or_else(|| "?".into(), |a| a.to_string()),
            peer = %sock.peer_addr().map_or_else(|| "?".into(), |a| a.to_string()),
        );
        let entered = span.clone().entered();
        tracing::debug!("TCP connection up, MPA setup starts");
        let now = self.now();
        let cfg = qp_config(shared, &qp, sock.emss(shared.cfg.max_emss));
        let mut engine = match QpEngine::new(cfg, shared.mem.clone(), setup, now) {
            Ok(e) => e,
            Err(e) => {
                let mut sock = sock;
                sock.deregister(self.poll.registry());
                qp.flush_early();
                fail_connect(shared, &qp, CmError::Tcp(format!("engine: {e}")));
                return;
            }
        };
        {
            let mut s = qp.lock();
            post_early_receives(&qp, &mut s, &mut engine);
            if let Some(buf) = already_read {
                engine.handle_stream(now, &buf);
            }
            // Posts go to the doorbell rings from now on.
            qp.publish_engine(&mut engine, true);
            s.engine = Some(engine);
        }
        drop(entered);
        qp.token.store(t.0, Ordering::SeqCst);
        self.add_conn(
            t,
            Conn::Active(Active {
                sock,
                qp,
                writable: true,
                shut: None,
                closed: false,
                rx: RxBuf::default(),
                span,
                placed: None,
                on_lane: None,
            }),
        );
        self.service(shared, t, true, true);
    }

    fn accept_all(&mut self, shared: &Shared, t: Token) {
        loop {
            let Some(Conn::Listener { sock, id }) = self.conns.get(&t) else {
                return;
            };
            let listener = *id;
            match sock.accept() {
                Ok((mut s, peer)) => {
                    tracing::debug!(%peer, listener = listener.0, "TCP connection accepted");
                    let _ = s.set_nodelay(true);
                    let nt = self.token();
                    if self
                        .poll
                        .registry()
                        .register(&mut s, nt, Interest::READABLE | Interest::WRITABLE)
                        .is_err()
                    {
                        continue;
                    }
                    self.incoming(shared, nt, Stream::Kernel(s), listener, peer);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if is_transient(&e) => {}
                Err(_) => return,
            }
        }
    }

    fn service(&mut self, shared: &Shared, t: Token, readable: bool, writable: bool) {
        let t = self.aliases.get(&t).copied().unwrap_or(t);
        self.timerq.mark(t);
        let Some(kind) = self.conns.get(&t).map(|c| match c {
            Conn::Listener { .. } => 0,
            Conn::Incoming { .. } => 1,
            Conn::Connecting { .. } => 2,
            Conn::Rejecting { .. } => 3,
            Conn::Active(_) => 4,
            Conn::Sctp(_) => 5,
            Conn::DevListener { .. } => 6,
            Conn::Ksctp(_) => 7,
        }) else {
            return;
        };
        match kind {
            0 => self.accept_all(shared, t),
            1 => self.service_incoming(shared, t),
            2 => self.service_connecting(shared, t),
            3 => self.service_rejecting(t),
            4 => self.service_active(shared, t, readable, writable),
            5 => self.service_sctp(shared, t),
            7 => self.service_ksctp(shared, t),
            _ => self.accept_dev(shared, t),
        }
    }

    fn service_incoming(&mut self, shared: &Shared, t: Token) {
        let now = self.now();
        let Some(Conn::Incoming {
            sock,
            listener,
            peer,
            buf,
            deadline,
            req,
        }) = self.conns.get_mut(&t)
        else {
            return;
        };
        let mut eof = false;
        let mut chunk = [0u8; 1024];
        loop {
            match sock.read(&mut chunk) {
                Ok(0) => {
                    eof = true;
                    break;
                }
                Ok(n) => buf.extend_from_slice(chunk.get(..n).unwrap_or(&[])),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if is_transient(&e) => {}
                Err(_) => {
                    eof = true;
                    break;
                }
            }
            if buf.len() > MAX_REQUEST_BYTES {
                break;
            }
        }
        if req.is_none() {
            match ConnFrame::parse(buf) {
                Ok((request, _)) => {
                    let id = shared.new_request_id();
                    tracing::info!(
                        %peer,
                        req = id.0,
                        revision = request.revision,
                        crc = request.crc,
                        markers = request.markers,
                        "MPA Request received"
                    );
                    *req = Some(id);
                    *deadline = None;
                    let local = sock.local_addr().unwrap_or(*peer);
                    shared.offer_request(ConnectRequest {
                        id,
                        listener: *listener,
                        peer: *peer,
                        local,
                        private_data: request.private_data.clone(),
                        request: Some(request),
                        sctp: None,
                    });
                }
                Err(FrameError::Truncated { .. }) if buf.len() <= MAX_REQUEST_BYTES => {}
                // A malformed Request: the responder closes (RFC 5044 §7.1.2 leaves no
                // Reply to send for a frame that is not a Request).
                Err(e) => {
                    tracing::info!(%peer, error = %e, "malformed MPA Request: closing");
                    eof = true;
                }
            }
        }
        let _ = now;
        if eof {
            if let Some(Conn::Incoming { req: Some(id), .. }) = self.conns.get(&t) {
                shared.withdraw_request(*id);
            }
            self.remove(t);
        }
    }

    fn service_connecting(&mut self, shared: &Shared, t: Token) {
        let Some(Conn::Connecting { sock, qp, .. }) = self.conns.get(&t) else {
            return;
        };
        let err = match sock.connect_status() {
            Ok(true) => None,
            Ok(false) => return,
            Err(e) => Some(e),
        };
        let qp = qp.clone();
        if let Some(e) = err {
            self.remove(t);
            qp.flush_early();
            fail_connect(shared, &qp, CmError::Tcp(e));
            return;
        }
        let Some(Conn::Connecting { sock, qp, cfg }) = self.conns.remove(&t) else {
            return;
        };
        self.start_active(shared, t, sock, qp, Setup::Initiator(cfg), None);
    }

    fn service_rejecting(&mut self, t: Token) {
        let now = self.now();
        let Some(Conn::Rejecting {
            sock, out, shut, ..
        }) = self.conns.get_mut(&t)
        else {
            return;
        };
        let mut done = false;
        while !out.is_empty() {
            match sock.write(out) {
                Ok(n) => {
                    out.drain(..n.min(out.len()));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if is_transient(&e) => {}
                Err(_) => {
                    done = true;
                    break;
                }
            }
        }
        if out.is_empty() && shut.is_none() {
            sock.shutdown(Shutdown::Write);
            *shut = Some(now + LINGER);
        }
        if shut.is_some() {
            let mut b = [0u8; 512];
            loop {
                match sock.read(&mut b) {
                    Ok(0) => {
                        done = true;
                        break;
                    }
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if is_transient(&e) => {}
                    Err(_) => {
                        done = true;
                        break;
                    }
                }
            }
        }
        if done {
            self.remove(t);
        }
    }

    fn service_active(&mut self, shared: &Shared, t: Token, readable: bool, writable: bool) {
        let now = self.now();
        let Some(Conn::Active(a)) = self.conns.get_mut(&t) else {
            return;
        };
        let _span = a.span.clone().entered();
        if writable {
            a.writable = true;
        }
        let qp = a.qp.clone();
        let mut slot = qp.lock();
        let Some(eng) = slot.engine.as_mut() else {
            return;
        };
        // Work posted through the doorbell rings enters the engine before anything is
        // read (receives) or written (sends).
        qp.drain_rings(eng);
        let mut finished = false;
        let mut eof = false;
        let mut reset = false;
        if readable {
            if a.rx.buf.is_empty() {
                a.rx.buf = std::mem::take(&mut self.spare_rx);
            }
            loop {
                // Ask for the rest of a partly read FPDU only, so that the buffer empties
                // and the next read lands at its start again: the read buffer stays small
                // and cache-warm.
                let missing = eng.rx_missing(a.rx.pending());
                let space = a.rx.space(self.read_chunk);
                let want = missing.unwrap_or(self.read_chunk).min(space.len());
                let space = space.get_mut(..want).unwrap_or_default();
                match a.sock.read(space) {
                    Ok(0) => {
                        eof = true;
                        break;
                    }
                    Ok(n) => {
                        a.rx.end += n;
                        // A receive posted before these bytes arrived must be there when
                        // they are processed, even if it was posted during this service.
                        qp.drain_rings(eng);
                        let took = if a.shut.is_none() {
                            eng.handle_stream_partial(now, a.rx.pending())
                        } else {
                            a.rx.pending().len()
                        };
                        a.rx.start += took;
                        // A short read drained the socket (epoll signals every later
                        // arrival) unless a FIN came with this readiness.
                        if n < want && !self.read_closed {
                            break;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if is_transient(&e) => {}
                    Err(_) => {
                        reset = true;
                        break;
                    }
                }
            }
        }
        // Everything read was taken: the buffer goes back to the core (or is freed when the
        // core has one already).
        if let Some(buf) = a.rx.release()
            && self.spare_rx.is_empty()
        {
            self.spare_rx = buf;
        }
        // Transmit until the engine has nothing or the socket is full: one gather sendmsg per
        // batch, payloads straight from registered memory (zero-copy transmit).
        while a.writable && a.shut.is_none() && !reset {
            let sock = &a.sock;
            match eng.transmit_with(|parts| sock.write_parts(parts)) {
                None => break,
                Some(Ok(_)) => {}
                Some(Err(e)) if e.kind() == io::ErrorKind::WouldBlock => a.writable = false,
                Some(Err(e)) if is_transient(&e) => {}
                Some(Err(_)) => reset = true,
            }
        }
        if reset && !a.closed {
            a.closed = true;
            eng.handle_closed(now, CloseReason::Reset);
            finished = true;
        }
        if !a.closed && a.shut.is_none() && eng.should_close_transport() {
            a.sock.shutdown(Shutdown::Write);
            a.shut = Some(now + LINGER);
        }
        if eof && !a.closed {
            a.closed = true;
            let reason = if a.shut.is_some() {
                CloseReason::Local
            } else {
                CloseReason::PeerClosed
            };
            eng.handle_closed(now, reason);
        }
        if eof || (a.closed && a.shut.is_none()) {
            finished = true;
        }
        if a.shut.is_some_and(|d| now >= d) {
            if !a.closed {
                a.closed = true;
                eng.handle_closed(now, CloseReason::Local);
            }
            finished = true;
        }
        if !a.writable && a.shut.is_none() {
            self.write_waiting.insert(t);
        } else {
            self.write_waiting.remove(&t);
        }
        drain_events(shared, &qp, Some(&mut *eng));
        qp.publish_engine(eng, !finished);
        // Established with several progress threads: place it.
        let place = !finished
            && a.placed.is_none()
            && !shared.lanes.is_empty()
            && eng.state() == QpState::Rts;
        // A device connection on another lane than the device's: lane 0 sends what it
        // wrote (and the window its reads opened) when it next polls the device.
        let poll_dev = a.on_lane.is_some();
        drop(slot);
        if finished {
            self.remove(t);
        } else if place {
            self.place(shared, t);
        }
        if poll_dev {
            shared.lane(0).ring();
        }
    }

    /// Places an established MPA connection (kernel TCP or a device's) on the least-loaded
    /// lane (ties: the lowest lane), moving it there when that is not this one. Only lane 0
    /// places: every connection is set up there.
    fn place(&mut self, shared: &Shared, t: Token) {
        let (to, guard) = least_loaded(shared);
        if to == self.lane || shared.stop.load(Ordering::SeqCst) {
            if let Some(Conn::Active(a)) = self.conns.get_mut(&t) {
                a.placed = Some(guard);
            }
            return;
        }
        let Some(Conn::Active(mut a)) = self.conns.remove(&t) else {
            return;
        };
        self.write_waiting.remove(&t);
        self.timerq.forget(t);
        a.sock.deregister(self.poll.registry());
        a.placed = Some(guard);
        if let Stream::Dev(d) = &a.sock {
            // The device stays with this lane (its frames, its TCP/IP): the connection's
            // new lane is woken when the device has something for it.
            let alive = Arc::new(());
            self.dev_elsewhere
                .push((d.dev.clone(), a.qp.clone(), Arc::downgrade(&alive)));
            a.on_lane = Some(alive);
        }
        tracing::debug!(parent: &a.span, lane = to, "placed on progress thread");
        let lane = shared.lane(to);
        let mut cmds = lane.cmds.lock().unwrap_or_else(|p| p.into_inner());
        // Under the new lane's command lock: a command of the QP's that reads the new lane
        // is queued behind the connection itself; one that read the old lane is forwarded.
        a.qp.lane.store(to, Ordering::SeqCst);
        cmds.push_back(Cmd::Migrate(Box::new(a)));
        drop(cmds);
        lane.ring();
    }

    /// Takes over a connection placed on this lane: it joins this core's epoll set and is
    /// serviced at once (work posted while it moved is in its rings).
    fn take_over(&mut self, shared: &Shared, mut a: Active) {
        let t = self.token();
        if let Stream::Kernel(s) = &mut a.sock
            && let Err(e) =
                self.poll
                    .registry()
                    .register(s, t, Interest::READABLE | Interest::WRITABLE)
        {
            tracing::warn!(parent: &a.span, error = %e, "cannot watch the placed connection: aborting it");
            let now = self.now();
            a.sock.shutdown(Shutdown::Both);
            end_engine(
                shared,
                &a.qp,
                now,
                (!a.closed).then_some(CloseReason::Reset),
            );
            return;
        }
        a.qp.token.store(t.0, Ordering::SeqCst);
        self.add_conn(t, Conn::Active(a));
        self.service(shared, t, true, true);
    }

    fn timers(&mut self, shared: &Shared) -> usize {
        let now = self.now();
        self.refresh_timers(now);
        let due = self.timerq.pop_due(now);
        for &t in &due {
            // Firing moves (or ends) the deadline.
            self.timerq.mark(t);
        }
        let n = due.len();
        for t in due {
            match self.conns.get(&t) {
                Some(Conn::Incoming { .. }) | Some(Conn::Rejecting { .. }) => self.remove(t),
                Some(Conn::Active(a)) => {
                    let qp = a.qp.clone();
                    {
                        let mut s = qp.lock();
                        if let Some(e) = s.engine.as_mut() {
                            e.handle_timeout(now);
                        }
                    }
                    self.service(shared, t, false, false);
                }
                Some(Conn::Sctp(_)) => self.service_sctp(shared, t),
                Some(Conn::Ksctp(_)) => self.service_ksctp(shared, t),
                _ => {}
            }
        }
        n
    }

    /// Aborts every connection (RNIC close). Commands still queued run first, so a reject
    /// issued just before the close still reaches the peer.
    pub(crate) fn shutdown(&mut self, shared: &Shared) {
        self.commands(shared);
        let now = self.now();
        let tokens: Vec<Token> = self.conns.keys().copied().collect();
        for t in tokens {
            match self.conns.remove(&t) {
                Some(Conn::Active(mut a)) => {
                    let _span = a.span.clone().entered();
                    a.sock.deregister(self.poll.registry());
                    a.sock.shutdown(Shutdown::Both);
                    end_engine(
                        shared,
                        &a.qp,
                        now,
                        (!a.closed).then_some(CloseReason::Local),
                    );
                }
                Some(Conn::Connecting { qp, .. }) => fail_connect(shared, &qp, CmError::Aborted),
                Some(Conn::Rejecting { mut sock, out, .. }) => {
                    // Best effort: the reject Reply is small and fits the socket buffer.
                    let _ = sock.write(&out);
                    sock.shutdown(Shutdown::Write);
                }
                Some(c @ Conn::Sctp(_)) => {
                    self.add_conn(t, c);
                    self.shutdown_sctp(shared, t);
                }
                Some(c @ Conn::Ksctp(_)) => {
                    self.conns.insert(t, c);
                    self.shutdown_ksctp(shared, t);
                }
                _ => {}
            }
        }
        // What the connections queued last goes out; devices stay open while the RNIC is.
        self.pump_devs(shared);
    }

    /// Starts watching a device's frames (once per device).
    pub(super) fn watch_dev(&mut self, dev: &SharedDev) {
        if self.devs.iter().any(|(_, d)| Arc::ptr_eq(d, dev)) {
            return;
        }
        let t = self.token();
        let fd = device::lock(dev).fd();
        let mut src = mio::unix::SourceFd(&fd);
        // Writable: a full device queue has room again (edge-triggered).
        let interest = Interest::READABLE | Interest::WRITABLE;
        if let Err(e) = self.poll.registry().register(&mut src, t, interest) {
            tracing::warn!(error = %e, "cannot watch the device: it is polled on timers only");
        }
        self.devs.push((t, dev.clone()));
    }

    fn listen_dev(
        &mut self,
        shared: &Shared,
        id: ListenerId,
        dev: SharedDev,
        port: u16,
        socks: Vec<SocketHandle>,
    ) {
        self.watch_dev(&dev);
        let backlog = socks.into_iter().map(|h| (h, None)).collect();
        let t = self.token();
        self.add_conn(
            t,
            Conn::DevListener {
                id,
                dev,
                port,
                backlog,
            },
        );
        self.pump_devs(shared);
    }

    /// Takes the connections a device listener's sockets have established.
    fn accept_dev(&mut self, shared: &Shared, t: Token) {
        let now = self.now();
        let Some(Conn::DevListener {
            id,
            dev,
            port,
            backlog,
        }) = self.conns.get_mut(&t)
        else {
            return;
        };
        let (listener, dev, port) = (*id, dev.clone(), *port);
        let mut taken = Vec::new();
        {
            let mut d = device::lock(&dev);
            let mut kept = Vec::with_capacity(backlog.len());
            for (h, since) in backlog.drain(..) {
                let s = d.socket(h);
                // A handshake that failed, or that nobody completes in time: the socket
                // listens again.
                let relisten = match s.state() {
                    tcp::State::Listen => false,
                    tcp::State::SynReceived => {
                        let t0 = since.unwrap_or(now);
                        if now.saturating_duration_since(t0) < DEV_HANDSHAKE {
                            kept.push((h, Some(t0)));
                            continue;
                        }
                        tracing::debug!(port, "TCP handshake not completed: listening again");
                        true
                    }
                    tcp::State::Closed | tcp::State::TimeWait => true,
                    _ => {
                        taken.push(h);
                        continue;
                    }
                };
                if relisten {
                    s.abort();
                    let _ = s.listen(port);
                }
                kept.push((h, None));
            }
            // Every socket that took a connection is replaced by a fresh listening one.
            for _ in &taken {
                match d.listen(port) {
                    Ok(n) => kept.push((n, None)),
                    Err(e) => tracing::warn!(port, error = %e, "device listen failed"),
                }
            }
            *backlog = kept;
        }
        for h in taken {
            let sock = Stream::Dev(DevSock::new(dev.clone(), h));
            let Some(peer) = sock.peer_addr() else {
                continue;
            };
            tracing::debug!(%peer, listener = listener.0, "device TCP connection accepted");
            let nt = self.token();
            self.incoming(shared, nt, sock, listener, peer);
        }
    }

    /// A connection a listener took: its MPA Request is awaited (until the request timeout).
    fn incoming(
        &mut self,
        shared: &Shared,
        t: Token,
        sock: Stream,
        listener: ListenerId,
        peer: SocketAddr,
    ) {
        let deadline = Some(self.now() + shared.cfg.mpa_request_timeout);
        self.add_conn(
            t,
            Conn::Incoming {
                sock,
                listener,
                peer,
                buf: Vec::new(),
                deadline,
                req: None,
            },
        );
        self.service(shared, t, true, false);
    }

    /// Polls every device's stack (frames in and out, its timers) and services the
    /// connections on a device where something changed, until nothing does. Returns how
    /// many services ran.
    fn pump_devs(&mut self, shared: &Shared) -> usize {
        let mut work = 0;
        self.dev_elsewhere
            .retain(|(_, _, alive)| alive.strong_count() > 0);
        for _ in 0..8 {
            let now = self.now();
            let mut due = Vec::new();
            for (tok, dev) in &self.devs {
                let changed = {
                    let mut d = device::lock(dev);
                    let changed = d.poll(now);
                    if d.take_blocked() {
                        arm_writable(self.poll.registry(), d.fd(), *tok);
                    }
                    changed
                };
                if !changed {
                    continue;
                }
                for (d, qp, _) in &self.dev_elsewhere {
                    if Arc::ptr_eq(d, dev) {
                        shared.nudge(qp);
                    }
                }
                for (t, c) in &self.conns {
                    let on = match c {
                        Conn::DevListener { dev: d, .. } => Arc::ptr_eq(d, dev),
                        Conn::Incoming { sock, .. }
                        | Conn::Connecting { sock, .. }
                        | Conn::Rejecting { sock, .. } => sock.on_dev(dev),
                        Conn::Active(a) => a.sock.on_dev(dev),
                        Conn::Sctp(e) => e.on_dev(dev),
                        _ => false,
                    };
                    if on {
                        due.push(*t);
                    }
                }
            }
            if due.is_empty() {
                break;
            }
            work += due.len();
            for t in due {
                self.service(shared, t, true, true);
            }
        }
        work
    }
}

/// The least-loaded lane (ties: the lowest), with the new connection counted in its load.
fn least_loaded(shared: &Shared) -> (usize, LoadGuard) {
    let (to, _) = shared
        .all_lanes()
        .enumerate()
        .map(|(i, l)| (i, l.load.load(Ordering::SeqCst)))
        .min_by_key(|&(i, n)| (n, i))
        .unwrap_or((0, 0));
    (to, LoadGuard::new(&shared.lane(to).load))
}

/// Watches a device's link for frames and for room in its queue again, looking at it
/// afresh: a link that became writable since its queue refused a frame is reported at once
/// (edge-triggered epoll reports only changes it sees), and one still full registers for
/// the wake-up (a datagram socket whose peer's queue is full asks the peer for it only when
/// polled). Without this the frames in the backlog would wait for the recheck timer.
fn arm_writable(registry: &mio::Registry, fd: std::os::fd::RawFd, t: Token) {
    if fd < 0 {
        return;
    }
    let mut src = mio::unix::SourceFd(&fd);
    if let Err(e) = registry.reregister(&mut src, t, Interest::READABLE | Interest::WRITABLE) {
        tracing::debug!(error = %e, "cannot re-arm the device's writability wake-up");
    }
}

/// The inode number of a socket (`/proc/self/fd/N` links to `socket:[INODE]`), which names
/// it in `/proc/net/tcp`.
fn socket_inode(sock: &TcpStream) -> Option<u64> {
    use std::os::fd::AsRawFd;
    let link = std::fs::read_link(format!("/proc/self/fd/{}", sock.as_raw_fd())).ok()?;
    let s = link.to_str()?;
    s.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok()
}

/// The bytes the TCP socket with inode `ino` holds that the peer's TCP has not
/// acknowledged (`tx_queue` of `/proc/self/net/tcp{,6}`: write_seq - snd_una, unsent and
/// unacknowledged data and a FIN), or `None` when no such socket exists (any more).
pub(crate) fn tcp_unacked(ino: u64) -> io::Result<Option<u64>> {
    let want = ino.to_string();
    let mut read_any = false;
    for file in ["/proc/self/net/tcp", "/proc/self/net/tcp6"] {
        let text = match std::fs::read_to_string(file) {
            Ok(t) => t,
            // No IPv6 (or no IPv4) in this kernel.
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        read_any = true;
        // "sl local rem st tx_queue:rx_queue tr:when retrnsmt uid timeout inode ..."
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().take(10).collect();
            if f.get(9) != Some(&want.as_str()) {
                continue;
            }
            let tx = f
                .get(4)
                .and_then(|q| q.split(':').next())
                .and_then(|h| u64::from_str_radix(h, 16).ok());
            return match tx {
                Some(n) => Ok(Some(n)),
                None => Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{file}: unreadable line {line:?}"),
                )),
            };
        }
    }
    if !read_any {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "neither /proc/self/net/tcp nor /proc/self/net/tcp6 is readable (is /proc mounted?): \
             cannot see the socket's unacknowledged bytes",
        ));
    }
    Ok(None)
}

/// The engine settings of `qp` on this RNIC with EMSS `emss`.
fn qp_config(shared: &Shared, qp: &QpShared, emss: u32) -> QpConfig {
    let attr = &qp.attr;
    let mut cfg = QpConfig::new(qp.id, attr.pd, attr.send_cq.clone(), attr.recv_cq.clone());
    cfg.sq_depth = attr.sq_depth;
    cfg.rq_depth = attr.rq_depth;
    cfg.max_sge = attr.max_sge;
    cfg.emss = emss;
    cfg.zero_copy_tx = shared.cfg.zero_copy_tx;
    cfg.first_fpdu_delay = attr.first_fpdu_delay;
    cfg.srq = attr.srq.clone();
    cfg.fault = attr.fault;
    cfg
}

/// Hands the receives posted before the connection started to the new engine.
fn post_early_receives(qp: &QpShared, slot: &mut Slot, engine: &mut QpEngine) {
    for wr in slot.early_recv.drain(..) {
        let id = wr.wr_id;
        if engine.post_recv(wr).is_err() {
            let _ = qp.attr.recv_cq.push(crate::cq::Wc::new(
                qp.id,
                id,
                crate::cq::WcOpcode::Recv,
                crate::cq::WcStatus::LocalQpOperation,
            ));
        }
    }
}

fn fail_connect(shared: &Shared, qp: &Arc<QpShared>, error: CmError) {
    tracing::info!(qp = qp.id.0, %error, "connection failed");
    qp.set_status(ConnStatus::Failed(error.clone()));
    shared.publish(Event::ConnectFailed { qp: qp.id, error });
}

/// Turns engine events into RNIC events and connection status.
/// Ends `qp`'s engine when its connection is taken away: its rings close and are drained,
/// the close (`reason`; `None` when it was reported already) flushes everything outstanding,
/// and what that produced goes out as completions and events.
fn end_engine(shared: &Shared, qp: &Arc<QpShared>, now: Instant, reason: Option<CloseReason>) {
    let mut s = qp.lock();
    if let Some(e) = s.engine.as_mut() {
        qp.publish_engine(e, false);
        if let Some(r) = reason {
            e.handle_closed(now, r);
        }
    }
    drain_events(shared, qp, s.engine.as_mut());
}

fn drain_events(shared: &Shared, qp: &Arc<QpShared>, eng: Option<&mut QpEngine>) {
    let Some(eng) = eng else {
        return;
    };
    let id = qp.id;
    while let Some(ev) = eng.poll_event() {
        match ev {
            QpEvent::Established(s) => {
                qp.ord_zero.store(s.ord == 0, Ordering::SeqCst);
                qp.set_status(ConnStatus::Connected(s.clone()));
                shared.publish(Event::Established { qp: id, session: s });
            }
            QpEvent::SetupFailed(err) => {
                let (ev, cm) = setup_event(id, &err);
                qp.set_status(ConnStatus::Failed(cm));
                shared.publish(ev);
            }
            QpEvent::TerminateSent(terminate) => {
                shared.publish(Event::TerminateSent { qp: id, terminate })
            }
            QpEvent::TerminateReceived(terminate) => {
                shared.publish(Event::TerminateReceived { qp: id, terminate })
            }
            QpEvent::CqOverflow(cq) => shared.publish(Event::CqOverflow { qp: id, cq }),
            QpEvent::SrqLimitReached(srq) => shared.publish(Event::SrqLimitReached { qp: id, srq }),
            QpEvent::StateChanged { from, to } => {
                if to == QpState::Error && from != QpState::Closing && from != QpState::Idle {
                    shared.publish(Event::QpError { qp: id, from });
                }
            }
            QpEvent::TransportClosed(reason) => {
                let was_connected = matches!(qp.status(), ConnStatus::Connected(_));
                if was_connected || matches!(qp.status(), ConnStatus::Connecting) {
                    if matches!(qp.status(), ConnStatus::Connecting) {
                        // SetupFailed follows and sets the status.
                    } else {
                        qp.set_status(ConnStatus::Closed(reason));
                    }
                }
                if was_connected {
                    tracing::info!(qp = id.0, ?reason, "disconnected");
                    shared.publish(Event::Disconnected { qp: id, reason });
                }
            }
        }
    }
}

/// Applies a disconnect (`Closing`: [`QpEngine::close`], which also ends a QP still in
/// setup) or another state transition ([`QpEngine::modify`]; a refused transition changes
/// nothing: the API checked it against the published state) to an engine.
pub(crate) fn modify_engine(e: &mut QpEngine, to: QpState) {
    if to == QpState::Closing {
        e.close();
    } else {
        let _ = e.modify(to);
    }
}

/// Applies a disconnect or another consumer-requested transition to `qp`'s engine; work
/// posted before it is taken in first, so it still completes.
fn modify_qp(qp: &Arc<QpShared>, to: QpState) {
    let mut s = qp.lock();
    if let Some(e) = s.engine.as_mut() {
        qp.drain_rings(e);
        modify_engine(e, to);
    }
}

/// Requests from the application to the progress core.
#[derive(Debug)]
pub(crate) enum Cmd {
    Listen(ListenerId, std::net::TcpListener),
    CloseListener(ListenerId),
    Connect(Arc<QpShared>, SocketAddr, mpa::Config),
    Accept(ConnReqId, Arc<QpShared>, mpa::Config),
    Reject(ConnReqId, Vec<u8>),
    Adopt(Arc<QpShared>, std::net::TcpStream, Setup),
    /// A disconnect (`Closing`) or another consumer-requested state transition
    /// (`Terminate`, `Error`).
    Modify(Arc<QpShared>, QpState),
    Destroy(Arc<QpShared>),
    /// Answer the inode of the QP's TCP socket (`None`: no active connection).
    SocketInode(Arc<QpShared>, std::sync::mpsc::SyncSender<Option<u64>>),
    /// Listen for SCTP associations on an opened endpoint.
    ListenSctp(ListenerId, Box<SctpListen>),
    /// Connect over SCTP from an opened endpoint.
    ConnectSctp(Arc<QpShared>, Box<SctpConnect>, mpa::Config),
    /// Listen for kernel SCTP associations on an opened, listening socket.
    ListenKsctp(ListenerId, Box<KsctpListen>),
    /// Run a QP on a kernel SCTP socket whose connect was started.
    ConnectKsctp(Arc<QpShared>, Box<KsctpConnect>, mpa::Config),
    /// Answer the octets not yet acknowledged on the QP's connection in softrnic's own
    /// stacks: its SCTP association or its TCP connection on a device (`None`: no such
    /// connection; kernel sockets are asked through `SocketInode`).
    StackUnacked(Arc<QpShared>, std::sync::mpsc::SyncSender<Option<u64>>),
    /// Listen on a device's TCP port with the listening sockets the caller opened (so that
    /// the port is open when `listen_on` returns: a SYN that came before the core took the
    /// command would otherwise be refused).
    ListenDev(ListenerId, crate::device::SharedDev, u16, Vec<SocketHandle>),
    /// Connect over a device's TCP to the peer, from a local address of the device.
    ConnectDev(
        Arc<QpShared>,
        crate::device::SharedDev,
        std::net::SocketAddrV4,
        Option<std::net::Ipv4Addr>,
        mpa::Config,
    ),
    /// Take over an established kernel TCP connection from lane 0 (placement on a further
    /// progress thread).
    Migrate(Box<Active>),
    /// Take over the endpoint of an established active SCTP association (its QP's) from
    /// lane 0.
    MigrateSctp(Arc<QpShared>, Box<sctp::SctpEp>),
    /// Take over an established kernel SCTP association (its QP's) from lane 0.
    MigrateKsctp(Arc<QpShared>, Box<ksctp::Ksctp>),
}

impl Cmd {
    /// The lane that serves the command: a QP's own commands go to the lane its connection
    /// is on (lane 0 until it is placed elsewhere); everything else to lane 0.
    fn lane(&self) -> usize {
        match self {
            Cmd::Modify(qp, _)
            | Cmd::Destroy(qp)
            | Cmd::SocketInode(qp, _)
            | Cmd::StackUnacked(qp, _) => qp.lane.load(Ordering::SeqCst),
            Cmd::Migrate(a) => a.qp.lane.load(Ordering::SeqCst),
            Cmd::MigrateSctp(qp, _) | Cmd::MigrateKsctp(qp, _) => qp.lane.load(Ordering::SeqCst),
            _ => 0,
        }
    }
}

/// One progress thread's share of the RNIC: its commands, its doorbell and its core (its own
/// epoll set and eventfd waker). Lane 0 holds the listeners, connection setup, the SCTP
/// listeners' endpoints, the devices and SCTP on them; further lanes
/// ([`RnicConfig::progress_threads`]) hold the MPA connections (kernel TCP, or a device's
/// TCP, rung by lane 0 when the device has something for them), the SCTP
/// associations' endpoints (an accepted one's gets its packets from its listener's
/// endpoint) and the kernel SCTP associations placed on them once established.
#[derive(Debug)]
pub(crate) struct Lane {
    pub(crate) cmds: Mutex<VecDeque<Cmd>>,
    /// Something to do: commands queued or send work posted.
    pub(crate) rung: AtomicBool,
    /// The QPs send work was posted to since the core last looked (repeats allowed).
    pub(crate) rung_qps: Mutex<Vec<Arc<QpShared>>>,
    /// The lane's thread is (about to be) asleep in `epoll_wait`.
    pub(crate) sleeping: AtomicBool,
    pub(crate) waker: mio::Waker,
    pub(crate) core: Mutex<Option<Core>>,
    /// The core's epoll set (its own descriptor), which the lane's thread waits on while
    /// it leaves the core to application threads ([`crate::RnicConfig::inline_progress`]).
    ready_fd: mio::Registry,
    /// The lane's progress thread (unparked by the doorbell while an application thread
    /// holds the lease below).
    thread: std::sync::OnceLock<std::thread::Thread>,
    /// Until when (nanoseconds after `start`) an application thread polling the core
    /// ([`Shared::assist`]) serves its sockets: the lane's thread, when idle, does not wait
    /// on them meanwhile.
    lease_until: AtomicU64,
    /// When (as `lease_until`) an application thread last called [`Shared::assist`].
    last_assist: AtomicU64,
    start: std::time::Instant,
    /// Established data connections placed on this lane (for least-loaded placement).
    pub(crate) load: Arc<AtomicUsize>,
}

impl Lane {
    /// A lane with a fresh epoll set; its core's time line starts at `start`.
    pub(crate) fn new(
        index: usize,
        read_chunk: usize,
        start: std::time::Instant,
    ) -> io::Result<Lane> {
        let poll = mio::Poll::new()?;
        let waker = mio::Waker::new(poll.registry(), WAKER)?;
        let ready_fd = poll.registry().try_clone()?;
        Ok(Lane {
            cmds: Mutex::new(VecDeque::new()),
            rung: AtomicBool::new(false),
            rung_qps: Mutex::new(Vec::new()),
            sleeping: AtomicBool::new(false),
            waker,
            core: Mutex::new(Some(Core::new(poll, read_chunk, start, index))),
            ready_fd,
            thread: std::sync::OnceLock::new(),
            lease_until: AtomicU64::new(0),
            last_assist: AtomicU64::new(0),
            start,
            load: Arc::new(AtomicUsize::new(0)),
        })
    }

    /// Waits up to `timeout` until the core's epoll set has events pending (or its waker
    /// was rung); the events stay pending for whoever runs the core next.
    fn wait_ready(&self, timeout: Duration) {
        use rustix::event::{PollFd, PollFlags, Timespec};
        let ts = Timespec {
            tv_sec: timeout.as_secs().try_into().unwrap_or(i64::MAX),
            tv_nsec: timeout.subsec_nanos().into(),
        };
        let mut fds = [PollFd::new(&self.ready_fd, PollFlags::IN)];
        // EINTR or a failure: the caller looks at the core and comes back.
        let _ = rustix::event::poll(&mut fds, Some(&ts));
    }

    /// Rings the lane's doorbell: wake its thread if it sleeps.
    fn ring(&self) {
        self.rung.store(true, Ordering::SeqCst);
        if self.sleeping.load(Ordering::SeqCst) {
            self.wake();
        }
    }

    /// Wakes the lane's thread, whether it waits on its epoll set or for the end of an
    /// application thread's lease.
    pub(crate) fn wake(&self) {
        let _ = self.waker.wake();
        if let Some(t) = self.thread.get() {
            t.unpark();
        }
    }

    fn now_ns(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// How long an application thread's lease on the core's sockets still runs.
    fn lease_left(&self) -> Duration {
        Duration::from_nanos(
            self.lease_until
                .load(Ordering::SeqCst)
                .saturating_sub(self.now_ns()),
        )
    }
}

/// State shared by the application threads and the progress core.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) cfg: RnicConfig,
    pub(crate) mem: Arc<MemTable>,
    /// Lane 0 (connection management and every connection that is not kernel TCP).
    pub(crate) lane0: Lane,
    /// Lanes 1.. (further progress threads), each with the kernel TCP QPs placed on it.
    pub(crate) lanes: Vec<Lane>,
    pub(crate) stop: AtomicBool,
    pub(crate) events: Mutex<VecDeque<Event>>,
    pub(crate) events_cv: Condvar,
    /// Readable while `events` is not empty ([`crate::Rnic::event_fd`]).
    pub(crate) event_fd: OwnedFd,
    /// Connection requests reported and not yet accepted or rejected.
    pub(crate) pending: Mutex<HashSet<ConnReqId>>,
    pub(crate) qps: Mutex<Vec<Arc<QpShared>>>,
    /// Raw-Ethernet devices with softrnic's TCP/IP, by name.
    pub(crate) devs: Mutex<HashMap<String, crate::device::SharedDev>>,
    pub(crate) next_qp: AtomicU32,
    pub(crate) next_listener: AtomicU32,
    pub(crate) next_req: AtomicU64,
    pub(crate) stats: ProgressCounters,
}

/// The counters behind [`crate::ProgressStats`].
#[derive(Debug, Default)]
pub(crate) struct ProgressCounters {
    inline_posts: AtomicU64,
    assisted_work: AtomicU64,
    thread_sleeps: AtomicU64,
    thread_leased_sleeps: AtomicU64,
}

impl ProgressCounters {
    pub(crate) fn snapshot(&self) -> crate::ProgressStats {
        crate::ProgressStats {
            inline_posts: self.inline_posts.load(Ordering::Relaxed),
            assisted_work: self.assisted_work.load(Ordering::Relaxed),
            thread_sleeps: self.thread_sleeps.load(Ordering::Relaxed),
            thread_leased_sleeps: self.thread_leased_sleeps.load(Ordering::Relaxed),
        }
    }
}

impl Shared {
    /// A fresh connection request id.
    pub(crate) fn new_request_id(&self) -> ConnReqId {
        ConnReqId(self.next_req.fetch_add(1, Ordering::Relaxed))
    }

    /// Offers connection request `r` to the application: it stays pending until accepted
    /// or rejected (or its connection ends first).
    pub(crate) fn offer_request(&self, r: ConnectRequest) {
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(r.id);
        self.publish(Event::ConnectRequest(r));
    }

    /// Whether connection request `req` is pending.
    pub(crate) fn request_pending(&self, req: ConnReqId) -> bool {
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&req)
    }

    /// Takes connection request `req` off the pending ones; whether it was pending.
    pub(crate) fn withdraw_request(&self, req: ConnReqId) -> bool {
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&req)
    }

    /// Lane `i` (lane 0 when there is no such lane).
    pub(crate) fn lane(&self, i: usize) -> &Lane {
        i.checked_sub(1)
            .and_then(|j| self.lanes.get(j))
            .unwrap_or(&self.lane0)
    }

    /// Every lane, lane 0 first.
    pub(crate) fn all_lanes(&self) -> impl Iterator<Item = &Lane> {
        std::iter::once(&self.lane0).chain(self.lanes.iter())
    }

    /// Send work was posted to `qp`: the core of its lane services it on its next pass. With
    /// [`crate::RnicConfig::inline_progress`], when that lane's thread sleeps while an
    /// application thread polls the core ([`Shared::assist`]), the posting thread runs the
    /// pass itself (no wake-up of the progress thread). An application that does not poll
    /// (it sleeps on its CQ) leaves the transmission to the thread, which sends what was
    /// posted meanwhile in as few system calls as it can (posting one small message after
    /// another, each sent on its own, would cost a system call apiece). In manual mode the
    /// posting thread transmits at once if no other thread is in the core.
    pub(crate) fn ring_qp(&self, qp: &Arc<QpShared>) {
        qp.tx_pending.store(true, Ordering::SeqCst);
        let lane = self.lane(qp.lane.load(Ordering::SeqCst));
        lane.rung_qps
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(qp.clone());
        lane.rung.store(true, Ordering::SeqCst);
        if self.manual() {
            // A thread waiting in `advance` takes the doorbell when woken.
            if lane.sleeping.load(Ordering::SeqCst) {
                lane.wake();
            }
            self.try_core(lane, |core| core.kick(self));
            return;
        }
        if lane.sleeping.load(Ordering::SeqCst) {
            // Only when nobody holds the QP's engine either, so that the post never
            // waits for a lock (posting stays a doorbell): the thread serves it then.
            // The thread let go of the core to sleep (it holds it until then): this pass
            // takes the doorbell, so the thread has nothing to wake up for.
            if self.cfg.inline_progress
                && !lane.lease_left().is_zero()
                && qp.slot.try_lock().is_ok()
                && self.try_core(lane, |core| core.kick(self)).is_some()
            {
                self.stats.inline_posts.fetch_add(1, Ordering::Relaxed);
                return;
            }
            lane.wake();
        }
    }

    /// Wakes the lane `qp` is on to look at its SCTP endpoint: packets were passed to it.
    pub(crate) fn nudge(&self, qp: &Arc<QpShared>) {
        self.nudge_lane(qp.lane.load(Ordering::SeqCst), qp);
    }

    /// Wakes lane `i` to look at the SCTP endpoints of its QPs (`qp`'s or, as that QP has
    /// no connection there, every endpoint whose doorbell says so).
    pub(crate) fn nudge_lane(&self, i: usize, qp: &Arc<QpShared>) {
        let lane = self.lane(i);
        lane.rung_qps
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(qp.clone());
        lane.ring();
    }

    /// Runs `f` on `lane`'s core if no other thread is in it (never waits for it).
    fn try_core<R>(&self, lane: &Lane, f: impl FnOnce(&mut Core) -> R) -> Option<R> {
        let mut g = lane.core.try_lock().ok()?;
        g.as_mut().map(f)
    }

    /// Queues a command for the lane that serves it: a QP's own commands (disconnect,
    /// destroy, queries) go to the lane its connection is on, everything else to lane 0.
    pub(crate) fn command(&self, cmd: Cmd) {
        let lane = self.lane(cmd.lane());
        lane.cmds
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push_back(cmd);
        lane.ring();
    }

    pub(crate) fn publish(&self, ev: Event) {
        let mut q = self.events.lock().unwrap_or_else(|p| p.into_inner());
        q.push_back(ev);
        // Under the queue lock, so the eventfd's readiness always matches the queue. A
        // failed write only means the counter is already (very) readable.
        let _ = rustix::io::write(&self.event_fd, &1u64.to_ne_bytes());
        drop(q);
        self.events_cv.notify_all();
    }

    /// Called with the queue locked after taking events out: an emptied queue makes the
    /// eventfd unreadable again.
    pub(crate) fn events_taken(&self, q: &VecDeque<Event>) {
        if q.is_empty() {
            let mut b = [0u8; 8];
            // EAGAIN (already unreadable) is fine.
            let _ = rustix::io::read(&self.event_fd, &mut b);
        }
    }

    pub(crate) fn manual(&self) -> bool {
        self.cfg.progress == ProgressMode::Manual
    }

    /// Application threads may run the progress threads' passes while they sleep.
    fn inline(&self) -> bool {
        self.cfg.inline_progress && !self.manual()
    }

    /// A polling application's share of progress: in manual mode one pass without waiting;
    /// with progress threads and [`crate::RnicConfig::inline_progress`], one pass of every lane
    /// whose thread sleeps (a lane whose thread is at work is left to it). Returns how many
    /// pieces of work were done.
    pub(crate) fn assist(&self) -> usize {
        if self.manual() {
            let work = self.advance(Duration::ZERO).unwrap_or(0);
            self.stats
                .assisted_work
                .fetch_add(work as u64, Ordering::Relaxed);
            return work;
        }
        if !self.cfg.inline_progress {
            return 0;
        }
        let lease = u64::try_from(self.cfg.assist_lease.as_nanos()).unwrap_or(u64::MAX);
        let mut work = 0;
        for lane in self.all_lanes() {
            // Only a thread that polls (calls again within a tenth of the lease) holds the
            // lease: an occasional poll leaves the sockets to the progress thread.
            let now = lane.now_ns();
            let last = lane.last_assist.swap(now, Ordering::SeqCst);
            if now.saturating_sub(last) < lease / 10 {
                lane.lease_until
                    .store(now.saturating_add(lease), Ordering::SeqCst);
            }
            if lane.sleeping.load(Ordering::SeqCst) {
                work += self
                    .try_core(lane, |core| {
                        core.turn(self, Some(Duration::ZERO)).unwrap_or(0)
                    })
                    .unwrap_or(0);
            }
        }
        self.stats
            .assisted_work
            .fetch_add(work as u64, Ordering::Relaxed);
        work
    }

    /// Runs one pass of the core (manual mode, which has lane 0 only), waiting at most
    /// `timeout`.
    pub(crate) fn advance(&self, timeout: Duration) -> Result<usize, RnicError> {
        let mut g = self.lane0.core.lock().unwrap_or_else(|p| p.into_inner());
        let Some(core) = g.as_mut() else {
            return Err(RnicError::Closed);
        };
        if timeout.is_zero() {
            return Ok(core.turn(self, Some(timeout))?);
        }
        // A post from another thread while this one waits in epoll wakes it.
        self.lane0.sleeping.store(true, Ordering::SeqCst);
        let r = core.turn(self, Some(timeout));
        self.lane0.sleeping.store(false, Ordering::SeqCst);
        Ok(r?)
    }

    /// Ends the lease of [`Shared::assist`]: a lane's thread that sleeps leaving its
    /// sockets to the polling application takes them back at once.
    pub(crate) fn end_assist(&self) {
        if !self.inline() {
            return;
        }
        for lane in self.all_lanes() {
            if lane.lease_until.swap(0, Ordering::SeqCst) != 0
                && lane.sleeping.load(Ordering::SeqCst)
                && let Some(t) = lane.thread.get()
            {
                t.unpark();
            }
        }
    }

    /// Waits until `done` returns `Some`, driving progress in manual mode; `wait` blocks
    /// for a wake-up in thread mode.
    pub(crate) fn wait_for<T>(
        &self,
        timeout: Duration,
        mut done: impl FnMut() -> Option<T>,
        mut wait: impl FnMut(Duration),
    ) -> Result<T, RnicError> {
        let deadline = std::time::Instant::now().checked_add(timeout);
        loop {
            if let Some(v) = done() {
                return Ok(v);
            }
            if self.stop.load(Ordering::SeqCst) {
                return Err(RnicError::Closed);
            }
            let left = deadline.map_or(Duration::from_secs(3600), |d| {
                d.saturating_duration_since(std::time::Instant::now())
            });
            if left.is_zero() {
                return Err(RnicError::Timeout);
            }
            let step = left.min(Duration::from_millis(20));
            if self.manual() {
                self.advance(step)?;
            } else {
                wait(step);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The read buffer keeps untaken bytes in front of the next read and moves them to the
    /// front only when less than one read size is free.
    #[test]
    fn rx_buf_keeps_untaken_tail_contiguous() {
        let chunk = 4096;
        let mut rx = RxBuf::default();
        let space = rx.space(chunk);
        assert_eq!(space.len(), 2 * chunk + RX_SLACK);
        // Read 3 chunks' worth; the engine takes all but a 100-byte tail.
        let n = 3 * chunk;
        for (i, b) in space.iter_mut().take(n).enumerate() {
            *b = i as u8;
        }
        rx.end += n;
        rx.start += n - 100;
        // Plenty of room left: no move, the next read lands right after the tail.
        let free = rx.space(chunk).len();
        assert_eq!(free, 2 * chunk + RX_SLACK - n);
        assert_eq!(rx.pending().len(), 100);
        assert_eq!(rx.pending()[0], (n - 100) as u8);
        // Fill up to less than a chunk of room: the tail moves to the front.
        rx.end = rx.buf.len() - chunk + 1;
        rx.start = rx.end - 100;
        let expect: Vec<u8> = rx.pending().to_vec();
        let free = rx.space(chunk).len();
        assert_eq!((rx.start, rx.end), (0, 100));
        assert_eq!(free, rx.buf.len() - 100);
        assert_eq!(rx.pending(), expect.as_slice());
        // Everything taken: back to the start.
        rx.start = rx.end;
        assert_eq!(rx.space(chunk).len(), rx.buf.len());
        assert!(rx.pending().is_empty());
    }

    /// A connection holding part of an FPDU keeps its buffer; once everything was taken it
    /// lends the memory out and holds none.
    #[test]
    fn rx_buf_is_released_only_when_drained() {
        let mut rx = RxBuf::default();
        assert!(rx.release().is_none(), "nothing allocated");
        rx.space(4096);
        rx.end = 10;
        rx.start = 4;
        assert!(rx.release().is_none(), "6 bytes untaken");
        assert_eq!(rx.pending().len(), 6);
        rx.start = 10;
        let buf = rx.release().expect("drained");
        assert_eq!(buf.len(), 2 * 4096 + RX_SLACK);
        assert!(rx.buf.is_empty() && rx.pending().is_empty());
        assert_eq!((rx.start, rx.end), (0, 0));
    }
}
