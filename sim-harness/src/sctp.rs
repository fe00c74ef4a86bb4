//! RDMA over SCTP (RFC 5043) in the simulator: two hosts with one interface per path, each
//! interface on a point-to-point link to the peer's ([`sctp::netsim_host::SctpHost`]), the QP
//! engine over the SCTP LLP on each ([`stack::Setup::SctpInitiator`] /
//! [`stack::Setup::SctpResponder`]).
//!
//! # Workload and accounting
//!
//! The transfer is cut into rounds: an RDMA Write of up to 64 KiB into a target region, a
//! Send of up to 16 KiB into a posted receive buffer, and an RDMA Read of up to 16 KiB back,
//! posted in that order. Sources hold a pattern derived from the seed and the round; targets
//! hold its complement (the poison) before the round starts. When the round's Read completes
//! — so the target has handled everything before it — every target byte is counted as
//! **verified** (the pattern), **lost** (still the poison) or **misplaced** (anything else).
//! A run that does not finish by its deadline counts what was not moved as lost.

use std::cell::RefCell;
use std::net::{Ipv4Addr, SocketAddr};
use std::rc::Rc;
use std::time::Duration;

use netsim::{Dir, Instant, LinkCounters, LinkParams, Sim, SimError};
use sctp::netsim_host::{App, SctpHost};
use sctp::{AssocId, AssociationConfig, Endpoint, EndpointConfig, Event};
use stack::llp::sctp::SctpConfig;
use stack::{
    Access, Cq, MemTable, MemoryRegion, MrOptions, Pd, QpConfig, QpEngine, QpEvent, QpId, QpState,
    RecvWr, SendWr, Setup, WcStatus,
};

use crate::mpa::xorshift_bytes;

/// A path outage: the link of `path` goes down at `at` and, with `down_for`, comes back.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Outage {
    /// Path index (0 is the primary).
    pub path: usize,
    /// When it goes down (virtual time).
    pub at: Duration,
    /// How long it stays down (`None`: for good).
    pub down_for: Option<Duration>,
}

/// An RDMA-over-SCTP scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct SctpScenario {
    /// Name shown in reports.
    pub name: String,
    /// Parameters of every link (both directions).
    pub link: LinkParams,
    /// Number of paths (links, and addresses per host): 1 or more.
    pub paths: usize,
    /// Outages on a schedule.
    pub outages: Vec<Outage>,
    /// Bytes the workload moves.
    pub bytes: u64,
    /// Path MTU (DDP segments are sized to fit it, RFC 5043 §9).
    pub mtu: usize,
    /// Virtual time after which the run is abandoned.
    pub deadline: Duration,
    /// How the association uses its paths: one at a time, or Concurrent Multipath Transfer.
    pub multipath: stack::addr::Multipath,
}

/// The names [`SctpScenario::named`] knows, with a one-line description each.
pub const SCENARIOS: &[(&str, &str)] = &[
    (
        "sctp-clean",
        "RDMA over SCTP, two 100 Mbit/s paths (2 ms), no impairments",
    ),
    (
        "sctp-loss",
        "two paths with 1 % loss, 2 % reordering (3 ms), 1 % duplication",
    ),
    (
        "sctp-failover",
        "sctp-loss, and the primary path down at 0.3 s for good",
    ),
    (
        "sctp-flap",
        "sctp-loss; primary down 0.3-1.3 s, secondary down 2-3 s",
    ),
    (
        "sctp-cmt-loss",
        "sctp-loss with Concurrent Multipath Transfer (CMT-PF): both paths carry data",
    ),
    (
        "sctp-cmtnopf-loss",
        "sctp-loss with plain CMT (no Potentially Failed state): both paths carry data",
    ),
    (
        "sctp-cmt-failover",
        "sctp-cmt-loss, and the primary path down at 0.3 s for good",
    ),
    (
        "sctp-cmt-flap",
        "sctp-cmt-loss; primary down 0.3-1.3 s, secondary down 2-3 s",
    ),
];

