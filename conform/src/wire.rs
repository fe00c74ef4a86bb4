//! The runner's end of one connection: a TCP socket on which it writes MPA frames and FPDUs
//! of its own making (well-formed or not) and reads what the peer sends, parsed with the
//! protocol crates; every byte both ways goes into the connection's [`ConnRecord`].

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use mpa::{ConnFrame, Deframer, FpduEncoder, FrameError, RxConfig, TxConfig};

use crate::capture::{ConnRecord, Dir};

/// What came back while waiting for the MPA Reply.
#[derive(Clone, Debug)]
pub enum ReplyOutcome {
    /// A Reply (or Request) frame parsed.
    Frame(ConnFrame),
    /// Bytes that can never become a frame.
    Malformed(FrameError, Vec<u8>),
    /// The peer closed the connection (after `bytes` octets that made no frame).
    Closed(usize),
    /// Nothing complete within the time allowed.
    Timeout(usize),
}

/// One FPDU received from the peer.
#[derive(Clone, Debug)]
pub struct RxFpdu {
    /// The ULPDU.
    pub ulpdu: Vec<u8>,
    /// With CRC negotiated: whether the CRC field matched (`None` without CRC).
    pub crc_ok: Option<bool>,
}

/// What came back while waiting for an FPDU.
#[derive(Clone, Debug)]
pub enum RxOutcome {
    /// An FPDU.
    Fpdu(RxFpdu),
    /// The framing broke (a marker or ULPDU_Length the deframer refused).
    Framing(String),
    /// The peer closed the connection.
    Closed,
    /// Nothing within the time allowed.
    Timeout,
}

/// The runner's end of a connection.
pub struct Conn {
    stream: TcpStream,
    /// Everything exchanged.
    pub record: ConnRecord,
    rx: Vec<u8>,
    closed: bool,
    enc: Option<FpduEncoder>,
    deframer: Option<Deframer>,
    crc: bool,
    /// The stream received since full operation began (CRC checks need the raw octets).
    raw: Vec<u8>,
    raw_base: u64,
}

impl Conn {
    /// Connects to `peer` within `timeout`.
    pub fn connect(case: &str, peer: SocketAddr, timeout: Duration) -> std::io::Result<Conn> {
        let stream = TcpStream::connect_timeout(&peer, timeout)?;
        stream.set_nodelay(true)?;
        let local = stream.local_addr()?;
        Ok(Conn::opened(stream, ConnRecord::new(case, local, peer)))
    }

    /// A connection just opened, before any MPA exchange.
    fn opened(stream: TcpStream, record: ConnRecord) -> Conn {
        Conn {
            stream,
            record,
            rx: Vec::new(),
            closed: false,
            enc: None,
            deframer: None,
            crc: false,
            raw: Vec::new(),
            raw_base: 0,
        }
    }

    /// Waits up to `timeout` for the peer to connect to `listener`.
    pub fn accept(case: &str, listener: &TcpListener, timeout: Duration) -> std::io::Result<Conn> {
        let deadline = Instant::now() + timeout;
        listener.set_nonblocking(true)?;
        let (stream, peer) = loop {
            match listener.accept() {
                Ok(x) => break x,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    if Instant::now() >= deadline {
                        return Err(std::io::Error::new(
                            ErrorKind::TimedOut,
                            "no connection from the peer",
                        ));
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(e) => return Err(e),
            }
        };
        stream.set_nonblocking(false)?;
        stream.set_nodelay(true)?;
        let local = stream.local_addr()?;
        let mut record = ConnRecord::new(case, local, peer);
        record.peer_opened = true;
        Ok(Conn::opened(stream, record))
    }

    /// Writes `bytes` as they are (one write, so they usually travel in one segment).
    pub fn send_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.record.data(Dir::ToPeer, bytes);
        self.stream.write_all(bytes)
    }

    /// Closes the runner's sending side.
    pub fn shutdown_write(&mut self) {
        self.record.fin(Dir::ToPeer);
        let _ = self.stream.shutdown(Shutdown::Write);
    }

