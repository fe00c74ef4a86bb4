//! SCTP connections of the progress core: DDP over softrnic's own SCTP (RFC 5043), over UDP
//! encapsulation (RFC 6951) or raw IPv4, multihomed, beside the TCP connections in the same
//! epoll set and thread.
//!
//! One SCTP endpoint per listener (it accepts many associations) and one per active
//! connection. With several progress threads, an established association a listener
//! accepted moves to an endpoint of its own on the least-loaded thread: it sends through
//! duplicates of the listener's sockets, and the listener's endpoint, which still reads them
//! on thread 0, passes it its packets (those from its peer's addresses and SCTP port, or
//! with its verification tag). An endpoint's sockets (one per local address) are
//! registered with the core's poll; on readiness, a doorbell or a timer the endpoint is
//! serviced: packets in, SCTP timers, new associations, then for each association its
//! messages go to the QP engine (`handle_message`) and the engine's messages go to the
//! association (`send`, unordered), and finally every packet SCTP has is sent.
//!
//! Passive side: a new association waits for the DDP Stream Session Initiate (PPID 17),
//! which becomes a [`ConnectRequest`]; [`crate::Rnic::accept`] starts a QP engine as
//! session responder and hands it the Initiate, [`crate::Rnic::reject`] answers with a
//! Session Reject and shuts the association down. An association whose peer did not
//! announce the DDP adaptation (RFC 5043 §11.1) is aborted.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mio::unix::SourceFd;
use mio::{Interest, Token};
use sctp::ddp_adapt::{self, PeerAdaptation};
use sctp::{AssocId, Endpoint, EndpointConfig, Instant, Message, State};
use sctp_io::driver::{Inbound, InboundPacket, PacketIo, engine_addr};
use sctp_io::net::Transport;

use super::Shared;
use super::assoc_qp::{self, Initiate, RequestFrom};
use super::{Cmd, Conn, Core, LoadGuard, end_engine, fail_connect, least_loaded};
use crate::addr::{Multipath, SctpAddr, SctpEncap, route_source};
use crate::device::{self, SharedDev};
use crate::engine::CloseReason;
use crate::shared::{
    CmError, ConnReqId, ConnStatus, Event, ListenerId, PathChange, QpShared, RnicConfig,
};

/// How long a new association may take to deliver its Session Initiate.
const INITIATE_TIMEOUT: Duration = mpa::negotiate::REQUEST_TIMEOUT;
/// How long a rejected association lingers for its Reject to be acknowledged.
const REJECT_LINGER: Duration = Duration::from_secs(2);
/// The receive window SCTP associations of the RNIC announce.
const RECV_WINDOW: u32 = 4 << 20;
/// Packets read per socket per pass.
const RECV_BATCH: usize = 256;
/// Packets a listener's endpoint keeps for an association another progress thread runs
/// until that thread takes them; more are dropped (SCTP retransmits them), as a full socket
/// buffer would.
const INBOX_LIMIT: usize = 4096;
/// How often the endpoint of a closed listener looks whether the associations it passed to
/// other progress threads are gone (it is dropped with the last one).
const DIVERT_CHECK: Duration = Duration::from_secs(1);

/// A `ksctp://` address reached softrnic's own SCTP (the RNIC sends those to the kernel
/// SCTP carrier).
fn kernel_sctp_here() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        "ksctp:// runs on the kernel's SCTP sockets, not on softrnic's SCTP",
    )
}

fn seed() -> io::Result<u64> {
    getrandom::u64().map_err(|e| io::Error::other(format!("OS random generator: {e}")))
}

/// An SCTP port from RFC 6335's dynamic range, drawn from the OS generator.
fn ephemeral_port() -> io::Result<u16> {
    Ok(49152 + (seed()? % 16384) as u16)
}

/// The largest DDP segment for a path MTU, the IP version and the encapsulation.
fn max_segment(mtu: usize, v6: bool, overhead: usize) -> usize {
    let ip = if v6 { 40 } else { 20 };
    ddp_adapt::max_ddp_segment(mtu, ip + overhead)
}

fn endpoint_config(
    port: u16,
    locals: &[IpAddr],
    transport: Transport,
    mtu: usize,
    listen: bool,
    multipath: Multipath,
) -> io::Result<EndpointConfig> {
    let mut c = EndpointConfig::new(port, locals.iter().map(|ip| engine_addr(*ip)).collect(), 0);
    // Tags, TSNs and the cookie key from ChaCha20 keyed with 256 bits from the OS.
    let mut key = [0u8; 32];
    getrandom::fill(&mut key).map_err(|e| io::Error::other(format!("OS random generator: {e}")))?;
    c.entropy = Some(key);
    c.accept_incoming = listen;
    c.association.adaptation_indication = Some(ddp_adapt::ADAPTATION_DDP);
    c.association.pmtu = mtu;
    // A receive window of 4 MiB (the a_rwnd announced, RFC 9260 §6.2): the SCTP default of
    // 1 MiB held a 64 KiB-message stream to about half the rate on loopback.
    c.association.recv_buffer = RECV_WINDOW;
    c.association.encapsulation_overhead = transport.overhead();
    multipath.apply(&mut c.association);
    Ok(c)
}

/// Where an endpoint's SCTP packets go: the host's sockets (UDP or raw IPv4), or raw IPv4 on
/// a raw-Ethernet device with softrnic's own IP.
#[derive(Debug)]
pub(crate) enum SctpIo {
    Sockets(PacketIo),
    Dev(DevSctpIo),
    /// An association a listener accepted, run on another progress thread: it sends
    /// through the listener's sockets, and the listener's endpoint passes it its packets.
    Diverted(DivertedIo),
}

impl SctpIo {
    fn fds(&self) -> Vec<std::os::fd::BorrowedFd<'_>> {
        match self {
            SctpIo::Sockets(p) => p.fds(),
            // The device's frames wake the core; its stack hands the packets over.
            SctpIo::Dev(_) => Vec::new(),
            // The listener's thread reads the sockets and rings this one's doorbell.
            SctpIo::Diverted(_) => Vec::new(),
        }
    }

    fn udp_port(&self) -> u16 {
        match self {
            SctpIo::Sockets(p) => p.udp_port(),
            SctpIo::Dev(_) => 0,
            SctpIo::Diverted(d) => d.io.udp_port(),
        }
    }

    fn local_addrs(&self) -> Vec<IpAddr> {
        match self {
            SctpIo::Sockets(p) => p.local_addrs(),
            SctpIo::Dev(d) => d.locals.clone(),
            SctpIo::Diverted(d) => d.io.local_addrs(),
        }
    }

    fn receive(&mut self, ep: &mut Endpoint, now: Instant, limit: usize) -> usize {
        match self {
            SctpIo::Sockets(p) => p.receive(ep, now, limit),
            SctpIo::Dev(d) => d.receive(ep, now, limit),
            SctpIo::Diverted(d) => d.receive(ep, now),
        }
    }

    fn flush(&mut self, ep: &mut Endpoint, now: Instant) {
        match self {
            SctpIo::Sockets(p) => p.flush(ep, now),
            SctpIo::Dev(d) => d.flush(ep, now),
            SctpIo::Diverted(d) => d.io.flush(ep, now),
        }
    }

    fn on_dev(&self, dev: &SharedDev) -> bool {
        matches!(self, SctpIo::Dev(d) if Arc::ptr_eq(&d.dev, dev))
    }
}

