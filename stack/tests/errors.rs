//! Error paths: every incoming error produces the Terminate RFC 5040 §7 / RFC 5041 §7 /
//! RFC 5044 §8 prescribe (checked on the wire, with the copied headers), error completions
//! on both sides, the QP in Error, and target memory untouched.

mod common;

use common::{Opts, Pair, Side, all_access, session, wire_terminates};
use stack::mpa::{FpduEncoder, Role, RxConfig, TxConfig};
use stack::rdmap::terminate::TerminatedDdpHeader;
use stack::rdmap::{AtomicRequest, Header, ReadRequest, Terminate};
use stack::{
    Access, MrOptions, PostError, QpState, RecvWr, SendOp, SendWr, Setup, Sge, TermOrigin,
    WcOpcode, WcStatus,
};

fn rx() -> RxConfig {
    RxConfig::new(true, false)
}

/// The single Terminate b sent to a, checked against the expected triple.
fn b_terminate(p: &Pair, triple: (u8, u8, u8)) -> Terminate {
    let terms = wire_terminates(&p.wire_ba, rx(), false);
    assert_eq!(terms.len(), 1, "exactly one Terminate, the last message");
    let t = terms[0];
    assert_eq!(t.cause.layer_etype_ecode(), triple, "{t:?}");
    assert_eq!(p.a.terminate_received(), Some(t));
    assert_eq!(p.b.terminate_sent(), Some(t));
    // RFC 5040 §5.4 / §7.1: the Terminate ends the stream; its receiver does not answer it.
    assert!(wire_terminates(&p.wire_ab, rx(), false).is_empty());
    assert_eq!(p.states(), (QpState::Error, QpState::Error));
    t
}

/// The n-th ULPDU a sent (for comparing copied headers).
fn a_ulpdu(p: &Pair, n: usize) -> Vec<u8> {
    let mut d = stack::mpa::Deframer::new(rx());
    d.push(&p.wire_ab);
    d.nth(n).expect("fpdu").expect("valid").ulpdu
}

fn assert_tagged_copy(t: &Terminate, seg: &[u8]) {
    assert!(t.m && t.d, "RFC 5040 §4.8: M and D set for a DDP error");
    assert_eq!(usize::from(t.ddp_segment_length), seg.len());
    match t.ddp_header {
        Some(TerminatedDdpHeader::Tagged(h)) => assert_eq!(&h[..], &seg[..14]),
        other => panic!("expected a tagged header copy, got {other:?}"),
    }
}

fn assert_untagged_copy(t: &Terminate, seg: &[u8]) {
    assert!(t.m && t.d, "RFC 5040 §4.8: M and D set");
    match t.ddp_header {
        Some(TerminatedDdpHeader::Untagged(h)) => assert_eq!(&h[..], &seg[..18]),
        other => panic!("expected an untagged header copy, got {other:?}"),
    }
}

/// Posts one receive on b (to see it flushed), a Write from a of `len` bytes, then a Read
/// from a valid region of b that is still outstanding when b's Terminate arrives.
fn write_case(p: &mut Pair, stag: u32, to: u64, len: u32) {
    let src = p.a.mr(len as usize);
    src.buf().fill(0xAB);
    let rb = p.b.mr(16);
    p.b.eng
        .post_recv(RecvWr::new(500, vec![rb.sge(0, 16)]))
        .expect("post");
    p.a.eng
        .post_send(SendWr::write(1, vec![src.sge(0, len)], stag, to))
        .expect("post");
    p.a.eng
        .post_send(SendWr::read(2, vec![src.sge(0, 1)], rb.stag(), rb.to_at(0)))
        .expect("post");
    p.pump();
}

/// The Write completed when the transport took its bytes (before the peer saw it); the
/// later Read, not named by the Terminate, is flushed; b's receive is flushed.
fn assert_write_refused(p: &Pair) {
    let s = p.a.send_wcs();
    assert_eq!(
        s.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        [(1, WcStatus::Success), (2, WcStatus::Flushed)]
    );
    let r = p.b.recv_wcs();
    assert_eq!((r[0].wr_id, r[0].status), (500, WcStatus::Flushed));
}

