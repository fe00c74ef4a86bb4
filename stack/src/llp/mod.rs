//! The lower-layer-protocol (LLP) seam under the RDMAP/DDP engine (RFC 5041 §4's LLP
//! services).
//!
//! The engine ([`crate::engine::QpEngine`]) produces and consumes whole DDP segments
//! (ULPDUs); an LLP carries them:
//!
//! * `mpa::MpaLlp` — MPA over an ordered byte stream (RFC 5044 framing, CRC32c and
//!   markers; RFC 5044/6581 connection setup with MPA Request/Reply). Every ULPDU becomes one
//!   FPDU in the stream; payloads may be sent straight from registered memory.
//! * `sctp::SctpLlp` — DDP over SCTP (RFC 5043): every ULPDU is one unordered SCTP user
//!   message with PPID 16 and a DDP-SSN; connection setup is the DDP Stream Session Initiate /
//!   Accept / Reject exchange (PPID 17) with RFC 6581's IRD/ORD in the private data.
//!
//! What both offer the engine: the largest ULPDU, queueing one ULPDU (header bytes plus a
//! payload from a buffer or from registered memory), a monotonic count of what was queued and
//! of what the transport has accepted (Sends and Writes complete when their last ULPDU is
//! accepted), and connection setup that ends in a [`Session`]. Neither knows about the other;
//! the engine knows neither's framing.

pub mod mpa;
pub mod sctp;

use std::sync::Arc;

use ::mpa::RtrType;

use crate::mem::{RegisteredBuf, SgList, Span};

/// What connection setup negotiated, whatever the LLP.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Session {
    /// Our IRD: inbound RDMA Read and Atomic Requests we accept at once.
    pub ird: u16,
    /// Our ORD: outbound RDMA Read and Atomic Requests we may have outstanding.
    pub ord: u16,
    /// The peer's ULP private data.
    pub peer_private_data: Vec<u8>,
    /// The LLP's own view of the connection.
    pub llp: LlpSession,
}

/// The LLP-specific part of a [`Session`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LlpSession {
    /// MPA over TCP: revision, CRC, markers, peer-to-peer mode, RTR type.
    Mpa(::mpa::Session),
    /// DDP over SCTP (RFC 5043).
    Sctp(SctpSession),
}

/// What DDP over SCTP negotiated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SctpSession {
    /// We sent the Session Initiate.
    pub active: bool,
    /// RFC 6581 enhanced session control (IRD/ORD exchanged) was used.
    pub enhanced: bool,
    /// Largest DDP segment sent (RFC 5043 §9).
    pub max_segment: usize,
}

impl Session {
    /// The MPA session, for a connection over MPA.
    pub fn mpa(&self) -> Option<&::mpa::Session> {
        match &self.llp {
            LlpSession::Mpa(s) => Some(s),
            LlpSession::Sctp(_) => None,
        }
    }

    /// The SCTP session, for a connection over SCTP.
    pub fn sctp(&self) -> Option<&SctpSession> {
        match &self.llp {
            LlpSession::Sctp(s) => Some(s),
            LlpSession::Mpa(_) => None,
        }
    }

    /// Peer-to-peer mode (MPA only: an RTR message opens full operation).
    pub fn p2p(&self) -> bool {
        self.mpa().is_some_and(|s| s.p2p)
    }

    /// The LLP's name, for reports: "MPA/TCP" or "SCTP".
    pub fn llp_name(&self) -> &'static str {
        match self.llp {
            LlpSession::Mpa(_) => "MPA/TCP",
            LlpSession::Sctp(_) => "SCTP (RFC 5043)",
        }
    }

    pub(crate) fn must_await_first_ulpdu(&self) -> bool {
        self.mpa().is_some_and(|s| s.must_await_first_fpdu())
    }

    pub(crate) fn rtr_to_send(&self) -> Option<RtrType> {
        self.mpa().and_then(|s| s.rtr_to_send())
    }

    pub(crate) fn rtr_to_expect(&self) -> Option<RtrType> {
        self.mpa().and_then(|s| s.rtr_to_expect())
    }
}

impl From<::mpa::Session> for Session {
    fn from(s: ::mpa::Session) -> Session {
        Session {
            ird: s.ird,
            ord: s.ord,
            peer_private_data: s.peer_private_data.clone(),
            llp: LlpSession::Mpa(s),
        }
    }
}

