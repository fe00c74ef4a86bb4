//! The discrete-event core: clock, event queue, nodes, links and captures.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::time::Duration;

use thiserror::Error;

use crate::capture::{Capture, CaptureId, CapturePoint, Sink};
use crate::link::{CorruptScope, Dir, LinkCounters, LinkId, LinkParams, ParamError, QueueLimit};
use crate::node::{IfaceRef, Node, NodeHandle, NodeId};
use crate::rng::DetRng;
use crate::switch::Switch;
use crate::time::Instant;

/// Default for [`Sim::set_same_instant_limit`].
pub const DEFAULT_SAME_INSTANT_LIMIT: u64 = 10_000_000;

/// ChaCha stream numbers at and above this are used by [`Sim::derive_seed`]; link directions
/// use the streams below it.
const DERIVED_STREAM_BASE: u64 = 1 << 62;

/// What went wrong setting up or changing a simulation.
#[derive(Debug, Error)]
pub enum SimError {
    /// A node id that this simulation did not hand out.
    #[error("{node} does not exist: this simulation has {count} nodes")]
    NoSuchNode {
        /// The id given.
        node: NodeId,
        /// How many nodes exist.
        count: usize,
    },
    /// An interface index past the node's interface count.
    #[error("{iface} does not exist: that node has {count} interfaces")]
    NoSuchInterface {
        /// The interface given.
        iface: IfaceRef,
        /// How many interfaces the node has.
        count: usize,
    },
    /// The interface already has a link; an interface takes exactly one.
    #[error("{iface} is already attached to link {}; use a Switch to join more than two interfaces", .link.index())]
    InterfaceInUse {
        /// The interface given.
        iface: IfaceRef,
        /// The link already attached to it.
        link: LinkId,
    },
    /// Both ends of a link are the same interface.
    #[error("a link needs two different interfaces, got {0} twice")]
    SelfLink(IfaceRef),
    /// A link id that this simulation did not hand out.
    #[error("link {} does not exist: this simulation has {count} links", .link.index())]
    NoSuchLink {
        /// The id given.
        link: LinkId,
        /// How many links exist.
        count: usize,
    },
    /// A capture id that this simulation did not hand out.
    #[error("capture {0} does not exist")]
    NoSuchCapture(usize),
    /// Link parameters out of range.
    #[error(transparent)]
    Params(#[from] ParamError),
    /// An action scheduled before the current virtual time.
    #[error("cannot schedule an action at {at}: the simulation is already at {now}")]
    InThePast {
        /// The instant asked for.
        at: Instant,
        /// The current virtual time.
        now: Instant,
    },
    /// A capture file could not be created or written.
    #[error("capture {path}: {message}")]
    Capture {
        /// The file, or `<memory>`/`<writer>`.
        path: String,
        /// What failed.
        message: String,
    },
}

/// A change to the network scheduled for a given virtual time.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Take a link down (both directions): queued and in-flight frames are dropped, new frames
    /// are dropped. For a one-way failure set `loss: 1.0` on one direction with
    /// [`Action::SetParams`] instead.
    LinkDown(LinkId),
    /// Bring a link back up.
    LinkUp(LinkId),
    /// Replace the parameters of one direction (`Some`) or both (`None`) of a link. Frames
    /// already queued stay queued; the new values apply from the next frame serialised.
    SetParams {
        /// The link.
        link: LinkId,
        /// The direction, or both.
        dir: Option<Dir>,
        /// The new parameters.
        params: LinkParams,
    },
}

/// Where a capture writes to.
pub enum CaptureSink {
    /// A pcap file, created (or truncated) now.
    File(PathBuf),
    /// A buffer returned by [`Sim::finish_capture`].
    Memory,
    /// Any writer.
    Writer(Box<dyn Write>),
}

enum EventKind {
    /// A frame finished serialising on `link` in direction `dir`.
    TxDone {
        link: usize,
        dir: Dir,
        epoch: u64,
        frame: Vec<u8>,
    },
    /// A frame reaches the far end of `link`.
    Arrival {
        link: usize,
        dir: Dir,
        epoch: u64,
        frame: Vec<u8>,
    },
    /// A node's timer, valid only if `generation` is still the node's current one.
    Timer { node: usize, generation: u64 },
    /// A scheduled change.
    Action(Action),
}

