//! Test harness: two engines wired back to back through in-memory byte pipes.
//!
//! [`Pair::pump`] moves bytes from each engine's `poll_transmit` into the other's
//! `handle_stream` until nothing moves, optionally cutting the stream at random points and
//! accepting only part of each offered write (short writes). Every byte that crossed is kept
//! per direction so tests can decode what went on the wire.

#![allow(dead_code)]

pub mod netns;
pub mod node;
pub mod sctp;

use std::sync::Arc;

use stack::mem::TxPart;
use stack::mpa::{self, ConnFrame, Deframer, Role, RxConfig, Session};
use stack::rdmap::{Header, Message, Terminate};
use stack::{
    Access, CloseReason, Cq, MemTable, MemoryRegion, MrOptions, Pd, QpConfig, QpEngine, QpEvent,
    QpId, QpState, Setup, Wc,
};

/// Small deterministic generator (xorshift64*), enough for chunking.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `1..=max`.
    pub fn between1(&mut self, max: usize) -> usize {
        1 + (self.next() % max.max(1) as u64) as usize
    }
}

/// One end.
pub struct Side {
    pub eng: QpEngine,
    pub mem: Arc<MemTable>,
    pub pd: Pd,
    pub scq: Cq,
    pub rcq: Cq,
    pub events: Vec<QpEvent>,
    pub closed: bool,
}

impl Side {
    pub fn new(id: u32, setup: Setup, tweak: impl FnOnce(&mut QpConfig)) -> Side {
        let mem = MemTable::new();
        let pd = mem.alloc_pd();
        let scq = Cq::new(1024);
        let rcq = Cq::new(1024);
        let mut cfg = QpConfig::new(QpId(id), pd, scq.clone(), rcq.clone());
        tweak(&mut cfg);
        let eng = QpEngine::new(cfg, mem.clone(), setup, stack::Instant::ZERO).expect("engine");
        Side {
            eng,
            mem,
            pd,
            scq,
            rcq,
            events: Vec::new(),
            closed: false,
        }
    }

    /// Registers a new buffer of `len` bytes with all rights.
    pub fn mr(&self, len: usize) -> MemoryRegion {
        self.mr_with(len, MrOptions::new(all_access()))
    }

    pub fn mr_with(&self, len: usize, opts: MrOptions) -> MemoryRegion {
        self.mem.register_new(self.pd, len, opts).expect("register")
    }

    pub fn send_wcs(&self) -> Vec<Wc> {
        self.scq.drain()
    }

    pub fn recv_wcs(&self) -> Vec<Wc> {
        self.rcq.drain()
    }

    fn collect_events(&mut self) {
        while let Some(e) = self.eng.poll_event() {
            self.events.push(e);
        }
    }

    pub fn terminate_received(&self) -> Option<Terminate> {
        self.events.iter().find_map(|e| match e {
            QpEvent::TerminateReceived(t) => Some(*t),
            _ => None,
        })
    }

    pub fn terminate_sent(&self) -> Option<Terminate> {
        self.events.iter().find_map(|e| match e {
            QpEvent::TerminateSent(t) => Some(*t),
            _ => None,
        })
    }
}

pub fn all_access() -> Access {
    Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC
}

/// How the pipes behave.
#[derive(Clone, Debug, Default)]
pub struct Chunking {
    /// Cut the stream into random chunks of at most this many bytes (0: whole).
    pub max_chunk: usize,
    /// Accept only a random part of each offered write.
    pub short_writes: bool,
    pub seed: u64,
}

/// Session parameters for [`Pair::established`].
#[derive(Clone, Debug)]
pub struct Opts {
    pub crc: bool,
    /// Markers a→b and b→a.
    pub markers_ab: bool,
    pub markers_ba: bool,
    pub ird_a: u16,
    pub ord_a: u16,
    pub ird_b: u16,
    pub ord_b: u16,
    /// Give b the responder role (it then waits for a's first FPDU before sending).
    pub roles: bool,
    pub emss: u32,
    /// Both engines transmit zero-copy ([`QpConfig::zero_copy_tx`]) and the pipes take
    /// their bytes through `transmit_with` gather lists.
    pub zero_copy: bool,
}