    /// Reads what is available until `deadline`; false once the peer has closed or the
    /// deadline passed with nothing new.
    fn fill(&mut self, deadline: Instant) -> bool {
        if self.closed {
            return false;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        let _ = self.stream.set_read_timeout(Some(left));
        let mut buf = [0u8; 65_536];
        match self.stream.read(&mut buf) {
            Ok(0) => {
                self.closed = true;
                self.record.fin(Dir::FromPeer);
                false
            }
            Ok(n) => {
                let got = buf.get(..n).unwrap_or(&[]);
                self.record.data(Dir::FromPeer, got);
                self.rx.extend_from_slice(got);
                true
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => false,
            Err(e) if e.kind() == ErrorKind::Interrupted => true,
            Err(_) => {
                // A reset ends the stream like a close (the capture shows a FIN).
                self.closed = true;
                self.record.fin(Dir::FromPeer);
                false
            }
        }
    }

    /// Whether the peer has closed its side.
    pub fn peer_closed(&self) -> bool {
        self.closed
    }

    /// Waits up to `timeout` for an MPA frame from the peer.
    pub fn read_frame(&mut self, timeout: Duration) -> ReplyOutcome {
        let deadline = Instant::now() + timeout;
        loop {
            match ConnFrame::parse(&self.rx) {
                Ok((f, used)) => {
                    self.rx.drain(..used);
                    return ReplyOutcome::Frame(f);
                }
                Err(FrameError::Truncated { .. }) => {}
                Err(e) => return ReplyOutcome::Malformed(e, self.rx.clone()),
            }
            if !self.fill(deadline) {
                if self.closed {
                    return ReplyOutcome::Closed(self.rx.len());
                }
                if Instant::now() >= deadline {
                    return ReplyOutcome::Timeout(self.rx.len());
                }
            }
        }
    }

    /// Enters full operation: FPDUs both ways, CRC as negotiated, markers inserted by us
    /// when `markers_tx`, expected from the peer when `markers_rx`. Octets the peer sent
    /// after its Reply are kept.
    pub fn start_fpdus(&mut self, crc: bool, markers_tx: bool, markers_rx: bool) {
        self.crc = crc;
        self.enc = Some(FpduEncoder::new(TxConfig {
            crc,
            markers: markers_tx,
        }));
        // The deframer never checks CRCs itself: a bad CRC is recorded per FPDU (and judged
        // by the CRC case), and the FPDU is still handed on.
        self.deframer = Some(Deframer::new(RxConfig::new(false, markers_rx)));
        let pending = std::mem::take(&mut self.rx);
        self.push_stream(&pending);
    }

    fn push_stream(&mut self, bytes: &[u8]) {
        if let Some(d) = self.deframer.as_mut() {
            self.raw.extend_from_slice(bytes);
            d.push(bytes);
        }
    }

    /// Sends one FPDU carrying `ulpdu` (which may be anything, malformed on purpose).
    pub fn send_ulpdu(&mut self, ulpdu: &[u8]) -> std::io::Result<()> {
        let mut out = Vec::new();
        self.frame(ulpdu, &mut out);
        self.send_raw(&out)
    }

    /// Appends one FPDU carrying `ulpdu` to `out` (to send several in one write).
    pub fn frame(&mut self, ulpdu: &[u8], out: &mut Vec<u8>) {
        let enc = self
            .enc
            .get_or_insert_with(|| FpduEncoder::new(TxConfig::default()));
        if enc.encode(&[ulpdu], out).is_err() {
            tracing::warn!(len = ulpdu.len(), "ULPDU too long to frame; not sent");
        }
    }

    /// Waits up to `timeout` for the peer's next FPDU.
    pub fn recv(&mut self, timeout: Duration) -> RxOutcome {
        let deadline = Instant::now() + timeout;
        loop {
            if !self.rx.is_empty() && self.deframer.is_some() {
                let new = std::mem::take(&mut self.rx);
                self.push_stream(&new);
            }
            if let Some(r) = self.deframer.as_mut().and_then(Iterator::next) {
                return match r {
                    Ok(f) => {
                        let crc_ok = self.crc.then(|| self.crc_matches(&f));
                        self.trim_raw(f.stream_offset + f.wire_len as u64);
                        RxOutcome::Fpdu(RxFpdu {
                            ulpdu: f.ulpdu,
                            crc_ok,
                        })
                    }
                    Err(e) => RxOutcome::Framing(e.to_string()),
                };
            }
            if self.deframer.as_ref().is_some_and(Deframer::is_failed) {
                return RxOutcome::Framing("the deframer stopped".into());
            }
            if !self.fill(deadline) {
                if self.closed {
                    return RxOutcome::Closed;
                }
                if Instant::now() >= deadline {
                    return RxOutcome::Timeout;
                }
            }
        }
    }

    /// Whether the CRC field of `f` matches the CRC32c of the octets before it.
    fn crc_matches(&self, f: &mpa::Fpdu) -> bool {
        let start = f.stream_offset.saturating_sub(self.raw_base) as usize;
        let end = start + f.wire_len;
        let Some(bytes) = self.raw.get(start..end) else {
            return false;
        };
        let (body, field) = bytes.split_at(bytes.len().saturating_sub(4));
        let field: [u8; 4] = field.try_into().unwrap_or([0; 4]);
        mpa::crc::crc32c(body) == mpa::crc::from_wire(field)
    }

    fn trim_raw(&mut self, upto: u64) {
        let n = upto.saturating_sub(self.raw_base) as usize;
        let n = n.min(self.raw.len());
        self.raw.drain(..n);
        self.raw_base += n as u64;
    }

    /// Waits up to `timeout` for the peer to close, discarding (but recording) what it sends;
    /// true if it closed.
    pub fn wait_close(&mut self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while !self.closed && Instant::now() < deadline {
            self.fill(deadline);
        }
        self.closed
    }

    /// Octets received and not yet taken (before full operation).
    pub fn pending(&self) -> usize {
        self.rx.len()
    }

    /// Waits `dur` and returns how many octets arrived meanwhile (they stay queued).
    pub fn quiet_for(&mut self, dur: Duration) -> usize {
        let before = self.rx.len();
        let deadline = Instant::now() + dur;
        while Instant::now() < deadline && self.fill(deadline) {}
        self.rx.len() - before
    }

    /// Closes the connection (both sides).
    pub fn close(mut self) -> ConnRecord {
        self.record.fin(Dir::ToPeer);
        let _ = self.stream.shutdown(Shutdown::Both);
        self.record
    }
}

// ------------------------------------------------------------------------------------------
// perftest's -R exchange
// ------------------------------------------------------------------------------------------

/// perftest's `struct pingpong_dest` as it travels (56 octets; integers big endian, as
/// perftest converts them; the 4 octets after `rkey` are the C struct's padding).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Dest {
    /// LID (0 over iWARP).
    pub lid: u32,
    /// Outstanding reads.
    pub out_reads: u32,
    /// QP number.
    pub qpn: u32,
    /// Initial PSN (meaningless over iWARP; random as in perftest).
    pub psn: u32,
    /// The STag of the buffer (perftest's rkey).
    pub rkey: u32,
    /// The buffer's address (tagged offset).
    pub vaddr: u64,
    /// GID.
    pub gid: [u8; 16],
    /// SRQ number.
    pub srqn: u32,
    /// GID index.
    pub gid_index: u32,
}

/// Length of a `pingpong_dest` on the wire.
pub const DEST_LEN: usize = 56;

impl Dest {
    /// The wire form.
    pub fn to_bytes(&self) -> [u8; DEST_LEN] {
        let mut b = [0u8; DEST_LEN];
        b[0..4].copy_from_slice(&self.lid.to_be_bytes());
        b[4..8].copy_from_slice(&self.out_reads.to_be_bytes());
        b[8..12].copy_from_slice(&self.qpn.to_be_bytes());
        b[12..16].copy_from_slice(&self.psn.to_be_bytes());
        b[16..20].copy_from_slice(&self.rkey.to_be_bytes());
        b[24..32].copy_from_slice(&self.vaddr.to_be_bytes());
        b[32..48].copy_from_slice(&self.gid);
        b[48..52].copy_from_slice(&self.srqn.to_be_bytes());
        b[52..56].copy_from_slice(&self.gid_index.to_be_bytes());
        b
    }

    /// Parses the wire form (`None` when shorter than 56 octets).
    pub fn parse(b: &[u8]) -> Option<Dest> {
        let u32_at = |i: usize| -> Option<u32> {
            Some(u32::from_be_bytes(b.get(i..i + 4)?.try_into().ok()?))
        };
        Some(Dest {
            lid: u32_at(0)?,
            out_reads: u32_at(4)?,
            qpn: u32_at(8)?,
            psn: u32_at(12)?,
            rkey: u32_at(16)?,
            vaddr: u64::from_be_bytes(b.get(24..32)?.try_into().ok()?),
            gid: b.get(32..48)?.try_into().ok()?,
            srqn: u32_at(48)?,
            gid_index: u32_at(52)?,
        })
    }
}