struct Event {
    at: Instant,
    seq: u64,
    kind: EventKind,
}

impl PartialEq for Event {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Event {
    /// Reversed, so that the max-heap pops the earliest (time, sequence) first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

struct NodeSlot {
    node: Box<dyn Node>,
    /// Per interface: the link and the direction this interface transmits in.
    ports: Vec<Option<(usize, Dir)>>,
    /// The armed timer: deadline and generation.
    timer: Option<(Instant, u64)>,
    generation: u64,
    dirty: bool,
    unattached_drops: u64,
}

struct DirState {
    params: LinkParams,
    queue: VecDeque<Vec<u8>>,
    queued_bytes: usize,
    busy: bool,
    ge_bad: bool,
    last_arrival: Instant,
    counters: LinkCounters,
    rng: DetRng,
}

struct Link {
    /// `ends[0]` transmits in `AtoB`, `ends[1]` in `BtoA`.
    ends: [IfaceRef; 2],
    dirs: [DirState; 2],
    up: bool,
    epoch: u64,
    captures: Vec<usize>,
}

/// A deterministic network simulation.
///
/// ```
/// use netsim::{LinkParams, Sim, Switch};
/// use std::time::Duration;
///
/// let mut sim = Sim::new(7);
/// let sw = sim.add_switch(2);
/// let other = sim.add_switch(1);
/// let l = sim
///     .link(sw.iface(0), other.iface(0), LinkParams::default().delay(Duration::from_millis(1)))
///     .unwrap();
/// sim.run_until_idle();
/// assert_eq!(sim.link_counters(l, netsim::Dir::AtoB).sent, 0);
/// ```
pub struct Sim {
    seed: u64,
    now: Instant,
    seq: u64,
    queue: BinaryHeap<Event>,
    nodes: Vec<NodeSlot>,
    links: Vec<Link>,
    captures: Vec<Capture>,
    dirty: Vec<usize>,
    events: u64,
    same_instant: u64,
    same_instant_limit: u64,
}

impl Sim {
    /// An empty simulation at time zero. Every random decision derives from `seed`.
    pub fn new(seed: u64) -> Sim {
        Sim {
            seed,
            now: Instant::ZERO,
            seq: 0,
            queue: BinaryHeap::new(),
            nodes: Vec::new(),
            links: Vec::new(),
            captures: Vec::new(),
            dirty: Vec::new(),
            events: 0,
            same_instant: 0,
            same_instant_limit: DEFAULT_SAME_INSTANT_LIMIT,
        }
    }

    /// The seed the simulation was created with.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The current virtual time.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// A 64-bit value derived from the simulation seed and `label`, for seeding a node's own
    /// generator (e.g. [`TcpHostConfig::seed`](crate::tcp::TcpHostConfig::seed)). The same
    /// seed and label always give the same value; different labels give unrelated values.
    pub fn derive_seed(&self, label: u64) -> u64 {
        DetRng::new(
            self.seed,
            DERIVED_STREAM_BASE | (label & (DERIVED_STREAM_BASE - 1)),
        )
        .next_u64()
    }

    /// How many events have been processed so far.
    pub fn events_processed(&self) -> u64 {
        self.events
    }

    /// Sets how many events may be processed without virtual time advancing before the
    /// simulation gives up with a panic (a node asking to be woken "now" forever, or frames
    /// bouncing over zero-delay links without end). Default [`DEFAULT_SAME_INSTANT_LIMIT`].
    pub fn set_same_instant_limit(&mut self, limit: u64) {
        self.same_instant_limit = limit;
    }

    // ----------------------------------------------------------------------------------------
    // Topology
    // ----------------------------------------------------------------------------------------

    /// Adds a node. It is first polled (for frames and its timer) when the simulation next
    /// runs.
    pub fn add_node<N: Node>(&mut self, node: N) -> NodeHandle<N> {
        let id = self.nodes.len();
        let ports = vec![None; node.interface_count()];
        self.nodes.push(NodeSlot {
            node: Box::new(node),
            ports,
            timer: None,
            generation: 0,
            dirty: false,
            unattached_drops: 0,
        });
        self.mark_dirty(id);
        NodeHandle::new(NodeId(id))
    }