/// The packets passed from a listener's endpoint (progress thread 0) to the endpoint of one
/// association it accepted, which runs on another progress thread.
#[derive(Debug, Default)]
pub(crate) struct Inbox {
    packets: Mutex<VecDeque<InboundPacket>>,
    /// Packets came since the association's thread last looked (its doorbell).
    pending: AtomicBool,
    /// The association's endpoint is gone: its packets are the listener's again (which
    /// treats them as out of the blue, RFC 9260 §8.4, as the association's end left them).
    closed: AtomicBool,
}

/// The packet side of an association a listener accepted, moved to another progress thread:
/// it sends through duplicates of the listener's sockets and takes the packets the
/// listener's endpoint passes it (the sockets are read on thread 0 only).
#[derive(Debug)]
pub(crate) struct DivertedIo {
    io: PacketIo,
    inbox: Arc<Inbox>,
    /// The association's QP (rung on thread 0 when this endpoint ends).
    qp: Arc<QpShared>,
}

impl DivertedIo {
    fn receive(&mut self, ep: &mut Endpoint, now: Instant) -> usize {
        let got =
            std::mem::take(&mut *self.inbox.packets.lock().unwrap_or_else(|p| p.into_inner()));
        for p in &got {
            self.io.handle_inbound(ep, now, &p.as_inbound());
        }
        got.len()
    }
}

impl Drop for DivertedIo {
    fn drop(&mut self) {
        self.inbox.closed.store(true, Ordering::SeqCst);
    }
}

/// Where a listener's endpoint passes the packets of an association it accepted and moved
/// to another progress thread: those from the peer's SCTP port at one of the peer's
/// addresses, or with the association's verification tag (as [`Endpoint::handle_packet`]
/// would find the association).
#[derive(Debug)]
struct Divert {
    peers: Vec<IpAddr>,
    port: u16,
    tag: u32,
    inbox: Arc<Inbox>,
    qp: Arc<QpShared>,
}

impl Divert {
    fn takes(&self, p: &Inbound<'_>) -> bool {
        let (src, _) = sctp_io::net::sctp_ports(p.packet);
        let vtag = p
            .packet
            .get(4..8)
            .map_or(0, |b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
        src == self.port && (self.peers.contains(&p.from) || vtag == self.tag)
    }
}

/// SCTP packets as raw IPv4 (protocol 132) on a device of softrnic's own stack.
#[derive(Debug)]
pub(crate) struct DevSctpIo {
    dev: SharedDev,
    h: smoltcp::iface::SocketHandle,
    locals: Vec<IpAddr>,
    port: u16,
    /// Packets the device's raw socket had no room for (SCTP retransmits them).
    dropped: u64,
}

impl DevSctpIo {
    /// A raw SCTP socket on `dev` for the endpoint with SCTP port `port` at `locals` (the
    /// stack's IPv4 addresses).
    pub(crate) fn open(dev: SharedDev, locals: &[IpAddr], port: u16) -> io::Result<DevSctpIo> {
        if locals.is_empty() || locals.iter().any(|ip| !ip.is_ipv4()) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "SCTP on a device takes IPv4 addresses (the device stack speaks IPv4)",
            ));
        }
        let h = device::lock(&dev).raw_sctp();
        Ok(DevSctpIo {
            dev,
            h,
            locals: locals.to_vec(),
            port,
            dropped: 0,
        })
    }

    fn receive(&mut self, ep: &mut Endpoint, now: Instant, limit: usize) -> usize {
        use smoltcp::wire::Ipv4Packet;
        let mut d = device::lock(&self.dev);
        let mut n = 0;
        for _ in 0..limit {
            let Ok(bytes) = d.raw(self.h).recv() else {
                break;
            };
            let Ok(pkt) = Ipv4Packet::new_checked(bytes) else {
                continue;
            };
            let (src, dst) = (IpAddr::V4(pkt.src_addr()), IpAddr::V4(pkt.dst_addr()));
            let payload = pkt.payload();
            // Every raw SCTP socket of the device sees every SCTP packet: this endpoint's
            // are those to its port at one of its addresses.
            let to_us = payload
                .get(2..4)
                .is_some_and(|p| u16::from_be_bytes([p[0], p[1]]) == self.port);
            if !to_us || !self.locals.contains(&dst) {
                continue;
            }
            ep.handle_packet(now, engine_addr(dst), engine_addr(src), payload);
            n += 1;
        }
        n
    }

    fn flush(&mut self, ep: &mut Endpoint, now: Instant) {
        use smoltcp::phy::ChecksumCapabilities;
        use smoltcp::wire::{IpProtocol, Ipv4Packet, Ipv4Repr};
        let mut d = device::lock(&self.dev);
        while let Some(t) = ep.poll_transmit(now) {
            let (IpAddr::V4(src), IpAddr::V4(dst)) = (t.local.ip(), t.remote.ip()) else {
                self.dropped += 1;
                continue;
            };
            let repr = Ipv4Repr {
                src_addr: src,
                dst_addr: dst,
                next_header: IpProtocol::Unknown(132),
                payload_len: t.bytes.len(),
                hop_limit: 64,
            };
            match d.raw(self.h).send(repr.buffer_len() + t.bytes.len()) {
                Ok(buf) => {
                    let mut pkt = Ipv4Packet::new_unchecked(buf);
                    repr.emit(&mut pkt, &ChecksumCapabilities::default());
                    pkt.payload_mut().copy_from_slice(&t.bytes);
                }
                Err(_) => self.dropped += 1,
            }
        }
    }
}

impl Drop for DevSctpIo {
    fn drop(&mut self) {
        device::lock(&self.dev).remove_raw(self.h);
    }
}

/// An SCTP listener, opened by the application thread (so that bind errors reach it).
#[derive(Debug)]
pub(crate) struct SctpListen {
    io: SctpIo,
    ep: EndpointConfig,
    mtu: usize,
    scheme: &'static str,
}