impl SctpScenario {
    /// A built-in scenario by name (see [`SCENARIOS`]), moving 4 MiB.
    pub fn named(name: &str) -> Option<SctpScenario> {
        let base = LinkParams::default()
            .bandwidth(100_000_000)
            .delay(Duration::from_millis(2));
        let lossy = base
            .clone()
            .loss(0.01)
            .duplicate(0.01)
            .reorder(0.02, Duration::from_millis(3));
        let mut s = SctpScenario {
            name: name.to_string(),
            link: base,
            paths: 2,
            outages: Vec::new(),
            bytes: 4 << 20,
            mtu: 1500,
            deadline: Duration::from_secs(600),
            multipath: stack::addr::Multipath::Failover,
        };
        let plain = if let Some(rest) = name.strip_prefix("sctp-cmt-") {
            s.multipath = stack::addr::Multipath::CmtPf;
            format!("sctp-{rest}")
        } else if let Some(rest) = name.strip_prefix("sctp-cmtnopf-") {
            s.multipath = stack::addr::Multipath::Cmt;
            format!("sctp-{rest}")
        } else {
            name.to_string()
        };
        match plain.as_str() {
            "sctp-clean" if s.multipath == stack::addr::Multipath::Failover => {}
            "sctp-loss" => s.link = lossy,
            "sctp-failover" => {
                s.link = lossy;
                s.outages.push(Outage {
                    path: 0,
                    at: Duration::from_millis(300),
                    down_for: None,
                });
            }
            "sctp-flap" => {
                s.link = lossy;
                s.outages.push(Outage {
                    path: 0,
                    at: Duration::from_millis(300),
                    down_for: Some(Duration::from_secs(1)),
                });
                s.outages.push(Outage {
                    path: 1,
                    at: Duration::from_secs(2),
                    down_for: Some(Duration::from_secs(1)),
                });
            }
            _ => return None,
        }
        Some(s)
    }
}

/// The outcome of one run.
#[derive(Clone, Debug, PartialEq)]
pub struct SctpReport {
    /// Bytes the workload moves.
    pub bytes: u64,
    /// Bytes verified at their targets.
    pub verified: u64,
    /// Bytes expected but never arrived.
    pub lost: u64,
    /// Bytes that arrived wrong or at the wrong place.
    pub misplaced: u64,
    /// Every round completed before the deadline.
    pub completed: bool,
    /// Virtual time until the last round completed (or the deadline).
    pub sim_time: Duration,
    /// Terminates sent (both hosts).
    pub terminates: u64,
    /// Work completions with an error status (both hosts).
    pub failed_completions: u64,
    /// Path events the initiator's association reported, with their virtual time.
    pub path_events: Vec<(Duration, String)>,
    /// Link counters, per path: (A→B, B→A).
    pub counters: Vec<[LinkCounters; 2]>,
    /// T3-rtx expirations of both hosts' associations.
    pub t3_expirations: u64,
    /// Fast retransmit events of both hosts' associations.
    pub fast_retransmits: u64,
}

impl SctpReport {
    /// Nothing lost, nothing misplaced, every round completed.
    pub fn ok(&self) -> bool {
        self.completed && self.lost == 0 && self.misplaced == 0 && self.verified == self.bytes
    }
}

const WRITE: usize = 64 << 10;
const SEND: usize = 16 << 10;
const READ: usize = 16 << 10;
const ROUND: u64 = (WRITE + SEND + READ) as u64;

fn ips(host: u8, paths: usize) -> Vec<Ipv4Addr> {
    (0..paths)
        .map(|p| Ipv4Addr::new(10, 0, p as u8 + 1, host))
        .collect()
}

fn pattern(seed: u64, round: u64, op: u64, len: usize) -> Vec<u8> {
    xorshift_bytes(
        seed ^ round.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (op << 56),
        len,
    )
}

fn count(want: &[u8], got: &[u8]) -> (u64, u64, u64) {
    let (mut v, mut l, mut m) = (0, 0, 0);
    for (w, g) in want.iter().zip(got) {
        if w == g {
            v += 1;
        } else if *g == !*w {
            l += 1;
        } else {
            m += 1;
        }
    }
    (v, l, m)
}

/// Bytes of DDP payload (RFC 5041 ULP payload: RDMA Write data, Send data, Read Response
/// data) a host received from its association, in bins of virtual time.
#[derive(Clone, Debug, PartialEq)]
pub struct Meter {
    /// Width of a bin.
    pub bin: Duration,
    /// Bytes received in bin `i`, i.e. in `[i * bin, (i + 1) * bin)`.
    pub bins: Vec<u64>,
    /// Bytes received in all.
    pub total: u64,
    /// When the last byte was received.
    pub last_at: Option<Duration>,
}