    /// Adds a learning [`Switch`] with `ports` ports.
    pub fn add_switch(&mut self, ports: usize) -> NodeHandle<Switch> {
        self.add_node(Switch::new(ports))
    }

    /// The node behind a typed handle.
    ///
    /// # Panics
    /// If the handle was issued by a different simulation (wrong index or type).
    pub fn node<N: Node>(&self, h: NodeHandle<N>) -> &N {
        let slot = self
            .nodes
            .get(h.id().0)
            .expect("node handle from another simulation");
        let any: &dyn core::any::Any = &*slot.node;
        any.downcast_ref::<N>()
            .expect("node handle from another simulation")
    }

    /// Mutable access to a node, e.g. to give its application work. The node is polled again
    /// (frames to send, timer) before the simulation processes its next event.
    ///
    /// # Panics
    /// If the handle was issued by a different simulation (wrong index or type).
    pub fn node_mut<N: Node>(&mut self, h: NodeHandle<N>) -> &mut N {
        let id = h.id().0;
        assert!(id < self.nodes.len(), "node handle from another simulation");
        self.mark_dirty(id);
        let any: &mut dyn core::any::Any = &mut *self.nodes[id].node;
        any.downcast_mut::<N>()
            .expect("node handle from another simulation")
    }

    /// Frames a node sent on an interface that has no link (they are discarded).
    pub fn unattached_drops(&self, id: NodeId) -> u64 {
        self.nodes.get(id.0).map_or(0, |s| s.unattached_drops)
    }

    /// Connects two interfaces with a link whose two directions share `params`.
    pub fn link(
        &mut self,
        a: IfaceRef,
        b: IfaceRef,
        params: LinkParams,
    ) -> Result<LinkId, SimError> {
        self.link_asymmetric(a, b, params.clone(), params)
    }

    /// Connects two interfaces; `a_to_b` applies to frames sent by `a`, `b_to_a` to frames
    /// sent by `b`.
    pub fn link_asymmetric(
        &mut self,
        a: IfaceRef,
        b: IfaceRef,
        a_to_b: LinkParams,
        b_to_a: LinkParams,
    ) -> Result<LinkId, SimError> {
        if a == b {
            return Err(SimError::SelfLink(a));
        }
        a_to_b.validate()?;
        b_to_a.validate()?;
        for end in [a, b] {
            let slot = self.nodes.get(end.node.0).ok_or(SimError::NoSuchNode {
                node: end.node,
                count: self.nodes.len(),
            })?;
            match slot.ports.get(end.index) {
                None => {
                    return Err(SimError::NoSuchInterface {
                        iface: end,
                        count: slot.ports.len(),
                    });
                }
                Some(Some((link, _))) => {
                    return Err(SimError::InterfaceInUse {
                        iface: end,
                        link: LinkId(*link),
                    });
                }
                Some(None) => {}
            }
        }
        let index = self.links.len();
        let dir_state = |params: LinkParams, dir: Dir| DirState {
            params,
            queue: VecDeque::new(),
            queued_bytes: 0,
            busy: false,
            ge_bad: false,
            last_arrival: Instant::ZERO,
            counters: LinkCounters::default(),
            rng: DetRng::new(self.seed, (index as u64) * 2 + dir.index() as u64),
        };
        let link = Link {
            ends: [a, b],
            dirs: [dir_state(a_to_b, Dir::AtoB), dir_state(b_to_a, Dir::BtoA)],
            up: true,
            epoch: 0,
            captures: Vec::new(),
        };
        self.links.push(link);
        self.nodes[a.node.0].ports[a.index] = Some((index, Dir::AtoB));
        self.nodes[b.node.0].ports[b.index] = Some((index, Dir::BtoA));
        Ok(LinkId(index))
    }

    /// The link attached to an interface and the direction that interface sends in.
    pub fn interface_link(&self, iface: IfaceRef) -> Option<(LinkId, Dir)> {
        let (link, dir) = (*self.nodes.get(iface.node.0)?.ports.get(iface.index)?)?;
        Some((LinkId(link), dir))
    }

    /// Counters of one direction of a link.
    ///
    /// # Panics
    /// If the link id was issued by a different simulation.
    pub fn link_counters(&self, link: LinkId, dir: Dir) -> LinkCounters {
        self.links[link.0].dirs[dir.index()].counters
    }