/// RFC 5041 §7.1 tagged check 1 / §7.2: a Write to an unknown STag or a wrong key is
/// refused with DDP Invalid STag (0x1/0x1/0x00), the tagged DDP header copied.
#[test]
fn rfc5041_7_2_write_invalid_stag() {
    for wrong_key in [false, true] {
        let mut p = Pair::established(&Opts::default());
        let target = p.b.mr(64);
        let stag = if wrong_key {
            target.stag() ^ 0x01
        } else {
            0x00ab_cd00
        };
        write_case(&mut p, stag, target.to_at(0), 64);
        let t = b_terminate(&p, (0x1, 0x1, 0x00));
        assert_tagged_copy(&t, &a_ulpdu(&p, 0));
        assert!(!t.r);
        assert_write_refused(&p);
        assert!(
            target.buf().to_vec().iter().all(|&b| b == 0),
            "memory untouched"
        );
    }
}

/// RFC 5041 §7.1 tagged checks 3–4: a Write one byte past the region is refused with Base or
/// bounds violation (0x1/0x1/0x01) and nothing of the segment is placed.
#[test]
fn rfc5041_7_2_write_bounds() {
    let mut p = Pair::established(&Opts::default());
    let buf = stack::RegisteredBuf::new(200);
    let target =
        p.b.mem
            .register(p.b.pd, &buf, MrOptions::new(all_access()).range(50..150))
            .expect("register");
    write_case(&mut p, target.stag(), target.to_at(1), 100);
    let t = b_terminate(&p, (0x1, 0x1, 0x01));
    assert_tagged_copy(&t, &a_ulpdu(&p, 0));
    assert_write_refused(&p);
    assert!(
        buf.to_vec().iter().all(|&b| b == 0),
        "no byte placed, inside or around"
    );
}

/// Multi-segment Write whose later segment runs out of bounds: the valid segments before it
/// are placed, the failing one is not (validation is per segment, before placement).
#[test]
fn rfc5041_7_1_failing_segment_not_placed() {
    let mut p = Pair::established(&Opts::default());
    let buf = stack::RegisteredBuf::new(6000);
    let target =
        p.b.mem
            .register(p.b.pd, &buf, MrOptions::new(all_access()).range(0..3000))
            .expect("register");
    write_case(&mut p, target.stag(), target.to_at(0), 4000);
    b_terminate(&p, (0x1, 0x1, 0x01));
    let room = p.a.eng.mulpdu() - 14;
    let got = buf.to_vec();
    assert!(
        got[..2 * room].iter().all(|&b| b == 0xAB),
        "valid segments placed"
    );
    assert!(
        got[2 * room..].iter().all(|&b| b == 0),
        "failing segment not placed"
    );
}

/// A Write to a region without remote write: RDMAP Remote Protection, Access rights
/// violation (0x0/0x1/0x02; DDP has no code for it).
#[test]
fn rfc5040_7_2_write_access_rights() {
    let mut p = Pair::established(&Opts::default());
    let ro = p.b.mr_with(64, MrOptions::new(Access::REMOTE_READ));
    write_case(&mut p, ro.stag(), ro.to_at(0), 64);
    let t = b_terminate(&p, (0x0, 0x1, 0x02));
    assert_tagged_copy(&t, &a_ulpdu(&p, 0));
    assert_write_refused(&p);
    assert!(ro.buf().to_vec().iter().all(|&b| b == 0));
}

