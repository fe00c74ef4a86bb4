//! The engine over the SCTP LLP (RFC 5043), two engines back to back: messages move from
//! one engine's `poll_message` to the other's `handle_message`, each batch delivered in a
//! shuffled order (SCTP unordered delivery). Every operation, data verified byte for byte;
//! session setup with IRD/ORD and private data; Terminates; segment sizes.

mod common;

use common::sctp::{Messages, SEG, SctpPair, cfg};
use common::{Side, all_access, pattern};
use stack::rdmap::{Message, Terminate};
use stack::sctp::ddp_adapt::{
    self, DdpSctpMessage, FunctionCode, PPID_DDP_SEGMENT, PPID_DDP_STREAM_SESSION_CONTROL,
    SessionControl,
};
use stack::{
    MrOptions, QpEvent, QpState, RecvWr, SendOp, SendWr, Setup, SetupError, WcOpcode, WcStatus,
};

fn controls(wire: &Messages, from_a: bool) -> Vec<SessionControl> {
    wire.iter()
        .filter(|(f, p, _)| *f == from_a && *p == PPID_DDP_STREAM_SESSION_CONTROL)
        .map(|(_, _, d)| SessionControl::parse(d).expect("control"))
        .collect()
}

/// RFC 5043 §6.2 with RFC 6581 §7: the active side's Enhanced Initiate carries its IRD/ORD
/// and private data, the passive side's Enhanced Accept its own; each side's ORD is at most
/// the other's IRD, and each sees the other's ULP private data.
#[test]
fn rfc5043_6_2_session_setup_with_ird_ord_and_private_data() {
    let mut p = SctpPair::new(cfg(4, 16, b"client"), cfg(10, 2, b"server"), None);
    p.pump();
    let sa = p.a.eng.session().expect("a established").clone();
    let sb = p.b.eng.session().expect("b established").clone();
    assert_eq!(sa.peer_private_data, b"server");
    assert_eq!(sb.peer_private_data, b"client");
    // a: ORD min(16, b's IRD 10) = 10; b: ORD min(2, a's IRD 4) = 2.
    assert_eq!((sa.ird, sa.ord), (4, 10));
    assert_eq!((sb.ird, sb.ord), (10, 2));
    assert!(sa.sctp().is_some_and(|s| s.active && s.enhanced));
    let ca = controls(&p.wire, true);
    let cb = controls(&p.wire, false);
    assert_eq!(ca.len(), 1);
    assert_eq!(ca[0].function, FunctionCode::EnhancedInitiate);
    assert_eq!(&ca[0].private_data[..4], &[0, 4, 0, 16]);
    assert_eq!(&ca[0].private_data[4..], b"client");
    assert_eq!(cb[0].function, FunctionCode::EnhancedAccept);
    assert_eq!(&cb[0].private_data[..4], &[0, 10, 0, 2]);
}

/// RFC 5043 §6.6: no DDP Segment before the Accept. A Send posted by the active side at
/// once waits; only the Initiate goes out until the Accept has arrived.
#[test]
fn rfc5043_6_6_no_segment_before_accept() {
    let mut p = SctpPair::new(cfg(8, 8, b""), cfg(8, 8, b""), None);
    let src = p.a.mr(64);
    p.a.eng
        .post_send(SendWr::send(1, vec![src.sge(0, 64)]))
        .expect("post while connecting");
    let first = SctpPair::take(&mut p.a);
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].1, PPID_DDP_STREAM_SESSION_CONTROL);
    let dst = p.b.mr(64);
    p.b.eng
        .post_recv(RecvWr::new(9, vec![dst.sge(0, 64)]))
        .expect("recv");
    p.b.eng
        .handle_message(stack::Instant::ZERO, first[0].1, true, &first[0].2);
    p.pump();
    assert_eq!(p.b.recv_wcs().len(), 1);
}