    /// Current parameters of one direction of a link.
    ///
    /// # Panics
    /// If the link id was issued by a different simulation.
    pub fn link_params(&self, link: LinkId, dir: Dir) -> &LinkParams {
        &self.links[link.0].dirs[dir.index()].params
    }

    /// Whether a link is up.
    ///
    /// # Panics
    /// If the link id was issued by a different simulation.
    pub fn is_link_up(&self, link: LinkId) -> bool {
        self.links[link.0].up
    }

    fn link_ref(&self, link: LinkId) -> Result<&Link, SimError> {
        self.links.get(link.0).ok_or(SimError::NoSuchLink {
            link,
            count: self.links.len(),
        })
    }

    // ----------------------------------------------------------------------------------------
    // Scheduled and immediate changes
    // ----------------------------------------------------------------------------------------

    /// Schedules `action` at virtual time `at` (which may be now, not earlier). Actions at the
    /// same instant happen in the order they were scheduled.
    pub fn schedule(&mut self, at: Instant, action: Action) -> Result<(), SimError> {
        if at < self.now {
            return Err(SimError::InThePast { at, now: self.now });
        }
        self.check_action(&action)?;
        self.push(at, EventKind::Action(action));
        Ok(())
    }

    /// Schedules a link to go down at `at`.
    pub fn link_down_at(&mut self, link: LinkId, at: Instant) -> Result<(), SimError> {
        self.schedule(at, Action::LinkDown(link))
    }

    /// Schedules a link to come up at `at`.
    pub fn link_up_at(&mut self, link: LinkId, at: Instant) -> Result<(), SimError> {
        self.schedule(at, Action::LinkUp(link))
    }

    /// Schedules new parameters for one direction (or both, `None`) of a link at `at`.
    pub fn set_params_at(
        &mut self,
        link: LinkId,
        dir: Option<Dir>,
        at: Instant,
        params: LinkParams,
    ) -> Result<(), SimError> {
        self.schedule(at, Action::SetParams { link, dir, params })
    }

    /// Applies `action` immediately.
    pub fn apply(&mut self, action: Action) -> Result<(), SimError> {
        self.check_action(&action)?;
        self.do_action(action);
        Ok(())
    }

    fn check_action(&self, action: &Action) -> Result<(), SimError> {
        match action {
            Action::LinkDown(l) | Action::LinkUp(l) => self.link_ref(*l).map(|_| ()),
            Action::SetParams { link, params, .. } => {
                self.link_ref(*link)?;
                params.validate().map_err(SimError::from)
            }
        }
    }

    // ----------------------------------------------------------------------------------------
    // Captures
    // ----------------------------------------------------------------------------------------

    /// Captures both directions of `link`, as received, into a pcap file at `path`.
    pub fn capture(
        &mut self,
        link: LinkId,
        path: impl Into<PathBuf>,
    ) -> Result<CaptureId, SimError> {
        self.capture_with(link, CaptureSink::File(path.into()), CapturePoint::Receive)
    }

    /// Captures both directions of `link`, as received, into memory; see
    /// [`Sim::finish_capture`].
    pub fn capture_in_memory(&mut self, link: LinkId) -> Result<CaptureId, SimError> {
        self.capture_with(link, CaptureSink::Memory, CapturePoint::Receive)
    }

    /// Captures both directions of `link` at `point` into `sink`. Several captures of one link
    /// may be open at once.
    pub fn capture_with(
        &mut self,
        link: LinkId,
        sink: CaptureSink,
        point: CapturePoint,
    ) -> Result<CaptureId, SimError> {
        self.link_ref(link)?;
        let (name, sink) = match sink {
            CaptureSink::File(path) => {
                let name = path.display().to_string();
                let file = File::create(&path).map_err(|e| SimError::Capture {
                    path: name.clone(),
                    message: e.to_string(),
                })?;
                (name, Sink::File(BufWriter::new(file)))
            }
            CaptureSink::Memory => ("<memory>".to_string(), Sink::Memory(Vec::new())),
            CaptureSink::Writer(w) => ("<writer>".to_string(), Sink::Writer(w)),
        };
        let capture = Capture::new(link.0, point, sink).map_err(|message| SimError::Capture {
            path: name,
            message,
        })?;
        let id = self.captures.len();
        self.captures.push(capture);
        self.links[link.0].captures.push(id);
        Ok(CaptureId(id))
    }