impl SctpListen {
    /// Opens the sockets (or, with `dev`, a raw SCTP socket on that device); returns the
    /// listener and the address peers connect to.
    pub(crate) fn open(
        a: &SctpAddr,
        _cfg: &RnicConfig,
        dev: Option<SharedDev>,
    ) -> io::Result<(SctpListen, SctpAddr)> {
        let transport = match a.encap {
            SctpEncap::Udp(p) => Transport::Udp {
                local_port: p,
                remote_port: crate::addr::SCTP_UDP_PORT,
            },
            SctpEncap::RawIpv4 => Transport::RawIpv4,
            SctpEncap::Kernel => return Err(kernel_sctp_here()),
        };
        let port = match a.port {
            0 => ephemeral_port()?,
            p => p,
        };
        let io = match dev {
            Some(d) => SctpIo::Dev(DevSctpIo::open(d, &a.addrs, port)?),
            None => SctpIo::Sockets(PacketIo::open(transport, &a.addrs, port)?),
        };
        let mut bound = a.clone();
        bound.port = port;
        if let SctpEncap::Udp(_) = a.encap {
            bound.encap = SctpEncap::Udp(io.udp_port());
        }
        let ep = endpoint_config(port, &a.addrs, transport, a.mtu, true, a.multipath)?;
        let scheme = if matches!(a.encap, SctpEncap::Udp(_)) {
            "sctp+udp"
        } else {
            "sctp"
        };
        Ok((
            SctpListen {
                io,
                ep,
                mtu: a.mtu,
                scheme,
            },
            bound,
        ))
    }
}

/// An active SCTP connection's endpoint, opened by the application thread.
#[derive(Debug)]
pub(crate) struct SctpConnect {
    io: SctpIo,
    ep: EndpointConfig,
    remote: IpAddr,
    peer_port: u16,
    mtu: usize,
}

impl SctpConnect {
    /// Opens the endpoint's sockets (or, with `dev`, a raw SCTP socket on that device, from
    /// `a.local` or the device's first address).
    pub(crate) fn open(
        a: &SctpAddr,
        _cfg: &RnicConfig,
        dev: Option<SharedDev>,
    ) -> io::Result<SctpConnect> {
        let remote = *a
            .addrs
            .first()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no peer address"))?;
        let mut locals = a.local.clone();
        if locals.is_empty()
            && let Some(d) = &dev
        {
            let first = device::lock(d).first_addr().ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "the device has no address: give the connect one with local=A",
                )
            })?;
            locals.push(IpAddr::V4(first));
        }
        if locals.is_empty() {
            for r in &a.addrs {
                let l = route_source(*r)
                    .map_err(|e| io::Error::new(e.kind(), format!("no route to {r}: {e}")))?;
                if !locals.contains(&l) {
                    locals.push(l);
                }
            }
        }
        let transport = match a.encap {
            SctpEncap::Udp(p) => Transport::Udp {
                local_port: 0,
                remote_port: p,
            },
            SctpEncap::RawIpv4 => Transport::RawIpv4,
            SctpEncap::Kernel => return Err(kernel_sctp_here()),
        };
        let port = ephemeral_port()?;
        let io = match dev {
            Some(d) => SctpIo::Dev(DevSctpIo::open(d, &locals, port)?),
            None => SctpIo::Sockets(PacketIo::open(transport, &locals, port)?),
        };
        let ep = endpoint_config(port, &locals, transport, a.mtu, false, a.multipath)?;
        Ok(SctpConnect {
            io,
            ep,
            remote,
            peer_port: a.port,
            mtu: a.mtu,
        })
    }
}

#[derive(Debug)]
enum AssocRole {
    /// Passive: waiting for the Session Initiate.
    Waiting {
        held: Vec<Message>,
        deadline: Instant,
    },
    /// Passive: reported as a connection request.
    Requested { req: ConnReqId, held: Vec<Message> },
    /// A QP runs on it.
    Qp {
        qp: Arc<QpShared>,
        /// SHUTDOWN started.
        shut: bool,
        /// The QP's span (id, LLP, the association's tag and peer), entered while it runs.
        span: tracing::Span,
    },
    /// Rejected: shutting down.
    Closing { deadline: Instant },
}

/// One SCTP endpoint of the core.
#[derive(Debug)]
pub(crate) struct SctpEp {
    ep: Endpoint,
    io: SctpIo,
    listener: Option<ListenerId>,
    scheme: &'static str,
    mtu: usize,
    overhead: usize,
    assocs: HashMap<AssocId, AssocRole>,
    /// Tokens of the sockets (the first is the endpoint's key in the core).
    pub(super) tokens: Vec<Token>,
    /// Counts an active association's endpoint in its lane's load once it is placed
    /// (established, with several progress threads); `None` until then, and for a
    /// listener's endpoint, which stays on lane 0.
    placed: Option<LoadGuard>,
    /// A listener's endpoint: its configuration, for the endpoints of the associations it
    /// moves to other progress threads.
    config: Option<EndpointConfig>,
    /// A listener's endpoint: the associations it accepted that run on other progress
    /// threads, whose packets it passes on.
    diverts: Vec<Divert>,
    /// A listener's endpoint: the associations placed on this progress thread (counted in
    /// its load while they last).
    kept: HashMap<AssocId, LoadGuard>,
}

impl SctpEp {
    /// Puts `qp` on association `id`; returns the QP's span.
    fn run_qp(&mut self, id: AssocId, qp: &Arc<QpShared>) -> tracing::Span {
        let span = qp_span(qp, &self.ep, id);
        self.assocs.insert(
            id,
            AssocRole::Qp {
                qp: qp.clone(),
                shut: false,
                span: span.clone(),
            },
        );
        span
    }

    /// Whether the endpoint's packets go through `dev`.
    pub(super) fn on_dev(&self, dev: &SharedDev) -> bool {
        self.io.on_dev(dev)
    }

    /// The QP whose association this is.
    pub(super) fn has_qp(&self, qp: &Arc<QpShared>) -> bool {
        self.assocs
            .values()
            .any(|r| matches!(r, AssocRole::Qp { qp: q, .. } if Arc::ptr_eq(q, qp)))
    }

    fn assoc_of(&self, qp: &Arc<QpShared>) -> Option<AssocId> {
        self.assocs.iter().find_map(|(id, r)| match r {
            AssocRole::Qp { qp: q, .. } if Arc::ptr_eq(q, qp) => Some(*id),
            _ => None,
        })
    }

    /// The next deadline: SCTP's timers, setup timers, the engines'.
    pub(super) fn next_deadline(&self, now: Instant) -> Option<Instant> {
        let mut next = self.ep.poll_timeout();
        let mut consider = |d: Option<Instant>| {
            if let Some(d) = d {
                next = Some(next.map_or(d, |n: Instant| n.min(d)));
            }
        };
        for r in self.assocs.values() {
            match r {
                AssocRole::Waiting { deadline, .. } | AssocRole::Closing { deadline } => {
                    consider(Some(*deadline))
                }
                AssocRole::Qp { qp, .. } => consider(qp.engine_deadline(now)),
                AssocRole::Requested { .. } => {}
            }
        }
        if self.listener.is_none() && !self.diverts.is_empty() {
            consider(Some(now + DIVERT_CHECK));
        }
        next
    }

