//! # softrnic-sctp — a userspace SCTP association engine (RFC 9260) with multihoming and
//! SCTP-PF (RFC 7829)
//!
//! The second transport of softrnic is DDP over SCTP (RFC 5043). This crate is the SCTP
//! part: a complete association engine that does no I/O of its own (no sockets, clocks,
//! threads or global state), so the same code runs over raw IP, over UDP encapsulation
//! (RFC 6951), inside the deterministic network simulator, or in a fuzzer.
//!
//! ## Shape
//!
//! - [`Endpoint`] owns a local port and its addresses. It demultiplexes packets to
//!   associations by verification tag (falling back to the peer's transport address for
//!   INIT, COOKIE ECHO and reflected-tag packets), answers INITs **statelessly** with an
//!   HMAC-SHA-256 signed State Cookie, creates an association only from a valid COOKIE ECHO,
//!   and handles out-of-the-blue packets as RFC 9260 §8.4 prescribes.
//! - [`Association`] is one association: handshake and collisions (§5), data transfer with
//!   SACK, gap blocks and duplicate reports (§6), delayed SACK, fast retransmit and fast
//!   recovery, RTO estimation and back-off, per-destination congestion control (§7),
//!   multihoming with heartbeats, path failure and failover (§8), the Potentially Failed
//!   state of SCTP-PF, graceful shutdown and abort (§9), and Concurrent Multipath Transfer
//!   ([`CmtConfig`]: new data on every active path, split fast retransmit, CUCv2, delayed
//!   ACK for CMT, retransmission policies, CMT-PF, a striped or lowest-RTT scheduler).
//! - The driver calls `handle_packet(now, local, remote, bytes)` for every packet received
//!   and `handle_timeout(now)` when `poll_timeout()` has passed, then drains
//!   `poll_transmit(now)` (each [`Transmit`] names the local and remote address), `poll_event()`
//!   and `recv()`. Time is the caller's: [`Instant`] counts nanoseconds from any epoch.
//! - Addresses are plain `SocketAddr`s at whatever layer the driver uses: for raw IP the port
//!   is unused; for UDP encapsulation it is the UDP port. SCTP ports are separate (the
//!   endpoint's `port` and the peer port given to [`Endpoint::connect`]). Addresses the peer
//!   lists in INIT / INIT ACK take the port of the address the handshake came from.
//! - [`wire`] holds the codec: a zero-copy [`wire::Packet`] view beside plain `Chunk`,
//!   `Param` and `ErrorCause` representations that parse and emit.
//! - [`ddp_adapt`] is DDP over SCTP (RFC 5043): the Adaptation Layer Indication (set
//!   `AssociationConfig::adaptation_indication`, read
//!   [`Association::peer_adaptation_indication`]), the PPID 16/17 message codecs, a
//!   [`ddp_adapt::parse`] that decoders call, and the DDP Stream Session state machine.
//! - [`fuzz`] has the fuzzing entry points: the codec ([`fuzz::packet`]) and a live
//!   association fed arbitrary packets ([`fuzz::association`]).
//!
//! ## Determinism
//!
//! All randomness (verification tags, initial TSNs, heartbeat nonces and jitter, the cookie
//! key unless given) comes from the seed in [`EndpointConfig`]; the same inputs give the same
//! outputs. Production drivers seed from the operating system's generator.
//!
//! ## Not implemented (yet)
//!
//! Partial reliability (RFC 3758), dynamic address reconfiguration (RFC 5061), SCTP-AUTH
//! (RFC 4895), I-DATA / stream schedulers (RFC 8260), ECN, PMTU discovery (the PMTU is a
//! per-path setting), the primary-path-switchover variant of RFC 7829, and partial delivery
//! of messages larger than the receive buffer (such messages are refused by `send`).
//!
//! No `unsafe` code is used anywhere in this crate.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod assoc;
mod config;
mod cookie;
pub mod ddp_adapt;
mod endpoint;
pub mod fuzz;
mod init;
pub mod netsim_host;
mod path;
pub mod rng;
pub mod time;
pub mod wire;

pub use assoc::{
    AbortReason, Association, AssociationStats, Event, Message, PathError, SendError, State,
    Transmit,
};
pub use config::{AssociationConfig, CmtConfig, EndpointConfig, RtxPolicy, Scheduler};
pub use endpoint::{AssocId, ConnectError, Endpoint, EndpointStats};
pub use path::{PathState, PathStats};
pub use time::Instant;
