//! # softrnic-stack — the core of the software RNIC
//!
//! softrnic behaves like an iWARP RNIC: applications register memory, post work requests
//! and poll completions, while a progress engine — the simulated NIC — moves data with the
//! real wire protocols (RDMAP RFC 5040 + RFC 7306, DDP RFC 5041, MPA RFC 5044 + RFC 6581 over
//! TCP). This crate is that core, with no I/O of its own:
//!
//! * [`mem`] — protection domains, registered memory ([`mem::RegisteredBuf`]) and the STag
//!   table ([`mem::MemTable`]) with every lookup the protocol needs, each returning the exact
//!   DDP/RDMAP error;
//! * [`cq`] — completion queues shared by QPs, work completions, asynchronous events and an
//!   eventfd completion channel;
//! * [`wr`] — work requests and scatter/gather elements;
//! * [`engine`] — [`engine::QpEngine`], the sans-IO protocol engine of one queue pair;
//! * [`rnic`] — the runtime: [`Rnic`] runs QP engines over non-blocking kernel TCP sockets
//!   with a progress thread (or manual progress), connection management (listen / connect /
//!   accept / reject / adopt a socket / disconnect) and asynchronous events.
//!
//! # The engine's surface
//!
//! The engine takes bytes, events and a time value in and hands bytes, completions, events and
//! timer deadlines out. It never blocks, spawns, reads a clock or touches a socket:
//!
//! | in | out |
//! |---|---|
//! | [`QpEngine::post_send`], [`QpEngine::post_recv`] (immediate errors returned) | completions pushed to the QP's send/recv [`Cq`]s |
//! | [`QpEngine::handle_stream`]`(now, bytes)` — bytes read from TCP | [`QpEngine::poll_transmit`] → bytes to write; [`QpEngine::transmit_done`]`(n)` after a (short) write; or [`QpEngine::transmit_with`] → a gather list (with [`QpConfig::zero_copy_tx`], payloads as ranges of registered memory) for one vectored write |
//! | [`QpEngine::handle_closed`]`(now, reason)` — TCP closed/reset | [`QpEngine::poll_event`] → [`QpEvent`] (state changes, setup result, Terminates, CQ overflow) |
//! | [`QpEngine::handle_timeout`]`(now)` | [`QpEngine::poll_timeout`] → next deadline (MPA setup only) |
//! | [`QpEngine::close`] — graceful disconnect | [`QpEngine::should_close_transport`] → close the TCP connection now |
//!
//! Transmit data is produced lazily (a bounded window ahead of the transport), so a large
//! message costs no more memory than the window, and completions of Sends and Writes follow
//! the bytes the transport actually accepted.
//!
//! # How drivers run it
//!
//! **Progress thread over kernel TCP** ([`rnic`]): one thread owns the
//! engines of its QPs and an epoll set holding each QP's non-blocking TCP socket plus an
//! eventfd that application threads signal after posting (posts go into per-QP doorbell
//! rings the thread drains into the engine). On every wake-up the thread, for
//! each ready QP: reads what the socket has and calls `handle_stream(start.elapsed(), ..)`;
//! loops `transmit_with` → gather `sendmsg` (payloads straight from registered memory)
//! until the engine has nothing or the socket returns `EAGAIN` (then it waits for
//! `EPOLLOUT`); drains `poll_event`; closes the
//! socket when `should_close_transport()`; and sets the epoll timeout to the earliest
//! `poll_timeout()`. Applications wait on [`Cq::wait`] or on a [`cq::CompletionChannel`] in
//! their own epoll loop. The engine does the connection setup's MPA exchange itself once the
//! TCP connection is up (the connection manager creates it with [`Setup::Initiator`] or
//! [`Setup::Responder`]).
//!
//! With [`RnicConfig::progress_threads`] above 1 there are that many such threads, each with
//! its own epoll set, eventfd doorbell and timers. Thread 0 runs the listeners, every
//! connection's setup, the raw-Ethernet devices and SCTP on a device; an established MPA
//! connection (kernel TCP, or a device's TCP, woken by thread 0 when the device has
//! something for it), SCTP association or kernel SCTP association then moves, socket (an
//! SCTP listener's association: endpoint, with its packets passed on from the listener's
//! endpoint), engine and all, to the thread with the fewest, which serves it from then on.
//! Posts ring the doorbell of the QP's thread; CQs, SRQs and the event queue are shared by
//! all threads.
//!
//! **netsim** (deterministic simulation over smoltcp): the engine is the state of a
//! `netsim::tcp::TcpApp`. In `poll(cx)` the app connects or listens on its socket, feeds
//! `socket.recv(..)` data to `handle_stream(cx.now(), ..)`, offers
//! `poll_transmit()` to `socket.send_slice(..)` and reports the accepted count with
//! `transmit_done`, calls `socket.close()` when `should_close_transport()`, and reports
//! `handle_closed` when the socket leaves the established states; `poll_at` returns the
//! engine's `poll_timeout()`. Every engine of the stack takes its time as [`Instant`] (the
//! simulator's type, which the SCTP engine takes too), so the same engine runs in
//! virtual time, with loss and reordering below TCP, byte-identically per seed.
//!
//! # Choices
//!
//! * RDMA Read sinks: the wire carries one Data Sink STag per Read Request, so a Read work
//!   request issues one Read Request per SGE, each SGE's own STag being the sink STag (the
//!   sink regions need local and remote write, as on every iWARP RNIC), each using an ORD
//!   credit; the work request completes when all responses have been placed.
//! * Zero-length tagged RTR messages carry STag 1 ([`engine::RTR_STAG`]), never 0.
//! * Immediate Data (RFC 7306) consumes a receive work request and is reported in
//!   [`Wc::imm_data`] with a byte length of 0.
//! * RFC 7306 atomics operate on 64-bit values in host byte order.

#![warn(missing_docs)]
// `unsafe` is confined to the memory module (raw-pointer copies into registered memory) and
// the AF_XDP device (the UMEM it shares with the kernel).
#![deny(unsafe_code)]

pub mod addr;
pub mod cq;
pub mod device;
pub mod engine;
pub mod fuzz;
pub mod llp;
pub mod mem;
pub mod rnic;
mod shared;
pub mod srq;
mod transport;
pub mod wr;

pub use cq::{
    Arm, AsyncEvent, CompletionChannel, Cq, CqId, QpId, TermInfo, TermOrigin, Wc, WcOpcode,
    WcStatus,
};
pub use engine::{
    CloseReason, EngineError, ModifyError, PostError, QpConfig, QpEngine, QpEvent, QpState, Setup,
    SetupError,
};
pub use mem::{
    Access, Addressing, FastRegRegion, MemError, MemTable, MemoryRegion, MrOptions, MwType, Pd,
    RegisteredBuf, Rereg, StreamOwner, TxPart,
};
pub use rnic::{
    AdoptRole, CmError, ConnReqId, ConnectRequest, DEFAULT_READ_CHUNK, Event, Fault, Listener,
    ListenerId, PathChange, ProgressMode, ProgressStats, Qp, QpAttr, Rnic, RnicConfig, RnicError,
    SctpRequest,
};
pub use srq::{Srq, SrqId};
pub use wr::{RecvWr, SendOp, SendWr, Sge};

pub use ddp;
pub use mpa;
/// The time every engine of the stack takes as `now`: a point on the driver's time line
/// (the simulator's virtual time, or the runtime's time since the RNIC started).
pub use netsim::Instant;
pub use rdmap;
pub use sctp;