impl Default for Opts {
    fn default() -> Self {
        Opts {
            crc: true,
            markers_ab: false,
            markers_ba: false,
            ird_a: 8,
            ord_a: 8,
            ird_b: 8,
            ord_b: 8,
            roles: false,
            emss: 1448,
            zero_copy: false,
        }
    }
}

pub fn session(
    role: Role,
    crc: bool,
    markers_tx: bool,
    markers_rx: bool,
    ird: u16,
    ord: u16,
) -> Session {
    Session {
        role,
        revision: 2,
        crc,
        markers_tx,
        markers_rx,
        enhanced: true,
        ird,
        ord,
        p2p: false,
        rtr: None,
        peer_private_data: Vec::new(),
    }
}

/// Mutates bytes in flight: (offset in the stream, chunk).
pub type Tamper = Box<dyn FnMut(u64, &mut [u8])>;

pub struct Pair {
    pub a: Side,
    pub b: Side,
    pub now: stack::Instant,
    pub chunking: Chunking,
    rng: Rng,
    /// Every byte a sent to b, and b to a.
    pub wire_ab: Vec<u8>,
    pub wire_ba: Vec<u8>,
    /// Mutates bytes in flight a→b: (offset in the a→b stream, chunk).
    pub tamper_ab: Option<Tamper>,
    /// Take bytes through `transmit_with` (gather lists) instead of `poll_transmit`.
    pub vectored: bool,
}

