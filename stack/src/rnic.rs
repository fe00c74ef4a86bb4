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
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mpa::{ConnFrame, NegotiationError};
use rdmap::Terminate;
use thiserror::Error;

use crate::addr::TransportAddr;
use crate::cq::{Cq, CqId, QpId, Wc, WcOpcode, WcStatus};
use crate::engine::{CloseReason, EngineError, PostError, QpEngine, QpState, Setup, SetupError};
use crate::llp::Session;
use crate::llp::sctp::SctpSetupError;
use crate::mem::{MemTable, Pd};
use crate::transport::Core;
use crate::transport::sctp::{SctpConnect, SctpListen};
use crate::wr::{RecvWr, SendWr};

/// Default [`RnicConfig::read_chunk`]: four loopback FPDUs (fewer system calls per byte;
/// measured with the benchmark's `--read-chunk`, 256 KiB beat 64 KiB by 5–10 % of the
/// TCP figure when the sender posts lists).
pub const DEFAULT_READ_CHUNK: usize = 256 * 1024;

/// Who drives the progress core.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ProgressMode {
    /// A progress thread owned by the RNIC.
    #[default]
    Thread,
    /// The application calls [`Rnic::advance`].
    Manual,
}

/// RNIC settings.
#[derive(Clone, Debug)]
pub struct RnicConfig {
    /// Progress thread or manual progress.
    pub progress: ProgressMode,
    /// How long the progress thread keeps polling after its last piece of work before it
    /// sleeps in `epoll_wait` (0: sleep at once).
    pub busy_poll: Duration,
    /// Largest socket read (default [`DEFAULT_READ_CHUNK`], 256 KiB). A read that would end
    /// inside an FPDU whose length is known asks only for the rest of that FPDU, so the
    /// connection's read buffer empties and the next read lands at its start: the buffer
    /// stays about one read and one FPDU long and warm in the cache.
    pub read_chunk: usize,
    /// `SO_SNDBUF`/`SO_RCVBUF` for data connections; `None` (the default) leaves them to
    /// the kernel's autotuning, which setting them turns off (and which adapts to the
    /// path). Over loopback fixed 4 MiB buffers measured no better than autotuning; the
    /// benchmark's `--socket-buffer` compares.
    pub socket_buffer: Option<usize>,
    /// Use at most this EMSS, whatever `TCP_MAXSEG` says (e.g. 1448 to make FPDUs as on an
    /// Ethernet path even over loopback).
    pub max_emss: Option<u32>,
    /// How long an accepted TCP connection may take to deliver its MPA Request before the
    /// passive side closes it (default [`mpa::negotiate::REQUEST_TIMEOUT`], 5 s).
    ///
    /// RFC 5044 §7.1.3 (connection startup rules): the responder sends nothing until a
    /// complete MPA Request has arrived, so without a limit a client that connects and stays
    /// silent would hold its socket forever; the RFC leaves the wait to the implementation.
    pub mpa_request_timeout: Duration,
    /// Send FPDU payloads straight from registered memory with a gather `sendmsg` (default on; with
    /// markers negotiated payloads are copied anyway). See
    /// [`crate::QpConfig::zero_copy_tx`]; off copies every payload into the transmit
    /// buffer first (the benchmark compares both).
    pub zero_copy_tx: bool,
}

impl Default for RnicConfig {
    fn default() -> Self {
        RnicConfig {
            progress: ProgressMode::Thread,
            busy_poll: Duration::from_micros(50),
            read_chunk: DEFAULT_READ_CHUNK,
            socket_buffer: None,
            max_emss: None,
            mpa_request_timeout: mpa::negotiate::REQUEST_TIMEOUT,
            zero_copy_tx: true,
        }
    }
}