/// RFC 5043 §9 and §5.2.2: every DDP Segment is one PPID 16 message of at most the
/// maximum segment size (plus the 2-octet DDP-SSN), DDP-SSNs count up from 0 without gaps,
/// and the segment carries no MPA framing (it parses as DDP/RDMAP as it is).
#[test]
fn rfc5043_9_segments_fit_the_maximum_and_ssns_have_no_gaps() {
    let mut p = SctpPair::established(None);
    let data = pattern(50_000, 7);
    let src = p.a.mr(data.len());
    src.buf().write_at(0, &data).expect("fits");
    let dst = p.b.mr(data.len());
    p.b.eng
        .post_recv(RecvWr::new(1, vec![dst.sge(0, data.len() as u32)]))
        .expect("recv");
    p.a.eng
        .post_send(SendWr::send(2, vec![src.sge(0, data.len() as u32)]))
        .expect("send");
    p.pump();
    let mut ssns = Vec::new();
    for (from_a, ppid, d) in &p.wire {
        if !*from_a {
            continue;
        }
        assert!(d.len() <= SEG + 2, "message of {} octets", d.len());
        match ddp_adapt::parse(*ppid, d).expect("valid message") {
            DdpSctpMessage::Control(c) => ssns.push(c.ddp_ssn),
            DdpSctpMessage::Segment(s) => {
                Message::parse(s.segment).expect("a bare DDP/RDMAP segment");
                ssns.push(s.ddp_ssn);
            }
        }
    }
    assert!(ssns.len() > 36, "{} messages", ssns.len());
    assert_eq!(ssns, (0..ssns.len() as u16).collect::<Vec<_>>());
    assert_eq!(dst.buf().to_vec(), data);
}

