//! The association-backed QP: what a QP carried by an SCTP association (DDP over SCTP,
//! RFC 5043) does the same way on both SCTP carriers of the progress core — softrnic's own
//! SCTP endpoints (`sctp.rs`) and the kernel's SCTP sockets (`ksctp.rs`).
//!
//! The carriers differ in how messages and notifications move; the engine's side is here
//! once: the DDP Stream Session Initiate read from the first message and reported as a
//! connection request, the responder's and initiator's engines started, a Session Reject
//! built, the engine ended when the association is gone, the QP destroyed or the RNIC
//! closed.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use sctp::ddp_adapt::{self, Outgoing, SessionControl, StreamSession};

use super::{Shared, fail_connect};
use crate::Instant;
use crate::engine::{CloseReason, QpEngine, Setup};
use crate::llp::sctp::SctpConfig;
use crate::shared::{CmError, ConnReqId, ConnectRequest, ListenerId, QpShared, SctpRequest};

/// A message a carrier received: its PPID, whether it came unordered, its payload.
pub(super) type Received<'a> = (u32, bool, &'a [u8]);

/// What a Session Initiate carries: the RFC 6581 (IRD, ORD) if enhanced, the ULP private
/// data.
pub(super) type Initiate = (Option<(u16, u16)>, Vec<u8>);

/// The Session Initiate in a message (RFC 5043 §6.1), or `None` if it is not a valid
/// Initiate.
pub(super) fn parse_initiate(ppid: u32, data: &[u8]) -> Option<Initiate> {
    if ppid != ddp_adapt::PPID_DDP_STREAM_SESSION_CONTROL {
        return None;
    }
    let c = SessionControl::parse(data).ok()?;
    match c.function {
        ddp_adapt::FunctionCode::Initiate => Some((None, c.private_data)),
        ddp_adapt::FunctionCode::EnhancedInitiate => {
            let e = mpa::EnhancedData::parse(&c.private_data)?;
            Some((
                Some((e.ird, e.ord)),
                c.private_data.get(ddp_adapt::ENHANCED_DATA_LEN..)?.to_vec(),
            ))
        }
        _ => None,
    }
}

/// Where an association that delivered an Initiate stands, for its connection request.
pub(super) struct RequestFrom {
    /// The listener that accepted the association.
    pub listener: Option<ListenerId>,
    /// The peer's (primary) address and port.
    pub peer: SocketAddr,
    /// Every address of the peer.
    pub peer_addrs: Vec<IpAddr>,
    /// The local address and port.
    pub local: SocketAddr,
    /// The address scheme (`sctp`, `sctp+udp`, `ksctp`…).
    pub scheme: &'static str,
}

/// Reports a Session Initiate as a connection request for the application and registers
/// it as pending; its id.
pub(super) fn report_request(
    shared: &Shared,
    from: RequestFrom,
    (enhanced, private_data): Initiate,
) -> ConnReqId {
    let id = shared.new_request_id();
    tracing::info!(
        peer = %from.peer,
        req = id.0,
        ?enhanced,
        scheme = from.scheme,
        "DDP Stream Session Initiate received"
    );
    shared.offer_request(ConnectRequest {
        id,
        listener: from.listener.unwrap_or(ListenerId(0)),
        peer: from.peer,
        local: from.local,
        request: None,
        sctp: Some(SctpRequest {
            scheme: from.scheme,
            enhanced,
            peer_addrs: from.peer_addrs,
        }),
        private_data,
    });
    id
}

/// A QP engine for `qp` with its early receives posted; on failure the connection fails
/// (and `None`).
pub(super) fn new_engine(
    shared: &Shared,
    qp: &Arc<QpShared>,
    setup: Setup,
    now: Instant,
) -> Option<QpEngine> {
    let cfg = super::qp_config(shared, qp, crate::engine::DEFAULT_EMSS);
    match QpEngine::new(cfg, shared.mem.clone(), setup, now) {
        Ok(mut engine) => {
            let mut s = qp.lock();
            super::post_early_receives(qp, &mut s, &mut engine);
            Some(engine)
        }
        Err(e) => {
            qp.flush_early();
            fail_connect(shared, qp, CmError::Tcp(format!("engine: {e}")));
            None
        }
    }
}