impl Meter {
    /// An empty meter with bins of `bin` (at least a nanosecond).
    pub fn new(bin: Duration) -> Meter {
        Meter {
            bin: bin.max(Duration::from_nanos(1)),
            bins: Vec::new(),
            total: 0,
            last_at: None,
        }
    }

    fn record(&mut self, t: Duration, bytes: u64) {
        let i = (t.as_nanos() / self.bin.as_nanos()) as usize;
        if self.bins.len() <= i {
            self.bins.resize(i + 1, 0);
        }
        self.bins[i] += bytes;
        self.total += bytes;
        self.last_at = Some(t);
    }

    /// The DDP payload of an SCTP user message with `ppid` (0 for anything else).
    fn payload(ppid: u32, data: &[u8]) -> u64 {
        match sctp::ddp_adapt::parse(ppid, data) {
            Ok(sctp::ddp_adapt::DdpSctpMessage::Segment(s)) => {
                s.ddp().map_or(0, |(_, p)| p.len() as u64)
            }
            _ => 0,
        }
    }
}

/// One host's RNIC: the QP engine, its memory and its CQ.
pub(crate) struct Rnic {
    pub(crate) eng: QpEngine,
    mem: Arc<MemTable>,
    pd: Pd,
    pub(crate) cq: Cq,
    pub(crate) terminates: u64,
    /// Counts the DDP payload received, when set.
    pub(crate) meter: Option<Meter>,
    /// The QP's span (`qp{qp, llp}`; over TCP in the experiments too), entered while the
    /// engine is driven.
    span: tracing::Span,
}

impl Rnic {
    pub(crate) fn new(id: u32, setup: Setup, seed: u64) -> Rnic {
        // Reproducible STags: a run is a function of its seed.
        let mem = MemTable::with_seed(seed ^ u64::from(id));
        let pd = mem.alloc_pd();
        let cq = Cq::new(4096);
        let cfg = QpConfig::new(QpId(id), pd, cq.clone(), cq.clone());
        let llp = match setup {
            Setup::SctpInitiator(_) | Setup::SctpResponder(_) => "SCTP",
            _ => "MPA/TCP",
        };
        let span = tracing::info_span!("qp", qp = id, llp);
        // Over SCTP the session is up when the engine is made: it reports so in its span.
        let eng = match span.in_scope(|| QpEngine::new(cfg, mem.clone(), setup, Instant::ZERO)) {
            Ok(e) => e,
            Err(e) => panic!("engine configuration: {e}"),
        };
        Rnic {
            eng,
            mem,
            pd,
            cq,
            terminates: 0,
            meter: None,
            span,
        }
    }

    pub(crate) fn mr(&self, len: usize) -> MemoryRegion {
        let access = Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE;
        match self.mem.register_new(self.pd, len, MrOptions::new(access)) {
            Ok(m) => m,
            Err(e) => panic!("registration: {e}"),
        }
    }

    /// The QP's span.
    pub(crate) fn span(&self) -> tracing::Span {
        self.span.clone()
    }

    /// Takes the engine's events (counting Terminates sent).
    pub(crate) fn collect_events(&mut self) {
        while let Some(e) = self.eng.poll_event() {
            if matches!(e, QpEvent::TerminateSent(_)) {
                self.terminates += 1;
            }
        }
    }
}

/// One host's RNIC over the SCTP LLP and its association.
pub(crate) struct Host {
    pub(crate) rnic: Rnic,
    assoc: Option<AssocId>,
    /// Association events other than readable data, with their virtual time.
    pub(crate) events: Vec<(Duration, Event)>,
}

use std::sync::Arc;

impl Host {
    fn new(id: u32, setup: Setup, seed: u64) -> Host {
        Host {
            rnic: Rnic::new(id, setup, seed),
            assoc: None,
            events: Vec::new(),
        }
    }

    /// Moves messages between the association and the engine, both ways.
    fn drive(&mut self, ep: &mut Endpoint, now: sctp::Instant) {
        let _span = self.rnic.span.clone().entered();
        let t = Duration::from_nanos(now.as_nanos());
        while let Some((_, e)) = ep.poll_event() {
            if !matches!(e, Event::DataReadable { .. }) {
                self.events.push((t, e));
            }
        }
        if let Some(id) = self.assoc
            && let Some(a) = ep.association_mut(id)
        {
            let r = &mut self.rnic;
            while let Some(m) = a.recv() {
                if let Some(meter) = &mut r.meter {
                    meter.record(t, Meter::payload(m.ppid, &m.data));
                }
                r.eng.handle_message(now, m.ppid, m.unordered, &m.data);
            }
            if r.eng.poll_timeout().is_some_and(|d| d <= now) {
                r.eng.handle_timeout(now);
            }
            if a.state() == sctp::State::Established {
                while let Some((stream, _, data)) = r.eng.poll_message() {
                    if a.check_send(stream, data.len()).is_err() {
                        break;
                    }
                    if let Some((stream, ppid, data)) = r.eng.take_message() {
                        let _ = a.send_owned(stream, ppid, true, data);
                    }
                }
            }
        }
        self.rnic.collect_events();
    }
}

