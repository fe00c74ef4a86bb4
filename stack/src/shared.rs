//! What the application side of the RNIC ([`crate::rnic`]) and its progress core (the
//! transport module) share: configuration, connection-management events and errors, and the
//! per-QP state both sides touch. Both modules build on this one; neither reaches into the
//! other for these types.

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

use mpa::{ConnFrame, NegotiationError};
use rdmap::Terminate;
use thiserror::Error;

use crate::cq::{Cq, CqId, QpId, Wc, WcOpcode, WcStatus};
use crate::engine::{CloseReason, EngineError, PostError, QpEngine, QpState, SetupError};
use crate::llp::Session;
use crate::llp::sctp::SctpSetupError;
use crate::mem::Pd;
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
    /// The application calls [`crate::Rnic::advance`].
    Manual,
}

/// RNIC settings.
#[derive(Clone, Debug)]
pub struct RnicConfig {
    /// Progress thread or manual progress.
    pub progress: ProgressMode,
    /// How many progress threads run the RNIC ([`ProgressMode::Thread`]; at least 1, the
    /// default; manual progress has one core whatever this says). Threads are named
    /// `softrnic-prog0`, `softrnic-prog1` .. (`softrnic-progress` when there is one).
    /// Thread 0 runs the listeners, every connection's setup, the raw-Ethernet devices
    /// (frames, TCP/IP) and SCTP on a device; an MPA connection (on a kernel TCP socket, or
    /// on a device's TCP: thread 0 wakes its thread when the device has something for it),
    /// a DDP/SCTP association of either side (an
    /// active one with its own endpoint; one an SCTP listener accepted in an endpoint of its
    /// own, to which the listener's endpoint on thread 0 passes its packets) and a kernel
    /// SCTP (`ksctp://`) association of either side, once established, is placed on
    /// the thread with the fewest established connections (ties: the lowest thread), where
    /// its sockets, timers and doorbell are served from then on
    /// ([`crate::Qp::progress_thread`] tells which, [`crate::Rnic::progress_thread_loads`]
    /// how many each thread serves).
    /// Least-loaded rather than round-robin placement keeps the threads even when
    /// connections come and go. Use it when one progress thread is the limit (many busy
    /// QPs); a single QP runs on one thread whatever this says.
    pub progress_threads: usize,
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
    /// Let polling application threads do the progress thread's work while it sleeps
    /// ([`ProgressMode::Thread`]; default on). [`crate::Rnic::assist`] (called by a polling
    /// application: the verbs' `cq_poll`, the perftest-style tools' latency loops) services
    /// ready connections in the calling thread, and while an application polls so, a post
    /// finding the thread of its QP asleep transmits in the posting thread instead of
    /// waking it.
    /// Each saves a hand-over between threads, which costs a scheduler wake-up per message
    /// (the larger part of a message's latency on one CPU). The progress thread still
    /// serves everything nobody else is looking at (a blocked application, timers, a full
    /// socket), so progress never depends on the application. Off: every piece of
    /// progress is made by the progress thread, as with a hardware RNIC.
    pub inline_progress: bool,
    /// How long after its last [`crate::Rnic::assist`] an application thread is taken to be
    /// still polling (default 10 ms): meanwhile a sleeping progress thread leaves the sockets
    /// to it, waking once per lease to see whether it was renewed. Only calls less than a
    /// tenth of the lease apart renew it (an application that polls now and then takes
    /// none, and its messages are served by the progress thread as they come). An
    /// application that stops polling without [`crate::Rnic::end_assist`] delays the
    /// progress thread's return to its sockets by at most this.
    pub assist_lease: Duration,
}

impl Default for RnicConfig {
    fn default() -> Self {
        RnicConfig {
            progress: ProgressMode::Thread,
            progress_threads: 1,
            busy_poll: Duration::from_micros(50),
            read_chunk: DEFAULT_READ_CHUNK,
            socket_buffer: None,
            max_emss: None,
            mpa_request_timeout: mpa::negotiate::REQUEST_TIMEOUT,
            zero_copy_tx: true,
            inline_progress: true,
            assist_lease: Duration::from_millis(10),
        }
    }
}

/// Where an RNIC's progress was made, counted since it opened ([`crate::Rnic::progress_stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProgressStats {
    /// Posts whose doorbell the posting thread served itself, the progress thread being
    /// asleep ([`RnicConfig::inline_progress`]).
    pub inline_posts: u64,
    /// Pieces of work done by application threads' [`crate::Rnic::assist`] passes (in
    /// manual mode, by `assist` only, not [`crate::Rnic::advance`]).
    pub assisted_work: u64,
    /// Times a progress thread went to sleep waiting on its sockets.
    pub thread_sleeps: u64,
    /// Times a progress thread went to sleep leaving its sockets to an application thread
    /// polling with [`crate::Rnic::assist`].
    pub thread_leased_sleeps: u64,
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
    /// A shared receive queue of the same PD to take receives from ([`crate::srq`]).
    pub srq: Option<crate::Srq>,
    /// A deliberate protocol fault (conformance testing of test tools; off by default).
    #[doc(hidden)]
    pub fault: Option<Fault>,
}

