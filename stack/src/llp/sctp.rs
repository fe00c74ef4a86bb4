//! The SCTP LLP: DDP over SCTP (RFC 5043) with RFC 6581's enhanced session control, sans-IO.
//!
//! * **Messages.** Every ULPDU the engine queues is one DDP Segment: an unordered SCTP user
//!   message with PPID 16 whose first two octets are the DDP-SSN (RFC 5043 §5.2.2, §10); no
//!   MPA framing, no CRC of its own (SCTP's CRC32c covers it). A segment is at most
//!   [`SctpConfig::max_segment`] octets, sized from the path MTU so that SCTP never
//!   fragments it (§9). The driver takes messages with `SctpLlp::poll_message` and hands
//!   each to its SCTP association; positions count message octets, accepted once the
//!   association took the message.
//! * **Order.** Messages arrive in any order; the DDP Stream Session puts them back in
//!   DDP-SSN order (§5.2.1, §10) before DDP sees them, so untagged messages complete only
//!   when every segment of them has arrived, and completions keep RDMAP's order. A Tagged
//!   segment that arrives ahead of a gap is also offered to the engine at once
//!   (`RxItem::Ahead`): Placement may happen in any order, Delivery may not (RFC 5041
//!   §1.2, §2.1).
//! * **Setup** (§6, RFC 6581 §7): the active side sends the (Enhanced) DDP Stream Session
//!   Initiate with its IRD/ORD and the ULP's private data (PPID 17); the passive side
//!   answers Accept (with its IRD/ORD) or Reject. No DDP Segment goes out before the
//!   Accept (§6.6). IRD/ORD: each side's ORD is at most the other side's IRD.
//! * **Errors.** A message that breaks §6 or §10 ends the session with a DDP Stream
//!   Session Terminate; the engine fails the QP and the driver aborts the association.

use std::collections::VecDeque;
use std::time::Duration;

use crate::Instant;

use mpa::EnhancedData;

/// Largest IRD or ORD the RFC 6581 words carry (14 bits).
const IRD_ORD_MAX: u16 = 0x3FFF;
use rdmap::Header;
use sctp::ddp_adapt::{Outgoing, SessionEvent, StreamSession};

use super::{LlpSession, PayloadSrc, SctpSession, Session, SetupStep};
use crate::engine::SetupError;

/// How long the active side waits for the Accept or Reject, and the passive side for the
/// Initiate (the MPA timeouts' counterparts).
pub const SESSION_TIMEOUT: Duration = mpa::negotiate::REPLY_TIMEOUT;

/// DDP over SCTP settings of one connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SctpConfig {
    /// Our IRD.
    pub ird: u16,
    /// Our ORD.
    pub ord: u16,
    /// ULP private data sent in the Initiate or Accept (at most 508 octets with enhanced
    /// session control, 512 without).
    pub private_data: Vec<u8>,
    /// Largest DDP Segment we send (RFC 5043 §9: fits the path MTU without fragmentation;
    /// see [`sctp::ddp_adapt::max_ddp_segment`]).
    pub max_segment: usize,
    /// RFC 6581 enhanced session control (IRD/ORD exchanged); default on.
    pub enhanced: bool,
    /// SCTP stream carrying the DDP stream.
    pub stream: u16,
}

impl SctpConfig {
    /// IRD/ORD and private data from an MPA configuration (what the two LLPs share), the
    /// segment size from a path MTU and what lies below IP (see
    /// [`sctp::ddp_adapt::max_ddp_segment`]).
    pub fn from_mpa(cfg: &mpa::Config, max_segment: usize) -> SctpConfig {
        SctpConfig {
            ird: cfg.ird,
            ord: cfg.ord,
            private_data: cfg.private_data.clone(),
            max_segment,
            enhanced: true,
            stream: 0,
        }
    }

    fn enhanced_pd(&self, ird: u16, ord: u16) -> Vec<u8> {
        let mut pd = Vec::with_capacity(4 + self.private_data.len());
        if self.enhanced {
            let e = EnhancedData {
                ird: ird.min(IRD_ORD_MAX),
                ord: ord.min(IRD_ORD_MAX),
                p2p: false,
                rtr: Default::default(),
            };
            // IRD and ORD are capped to 14 bits above.
            pd.extend_from_slice(&e.to_bytes().unwrap_or([0; 4]));
        }
        pd.extend_from_slice(&self.private_data);
        pd
    }
}