    /// Some QP on this endpoint rang its doorbell, the listener's endpoint passed packets
    /// to it, or (a listener's) an association it passed on ended.
    pub(super) fn doorbell(&self) -> bool {
        let inbox = matches!(&self.io, SctpIo::Diverted(d) if d.inbox.pending.swap(false, Ordering::SeqCst));
        let ended = self
            .diverts
            .iter()
            .any(|d| d.inbox.closed.load(Ordering::SeqCst));
        let posted = self.assocs.values().any(|r| {
            matches!(r, AssocRole::Qp { qp, .. } if qp.tx_pending.swap(false, Ordering::SeqCst))
        });
        inbox || ended || posted
    }

    /// Reads the packets waiting on the endpoint's sockets (or passed to it); a listener's
    /// endpoint passes those of the associations it moved to other progress threads on to
    /// them. Returns the QPs of the associations it passed packets to.
    fn receive(&mut self, now: Instant) -> Vec<Arc<QpShared>> {
        self.diverts
            .retain(|d| !d.inbox.closed.load(Ordering::SeqCst));
        let (SctpIo::Sockets(p), false) = (&mut self.io, self.diverts.is_empty()) else {
            self.io.receive(&mut self.ep, now, RECV_BATCH);
            return Vec::new();
        };
        let diverts = &self.diverts;
        let mut passed = vec![false; diverts.len()];
        p.receive_with(&mut self.ep, now, RECV_BATCH, |pkt| {
            let Some(i) = diverts.iter().position(|d| d.takes(pkt)) else {
                return false;
            };
            let d = &diverts[i];
            if d.inbox.closed.load(Ordering::SeqCst) {
                return false;
            }
            let mut q = d.inbox.packets.lock().unwrap_or_else(|p| p.into_inner());
            if q.len() < INBOX_LIMIT {
                q.push_back(pkt.to_packet());
            }
            d.inbox.pending.store(true, Ordering::SeqCst);
            passed[i] = true;
            true
        });
        diverts
            .iter()
            .zip(passed)
            .filter(|(_, p)| *p)
            .map(|(d, _)| d.qp.clone())
            .collect()
    }

    /// Nothing left to serve: not listening, no association of its own, and (a listener's)
    /// none it passes packets to on another thread.
    fn finished(&self) -> bool {
        self.listener.is_none()
            && self.assocs.is_empty()
            && self
                .diverts
                .iter()
                .all(|d| d.inbox.closed.load(Ordering::SeqCst))
    }

    /// A listener's associations that are established and not placed yet.
    fn accepted_ready(&self) -> Vec<(AssocId, Arc<QpShared>)> {
        if self.config.is_none() || !matches!(self.io, SctpIo::Sockets(_)) {
            return Vec::new();
        }
        self.assocs
            .iter()
            .filter_map(|(id, r)| match r {
                AssocRole::Qp {
                    qp, shut: false, ..
                } if qp.engine_rts() && !self.kept.contains_key(id) => Some((*id, qp.clone())),
                _ => None,
            })
            .collect()
    }

    /// Takes accepted association `id` (of `qp`) out of this listener's endpoint into an
    /// endpoint of its own for another progress thread; its packets are passed on to it
    /// from now on.
    fn divert(&mut self, id: AssocId, qp: &Arc<QpShared>) -> io::Result<SctpEp> {
        let (SctpIo::Sockets(p), Some(cfg)) = (&self.io, &self.config) else {
            return Err(io::Error::other("not a listener's endpoint on sockets"));
        };
        let io = p.try_clone()?;
        let mut c = cfg.clone();
        c.accept_incoming = false;
        let mut key = [0u8; 32];
        getrandom::fill(&mut key)
            .map_err(|e| io::Error::other(format!("OS random generator: {e}")))?;
        c.entropy = Some(key);
        if self.ep.association(id).is_none() || !self.assocs.contains_key(&id) {
            return Err(io::Error::other("association gone"));
        }
        let (Some(role), Some(a)) = (self.assocs.remove(&id), self.ep.remove(id)) else {
            return Err(io::Error::other("association gone"));
        };
        self.diverts.push(Divert {
            peers: a.remote_addresses().iter().map(|r| r.ip()).collect(),
            port: a.peer_port(),
            tag: a.local_tag(),
            inbox: Arc::new(Inbox::default()),
            qp: qp.clone(),
        });
        let inbox = self
            .diverts
            .last()
            .map(|d| d.inbox.clone())
            .unwrap_or_default();
        let mut ep = Endpoint::new(c);
        let moved = ep.adopt(a);
        Ok(SctpEp {
            ep,
            io: SctpIo::Diverted(DivertedIo {
                io,
                inbox,
                qp: qp.clone(),
            }),
            listener: None,
            scheme: self.scheme,
            mtu: self.mtu,
            overhead: self.overhead,
            assocs: HashMap::from([(moved, role)]),
            tokens: Vec::new(),
            placed: None,
            config: None,
            diverts: Vec::new(),
            kept: HashMap::new(),
        })
    }

    /// The QP of an active association's endpoint, once it is established and may move
    /// to another progress thread: not a listener's endpoint (its associations share its
    /// sockets), nor one on a device (the device's rings are lane 0's).
    fn placeable_qp(&self) -> Option<&Arc<QpShared>> {
        if self.placed.is_some() || self.listener.is_some() || matches!(self.io, SctpIo::Dev(_)) {
            return None;
        }
        let mut roles = self.assocs.values();
        match (roles.next(), roles.next()) {
            (
                Some(AssocRole::Qp {
                    qp, shut: false, ..
                }),
                None,
            ) if qp.engine_rts() => Some(qp),
            _ => None,
        }
    }

    /// Whether the connection request `req` is pending here.
    pub(super) fn has_request(&self, req: ConnReqId) -> bool {
        self.assocs
            .values()
            .any(|r| matches!(r, AssocRole::Requested { req: q, .. } if *q == req))
    }
}

