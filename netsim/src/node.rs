//! The seam between the simulator and whatever is attached to it.
//!
//! A [`Node`] is a sans-IO engine: it never reads a clock, never sleeps and never owns a
//! socket. The simulator owns virtual time and drives every node through four calls:
//!
//! - [`Node::handle_frame`]: an Ethernet frame arrived on one of the node's interfaces;
//! - [`Node::poll_transmit`]: called until it returns `None` after every call into the node,
//!   to collect the frames it wants to send and the interface for each;
//! - [`Node::poll_timeout`]: the next instant the node wants [`Node::handle_timeout`] called;
//! - [`Node::handle_timeout`]: that instant has come.
//!
//! An engine that in production runs under a progress thread fits the same shape: the thread
//! calls the same entry points with `now` taken from the real clock, and sleeps until
//! `poll_timeout` or until I/O is ready. In the simulator the caller-supplied clock is virtual
//! and the sleep is free. Nodes with several interfaces (a multihomed SCTP endpoint, a switch)
//! are addressed by a node-local interface index, `0..interface_count()`.
//!
//! # Example: a node that answers every frame on the interface it came from
//!
//! ```
//! use std::collections::VecDeque;
//! use netsim::testing::{probe_frame, Probe};
//! use netsim::{Instant, LinkParams, Node, Sim};
//!
//! struct Echo(VecDeque<(usize, Vec<u8>)>);
//!
//! impl Node for Echo {
//!     fn interface_count(&self) -> usize { 2 }
//!     fn handle_frame(&mut self, _now: Instant, iface: usize, frame: Vec<u8>) {
//!         self.0.push_back((iface, frame));
//!     }
//!     fn poll_transmit(&mut self, _now: Instant) -> Option<(usize, Vec<u8>)> {
//!         self.0.pop_front()
//!     }
//!     fn poll_timeout(&mut self) -> Option<Instant> { None }
//!     fn handle_timeout(&mut self, _now: Instant) {}
//! }
//!
//! let mut sim = Sim::new(1);
//! let echo = sim.add_node(Echo(VecDeque::new()));
//! let frame = probe_frame([2, 0, 0, 0, 0, 2], [2, 0, 0, 0, 0, 1], 7, 64);
//! let probe = sim.add_node(Probe::new(1).with_send(Instant::ZERO, 0, frame));
//! sim.link(probe.iface(0), echo.iface(1), LinkParams::default()).unwrap();
//! sim.run_until_idle();
//! assert_eq!(sim.node(probe).received_tags(), vec![7]);
//! // 64 bytes at 1 Gbit/s (512 ns) plus 50 µs, twice.
//! assert_eq!(sim.node(probe).received()[0].at, Instant::from_nanos(2 * 50_512));
//! ```

use core::any::Any;
use core::fmt;
use core::marker::PhantomData;

use crate::time::Instant;

/// Anything attached to the simulator: a host, a switch, a protocol engine.
///
/// Implementations must be deterministic given their inputs: the same sequence of calls with
/// the same arguments must lead to the same outputs (use a seeded generator, never OS
/// randomness or iteration over a `HashMap`).
pub trait Node: Any {
    /// How many interfaces the node has. Read once, when the node is added to a simulation;
    /// interface indices passed to and from the node are `0..interface_count()`.
    fn interface_count(&self) -> usize;

    /// A frame (a complete Ethernet frame without FCS) arrived on interface `iface`.
    fn handle_frame(&mut self, now: Instant, iface: usize, frame: Vec<u8>);

    /// The next frame to send, with the interface to send it on, or `None` when there is
    /// nothing more to send right now.
    fn poll_transmit(&mut self, now: Instant) -> Option<(usize, Vec<u8>)>;

    /// When the node next wants [`Node::handle_timeout`] to be called. An instant that has
    /// already passed means "as soon as possible"; `None` means "only when a frame arrives".
    fn poll_timeout(&mut self) -> Option<Instant>;

    /// The instant returned by [`Node::poll_timeout`] has been reached.
    fn handle_timeout(&mut self, now: Instant);

    /// The point-to-point link on `iface` went down (`up == false`) or came back. Nodes that
    /// track carrier state (for path failover) override this; the default ignores it.
    fn handle_link_change(&mut self, now: Instant, iface: usize, up: bool) {
        let _ = (now, iface, up);
    }
}

/// Identifies a node within one [`Sim`](crate::Sim).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(pub(crate) usize);

impl NodeId {
    /// The node's index, in the order nodes were added (starting at 0).
    pub fn index(self) -> usize {
        self.0
    }

    /// Interface `index` of this node.
    pub fn iface(self, index: usize) -> IfaceRef {
        IfaceRef { node: self, index }
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "node {}", self.0)
    }
}

/// One interface of one node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct IfaceRef {
    /// The node the interface belongs to.
    pub node: NodeId,
    /// The node-local interface index.
    pub index: usize,
}

impl fmt::Display for IfaceRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "node {} interface {}", self.node.0, self.index)
    }
}

/// A typed handle to a node: like [`NodeId`], but remembers the node's concrete type so that
/// [`Sim::node`](crate::Sim::node) can hand back a `&N` without a fallible downcast.
pub struct NodeHandle<N> {
    id: NodeId,
    _type: PhantomData<fn() -> N>,
}

impl<N> NodeHandle<N> {
    pub(crate) fn new(id: NodeId) -> Self {
        NodeHandle {
            id,
            _type: PhantomData,
        }
    }

    /// The untyped id.
    pub fn id(self) -> NodeId {
        self.id
    }

    /// Interface `index` of this node.
    pub fn iface(self, index: usize) -> IfaceRef {
        self.id.iface(index)
    }
}

impl<N> Clone for NodeHandle<N> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<N> Copy for NodeHandle<N> {}

impl<N> fmt::Debug for NodeHandle<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NodeHandle({})", self.id.0)
    }
}

impl<N> PartialEq for NodeHandle<N> {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}

impl<N> Eq for NodeHandle<N> {}

impl<N> From<NodeHandle<N>> for NodeId {
    fn from(h: NodeHandle<N>) -> NodeId {
        h.id
    }
}