/// Where a ULPDU's payload comes from.
pub(crate) enum PayloadSrc<'a> {
    /// Bytes `offset..` of a work request's SGL.
    Sgl(&'a SgList, u64),
    /// Bytes `offset..` of a span (an RDMA Read source); `None`: invalid (zeros go out).
    Span(Option<&'a Span>, usize),
}

impl PayloadSrc<'_> {
    /// Calls `f(buf, offset, len)` for each registered range of the next `len` payload
    /// bytes; false (maybe after some calls) when they are not all there.
    pub(crate) fn ranges(
        &self,
        len: usize,
        mut f: impl FnMut(&Arc<RegisteredBuf>, usize, usize),
    ) -> bool {
        match *self {
            PayloadSrc::Sgl(sgl, off) => sgl.for_each_range(off, len, f),
            PayloadSrc::Span(Some(span), off) => match off.checked_add(len) {
                Some(end) if end <= span.len => {
                    f(&span.buf, span.off + off, len);
                    true
                }
                _ => false,
            },
            PayloadSrc::Span(None, _) => false,
        }
    }

    /// Appends `len` bytes at payload offset `at` to `out`; false when not all there.
    pub(crate) fn append(&self, at: usize, len: usize, out: &mut Vec<u8>) -> bool {
        match *self {
            PayloadSrc::Sgl(sgl, off) => sgl.gather_append(off + at as u64, len, out),
            PayloadSrc::Span(Some(span), off) => span.append_to(off + at, len, out),
            PayloadSrc::Span(None, _) => false,
        }
    }

    /// Appends the `len` payload bytes to `out`, zeros when they are not all there (stale
    /// or partial data never goes out).
    pub(crate) fn append_or_zeros(&self, at: usize, len: usize, out: &mut Vec<u8>) {
        let start = out.len();
        if !self.append(at, len, out) {
            out.truncate(start);
            out.resize(start + len, 0);
        }
    }
}

/// How connection setup over an LLP went, after input or a timer.
#[derive(Debug)]
pub(crate) enum SetupStep {
    /// Still waiting.
    Pending,
    /// Full operation starts with this session.
    Established(Session),
    /// Setup failed.
    Failed(crate::engine::SetupError),
}

/// The LLP of one QP: what the engine calls, dispatched to the one in use.
// One per QP, inside the engine (itself on the heap): boxing either variant would only add
// an indirection on every ULPDU.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum Llp {
    Mpa(mpa::MpaLlp),
    Sctp(sctp::SctpLlp),
}

impl Llp {
    /// Largest ULPDU (0 before full operation over MPA).
    pub(crate) fn max_ulpdu(&self) -> usize {
        match self {
            Llp::Mpa(m) => m.max_ulpdu(),
            Llp::Sctp(s) => s.max_ulpdu(),
        }
    }

    /// ULPDUs can be queued (full operation).
    pub(crate) fn can_send(&self) -> bool {
        match self {
            Llp::Mpa(m) => m.can_send(),
            Llp::Sctp(s) => s.can_send(),
        }
    }

    /// Ends setup without a result (the transport closed); true if it was under way.
    pub(crate) fn abandon_setup(&mut self) -> bool {
        match self {
            Llp::Mpa(m) => m.abandon_setup(),
            Llp::Sctp(s) => s.abandon_setup(),
        }
    }

    /// Queued octets so far (positions).
    pub(crate) fn produced(&self) -> u64 {
        match self {
            Llp::Mpa(m) => m.produced(),
            Llp::Sctp(s) => s.produced(),
        }
    }

    /// Octets the transport accepted so far.
    pub(crate) fn consumed(&self) -> u64 {
        match self {
            Llp::Mpa(m) => m.consumed(),
            Llp::Sctp(s) => s.consumed(),
        }
    }

    /// Octets queued and not yet accepted.
    pub(crate) fn pending(&self) -> usize {
        match self {
            Llp::Mpa(m) => m.pending(),
            Llp::Sctp(s) => s.pending(),
        }
    }

    /// Drops what is queued (the transport is gone).
    pub(crate) fn discard(&mut self) {
        match self {
            Llp::Mpa(m) => m.discard(),
            Llp::Sctp(s) => s.discard(),
        }
    }

    /// Queues one ULPDU of `header` and `payload`.
    pub(crate) fn send(&mut self, header: &rdmap::Header, payload: &[u8]) {
        match self {
            Llp::Mpa(m) => m.send(header, payload),
            Llp::Sctp(s) => s.send(header, payload),
        }
    }

    /// Queues one ULPDU of `header` and `len` payload octets from `src`.
    pub(crate) fn send_from(&mut self, header: &rdmap::Header, len: usize, src: &PayloadSrc<'_>) {
        match self {
            Llp::Mpa(m) => m.send_from(header, len, src),
            Llp::Sctp(s) => s.send_from(header, len, src),
        }
    }

    /// The LLP's next deadline (setup timers, the MPA first-FPDU hold).
    pub(crate) fn poll_timeout(&self) -> Option<crate::Instant> {
        match self {
            Llp::Mpa(m) => m.poll_timeout(),
            Llp::Sctp(s) => s.poll_timeout(),
        }
    }

    /// Timer expiry: names what setup waited for in vain, if that timer ran out.
    pub(crate) fn handle_timeout(&mut self, now: crate::Instant) -> Option<&'static str> {
        match self {
            Llp::Mpa(m) => m.handle_timeout(now),
            Llp::Sctp(s) => s.handle_timeout(now),
        }
    }

    /// Output is held for now (MPA's first-FPDU delay).
    pub(crate) fn held(&self) -> bool {
        match self {
            Llp::Mpa(m) => m.held(),
            Llp::Sctp(_) => false,
        }
    }
}