/// RFC 5040 §5 over RFC 5043 with unordered delivery (every batch shuffled): Send (many
/// segments), Send with Solicited Event, RDMA Write, RDMA Read (many response segments),
/// Fetch and Add, Compare and Swap, Immediate Data and Send with Invalidate all deliver
/// every byte and complete in order.
#[test]
fn rfc5043_every_operation_with_reordered_messages() {
    for seed in [1u64, 2, 3, 99] {
        let mut p = SctpPair::established(Some(seed));
        let data = pattern(40_000, seed as u8);
        let src = p.a.mr(data.len());
        src.buf().write_at(0, &data).expect("fits");
        // Send into b.
        let rbuf = p.b.mr(data.len());
        p.b.eng
            .post_recv(RecvWr::new(10, vec![rbuf.sge(0, data.len() as u32)]))
            .expect("recv");
        p.a.eng
            .post_send(SendWr::send(1, vec![src.sge(0, data.len() as u32)]))
            .expect("send");
        // Targets that cannot be invalidated are placed as their segments arrive (RFC 5041
        // §2.1); the others in order: odd seeds the first kind, even seeds the second.
        let target = if seed % 2 == 1 {
            MrOptions::new(all_access()).not_invalidatable()
        } else {
            MrOptions::new(all_access())
        };
        // Write into b.
        let wdst = p.b.mr_with(data.len(), target.clone());
        p.a.eng
            .post_send(SendWr::write(
                2,
                vec![src.sge(0, data.len() as u32)],
                wdst.stag(),
                wdst.to_at(0),
            ))
            .expect("write");
        // Read from b into a.
        let rsrc = p.b.mr(30_000);
        let rdata = pattern(30_000, 0x40 + seed as u8);
        rsrc.buf().write_at(0, &rdata).expect("fits");
        let sink = p.a.mr_with(30_000, target);
        p.a.eng
            .post_send(SendWr::read(
                3,
                vec![sink.sge(0, 30_000)],
                rsrc.stag(),
                rsrc.to_at(0),
            ))
            .expect("read");
        // Atomics on b's 8-byte word.
        let word = p.b.mr(8);
        word.buf().write_at(0, &5u64.to_ne_bytes()).expect("fits");
        let orig = p.a.mr(16);
        p.a.eng
            .post_send(SendWr::new(
                4,
                SendOp::FetchAdd {
                    remote_stag: word.stag(),
                    remote_to: word.to_at(0),
                    add: 10,
                    add_mask: 0,
                },
                vec![orig.sge(0, 8)],
            ))
            .expect("fadd");
        p.a.eng
            .post_send(SendWr::new(
                5,
                SendOp::CmpSwap {
                    remote_stag: word.stag(),
                    remote_to: word.to_at(0),
                    compare: 15,
                    compare_mask: u64::MAX,
                    swap: 77,
                    swap_mask: u64::MAX,
                },
                vec![orig.sge(8, 8)],
            ))
            .expect("cswap");
        // Immediate Data and Send with Invalidate of a b region.
        let victim = p.b.mr_with(64, MrOptions::new(all_access()));
        let r2 = p.b.mr(16);
        p.b.eng
            .post_recv(RecvWr::new(11, vec![]))
            .expect("recv imm");
        p.b.eng
            .post_recv(RecvWr::new(12, vec![r2.sge(0, 16)]))
            .expect("recv inv");
        p.a.eng
            .post_send(SendWr::new(
                6,
                SendOp::ImmediateData {
                    data: *b"IMMEDIAT",
                    solicited: true,
                },
                vec![],
            ))
            .expect("imm");
        p.a.eng
            .post_send(SendWr::new(
                7,
                SendOp::Send {
                    solicited: true,
                    invalidate: Some(victim.stag()),
                },
                vec![src.sge(0, 16)],
            ))
            .expect("send inv");
        p.pump();
        let s = p.a.send_wcs();
        let ids: Vec<u64> = s.iter().map(|w| w.wr_id).collect();
        assert_eq!(ids, vec![1, 2, 3, 4, 5, 6, 7], "seed {seed}");
        assert!(s.iter().all(|w| w.status == WcStatus::Success), "{s:?}");
        let r = p.b.recv_wcs();
        assert_eq!(
            r.iter().map(|w| w.wr_id).collect::<Vec<_>>(),
            vec![10, 11, 12]
        );
        assert_eq!(r[0].byte_len as usize, data.len());
        assert_eq!(r[1].imm_data, Some(*b"IMMEDIAT"));
        assert_eq!(r[2].invalidated_stag, Some(victim.stag()));
        assert_eq!(r[2].opcode, WcOpcode::Recv);
        assert_eq!(rbuf.buf().to_vec(), data, "seed {seed}: Send");
        assert_eq!(wdst.buf().to_vec(), data, "seed {seed}: Write");
        assert_eq!(sink.buf().to_vec(), rdata, "seed {seed}: Read");
        let o = orig.buf().to_vec();
        assert_eq!(u64::from_ne_bytes(o[..8].try_into().unwrap()), 5);
        assert_eq!(u64::from_ne_bytes(o[8..].try_into().unwrap()), 15);
        assert_eq!(
            u64::from_ne_bytes(word.buf().to_vec().try_into().unwrap()),
            77
        );
        assert!(p.a.terminate_received().is_none() && p.b.terminate_sent().is_none());
    }
}

/// RFC 5040 §7 / RFC 5041 §7 over RFC 5043: an RDMA Write to an STag that does not exist
/// is refused with the DDP "Invalid STag" Terminate, sent as a DDP Segment (PPID 16); the
/// target's memory stays untouched, and both QPs leave RTS. (The Write itself completed
/// when SCTP took its last segment: a Write has no response.)
#[test]
fn rfc5041_7_invalid_stag_terminate_over_sctp() {
    let mut p = SctpPair::established(Some(5));
    let guard = p.b.mr(4096);
    let src = p.a.mr(4096);
    src.buf().write_at(0, &[0xAB; 4096]).expect("fits");
    p.a.eng
        .post_send(SendWr::write(
            1,
            vec![src.sge(0, 4096)],
            guard.stag() ^ 0x55_00,
            0,
        ))
        .expect("write");
    p.pump();
    let t: Terminate = p.b.terminate_sent().expect("b sent a Terminate");
    assert_eq!(Some(t), p.a.terminate_received());
    assert_eq!(
        t.cause,
        stack::rdmap::TermCause::Ddp(stack::ddp::DdpCode::Tagged(
            stack::ddp::TaggedCode::InvalidStag
        ))
    );
    assert!(guard.buf().to_vec().iter().all(|&x| x == 0));
    let w = p.a.send_wcs();
    assert_eq!(w[0].status, WcStatus::Success);
    // The Terminate went out as a DDP segment on PPID 16.
    let term_msgs = p
        .wire
        .iter()
        .filter(|(from_a, ppid, d)| {
            !from_a
                && *ppid == PPID_DDP_SEGMENT
                && matches!(
                    ddp_adapt::parse(*ppid, d),
                    Ok(DdpSctpMessage::Segment(s)) if matches!(
                        s.rdmap().map(|m| m.header),
                        Ok(stack::rdmap::Header::Terminate { .. })
                    )
                )
        })
        .count();
    assert_eq!(term_msgs, 1);
    assert!(
        p.b.eng.should_close_transport(),
        "{:?} {:?}",
        p.b.eng.state(),
        p.b.events
    );
    assert_ne!(p.a.eng.state(), QpState::Rts);
}