    /// Stops a capture and flushes it. Returns the pcap bytes of a memory capture (empty for
    /// files and writers).
    pub fn finish_capture(&mut self, id: CaptureId) -> Result<Vec<u8>, SimError> {
        let capture = self
            .captures
            .get_mut(id.0)
            .ok_or(SimError::NoSuchCapture(id.0))?;
        let link = capture.link;
        let result = capture.finish().map_err(|message| SimError::Capture {
            path: format!("#{}", id.0),
            message,
        });
        self.links[link].captures.retain(|&c| c != id.0);
        result
    }

    // ----------------------------------------------------------------------------------------
    // Running
    // ----------------------------------------------------------------------------------------

    /// Processes the next event. Returns `false` if there was none.
    pub fn step(&mut self) -> bool {
        self.service_dirty();
        let Some(event) = self.queue.pop() else {
            return false;
        };
        self.process(event);
        self.service_dirty();
        true
    }

    /// Processes every event up to and including `t`, then sets the clock to `t` (if it is
    /// later than now).
    pub fn run_until(&mut self, t: Instant) {
        self.service_dirty();
        while self.queue.peek().is_some_and(|e| e.at <= t) {
            self.step();
        }
        if t > self.now {
            self.now = t;
        }
    }

    /// Runs for `d` of virtual time from now.
    pub fn run_for(&mut self, d: Duration) {
        let t = self.now + d;
        self.run_until(t);
    }

    /// Runs until no event is pending. Never returns if some node keeps a periodic timer; use
    /// [`Sim::run_until_condition`] or [`Sim::run_until`] then.
    pub fn run_until_idle(&mut self) -> Instant {
        while self.step() {}
        self.now
    }

    /// Runs until `done(self)` holds (checked before the first event and after each one) or
    /// virtual time would pass `deadline`. Returns whether `done` held; on `false` the clock
    /// is left at `deadline`.
    pub fn run_until_condition(
        &mut self,
        deadline: Instant,
        mut done: impl FnMut(&Sim) -> bool,
    ) -> bool {
        self.service_dirty();
        loop {
            if done(self) {
                return true;
            }
            if self.queue.peek().is_none_or(|e| e.at > deadline) {
                break;
            }
            self.step();
        }
        if deadline > self.now {
            self.now = deadline;
        }
        false
    }

    // ----------------------------------------------------------------------------------------
    // Internals
    // ----------------------------------------------------------------------------------------

    fn push(&mut self, at: Instant, kind: EventKind) {
        let seq = self.seq;
        self.seq += 1;
        self.queue.push(Event { at, seq, kind });
    }

    fn mark_dirty(&mut self, node: usize) {
        if let Some(slot) = self.nodes.get_mut(node)
            && !slot.dirty
        {
            slot.dirty = true;
            self.dirty.push(node);
        }
    }

    fn service_dirty(&mut self) {
        while !self.dirty.is_empty() {
            let dirty = std::mem::take(&mut self.dirty);
            for node in dirty {
                self.nodes[node].dirty = false;
                self.service(node);
            }
        }
    }

    fn process(&mut self, event: Event) {
        if event.at == self.now {
            self.same_instant += 1;
            if self.same_instant > self.same_instant_limit {
                panic!(
                    "netsim: {} events at {} without time advancing; a node keeps asking to be \
                     woken now, or frames circulate over zero-delay links",
                    self.same_instant, self.now
                );
            }
        } else {
            self.same_instant = 0;
        }
        self.now = self.now.max(event.at);
        self.events += 1;
        match event.kind {
            EventKind::TxDone {
                link,
                dir,
                epoch,
                frame,
            } => self.tx_done(link, dir, epoch, frame),
            EventKind::Arrival {
                link,
                dir,
                epoch,
                frame,
            } => self.arrival(link, dir, epoch, frame),
            EventKind::Timer { node, generation } => {
                let slot = &mut self.nodes[node];
                if slot.timer.is_some_and(|(_, g)| g == generation) {
                    slot.timer = None;
                    slot.node.handle_timeout(self.now);
                    self.service(node);
                }
            }
            EventKind::Action(action) => self.do_action(action),
        }
    }