/// RFC 5041 §8.2: an STag of another protection domain is "STag not associated with DDP
/// Stream" (0x1/0x1/0x02).
#[test]
fn rfc5041_8_2_write_other_pd() {
    let mut p = Pair::established(&Opts::default());
    let other = p.b.mem.alloc_pd();
    let foreign =
        p.b.mem
            .register_new(other, 64, MrOptions::new(all_access()))
            .expect("register");
    write_case(&mut p, foreign.stag(), foreign.to_at(0), 64);
    b_terminate(&p, (0x1, 0x1, 0x02));
    assert_write_refused(&p);
    assert!(foreign.buf().to_vec().iter().all(|&b| b == 0));
}

/// RFC 5041 §7.1 untagged check 2: a Send with no receive posted is "Invalid MSN - no
/// buffer available" (0x1/0x2/0x02), the untagged DDP header copied.
#[test]
fn rfc5041_7_2_send_without_receive() {
    let mut p = Pair::established(&Opts::default());
    let src = p.a.mr(10);
    p.a.eng
        .post_send(SendWr::send(1, vec![src.sge(0, 10)]))
        .expect("post");
    p.pump();
    let t = b_terminate(&p, (0x1, 0x2, 0x02));
    assert_untagged_copy(&t, &a_ulpdu(&p, 0));
    // The Send completed when the transport took it; a learns of the refusal from the
    // Terminate.
    let s = p.a.send_wcs();
    assert_eq!(
        (s[0].status, s[0].opcode),
        (WcStatus::Success, WcOpcode::Send)
    );
}

/// RFC 5041 §7.1 untagged check 4: a Send longer than the receive buffer is "DDP Message
/// too long for available buffer" (0x1/0x2/0x05); the receive completes with a local length
/// error carrying that cause; nothing past the failing segment is placed.
#[test]
fn rfc5041_7_2_send_too_long() {
    let mut p = Pair::established(&Opts::default());
    let src = p.a.mr(100);
    src.buf().fill(0x11);
    let dst = p.b.mr(200);
    p.b.eng
        .post_recv(RecvWr::new(9, vec![dst.sge(0, 99)]))
        .expect("post");
    p.a.eng
        .post_send(SendWr::send(1, vec![src.sge(0, 100)]))
        .expect("post");
    p.pump();
    b_terminate(&p, (0x1, 0x2, 0x05));
    let r = p.b.recv_wcs();
    assert_eq!((r[0].wr_id, r[0].status), (9, WcStatus::LocalLength));
    assert_eq!(r[0].term.map(|t| t.origin), Some(TermOrigin::Sent));
    assert!(dst.buf().to_vec().iter().all(|&b| b == 0));
    assert_eq!(p.a.send_wcs()[0].status, WcStatus::Success);
}

/// RFC 5040 §5.2.2 / §6.1: Read Requests beyond the responder's IRD are refused; the
/// rdmap crate reports them as DDP "Invalid MSN - MSN range is not valid" (0x1/0x2/0x03)
/// with the offending Read Request's untagged header copied.
#[test]
fn rfc5040_6_1_ird_overrun() {
    let o = Opts {
        ord_a: 4,
        ird_b: 1,
        ..Opts::default()
    };
    let mut p = Pair::established(&o);
    let src = p.b.mr(64);
    let sink = p.a.mr(64);
    for i in 0..2 {
        p.a.eng
            .post_send(SendWr::read(
                i,
                vec![sink.sge(0, 32)],
                src.stag(),
                src.to_at(0),
            ))
            .expect("post");
    }
    p.pump();
    let t = b_terminate(&p, (0x1, 0x2, 0x03));
    let second = a_ulpdu(&p, 1);
    assert_untagged_copy(&t, &second);
    let s = p.a.send_wcs();
    // The Terminate names the second Read Request (MSN 2): that Read gets the cause, the
    // first (unanswered) is flushed.
    assert_eq!(
        s.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        [(0, WcStatus::Flushed), (1, WcStatus::RemoteOperation)]
    );
    let cause = s[1].term.expect("cause");
    assert_eq!(
        (cause.origin, cause.cause.layer_etype_ecode()),
        (TermOrigin::Received, (0x1, 0x2, 0x03))
    );
    assert!(sink.buf().to_vec().iter().all(|&b| b == 0));
}