/// Puts `engine` into `qp`'s slot and opens its doorbell rings.
fn install(qp: &Arc<QpShared>, mut engine: QpEngine) {
    let mut s = qp.lock();
    qp.publish_engine(&mut engine, true);
    s.engine = Some(engine);
}

/// Starts `qp`'s engine as session initiator over DDP segments of `seg` octets; false if
/// the engine could not be made (the connection failed).
pub(super) fn start_initiator(
    shared: &Shared,
    qp: &Arc<QpShared>,
    cfg: &mpa::Config,
    seg: usize,
    now: Instant,
) -> bool {
    let setup = Setup::SctpInitiator(SctpConfig::from_mpa(cfg, seg));
    match new_engine(shared, qp, setup, now) {
        Some(engine) => {
            install(qp, engine);
            true
        }
        None => false,
    }
}

/// Starts `qp`'s engine as session responder over DDP segments of `seg` octets and hands
/// it the messages held for it (the Initiate first); false if the engine could not be made
/// (the connection failed).
pub(super) fn start_responder<'a>(
    shared: &Shared,
    qp: &Arc<QpShared>,
    cfg: &mpa::Config,
    seg: usize,
    held: impl IntoIterator<Item = Received<'a>>,
    now: Instant,
) -> bool {
    let setup = Setup::SctpResponder(SctpConfig::from_mpa(cfg, seg));
    match new_engine(shared, qp, setup, now) {
        Some(mut engine) => {
            for (ppid, unordered, data) in held {
                engine.handle_message(now, ppid, unordered, data);
            }
            install(qp, engine);
            true
        }
        None => false,
    }
}

/// The messages that answer the held Initiate with a Session Reject carrying `pd` (an
/// Enhanced Reject, zero IRD/ORD before the private data, if the Initiate was enhanced:
/// RFC 6581 §7).
pub(super) fn reject_messages<'a>(
    held: impl IntoIterator<Item = Received<'a>>,
    pd: &[u8],
) -> Vec<Outgoing> {
    let mut s = StreamSession::listen(0, ddp_adapt::MIN_USER_DATA);
    for (ppid, unordered, data) in held {
        let _ = s.receive(ppid, unordered, data);
    }
    let mut reply = Vec::new();
    if s.enhanced() {
        reply.extend_from_slice(&[0; ddp_adapt::ENHANCED_DATA_LEN]);
    }
    reply.extend_from_slice(&pd[..pd.len().min(ddp_adapt::MAX_PRIVATE_DATA - reply.len())]);
    let _ = s.reject(&reply);
    s.poll_outgoing()
}

/// Ends `qp`'s engine because its association is gone for `reason`: rings closed and
/// drained, the close reported to the engine (everything outstanding is flushed), its
/// events turned into RNIC events.
pub(super) fn close(shared: &Shared, qp: &Arc<QpShared>, now: Instant, reason: CloseReason) {
    super::end_engine(shared, qp, now, Some(reason));
}