/// RFC 6581 §7: an Enhanced Initiate without its IRD/ORD words is malformed: the passive
/// side fails setup (and the QP never reaches RTS).
#[test]
fn rfc6581_7_enhanced_initiate_without_ird_ord_fails_setup() {
    let mut b = Side::new(2, Setup::SctpResponder(cfg(8, 8, b"")), |_| {});
    let bad = [0u8, 0, 0, 5, 0, 1];
    b.eng.handle_message(
        stack::Instant::ZERO,
        PPID_DDP_STREAM_SESSION_CONTROL,
        true,
        &bad,
    );
    let mut failed = false;
    while let Some(e) = b.eng.poll_event() {
        if let QpEvent::SetupFailed(SetupError::Sctp(_)) = e {
            failed = true;
        }
    }
    assert!(failed);
    assert_eq!(b.eng.state(), QpState::Error);
}

/// RFC 5043 §6.3: the responder's Reject ends setup on the active side with the
/// responder's private data.
#[test]
fn rfc5043_6_3_reject_reaches_the_initiator_with_private_data() {
    let mut a = Side::new(1, Setup::SctpInitiator(cfg(8, 8, b"")), |_| {});
    let init = SctpPair::take(&mut a);
    assert_eq!(init.len(), 1);
    let reject = SessionControl {
        ddp_ssn: 0,
        function: FunctionCode::EnhancedReject,
        private_data: [0, 0, 0, 0, b'n', b'o'].to_vec(),
    }
    .emit()
    .expect("emit");
    a.eng.handle_message(
        stack::Instant::ZERO,
        PPID_DDP_STREAM_SESSION_CONTROL,
        true,
        &reject,
    );
    let mut why = None;
    while let Some(e) = a.eng.poll_event() {
        if let QpEvent::SetupFailed(SetupError::Sctp(e)) = e {
            why = Some(e);
        }
    }
    assert_eq!(
        why,
        Some(stack::llp::sctp::SctpSetupError::Rejected(b"no".to_vec()))
    );
}

/// RFC 5043 §10: a message sent ordered (U = 0) is a violation: the session ends with a
/// DDP Stream Session Terminate and the QP fails without placing anything.
#[test]
fn rfc5043_10_ordered_message_ends_the_session() {
    let mut p = SctpPair::established(None);
    let dst = p.b.mr(64);
    p.b.eng
        .post_recv(RecvWr::new(1, vec![dst.sge(0, 64)]))
        .expect("recv");
    let src = p.a.mr(64);
    src.buf().write_at(0, &[9; 64]).expect("fits");
    p.a.eng
        .post_send(SendWr::send(1, vec![src.sge(0, 64)]))
        .expect("send");
    let msgs = SctpPair::take(&mut p.a);
    let (_, ppid, d) = &msgs[0];
    p.b.eng
        .handle_message(stack::Instant::ZERO, *ppid, false, d);
    assert_eq!(p.b.eng.state(), QpState::Error);
    assert!(dst.buf().to_vec().iter().all(|&x| x == 0));
    let out = SctpPair::take(&mut p.b);
    assert!(
        out.iter()
            .any(|(_, ppid, d)| *ppid == PPID_DDP_STREAM_SESSION_CONTROL
                && SessionControl::parse(d).is_ok_and(|c| c.function == FunctionCode::Terminate))
    );
}

