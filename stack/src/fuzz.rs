//! Entry points for fuzzers and property tests: a hostile peer against an established QP
//! engine.
//!
//! [`hostile_peer`] builds an engine in full operation with registered memory — a region the
//! peer may write, read and use for atomics, four posted receive buffers, and a guard region
//! registered for local access only — and feeds it arbitrary input from the peer: an MPA
//! byte stream (CRC off or on, markers or not, any chunking) or a sequence of SCTP messages
//! (RFC 5043; any PPID, ordered or not). So that input reaches placement instead of failing
//! the cheap checks, SCTP messages can ask for their DDP-SSN to be the one expected next
//! and for a tagged segment's STag and TO to name the granted region. It panics — the
//! fuzzer's signal — if a byte of the guard region changes, or if the QP leaves RTS without
//! a Terminate sent or received (over SCTP, or a DDP Stream Session Terminate queued), the
//! responses RFC 5040 §7 and RFC 5043 §6 prescribe, or the peer closing the stream (its own
//! Session Terminate).

use crate::Instant;

use sctp::ddp_adapt::{FunctionCode, PPID_DDP_STREAM_SESSION_CONTROL, SessionControl};

use crate::cq::{Cq, QpId};
use crate::engine::{QpConfig, QpEngine, QpEvent, QpState, Setup};
use crate::llp::sctp::SctpConfig;
use crate::mem::{Access, MemTable, MrOptions};
use crate::wr::RecvWr;

const LEN: usize = 4096;

/// Feeds `data` (first byte: mode; see the [module documentation](self)) to an established
/// engine as the peer's input; panics on a violation.
pub fn hostile_peer(data: &[u8]) {
    let Some((&mode, input)) = data.split_first() else {
        return;
    };
    let mem = MemTable::new();
    let pd = mem.alloc_pd();
    let cq = Cq::new(1024);
    let cfg = QpConfig::new(QpId(1), pd, cq.clone(), cq);
    let all =
        Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC;
    let (Ok(granted), Ok(guard), Ok(recv)) = (
        mem.register_new(pd, LEN, MrOptions::new(all)),
        mem.register_new(pd, LEN, MrOptions::new(Access::LOCAL_WRITE)),
        mem.register_new(pd, LEN, MrOptions::new(Access::LOCAL_WRITE)),
    ) else {
        return;
    };
    let sctp = mode & 4 != 0;
    let setup = if sctp {
        Setup::SctpInitiator(SctpConfig {
            ird: 4,
            ord: 4,
            private_data: Vec::new(),
            max_segment: 1400,
            enhanced: true,
            stream: 0,
        })
    } else {
        Setup::Established(mpa::Session {
            role: mpa::Role::Responder,
            revision: 2,
            crc: mode & 1 != 0,
            markers_tx: false,
            markers_rx: mode & 2 != 0,
            enhanced: true,
            ird: 4,
            ord: 4,
            p2p: false,
            rtr: None,
            peer_private_data: Vec::new(),
        })
    };
    let Ok(mut eng) = QpEngine::new(cfg, mem.clone(), setup, Instant::ZERO) else {
        return;
    };
    let mut session_terminated = false;
    if sctp {
        // The peer accepts: full operation.
        let accept = SessionControl {
            ddp_ssn: 0,
            function: FunctionCode::EnhancedAccept,
            private_data: vec![0, 4, 0, 4],
        };
        if let Ok(m) = accept.emit() {
            eng.handle_message(Instant::ZERO, PPID_DDP_STREAM_SESSION_CONTROL, true, &m);
        }
    }
    for i in 0..4u64 {
        let _ = eng.post_recv(RecvWr::new(i, vec![recv.sge(i * 1024, 1024)]));
    }
    if sctp {
        // Messages: [flags, len hi, len lo, data...]. Flags: 1 unordered, 2 PPID 17, 4 the
        // next DDP-SSN, 8 a tagged segment's STag and TO into the granted region.
        let mut rest = input;
        let mut next_ssn: u16 = 1;
        while rest.len() >= 3 {
            let flags = rest[0];
            let n = usize::from(u16::from_be_bytes([rest[1], rest[2]]));
            let body = rest.get(3..).unwrap_or_default();
            let n = n.min(body.len());
            let mut msg = body.get(..n).unwrap_or_default().to_vec();
            rest = body.get(n..).unwrap_or_default();
            if flags & 4 != 0 && msg.len() >= 2 {
                msg[..2].copy_from_slice(&next_ssn.to_be_bytes());
                next_ssn = next_ssn.wrapping_add(1);
            }
            if flags & 8 != 0 && msg.len() >= 16 && msg[2] & 0x80 != 0 {
                msg[4..8].copy_from_slice(&granted.stag().to_be_bytes());
                let off = u64::from_be_bytes(msg[8..16].try_into().unwrap_or_default());
                let to = granted.to_at(off % LEN as u64);
                msg[8..16].copy_from_slice(&to.to_be_bytes());
            }
            let ppid = if flags & 2 != 0 { 17 } else { 16 };
            eng.handle_message(Instant::ZERO, ppid, flags & 1 != 0, &msg);
            while let Some((_, ppid, d)) = eng.poll_message() {
                if ppid == PPID_DDP_STREAM_SESSION_CONTROL
                    && SessionControl::parse(d).is_ok_and(|c| c.function == FunctionCode::Terminate)
                {
                    session_terminated = true;
                }
                eng.message_done();
            }
        }
    } else {
        let chunk = usize::from(mode >> 3).max(1) * 7;
        let mut sink = Vec::new();
        for piece in input.chunks(chunk) {
            eng.handle_stream(Instant::ZERO, piece);
            sink.clear();
            eng.transmit_all(&mut sink);
        }
    }
    assert!(
        guard.buf().to_vec().iter().all(|&b| b == 0),
        "a byte outside every granted buffer was written"
    );
    let mut terminate = false;
    while let Some(e) = eng.poll_event() {
        if matches!(
            e,
            QpEvent::TerminateSent(_) | QpEvent::TerminateReceived(_) | QpEvent::TransportClosed(_)
        ) {
            terminate = true;
        }
    }
    assert!(
        eng.state() == QpState::Rts || terminate || session_terminated,
        "left RTS ({:?}) without a Terminate",
        eng.state()
    );
}