/// The initiator's workload state.
struct Work {
    seed: u64,
    total_rounds: u64,
    round: u64,
    in_flight: bool,
    src: Option<[MemoryRegion; 3]>,
    dst: Option<[MemoryRegion; 3]>,
    verified: u64,
    lost: u64,
    misplaced: u64,
    failed: u64,
    done_at: Option<Duration>,
}

impl Work {
    /// Posts round `self.round`: targets poisoned, sources patterned.
    fn post(&mut self, a: &mut Rnic, b: &mut Rnic) {
        let (Some(src), Some(dst)) = (&self.src, &self.dst) else {
            return;
        };
        let r = self.round;
        for (i, (len, s, d)) in [
            (WRITE, &src[0], &dst[0]),
            (SEND, &src[1], &dst[1]),
            (READ, &dst[2], &src[2]),
        ]
        .into_iter()
        .enumerate()
        {
            let p = pattern(self.seed, r, i as u64, len);
            let poison: Vec<u8> = p.iter().map(|x| !x).collect();
            let _ = s.buf().write_at(0, &p);
            let _ = d.buf().write_at(0, &poison);
        }
        let _ = b
            .eng
            .post_recv(RecvWr::new(r, vec![dst[1].sge(0, SEND as u32)]));
        let _ = a.eng.post_send(SendWr::write(
            3 * r,
            vec![src[0].sge(0, WRITE as u32)],
            dst[0].stag(),
            dst[0].to_at(0),
        ));
        let _ = a
            .eng
            .post_send(SendWr::send(3 * r + 1, vec![src[1].sge(0, SEND as u32)]));
        let _ = a.eng.post_send(SendWr::read(
            3 * r + 2,
            vec![src[2].sge(0, READ as u32)],
            dst[2].stag(),
            dst[2].to_at(0),
        ));
        self.in_flight = true;
    }

    /// After the round's Read completed: counts every target byte.
    fn check(&mut self) {
        let (Some(src), Some(dst)) = (&self.src, &self.dst) else {
            return;
        };
        let r = self.round;
        for (i, len, got) in [(0, WRITE, &dst[0]), (1, SEND, &dst[1]), (2, READ, &src[2])] {
            let (v, l, m) = count(&pattern(self.seed, r, i, len), &got.buf().to_vec());
            self.verified += v;
            self.lost += l;
            self.misplaced += m;
        }
        self.in_flight = false;
        self.round += 1;
    }

    fn advance(&mut self, a: &mut Rnic, b: &mut Rnic, now: Duration) {
        if self.src.is_none() {
            if a.eng.state() != QpState::Rts || b.eng.state() != QpState::Rts {
                return;
            }
            self.src = Some([a.mr(WRITE), a.mr(SEND), a.mr(READ)]);
            self.dst = Some([b.mr(WRITE), b.mr(SEND), b.mr(READ)]);
        }
        while let Some(w) = a.cq.poll_one() {
            if w.status != WcStatus::Success {
                self.failed += 1;
            }
            if w.wr_id == 3 * self.round + 2 && self.in_flight {
                self.check();
            }
        }
        while let Some(w) = b.cq.poll_one() {
            if w.status != WcStatus::Success {
                self.failed += 1;
            }
        }
        if !self.in_flight && self.round < self.total_rounds {
            self.post(a, b);
        }
        if self.round == self.total_rounds && self.done_at.is_none() {
            self.done_at = Some(now);
        }
    }
}

impl Workload for Work {
    fn step(&mut self, a: &mut Rnic, b: &mut Rnic, now: Duration, _at_b: bool) {
        self.advance(a, b, now);
    }

    fn done(&self) -> bool {
        self.done_at.is_some()
    }
}