/// RFC 5040 §7.2 item 4 / §4.8: a Read Request whose Data Source STag is invalid or lacks
/// remote read is refused with a Remote Protection Error; the Terminate carries the DDP
/// header and, with R set, the Read Request header.
#[test]
fn rfc5040_7_2_read_source_errors() {
    for (rights, triple) in [
        (None, (0x0, 0x1, 0x00)),
        (Some(Access::LOCAL_WRITE), (0x0, 0x1, 0x02)),
    ] {
        let mut p = Pair::established(&Opts::default());
        let src = match rights {
            Some(a) => p.b.mr_with(64, MrOptions::new(a)),
            None => p.b.mr(64),
        };
        let stag = if rights.is_none() {
            0x0077_7700
        } else {
            src.stag()
        };
        let sink = p.a.mr(64);
        p.a.eng
            .post_send(SendWr::read(1, vec![sink.sge(0, 64)], stag, src.to_at(0)))
            .expect("post");
        p.pump();
        let t = b_terminate(&p, triple);
        let seg = a_ulpdu(&p, 0);
        assert_untagged_copy(&t, &seg);
        assert!(t.r, "R bit for a Read Request");
        let rr = ReadRequest::parse(&seg[18..]).expect("rr").0;
        assert_eq!(t.rdma_header, Some(rr));
        let s = p.a.send_wcs();
        assert_eq!(
            (s[0].status, s[0].opcode),
            (WcStatus::RemoteAccess, WcOpcode::RdmaRead)
        );
    }
}

/// RFC 5044 §8 / RFC 5040 §7: a corrupted byte fails the FPDU's CRC; the receiver sends an
/// LLP Terminate "MPA CRC Error" (0x2/0x0/0x02) with no copied headers and places nothing.
#[test]
fn rfc5044_8_crc_error_terminate() {
    let mut p = Pair::established(&Opts::default());
    let src = p.a.mr(1000);
    src.buf().fill(0x5A);
    let dst = p.b.mr(1000);
    p.b.eng
        .post_recv(RecvWr::new(3, vec![dst.sge(0, 1000)]))
        .expect("post");
    p.a.eng
        .post_send(SendWr::send(1, vec![src.sge(0, 1000)]))
        .expect("post");
    p.tamper_ab = Some(Box::new(|off, chunk| {
        // Flip a payload byte of the first FPDU (past its 2 + 18 header octets).
        let at = 40u64;
        if (off..off + chunk.len() as u64).contains(&at) {
            chunk[(at - off) as usize] ^= 0x01;
        }
    }));
    p.pump();
    let t = b_terminate(&p, (0x2, 0x0, 0x02));
    assert!(!t.m && !t.d && !t.r && t.ddp_header.is_none());
    assert!(dst.buf().to_vec().iter().all(|&b| b == 0));
    let r = p.b.recv_wcs();
    assert_eq!((r[0].wr_id, r[0].status), (3, WcStatus::Flushed));
}

/// RFC 5040 §5.3 / §7.2: Send with Invalidate naming an invalid STag is "STag cannot be
/// Invalidated" as a Remote Operation Error (0x0/0x2/0x09); naming another PD's STag, as a
/// Remote Protection Error (0x0/0x1/0x09). The STag is left valid.
#[test]
fn rfc5040_5_3_send_with_invalidate_errors() {
    for foreign in [false, true] {
        let mut p = Pair::established(&Opts::default());
        let other = p.b.mem.alloc_pd();
        let victim =
            p.b.mem
                .register_new(other, 8, MrOptions::new(all_access()))
                .expect("register");
        let stag = if foreign { victim.stag() } else { 0x0099_9900 };
        let src = p.a.mr(4);
        let dst = p.b.mr(4);
        p.b.eng
            .post_recv(RecvWr::new(1, vec![dst.sge(0, 4)]))
            .expect("post");
        let op = SendOp::Send {
            solicited: false,
            invalidate: Some(stag),
        };
        p.a.eng
            .post_send(SendWr::new(1, op, vec![src.sge(0, 4)]))
            .expect("post");
        p.pump();
        let triple = if foreign {
            (0x0, 0x1, 0x09)
        } else {
            (0x0, 0x2, 0x09)
        };
        b_terminate(&p, triple);
        assert!(p.b.mem.query(victim.stag()).expect("registered").valid);
        let r = p.b.recv_wcs();
        assert_eq!(r[0].status, WcStatus::Fatal);
    }
}