    /// Collects a node's outgoing frames and re-arms its timer.
    fn service(&mut self, node: usize) {
        let now = self.now;
        let slot = &mut self.nodes[node];
        let mut out = Vec::new();
        while let Some(tx) = slot.node.poll_transmit(now) {
            out.push(tx);
        }
        let deadline = slot.node.poll_timeout().map(|t| t.max(now));
        match deadline {
            None => slot.timer = None,
            Some(t) if slot.timer.is_some_and(|(armed, _)| armed == t) => {}
            Some(t) => {
                slot.generation += 1;
                let generation = slot.generation;
                slot.timer = Some((t, generation));
                self.push(t, EventKind::Timer { node, generation });
            }
        }
        for (port, frame) in out {
            match self.nodes[node].ports.get(port).copied().flatten() {
                Some((link, dir)) => self.offer(link, dir, frame),
                None => self.nodes[node].unattached_drops += 1,
            }
        }
    }

    fn record(&mut self, link: usize, point: CapturePoint, frame: &[u8]) {
        let now = self.now;
        for &c in &self.links[link].captures {
            let capture = &mut self.captures[c];
            if capture.point == point {
                capture.record(now, frame);
            }
        }
    }

    /// A node hands a frame to a link direction.
    fn offer(&mut self, link: usize, dir: Dir, frame: Vec<u8>) {
        self.record(link, CapturePoint::Transmit, &frame);
        let now = self.now;
        let l = &mut self.links[link];
        let up = l.up;
        let epoch = l.epoch;
        let d = &mut l.dirs[dir.index()];
        d.counters.sent += 1;
        d.counters.sent_bytes += frame.len() as u64;
        if !up {
            d.counters.dropped_down += 1;
            return;
        }
        if frame.len() > d.params.max_frame_len() {
            d.counters.dropped_mtu += 1;
            return;
        }
        if d.busy {
            let fits = match d.params.queue_limit {
                QueueLimit::Packets(n) => d.queue.len() < n,
                QueueLimit::Bytes(n) => d.queued_bytes.saturating_add(frame.len()) <= n,
                QueueLimit::Unlimited => true,
            };
            if fits {
                d.queued_bytes += frame.len();
                d.queue.push_back(frame);
            } else {
                d.counters.dropped_queue += 1;
            }
            return;
        }
        d.busy = true;
        let done = now + d.params.serialisation_time(frame.len());
        self.push(
            done,
            EventKind::TxDone {
                link,
                dir,
                epoch,
                frame,
            },
        );
    }