/// Why an SCTP session could not start.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SctpSetupError {
    /// The session control message could not be built (e.g. private data too long).
    #[error("DDP Stream Session: {0}")]
    Session(String),
    /// The peer rejected the Initiate.
    #[error("DDP Stream Session rejected by the peer ({} bytes of private data)", .0.len())]
    Rejected(Vec<u8>),
    /// The peer's Initiate or Accept broke RFC 5043 §6/§10 or RFC 6581 §7.
    #[error("DDP Stream Session protocol violation: {0}")]
    Violation(String),
    /// The peer ended the session (Terminate) during setup.
    #[error("DDP Stream Session terminated by the peer during setup")]
    Terminated,
}

/// What a received message did, for the engine.
#[derive(Debug)]
pub(crate) enum RxItem {
    /// A DDP Segment, in DDP-SSN order; `placed`: its payload was placed when it arrived
    /// (after an [`RxItem::Ahead`] the engine confirmed with [`SctpLlp::mark_placed`]).
    Segment { data: Vec<u8>, placed: bool },
    /// A Tagged DDP Segment that arrived ahead of earlier messages: the engine may place it
    /// now (RFC 5041 §2.1) and confirm with [`SctpLlp::mark_placed`]`(pos)`.
    Ahead { pos: u64, data: Vec<u8> },
    /// Setup progressed or ended.
    Setup(SetupStep),
    /// The peer ended the session (DDP Stream Session Terminate).
    Terminated,
    /// The peer broke RFC 5043 §6/§10: the session is over (our Terminate is queued).
    Violation,
}

/// The SCTP LLP of one connection. See the [module documentation](self).
#[derive(Debug)]
pub(crate) struct SctpLlp {
    cfg: SctpConfig,
    session: StreamSession,
    established: bool,
    deadline: Option<Instant>,
    out: VecDeque<Outgoing>,
    produced: u64,
    consumed: u64,
    /// Octets in `out`.
    queued: usize,
    /// A deliberate protocol fault ([`crate::Fault`]): the SCTP ones change the messages
    /// as they are queued.
    fault: Option<crate::Fault>,
}

impl SctpLlp {
    /// The active side: queues the Initiate.
    pub(crate) fn initiator(
        cfg: SctpConfig,
        now: Instant,
        fault: Option<crate::Fault>,
    ) -> Result<SctpLlp, SctpSetupError> {
        let pd = cfg.enhanced_pd(cfg.ird, cfg.ord);
        let session = if cfg.enhanced {
            StreamSession::initiate_enhanced(cfg.stream, cfg.max_segment, &pd)
        } else {
            StreamSession::initiate(cfg.stream, cfg.max_segment, &pd)
        }
        .map_err(|e| SctpSetupError::Session(e.to_string()))?;
        let mut l = SctpLlp::new(cfg, session, now, fault);
        l.collect();
        Ok(l)
    }

    /// The passive side: waits for the Initiate.
    pub(crate) fn responder(cfg: SctpConfig, now: Instant, fault: Option<crate::Fault>) -> SctpLlp {
        let session = StreamSession::listen(cfg.stream, cfg.max_segment);
        SctpLlp::new(cfg, session, now, fault)
    }

    fn new(
        cfg: SctpConfig,
        session: StreamSession,
        now: Instant,
        fault: Option<crate::Fault>,
    ) -> SctpLlp {
        SctpLlp {
            cfg,
            session,
            established: false,
            deadline: Some(now.saturating_add(SESSION_TIMEOUT)),
            out: VecDeque::new(),
            produced: 0,
            consumed: 0,
            queued: 0,
            fault,
        }
    }

    /// Largest ULPDU.
    pub(crate) fn max_ulpdu(&self) -> usize {
        self.cfg.max_segment
    }