/// Attributes of a new QP.
#[derive(Clone, Debug)]
pub struct QpAttr {
    /// Protection domain.
    pub pd: Pd,
    /// CQ for send-queue completions.
    pub send_cq: Cq,
    /// CQ for receive-queue completions.
    pub recv_cq: Cq,
    /// Maximum outstanding send work requests.
    pub sq_depth: usize,
    /// Maximum posted receive work requests.
    pub rq_depth: usize,
    /// Maximum SGEs per work request (at least 6).
    pub max_sge: usize,
    /// Initiator interop quirk (zero: off): hold the first FPDU this long after the MPA
    /// Reply arrives ([`crate::QpConfig::first_fpdu_delay`]; Linux siw 6.1's accept race).
    pub first_fpdu_delay: Duration,
}

impl QpAttr {
    /// Depth 256 per queue, 6 SGEs.
    pub fn new(pd: Pd, send_cq: Cq, recv_cq: Cq) -> QpAttr {
        QpAttr {
            pd,
            send_cq,
            recv_cq,
            sq_depth: 256,
            rq_depth: 256,
            max_sge: crate::wr::MIN_MAX_SGE,
            first_fpdu_delay: Duration::ZERO,
        }
    }
}

/// Identifies a listener.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ListenerId(pub u32);

/// Identifies a pending connection request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ConnReqId(pub u64);

/// An incoming connection whose MPA Request has arrived, awaiting [`Rnic::accept`] or
/// [`Rnic::reject`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectRequest {
    /// Pass this to [`Rnic::accept`] / [`Rnic::reject`].
    pub id: ConnReqId,
    /// The listener it arrived on.
    pub listener: ListenerId,
    /// The initiator's address.
    pub peer: SocketAddr,
    /// Our address of the connection.
    pub local: SocketAddr,
    /// Over MPA/TCP, the MPA Request as received: revision, M/C flags, RFC 6581 IRD/ORD,
    /// P2P flag and offered RTR types (`enhanced`), and the ULP private data. `None` over
    /// SCTP.
    pub request: Option<ConnFrame>,
    /// Over SCTP, the DDP Stream Session Initiate: whether it was RFC 6581's enhanced one,
    /// and the initiator's IRD/ORD if so. `None` over MPA/TCP.
    pub sctp: Option<SctpRequest>,
    /// The initiator's ULP private data.
    pub private_data: Vec<u8>,
}

/// What an SCTP connection request (DDP Stream Session Initiate, RFC 5043 §6.2) carried.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SctpRequest {
    /// The transport it arrived on ("sctp+udp" or "sctp").
    pub scheme: &'static str,
    /// RFC 6581 enhanced session control, with the initiator's (IRD, ORD).
    pub enhanced: Option<(u16, u16)>,
    /// Every address the initiator announced (multihoming).
    pub peer_addrs: Vec<IpAddr>,
}

impl ConnectRequest {
    /// The initiator's ULP private data.
    pub fn private_data(&self) -> &[u8] {
        &self.private_data
    }
}

/// A change of one path of a multihomed SCTP association.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PathChange {
    /// The path is active (confirmed or recovered).
    Up,
    /// The path is potentially failed (SCTP-PF, RFC 7829): new data avoids it.
    PotentiallyFailed,
    /// The path is inactive (RFC 9260 §8.2).
    Down,
    /// New data now goes to this peer address (failover, switchback).
    Primary,
}

/// Why connection setup failed.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum CmError {
    /// The TCP connection could not be made or broke.
    #[error("TCP connection failed: {0}")]
    Tcp(String),
    /// MPA setup failed (malformed frame, negotiation, timeout, closed).
    #[error("{0}")]
    Setup(SetupError),
    /// The responder rejected the connection.
    #[error("connection rejected by the peer ({} bytes of private data)", private_data.len())]
    Rejected {
        /// The responder's private data.
        private_data: Vec<u8>,
    },
    /// The QP was destroyed or the RNIC closed during setup.
    #[error("connection setup aborted (QP destroyed, disconnected or RNIC closed)")]
    Aborted,
    /// The connection request vanished (the initiator closed it) before it was accepted.
    #[error("the connection request was withdrawn by the initiator")]
    Withdrawn,
}

