//! The RNIC runtime: queue pairs over kernel TCP, driven by a progress thread (or by the
//! application in manual-progress mode), with connection management.
//!
//! # Model
//!
//! An [`Rnic`] owns a memory table ([`MemTable`]), its queue pairs ([`Qp`]) and one
//! *progress core*: an epoll set ([`mio::Poll`]) holding every listening and connected
//! socket plus an eventfd waker. The core runs each QP's [`QpEngine`] exactly as the crate
//! documentation describes: bytes read from the socket go to `handle_stream_partial` (a
//! connection keeps the one incomplete FPDU the engine leaves untaken in front of its next
//! read, so every FPDU is placed straight from the read buffer), the engine's
//! `poll_transmit` output is written until the socket would block (then `EPOLLOUT` is
//! awaited), engine events become [`Event`]s, and the socket is shut down when the engine
//! says so. Reads are at most `read_chunk` bytes (the rest of a partly read FPDU when its
//! length is known); each write is one gather `sendmsg` of everything
//! the engine has generated (up to its transmit window): headers and PAD + CRC from the
//! engine, payloads straight from registered memory ([`RnicConfig::zero_copy_tx`]; with
//! markers negotiated payloads are copied into the FPDUs instead).
//!
//! * **Posting is a doorbell**: while a connection is up, [`Qp::post_send`] and
//!   [`Qp::post_recv`] check the request as the engine would (SGE count, length,
//!   operation, ORD, queue depth — the immediate errors of the verbs), append it to the
//!   QP's send or receive ring (a lock of its own, held for the push only, never across a
//!   socket call) and wake the core only when it sleeps. The core moves ring entries into
//!   the engine at the start of every service of the QP, in posting order. Before the
//!   connection starts and after it ends, posts go to the engine directly (a request that
//!   raced with the end of the connection is flushed, not lost).
//! * **Progress thread** ([`ProgressMode::Thread`], the default): a post marks the QP and
//!   wakes the thread only when it sleeps. After the last piece of work the thread keeps
//!   polling for [`RnicConfig::busy_poll`] (default 50 µs) before it sleeps in `epoll_wait`;
//!   busy polling trades a core for latency (`softrnic write-lat --busy-poll-us 0` shows the
//!   difference).
//! * **Several progress threads** ([`RnicConfig::progress_threads`]): each thread has a
//!   core of its own (epoll set, eventfd waker, timers, doorbell). Thread 0 also runs the
//!   listeners, connection setup, the raw-Ethernet devices (frames, TCP/IP) and SCTP on a
//!   device; an established MPA connection (kernel TCP, or a device's TCP: thread 0 wakes
//!   its thread when the device has something for it), an established SCTP association (an active one with its endpoint, one an
//!   SCTP listener accepted in an endpoint of its own, its packets passed on by the
//!   listener's endpoint on thread 0), or an established kernel SCTP association, is placed
//!   on the least-loaded thread
//!   ([`Qp::progress_thread`]).
//!   A QP's disconnect and destroy go to its thread; completions go to the QP's CQs
//!   whichever thread produces them.
//! * **Manual progress** ([`ProgressMode::Manual`]): no thread; the application calls
//!   [`Rnic::advance`] (the OSC verbs' `rnic_advance`), which runs one pass of the same core
//!   in the caller's thread. Blocking calls ([`Rnic::connect_blocking`] and friends) drive
//!   progress themselves in this mode, and a post transmits at once in the posting thread
//!   (unless another thread is inside `advance`, which is then woken).
//!
//! # Connection management
//!
//! * Active side: [`Rnic::connect`] starts a non-blocking TCP connect; once it completes the
//!   engine sends the MPA Request ([`Setup::Initiator`]). The outcome arrives as
//!   [`Event::Established`], [`Event::Rejected`] (the responder's reject, with its private
//!   data) or [`Event::ConnectFailed`]. [`Rnic::connect_blocking`] waits for it.
//! * Passive side: [`Rnic::listen`] binds a listener. Each incoming connection's MPA Request
//!   is read and parsed by the runtime (the passive side sends nothing before the Request
//!   is complete, RFC 5044 §7.1.2) and reported as [`Event::ConnectRequest`] with the
//!   peer's address, private data and MPA parameters. [`Rnic::accept`] hands the connection
//!   to a QP whose engine ([`Setup::Responder`]) negotiates and sends the Reply;
//!   [`Rnic::reject`] sends a Reply with R = 1 and the given private data and closes.
//!   [`Rnic::accept_blocking`] waits for the next request of a listener, accepts it and
//!   waits for the connection to be established.
//! * [`Rnic::adopt`] takes an already connected [`std::net::TcpStream`] and runs MPA over it
//!   as initiator or responder (or starts in full operation with a session agreed
//!   elsewhere).
//! * [`Rnic::disconnect`] closes gracefully (outstanding work completes, then the TCP
//!   connection is shut down; whatever is still posted is flushed). [`Rnic::destroy_qp`]
//!   aborts and flushes at once. Closing the RNIC (drop or [`Rnic::close`]) aborts every
//!   connection and joins the thread.
//!
//! # Errors and asynchronous events
//!
//! Protocol errors are handled by the engine (Terminate sent, error completions pushed to
//! the CQs); the runtime reports them as [`Event::TerminateSent`] /
//! [`Event::TerminateReceived`], [`Event::QpError`] (the QP entered Error other than by a
//! graceful disconnect) and [`Event::CqOverflow`], next to the connection events. Read them
//! with [`Rnic::poll_event`] or [`Rnic::wait_event`], or put [`Rnic::event_fd`] (an eventfd
//! readable while events are queued) into the application's own epoll loop.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use stack::{Access, Cq, MrOptions, QpAttr, RecvWr, Rnic, RnicConfig, SendWr, mpa};
//!
//! let t = Duration::from_secs(5);
//! let (a, b) = (Rnic::open(RnicConfig::default())?, Rnic::open(RnicConfig::default())?);
//! let (pa, pb) = (a.alloc_pd(), b.alloc_pd());
//! let (ca, cb) = (Cq::new(16), Cq::new(16));
//! let qa = a.create_qp(QpAttr::new(pa, ca.clone(), ca.clone()))?;
//! let qb = b.create_qp(QpAttr::new(pb, cb.clone(), cb.clone()))?;
//! let src = a.mem().register_new(pa, 64, MrOptions::new(Access::NONE)).unwrap();
//! let dst = b.mem().register_new(pb, 64, MrOptions::new(Access::LOCAL_WRITE)).unwrap();
//! src.buf().write_at(0, b"ping").unwrap();
//! qb.post_recv(RecvWr::new(1, vec![dst.sge(0, 64)]))?;
//!
//! let l = b.listen("127.0.0.1:0".parse().unwrap())?;
//! std::thread::scope(|s| {
//!     let h = s.spawn(|| b.accept_blocking(&l, &qb, mpa::Config::default(), t));
//!     a.connect_blocking(&qa, l.local_addr, mpa::Config::default(), t).unwrap();
//!     h.join().unwrap().unwrap();
//! });
//! qa.post_send(SendWr::send(1, vec![src.sge(0, 4)]))?;
//! assert!(cb.wait(t));
//! assert_eq!(cb.poll_one().unwrap().byte_len, 4);
//! assert_eq!(dst.buf().read_range(0..4).unwrap(), b"ping");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # The EMSS
//!
//! The MULPDU is derived from the connected socket's `TCP_MAXSEG` (clamped to what an FPDU
//! can carry), so on an Ethernet path FPDUs fit one TCP segment (RFC 5044 §6) and on
//! loopback they are large.

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::addr::TransportAddr;
use crate::cq::{Cq, QpId};
use crate::engine::{CloseReason, EngineError, PostError, QpEngine, QpState, Setup};
use crate::llp::Session;
use crate::mem::{MemTable, Pd};
pub use crate::shared::{
    CmError, ConnReqId, ConnectRequest, DEFAULT_READ_CHUNK, Event, Fault, ListenerId, PathChange,
    ProgressMode, ProgressStats, QpAttr, RnicConfig, RnicError, SctpRequest,
};
use crate::shared::{ConnStatus, QpShared, Ring, Slot};
use crate::transport::Lane;
use crate::transport::ksctp::{KsctpConnect, KsctpListen};
use crate::transport::sctp::{SctpConnect, SctpListen};
use crate::transport::{Cmd, Shared};
use crate::wr::{RecvWr, SendWr};