    fn tx_done(&mut self, link: usize, dir: Dir, epoch: u64, mut frame: Vec<u8>) {
        let now = self.now;
        let l = &mut self.links[link];
        let d = &mut l.dirs[dir.index()];
        if epoch != l.epoch {
            // Serialisation was cut short by the link going down.
            d.counters.dropped_down += 1;
            return;
        }
        // Start on the next queued frame.
        let mut events = Vec::with_capacity(3);
        if let Some(next) = d.queue.pop_front() {
            d.queued_bytes -= next.len();
            let done = now + d.params.serialisation_time(next.len());
            events.push((
                done,
                EventKind::TxDone {
                    link,
                    dir,
                    epoch,
                    frame: next,
                },
            ));
        } else {
            d.busy = false;
        }

        // Impairments.
        let p = &d.params;
        let mut lost = false;
        if let Some(ge) = p.gilbert_elliott {
            let leave = if d.ge_bad { ge.r } else { ge.p };
            if d.rng.chance(leave) {
                d.ge_bad = !d.ge_bad;
            }
            let loss = if d.ge_bad { ge.loss_bad } else { ge.loss_good };
            if d.rng.chance(loss) {
                d.counters.dropped_burst += 1;
                lost = true;
            }
        }
        if !lost && d.rng.chance(p.loss) {
            d.counters.dropped_loss += 1;
            lost = true;
        }
        if !lost {
            if d.rng.chance(p.corrupt) {
                // The byte range that may be hit.
                let (start, end) = match p.corrupt_scope {
                    CorruptScope::Frame => (p.corrupt_offset, frame.len()),
                    CorruptScope::PayloadFixChecksums => {
                        crate::wire::ipv4_layout(&frame).map_or((0, 0), |l| {
                            (
                                l.payload.start.saturating_add(p.corrupt_offset),
                                l.payload.end,
                            )
                        })
                    }
                };
                let bits = (end.saturating_sub(start) as u64).saturating_mul(8);
                let flips = u64::from(p.corrupt_bits.max(1)).min(bits);
                let mut flipped = std::collections::BTreeSet::new();
                while (flipped.len() as u64) < flips {
                    flipped.insert(d.rng.below(bits));
                }
                for &bit in &flipped {
                    let byte = start + (bit / 8) as usize;
                    if let Some(b) = frame.get_mut(byte) {
                        *b ^= 1 << (bit % 8);
                    }
                }
                if !flipped.is_empty() {
                    d.counters.corrupted += 1;
                    if p.corrupt_scope == CorruptScope::PayloadFixChecksums {
                        crate::wire::fix_checksums(&mut frame);
                    }
                }
            }
            let duplicate = d.rng.chance(p.duplicate);
            let base = now + p.delay;
            let jitter = p.jitter_nanos();
            let draw_jitter = |rng: &mut DetRng| {
                if jitter == 0 {
                    Duration::ZERO
                } else {
                    Duration::from_nanos(rng.below(jitter.saturating_add(1)))
                }
            };
            let mut at = base + draw_jitter(&mut d.rng);
            if d.rng.chance(p.reorder) {
                at += p.reorder_delay;
                d.counters.reordered += 1;
            } else {
                at = at.max(d.last_arrival);
                d.last_arrival = at;
            }
            let arrival = |frame| EventKind::Arrival {
                link,
                dir,
                epoch,
                frame,
            };
            let copy = duplicate.then(|| frame.clone());
            events.push((at, arrival(frame)));
            if let Some(copy) = copy {
                d.counters.duplicated += 1;
                let at = (base + draw_jitter(&mut d.rng)).max(d.last_arrival);
                d.last_arrival = at;
                events.push((at, arrival(copy)));
            }
        }
        for (at, kind) in events {
            self.push(at, kind);
        }
    }

    fn arrival(&mut self, link: usize, dir: Dir, epoch: u64, frame: Vec<u8>) {
        let l = &mut self.links[link];
        let d = &mut l.dirs[dir.index()];
        if epoch != l.epoch {
            d.counters.dropped_down += 1;
            return;
        }
        d.counters.delivered += 1;
        d.counters.delivered_bytes += frame.len() as u64;
        let to = l.ends[1 - dir.index()];
        self.record(link, CapturePoint::Receive, &frame);
        let now = self.now;
        self.nodes[to.node.0]
            .node
            .handle_frame(now, to.index, frame);
        self.service(to.node.0);
    }

    fn do_action(&mut self, action: Action) {
        match action {
            Action::LinkDown(link) => self.set_link_state(link.0, false),
            Action::LinkUp(link) => self.set_link_state(link.0, true),
            Action::SetParams { link, dir, params } => {
                let l = &mut self.links[link.0];
                for d in Dir::BOTH
                    .into_iter()
                    .filter(|d| dir.is_none_or(|x| x == *d))
                {
                    let state = &mut l.dirs[d.index()];
                    if params.gilbert_elliott.is_none() {
                        state.ge_bad = false;
                    }
                    state.params = params.clone();
                }
            }
        }
    }