impl Core {
    fn register_sctp(&mut self, mut e: SctpEp) -> io::Result<Token> {
        let fds: Vec<i32> = e.io.fds().iter().map(|f| f.as_raw_fd()).collect();
        let mut tokens = Vec::new();
        if let SctpIo::Dev(d) = &e.io {
            // On a device: serviced when the device's stack has something for it.
            let dev = d.dev.clone();
            self.watch_dev(&dev);
            tokens.push(self.token());
        }
        if let SctpIo::Diverted(_) = &e.io {
            // Serviced when the listener's endpoint rings (packets) or a QP does.
            tokens.push(self.token());
        }
        for fd in fds {
            let t = self.token();
            if let Err(err) =
                self.poll
                    .registry()
                    .register(&mut SourceFd(&fd), t, Interest::READABLE)
            {
                for fd in e.io.fds() {
                    let _ = self
                        .poll
                        .registry()
                        .deregister(&mut SourceFd(&fd.as_raw_fd()));
                }
                return Err(err);
            }
            tokens.push(t);
        }
        let key = tokens[0];
        for t in &tokens[1..] {
            self.aliases.insert(*t, key);
        }
        e.tokens = tokens;
        self.add_conn(key, Conn::Sctp(Box::new(e)));
        Ok(key)
    }

    /// Drops an endpoint (its associations are gone or aborted).
    pub(super) fn remove_sctp(&mut self, key: Token) {
        drop(self.take_sctp(key));
    }

    /// Takes an endpoint out of this core: its sockets leave the epoll set, its timers and
    /// tokens are forgotten.
    fn take_sctp(&mut self, key: Token) -> Option<Box<SctpEp>> {
        self.timerq.forget(key);
        let Some(Conn::Sctp(mut e)) = self.conns.remove(&key) else {
            return None;
        };
        for fd in e.io.fds() {
            let _ = self
                .poll
                .registry()
                .deregister(&mut SourceFd(&fd.as_raw_fd()));
        }
        for t in e.tokens.drain(..) {
            self.aliases.remove(&t);
        }
        Some(e)
    }

    pub(super) fn listen_sctp(&mut self, shared: &Shared, id: ListenerId, l: SctpListen) {
        tracing::info!(
            listener = id.0,
            addrs = ?l.io.local_addrs(),
            port = l.ep.port,
            udp_port = l.io.udp_port(),
            "SCTP listener"
        );
        let overhead = l.ep.association.encapsulation_overhead;
        let cfg = l.ep.clone();
        let e = SctpEp {
            ep: Endpoint::new(l.ep),
            io: l.io,
            listener: Some(id),
            scheme: l.scheme,
            mtu: l.mtu,
            overhead,
            assocs: HashMap::new(),
            tokens: Vec::new(),
            placed: None,
            config: Some(cfg),
            diverts: Vec::new(),
            kept: HashMap::new(),
        };
        if let Ok(t) = self.register_sctp(e) {
            self.service_sctp(shared, t);
        }
    }

    pub(super) fn connect_sctp(
        &mut self,
        shared: &Shared,
        qp: Arc<QpShared>,
        c: SctpConnect,
        cfg: mpa::Config,
    ) {
        let now = self.now();
        let overhead = c.ep.association.encapsulation_overhead;
        let mut ep = Endpoint::new(c.ep);
        let id = match ep.connect(now, engine_addr(c.remote), c.peer_port) {
            Ok(id) => id,
            Err(e) => {
                qp.flush_early();
                fail_connect(shared, &qp, CmError::Tcp(format!("SCTP connect: {e}")));
                return;
            }
        };
        let seg = max_segment(c.mtu, c.remote.is_ipv6(), overhead);
        if !assoc_qp::start_initiator(shared, &qp, &cfg, seg, now) {
            return;
        }
        let mut e = SctpEp {
            ep,
            io: c.io,
            listener: None,
            scheme: "sctp",
            mtu: c.mtu,
            overhead,
            assocs: HashMap::new(),
            tokens: Vec::new(),
            placed: None,
            config: None,
            diverts: Vec::new(),
            kept: HashMap::new(),
        };
        e.run_qp(id, &qp);
        match self.register_sctp(e) {
            Ok(t) => self.service_sctp(shared, t),
            Err(err) => {
                let mut s = qp.lock();
                if let Some(e) = s.engine.as_mut() {
                    e.handle_closed(now, CloseReason::Reset);
                }
                drop(s);
                fail_connect(shared, &qp, CmError::Tcp(format!("SCTP sockets: {err}")));
            }
        }
    }

    /// The endpoint, association and held messages (the Initiate) of SCTP connection
    /// request `req`, taken out of the request.
    fn take_request(&mut self, req: ConnReqId) -> Option<(Token, AssocId, Vec<Message>)> {
        let key = self.sctp_with(|e| e.has_request(req))?;
        let Some(Conn::Sctp(e)) = self.conns.get_mut(&key) else {
            return None;
        };
        e.assocs.iter_mut().find_map(|(id, r)| match r {
            AssocRole::Requested { req: q, held } if *q == req => {
                Some((key, *id, std::mem::take(held)))
            }
            _ => None,
        })
    }

    /// Accepts request `req` on `qp` if it is an SCTP one; false if no endpoint has it.
    pub(super) fn accept_sctp(
        &mut self,
        shared: &Shared,
        req: ConnReqId,
        qp: &Arc<QpShared>,
        cfg: &mpa::Config,
    ) -> bool {
        let Some((key, id, held)) = self.take_request(req) else {
            return false;
        };
        let now = self.now();
        let Some(Conn::Sctp(e)) = self.conns.get_mut(&key) else {
            return false;
        };
        let v6 =
            e.ep.association(id)
                .and_then(|a| a.remote_addresses().first().copied())
                .is_some_and(|a| a.is_ipv6());
        let seg = max_segment(e.mtu, v6, e.overhead);
        // Entered while the engine takes the held Initiate and is established.
        let entered = e.run_qp(id, qp).entered();
        let held = held.iter().map(|m| (m.ppid, m.unordered, m.data.as_ref()));
        if !assoc_qp::start_responder(shared, qp, cfg, seg, held, now)
            && let Some(Conn::Sctp(e)) = self.conns.get_mut(&key)
            && let Some(a) = e.ep.association_mut(id)
        {
            a.abort();
        }
        drop(entered);
        self.service_sctp(shared, key);
        true
    }

    /// Rejects request `req` if it is an SCTP one (Session Reject with `pd`, then SCTP
    /// SHUTDOWN); false if no endpoint has it.
    pub(super) fn reject_sctp(&mut self, shared: &Shared, req: ConnReqId, pd: &[u8]) -> bool {
        let Some((key, id, held)) = self.take_request(req) else {
            return false;
        };
        let now = self.now();
        let Some(Conn::Sctp(e)) = self.conns.get_mut(&key) else {
            return false;
        };
        let out = assoc_qp::reject_messages(
            held.iter().map(|m| (m.ppid, m.unordered, m.data.as_ref())),
            pd,
        );
        if let Some(a) = e.ep.association_mut(id) {
            for o in out {
                let _ = a.send(o.stream, o.ppid, true, &o.data);
            }
            a.shutdown(now);
        }
        e.assocs.insert(
            id,
            AssocRole::Closing {
                deadline: now + REJECT_LINGER,
            },
        );
        self.service_sctp(shared, key);
        true
    }

