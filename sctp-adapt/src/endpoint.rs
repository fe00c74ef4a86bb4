//! The endpoint: one local SCTP port with its addresses. It demultiplexes packets to
//! associations, answers INITs statelessly with a signed cookie (RFC 9260 §5.1), creates
//! associations from valid COOKIE ECHOs, and handles out-of-the-blue packets (§8.4).

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::net::SocketAddr;

use thiserror::Error;

use crate::assoc::{Association, Event, Shared, Transmit};
use crate::config::EndpointConfig;
use crate::cookie::Cookie;
use crate::init::{InitReply, Responder, answer_init};
use crate::rng::Rng;
use crate::time::Instant;
use crate::wire::{self, Chunk, ChunkIter, CommonHeader, ErrorCause, Packet, RawChunk, chunk_type};

/// Identifies an association within its endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AssocId(pub u64);

impl fmt::Display for AssocId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "association {}", self.0)
    }
}

/// Why [`Endpoint::connect`] failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ConnectError {
    /// An association with that peer address and port exists already.
    #[error("an association with {0} exists already")]
    Exists(SocketAddr),
    /// The endpoint has no local address of the remote's family.
    #[error("no local address of the same IP family as {0}")]
    NoLocalAddress(SocketAddr),
}

/// Endpoint counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EndpointStats {
    /// Packets with a bad CRC32c (silently discarded, RFC 9260 §6.8).
    pub bad_checksum: u64,
    /// Packets too short, with broken chunk framing or for another port.
    pub malformed: u64,
    /// INIT ACKs sent.
    pub init_acks_sent: u64,
    /// COOKIE ECHOs refused because the MAC did not verify.
    pub bad_cookies: u64,
    /// Stale cookie errors sent.
    pub stale_cookies: u64,
    /// Out-of-the-blue packets answered with ABORT.
    pub ootb_aborts: u64,
    /// Out-of-the-blue packets discarded silently.
    pub ootb_discarded: u64,
    /// State Cookie secret keys replaced (RFC 9260 §5.1.3).
    pub key_rotations: u64,
}

/// An SCTP endpoint (sans-IO).
#[derive(Debug)]
pub struct Endpoint {
    shared: Shared,
    accept_incoming: bool,
    rng: Rng,
    assocs: BTreeMap<AssocId, Association>,
    tags: BTreeMap<u32, AssocId>,
    tag_of: BTreeMap<AssocId, u32>,
    next_id: u64,
    ctrl: VecDeque<Transmit>,
    accept_queue: VecDeque<AssocId>,
    stats: EndpointStats,
    /// The cookie key before the current one (cookies it signed still verify).
    prev_key: Option<[u8; 32]>,
    /// When the current cookie key took over (set at the first packet).
    key_born: Option<Instant>,
}

impl Endpoint {
    /// Creates an endpoint.
    pub fn new(config: EndpointConfig) -> Endpoint {
        let mut rng = match config.entropy {
            Some(k) => Rng::from_key(k),
            None => Rng::new(config.seed),
        };
        let key = config.cookie_secret.unwrap_or_else(|| rng.key());
        Endpoint {
            shared: Shared {
                config: config.association,
                key,
                local_port: config.port,
                local_addrs: config.local_addrs,
            },
            accept_incoming: config.accept_incoming,
            rng,
            assocs: BTreeMap::new(),
            tags: BTreeMap::new(),
            tag_of: BTreeMap::new(),
            next_id: 0,
            ctrl: VecDeque::new(),
            accept_queue: VecDeque::new(),
            stats: EndpointStats::default(),
            prev_key: None,
            key_born: None,
        }
    }

    /// RFC 9260 §5.1.3: replaces the cookie key once it has signed for
    /// `cookie_key_lifetime`; the previous key is kept for cookies it signed. After two or
    /// more lifetimes without a packet both are replaced.
    fn rotate_cookie_key(&mut self, now: Instant) {
        let life = self.shared.config.cookie_key_lifetime;
        let born = *self.key_born.get_or_insert(now);
        if life.is_zero() || now < born + life {
            return;
        }
        let periods = (now - born).as_nanos() / life.as_nanos().max(1);
        self.prev_key = if periods == 1 {
            Some(self.shared.key)
        } else {
            None
        };
        self.shared.key = self.rng.key();
        let advance = u64::try_from(periods)
            .ok()
            .and_then(|p| u32::try_from(p).ok())
            .map_or(now - born, |p| life * p);
        self.key_born = Some(born + advance);
        self.stats.key_rotations += 1;
    }