/// The first `n` bytes of a gather list, flattened.
pub fn flatten(parts: &[TxPart<'_>], n: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(n);
    for p in parts {
        let left = n - out.len();
        if left == 0 {
            break;
        }
        let k = p.len().min(left);
        match *p {
            TxPart::Bytes(b) => out.extend_from_slice(&b[..k]),
            TxPart::Mem { buf, offset, .. } => {
                out.extend_from_slice(&buf.read_range(offset..offset + k).expect("in bounds"))
            }
        }
    }
    out
}

impl Pair {
    pub fn new(a: Side, b: Side) -> Pair {
        Pair {
            a,
            b,
            now: stack::Instant::ZERO,
            chunking: Chunking::default(),
            rng: Rng::new(1),
            wire_ab: Vec::new(),
            wire_ba: Vec::new(),
            tamper_ab: None,
            vectored: false,
        }
    }

    /// Two engines in full operation with sessions built from `o`.
    pub fn established(o: &Opts) -> Pair {
        let rb = if o.roles {
            Role::Responder
        } else {
            Role::Initiator
        };
        let sa = session(
            Role::Initiator,
            o.crc,
            o.markers_ab,
            o.markers_ba,
            o.ird_a,
            o.ord_a,
        );
        let sb = session(rb, o.crc, o.markers_ba, o.markers_ab, o.ird_b, o.ord_b);
        let (emss, zc) = (o.emss, o.zero_copy);
        let a = Side::new(1, Setup::Established(sa), |c| {
            c.emss = emss;
            c.zero_copy_tx = zc;
        });
        let b = Side::new(2, Setup::Established(sb), |c| {
            c.emss = emss;
            c.zero_copy_tx = zc;
        });
        let mut p = Pair::new(a, b);
        p.vectored = zc;
        p
    }

    /// Two engines that negotiate MPA between themselves.
    pub fn negotiate(init: mpa::Config, resp: mpa::Config) -> Pair {
        let a = Side::new(1, Setup::Initiator(init), |_| {});
        let b = Side::new(2, Setup::Responder(resp), |_| {});
        Pair::new(a, b)
    }

    pub fn with_chunking(mut self, c: Chunking) -> Pair {
        self.rng = Rng::new(c.seed);
        self.chunking = c;
        self
    }

    fn move_bytes(&mut self, ab: bool) -> bool {
        let (src, dst) = if ab {
            (&mut self.a, &mut self.b)
        } else {
            (&mut self.b, &mut self.a)
        };
        if src.closed {
            return false;
        }
        let (rng, chunking) = (&mut self.rng, &self.chunking);
        let mut cut = |total: usize| {
            let mut n = total;
            if chunking.max_chunk > 0 {
                n = n.min(rng.between1(chunking.max_chunk));
            }
            if chunking.short_writes {
                n = rng.between1(n);
            }
            n
        };
        let mut chunk = if self.vectored {
            let mut taken = Vec::new();
            let r = src.eng.transmit_with(|parts| {
                let n = cut(parts.iter().map(|p| p.len()).sum());
                taken = flatten(parts, n);
                Ok::<usize, ()>(n)
            });
            if r.is_none() {
                return false;
            }
            taken
        } else {
            let Some(bytes) = src.eng.poll_transmit() else {
                return false;
            };
            let n = cut(bytes.len());
            let chunk = bytes[..n].to_vec();
            src.eng.transmit_done(n);
            chunk
        };
        let wire = if ab {
            &mut self.wire_ab
        } else {
            &mut self.wire_ba
        };
        if ab && let Some(t) = self.tamper_ab.as_mut() {
            t(wire.len() as u64, &mut chunk);
        }
        wire.extend_from_slice(&chunk);
        if !dst.closed {
            dst.eng.handle_stream(self.now, &chunk);
        }
        true
    }

    /// Moves bytes both ways until nothing moves; then performs any transport close an
    /// engine asks for (delivering the close to both ends).
    pub fn pump(&mut self) {
        for _ in 0..10_000_000u64 {
            let x = self.move_bytes(true);
            let y = self.move_bytes(false);
            if !x && !y {
                break;
            }
        }
        for ab in [true, false] {
            let (src, dst) = if ab {
                (&mut self.a, &mut self.b)
            } else {
                (&mut self.b, &mut self.a)
            };
            if !src.closed && src.eng.should_close_transport() {
                src.closed = true;
                src.eng.handle_closed(self.now, CloseReason::Local);
                if !dst.closed {
                    dst.closed = true;
                    dst.eng.handle_closed(self.now, CloseReason::PeerClosed);
                }
            }
        }
        self.a.collect_events();
        self.b.collect_events();
    }

    pub fn states(&self) -> (QpState, QpState) {
        (self.a.eng.state(), self.b.eng.state())
    }
}

/// Decodes a direction of the wire into RDMAP messages (header, payload). `frame` says
/// whether the stream starts with an MPA Request/Reply frame to skip.
pub fn decode(wire: &[u8], rx: RxConfig, frame: bool) -> Vec<(Header, Vec<u8>)> {
    let mut start = 0;
    if frame && let Ok((_, used)) = ConnFrame::parse(wire) {
        start = used;
    }
    let mut d = Deframer::new(rx);
    d.push(&wire[start..]);
    let mut out = Vec::new();
    for f in d {
        let Ok(f) = f else { break };
        if let Ok(m) = Message::parse(&f.ulpdu) {
            out.push((m.header, m.payload.to_vec()));
        }
    }
    out
}

/// The Terminates found on a wire direction.
pub fn wire_terminates(wire: &[u8], rx: RxConfig, frame: bool) -> Vec<Terminate> {
    decode(wire, rx, frame)
        .into_iter()
        .filter_map(|(h, _)| match h {
            Header::Terminate { terminate, .. } => Some(terminate),
            _ => None,
        })
        .collect()
}

/// Deterministic test pattern.
pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ ((i >> 8) as u8))
        .collect()
}

/// Two engines wired back to back, whatever the LLP.
pub trait Wire {
    fn a(&mut self) -> &mut Side;
    fn b(&mut self) -> &mut Side;
    /// Moves everything both ways until nothing moves.
    fn pump(&mut self);
}

impl Wire for Pair {
    fn a(&mut self) -> &mut Side {
        &mut self.a
    }

    fn b(&mut self) -> &mut Side {
        &mut self.b
    }

    fn pump(&mut self) {
        Pair::pump(self);
    }
}