/// RFC 7306 §5.2.1 / §8.2: an Atomic Request on a misaligned address is a Remote Operation
/// Error, Catastrophic error localized to RDMAP Stream (0x0/0x2/0x07); on memory without
/// remote atomic access, Access rights violation (0x0/0x1/0x02). Memory untouched.
#[test]
fn rfc7306_8_2_atomic_errors() {
    for misaligned in [true, false] {
        let mut p = Pair::established(&Opts::default());
        let t = if misaligned {
            p.b.mr(64)
        } else {
            p.b.mr_with(
                64,
                MrOptions::new(Access::LOCAL_WRITE | Access::REMOTE_WRITE),
            )
        };
        let res = p.a.mr(8);
        let op = SendOp::FetchAdd {
            remote_stag: t.stag(),
            remote_to: t.to_at(if misaligned { 4 } else { 8 }),
            add: 1,
            add_mask: 0,
        };
        p.a.eng
            .post_send(SendWr::new(1, op, vec![res.sge(0, 8)]))
            .expect("post");
        p.pump();
        let triple = if misaligned {
            (0x0, 0x2, 0x07)
        } else {
            (0x0, 0x1, 0x02)
        };
        b_terminate(&p, triple);
        assert!(t.buf().to_vec().iter().all(|&b| b == 0));
        let s = p.a.send_wcs();
        assert_eq!(s[0].opcode, WcOpcode::FetchAdd);
        assert!(!s[0].status.is_success());
    }
}

/// A local protection error in a send work request (bad lkey) completes it with a local
/// protection error and sends an RDMAP Local Catastrophic Terminate without headers
/// (RFC 5040 §4.8 Figure 10).
#[test]
fn local_protection_error_terminates() {
    let mut p = Pair::established(&Opts::default());
    let src = p.a.mr(8);
    let dst = p.b.mr(8);
    p.b.eng
        .post_recv(RecvWr::new(1, vec![dst.sge(0, 8)]))
        .expect("post");
    let bad = Sge {
        stag: src.stag() ^ 0x10,
        to: src.to_at(0),
        len: 8,
    };
    p.a.eng.post_send(SendWr::send(1, vec![bad])).expect("post");
    p.a.eng
        .post_send(SendWr::send(2, vec![src.sge(0, 8)]))
        .expect("post");
    p.pump();
    let s = p.a.send_wcs();
    assert_eq!((s[0].wr_id, s[0].status), (1, WcStatus::LocalProtection));
    assert_eq!(
        s[0].term.map(|t| (t.origin, t.cause.layer_etype_ecode().0)),
        Some((TermOrigin::Sent, 0))
    );
    assert_eq!((s[1].wr_id, s[1].status), (2, WcStatus::Flushed));
    let terms = wire_terminates(&p.wire_ab, rx(), false);
    assert_eq!(terms.len(), 1);
    let (l, e, _) = terms[0].cause.layer_etype_ecode();
    assert_eq!((l, e), (0x0, 0x0));
    assert!(!terms[0].m && !terms[0].d);
    assert!(p.b.terminate_received().is_some());
    assert_eq!(p.b.recv_wcs()[0].status, WcStatus::Flushed);
    assert_eq!(p.states(), (QpState::Error, QpState::Error));
}