/// What runs on a pair of RNICs: called at every step of either host with both.
pub(crate) trait Workload {
    /// One step (work completions, new work requests); `now` is virtual time. `at_b`: the
    /// step runs in B's turn (then B's new work goes out at once; A's waits for A's turn,
    /// and the other way round).
    fn step(&mut self, a: &mut Rnic, b: &mut Rnic, now: Duration, at_b: bool);
    /// The run may end.
    fn done(&self) -> bool;
}

/// Two multihomed hosts, the initiator A and the responder B, joined by one link per path.
pub(crate) struct Pair<'a> {
    /// Each path's link (both directions).
    pub(crate) links: Vec<LinkParams>,
    /// Outages on a schedule.
    pub(crate) outages: &'a [Outage],
    /// Both endpoints' association parameters (the PMTU is set from `mtu`, the DDP
    /// adaptation indication is added).
    pub(crate) assoc: AssociationConfig,
    /// Path MTU.
    pub(crate) mtu: usize,
    /// Virtual time after which the run ends if the workload has not.
    pub(crate) deadline: Duration,
    /// A pcap per path (see [`run_captured`]).
    pub(crate) capture: Option<&'a std::path::Path>,
    /// B counts its received DDP payload in bins of this width.
    pub(crate) meter: Option<Duration>,
}

/// How a [`Pair`] run ended, handed to the caller's `finish`.
pub(crate) struct PairEnd<'a, W> {
    pub(crate) work: &'a W,
    pub(crate) a: &'a Host,
    pub(crate) b: &'a Host,
    /// The workload was done before the deadline.
    pub(crate) done: bool,
    /// Virtual time at the end.
    pub(crate) now: Duration,
    /// Link counters, per path: (A→B, B→A).
    pub(crate) counters: Vec<[LinkCounters; 2]>,
    /// A's association's counters, when it exists.
    pub(crate) stats: Option<sctp::AssociationStats>,
    /// B's association's counters, when it exists.
    pub(crate) stats_b: Option<sctp::AssociationStats>,
}

fn ep_config(
    port: u16,
    addrs: &[Ipv4Addr],
    seed: u64,
    listen: bool,
    mtu: usize,
    assoc: &AssociationConfig,
) -> EndpointConfig {
    let mut c = EndpointConfig::new(
        port,
        addrs.iter().map(|ip| SctpHost::sock(*ip)).collect(),
        seed,
    );
    c.accept_incoming = listen;
    c.association = assoc.clone();
    c.association.adaptation_indication = Some(sctp::ddp_adapt::ADAPTATION_DDP);
    c.association.pmtu = mtu;
    c
}