/// A software RNIC instance. See the [module documentation](self).
#[derive(Debug)]
pub struct Rnic {
    shared: Arc<Shared>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

/// A queue pair of an [`Rnic`] (cheap to clone; clones name the same QP).
#[derive(Clone, Debug)]
pub struct Qp {
    inner: Arc<QpShared>,
    rnic: Arc<Shared>,
}

/// A listening socket of an [`Rnic`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listener {
    /// Its id (in [`ConnectRequest::listener`]).
    pub id: ListenerId,
    /// The bound address (with the actual port when port 0 was asked for; over SCTP the
    /// first local address and the SCTP port).
    pub local_addr: SocketAddr,
    /// What a peer connects to (with the actual ports: for SCTP over UDP, the UDP
    /// encapsulation port too).
    pub transport: TransportAddr,
}

/// How an adopted socket starts ([`Rnic::adopt`]).
#[derive(Clone, Debug)]
pub enum AdoptRole {
    /// Send the MPA Request with this configuration.
    Initiator(mpa::Config),
    /// Wait for the MPA Request and answer with this configuration (no application
    /// decision: the request is accepted whenever negotiation allows).
    Responder(mpa::Config),
    /// Full operation at once with an MPA session agreed elsewhere.
    Established(mpa::Session),
}

impl Rnic {
    /// Opens an RNIC (starting its progress thread in [`ProgressMode::Thread`]).
    pub fn open(cfg: RnicConfig) -> Result<Rnic, RnicError> {
        let mode = cfg.progress;
        let threads = match mode {
            ProgressMode::Manual => 1,
            ProgressMode::Thread => cfg.progress_threads.max(1),
        };
        // Every core's time line starts here: a connection keeps its deadlines when it is
        // placed on another thread.
        let start = Instant::now();
        let lane0 = Lane::new(0, cfg.read_chunk, start)?;
        let lanes = (1..threads)
            .map(|i| Lane::new(i, cfg.read_chunk, start))
            .collect::<Result<Vec<_>, _>>()?;
        let event_fd = rustix::event::eventfd(
            0,
            rustix::event::EventfdFlags::NONBLOCK | rustix::event::EventfdFlags::CLOEXEC,
        )
        .map_err(std::io::Error::from)?;
        let shared = Arc::new(Shared {
            cfg,
            mem: MemTable::new(),
            lane0,
            lanes,
            stop: AtomicBool::new(false),
            events: Mutex::new(VecDeque::new()),
            events_cv: Condvar::new(),
            event_fd,
            pending: Mutex::new(HashSet::new()),
            qps: Mutex::new(Vec::new()),
            devs: Mutex::new(HashMap::new()),
            next_qp: AtomicU32::new(1),
            next_listener: AtomicU32::new(1),
            next_req: AtomicU64::new(1),
            stats: Default::default(),
        });
        let mut threads_started = Vec::new();
        if mode == ProgressMode::Thread {
            for i in 0..threads {
                let s = shared.clone();
                // Linux keeps 15 bytes of a thread's name (what `perf` and `top -H` show):
                // "softrnic-prog" and the number fit for up to 100 threads.
                let name = if threads == 1 {
                    "softrnic-progress".to_string()
                } else {
                    format!("softrnic-prog{i}")
                };
                match std::thread::Builder::new()
                    .name(name)
                    .spawn(move || crate::transport::run_thread(&s, i))
                {
                    Ok(h) => threads_started.push(h),
                    Err(e) => {
                        // Dropping the RNIC stops and joins the threads already started.
                        drop(Rnic {
                            shared,
                            threads: Mutex::new(threads_started),
                        });
                        return Err(e.into());
                    }
                }
            }
        }
        Ok(Rnic {
            shared,
            threads: Mutex::new(threads_started),
        })
    }

    /// The RNIC's memory table (protection domains, registrations).
    pub fn mem(&self) -> &Arc<MemTable> {
        &self.shared.mem
    }

    /// The configuration it was opened with.
    pub fn config(&self) -> &RnicConfig {
        &self.shared.cfg
    }

    /// Allocates a protection domain.
    pub fn alloc_pd(&self) -> Pd {
        self.shared.mem.alloc_pd()
    }