    /// The endpoint key whose endpoint satisfies `f`.
    pub(super) fn sctp_with(&self, f: impl Fn(&SctpEp) -> bool) -> Option<Token> {
        self.conns.iter().find_map(|(t, c)| match c {
            Conn::Sctp(e) if f(e) => Some(*t),
            _ => None,
        })
    }

    /// Disconnects `qp`'s SCTP association gracefully; false if it has none.
    pub(super) fn disconnect_sctp(
        &mut self,
        shared: &Shared,
        qp: &Arc<QpShared>,
        to: crate::QpState,
    ) -> bool {
        let Some(key) = self.sctp_with(|e| e.has_qp(qp)) else {
            return false;
        };
        let _span = self.sctp_qp_span(key, qp).map(tracing::Span::entered);
        super::modify_qp(qp, to);
        self.service_sctp(shared, key);
        true
    }

    /// The span of `qp`, served by the SCTP endpoint `key`.
    fn sctp_qp_span(&self, key: Token, qp: &Arc<QpShared>) -> Option<tracing::Span> {
        let Some(Conn::Sctp(e)) = self.conns.get(&key) else {
            return None;
        };
        match e.assocs.get(&e.assoc_of(qp)?) {
            Some(AssocRole::Qp { span, .. }) => Some(span.clone()),
            _ => None,
        }
    }

    /// Aborts `qp`'s SCTP association (QP destroyed); false if it has none.
    pub(super) fn destroy_sctp(&mut self, shared: &Shared, qp: &Arc<QpShared>) -> bool {
        let Some(key) = self.sctp_with(|e| e.has_qp(qp)) else {
            return false;
        };
        let now = self.now();
        // The QP's span, entered while its association is aborted and the QP closed.
        let _span = self.sctp_qp_span(key, qp).map(tracing::Span::entered);
        let Some(Conn::Sctp(e)) = self.conns.get_mut(&key) else {
            return false;
        };
        if let Some(id) = e.assoc_of(qp) {
            if let Some(a) = e.ep.association_mut(id) {
                a.abort();
            }
            e.assocs.remove(&id);
            e.kept.remove(&id);
            e.io.flush(&mut e.ep, now);
        }
        assoc_qp::close(shared, qp, now, CloseReason::Local);
        let drop_ep = matches!(self.conns.get(&key), Some(Conn::Sctp(e)) if e.finished());
        if drop_ep {
            self.remove_sctp(key);
        }
        true
    }

    /// RNIC close: aborts every association of the endpoint with key `key` and drops it.
    pub(super) fn shutdown_sctp(&mut self, shared: &Shared, key: Token) {
        let now = self.now();
        if let Some(Conn::Sctp(e)) = self.conns.get_mut(&key) {
            for (id, r) in e.assocs.drain() {
                let _span = match &r {
                    AssocRole::Qp { span, .. } => Some(span.clone().entered()),
                    _ => None,
                };
                if let Some(a) = e.ep.association_mut(id) {
                    a.abort();
                }
                if let AssocRole::Qp { qp, .. } = r {
                    assoc_qp::close(shared, &qp, now, CloseReason::Local);
                }
            }
            e.io.flush(&mut e.ep, now);
        }
        self.remove_sctp(key);
    }

    /// The octets of `qp`'s association not yet acknowledged by the peer.
    pub(super) fn sctp_unacked(&self, qp: &Arc<QpShared>) -> Option<u64> {
        self.conns.values().find_map(|c| match c {
            Conn::Sctp(e) => e
                .assoc_of(qp)
                .and_then(|id| e.ep.association(id))
                .map(|a| a.buffered_amount() as u64),
            _ => None,
        })
    }

    /// Services the endpoint with key `key`: packets, timers, associations, QPs.
    pub(super) fn service_sctp(&mut self, shared: &Shared, key: Token) {
        self.timerq.mark(key);
        let now = self.now();
        let Some(Conn::Sctp(e)) = self.conns.get_mut(&key) else {
            return;
        };
        for qp in e.receive(now) {
            shared.nudge(&qp);
        }
        if e.ep.poll_timeout().is_some_and(|d| d <= now) {
            e.ep.handle_timeout(now);
        }
        e.accept_new(now);
        let events = e.take_events();
        let ids: Vec<AssocId> = e.assocs.keys().copied().collect();
        let gone: Vec<AssocId> = ids
            .into_iter()
            .filter(|&id| e.step_assoc(shared, id, &events, now))
            .collect();
        // Send first: a closing association's last packet (SHUTDOWN COMPLETE, ABORT) is
        // still in it.
        e.io.flush(&mut e.ep, now);
        for id in &gone {
            e.kept.remove(id);
            if e.ep
                .association(*id)
                .is_some_and(|a| a.state() == State::Closed)
            {
                e.ep.remove(*id);
            }
        }
        let drop_ep = e.finished();
        if drop_ep {
            if let SctpIo::Diverted(d) = &e.io {
                // The listener's endpoint stops passing packets on (and, when it no longer
                // listens, goes with its last association).
                let qp = d.qp.clone();
                self.remove_sctp(key);
                shared.nudge_lane(0, &qp);
            } else {
                self.remove_sctp(key);
            }
        } else if !shared.lanes.is_empty() {
            if let Some(qp) = e.placeable_qp().cloned() {
                self.place_sctp(shared, key, qp);
            } else {
                for (id, qp) in e.accepted_ready() {
                    self.place_accepted(shared, key, id, qp);
                }
            }
        }
    }

    /// Places an established association a listener accepted on the least-loaded lane:
    /// when that is another one, the association moves to an endpoint of its own there,
    /// and the listener's endpoint passes it its packets.
    fn place_accepted(&mut self, shared: &Shared, key: Token, id: AssocId, qp: Arc<QpShared>) {
        let (to, guard) = least_loaded(shared);
        let Some(Conn::Sctp(e)) = self.conns.get_mut(&key) else {
            return;
        };
        if to == self.lane || shared.stop.load(Ordering::SeqCst) {
            e.kept.insert(id, guard);
            return;
        }
        let mut moved = match e.divert(id, &qp) {
            Ok(m) => m,
            Err(err) => {
                tracing::warn!(qp = qp.id.0, error = %err, "cannot move the accepted SCTP association to another progress thread: it stays on thread 0");
                e.kept.insert(id, guard);
                return;
            }
        };
        moved.placed = Some(guard);
        migrate_sctp(shared, to, qp, Box::new(moved));
    }