/// A receive buffer without local write: receive-side local error → DDP Local Catastrophic
/// Terminate (0x1/0x0/0x00) and a local protection error on the receive.
#[test]
fn receive_local_protection_error() {
    let mut p = Pair::established(&Opts::default());
    let src = p.a.mr(8);
    let ro = p.b.mr_with(8, MrOptions::new(Access::REMOTE_READ));
    p.b.eng
        .post_recv(RecvWr::new(1, vec![ro.sge(0, 8)]))
        .expect("post");
    p.a.eng
        .post_send(SendWr::send(1, vec![src.sge(0, 8)]))
        .expect("post");
    p.pump();
    let t = b_terminate(&p, (0x1, 0x0, 0x00));
    assert!(!t.d);
    assert_eq!(p.b.recv_wcs()[0].status, WcStatus::LocalProtection);
}

/// Immediate errors at post time; the request is not queued.
#[test]
fn post_errors() {
    let mut p = Pair::established(&Opts::default());
    let m = p.a.mr(64);
    let seven = vec![m.sge(0, 1); 7];
    assert_eq!(
        p.a.eng.post_send(SendWr::send(1, seven.clone())),
        Err(PostError::TooManySge { given: 7, max: 6 })
    );
    assert!(
        p.a.eng
            .post_send(SendWr::send(1, seven[..6].to_vec()))
            .is_ok()
    );
    let fa = SendOp::FetchAdd {
        remote_stag: 1,
        remote_to: 0,
        add: 1,
        add_mask: 0,
    };
    assert!(matches!(
        p.a.eng.post_send(SendWr::new(1, fa, vec![m.sge(0, 4)])),
        Err(PostError::InvalidWr(_))
    ));
    assert!(matches!(
        p.a.eng
            .post_send(SendWr::write(1, vec![m.sge(0, 8)], 5, u64::MAX - 3)),
        Err(PostError::InvalidWr(_))
    ));
    assert_eq!(p.a.eng.sq_outstanding(), 1);
}

/// Posting after the QP failed: Terminate state refuses, Error flushes.
#[test]
fn post_in_error_is_flushed() {
    let mut p = Pair::established(&Opts::default());
    let src = p.a.mr(8);
    p.a.eng
        .post_send(SendWr::send(1, vec![src.sge(0, 8)]))
        .expect("post");
    p.pump();
    assert_eq!(p.a.eng.state(), QpState::Error);
    p.a.send_wcs();
    p.a.eng
        .post_send(SendWr::send(7, vec![]))
        .expect("accepted and flushed");
    let s = p.a.send_wcs();
    assert_eq!((s[0].wr_id, s[0].status), (7, WcStatus::Flushed));
    p.a.eng
        .post_recv(RecvWr::new(8, vec![]))
        .expect("accepted and flushed");
    assert_eq!(p.a.recv_wcs()[0].status, WcStatus::Flushed);
}

/// One side alone, fed hand-made FPDUs (CRC on).
fn lone(ird: u16) -> (Side, FpduEncoder) {
    let s = session(Role::Initiator, true, false, false, ird, 4);
    let side = Side::new(2, Setup::Established(s), |_| {});
    (
        side,
        FpduEncoder::new(TxConfig {
            crc: true,
            markers: false,
        }),
    )
}

fn feed(side: &mut Side, enc: &mut FpduEncoder, ulpdu: &[u8]) -> Vec<Terminate> {
    let mut bytes = Vec::new();
    enc.encode(&[ulpdu], &mut bytes).expect("encode");
    side.eng.handle_stream(stack::Instant::ZERO, &bytes);
    let mut out = Vec::new();
    side.eng.transmit_all(&mut out);
    wire_terminates(&out, rx(), false)
}