    /// Creates a QP (not connected yet; receives may be posted already).
    pub fn create_qp(&self, attr: QpAttr) -> Result<Qp, RnicError> {
        if attr.max_sge < crate::wr::MIN_MAX_SGE {
            return Err(EngineError::MaxSgeTooSmall(attr.max_sge).into());
        }
        if let Some(srq) = &attr.srq
            && srq.pd() != attr.pd
        {
            return Err(EngineError::SrqPd.into());
        }
        if self.shared.stop.load(Ordering::SeqCst) {
            return Err(RnicError::Closed);
        }
        let id = QpId(self.shared.next_qp.fetch_add(1, Ordering::Relaxed));
        let inner = Arc::new(QpShared {
            id,
            attr,
            slot: Mutex::new(Slot {
                engine: None,
                early_recv: Vec::new(),
            }),
            tx_pending: AtomicBool::new(false),
            token: std::sync::atomic::AtomicUsize::new(usize::MAX),
            status: Mutex::new(ConnStatus::Unconnected),
            status_cv: Condvar::new(),
            destroyed: AtomicBool::new(false),
            sq_ring: Ring::default(),
            rq_ring: Ring::default(),
            ring_open: AtomicBool::new(false),
            ord_zero: AtomicBool::new(false),
            lane: std::sync::atomic::AtomicUsize::new(0),
        });
        self.shared
            .qps
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(inner.clone());
        Ok(Qp {
            inner,
            rnic: self.shared.clone(),
        })
    }

    fn check_qp(&self, qp: &Qp) -> Result<(), RnicError> {
        if !Arc::ptr_eq(&qp.rnic, &self.shared) || qp.inner.destroyed.load(Ordering::SeqCst) {
            return Err(RnicError::UnknownQp(qp.id()));
        }
        if self.shared.stop.load(Ordering::SeqCst) {
            return Err(RnicError::Closed);
        }
        Ok(())
    }

    /// Claims an unconnected QP for a connection attempt.
    fn claim(&self, qp: &Qp) -> Result<(), RnicError> {
        self.check_qp(qp)?;
        let mut g = qp.inner.status.lock().unwrap_or_else(|p| p.into_inner());
        if *g != ConnStatus::Unconnected {
            return Err(RnicError::QpBusy(qp.id()));
        }
        *g = ConnStatus::Connecting;
        Ok(())
    }