/// Runs `work` on a [`Pair`] with `seed` until it is done or the deadline passes; `finish`
/// reads the outcome.
pub(crate) fn run_pair<W: Workload + 'static, R>(
    p: &Pair<'_>,
    seed: u64,
    work: W,
    finish: impl FnOnce(PairEnd<'_, W>) -> R,
) -> Result<R, SimError> {
    let paths = p.links.len().max(1);
    let llp = SctpConfig {
        ird: 16,
        ord: 16,
        private_data: Vec::new(),
        max_segment: sctp::ddp_adapt::max_ddp_segment(p.mtu, 20),
        enhanced: true,
        stream: 0,
    };
    let a = Rc::new(RefCell::new(Host::new(
        1,
        Setup::SctpInitiator(llp.clone()),
        seed,
    )));
    let mut host_b = Host::new(2, Setup::SctpResponder(llp), seed);
    host_b.rnic.meter = p.meter.map(Meter::new);
    let b = Rc::new(RefCell::new(host_b));
    let work = Rc::new(RefCell::new(work));
    let mut sim = Sim::new(seed);
    let (ra, rb, w) = (a.clone(), b.clone(), work.clone());
    let peer: SocketAddr = SctpHost::sock(ips(2, 1)[0]);
    let app_a: App = Box::new(move |ep, now| {
        let mut h = ra.borrow_mut();
        if h.assoc.is_none() {
            h.assoc = ep.connect(now, peer, 6000).ok();
        }
        h.drive(ep, now);
        if let (Ok(mut hb), Ok(mut w)) = (rb.try_borrow_mut(), w.try_borrow_mut()) {
            let t = Duration::from_nanos(now.as_nanos());
            w.step(&mut h.rnic, &mut hb.rnic, t, false);
            h.drive(ep, now);
        }
    });
    let (rb2, ra2, w2) = (b.clone(), a.clone(), work.clone());
    let app_b: App = Box::new(move |ep, now| {
        let mut h = rb2.borrow_mut();
        if let Some(id) = ep.accept() {
            h.assoc = Some(id);
        }
        h.drive(ep, now);
        if let (Ok(mut ha), Ok(mut w)) = (ra2.try_borrow_mut(), w2.try_borrow_mut()) {
            let t = Duration::from_nanos(now.as_nanos());
            w.step(&mut ha.rnic, &mut h.rnic, t, true);
            h.drive(ep, now);
        }
    });
    let ha = sim.add_node(SctpHost::new(
        1,
        2,
        ips(1, paths),
        Endpoint::new(ep_config(
            5000,
            &ips(1, paths),
            seed,
            false,
            p.mtu,
            &p.assoc,
        )),
        app_a,
    ));
    let hb = sim.add_node(SctpHost::new(
        2,
        1,
        ips(2, paths),
        Endpoint::new(ep_config(
            6000,
            &ips(2, paths),
            seed ^ 0x5a5a,
            true,
            p.mtu,
            &p.assoc,
        )),
        app_b,
    ));
    let mut links = Vec::new();
    for (i, params) in p.links.iter().enumerate() {
        links.push(sim.link(ha.iface(i), hb.iface(i), params.clone())?);
    }
    if let Some(path) = p.capture {
        // One pcap per path: `FILE` for the first, `FILE.pathN` for the others.
        for (i, l) in links.iter().enumerate() {
            let file = if i == 0 {
                path.to_path_buf()
            } else {
                let mut name = path.as_os_str().to_owned();
                name.push(format!(".path{i}"));
                name.into()
            };
            sim.capture_with(
                *l,
                netsim::CaptureSink::File(file),
                netsim::CapturePoint::Receive,
            )?;
        }
    }
    for o in p.outages {
        let Some(&l) = links.get(o.path) else {
            continue;
        };
        sim.link_down_at(l, Instant::from_duration(o.at))?;
        if let Some(d) = o.down_for {
            sim.link_up_at(l, Instant::from_duration(o.at + d))?;
        }
    }
    let wd = work.clone();
    let deadline = Instant::from_duration(p.deadline);
    let done = sim.run_until_condition(deadline, move |_| wd.try_borrow().is_ok_and(|w| w.done()));
    let counters = links
        .iter()
        .map(|l| {
            [
                sim.link_counters(*l, Dir::AtoB),
                sim.link_counters(*l, Dir::BtoA),
            ]
        })
        .collect();
    let (w, a, b) = (work.borrow(), a.borrow(), b.borrow());
    let stats = a
        .assoc
        .and_then(|id| sim.node(ha).ep.association(id))
        .map(|x| x.stats().clone());
    let stats_b = b
        .assoc
        .and_then(|id| sim.node(hb).ep.association(id))
        .map(|x| x.stats().clone());
    Ok(finish(PairEnd {
        work: &w,
        a: &a,
        b: &b,
        done,
        now: Duration::from_nanos(sim.now().as_nanos()),
        counters,
        stats,
        stats_b,
    }))
}

/// Runs `s` with `seed`.
pub fn run(s: &SctpScenario, seed: u64) -> Result<SctpReport, SimError> {
    run_captured(s, seed, None)
}

/// Runs `s` with `seed`, writing a pcap of each path's frames as its receiver sees them:
/// `capture` for the first path, `capture.pathN` for path N.
pub fn run_captured(
    s: &SctpScenario,
    seed: u64,
    capture: Option<&std::path::Path>,
) -> Result<SctpReport, SimError> {
    let mut assoc = AssociationConfig::default();
    s.multipath.apply(&mut assoc);
    let pair = Pair {
        links: vec![s.link.clone(); s.paths.max(1)],
        outages: &s.outages,
        assoc,
        mtu: s.mtu,
        deadline: s.deadline,
        capture,
        meter: None,
    };
    let work = Work {
        seed,
        total_rounds: s.bytes.div_ceil(ROUND),
        round: 0,
        in_flight: false,
        src: None,
        dst: None,
        verified: 0,
        lost: 0,
        misplaced: 0,
        failed: 0,
        done_at: None,
    };
    run_pair(&pair, seed, work, |end| {
        let w = end.work;
        let not_moved = s.bytes.saturating_sub(w.round * ROUND).min(s.bytes);
        let moved = s.bytes - not_moved;
        SctpReport {
            bytes: s.bytes,
            // Whole rounds are counted; the last round may go past `bytes`.
            verified: w.verified.min(moved),
            lost: w.lost + not_moved,
            misplaced: w.misplaced,
            completed: end.done && w.failed == 0,
            sim_time: w.done_at.unwrap_or(end.now),
            terminates: end.a.rnic.terminates + end.b.rnic.terminates,
            failed_completions: w.failed,
            path_events: path_events(end.a),
            counters: end.counters,
            t3_expirations: [&end.stats, &end.stats_b]
                .iter()
                .filter_map(|x| x.as_ref())
                .map(|x| x.t3_expirations)
                .sum(),
            fast_retransmits: [&end.stats, &end.stats_b]
                .iter()
                .filter_map(|x| x.as_ref())
                .map(|x| x.fast_retransmits)
                .sum(),
        }
    })
}