/// Events of the RNIC: connection management and asynchronous QP errors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// An MPA Request arrived on a listener.
    ConnectRequest(ConnectRequest),
    /// A QP finished MPA setup and is in full operation.
    Established {
        /// The QP.
        qp: QpId,
        /// What was negotiated (includes the peer's private data).
        session: Box<Session>,
    },
    /// The responder rejected our MPA Request.
    Rejected {
        /// The QP.
        qp: QpId,
        /// The responder's private data.
        private_data: Vec<u8>,
    },
    /// Connection setup failed for another reason.
    ConnectFailed {
        /// The QP.
        qp: QpId,
        /// Why.
        error: CmError,
    },
    /// The TCP connection of an established QP ended.
    Disconnected {
        /// The QP.
        qp: QpId,
        /// How.
        reason: CloseReason,
    },
    /// The QP sent a Terminate (it found an error in what the peer sent, or a local one).
    TerminateSent {
        /// The QP.
        qp: QpId,
        /// The Terminate.
        terminate: Terminate,
    },
    /// The peer sent a Terminate.
    TerminateReceived {
        /// The QP.
        qp: QpId,
        /// The Terminate.
        terminate: Terminate,
    },
    /// The QP entered the Error state other than by a graceful disconnect; outstanding work
    /// requests were flushed.
    QpError {
        /// The QP.
        qp: QpId,
        /// The state it left.
        from: QpState,
    },
    /// A completion did not fit a CQ; the QP failed.
    CqOverflow {
        /// The QP.
        qp: QpId,
        /// The CQ.
        cq: CqId,
    },
    /// A path of the QP's multihomed SCTP association changed (the QP goes on while any
    /// path is up).
    Path {
        /// The QP.
        qp: QpId,
        /// The peer address of the path.
        remote: IpAddr,
        /// What happened.
        change: PathChange,
    },
}

impl Event {
    /// The QP the event concerns, if any.
    pub fn qp(&self) -> Option<QpId> {
        match self {
            Event::ConnectRequest(_) => None,
            Event::Established { qp, .. }
            | Event::Rejected { qp, .. }
            | Event::ConnectFailed { qp, .. }
            | Event::Disconnected { qp, .. }
            | Event::TerminateSent { qp, .. }
            | Event::TerminateReceived { qp, .. }
            | Event::QpError { qp, .. }
            | Event::CqOverflow { qp, .. }
            | Event::Path { qp, .. } => Some(*qp),
        }
    }
}