/// A deliberate protocol fault, for checking that a conformance runner finds it. Each
/// breaks exactly one rule; none is on unless asked for.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fault {
    /// The responder accepts a peer-to-peer Request without echoing P2P in its Reply
    /// (RFC 6581 §9).
    NoP2pEcho,
    /// The responder selects an RTR type the initiator did not offer, or several when all
    /// three were offered (RFC 6581 §9).
    WrongRtr,
    /// Terminates go out with the Terminate Control laid out from the low bits, as Linux
    /// siw 6.1 does on little-endian hosts (RFC 5040 §4.8).
    SiwTerminate,
    /// The first FPDU sent with CRC negotiated carries a wrong CRC (RFC 5044 §4.4).
    BadCrc,
    /// Inbound Read Requests are not limited by the IRD (RFC 5040 §6.1).
    IrdNotEnforced,
    /// The initiator's tagged RTR (zero-length Write or Read Request) carries STag 0, which
    /// RFC 5041 allows but Chelsio adapters refuse (RFC 6581 §9).
    RtrStagZero,
    /// DDP over SCTP: DDP Segments go out with PPID 0 instead of 16 (RFC 5043 §5.2).
    SctpWrongPpid,
    /// DDP over SCTP: the Session Accept carries DDP-SSN 1 instead of the first DDP-SSN of
    /// the session, 0 (RFC 5043 §5.2.1, §6.2).
    SctpAcceptSsn,
    /// After sending a Terminate the QP keeps the stream open and goes on placing and
    /// answering inbound segments (RFC 5040 §7.1: the Terminate is the last message).
    PlaceAfterTerminate,
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
            srq: None,
            fault: None,
        }
    }
}

/// Identifies a listener.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ListenerId(pub u32);

/// Identifies a pending connection request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ConnReqId(pub u64);

/// An incoming connection whose MPA Request has arrived, awaiting [`crate::Rnic::accept`] or
/// [`crate::Rnic::reject`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectRequest {
    /// Pass this to [`crate::Rnic::accept`] / [`crate::Rnic::reject`].
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
    /// A QP's take from a shared receive queue left fewer receives than the SRQ's armed
    /// limit ([`crate::Srq::arm_limit`]; armed again by the application).
    SrqLimitReached {
        /// The QP that took the receive.
        qp: QpId,
        /// The SRQ.
        srq: crate::SrqId,
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
            | Event::SrqLimitReached { qp, .. }
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
    /// A state transition the QP's state does not allow.
    #[error("{0}")]
    Modify(#[from] crate::engine::ModifyError),
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
    /// [`crate::Rnic::advance`] called while a progress thread runs.
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
    /// The progress core's token of the QP's connection (`usize::MAX`: none yet), so the
    /// core finds it without visiting every connection.
    pub(crate) token: std::sync::atomic::AtomicUsize,
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
    /// The progress thread (lane) serving the QP's connection: 0 until its established
    /// connection is placed on another one (set once, by lane 0's core).
    pub(crate) lane: AtomicUsize,
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
    pub(crate) fn lock(&self) -> MutexGuard<'_, VecDeque<T>> {
        self.q.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Appends `wr` unless the queue (engine + ring) holds `depth` already.
    ///
    /// The engine's count is published by the core after it has served the engine, so a
    /// completion can be polled before its slot shows as free here. Before refusing, the
    /// count is taken from the engine itself (`refresh`, which locks the engine and then
    /// this ring, in the core's order); only a queue that is really full is refused.
    pub(crate) fn push(
        &self,
        wr: T,
        depth: usize,
        refresh: impl FnOnce(),
    ) -> Result<(), PostError> {
        let wr = match self.try_push(wr, depth) {
            Ok(()) => return Ok(()),
            Err(wr) => wr,
        };
        refresh();
        self.try_push(wr, depth)
            .map_err(|_| PostError::QueueFull { depth })
    }

    pub(crate) fn try_push(&self, wr: T, depth: usize) -> Result<(), T> {
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
    pub(crate) fn drain_with(&self, f: impl FnMut(T)) {
        let mut q = self.lock();
        if q.is_empty() {
            return;
        }
        self.in_engine.fetch_add(q.len(), Ordering::SeqCst);
        q.drain(..).for_each(f);
    }

    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    /// Records the engine's count (under the ring lock, so a concurrent push sees it and
    /// the ring consistently).
    pub(crate) fn set_in_engine(&self, n: usize) {
        let q = self.lock();
        self.in_engine.store(n, Ordering::SeqCst);
        drop(q);
    }
}

impl QpShared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The engine's next deadline, as the progress thread sees it without waiting: a slot an
    /// application thread holds right now counts as due at `now` (its timers are looked at
    /// once the lock is free).
    pub(crate) fn engine_deadline(&self, now: crate::Instant) -> Option<crate::Instant> {
        match self.slot.try_lock() {
            Ok(s) => s.engine.as_ref().and_then(|e| e.poll_timeout()),
            Err(_) => Some(now),
        }
    }

    /// The engine is in full operation (RTS): its connection may be placed on another
    /// progress thread.
    pub(crate) fn engine_rts(&self) -> bool {
        self.lock()
            .engine
            .as_ref()
            .is_some_and(|e| e.state() == crate::engine::QpState::Rts)
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
    pub(crate) fn refresh_counts(&self) {
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