    /// Destroys a QP: an open connection is aborted (TCP reset) and every outstanding work
    /// request completes with [`crate::WcStatus::Flushed`].
    pub fn destroy_qp(&self, qp: &Qp) -> Result<(), RnicError> {
        self.check_qp(qp)?;
        qp.inner.destroyed.store(true, Ordering::SeqCst);
        self.shared
            .qps
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|q| !Arc::ptr_eq(q, &qp.inner));
        self.shared.command(Cmd::Destroy(qp.inner.clone()));
        self.kick();
        Ok(())
    }

    /// Listens on `addr` (port 0 picks an ephemeral port).
    pub fn listen(&self, addr: SocketAddr) -> Result<Listener, RnicError> {
        let l = TcpListener::bind(addr)?;
        l.set_nonblocking(true)?;
        let local_addr = l.local_addr()?;
        let id = ListenerId(self.shared.next_listener.fetch_add(1, Ordering::Relaxed));
        self.shared.command(Cmd::Listen(id, l));
        self.kick();
        Ok(Listener {
            id,
            local_addr,
            transport: TransportAddr::Tcp(local_addr),
        })
    }

    /// Listens on a transport address: MPA over TCP, or DDP over softrnic's SCTP (UDP
    /// encapsulation or raw IPv4, one or several local addresses; SCTP port 0 picks one from
    /// the dynamic range, reported in [`Listener::transport`]). See [`crate::addr`].
    pub fn listen_on(&self, at: &TransportAddr) -> Result<Listener, RnicError> {
        let s = match at {
            TransportAddr::Tcp(a) => return self.listen(*a),
            TransportAddr::Dev(d) => return self.listen_dev(d),
            TransportAddr::Sctp(s) if s.encap == crate::addr::SctpEncap::Kernel => {
                let (l, bound) = KsctpListen::open(s, &self.shared.cfg)?;
                let id = ListenerId(self.shared.next_listener.fetch_add(1, Ordering::Relaxed));
                let local_addr = SocketAddr::new(bound.addrs[0], bound.port);
                self.shared.command(Cmd::ListenKsctp(id, Box::new(l)));
                self.kick();
                return Ok(Listener {
                    id,
                    local_addr,
                    transport: TransportAddr::Sctp(bound),
                });
            }
            TransportAddr::Sctp(s) => s,
        };
        let dev = self.sctp_device(s, &s.addrs)?;
        let (l, bound) = SctpListen::open(s, &self.shared.cfg, dev)?;
        let id = ListenerId(self.shared.next_listener.fetch_add(1, Ordering::Relaxed));
        let local_addr = SocketAddr::new(bound.addrs[0], bound.port);
        self.shared.command(Cmd::ListenSctp(id, Box::new(l)));
        self.kick();
        Ok(Listener {
            id,
            local_addr,
            transport: TransportAddr::Sctp(bound),
        })
    }

    /// Starts an active connection of `qp` over a transport address (non-blocking; the
    /// outcome arrives as an [`Event`]). Over SCTP, `cfg` gives IRD/ORD and private data
    /// (the MPA-only settings do not apply).
    pub fn connect_to(
        &self,
        qp: &Qp,
        to: &TransportAddr,
        cfg: mpa::Config,
    ) -> Result<(), RnicError> {
        let s = match to {
            TransportAddr::Tcp(a) => return self.connect(qp, *a, cfg),
            TransportAddr::Dev(d) => {
                mpa::request(&cfg)?;
                let dev = self.device_for(d, d.local)?;
                self.claim(qp)?;
                self.shared
                    .command(Cmd::ConnectDev(qp.inner.clone(), dev, d.addr, d.local, cfg));
                self.kick();
                return Ok(());
            }
            TransportAddr::Sctp(s) if s.encap == crate::addr::SctpEncap::Kernel => {
                let c = KsctpConnect::open(s, &self.shared.cfg)?;
                self.claim(qp)?;
                self.shared
                    .command(Cmd::ConnectKsctp(qp.inner.clone(), Box::new(c), cfg));
                self.kick();
                return Ok(());
            }
            TransportAddr::Sctp(s) => s,
        };
        let dev = self.sctp_device(s, &s.local)?;
        let c = SctpConnect::open(s, &self.shared.cfg, dev)?;
        self.claim(qp)?;
        self.shared
            .command(Cmd::ConnectSctp(qp.inner.clone(), Box::new(c), cfg));
        self.kick();
        Ok(())
    }

    /// [`Rnic::connect_to`], then waits until the connection is established.
    pub fn connect_to_blocking(
        &self,
        qp: &Qp,
        to: &TransportAddr,
        cfg: mpa::Config,
        timeout: Duration,
    ) -> Result<Session, RnicError> {
        self.connect_to(qp, to, cfg)?;
        self.wait_established(qp, timeout)
    }

    /// Attaches a raw-Ethernet device under `name`: softrnic's own TCP/IP runs on it with
    /// the address in `cfg`, and `dev://NAME/...` transport addresses use it.
    pub fn attach_device(
        &self,
        name: &str,
        link: crate::device::Link,
        cfg: &crate::device::DeviceConfig,
    ) -> Result<(), RnicError> {
        if matches!(link, crate::device::Link::Frames(_)) {
            return Err(RnicError::Device(crate::device::DeviceError::Open(
                format!("device {name}: a frame link is driven by its FrameDevice, not by an RNIC"),
            )));
        }
        let mut devs = self.shared.devs.lock().unwrap_or_else(|p| p.into_inner());
        if devs.contains_key(name) {
            return Err(RnicError::Device(crate::device::DeviceError::Conflict {
                name: name.to_string(),
                why: "a device of that name is attached already".into(),
            }));
        }
        let stack = crate::device::DevStack::new(name, link, cfg, crate::Instant::ZERO);
        devs.insert(name.to_string(), Arc::new(Mutex::new(stack)));
        Ok(())
    }

    /// Frame counters of the device `name`, if attached or opened.
    pub fn device_stats(&self, name: &str) -> Option<crate::device::DeviceStats> {
        let devs = self.shared.devs.lock().unwrap_or_else(|p| p.into_inner());
        devs.get(name).map(|d| crate::device::lock(d).stats())
    }

    /// The device a device address names, opened (TAP) on first use, with `own` (the
    /// stack's address for this use) added to its addresses.
    fn device_for(
        &self,
        d: &crate::addr::DevAddr,
        own: Option<std::net::Ipv4Addr>,
    ) -> Result<crate::device::SharedDev, RnicError> {
        use crate::device::{DevStack, DeviceConfig, DeviceError, Link, lock};
        let mut devs = self.shared.devs.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(dev) = devs.get(&d.device) {
            let mut s = lock(dev);
            match own {
                Some(ip) if !s.add_addr(ip, d.prefix) => {
                    return Err(RnicError::Device(DeviceError::Conflict {
                        name: d.device.clone(),
                        why: format!("no room for another address ({ip})"),
                    }));
                }
                Some(_) => {}
                None if s.first_addr().is_none() => {
                    return Err(RnicError::Device(DeviceError::Conflict {
                        name: d.device.clone(),
                        why: "it has no address yet: give the connect one with local=A".into(),
                    }));
                }
                None => {}
            }
            if d.mtu.is_some_and(|m| m != s.mtu()) {
                return Err(RnicError::Device(DeviceError::Conflict {
                    name: d.device.clone(),
                    why: format!("it is in use with MTU {}", s.mtu()),
                }));
            }
            return Ok(dev.clone());
        }
        if d.kind == crate::addr::DevKind::Attached {
            return Err(RnicError::Device(DeviceError::Open(format!(
                "no device {:?} is attached to this RNIC (Rnic::attach_device; tap://IFACE/... opens a TAP device)",
                d.device
            ))));
        }
        let Some(ip) = own else {
            return Err(RnicError::Device(DeviceError::Open(format!(
                "device {}: a connect needs the stack's own address: add ?local=A (an address on the device's subnet that the host does not use)",
                d.device
            ))));
        };
        let link = match d.kind {
            crate::addr::DevKind::Xdp => Link::open_xdp(&d.device, d.queue, d.native, d.take_all)?,
            _ => Link::open_tap(&d.device)?,
        };
        let cfg = DeviceConfig {
            addr: ip,
            prefix: d.prefix,
            gateway: d.gateway,
            mtu: d.mtu,
            mac: d.mac,
        };
        let dev = Arc::new(Mutex::new(DevStack::new(
            &d.device,
            link,
            &cfg,
            crate::Instant::ZERO,
        )));
        devs.insert(d.device.clone(), dev.clone());
        Ok(dev)
    }

    /// The device an SCTP address with `dev=` names, with `own` (the stack's addresses for
    /// this endpoint) on it; `None` without `dev=`.
    fn sctp_device(
        &self,
        s: &crate::addr::SctpAddr,
        own: &[std::net::IpAddr],
    ) -> Result<Option<crate::device::SharedDev>, RnicError> {
        let Some((kind, name)) = &s.device else {
            return Ok(None);
        };
        let v4: Vec<std::net::Ipv4Addr> = own
            .iter()
            .filter_map(|ip| match ip {
                std::net::IpAddr::V4(a) => Some(*a),
                std::net::IpAddr::V6(_) => None,
            })
            .collect();
        if v4.len() != own.len() {
            return Err(RnicError::Device(crate::device::DeviceError::Open(
                format!("device {name}: SCTP on a device takes IPv4 addresses"),
            )));
        }
        let first = v4
            .first()
            .copied()
            .unwrap_or(std::net::Ipv4Addr::UNSPECIFIED);
        let d = crate::addr::DevAddr::new(
            *kind,
            name.clone(),
            std::net::SocketAddrV4::new(first, s.port),
        );
        let mut dev = self.device_for(&d, v4.first().copied())?;
        for ip in v4.iter().skip(1) {
            dev = self.device_for(&d, Some(*ip))?;
        }
        Ok(Some(dev))
    }

    fn listen_dev(&self, d: &crate::addr::DevAddr) -> Result<Listener, RnicError> {
        let dev = self.device_for(d, Some(*d.addr.ip()))?;
        let port = match d.addr.port() {
            0 => crate::device::lock(&dev).listen_port(),
            p => p,
        };
        let id = ListenerId(self.shared.next_listener.fetch_add(1, Ordering::Relaxed));
        // The listening sockets open now, before the caller can connect to the port.
        let mut socks = Vec::new();
        {
            let mut dv = crate::device::lock(&dev);
            for _ in 0..crate::transport::DEV_BACKLOG {
                match dv.listen(port) {
                    Ok(h) => socks.push(h),
                    Err(e) => tracing::warn!(port, error = %e, "device listen failed"),
                }
            }
        }
        self.shared.command(Cmd::ListenDev(id, dev, port, socks));
        self.kick();
        let mut bound = d.clone();
        bound.addr.set_port(port);
        Ok(Listener {
            id,
            local_addr: SocketAddr::V4(bound.addr),
            transport: TransportAddr::Dev(bound),
        })
    }

    /// Stops listening. Requests already reported stay pending.
    pub fn close_listener(&self, l: &Listener) {
        self.shared.command(Cmd::CloseListener(l.id));
        self.kick();
    }

    /// Starts an active connection of `qp` to `addr` with MPA settings `cfg` (non-blocking;
    /// the outcome arrives as an [`Event`]).
    pub fn connect(&self, qp: &Qp, addr: SocketAddr, cfg: mpa::Config) -> Result<(), RnicError> {
        mpa::request(&cfg)?;
        self.claim(qp)?;
        self.shared
            .command(Cmd::Connect(qp.inner.clone(), addr, cfg));
        self.kick();
        Ok(())
    }

    /// Connects `qp` to `addr` and waits until the connection is established (the verbs'
    /// active connect).
    pub fn connect_blocking(
        &self,
        qp: &Qp,
        addr: SocketAddr,
        cfg: mpa::Config,
        timeout: Duration,
    ) -> Result<Session, RnicError> {
        self.connect(qp, addr, cfg)?;
        self.wait_established(qp, timeout)
    }

    /// Accepts connection request `req` on `qp`, answering with MPA settings `cfg` (its
    /// `private_data` goes into the Reply). Non-blocking: the result arrives as
    /// [`Event::Established`] or [`Event::ConnectFailed`] (negotiation may still refuse the
    /// request, e.g. for a CRC or RTR mismatch; the Reply then has R = 1).
    pub fn accept(&self, req: ConnReqId, qp: &Qp, cfg: mpa::Config) -> Result<(), RnicError> {
        cfg.validate()?;
        if !self.shared.request_pending(req) {
            return Err(RnicError::UnknownRequest(req));
        }
        self.claim(qp)?;
        self.shared.withdraw_request(req);
        self.shared.command(Cmd::Accept(req, qp.inner.clone(), cfg));
        self.kick();
        Ok(())
    }

    /// Rejects connection request `req`: an MPA Reply with R = 1 carrying `private_data` is
    /// sent and the connection closed.
    pub fn reject(&self, req: ConnReqId, private_data: &[u8]) -> Result<(), RnicError> {
        if !self.shared.withdraw_request(req) {
            return Err(RnicError::UnknownRequest(req));
        }
        self.shared.command(Cmd::Reject(req, private_data.to_vec()));
        self.kick();
        Ok(())
    }

    /// Waits for the next connection request on `listener` (taking it out of the event
    /// queue), accepts it on `qp` with `cfg` and waits until the connection is established
    /// (the verbs' passive connect). Returns the session and the request.
    pub fn accept_blocking(
        &self,
        listener: &Listener,
        qp: &Qp,
        cfg: mpa::Config,
        timeout: Duration,
    ) -> Result<(Session, ConnectRequest), RnicError> {
        let start = Instant::now();
        let req = self.wait_request(listener, timeout)?;
        self.accept(req.id, qp, cfg)?;
        let left = timeout.saturating_sub(start.elapsed());
        let s = self.wait_established(qp, left)?;
        Ok((s, req))
    }

    /// Waits for the next connection request on `listener`, taking it out of the event
    /// queue (other events stay queued).
    pub fn wait_request(
        &self,
        listener: &Listener,
        timeout: Duration,
    ) -> Result<ConnectRequest, RnicError> {
        let id = listener.id;
        let sh = &self.shared;
        sh.wait_for(
            timeout,
            || {
                let mut q = sh.events.lock().unwrap_or_else(|p| p.into_inner());
                let pos = q
                    .iter()
                    .position(|e| matches!(e, Event::ConnectRequest(r) if r.listener == id))?;
                let r = match q.remove(pos) {
                    Some(Event::ConnectRequest(r)) => Some(r),
                    _ => None,
                };
                sh.events_taken(&q);
                r
            },
            |d| {
                let q = sh.events.lock().unwrap_or_else(|p| p.into_inner());
                let _ = sh.events_cv.wait_timeout(q, d);
            },
        )
    }

    /// Runs MPA (or full operation) over an already connected TCP socket.
    pub fn adopt(
        &self,
        qp: &Qp,
        stream: std::net::TcpStream,
        role: AdoptRole,
    ) -> Result<(), RnicError> {
        let setup = match role {
            AdoptRole::Initiator(c) => {
                mpa::request(&c)?;
                Setup::Initiator(c)
            }
            AdoptRole::Responder(c) => {
                c.validate()?;
                Setup::Responder(c)
            }
            AdoptRole::Established(s) => Setup::Established(s),
        };
        stream.set_nonblocking(true)?;
        self.claim(qp)?;
        self.shared
            .command(Cmd::Adopt(qp.inner.clone(), stream, setup));
        self.kick();
        Ok(())
    }

    /// Waits until `qp`'s connection is established (or failed).
    pub fn wait_established(&self, qp: &Qp, timeout: Duration) -> Result<Session, RnicError> {
        let q = &qp.inner;
        self.shared.wait_for(
            timeout,
            || match q.status() {
                ConnStatus::Connected(s) => Some(Ok(*s)),
                ConnStatus::Failed(e) => Some(Err(RnicError::Cm(e))),
                ConnStatus::Closed(_) => Some(Err(RnicError::Cm(CmError::Aborted))),
                ConnStatus::Unconnected => Some(Err(RnicError::Cm(CmError::Aborted))),
                ConnStatus::Connecting => None,
            },
            |d| {
                let g = q.status.lock().unwrap_or_else(|p| p.into_inner());
                let _ = q.status_cv.wait_timeout(g, d);
            },
        )?
    }

    /// Graceful disconnect: no more posts; outstanding work completes, then the TCP
    /// connection is shut down and anything still posted is flushed
    /// ([`Event::Disconnected`] follows).
    pub fn disconnect(&self, qp: &Qp) -> Result<(), RnicError> {
        self.check_qp(qp)?;
        self.shared
            .command(Cmd::Modify(qp.inner.clone(), QpState::Closing));
        self.kick();
        Ok(())
    }

    /// A state transition the consumer asks for (RDMA Verbs Modify QP), carried out by the
    /// progress thread in order with the work posted before it: `Closing` is
    /// [`Rnic::disconnect`]; `Terminate` sends a Terminate (RDMAP Local Catastrophic Error,
    /// RFC 5040 §7.1) and closes the connection once it has left; `Error` closes the
    /// connection abortively. Every outstanding work request is flushed. Transitions the
    /// QP's current state does not allow are refused ([`crate::ModifyError`]); a QP that
    /// has no connection (yet) is left as it is.
    pub fn modify_qp(&self, qp: &Qp, to: QpState) -> Result<(), RnicError> {
        self.check_qp(qp)?;
        let from = qp.state();
        if !QpEngine::may_modify(from, to) {
            return Err(crate::engine::ModifyError { from, to }.into());
        }
        self.shared.command(Cmd::Modify(qp.inner.clone(), to));
        self.kick();
        Ok(())
    }

    /// Waits until everything `qp` has sent is acknowledged by the peer's TCP: no send work
    /// request is outstanding and the kernel socket holds no unacknowledged byte (its
    /// `tx_queue` in `/proc/net/tcp`). RDMA Write and Send completions come when the data
    /// was handed to the socket, so an application calls this before a closing exchange on
    /// another connection, or before a disconnect, that must not overtake the data.
    ///
    /// Fails with [`RnicError::Timeout`] after `timeout` (e.g. a peer that does not read),
    /// and with an [`std::io::ErrorKind::NotConnected`] I/O error when `qp` has no
    /// connection (any more).
    pub fn wait_tx_acked(&self, qp: &Qp, timeout: Duration) -> Result<(), RnicError> {
        self.check_qp(qp)?;
        let start = Instant::now();
        let not_connected = || {
            RnicError::Io(std::io::Error::new(
                std::io::ErrorKind::NotConnected,
                format!("QP {:?} has no TCP connection or SCTP association", qp.id()),
            ))
        };
        // Over TCP the kernel's socket knows what the peer has acknowledged; over SCTP the
        // association does.
        let ino = self.ask_core(start, timeout, |tx| Cmd::SocketInode(qp.inner.clone(), tx))?;
        loop {
            let unacked = match ino {
                Some(ino) => crate::transport::tcp_unacked(ino)?,
                None => {
                    self.ask_core(start, timeout, |tx| Cmd::StackUnacked(qp.inner.clone(), tx))?
                }
            };
            match unacked {
                None => return Err(not_connected()),
                Some(0) if qp.sq_outstanding() == 0 => return Ok(()),
                Some(_) => {}
            }
            if start.elapsed() >= timeout {
                return Err(RnicError::Timeout);
            }
            if self.shared.manual() {
                let _ = self.shared.advance(Duration::from_millis(1));
            } else {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }

    /// Sends the progress core the command `cmd` makes with a reply channel and waits for
    /// the reply (driving progress in manual mode), at most until `start + timeout`.
    fn ask_core<T>(
        &self,
        start: Instant,
        timeout: Duration,
        cmd: impl FnOnce(std::sync::mpsc::SyncSender<T>) -> Cmd,
    ) -> Result<T, RnicError> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.shared.command(cmd(tx));
        self.kick();
        loop {
            match rx.recv_timeout(Duration::from_millis(2)) {
                Ok(v) => return Ok(v),
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(RnicError::Closed);
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            }
            if start.elapsed() >= timeout {
                return Err(RnicError::Timeout);
            }
            self.kick();
        }
    }

    /// Waits until `qp`'s TCP connection has closed.
    pub fn wait_disconnected(&self, qp: &Qp, timeout: Duration) -> Result<CloseReason, RnicError> {
        let q = &qp.inner;
        self.shared.wait_for(
            timeout,
            || match q.status() {
                ConnStatus::Closed(r) => Some(r),
                ConnStatus::Failed(_) => Some(CloseReason::Local),
                _ => None,
            },
            |d| {
                let g = q.status.lock().unwrap_or_else(|p| p.into_inner());
                let _ = q.status_cv.wait_timeout(g, d);
            },
        )
    }

    /// The next event of `qp`, if any; other events stay queued (for applications that
    /// serve each connection from a thread of its own).
    pub fn poll_event_for(&self, qp: QpId) -> Option<Event> {
        let mut q = self.shared.events.lock().unwrap_or_else(|p| p.into_inner());
        let pos = q.iter().position(|e| e.qp() == Some(qp))?;
        let ev = q.remove(pos);
        self.shared.events_taken(&q);
        ev
    }

    /// The next event that is not a connection request, if any; connection requests stay
    /// queued for [`Rnic::wait_request`] (and the accept calls that use it).
    pub fn poll_async_event(&self) -> Option<Event> {
        let mut q = self.shared.events.lock().unwrap_or_else(|p| p.into_inner());
        let pos = q
            .iter()
            .position(|e| !matches!(e, Event::ConnectRequest(_)))?;
        let ev = q.remove(pos);
        self.shared.events_taken(&q);
        ev
    }

    /// The next event, if any.
    pub fn poll_event(&self) -> Option<Event> {
        let mut q = self.shared.events.lock().unwrap_or_else(|p| p.into_inner());
        let ev = q.pop_front();
        self.shared.events_taken(&q);
        ev
    }

    /// The RNIC's event channel: an eventfd (non-blocking, close-on-exec) that is readable
    /// exactly while events are queued, so an application can put it into its own
    /// epoll/poll loop next to its CQ completion channels and call [`Rnic::poll_event`]
    /// until `None` when it fires (as with `rdma_cm`'s event channel fd). Do not read the fd
    /// yourself: taking the last event makes it unreadable again.
    ///
    /// In [`ProgressMode::Manual`] events are produced by [`Rnic::advance`]; the fd only
    /// tells that some are waiting.
    pub fn event_fd(&self) -> BorrowedFd<'_> {
        self.shared.event_fd.as_fd()
    }

    /// Waits up to `timeout` for the next event (driving progress in manual mode).
    pub fn wait_event(&self, timeout: Duration) -> Option<Event> {
        let sh = &self.shared;
        sh.wait_for(
            timeout,
            || self.poll_event(),
            |d| {
                let q = sh.events.lock().unwrap_or_else(|p| p.into_inner());
                if q.is_empty() {
                    let _ = sh.events_cv.wait_timeout(q, d);
                }
            },
        )
        .ok()
    }

    /// Manual progress (`rnic_advance`): runs one pass of the progress core in the calling
    /// thread, waiting up to `timeout` for socket activity when there is nothing to do.
    /// Returns how many pieces of work were done.
    pub fn advance(&self, timeout: Duration) -> Result<usize, RnicError> {
        if !self.shared.manual() {
            return Err(RnicError::NotManual);
        }
        self.shared.advance(timeout)
    }

    /// A polling application's share of progress, for its spin loops: in manual mode one
    /// pass of [`Rnic::advance`] without waiting; with progress threads and
    /// [`RnicConfig::inline_progress`], one pass of the work of every progress thread that
    /// sleeps, in the calling thread, so that data the application is waiting for is placed
    /// without waking the progress thread first (a thread at work is left to it). Never
    /// waits. Returns how many pieces of work were done.
    ///
    /// While the application keeps calling it (calls less than a tenth of
    /// [`RnicConfig::assist_lease`] apart, 10 ms by default), a sleeping progress thread
    /// leaves the sockets to it instead of being woken by every arrival;
    /// [`Rnic::end_assist`] hands them back before the application blocks.
    pub fn assist(&self) -> usize {
        self.shared.assist()
    }

    /// Where this RNIC's progress was made so far: by its progress threads, or by
    /// application threads posting or polling ([`RnicConfig::inline_progress`]).
    pub fn progress_stats(&self) -> ProgressStats {
        self.shared.stats.snapshot()
    }

    /// How many established connections each progress thread serves, by thread
    /// ([`RnicConfig::progress_threads`] entries; one in manual progress): the count
    /// placement goes by. MPA connections (kernel or device TCP), SCTP associations and
    /// kernel SCTP associations are counted from the moment they are established until they
    /// close; connections in setup and SCTP on a device, which thread 0 serves, are not.
    pub fn progress_thread_loads(&self) -> Vec<usize> {
        self.shared
            .all_lanes()
            .map(|l| l.load.load(Ordering::SeqCst))
            .collect()
    }

    /// Ends what [`Rnic::assist`] started: call it when the polling loop stops (before
    /// blocking, say), so that a sleeping progress thread goes back to watching the sockets
    /// at once; otherwise it does so [`RnicConfig::assist_lease`] (10 ms) after the last
    /// `assist`.
    pub fn end_assist(&self) {
        self.shared.end_assist();
    }

    /// In manual mode, make commands take effect at once (they are processed by the core).
    fn kick(&self) {
        if self.shared.manual() {
            let _ = self.shared.advance(Duration::ZERO);
        }
    }

    /// Closes the RNIC: every connection is aborted (outstanding work flushed) and the
    /// progress thread joined. Dropping the RNIC does the same.
    pub fn close(self) {
        drop(self);
    }
}