/// Errors of the runtime's calls.
#[derive(Debug, Error)]
pub enum RnicError {
    /// A socket or epoll operation failed.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// The engine refused the configuration.
    #[error("{0}")]
    Engine(#[from] EngineError),
    /// The MPA configuration is unusable.
    #[error("MPA configuration: {0}")]
    Mpa(#[from] mpa::negotiate::ConfigError),
    /// Connection setup failed.
    #[error("{0}")]
    Cm(#[from] CmError),
    /// The QP is already connected or connecting.
    #[error("QP {0:?} is already connected or connecting")]
    QpBusy(QpId),
    /// No such QP on this RNIC.
    #[error("QP {0:?} does not exist on this RNIC")]
    UnknownQp(QpId),
    /// No pending connection request with this id.
    #[error("no pending connection request {0:?}")]
    UnknownRequest(ConnReqId),
    /// No such listener.
    #[error("no listener {0:?}")]
    UnknownListener(ListenerId),
    /// The wait timed out.
    #[error("timed out")]
    Timeout,
    /// The RNIC was closed.
    #[error("the RNIC is closed")]
    Closed,
    /// A raw-Ethernet device cannot be used.
    #[error("{0}")]
    Device(#[from] crate::device::DeviceError),
    /// [`Rnic::advance`] called while a progress thread runs.
    #[error("rnic_advance needs ProgressMode::Manual (a progress thread is running)")]
    NotManual,
}

/// Where a QP's connection stands (for the blocking calls).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ConnStatus {
    Unconnected,
    Connecting,
    Connected(Box<Session>),
    Failed(CmError),
    Closed(CloseReason),
}

/// The engine slot of a QP: empty until a connection starts.
#[derive(Debug)]
pub(crate) struct Slot {
    pub(crate) engine: Option<QpEngine>,
    /// Receives posted before the connection started.
    pub(crate) early_recv: Vec<RecvWr>,
}

/// A QP's state shared between the application and the progress core.
#[derive(Debug)]
pub(crate) struct QpShared {
    pub(crate) id: QpId,
    pub(crate) attr: QpAttr,
    pub(crate) slot: Mutex<Slot>,
    /// Send work posted since the core last looked.
    pub(crate) tx_pending: AtomicBool,
    pub(crate) status: Mutex<ConnStatus>,
    pub(crate) status_cv: Condvar,
    pub(crate) destroyed: AtomicBool,
    /// Doorbell rings: work requests posted while the core serves the engine, moved into
    /// it by the core at the start of every service of the QP.
    pub(crate) sq_ring: Ring<SendWr>,
    pub(crate) rq_ring: Ring<RecvWr>,
    /// The rings are served: a connection is active and its engine takes posts (Idle or
    /// RTS). Otherwise posts go to the engine directly, under its lock.
    pub(crate) ring_open: AtomicBool,
    /// The session's ORD is 0 (RDMA Reads and atomics are refused at post time).
    pub(crate) ord_zero: AtomicBool,
}

/// A per-QP doorbell ring: posting appends under a lock of its own that is held only for
/// the push or the take (never across a socket call, unlike the engine's), so posting
/// does not wait for the progress core's reads and writes.
#[derive(Debug)]
pub(crate) struct Ring<T> {
    q: Mutex<VecDeque<T>>,
    /// Work requests of this queue in the engine (as of the core's last look), for the
    /// queue-full check at post time.
    in_engine: AtomicUsize,
}

impl<T> Default for Ring<T> {
    fn default() -> Self {
        Ring {
            q: Mutex::new(VecDeque::new()),
            in_engine: AtomicUsize::new(0),
        }
    }
}

impl<T> Ring<T> {
    fn lock(&self) -> MutexGuard<'_, VecDeque<T>> {
        self.q.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Appends `wr` unless the queue (engine + ring) holds `depth` already.
    ///
    /// The engine's count is published by the core after it has served the engine, so a
    /// completion can be polled before its slot shows as free here. Before refusing, the
    /// count is taken from the engine itself (`refresh`, which locks the engine and then
    /// this ring, in the core's order); only a queue that is really full is refused.
    fn push(&self, wr: T, depth: usize, refresh: impl FnOnce()) -> Result<(), PostError> {
        let wr = match self.try_push(wr, depth) {
            Ok(()) => return Ok(()),
            Err(wr) => wr,
        };
        refresh();
        self.try_push(wr, depth)
            .map_err(|_| PostError::QueueFull { depth })
    }

    fn try_push(&self, wr: T, depth: usize) -> Result<(), T> {
        let mut q = self.lock();
        if q.len() + self.in_engine.load(Ordering::SeqCst) >= depth {
            return Err(wr);
        }
        q.push_back(wr);
        Ok(())
    }

    /// Hands everything queued to `f` in posting order, counting it as in the engine. The
    /// ring keeps its allocation (no allocation per post); `f` runs under the ring's lock
    /// (the core holds the engine's slot: the slot-then-ring order of `push`'s refresh).
    fn drain_with(&self, f: impl FnMut(T)) {
        let mut q = self.lock();
        if q.is_empty() {
            return;
        }
        self.in_engine.fetch_add(q.len(), Ordering::SeqCst);
        q.drain(..).for_each(f);
    }

    fn len(&self) -> usize {
        self.lock().len()
    }

    /// Records the engine's count (under the ring lock, so a concurrent push sees it and
    /// the ring consistently).
    fn set_in_engine(&self, n: usize) {
        let q = self.lock();
        self.in_engine.store(n, Ordering::SeqCst);
        drop(q);
    }
}

impl QpShared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Moves the rings' work requests into the engine (whose slot the caller holds), in
    /// posting order; receives first, so data read next finds them.
    pub(crate) fn drain_rings(&self, eng: &mut QpEngine) {
        self.rq_ring.drain_with(|wr| {
            let id = wr.wr_id;
            if eng.post_recv(wr).is_err() {
                // Accepted at post time; the QP left RTS since.
                let _ =
                    self.attr
                        .recv_cq
                        .push(Wc::new(self.id, id, WcOpcode::Recv, WcStatus::Flushed));
            }
        });
        self.sq_ring.drain_with(|wr| eng.post_send_accepted(wr));
    }

    /// After serving the engine: publishes its queue counts and whether the rings stay
    /// open (`open`: the connection goes on and the engine takes posts). Closing them
    /// drains what is left into the engine, which flushes it if it no longer takes posts.
    pub(crate) fn publish_engine(&self, eng: &mut QpEngine, open: bool) {
        let open = open && matches!(eng.state(), QpState::Idle | QpState::Rts);
        self.ring_open.store(open, Ordering::SeqCst);
        if !open {
            self.drain_rings(eng);
        }
        self.sq_ring.set_in_engine(eng.sq_outstanding());
        self.rq_ring.set_in_engine(eng.rq_posted());
    }

    /// Publishes the engine's queue counts now (a post found its ring full by the count
    /// the core published last).
    fn refresh_counts(&self) {
        let s = self.lock();
        if let Some(e) = s.engine.as_ref() {
            self.sq_ring.set_in_engine(e.sq_outstanding());
            self.rq_ring.set_in_engine(e.rq_posted());
        }
    }

    pub(crate) fn set_status(&self, s: ConnStatus) {
        let mut g = self.status.lock().unwrap_or_else(|p| p.into_inner());
        *g = s;
        drop(g);
        self.status_cv.notify_all();
    }

    pub(crate) fn status(&self) -> ConnStatus {
        self.status
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Completes every early receive with `Flushed` (the QP never connected).
    pub(crate) fn flush_early(&self) {
        let mut s = self.lock();
        for wr in s.early_recv.drain(..) {
            let _ = self.attr.recv_cq.push(Wc::new(
                self.id,
                wr.wr_id,
                WcOpcode::Recv,
                WcStatus::Flushed,
            ));
        }
    }
}

/// Requests from the application to the progress core.
#[derive(Debug)]
pub(crate) enum Cmd {
    Listen(ListenerId, TcpListener),
    CloseListener(ListenerId),
    Connect(Arc<QpShared>, SocketAddr, mpa::Config),
    Accept(ConnReqId, Arc<QpShared>, mpa::Config),
    Reject(ConnReqId, Vec<u8>),
    Adopt(Arc<QpShared>, std::net::TcpStream, Setup),
    Disconnect(Arc<QpShared>),
    Destroy(Arc<QpShared>),
    /// Answer the inode of the QP's TCP socket (`None`: no active connection).
    SocketInode(Arc<QpShared>, std::sync::mpsc::SyncSender<Option<u64>>),
    /// Listen for SCTP associations on an opened endpoint.
    ListenSctp(ListenerId, Box<SctpListen>),
    /// Connect over SCTP from an opened endpoint.
    ConnectSctp(Arc<QpShared>, Box<SctpConnect>, mpa::Config),
    /// Answer the octets not yet acknowledged on the QP's connection in softrnic's own
    /// stacks: its SCTP association or its TCP connection on a device (`None`: no such
    /// connection; kernel sockets are asked through `SocketInode`).
    StackUnacked(Arc<QpShared>, std::sync::mpsc::SyncSender<Option<u64>>),
    /// Listen on a device's TCP port.
    ListenDev(ListenerId, crate::device::SharedDev, u16),
    /// Connect over a device's TCP to the peer, from a local address of the device.
    ConnectDev(
        Arc<QpShared>,
        crate::device::SharedDev,
        std::net::SocketAddrV4,
        Option<std::net::Ipv4Addr>,
        mpa::Config,
    ),
}

/// State shared by the application threads and the progress core.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) cfg: RnicConfig,
    pub(crate) mem: Arc<MemTable>,
    pub(crate) cmds: Mutex<VecDeque<Cmd>>,
    /// Something to do: commands queued or send work posted.
    pub(crate) rung: AtomicBool,
    /// The progress thread is (about to be) asleep in `epoll_wait`.
    pub(crate) sleeping: AtomicBool,
    pub(crate) stop: AtomicBool,
    pub(crate) waker: mio::Waker,
    pub(crate) events: Mutex<VecDeque<Event>>,
    pub(crate) events_cv: Condvar,
    /// Readable while `events` is not empty ([`Rnic::event_fd`]).
    event_fd: OwnedFd,
    /// Connection requests reported and not yet accepted or rejected.
    pub(crate) pending: Mutex<HashSet<ConnReqId>>,
    pub(crate) qps: Mutex<Vec<Arc<QpShared>>>,
    pub(crate) core: Mutex<Option<Core>>,
    /// Raw-Ethernet devices with softrnic's TCP/IP, by name.
    pub(crate) devs: Mutex<HashMap<String, crate::device::SharedDev>>,
    next_qp: AtomicU32,
    next_listener: AtomicU32,
    pub(crate) next_req: AtomicU64,
}

impl Shared {
    /// Rings the doorbell: the core has work; wake the thread if it sleeps.
    pub(crate) fn ring(&self) {
        self.rung.store(true, Ordering::SeqCst);
        if self.sleeping.load(Ordering::SeqCst) {
            let _ = self.waker.wake();
        }
    }

    pub(crate) fn command(&self, cmd: Cmd) {
        self.cmds
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push_back(cmd);
        self.ring();
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
    fn events_taken(&self, q: &VecDeque<Event>) {
        if q.is_empty() {
            let mut b = [0u8; 8];
            // EAGAIN (already unreadable) is fine.
            let _ = rustix::io::read(&self.event_fd, &mut b);
        }
    }

    fn manual(&self) -> bool {
        self.cfg.progress == ProgressMode::Manual
    }

    /// Runs one pass of the core (manual mode), waiting at most `timeout`.
    fn advance(&self, timeout: Duration) -> Result<usize, RnicError> {
        let mut g = self.core.lock().unwrap_or_else(|p| p.into_inner());
        let Some(core) = g.as_mut() else {
            return Err(RnicError::Closed);
        };
        if timeout.is_zero() {
            return Ok(core.turn(self, Some(timeout))?);
        }
        // A post from another thread while this one waits in epoll wakes it.
        self.sleeping.store(true, Ordering::SeqCst);
        let r = core.turn(self, Some(timeout));
        self.sleeping.store(false, Ordering::SeqCst);
        Ok(r?)
    }

    /// Manual mode: after a post, transmit at once if no other thread is in the core.
    fn post_kick(&self) {
        if self.manual()
            && let Ok(mut g) = self.core.try_lock()
            && let Some(core) = g.as_mut()
        {
            core.kick(self);
        }
    }

    /// Waits until `done` returns `Some`, driving progress in manual mode; `wait` blocks
    /// for a wake-up in thread mode.
    fn wait_for<T>(
        &self,
        timeout: Duration,
        mut done: impl FnMut() -> Option<T>,
        mut wait: impl FnMut(Duration),
    ) -> Result<T, RnicError> {
        let deadline = Instant::now().checked_add(timeout);
        loop {
            if let Some(v) = done() {
                return Ok(v);
            }
            if self.stop.load(Ordering::SeqCst) {
                return Err(RnicError::Closed);
            }
            let left = deadline.map_or(Duration::from_secs(3600), |d| {
                d.saturating_duration_since(Instant::now())
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

/// A software RNIC instance. See the [module documentation](self).
#[derive(Debug)]
pub struct Rnic {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
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
        let poll = mio::Poll::new()?;
        let waker = mio::Waker::new(poll.registry(), crate::transport::WAKER)?;
        let mode = cfg.progress;
        let core = Core::new(poll, cfg.read_chunk);
        let event_fd = rustix::event::eventfd(
            0,
            rustix::event::EventfdFlags::NONBLOCK | rustix::event::EventfdFlags::CLOEXEC,
        )
        .map_err(std::io::Error::from)?;
        let shared = Arc::new(Shared {
            cfg,
            mem: MemTable::new(),
            cmds: Mutex::new(VecDeque::new()),
            rung: AtomicBool::new(false),
            sleeping: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            waker,
            events: Mutex::new(VecDeque::new()),
            events_cv: Condvar::new(),
            event_fd,
            pending: Mutex::new(HashSet::new()),
            qps: Mutex::new(Vec::new()),
            core: Mutex::new(Some(core)),
            devs: Mutex::new(HashMap::new()),
            next_qp: AtomicU32::new(1),
            next_listener: AtomicU32::new(1),
            next_req: AtomicU64::new(1),
        });
        let thread = match mode {
            ProgressMode::Manual => None,
            ProgressMode::Thread => {
                let s = shared.clone();
                Some(
                    std::thread::Builder::new()
                        .name("softrnic-progress".into())
                        .spawn(move || crate::transport::run_thread(&s))?,
                )
            }
        };
        Ok(Rnic {
            shared,
            thread: Mutex::new(thread),
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
            status: Mutex::new(ConnStatus::Unconnected),
            status_cv: Condvar::new(),
            destroyed: AtomicBool::new(false),
            sq_ring: Ring::default(),
            rq_ring: Ring::default(),
            ring_open: AtomicBool::new(false),
            ord_zero: AtomicBool::new(false),
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
    /// request completes with [`WcStatus::Flushed`].
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
        let mut devs = self.shared.devs.lock().unwrap_or_else(|p| p.into_inner());
        if devs.contains_key(name) {
            return Err(RnicError::Device(crate::device::DeviceError::Conflict {
                name: name.to_string(),
                why: "a device of that name is attached already".into(),
            }));
        }
        let stack = crate::device::DevStack::new(name, link, cfg, Duration::ZERO);
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
            Duration::ZERO,
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
        let d = crate::addr::DevAddr {
            kind: *kind,
            device: name.clone(),
            addr: std::net::SocketAddrV4::new(
                v4.first()
                    .copied()
                    .unwrap_or(std::net::Ipv4Addr::UNSPECIFIED),
                s.port,
            ),
            local: None,
            prefix: crate::addr::DEFAULT_DEV_PREFIX,
            gateway: None,
            mtu: None,
            mac: None,
            queue: 0,
            native: false,
            take_all: false,
        };
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
        self.shared.command(Cmd::ListenDev(id, dev, port));
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
        if !self
            .shared
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&req)
        {
            return Err(RnicError::UnknownRequest(req));
        }
        self.claim(qp)?;
        self.shared
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&req);
        self.shared.command(Cmd::Accept(req, qp.inner.clone(), cfg));
        self.kick();
        Ok(())
    }

    /// Rejects connection request `req`: an MPA Reply with R = 1 carrying `private_data` is
    /// sent and the connection closed.
    pub fn reject(&self, req: ConnReqId, private_data: &[u8]) -> Result<(), RnicError> {
        if !self
            .shared
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&req)
        {
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
        self.shared.command(Cmd::Disconnect(qp.inner.clone()));
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
        let _ = self.shared.waker.wake();
        let t = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(t) = t {
            let _ = t.join();
        }
        let core = self
            .shared
            .core
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(mut core) = core {
            core.shutdown(&self.shared);
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
        q.tx_pending.store(true, Ordering::SeqCst);
        self.rnic.ring();
        self.rnic.post_kick();
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
            self.inner.tx_pending.store(true, Ordering::SeqCst);
            self.rnic.ring();
            self.rnic.post_kick();
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
}

/// The reason a failed setup is reported as it is.
pub(crate) fn setup_event(qp: QpId, err: &SetupError) -> (Event, CmError) {
    match err {
        SetupError::Negotiation(NegotiationError::Rejected { private_data, .. })
        | SetupError::Sctp(SctpSetupError::Rejected(private_data)) => (
            Event::Rejected {
                qp,
                private_data: private_data.clone(),
            },
            CmError::Rejected {
                private_data: private_data.clone(),
            },
        ),
        e => (
            Event::ConnectFailed {
                qp,
                error: CmError::Setup(e.clone()),
            },
            CmError::Setup(e.clone()),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
