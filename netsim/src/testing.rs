//! Ready-made nodes and applications for tests, examples and benchmarks.
//!
//! - [`Probe`]: a node that sends scripted raw frames and records what it receives;
//! - [`BulkSender`] / [`BulkReceiver`]: [`TcpApp`]s that move a byte pattern over one TCP
//!   connection and check every byte on arrival.

use std::collections::BTreeMap;
use std::net::SocketAddrV4;

use smoltcp::iface::SocketHandle;

use crate::node::Node;
use crate::tcp::{TcpApp, TcpCtx};
use crate::time::Instant;

/// EtherType used by [`probe_frame`] (IEEE 802 local experimental).
pub const PROBE_ETHERTYPE: u16 = 0x88B5;

/// An Ethernet frame of exactly `len` bytes (at least 22) from `src` to `dst` with EtherType
/// [`PROBE_ETHERTYPE`], carrying `tag` big-endian right after the header and zeros after
/// that. Shorter `len`s are raised to 22.
pub fn probe_frame(dst: [u8; 6], src: [u8; 6], tag: u64, len: usize) -> Vec<u8> {
    let mut f = Vec::with_capacity(len.max(22));
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&PROBE_ETHERTYPE.to_be_bytes());
    f.extend_from_slice(&tag.to_be_bytes());
    f.resize(len.max(22), 0);
    f
}

/// The tag of a [`probe_frame`], if the frame is long enough.
pub fn probe_tag(frame: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(frame.get(14..22)?.try_into().ok()?))
}

/// A frame a [`Probe`] received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Received {
    /// Arrival time.
    pub at: Instant,
    /// Interface it arrived on.
    pub iface: usize,
    /// The frame.
    pub frame: Vec<u8>,
}

/// A node that sends frames at scripted times and records every frame and link change.
#[derive(Debug, Default)]
pub struct Probe {
    ifaces: usize,
    script: BTreeMap<(Instant, u64), (usize, Vec<u8>)>,
    next_seq: u64,
    received: Vec<Received>,
    link_changes: Vec<(Instant, usize, bool)>,
}

impl Probe {
    /// A probe with `ifaces` interfaces and an empty script.
    pub fn new(ifaces: usize) -> Probe {
        Probe {
            ifaces,
            ..Probe::default()
        }
    }

    /// Schedules `frame` to be sent on `iface` at `at` (frames for the same instant go in the
    /// order they were added).
    pub fn send_at(&mut self, at: Instant, iface: usize, frame: Vec<u8>) -> &mut Self {
        self.script.insert((at, self.next_seq), (iface, frame));
        self.next_seq += 1;
        self
    }

    /// Builder form of [`Probe::send_at`].
    pub fn with_send(mut self, at: Instant, iface: usize, frame: Vec<u8>) -> Self {
        self.send_at(at, iface, frame);
        self
    }

    /// Everything received so far, in arrival order.
    pub fn received(&self) -> &[Received] {
        &self.received
    }

    /// Tags of the [`probe_frame`]s received so far, in arrival order.
    pub fn received_tags(&self) -> Vec<u64> {
        self.received
            .iter()
            .filter_map(|r| probe_tag(&r.frame))
            .collect()
    }

    /// Link changes seen: (time, interface, up).
    pub fn link_changes(&self) -> &[(Instant, usize, bool)] {
        &self.link_changes
    }
}

impl Node for Probe {
    fn interface_count(&self) -> usize {
        self.ifaces
    }

    fn handle_frame(&mut self, now: Instant, iface: usize, frame: Vec<u8>) {
        self.received.push(Received {
            at: now,
            iface,
            frame,
        });
    }

    fn poll_transmit(&mut self, now: Instant) -> Option<(usize, Vec<u8>)> {
        let entry = self.script.first_entry()?;
        if entry.key().0 > now {
            return None;
        }
        Some(entry.remove())
    }

    fn poll_timeout(&mut self) -> Option<Instant> {
        self.script.keys().next().map(|(at, _)| *at)
    }

    fn handle_timeout(&mut self, _now: Instant) {}

    fn handle_link_change(&mut self, now: Instant, iface: usize, up: bool) {
        self.link_changes.push((now, iface, up));
    }
}

/// Byte `offset` of the stream the bulk applications send: varies within every 256-byte block
/// and between blocks, so a misplaced segment is caught.
pub fn pattern_byte(offset: u64) -> u8 {
    (offset ^ (offset >> 8) ^ (offset >> 16) ^ (offset >> 24) ^ (offset >> 32)) as u8
}