    /// Local SCTP port.
    pub fn port(&self) -> u16 {
        self.shared.local_port
    }

    /// Counters.
    pub fn stats(&self) -> &EndpointStats {
        &self.stats
    }

    /// Starts an association with the peer at `remote`, SCTP port `peer_port`.
    pub fn connect(
        &mut self,
        now: Instant,
        remote: SocketAddr,
        peer_port: u16,
    ) -> Result<AssocId, ConnectError> {
        if !self
            .shared
            .local_addrs
            .iter()
            .any(|a| a.is_ipv4() == remote.is_ipv4())
        {
            return Err(ConnectError::NoLocalAddress(remote));
        }
        if self.find_by_addr(remote, peer_port).is_some() {
            return Err(ConnectError::Exists(remote));
        }
        let seed = self.rng.key();
        let a = Association::connect(now, self.shared.clone(), seed, remote, peer_port);
        Ok(self.insert(a))
    }

    fn insert(&mut self, a: Association) -> AssocId {
        let id = AssocId(self.next_id);
        self.next_id += 1;
        self.tags.insert(a.local_tag(), id);
        self.tag_of.insert(id, a.local_tag());
        self.assocs.insert(id, a);
        id
    }

    /// The next association created by a peer (a completed incoming handshake).
    pub fn accept(&mut self) -> Option<AssocId> {
        self.accept_queue.pop_front()
    }

    /// An association.
    pub fn association(&self, id: AssocId) -> Option<&Association> {
        self.assocs.get(&id)
    }

    /// An association, mutably (to send, receive, shut down ...).
    pub fn association_mut(&mut self, id: AssocId) -> Option<&mut Association> {
        self.assocs.get_mut(&id)
    }

    /// Ids of all associations still held.
    pub fn associations(&self) -> Vec<AssocId> {
        self.assocs.keys().copied().collect()
    }

    /// Files an association taken out of another endpoint of the same local port and
    /// addresses ([`Endpoint::remove`]) under a new id here: packets for it are then handled
    /// by this endpoint, which lets a program run the associations one listening endpoint
    /// accepted on other threads (each in an endpoint of its own, the packets of each handed
    /// to its endpoint). The association keeps its state, timers and pending events.
    pub fn adopt(&mut self, a: Association) -> AssocId {
        let id = self.insert(a);
        self.sync_tag(id);
        id
    }

    /// Whether incoming INITs are answered from now on: a listening endpoint that stops
    /// listening answers new INITs with ABORT (RFC 9260 §8.4, as an endpoint that never
    /// listened) and refuses COOKIE ECHOs it signed earlier; its associations go on.
    pub fn set_accept_incoming(&mut self, accept: bool) {
        self.accept_incoming = accept;
    }

    /// Forgets an association (closed or not; a live one simply stops answering).
    pub fn remove(&mut self, id: AssocId) -> Option<Association> {
        if let Some(t) = self.tag_of.remove(&id)
            && self.tags.get(&t) == Some(&id)
        {
            self.tags.remove(&t);
        }
        self.assocs.remove(&id)
    }

    fn find_by_addr(&self, remote: SocketAddr, peer_port: u16) -> Option<AssocId> {
        self.assocs
            .iter()
            .find(|(_, a)| a.state() != crate::State::Closed && a.peer_matches(remote, peer_port))
            .map(|(id, _)| *id)
    }

    fn sync_tag(&mut self, id: AssocId) {
        let Some(a) = self.assocs.get(&id) else {
            return;
        };
        let closed = a.state() == crate::State::Closed;
        let tag = a.local_tag();
        let old = self.tag_of.get(&id).copied();
        if closed || old != Some(tag) {
            if let Some(o) = old
                && self.tags.get(&o) == Some(&id)
            {
                self.tags.remove(&o);
            }
            self.tag_of.remove(&id);
        }
        if !closed && old != Some(tag) {
            self.tags.insert(tag, id);
            self.tag_of.insert(id, tag);
        }
    }