impl Drop for Rnic {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        for lane in self.shared.all_lanes() {
            lane.wake();
        }
        let threads = std::mem::take(&mut *self.threads.lock().unwrap_or_else(|p| p.into_inner()));
        for t in threads {
            let _ = t.join();
        }
        // Lane 0 first: what it forwards to another lane on the way is still run there.
        for lane in self.shared.all_lanes() {
            let core = lane.core.lock().unwrap_or_else(|p| p.into_inner()).take();
            if let Some(mut core) = core {
                core.shutdown(&self.shared);
            }
        }
        let qps: Vec<_> = self
            .shared
            .qps
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
            .collect();
        for q in qps {
            q.flush_early();
            if q.status() == ConnStatus::Connecting {
                q.set_status(ConnStatus::Failed(CmError::Aborted));
            }
        }
        self.shared.events_cv.notify_all();
    }
}

impl Qp {
    /// The QP's id (in completions and events).
    pub fn id(&self) -> QpId {
        self.inner.id
    }

    /// Its attributes.
    pub fn attr(&self) -> &QpAttr {
        &self.inner.attr
    }

    /// The progress thread serving the QP's connection (0 ..
    /// [`RnicConfig::progress_threads`]): 0 until an established MPA connection (kernel or
    /// device TCP), SCTP association or kernel SCTP association is placed on another thread,
    /// and always 0 with one progress thread, in manual progress and for SCTP on a device.
    pub fn progress_thread(&self) -> usize {
        self.inner.lane.load(Ordering::SeqCst)
    }