    /// Closes SCTP listener `id`: new INITs get an ABORT (RFC 9260 §8.4), associations
    /// still waiting for their Session Initiate are aborted; connection requests already
    /// reported and the associations running QPs go on (the endpoint goes with the last of
    /// them). False if no SCTP endpoint listens as `id`.
    pub(super) fn close_sctp_listener(&mut self, shared: &Shared, id: ListenerId) -> bool {
        let Some(key) = self.sctp_with(|e| e.listener == Some(id)) else {
            return false;
        };
        if let Some(Conn::Sctp(e)) = self.conns.get_mut(&key) {
            e.listener = None;
            e.ep.set_accept_incoming(false);
            let waiting: Vec<AssocId> = e
                .assocs
                .iter()
                .filter(|(_, r)| matches!(r, AssocRole::Waiting { .. }))
                .map(|(id, _)| *id)
                .collect();
            for a in waiting {
                if let Some(a) = e.ep.association_mut(a) {
                    a.abort();
                }
            }
        }
        self.service_sctp(shared, key);
        true
    }

    /// Places an established active association's endpoint on the least-loaded lane, as
    /// [`Core::place`] does a TCP connection: moving it there when that is not this one.
    fn place_sctp(&mut self, shared: &Shared, key: Token, qp: Arc<QpShared>) {
        let (to, guard) = least_loaded(shared);
        if to == self.lane || shared.stop.load(Ordering::SeqCst) {
            if let Some(Conn::Sctp(e)) = self.conns.get_mut(&key) {
                e.placed = Some(guard);
            }
            return;
        }
        let Some(mut e) = self.take_sctp(key) else {
            return;
        };
        e.placed = Some(guard);
        migrate_sctp(shared, to, qp, e);
    }

    /// Takes over an active association's endpoint placed on this lane: its sockets join
    /// this core's epoll set and it is serviced at once (work posted while it moved is in
    /// its QP's rings).
    pub(super) fn take_over_sctp(&mut self, shared: &Shared, qp: Arc<QpShared>, e: SctpEp) {
        match self.register_sctp(e) {
            Ok(t) => self.service_sctp(shared, t),
            Err(err) => {
                tracing::warn!(qp = qp.id.0, error = %err, "cannot watch the placed SCTP endpoint: aborting its association");
                end_engine(shared, &qp, self.now(), Some(CloseReason::Reset));
            }
        }
    }
}

/// Hands the endpoint `e` of `qp`'s association to lane `to`.
fn migrate_sctp(shared: &Shared, to: usize, qp: Arc<QpShared>, e: Box<SctpEp>) {
    if let Some(AssocRole::Qp { span, .. }) = e.assocs.values().next() {
        tracing::debug!(parent: span, lane = to, "placed on progress thread");
    }
    let lane = shared.lane(to);
    let mut cmds = lane.cmds.lock().unwrap_or_else(|p| p.into_inner());
    // Under the new lane's command lock, as for TCP: a command of the QP's that reads the new
    // lane is queued behind the endpoint; one that read the old lane is forwarded.
    qp.lane.store(to, Ordering::SeqCst);
    cmds.push_back(Cmd::MigrateSctp(qp, e));
    drop(cmds);
    lane.ring();
}

/// What an endpoint's associations reported in one pass.
#[derive(Default)]
struct AssocEvents {
    /// Associations that ended, and how.
    ended: Vec<(AssocId, CloseReason)>,
    /// Path changes.
    paths: Vec<(AssocId, IpAddr, PathChange)>,
}

impl SctpEp {
    /// New associations: a listener's wait for their Session Initiate; without a listener
    /// they are aborted.
    fn accept_new(&mut self, now: Instant) {
        while let Some(id) = self.ep.accept() {
            tracing::debug!(
                vtag = self.ep.association(id).map(|a| a.local_tag()),
                peer = %peer_of(&self.ep, id),
                "SCTP association accepted"
            );
            if self.listener.is_some() {
                self.assocs.insert(
                    id,
                    AssocRole::Waiting {
                        held: Vec::new(),
                        deadline: now + INITIATE_TIMEOUT,
                    },
                );
            } else if let Some(a) = self.ep.association_mut(id) {
                a.abort();
            }
        }
    }

    /// The associations' events. An association that came up without the peer announcing
    /// the DDP adaptation is aborted (RFC 5043 §11.1).
    fn take_events(&mut self) -> AssocEvents {
        let mut ev = AssocEvents::default();
        let mut up: Vec<AssocId> = Vec::new();
        while let Some((id, e)) = self.ep.poll_event() {
            match e {
                sctp::Event::Connected => up.push(id),
                sctp::Event::ShutdownComplete => ev.ended.push((id, CloseReason::PeerClosed)),
                sctp::Event::Aborted { .. } => ev.ended.push((id, CloseReason::Reset)),
                sctp::Event::PathUp { remote } => ev.paths.push((id, remote.ip(), PathChange::Up)),
                sctp::Event::PathPotentiallyFailed { remote } => {
                    ev.paths
                        .push((id, remote.ip(), PathChange::PotentiallyFailed))
                }
                sctp::Event::PathDown { remote } => {
                    ev.paths.push((id, remote.ip(), PathChange::Down))
                }
                sctp::Event::PrimaryChanged { remote } => {
                    ev.paths.push((id, remote.ip(), PathChange::Primary))
                }
                sctp::Event::DataReadable { .. }
                | sctp::Event::ErrorReceived { .. }
                | sctp::Event::Restarted => {}
            }
        }
        for id in up {
            if let Some(a) = self.ep.association_mut(id)
                && !PeerAdaptation::classify(a.peer_adaptation_indication()).ddp_allowed()
            {
                tracing::warn!(
                    vtag = a.local_tag(),
                    indication = ?a.peer_adaptation_indication(),
                    "peer did not announce the DDP adaptation (RFC 5043 §11.1): aborting"
                );
                a.abort();
                ev.ended.push((id, CloseReason::Reset));
            }
        }
        ev
    }