/// The close reason to give the engine when the association ended for `reason`: the
/// peer's SHUTDOWN after ours is our own close.
pub(super) fn end_reason(shut: bool, reason: CloseReason) -> CloseReason {
    if shut && reason == CloseReason::PeerClosed {
        CloseReason::Local
    } else {
        reason
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn initiate(function: ddp_adapt::FunctionCode, pd: &[u8]) -> Vec<u8> {
        SessionControl {
            ddp_ssn: 0,
            function,
            private_data: pd.to_vec(),
        }
        .emit()
        .expect("a valid session control message")
    }

    #[test]
    fn rfc5043_6_1_initiate_read_from_session_control_only() {
        let m = initiate(ddp_adapt::FunctionCode::Initiate, b"hello");
        assert_eq!(
            parse_initiate(ddp_adapt::PPID_DDP_STREAM_SESSION_CONTROL, &m),
            Some((None, b"hello".to_vec()))
        );
        // The same bytes as a DDP Segment are not an Initiate.
        assert_eq!(parse_initiate(ddp_adapt::PPID_DDP_SEGMENT, &m), None);
        let accept = initiate(ddp_adapt::FunctionCode::Accept, b"");
        assert_eq!(
            parse_initiate(ddp_adapt::PPID_DDP_STREAM_SESSION_CONTROL, &accept),
            None
        );
        assert_eq!(
            parse_initiate(ddp_adapt::PPID_DDP_STREAM_SESSION_CONTROL, &[1, 2]),
            None
        );
    }

    #[test]
    fn rfc6581_7_enhanced_initiate_and_reject() {
        let (ird, ord) = mpa::EnhancedData {
            ird: 3,
            ord: 5,
            ..Default::default()
        }
        .to_words()
        .expect("14-bit IRD and ORD");
        let mut pd = [ird.to_be_bytes(), ord.to_be_bytes()].concat();
        pd.extend_from_slice(b"ulp");
        let m = initiate(ddp_adapt::FunctionCode::EnhancedInitiate, &pd);
        let ppid = ddp_adapt::PPID_DDP_STREAM_SESSION_CONTROL;
        assert_eq!(
            parse_initiate(ppid, &m),
            Some((Some((3, 5)), b"ulp".to_vec()))
        );
        // The Reject of an enhanced Initiate is enhanced: zero IRD/ORD, then the data.
        let out = reject_messages([(ppid, true, m.as_slice())], b"no");
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].ppid, ppid);
        let c = SessionControl::parse(&out[0].data).expect("a session control message");
        assert_eq!(c.function, ddp_adapt::FunctionCode::EnhancedReject);
        assert_eq!(
            c.private_data.get(ddp_adapt::ENHANCED_DATA_LEN..),
            Some(&b"no"[..])
        );
        assert_eq!(c.private_data[..ddp_adapt::ENHANCED_DATA_LEN], [0; 4]);
    }

    #[test]
    fn rfc5043_6_3_plain_reject_carries_bounded_private_data() {
        let ppid = ddp_adapt::PPID_DDP_STREAM_SESSION_CONTROL;
        let m = initiate(ddp_adapt::FunctionCode::Initiate, b"");
        let long = vec![7u8; ddp_adapt::MAX_PRIVATE_DATA + 100];
        let out = reject_messages([(ppid, true, m.as_slice())], &long);
        assert_eq!(out.len(), 1);
        let c = SessionControl::parse(&out[0].data).expect("a session control message");
        assert_eq!(c.function, ddp_adapt::FunctionCode::Reject);
        assert_eq!(c.private_data.len(), ddp_adapt::MAX_PRIVATE_DATA);
    }

    #[test]
    fn rfc5043_10_ordered_initiate_gets_a_terminate_not_a_reject() {
        let ppid = ddp_adapt::PPID_DDP_STREAM_SESSION_CONTROL;
        let m = initiate(ddp_adapt::FunctionCode::Initiate, b"");
        let out = reject_messages([(ppid, false, m.as_slice())], b"no");
        assert_eq!(out.len(), 1);
        let c = SessionControl::parse(&out[0].data).expect("a session control message");
        assert_eq!(c.function, ddp_adapt::FunctionCode::Terminate);
    }

    #[test]
    fn shutdown_answered_by_peer_is_a_local_close() {
        assert_eq!(
            end_reason(true, CloseReason::PeerClosed),
            CloseReason::Local
        );
        assert_eq!(
            end_reason(false, CloseReason::PeerClosed),
            CloseReason::PeerClosed
        );
        assert_eq!(end_reason(true, CloseReason::Reset), CloseReason::Reset);
    }
}