    /// The send CQ.
    pub fn send_cq(&self) -> &Cq {
        &self.inner.attr.send_cq
    }

    /// The receive CQ.
    pub fn recv_cq(&self) -> &Cq {
        &self.inner.attr.recv_cq
    }

    /// The engine's state ([`QpState::Idle`] before and during setup).
    pub fn state(&self) -> QpState {
        self.inner
            .lock()
            .engine
            .as_ref()
            .map_or(QpState::Idle, |e| e.state())
    }

    /// The negotiated session, once established.
    pub fn session(&self) -> Option<Session> {
        self.inner
            .lock()
            .engine
            .as_ref()
            .and_then(|e| e.session().cloned())
    }

    /// The MULPDU in use (0 before full operation).
    pub fn mulpdu(&self) -> usize {
        self.inner.lock().engine.as_ref().map_or(0, |e| e.mulpdu())
    }

    /// Posts a send-queue work request (the doorbell). The QP must have a connection
    /// started ([`QpState::Idle`] during setup is fine; the request waits).
    ///
    /// While the connection is up the request goes into the QP's doorbell ring (checked
    /// as the engine would: SGE count, length, operation, ORD, queue depth) and the
    /// progress core takes it from there; posting never waits for the core's socket
    /// calls. The core is woken only when it sleeps.
    pub fn post_send(&self, wr: SendWr) -> Result<(), PostError> {
        let q = &self.inner;
        if q.ring_open.load(Ordering::SeqCst) {
            QpEngine::check_send(&wr, q.attr.max_sge, q.ord_zero.load(Ordering::SeqCst))?;
            q.sq_ring.push(wr, q.attr.sq_depth, || q.refresh_counts())?;
            self.after_ring_push();
        } else {
            let mut s = q.lock();
            match s.engine.as_mut() {
                Some(e) => {
                    q.drain_rings(e);
                    e.post_send(wr)?;
                }
                None => return Err(PostError::InvalidState(QpState::Idle)),
            }
        }
        self.rnic.ring_qp(q);
        Ok(())
    }