/// The path events (up, down, potentially failed, primary changed) `h`'s association
/// reported, with their virtual time.
pub(crate) fn path_events(h: &Host) -> Vec<(Duration, String)> {
    h.events
        .iter()
        .filter(|(_, e)| {
            matches!(
                e,
                Event::PathDown { .. }
                    | Event::PathUp { .. }
                    | Event::PathPotentiallyFailed { .. }
                    | Event::PrimaryChanged { .. }
            )
        })
        .map(|(t, e)| (*t, format!("{e:?}")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 5043 over a multihomed association (RFC 9260 §6.4, §8.2) in virtual time: every
    /// built-in scenario moves every byte — nothing lost or misplaced, no Terminate — with
    /// loss, reordering and duplication on both paths and the primary failing; after a
    /// failure the initiator's association reports the move to the other path.
    #[test]
    fn every_scenario_moves_every_byte() {
        for (name, _) in SCENARIOS {
            let mut s = SctpScenario::named(name).expect("known");
            s.bytes = 1 << 20;
            for seed in [1u64, 2] {
                let r = run(&s, seed).expect("run");
                assert!(r.ok(), "{name} seed {seed}: {r:?}");
                assert_eq!(r.terminates, 0, "{name} seed {seed}");
                // A path that failed while data was moving was noticed (a run that is over
                // before the outage has nothing to notice).
                if s.outages
                    .first()
                    .is_some_and(|o| r.sim_time > o.at + Duration::from_secs(1))
                {
                    assert!(
                        r.path_events
                            .iter()
                            .any(|(_, e)| e.contains("PrimaryChanged")
                                || e.contains("PotentiallyFailed")),
                        "{name} seed {seed}: {:?}",
                        r.path_events
                    );
                }
            }
        }
    }

    /// RDMA over a CMT association under loss: both paths carry the data (the secondary
    /// about as much as the primary, where without CMT it carries next to nothing), and
    /// every byte arrives.
    #[test]
    fn cmt_scenarios_carry_data_on_both_paths() {
        let share = |name: &str| {
            let mut s = SctpScenario::named(name).expect("known");
            s.bytes = 2 << 20;
            let r = run(&s, 3).expect("run");
            assert!(r.ok(), "{name}: {r:?}");
            let bytes: Vec<u64> = r.counters.iter().map(|c| c[0].sent_bytes).collect();
            bytes[1] as f64 / bytes.iter().sum::<u64>() as f64
        };
        let cmt = share("sctp-cmt-loss");
        let single = share("sctp-loss");
        assert!(cmt > 0.35, "secondary's share with CMT: {cmt}");
        assert!(single < 0.05, "secondary's share without CMT: {single}");
    }

    /// One seed, one result: a run is a pure function of its seed.
    #[test]
    fn runs_are_deterministic() {
        let s = SctpScenario::named("sctp-loss").expect("known");
        let mut s = s;
        s.bytes = 512 << 10;
        let a = run(&s, 9).expect("run");
        let b = run(&s, 9).expect("run");
        assert_eq!(a, b);
    }

    /// The accounting can fail: a run cut short by its deadline counts the rest as lost.
    #[test]
    fn a_run_cut_short_counts_the_rest_as_lost() {
        let mut s = SctpScenario::named("sctp-clean").expect("known");
        s.bytes = 64 << 20;
        s.deadline = Duration::from_millis(200);
        let r = run(&s, 1).expect("run");
        assert!(!r.ok());
        assert!(r.lost > 0 && r.verified < r.bytes, "{r:?}");
    }
}