/// Malformed headers (RFC 5040 §7.2, RFC 5041 §7.2 via the rdmap decoder): wrong RDMAP
/// version, reserved opcode, wrong queue, DDP version, TO wrap.
#[test]
fn malformed_headers_terminate() {
    let send = Header::Send {
        solicited_event: false,
        invalidate_stag: None,
        last: true,
        msn: 1,
        mo: 0,
    }
    .to_vec()
    .expect("emit");
    // RV = 2 → Invalid RDMAP version (0x0/0x2/0x05), no header copy.
    let mut bad_rv = send.clone();
    bad_rv[1] = (bad_rv[1] & 0x3f) | 0x80;
    // Reserved opcode 0xC → Unexpected OpCode (0x0/0x2/0x06).
    let mut bad_op = send.clone();
    bad_op[1] = (bad_op[1] & 0xf0) | 0x0c;
    // Send on QN 1 → Invalid QN (0x1/0x2/0x01).
    let mut bad_qn = send.clone();
    bad_qn[9] = 1;
    // DV = 2 → Invalid DDP version, untagged (0x1/0x2/0x06).
    let mut bad_dv = send.clone();
    bad_dv[0] = (bad_dv[0] & 0xfc) | 0x02;
    // A tagged Write whose TO + length wraps → TO wrap (0x1/0x1/0x03).
    let (mut side, _) = lone(1);
    let mr = side.mr(64);
    let mut wrap = Header::RdmaWrite {
        last: true,
        stag: mr.stag(),
        to: u64::MAX - 1,
    }
    .to_vec()
    .expect("emit");
    wrap.extend_from_slice(&[1, 2, 3, 4]);
    let cases = [
        (bad_rv, (0x0, 0x2, 0x05)),
        (bad_op, (0x0, 0x2, 0x06)),
        (bad_qn, (0x1, 0x2, 0x01)),
        (bad_dv, (0x1, 0x2, 0x06)),
    ];
    for (ulpdu, triple) in cases {
        let (mut side, mut enc) = lone(1);
        let terms = feed(&mut side, &mut enc, &ulpdu);
        assert_eq!(terms.len(), 1, "{triple:?}");
        assert_eq!(terms[0].cause.layer_etype_ecode(), triple);
        assert_eq!(side.eng.state(), QpState::Error);
    }
    let mut enc = FpduEncoder::new(TxConfig {
        crc: true,
        markers: false,
    });
    let terms = feed(&mut side, &mut enc, &wrap);
    assert_eq!(terms[0].cause.layer_etype_ecode(), (0x1, 0x1, 0x03));
    assert!(mr.buf().to_vec().iter().all(|&b| b == 0));
}

/// RFC 5040 §5.2: an unexpected Read Response (none outstanding) ends the stream with
/// Unexpected OpCode; an RDMA Read Request for zero bytes is answered without validating
/// its STags.
#[test]
fn rfc5040_5_2_zero_length_read_and_stray_response() {
    let (mut side, mut enc) = lone(2);
    let rr = Header::ReadRequest {
        msn: 1,
        request: ReadRequest {
            sink_stag: 0,
            sink_to: 0,
            size: 0,
            source_stag: 0xdead_beef,
            source_to: 7,
        },
    }
    .to_vec()
    .expect("emit");
    assert!(feed(&mut side, &mut enc, &rr).is_empty());
    assert_eq!(side.eng.state(), QpState::Rts);
    let stray = Header::ReadResponse {
        last: true,
        stag: 5,
        to: 0,
    }
    .to_vec()
    .expect("emit");
    let terms = feed(&mut side, &mut enc, &stray);
    assert_eq!(terms[0].cause.layer_etype_ecode(), (0x0, 0x2, 0x06));
    let _ = AtomicRequest::LEN;
}