/// The payload length of a DDP Segment message (PPID 16).
fn payload_len(d: &[u8]) -> usize {
    match ddp_adapt::parse(PPID_DDP_SEGMENT, d) {
        Ok(DdpSctpMessage::Segment(s)) => s.rdmap().expect("rdmap").payload.len(),
        other => panic!("not a segment: {other:?}"),
    }
}

/// Delivers `msgs` to `to` (in the given order).
fn deliver(to: &mut common::Side, msgs: &[(u16, u32, Vec<u8>)]) {
    for (_, ppid, d) in msgs {
        to.eng.handle_message(stack::Instant::ZERO, *ppid, true, d);
    }
}

/// What [`write_behind_a_gap`] saw.
struct Gap {
    /// The Write's data.
    data: Vec<u8>,
    /// Payload octets of the Write's first segment (the one held back).
    first: usize,
    /// b's Write target and receive completions with the first segment held back.
    before: Vec<u8>,
    recvs_before: usize,
    /// The same once it arrived.
    after: Vec<u8>,
    recvs_after: usize,
}

/// An RDMA Write of 40 000 bytes and then a Send, from a to b: every message but the
/// Write's first is delivered, then the first.
fn write_behind_a_gap(target: MrOptions) -> Gap {
    let mut p = SctpPair::established(None);
    let data = pattern(40_000, 7);
    let src = p.a.mr(data.len());
    src.buf().write_at(0, &data).expect("fits");
    let wdst = p.b.mr_with(data.len(), target);
    let rbuf = p.b.mr(16);
    p.b.eng
        .post_recv(RecvWr::new(10, vec![rbuf.sge(0, 16)]))
        .expect("recv");
    p.a.eng
        .post_send(SendWr::write(
            1,
            vec![src.sge(0, data.len() as u32)],
            wdst.stag(),
            wdst.to_at(0),
        ))
        .expect("write");
    p.a.eng
        .post_send(SendWr::send(2, vec![src.sge(0, 16)]))
        .expect("send");
    let msgs = SctpPair::take(&mut p.a);
    let first = payload_len(&msgs[0].2);
    deliver(&mut p.b, &msgs[1..]);
    let before = wdst.buf().to_vec();
    let recvs_before = p.b.recv_wcs().len();
    deliver(&mut p.b, &msgs[..1]);
    p.pump();
    assert!(p.b.terminate_sent().is_none());
    Gap {
        data,
        first,
        before,
        recvs_before,
        after: wdst.buf().to_vec(),
        recvs_after: p.b.recv_wcs().len(),
    }
}

/// RFC 5041 §1.2, §2.1 over RFC 5043 §10: Placement may happen in any order, Delivery may
/// not. An RDMA Write's segments that arrive ahead of its first are placed on arrival into
/// an STag that cannot be invalidated; the Send behind them completes only once the gap is
/// filled; at the end every byte is in place.
#[test]
fn rfc5041_2_1_tagged_segments_ahead_of_a_gap_are_placed_on_arrival() {
    let g = write_behind_a_gap(MrOptions::new(all_access()).not_invalidatable());
    assert!(
        g.before[..g.first].iter().all(|&b| b == 0),
        "the gap's bytes"
    );
    assert_eq!(
        &g.before[g.first..],
        &g.data[g.first..],
        "placed ahead of the gap"
    );
    assert_eq!(g.recvs_before, 0, "the Send waits for the gap");
    assert_eq!(g.recvs_after, 1);
    assert_eq!(g.after, g.data);
}