    /// One association's pass: its messages go to its QP (or wait for one), its end and
    /// path changes are reported. `true`: it is done and leaves the endpoint's list.
    fn step_assoc(&mut self, shared: &Shared, id: AssocId, ev: &AssocEvents, now: Instant) -> bool {
        let mut msgs = Vec::new();
        if let Some(a) = self.ep.association_mut(id) {
            while let Some(m) = a.recv() {
                msgs.push(m);
            }
        }
        let end = ev.ended.iter().find(|(i, _)| *i == id).map(|(_, r)| *r);
        let gone = end.is_some()
            || self
                .ep
                .association(id)
                .is_none_or(|a| a.state() == State::Closed);
        let Some(mut role) = self.assocs.remove(&id) else {
            return true;
        };
        let done = match &mut role {
            AssocRole::Waiting { held, deadline } => {
                held.extend(msgs);
                let deadline = *deadline;
                match self.step_waiting(shared, id, held, gone, deadline, now) {
                    Waited::Done => true,
                    Waited::Waiting => false,
                    Waited::Requested(req) => {
                        role = AssocRole::Requested {
                            req,
                            held: std::mem::take(held),
                        };
                        false
                    }
                }
            }
            AssocRole::Requested { req, held } => {
                held.extend(msgs);
                if gone {
                    shared.withdraw_request(*req);
                }
                gone
            }
            AssocRole::Closing { deadline } => {
                let done = gone || now >= *deadline;
                if done
                    && let Some(a) = self.ep.association_mut(id)
                    && a.state() != State::Closed
                {
                    a.abort();
                }
                done
            }
            AssocRole::Qp { qp, shut, span } => {
                let qp = qp.clone();
                let _span = span.clone().entered();
                for (_, remote, change) in ev.paths.iter().filter(|(i, _, _)| *i == id) {
                    shared.publish(Event::Path {
                        qp: qp.id,
                        remote: *remote,
                        change: *change,
                    });
                }
                let vanished = self
                    .ep
                    .association(id)
                    .is_none_or(|a| a.state() == State::Closed);
                drive_qp(
                    shared,
                    &mut self.ep,
                    id,
                    &qp,
                    shut,
                    msgs,
                    end,
                    vanished,
                    now,
                )
            }
        };
        if !done {
            self.assocs.insert(id, role);
        }
        done
    }

    /// A passive association waiting for its Session Initiate: the first message it held
    /// is the Initiate (reported as a connection request), something else (the session
    /// ends, RFC 5043 §6.1), or nothing yet (until the deadline).
    fn step_waiting(
        &mut self,
        shared: &Shared,
        id: AssocId,
        held: &[Message],
        gone: bool,
        deadline: Instant,
        now: Instant,
    ) -> Waited {
        if gone {
            return Waited::Done;
        }
        let Some(first) = held.first() else {
            if now >= deadline {
                if let Some(a) = self.ep.association_mut(id) {
                    a.abort();
                }
                return Waited::Done;
            }
            return Waited::Waiting;
        };
        match assoc_qp::parse_initiate(first.ppid, &first.data) {
            Some(initiate) => Waited::Requested(self.report_initiate(shared, id, initiate)),
            None => {
                // Not an Initiate (RFC 5043 §6.1): end the session.
                if let Some(a) = self.ep.association_mut(id) {
                    a.abort();
                }
                Waited::Done
            }
        }
    }

    /// A Session Initiate arrived on association `id`: a connection request for the
    /// application.
    fn report_initiate(&self, shared: &Shared, id: AssocId, initiate: Initiate) -> ConnReqId {
        let none = SocketAddr::from(([0, 0, 0, 0], 0));
        let (peer, peer_addrs, local) = match self.ep.association(id) {
            Some(a) => {
                let r = a.remote_addresses();
                let p = r
                    .first()
                    .map_or(none, |x| SocketAddr::new(x.ip(), a.peer_port()));
                let local_ip = self.io.local_addrs().first().copied().unwrap_or(p.ip());
                (
                    p,
                    r.iter().map(|x| x.ip()).collect(),
                    SocketAddr::new(local_ip, self.ep.port()),
                )
            }
            None => (none, Vec::new(), none),
        };
        let from = RequestFrom {
            listener: self.listener,
            peer,
            peer_addrs,
            local,
            scheme: self.scheme,
        };
        assoc_qp::report_request(shared, from, initiate)
    }
}

/// Where a passive association waiting for its Initiate stands after a pass.
enum Waited {
    /// Still waiting.
    Waiting,
    /// Reported as a connection request.
    Requested(ConnReqId),
    /// Ended (gone, timed out, or not an Initiate).
    Done,
}

/// The span of `qp` running on association `id`.
fn qp_span(qp: &QpShared, ep: &Endpoint, id: AssocId) -> tracing::Span {
    tracing::info_span!(
        "qp",
        qp = qp.id.0,
        llp = "SCTP",
        vtag = ep.association(id).map(|a| a.local_tag()),
        peer = %peer_of(ep, id),
    )
}

/// The peer of association `id` in words: its addresses and its SCTP port (a path's
/// address carries no port of its own).
fn peer_of(ep: &Endpoint, id: AssocId) -> String {
    ep.association(id).map_or_else(
        || "?".to_string(),
        |a| {
            let ips: Vec<String> = a
                .remote_addresses()
                .iter()
                .map(|s| s.ip().to_string())
                .collect();
            format!("{} port {}", ips.join(","), a.peer_port())
        },
    )
}

/// Moves a QP's messages both ways; true when the association is over.
#[allow(clippy::too_many_arguments)]
fn drive_qp(
    shared: &Shared,
    ep: &mut Endpoint,
    id: AssocId,
    qp: &Arc<QpShared>,
    shut: &mut bool,
    msgs: Vec<Message>,
    end: Option<CloseReason>,
    vanished: bool,
    now: Instant,
) -> bool {
    let mut slot = qp.lock();
    let Some(eng) = slot.engine.as_mut() else {
        return true;
    };
    qp.drain_rings(eng);
    for m in msgs {
        eng.handle_message(now, m.ppid, m.unordered, &m.data);
    }
    if eng.poll_timeout().is_some_and(|d| d <= now) {
        eng.handle_timeout(now);
    }
    let mut finished = false;
    if let Some(a) = ep.association_mut(id) {
        let up = matches!(
            a.state(),
            State::Established | State::ShutdownPending | State::ShutdownReceived
        );
        if up && !*shut {
            // RFC 5043 §10: at most 32767 DATA chunks of the stream unacknowledged.
            let mut room: Option<usize> = None;
            while let Some((stream, _, data)) = eng.poll_message() {
                let r = room.get_or_insert_with(|| {
                    ddp_adapt::MAX_UNACKED_CHUNKS.saturating_sub(a.unacked_chunks(stream))
                });
                if *r == 0 {
                    break;
                }
                *r -= 1;
                match a.check_send(stream, data.len()) {
                    Ok(()) => {}
                    Err(sctp::SendError::BufferFull { .. }) => break,
                    Err(_) => {
                        finished = true;
                        break;
                    }
                }
                // Checked: queued as it is, without a copy.
                if let Some((stream, ppid, data)) = eng.take_message() {
                    let _ = a.send_owned(stream, ppid, true, data);
                }
            }
        }
        if eng.should_close_transport() && !*shut {
            *shut = true;
            a.shutdown(now);
        }
    }
    if let Some(reason) = end.or(vanished.then_some(CloseReason::Reset)) {
        eng.handle_closed(now, assoc_qp::end_reason(*shut, reason));
        finished = true;
    }
    if finished && qp.status() == ConnStatus::Connecting {
        // SetupFailed from handle_closed sets the status.
    }
    super::drain_events(shared, qp, Some(&mut *eng));
    qp.publish_engine(eng, !finished);
    finished
}