    /// A push into a ring raced with the core closing the rings: move it into the engine
    /// here (the core may have drained before the push).
    fn after_ring_push(&self) {
        if !self.inner.ring_open.load(Ordering::SeqCst) {
            let mut s = self.inner.lock();
            if let Some(e) = s.engine.as_mut() {
                self.inner.drain_rings(e);
            }
        }
    }

    /// Posts several send work requests under one lock and one doorbell. Stops at the first
    /// refused one, returning how many were posted and its error.
    pub fn post_send_batch(
        &self,
        wrs: impl IntoIterator<Item = SendWr>,
    ) -> Result<usize, (usize, PostError)> {
        let q = &self.inner;
        let mut n = 0;
        let mut err = None;
        if q.ring_open.load(Ordering::SeqCst) {
            let ord_zero = q.ord_zero.load(Ordering::SeqCst);
            for wr in wrs {
                let r = QpEngine::check_send(&wr, q.attr.max_sge, ord_zero)
                    .and_then(|()| q.sq_ring.push(wr, q.attr.sq_depth, || q.refresh_counts()));
                if let Err(x) = r {
                    err = Some(x);
                    break;
                }
                n += 1;
            }
            self.after_ring_push();
        } else {
            let mut s = q.lock();
            let Some(e) = s.engine.as_mut() else {
                return Err((0, PostError::InvalidState(QpState::Idle)));
            };
            q.drain_rings(e);
            for wr in wrs {
                if let Err(x) = e.post_send(wr) {
                    err = Some(x);
                    break;
                }
                n += 1;
            }
        }
        if n > 0 {
            self.rnic.ring_qp(&self.inner);
        }
        match err {
            Some(x) => Err((n, x)),
            None => Ok(n),
        }
    }