    pub(crate) fn can_send(&self) -> bool {
        self.established
    }

    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        self.deadline
    }

    /// Timer expiry: what did not arrive in time, if its timer ran out.
    pub(crate) fn handle_timeout(&mut self, now: Instant) -> Option<&'static str> {
        let d = self.deadline?;
        if now < d {
            return None;
        }
        self.deadline = None;
        Some(if self.session.role() == sctp::ddp_adapt::Role::Active {
            "DDP Stream Session Accept"
        } else {
            "DDP Stream Session Initiate"
        })
    }

    pub(crate) fn abandon_setup(&mut self) -> bool {
        self.deadline.take().is_some()
    }

    fn collect(&mut self) {
        for mut m in self.session.poll_outgoing() {
            self.fault_message(&mut m);
            self.produced += m.data.len() as u64;
            self.queued += m.data.len();
            self.out.push_back(m);
        }
    }

    /// The message as the SCTP faults distort it: `SctpWrongPpid` sends DDP Segments with
    /// PPID 0, `SctpAcceptSsn` gives the Session Accept DDP-SSN 1.
    fn fault_message(&self, m: &mut Outgoing) {
        use sctp::ddp_adapt::{FunctionCode, PPID_DDP_SEGMENT, PPID_DDP_STREAM_SESSION_CONTROL};
        match self.fault {
            Some(crate::Fault::SctpWrongPpid) if m.ppid == PPID_DDP_SEGMENT => m.ppid = 0,
            Some(crate::Fault::SctpAcceptSsn)
                if m.ppid == PPID_DDP_STREAM_SESSION_CONTROL && m.data.len() >= 4 =>
            {
                let code = u16::from_be_bytes([m.data[2], m.data[3]]);
                if FunctionCode::from_code(code).map(FunctionCode::base)
                    == Some(FunctionCode::Accept)
                {
                    m.data[..2].copy_from_slice(&1u16.to_be_bytes());
                }
            }
            _ => {}
        }
    }

    /// Queues one DDP Segment of `header` and what `payload` appends, built in place in
    /// the message (after the DDP-SSN).
    fn segment(&mut self, header: &Header, payload: impl FnOnce(&mut Vec<u8>)) {
        let r = self.session.send_segment_with(|m| {
            let at = m.len();
            m.resize(at + 96, 0);
            let n = header.emit(&mut m[at..]).unwrap_or(0);
            m.truncate(at + n);
            payload(m);
        });
        // Segments are cut at max_ulpdu and only sent once established: an error here would
        // be a bug, and sends nothing.
        if r.is_ok() {
            self.collect();
        }
    }

    /// Queues one DDP Segment carrying `header` and `payload`.
    pub(crate) fn send(&mut self, header: &Header, payload: &[u8]) {
        self.segment(header, |m| m.extend_from_slice(payload));
    }

    /// Queues one DDP Segment carrying `len` payload octets from `src` (zeros when the
    /// memory is not all there).
    pub(crate) fn send_from(&mut self, header: &Header, len: usize, src: &PayloadSrc<'_>) {
        self.segment(header, |m| src.append_or_zeros(0, len, m));
    }

    pub(crate) fn produced(&self) -> u64 {
        self.produced
    }

    pub(crate) fn consumed(&self) -> u64 {
        self.consumed
    }

    pub(crate) fn pending(&self) -> usize {
        self.queued
    }

    pub(crate) fn discard(&mut self) {
        self.out.clear();
        self.queued = 0;
    }

    /// The next message to hand to SCTP (stream, PPID, data; always unordered).
    pub(crate) fn poll_message(&self) -> Option<&Outgoing> {
        self.out.front()
    }

    /// The message from [`SctpLlp::poll_message`] was accepted by SCTP.
    pub(crate) fn message_done(&mut self) {
        let _ = self.take_message();
    }

    /// Takes the next message for SCTP, counted as accepted.
    pub(crate) fn take_message(&mut self) -> Option<Outgoing> {
        let m = self.out.pop_front()?;
        self.consumed += m.data.len() as u64;
        self.queued -= m.data.len();
        Some(m)
    }

    /// A message received on the association (any order).
    pub(crate) fn handle_message(
        &mut self,
        ppid: u32,
        unordered: bool,
        data: &[u8],
    ) -> Vec<RxItem> {
        let events = self.session.receive(ppid, unordered, data);
        let mut items = Vec::with_capacity(events.len());
        for e in events {
            let item = match e {
                SessionEvent::Segment(data) => RxItem::Segment {
                    data,
                    placed: false,
                },
                SessionEvent::PlacedSegment(data) => RxItem::Segment { data, placed: true },
                SessionEvent::Ahead { pos, segment } => RxItem::Ahead { pos, data: segment },
                SessionEvent::InitiateReceived(pd) => RxItem::Setup(self.on_initiate(&pd)),
                SessionEvent::Accepted(pd) => RxItem::Setup(self.on_accept(&pd)),
                SessionEvent::Rejected(pd) => {
                    self.deadline = None;
                    let pd = if self.session.enhanced() && pd.len() >= 4 {
                        pd[4..].to_vec()
                    } else {
                        pd
                    };
                    RxItem::Setup(SetupStep::Failed(SetupError::Sctp(
                        SctpSetupError::Rejected(pd),
                    )))
                }
                SessionEvent::Terminated => {
                    if self.deadline.take().is_some() {
                        RxItem::Setup(SetupStep::Failed(SetupError::Sctp(
                            SctpSetupError::Terminated,
                        )))
                    } else {
                        RxItem::Terminated
                    }
                }
                SessionEvent::Violation(why) => {
                    if self.deadline.take().is_some() {
                        RxItem::Setup(SetupStep::Failed(SetupError::Sctp(
                            SctpSetupError::Violation(why),
                        )))
                    } else {
                        RxItem::Violation
                    }
                }
            };
            items.push(item);
        }
        self.collect();
        items
    }

    /// The engine placed the payload of the [`RxItem::Ahead`] at `pos`.
    pub(crate) fn mark_placed(&mut self, pos: u64) {
        self.session.mark_placed(pos);
    }

    /// Splits the peer's private data into its RFC 6581 IRD/ORD and the ULP's part.
    fn split_pd(&self, pd: &[u8]) -> Result<(Option<EnhancedData>, Vec<u8>), SetupError> {
        if !self.session.enhanced() {
            return Ok((None, pd.to_vec()));
        }
        match EnhancedData::parse(pd) {
            Some(e) => Ok((Some(e), pd.get(4..).unwrap_or(&[]).to_vec())),
            None => Err(SetupError::Sctp(SctpSetupError::Violation(
                "enhanced session control message without IRD/ORD (RFC 6581 §7)".into(),
            ))),
        }
    }

    fn established(&mut self, ird: u16, ord: u16, peer_pd: Vec<u8>) -> SetupStep {
        self.established = true;
        self.deadline = None;
        SetupStep::Established(Session {
            ird,
            ord,
            peer_private_data: peer_pd,
            llp: LlpSession::Sctp(SctpSession {
                active: self.session.role() == sctp::ddp_adapt::Role::Active,
                enhanced: self.session.enhanced(),
                max_segment: self.cfg.max_segment,
            }),
        })
    }

    /// Passive: the peer's Initiate: accept with our IRD/ORD (our ORD at most the peer's
    /// IRD; our IRD as configured, which covers the peer's ORD once it has read ours).
    fn on_initiate(&mut self, pd: &[u8]) -> SetupStep {
        let (peer, ulp) = match self.split_pd(pd) {
            Ok(x) => x,
            Err(e) => {
                let _ = self.session.reject(&[]);
                self.deadline = None;
                return SetupStep::Failed(e);
            }
        };
        let ord = peer.map_or(self.cfg.ord, |p| self.cfg.ord.min(p.ird));
        let ird = self.cfg.ird;
        let reply = self.cfg.enhanced_pd(ird, ord);
        if let Err(e) = self.session.accept(&reply) {
            self.deadline = None;
            return SetupStep::Failed(SetupError::Sctp(SctpSetupError::Session(e.to_string())));
        }
        self.established(ird, ord, ulp)
    }

    /// Active: the peer accepted: our ORD at most its IRD.
    fn on_accept(&mut self, pd: &[u8]) -> SetupStep {
        let (peer, ulp) = match self.split_pd(pd) {
            Ok(x) => x,
            Err(e) => {
                self.deadline = None;
                return SetupStep::Failed(e);
            }
        };
        let ord = peer.map_or(self.cfg.ord, |p| self.cfg.ord.min(p.ird));
        self.established(self.cfg.ird, ord, ulp)
    }
}