/// RFC 5040 §5.3 with RFC 5041 §2.1: an STag that can be invalidated is not placed ahead
/// of a gap (a Send with Invalidate, which invalidates on Delivery, could be among the
/// missing messages); its segments wait for their turn, and every byte lands then.
#[test]
fn rfc5041_2_1_invalidatable_stags_are_placed_in_order_only() {
    let g = write_behind_a_gap(MrOptions::new(all_access()));
    assert!(g.before.iter().all(|&b| b == 0), "nothing placed ahead");
    assert_eq!(g.recvs_before, 0);
    assert_eq!(g.recvs_after, 1);
    assert_eq!(g.after, g.data);
}

/// RFC 5040 §5.3 (a Send with Invalidate invalidates its STag when Delivered) with SCTP
/// reordering: a Write that arrives ahead of the earlier Send with Invalidate of its STag
/// is not placed; when the Send arrives the STag is invalidated first, and the Write is
/// refused with "Invalid STag" — the memory stays untouched.
#[test]
fn rfc5040_5_3_write_overtaking_send_with_invalidate_never_places() {
    let mut p = SctpPair::established(None);
    let victim = p.b.mr(4096);
    let rbuf = p.b.mr(16);
    p.b.eng
        .post_recv(RecvWr::new(10, vec![rbuf.sge(0, 16)]))
        .expect("recv");
    let src = p.a.mr(4096);
    src.buf().write_at(0, &[0xAB; 4096]).expect("fits");
    p.a.eng
        .post_send(SendWr::new(
            1,
            SendOp::Send {
                solicited: false,
                invalidate: Some(victim.stag()),
            },
            vec![src.sge(0, 16)],
        ))
        .expect("send inv");
    p.a.eng
        .post_send(SendWr::write(
            2,
            vec![src.sge(0, 4096)],
            victim.stag(),
            victim.to_at(0),
        ))
        .expect("write");
    let msgs = SctpPair::take(&mut p.a);
    deliver(&mut p.b, &msgs[1..]);
    assert!(victim.buf().to_vec().iter().all(|&b| b == 0));
    deliver(&mut p.b, &msgs[..1]);
    p.pump();
    let r = p.b.recv_wcs();
    assert_eq!(r[0].invalidated_stag, Some(victim.stag()));
    let t = p.b.terminate_sent().expect("the Write is refused");
    assert_eq!(
        t.cause,
        stack::rdmap::TermCause::Ddp(stack::ddp::DdpCode::Tagged(
            stack::ddp::TaggedCode::InvalidStag
        ))
    );
    assert!(victim.buf().to_vec().iter().all(|&b| b == 0));
}

/// RFC 5041 §2.1 for an RDMA Read Response: its segments that arrive ahead of the first
/// are placed into the Read's sink (an STag that cannot be invalidated) on arrival; the
/// Read completes only once the first arrives.
#[test]
fn rfc5041_2_1_read_response_segments_ahead_of_a_gap_are_placed_on_arrival() {
    let mut p = SctpPair::established(None);
    let rdata = pattern(30_000, 0x33);
    let rsrc = p.b.mr(rdata.len());
    rsrc.buf().write_at(0, &rdata).expect("fits");
    let sink = p.a.mr_with(
        rdata.len(),
        MrOptions::new(all_access()).not_invalidatable(),
    );
    p.a.eng
        .post_send(SendWr::read(
            3,
            vec![sink.sge(0, rdata.len() as u32)],
            rsrc.stag(),
            rsrc.to_at(0),
        ))
        .expect("read");
    let req = SctpPair::take(&mut p.a);
    deliver(&mut p.b, &req);
    let resp = SctpPair::take(&mut p.b);
    assert!(resp.len() > 2);
    let first = payload_len(&resp[0].2);
    deliver(&mut p.a, &resp[1..]);
    let early = sink.buf().to_vec();
    assert!(early[..first].iter().all(|&b| b == 0));
    assert_eq!(&early[first..], &rdata[first..]);
    assert!(
        p.a.send_wcs().is_empty(),
        "no completion before the gap is filled"
    );
    deliver(&mut p.a, &resp[..1]);
    let w = p.a.send_wcs();
    assert_eq!(w.len(), 1);
    assert_eq!(w[0].status, WcStatus::Success);
    assert_eq!(sink.buf().to_vec(), rdata);
}