/// A Read whose sink lacks remote write cannot be answered (the peer places through the
/// sink STag): it fails locally with a protection error before any Read Request is sent.
#[test]
fn read_sink_needs_remote_write() {
    let mut p = Pair::established(&Opts::default());
    let src = p.b.mr(16);
    let sink = p.a.mr_with(16, MrOptions::new(Access::LOCAL_WRITE));
    p.a.eng
        .post_send(SendWr::read(
            1,
            vec![sink.sge(0, 16)],
            src.stag(),
            src.to_at(0),
        ))
        .expect("post");
    p.pump();
    let s = p.a.send_wcs();
    assert_eq!(
        (s[0].status, s[0].opcode),
        (WcStatus::LocalProtection, WcOpcode::RdmaRead)
    );
    let sent = common::decode(&p.wire_ab, rx(), false);
    assert!(
        sent.iter()
            .all(|(h, _)| !matches!(h, Header::ReadRequest { .. }))
    );
}

/// While the Terminate is being written the QP is in Terminate state and refuses posts;
/// once it is written the QP is in Error.
#[test]
fn terminate_state_refuses_posts() {
    let (mut side, mut enc) = lone(1);
    let bad = Header::RdmaWrite {
        last: true,
        stag: 0x0042_4200,
        to: 0,
    }
    .encode(&[1, 2, 3])
    .expect("emit");
    let mut bytes = Vec::new();
    enc.encode(&[&bad], &mut bytes).expect("encode");
    side.eng.handle_stream(stack::Instant::ZERO, &bytes);
    assert_eq!(side.eng.state(), QpState::Terminate);
    assert_eq!(
        side.eng.post_send(SendWr::send(1, vec![])),
        Err(PostError::InvalidState(QpState::Terminate))
    );
    assert_eq!(
        side.eng.post_recv(RecvWr::new(1, vec![])),
        Err(PostError::InvalidState(QpState::Terminate))
    );
    assert!(
        !side.eng.should_close_transport(),
        "the Terminate is not written yet"
    );
    let mut out = Vec::new();
    side.eng.transmit_all(&mut out);
    assert_eq!(side.eng.state(), QpState::Error);
    assert!(side.eng.should_close_transport());
}

/// A completion that does not fit its CQ is never dropped silently: the CQ records the
/// overflow and an asynchronous event, the QP reports it and fails.
#[test]
fn cq_overflow_fails_the_qp() {
    use stack::{AsyncEvent, Cq, MemTable, QpConfig, QpEngine, QpEvent, QpId};
    let mem = MemTable::new();
    let pd = mem.alloc_pd();
    let rcq = Cq::new(1);
    let scq = Cq::new(16);
    let cfg = QpConfig::new(QpId(9), pd, scq.clone(), rcq.clone());
    let s = session(Role::Initiator, true, false, false, 1, 1);
    let mut eng = QpEngine::new(
        cfg,
        mem.clone(),
        Setup::Established(s),
        stack::Instant::ZERO,
    )
    .expect("engine");
    let buf = mem
        .register_new(pd, 64, MrOptions::new(Access::LOCAL_WRITE))
        .expect("register");
    for i in 0..3 {
        eng.post_recv(RecvWr::new(i, vec![buf.sge(0, 8)]))
            .expect("post");
    }
    let mut enc = FpduEncoder::new(TxConfig {
        crc: true,
        markers: false,
    });
    let mut bytes = Vec::new();
    for msn in 1..=2 {
        let h = Header::Send {
            solicited_event: false,
            invalidate_stag: None,
            last: true,
            msn,
            mo: 0,
        };
        enc.encode(&[&h.encode(b"x").expect("emit")], &mut bytes)
            .expect("encode");
    }
    eng.handle_stream(stack::Instant::ZERO, &bytes);
    assert!(rcq.overflowed());
    assert_eq!(
        rcq.poll_async(),
        Some(AsyncEvent::CqOverflow {
            cq: rcq.id(),
            qp: QpId(9)
        })
    );
    let mut evs = Vec::new();
    while let Some(e) = eng.poll_event() {
        evs.push(e);
    }
    assert!(evs.contains(&QpEvent::CqOverflow(rcq.id())));
    assert!(matches!(eng.state(), QpState::Terminate | QpState::Error));
    assert_eq!(rcq.len(), 1);
}