    fn set_link_state(&mut self, link: usize, up: bool) {
        let l = &mut self.links[link];
        if l.up == up {
            return;
        }
        l.up = up;
        if !up {
            l.epoch += 1;
            for d in &mut l.dirs {
                d.counters.dropped_down += d.queue.len() as u64;
                d.queue.clear();
                d.queued_bytes = 0;
                d.busy = false;
                // Frames on the wire are gone; do not hold new ones back behind them.
                d.last_arrival = Instant::ZERO;
            }
        }
        let ends = l.ends;
        let now = self.now;
        for end in ends {
            self.nodes[end.node.0]
                .node
                .handle_link_change(now, end.index, up);
            self.service(end.node.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A simulation of two one-port switches joined by a default link.
    fn two_linked_switches() -> (Sim, LinkId) {
        let mut sim = Sim::new(0);
        let a = sim.add_switch(1);
        let b = sim.add_switch(1);
        let l = sim
            .link(a.iface(0), b.iface(0), LinkParams::default())
            .unwrap();
        (sim, l)
    }

    /// Fires at the instants in `deadlines` and records when it was called.
    #[derive(Default)]
    struct Ticker {
        deadlines: Vec<Instant>,
        fired: Vec<Instant>,
    }

    impl Node for Ticker {
        fn interface_count(&self) -> usize {
            0
        }
        fn handle_frame(&mut self, _: Instant, _: usize, _: Vec<u8>) {}
        fn poll_transmit(&mut self, _: Instant) -> Option<(usize, Vec<u8>)> {
            None
        }
        fn poll_timeout(&mut self) -> Option<Instant> {
            self.deadlines.iter().min().copied()
        }
        fn handle_timeout(&mut self, now: Instant) {
            self.fired.push(now);
            self.deadlines.retain(|&d| d > now);
        }
    }

    #[test]
    fn timers_fire_in_order_and_stale_ones_are_ignored() {
        let mut sim = Sim::new(0);
        let t = sim.add_node(Ticker {
            deadlines: vec![Instant::from_millis(5), Instant::from_millis(2)],
            ..Ticker::default()
        });
        sim.run_until(Instant::from_millis(1));
        // Move the 2 ms deadline to 3 ms: the event armed for 2 ms must not fire.
        sim.node_mut(t).deadlines = vec![Instant::from_millis(3), Instant::from_millis(5)];
        sim.run_until_idle();
        assert_eq!(
            sim.node(t).fired,
            vec![Instant::from_millis(3), Instant::from_millis(5)]
        );
        assert_eq!(sim.now(), Instant::from_millis(5));
    }

    #[test]
    fn past_deadlines_fire_now() {
        let mut sim = Sim::new(0);
        sim.run_until(Instant::from_millis(10));
        let t = sim.add_node(Ticker {
            deadlines: vec![Instant::ZERO],
            ..Ticker::default()
        });
        sim.run_until_idle();
        assert_eq!(sim.node(t).fired, vec![Instant::from_millis(10)]);
    }

    #[test]
    fn actions_at_one_instant_run_in_schedule_order() {
        let (mut sim, l) = two_linked_switches();
        let at = Instant::from_millis(1);
        sim.link_down_at(l, at).unwrap();
        sim.link_up_at(l, at).unwrap();
        sim.link_down_at(l, at).unwrap();
        sim.run_until(at);
        assert!(!sim.is_link_up(l));
    }

    /// Asks to be woken "now" forever.
    struct Spinner;

    impl Node for Spinner {
        fn interface_count(&self) -> usize {
            0
        }
        fn handle_frame(&mut self, _: Instant, _: usize, _: Vec<u8>) {}
        fn poll_transmit(&mut self, _: Instant) -> Option<(usize, Vec<u8>)> {
            None
        }
        fn poll_timeout(&mut self) -> Option<Instant> {
            Some(Instant::ZERO)
        }
        fn handle_timeout(&mut self, _: Instant) {}
    }

    #[test]
    #[should_panic(expected = "without time advancing")]
    fn a_node_that_never_lets_time_advance_is_reported() {
        let mut sim = Sim::new(0);
        sim.set_same_instant_limit(1000);
        sim.add_node(Spinner);
        sim.run_until(Instant::from_millis(1));
    }

    #[test]
    fn derived_seeds_depend_on_seed_and_label() {
        let sim = Sim::new(5);
        assert_eq!(sim.derive_seed(1), Sim::new(5).derive_seed(1));
        assert_ne!(sim.derive_seed(1), sim.derive_seed(2));
        assert_ne!(sim.derive_seed(1), Sim::new(6).derive_seed(1));
    }

    #[test]
    fn memory_capture_starts_with_a_nanosecond_ethernet_pcap_header() {
        let (mut sim, l) = two_linked_switches();
        let c = sim.capture_in_memory(l).unwrap();
        let bytes = sim.finish_capture(c).unwrap();
        // Little-endian nanosecond magic, version 2.4, link type 1 (Ethernet).
        assert_eq!(&bytes[..8], &[0x4d, 0x3c, 0xb2, 0xa1, 2, 0, 4, 0]);
        assert_eq!(&bytes[20..24], &[1, 0, 0, 0]);
        assert_eq!(bytes.len(), 24);
        assert!(matches!(
            sim.finish_capture(c),
            Err(SimError::Capture { .. })
        ));
    }
}