    /// Processes a packet received on `local` from `remote`.
    pub fn handle_packet(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        data: &[u8],
    ) {
        let pkt = match Packet::new_verified(data) {
            Ok(pkt) => pkt,
            Err(e) => {
                if matches!(e, wire::WireError::BadChecksum { .. }) {
                    self.stats.bad_checksum += 1;
                } else {
                    self.stats.malformed += 1;
                }
                return;
            }
        };
        let hdr = pkt.header();
        if hdr.dst_port != self.shared.local_port {
            self.stats.malformed += 1;
            return;
        }
        let mut raws: Vec<RawChunk<'_>> = Vec::with_capacity(4);
        for r in ChunkIter::new(pkt.payload()) {
            match r {
                Ok(r) => raws.push(r),
                Err(_) => {
                    self.stats.malformed += 1;
                    return;
                }
            }
        }
        if raws.is_empty() {
            self.stats.malformed += 1;
            return;
        }
        let vtag = hdr.verification_tag;
        let t_bit_reflect = raws.iter().any(|c| {
            (c.chunk_type == chunk_type::ABORT || c.chunk_type == chunk_type::SHUTDOWN_COMPLETE)
                && c.flags & 1 != 0
        });
        let by_tag = self.tags.get(&vtag).copied().filter(|id| {
            self.assocs
                .get(id)
                .is_some_and(|a| a.peer_port() == hdr.src_port)
        });
        // RFC 9260 §8.5: an association is identified by the transport addresses; the tag
        // only validates. The tag index is the fast path; packets whose tag matches nothing
        // (INIT, reflected tags, a COOKIE ECHO after restart, or simply a wrong tag) are
        // matched on the peer's address and port, and the association applies §8.5.1.
        let target = if !t_bit_reflect && by_tag.is_some() {
            by_tag
        } else {
            self.find_by_addr(remote, hdr.src_port)
        };
        if let Some(id) = target {
            if let Some(a) = self.assocs.get_mut(&id) {
                a.handle_verified(now, local, remote, data);
            }
            self.sync_tag(id);
            return;
        }
        self.out_of_the_blue(now, local, remote, hdr, &raws, data);
    }

