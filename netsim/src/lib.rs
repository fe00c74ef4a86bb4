//! A deterministic discrete-event network simulator.
//!
//! Loss, failover and multipath behaviour are hard to reproduce on a real network. In this
//! simulator the project's own sans-IO protocol code runs unchanged in virtual time, and a run
//! is a pure function of its seed and its set-up: the same seed gives byte-identical captures.
//!
//! # Design
//!
//! - **Virtual time** ([`Instant`], nanoseconds) and one **event queue**, a binary heap keyed by
//!   `(time, sequence number)`, so events at the same instant run in the order they were
//!   created.
//! - **Randomness** comes from one seed: each link direction draws from its own ChaCha8 stream
//!   of that seed ([`DetRng`]), so traffic on one link does not perturb another link's loss
//!   pattern. Nothing iterates a hash map.
//! - **Nodes** ([`Node`]) are sans-IO engines with any number of interfaces: the simulator
//!   hands them frames and timeouts and collects frames and the next deadline. A [`Switch`]
//!   is a node; so is a [`TcpHost`](tcp::TcpHost), which runs a smoltcp TCP/IP stack over an
//!   in-memory device and calls an application hook ([`TcpApp`](tcp::TcpApp)).
//! - **Links** join two interfaces. Each direction has its own [`LinkParams`]: bandwidth,
//!   delay, jitter, MTU, queue limit, i.i.d. and Gilbert–Elliott loss, duplication, reordering
//!   and corruption (optionally confined to the transport payload with checksums repaired,
//!   [`CorruptScope`], so that it reaches the application protocol), plus [`LinkCounters`]. Links go down and up, and parameters change, at
//!   scheduled times ([`Action`]). The exact model is described in [`link`].
//! - **Captures** record a link into a pcap file or buffer with virtual timestamps
//!   ([`Sim::capture`]).
//!
//! - [`testing`] has ready-made nodes and applications: a scripted frame [`Probe`](testing::Probe)
//!   and a pattern-checking TCP bulk sender and receiver.
//!
//! # Example
//!
//! Two smoltcp hosts on a lossy 1 ms link; the client says hello, the server collects it.
//!
//! ```
//! use std::cell::RefCell;
//! use std::net::SocketAddrV4;
//! use std::rc::Rc;
//! use std::time::Duration;
//! use netsim::tcp::{TcpCtx, TcpHost, TcpHostConfig};
//! use netsim::{Instant, LinkParams, Sim};
//!
//! let mut sim = Sim::new(1);
//! let server_cfg = TcpHostConfig::numbered(2);
//! let server_addr = SocketAddrV4::new(server_cfg.addr, 7);
//!
//! let received = Rc::new(RefCell::new(Vec::new()));
//! let sink = received.clone();
//! let mut listener = None;
//! let server = move |cx: &mut TcpCtx<'_>| {
//!     let h = *listener.get_or_insert_with(|| {
//!         let h = cx.new_socket();
//!         cx.listen(h, 7).unwrap();
//!         h
//!     });
//!     let s = cx.socket(h);
//!     if s.can_recv() {
//!         let take = |d: &mut [u8]| {
//!             sink.borrow_mut().extend_from_slice(d);
//!             (d.len(), ())
//!         };
//!         s.recv(take).unwrap();
//!     }
//! };
//!
//! let mut conn = None;
//! let mut sent = false;
//! let client = move |cx: &mut TcpCtx<'_>| {
//!     let h = *conn.get_or_insert_with(|| {
//!         let h = cx.new_socket();
//!         cx.connect(h, server_addr, 40000).unwrap();
//!         h
//!     });
//!     let s = cx.socket(h);
//!     if s.can_send() && !sent {
//!         sent = s.send_slice(b"hello") == Ok(5);
//!     }
//! };
//!
//! let srv = sim.add_node(TcpHost::new(server_cfg, server));
//! let cli = sim.add_node(TcpHost::new(TcpHostConfig::numbered(1), client));
//! let params = LinkParams::default().delay(Duration::from_millis(1)).loss(0.05);
//! let link = sim.link(cli.iface(0), srv.iface(0), params).unwrap();
//! let pcap = sim.capture_in_memory(link).unwrap();
//! let done = sim.run_until_condition(Instant::from_secs(30), |_| received.borrow().len() == 5);
//! assert!(done);
//! assert_eq!(&received.borrow()[..], b"hello");
//! assert!(sim.finish_capture(pcap).unwrap().len() > 24 + 5 * 60);
//! ```
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod capture;
pub mod link;
pub mod node;
pub mod rng;
pub mod sim;
pub mod switch;
pub mod tcp;
pub mod testing;
pub mod time;
pub mod wire;

pub use capture::{CaptureId, CapturePoint};
pub use link::{
    CorruptScope, Dir, GilbertElliott, LinkCounters, LinkId, LinkParams, ParamError, QueueLimit,
};
pub use node::{IfaceRef, Node, NodeHandle, NodeId};
pub use rng::DetRng;
pub use sim::{Action, CaptureSink, Sim, SimError};
pub use std::time::Duration;
pub use switch::{Switch, SwitchCounters};
pub use time::Instant;