    /// Posts a receive buffer (allowed before the connection starts).
    ///
    /// While the connection is up the buffer goes into the QP's receive doorbell ring
    /// (SGE count and queue depth checked here); the core moves it into the engine before
    /// it reads from the socket again.
    pub fn post_recv(&self, wr: RecvWr) -> Result<(), PostError> {
        let q = &self.inner;
        if q.attr.srq.is_some() {
            return Err(PostError::InvalidWr(
                "this QP takes its receives from a shared receive queue: post to the SRQ",
            ));
        }
        if q.ring_open.load(Ordering::SeqCst) {
            if wr.sgl.len() > q.attr.max_sge {
                return Err(PostError::TooManySge {
                    given: wr.sgl.len(),
                    max: q.attr.max_sge,
                });
            }
            q.rq_ring.push(wr, q.attr.rq_depth, || q.refresh_counts())?;
            self.after_ring_push();
            return Ok(());
        }
        let mut s = self.inner.lock();
        if let Some(e) = s.engine.as_mut() {
            q.drain_rings(e);
            e.post_recv(wr)?;
            drop(s);
            // A receive can unblock nothing on the transmit side, but the engine may have
            // pushed a flush completion; no doorbell needed.
            return Ok(());
        }
        if wr.sgl.len() > self.inner.attr.max_sge {
            return Err(PostError::TooManySge {
                given: wr.sgl.len(),
                max: self.inner.attr.max_sge,
            });
        }
        if s.early_recv.len() >= self.inner.attr.rq_depth {
            return Err(PostError::QueueFull {
                depth: self.inner.attr.rq_depth,
            });
        }
        s.early_recv.push(wr);
        Ok(())
    }

    /// Send work requests not yet completed.
    pub fn sq_outstanding(&self) -> usize {
        let s = self.inner.lock();
        s.engine.as_ref().map_or(0, |e| e.sq_outstanding()) + self.inner.sq_ring.len()
    }

    /// Receive work requests posted and not yet completed.
    pub fn rq_posted(&self) -> usize {
        let s = self.inner.lock();
        s.engine
            .as_ref()
            .map_or(s.early_recv.len(), |e| e.rq_posted())
            + self.inner.rq_ring.len()
    }

    /// Outbound RDMA Read and Atomic Requests sent and awaiting their response: at most
    /// the session's ORD (RFC 5040 §6.4; RFC 6581 §5 negotiates it).
    pub fn ord_in_use(&self) -> usize {
        let s = self.inner.lock();
        s.engine.as_ref().map_or(0, |e| e.ord_in_use())
    }

    /// Inbound RDMA Read and Atomic Requests accepted and not yet fully answered: at most
    /// the session's IRD (RFC 5040 §6.4; RFC 6581 §5 negotiates it).
    pub fn ird_in_use(&self) -> usize {
        let s = self.inner.lock();
        s.engine.as_ref().map_or(0, |e| e.ird_in_use() as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cq::WcStatus;
    use crate::mem::{Access, MrOptions};

    /// Posting is a doorbell: with the connection up, `post_send` and `post_recv` return
    /// while the progress core holds the engine (here: the test holds its lock, as the
    /// core does during a socket write), and the work runs once the core gets the engine.
    #[test]
    fn posts_do_not_wait_for_the_engine_lock() {
        let t = Duration::from_secs(5);
        let (a, b) = (
            Rnic::open(RnicConfig::default()).unwrap(),
            Rnic::open(RnicConfig::default()).unwrap(),
        );
        let (pa, pb) = (a.alloc_pd(), b.alloc_pd());
        let (ca, cb) = (Cq::new(16), Cq::new(16));
        let qa = a
            .create_qp(QpAttr::new(pa, ca.clone(), ca.clone()))
            .unwrap();
        let qb = b
            .create_qp(QpAttr::new(pb, cb.clone(), cb.clone()))
            .unwrap();
        let l = b.listen("127.0.0.1:0".parse().unwrap()).unwrap();
        std::thread::scope(|s| {
            let h = s.spawn(|| b.accept_blocking(&l, &qb, mpa::Config::default(), t));
            a.connect_blocking(&qa, l.local_addr, mpa::Config::default(), t)
                .unwrap();
            h.join().unwrap().unwrap();
        });
        let src = a
            .mem()
            .register_new(pa, 64, MrOptions::new(Access::NONE))
            .unwrap();
        let dst = b
            .mem()
            .register_new(pb, 64, MrOptions::new(Access::LOCAL_WRITE))
            .unwrap();
        src.buf().write_at(0, b"ring").unwrap();

        let held_b = qb.inner.lock();
        let held_a = qa.inner.lock();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::scope(|s| {
            s.spawn(|| {
                let r1 = qb.post_recv(RecvWr::new(7, vec![dst.sge(0, 64)]));
                let r2 = qa.post_send(SendWr::send(8, vec![src.sge(0, 4)]));
                tx.send((r1.is_ok(), r2.is_ok())).unwrap();
            });
            let posted = rx.recv_timeout(Duration::from_secs(2));
            assert_eq!(
                posted,
                Ok((true, true)),
                "posts returned with the engine locked"
            );
            assert_eq!(qa.inner.sq_ring.len(), 1);
            assert_eq!(qb.inner.rq_ring.len(), 1);
            drop(held_a);
            drop(held_b);
        });
        assert!(cb.wait(t));
        let wc = cb.poll_one().unwrap();
        assert_eq!(
            (wc.wr_id, wc.status, wc.byte_len),
            (7, WcStatus::Success, 4)
        );
        assert_eq!(dst.buf().read_range(0..4).unwrap(), b"ring");
        assert!(ca.wait(t));
        assert_eq!(ca.poll_one().unwrap().wr_id, 8);
    }
}