    /// RFC 9260 §8.4: a packet that belongs to no association.
    fn out_of_the_blue(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        hdr: CommonHeader,
        raws: &[RawChunk<'_>],
        data: &[u8],
    ) {
        let has = |t: u8| raws.iter().any(|c| c.chunk_type == t);
        let reply = |vtag: u32, chunks: &[Chunk<'_>]| Transmit {
            local,
            remote,
            bytes: wire::build_packet(
                &CommonHeader {
                    src_port: hdr.dst_port,
                    dst_port: hdr.src_port,
                    verification_tag: vtag,
                },
                chunks,
            ),
        };
        // (2) ABORT: silently discard.
        if has(chunk_type::ABORT) {
            self.stats.ootb_discarded += 1;
            return;
        }
        // (3) INIT.
        if has(chunk_type::INIT) {
            // §8.5.1 A: tag 0 and alone.
            if raws.len() != 1 || hdr.verification_tag != 0 {
                self.stats.ootb_discarded += 1;
                return;
            }
            let Ok(Chunk::Init(init)) = Chunk::parse(&raws[0]) else {
                self.stats.malformed += 1;
                return;
            };
            if !self.accept_incoming {
                if init.initiate_tag != 0 {
                    self.stats.ootb_aborts += 1;
                    let t = reply(
                        init.initiate_tag,
                        &[Chunk::Abort {
                            t_bit: false,
                            causes: Vec::new(),
                        }],
                    );
                    self.ctrl.push_back(t);
                }
                return;
            }
            self.rotate_cookie_key(now);
            let r = Responder {
                config: &self.shared.config,
                key: &self.shared.key,
                local_port: self.shared.local_port,
                local_addrs: &self.shared.local_addrs,
                local_tag: self.rng.nonzero_u32(),
                local_tsn: self.rng.next_u32(),
                tie_tags: (0, 0),
            };
            match answer_init(now, &r, local, remote, hdr.src_port, &init) {
                InitReply::Discard => self.stats.ootb_discarded += 1,
                InitReply::Abort(bytes) => {
                    self.stats.ootb_aborts += 1;
                    self.ctrl.push_back(Transmit {
                        local,
                        remote,
                        bytes,
                    });
                }
                InitReply::InitAck(bytes) => {
                    self.stats.init_acks_sent += 1;
                    self.ctrl.push_back(Transmit {
                        local,
                        remote,
                        bytes,
                    });
                }
            }
            return;
        }
        // (4) COOKIE ECHO first.
        if let Some(first) = raws.first()
            && first.chunk_type == chunk_type::COOKIE_ECHO
        {
            self.cookie_echo(now, local, remote, hdr, first.value, data);
            return;
        }
        // (5) SHUTDOWN ACK: SHUTDOWN COMPLETE with the T bit, reflecting the tag.
        if has(chunk_type::SHUTDOWN_ACK) {
            let t = reply(
                hdr.verification_tag,
                &[Chunk::ShutdownComplete { t_bit: true }],
            );
            self.ctrl.push_back(t);
            return;
        }
        // (6) SHUTDOWN COMPLETE, (7) COOKIE ACK or an ERROR with Stale Cookie: discard.
        if has(chunk_type::SHUTDOWN_COMPLETE) || has(chunk_type::COOKIE_ACK) {
            self.stats.ootb_discarded += 1;
            return;
        }
        if let Some(e) = raws.iter().find(|c| c.chunk_type == chunk_type::ERROR)
            && let Ok(Chunk::Error(causes)) = Chunk::parse(e)
            && causes
                .iter()
                .any(|c| matches!(c, ErrorCause::StaleCookie { .. }))
        {
            self.stats.ootb_discarded += 1;
            return;
        }
        // (8) Anything else: ABORT with the T bit, reflecting the tag.
        self.stats.ootb_aborts += 1;
        let t = reply(
            hdr.verification_tag,
            &[Chunk::Abort {
                t_bit: true,
                causes: Vec::new(),
            }],
        );
        self.ctrl.push_back(t);
    }

    /// RFC 9260 §5.1.5: a COOKIE ECHO that creates a new association.
    fn cookie_echo(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        hdr: CommonHeader,
        cookie: &[u8],
        data: &[u8],
    ) {
        if !self.accept_incoming {
            self.stats.ootb_discarded += 1;
            return;
        }
        self.rotate_cookie_key(now);
        let opened = Cookie::open(cookie, &self.shared.key).or_else(|e| {
            self.prev_key
                .as_ref()
                .map_or(Err(e), |k| Cookie::open(cookie, k))
        });
        let Ok(c) = opened else {
            // Steps 1-2: a cookie that does not verify is silently discarded.
            self.stats.bad_cookies += 1;
            return;
        };
        if c.local_tag != hdr.verification_tag
            || c.local_port != hdr.dst_port
            || c.peer_port != hdr.src_port
        {
            self.stats.bad_cookies += 1;
            return;
        }
        let expires = c.created_ns.saturating_add(c.lifetime_ns);
        if now.as_nanos() > expires {
            // Step 3: stale: ERROR with the measure of staleness (µs).
            self.stats.stale_cookies += 1;
            let stale_us = ((now.as_nanos() - expires) / 1000).min(u64::from(u32::MAX)) as u32;
            let bytes = wire::build_packet(
                &CommonHeader {
                    src_port: hdr.dst_port,
                    dst_port: hdr.src_port,
                    verification_tag: c.peer_tag,
                },
                &[Chunk::Error(vec![ErrorCause::StaleCookie {
                    staleness_us: stale_us,
                }])],
            );
            self.ctrl.push_back(Transmit {
                local,
                remote,
                bytes,
            });
            return;
        }
        let seed = self.rng.key();
        let a = Association::from_cookie(now, self.shared.clone(), seed, &c, remote);
        let id = self.insert(a);
        self.accept_queue.push_back(id);
        // Run the whole packet through the new association: it answers the COOKIE ECHO with
        // COOKIE ACK and processes any DATA bundled behind it.
        if let Some(a) = self.assocs.get_mut(&id) {
            a.handle_verified(now, local, remote, data);
        }
        self.sync_tag(id);
    }

    /// The next packet to send.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        if let Some(t) = self.ctrl.pop_front() {
            return Some(t);
        }
        let mut drained = Vec::new();
        let mut out = None;
        for (id, a) in self.assocs.iter_mut() {
            if let Some(t) = a.poll_transmit(now) {
                out = Some(t);
                break;
            }
            if a.is_drained() && a.events_empty() {
                drained.push(*id);
            }
        }
        for id in drained {
            self.remove(id);
        }
        out
    }

    /// The earliest deadline of any association.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.assocs.values().filter_map(|a| a.poll_timeout()).min()
    }

    /// Runs expired timers.
    pub fn handle_timeout(&mut self, now: Instant) {
        let ids: Vec<AssocId> = self
            .assocs
            .iter()
            .filter(|(_, a)| a.poll_timeout().is_some_and(|t| t <= now))
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            if let Some(a) = self.assocs.get_mut(&id) {
                a.handle_timeout(now);
            }
            self.sync_tag(id);
        }
    }

    /// The next event of any association.
    pub fn poll_event(&mut self) -> Option<(AssocId, Event)> {
        for (id, a) in self.assocs.iter_mut() {
            if let Some(e) = a.poll_event() {
                return Some((*id, e));
            }
        }
        None
    }
}
