//! In-memory harness: two endpoints joined back to back, packets shuttled in virtual time
//! with optional seeded loss, duplication, reordering and per-path black holes.
#![allow(dead_code)]

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::SocketAddr;
use std::time::Duration;

use sctp::rng::Rng;
use sctp::{AssocId, Association, AssociationConfig, Endpoint, EndpointConfig, Event, Instant};

pub const PORT_A: u16 = 5000;
pub const PORT_B: u16 = 6000;

pub fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// A's addresses: 10.0.1.1 (path 1), 10.0.2.1 (path 2). B's: 10.0.1.2, 10.0.2.2.
pub fn a_addrs() -> Vec<SocketAddr> {
    vec![addr("10.0.1.1:0"), addr("10.0.2.1:0")]
}
pub fn b_addrs() -> Vec<SocketAddr> {
    vec![addr("10.0.1.2:0"), addr("10.0.2.2:0")]
}

/// Which network (third octet) an address is on.
pub fn net_of(a: &SocketAddr) -> u8 {
    match a.ip() {
        std::net::IpAddr::V4(v) => v.octets()[2],
        std::net::IpAddr::V6(v) => v.octets()[15],
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Side {
    A,
    B,
}

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct InFlight {
    to: Side,
    local: SocketAddr,
    remote: SocketAddr,
    bytes: Vec<u8>,
}

/// A packet seen by the harness.
#[derive(Debug, Clone)]
pub struct Seen {
    pub at: Instant,
    pub from: Side,
    pub src: SocketAddr,
    pub dst: SocketAddr,
    pub bytes: Vec<u8>,
    pub delivered: bool,
}

pub type Filter = Box<dyn FnMut(Instant, Side, &mut Vec<u8>, SocketAddr) -> bool>;

pub struct Pair {
    pub now: Instant,
    pub a: Endpoint,
    pub b: Endpoint,
    pub a_id: Option<AssocId>,
    pub b_id: Option<AssocId>,
    pub delay: Duration,
    pub loss: f64,
    pub duplicate: f64,
    pub reorder: f64,
    pub reorder_delay: Duration,
    /// Networks (third octet) that drop everything.
    pub down: Vec<u8>,
    /// Called for every packet; return false to drop it. May rewrite the bytes.
    pub filter: Option<Filter>,
    pub events_a: Vec<(Instant, Event)>,
    pub events_b: Vec<(Instant, Event)>,
    pub log: Vec<Seen>,
    pub keep_log: bool,
    rng: Rng,
    queue: BinaryHeap<Reverse<(Instant, u64, InFlight)>>,
    seq: u64,
}

pub fn config(
    seed: u64,
    addrs: Vec<SocketAddr>,
    port: u16,
    assoc: AssociationConfig,
) -> EndpointConfig {
    let mut c = EndpointConfig::new(port, addrs, seed);
    c.association = assoc;
    c
}

impl Pair {
    pub fn new(seed: u64, cfg: AssociationConfig) -> Pair {
        Pair::with_configs(
            seed,
            config(seed, a_addrs(), PORT_A, cfg.clone()),
            config(seed ^ 0x5555, b_addrs(), PORT_B, cfg),
        )
    }

    pub fn with_configs(seed: u64, a: EndpointConfig, b: EndpointConfig) -> Pair {
        Pair {
            now: Instant::ZERO,
            a: Endpoint::new(a),
            b: Endpoint::new(b),
            a_id: None,
            b_id: None,
            delay: Duration::from_millis(5),
            loss: 0.0,
            duplicate: 0.0,
            reorder: 0.0,
            reorder_delay: Duration::from_millis(3),
            down: Vec::new(),
            filter: None,
            events_a: Vec::new(),
            events_b: Vec::new(),
            log: Vec::new(),
            keep_log: false,
            rng: Rng::new(seed ^ 0xdead_beef),
            queue: BinaryHeap::new(),
            seq: 0,
        }
    }

    /// A connects to B on path 1 and the handshake runs to completion.
    pub fn connected(seed: u64, cfg: AssociationConfig) -> Pair {
        let mut p = Pair::new(seed, cfg);
        p.connect();
        p
    }

    pub fn connect(&mut self) {
        let id = self
            .a
            .connect(self.now, addr("10.0.1.2:0"), PORT_B)
            .unwrap();
        self.a_id = Some(id);
        let ok = self.run_until(self.now + Duration::from_secs(5), |p| {
            p.b_id.is_some() && p.connected_a()
        });
        assert!(ok, "handshake did not complete");
    }

    pub fn connected_a(&self) -> bool {
        self.events_a.iter().any(|(_, e)| *e == Event::Connected)
    }

    pub fn assoc_a(&mut self) -> &mut Association {
        let id = self.a_id.unwrap();
        self.a.association_mut(id).unwrap()
    }

    pub fn assoc_b(&mut self) -> &mut Association {
        let id = self.b_id.unwrap();
        self.b.association_mut(id).unwrap()
    }

    /// Injects raw bytes as if `from` had sent them from `src` to `dst`.
    pub fn inject(&mut self, from: Side, src: SocketAddr, dst: SocketAddr, bytes: Vec<u8>) {
        let to = match from {
            Side::A => Side::B,
            Side::B => Side::A,
        };
        self.seq += 1;
        self.queue.push(Reverse((
            self.now,
            self.seq,
            InFlight {
                to,
                local: dst,
                remote: src,
                bytes,
            },
        )));
    }

    fn collect(&mut self) {
        for side in [Side::A, Side::B] {
            loop {
                let t = match side {
                    Side::A => self.a.poll_transmit(self.now),
                    Side::B => self.b.poll_transmit(self.now),
                };
                let Some(mut t) = t else { break };
                let mut deliver = !self.down.contains(&net_of(&t.remote))
                    && !self.down.contains(&net_of(&t.local));
                if deliver && self.loss > 0.0 && self.unit() < self.loss {
                    deliver = false;
                }
                if deliver && let Some(f) = self.filter.as_mut() {
                    deliver = f(self.now, side, &mut t.bytes, t.remote);
                }
                if self.keep_log {
                    self.log.push(Seen {
                        at: self.now,
                        from: side,
                        src: t.local,
                        dst: t.remote,
                        bytes: t.bytes.clone(),
                        delivered: deliver,
                    });
                }
                if !deliver {
                    continue;
                }
                let to = match side {
                    Side::A => Side::B,
                    Side::B => Side::A,
                };
                let mut at = self.now + self.delay;
                if self.reorder > 0.0 && self.unit() < self.reorder {
                    at += self.reorder_delay;
                }
                let copies = if self.duplicate > 0.0 && self.unit() < self.duplicate {
                    2
                } else {
                    1
                };
                for _ in 0..copies {
                    self.seq += 1;
                    self.queue.push(Reverse((
                        at,
                        self.seq,
                        InFlight {
                            to,
                            local: t.remote,
                            remote: t.local,
                            bytes: t.bytes.clone(),
                        },
                    )));
                }
            }
        }
    }

    fn unit(&mut self) -> f64 {
        (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn drain_events(&mut self) {
        while let Some((_, e)) = self.a.poll_event() {
            self.events_a.push((self.now, e));
        }
        while let Some(id) = self.b.accept() {
            self.b_id = Some(id);
        }
        while let Some(id) = self.a.accept() {
            // Incoming associations on A (B connected to A).
            self.a_id = Some(id);
        }
        while let Some((_, e)) = self.b.poll_event() {
            self.events_b.push((self.now, e));
        }
    }

    /// Runs until `done` holds or virtual time reaches `deadline`.
    pub fn run_until(
        &mut self,
        deadline: Instant,
        mut done: impl FnMut(&mut Pair) -> bool,
    ) -> bool {
        let mut steps = 0u64;
        loop {
            self.collect();
            self.drain_events();
            if done(self) {
                return true;
            }
            // Whatever `done` did (sends, shutdowns) may have produced packets.
            self.collect();
            steps += 1;
            assert!(steps < 50_000_000, "harness runaway");
            let next_pkt = self.queue.peek().map(|Reverse((t, _, _))| *t);
            let next = [next_pkt, self.a.poll_timeout(), self.b.poll_timeout()]
                .into_iter()
                .flatten()
                .min();
            let Some(next) = next else {
                return false;
            };
            if next > deadline {
                self.now = deadline;
                return false;
            }
            self.now = self.now.max(next);
            while let Some(Reverse((t, _, _))) = self.queue.peek() {
                if *t > self.now {
                    break;
                }
                let Reverse((_, _, p)) = self.queue.pop().unwrap();
                match p.to {
                    Side::A => self.a.handle_packet(self.now, p.local, p.remote, &p.bytes),
                    Side::B => self.b.handle_packet(self.now, p.local, p.remote, &p.bytes),
                }
            }
            if self.a.poll_timeout().is_some_and(|t| t <= self.now) {
                self.a.handle_timeout(self.now);
            }
            if self.b.poll_timeout().is_some_and(|t| t <= self.now) {
                self.b.handle_timeout(self.now);
            }
        }
    }

    pub fn run_for(&mut self, d: Duration) {
        let t = self.now + d;
        self.run_until(t, |_| false);
    }
}

/// Deterministic test payload: byte `i` of message `m`.
pub fn pattern(m: u64, len: usize) -> Vec<u8> {
    let mut r = Rng::new(m.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ len as u64);
    (0..len).map(|_| r.next_u32() as u8).collect()
}

/// Parses every chunk type in a packet (checksum not checked).
pub fn chunk_types(bytes: &[u8]) -> Vec<u8> {
    sctp::wire::Packet::new_unchecked(bytes)
        .chunks()
        .filter_map(Result::ok)
        .map(|c| c.chunk_type)
        .collect()
}

/// A one-way bulk transfer from A to B of `count` messages of `len` bytes on stream 0,
/// checked byte for byte, recording the longest interval without delivery progress.
pub struct Bulk {
    pub count: u64,
    pub len: usize,
    pub sent: u64,
    pub received: u64,
    pub last_progress: Instant,
    pub max_stall: Duration,
    pub max_stall_at: Instant,
}

impl Bulk {
    pub fn new(count: u64, len: usize, now: Instant) -> Bulk {
        Bulk {
            count,
            len,
            sent: 0,
            received: 0,
            last_progress: now,
            max_stall: Duration::ZERO,
            max_stall_at: now,
        }
    }

    /// Feeds the sender, drains the receiver; returns true when everything arrived.
    pub fn step(&mut self, p: &mut Pair) -> bool {
        let now = p.now;
        while self.sent < self.count {
            let data = pattern(self.sent % 64, self.len);
            match p.assoc_a().send(0, self.sent as u32, false, &data) {
                Ok(()) => self.sent += 1,
                Err(sctp::SendError::BufferFull { .. }) => break,
                Err(e) => panic!("send failed: {e}"),
            }
        }
        let mut progressed = false;
        while let Some(m) = p.assoc_b().recv() {
            assert_eq!(m.ppid as u64, self.received, "message order");
            assert_eq!(
                m.data,
                pattern(self.received % 64, self.len),
                "message content"
            );
            self.received += 1;
            progressed = true;
        }
        if progressed {
            let stall = now - self.last_progress;
            if stall > self.max_stall {
                self.max_stall = stall;
                self.max_stall_at = self.last_progress;
            }
            self.last_progress = now;
        }
        self.received == self.count
    }
}