/// Connects to a receiver and sends `total` bytes of [`pattern_byte`]s, then closes.
#[derive(Debug)]
pub struct BulkSender {
    remote: SocketAddrV4,
    local_port: u16,
    total: u64,
    written: u64,
    socket: Option<SocketHandle>,
    closed: bool,
    /// Set if the connection could not be opened.
    pub error: Option<String>,
}

impl BulkSender {
    /// Sends `total` bytes to `remote` from `local_port`.
    pub fn new(remote: SocketAddrV4, local_port: u16, total: u64) -> BulkSender {
        BulkSender {
            remote,
            local_port,
            total,
            written: 0,
            socket: None,
            closed: false,
            error: None,
        }
    }

    /// Bytes handed to the socket so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Whether every byte was written and the connection closed.
    pub fn finished(&self) -> bool {
        self.closed
    }
}

impl TcpApp for BulkSender {
    fn poll(&mut self, cx: &mut TcpCtx<'_>) {
        let h = match self.socket {
            Some(h) => h,
            None => {
                let h = cx.new_socket();
                if let Err(e) = cx.connect(h, self.remote, self.local_port) {
                    self.error = Some(e.to_string());
                }
                self.socket = Some(h);
                h
            }
        };
        let s = cx.socket(h);
        while s.can_send() && self.written < self.total {
            let (base, left) = (self.written, self.total - self.written);
            let sent = s.send(|buf| {
                let n = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
                for (i, b) in buf[..n].iter_mut().enumerate() {
                    *b = pattern_byte(base + i as u64);
                }
                (n, n)
            });
            match sent {
                Ok(0) | Err(_) => break,
                Ok(n) => self.written += n as u64,
            }
        }
        if self.written == self.total && !self.closed && s.may_send() {
            s.close();
            self.closed = true;
        }
    }
}

/// Listens on a port, accepts one connection and checks that it carries exactly `expected`
/// bytes of [`pattern_byte`]s.
#[derive(Debug)]
pub struct BulkReceiver {
    port: u16,
    expected: u64,
    received: u64,
    first_mismatch: Option<u64>,
    socket: Option<SocketHandle>,
    peer_closed: bool,
    done_at: Option<Instant>,
}

impl BulkReceiver {
    /// Expects `expected` bytes on `port`.
    pub fn new(port: u16, expected: u64) -> BulkReceiver {
        BulkReceiver {
            port,
            expected,
            received: 0,
            first_mismatch: None,
            socket: None,
            peer_closed: false,
            done_at: None,
        }
    }

    /// Bytes received so far.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// Offset of the first byte that differed from the pattern, if any.
    pub fn first_mismatch(&self) -> Option<u64> {
        self.first_mismatch
    }

    /// Whether the peer closed its side after sending.
    pub fn peer_closed(&self) -> bool {
        self.peer_closed
    }

    /// When the last expected byte arrived.
    pub fn done_at(&self) -> Option<Instant> {
        self.done_at
    }

    /// All expected bytes arrived, all matched, and the peer closed.
    pub fn complete(&self) -> bool {
        self.received == self.expected && self.first_mismatch.is_none() && self.peer_closed
    }
}

impl TcpApp for BulkReceiver {
    fn poll(&mut self, cx: &mut TcpCtx<'_>) {
        let h = match self.socket {
            Some(h) => h,
            None => {
                let h = cx.new_socket();
                // Listening on a fresh socket with a non-zero port cannot fail.
                let _ = cx.listen(h, self.port);
                self.socket = Some(h);
                h
            }
        };
        let now = cx.now();
        let s = cx.socket(h);
        while s.can_recv() {
            let base = self.received;
            let mut mismatch = None;
            let got = s.recv(|data| {
                mismatch = data
                    .iter()
                    .enumerate()
                    .find(|&(i, &b)| b != pattern_byte(base + i as u64))
                    .map(|(i, _)| base + i as u64);
                (data.len(), data.len())
            });
            match got {
                Ok(0) | Err(_) => break,
                Ok(n) => self.received += n as u64,
            }
            if self.first_mismatch.is_none() {
                self.first_mismatch = mismatch;
            }
        }
        if self.received >= self.expected && self.done_at.is_none() {
            self.done_at = Some(now);
        }
        if !s.may_recv() && self.received > 0 && !self.peer_closed {
            self.peer_closed = true;
            s.close();
        }
    }
}
