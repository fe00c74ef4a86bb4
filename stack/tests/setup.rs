//! MPA connection setup run by the engines themselves (RFC 5044 §7.1, RFC 6581).

mod common;

use std::time::Duration;

use common::{Pair, Side, decode, pattern};
use stack::mpa::{self, ConnFrame, CrcPolicy, FrameKind, RtrSet, RtrType};
use stack::rdmap::Header;
use stack::{QpEvent, QpState, RecvWr, SendWr, Setup, SetupError, WcStatus};

fn exchange(p: &mut Pair) -> (Vec<u8>, Vec<u8>) {
    let src = p.a.mr(5000);
    src.buf().write_at(0, &pattern(5000, 1)).expect("fits");
    let dst = p.b.mr(5000);
    p.b.eng
        .post_recv(RecvWr::new(1, vec![dst.sge(0, 5000)]))
        .expect("post");
    p.a.eng
        .post_send(SendWr::send(1, vec![src.sge(0, 5000)]))
        .expect("post");
    // b answers with a Send of its own once a's arrived.
    let bsrc = p.b.mr(300);
    bsrc.buf().write_at(0, &pattern(300, 2)).expect("fits");
    let adst = p.a.mr(300);
    p.a.eng
        .post_recv(RecvWr::new(2, vec![adst.sge(0, 300)]))
        .expect("post");
    p.b.eng
        .post_send(SendWr::send(2, vec![bsrc.sge(0, 300)]))
        .expect("post");
    p.pump();
    (dst.buf().to_vec(), adst.buf().to_vec())
}

/// RFC 5044 §7.1.1 + RFC 6581: revision 2 with enhanced data, CRC and markers requested
/// from both sides; the initiator's Request is exactly what Linux siw sends for the default
/// configuration; data then flows both ways.
#[test]
fn rfc5044_7_1_rev2_setup_then_data() {
    for (crc, markers) in [(false, false), (true, false), (true, true), (false, true)] {
        let cfg = mpa::Config {
            crc: if crc {
                CrcPolicy::Require
            } else {
                CrcPolicy::Accept
            },
            markers_rx: markers,
            markers_tx: true,
            ..mpa::Config::default()
        };
        let mut p = Pair::negotiate(cfg.clone(), cfg);
        let (b_got, a_got) = exchange(&mut p);
        assert_eq!(b_got, pattern(5000, 1), "crc {crc} markers {markers}");
        assert_eq!(a_got, pattern(300, 2));
        assert_eq!(p.states(), (QpState::Rts, QpState::Rts));
        let s =
            p.a.eng
                .session()
                .and_then(|s| s.mpa())
                .expect("MPA session");
        assert_eq!(
            (s.revision, s.crc, s.markers_tx, s.markers_rx),
            (2, crc, markers, markers)
        );
        assert!(
            p.a.events
                .iter()
                .any(|e| matches!(e, QpEvent::Established(_)))
        );
    }
    let p = Pair::negotiate(mpa::Config::default(), mpa::Config::default());
    let mut a = p.a;
    let req = a.eng.poll_transmit().expect("request").to_vec();
    let siw: [u8; 24] = [
        0x4d, 0x50, 0x41, 0x20, 0x49, 0x44, 0x20, 0x52, 0x65, 0x71, 0x20, 0x46, 0x72, 0x61, 0x6d,
        0x65, 0x10, 0x02, 0x00, 0x04, 0x00, 0x01, 0x00, 0x01,
    ];
    assert_eq!(req, siw);
}

/// RFC 5044 §7.1: MPA revision 1 (no enhanced data), as a Chelsio T4 speaks it with CRC.
#[test]
fn rfc5044_7_1_rev1_setup() {
    let rev1 = mpa::Config {
        revision: 1,
        enhanced: false,
        crc: CrcPolicy::Require,
        ..mpa::Config::default()
    };
    let mut p = Pair::negotiate(rev1, mpa::Config::default());
    let (b_got, _) = exchange(&mut p);
    assert_eq!(b_got, pattern(5000, 1));
    let s =
        p.b.eng
            .session()
            .and_then(|s| s.mpa())
            .expect("MPA session");
    assert_eq!((s.revision, s.enhanced, s.crc), (1, false, true));
}

/// RFC 5044 §7.1.2: the responder sends nothing after its Reply until it has received the
/// initiator's first FPDU, even with work queued.
#[test]
fn rfc5044_7_1_2_responder_waits_for_first_fpdu() {
    let mut p = Pair::negotiate(mpa::Config::default(), mpa::Config::default());
    let bsrc = p.b.mr(10);
    p.b.eng
        .post_send(SendWr::send(1, vec![bsrc.sge(0, 10)]))
        .expect("post");
    let adst = p.a.mr(10);
    p.a.eng
        .post_recv(RecvWr::new(1, vec![adst.sge(0, 10)]))
        .expect("post");
    p.pump();
    // Only the Reply went b→a.
    let (_, used) = ConnFrame::parse(&p.wire_ba).expect("reply");
    assert_eq!(
        used,
        p.wire_ba.len(),
        "responder sent an FPDU before receiving one"
    );
    assert!(p.a.recv_wcs().is_empty());
    // Once a sends, b's Send follows.
    let asrc = p.a.mr(4);
    let bdst = p.b.mr(4);
    p.b.eng
        .post_recv(RecvWr::new(2, vec![bdst.sge(0, 4)]))
        .expect("post");
    p.a.eng
        .post_send(SendWr::send(2, vec![asrc.sge(0, 4)]))
        .expect("post");
    p.pump();
    assert_eq!(p.a.recv_wcs().len(), 1);
}

fn p2p(rtr: RtrSet, preferred: Option<RtrType>) -> mpa::Config {
    mpa::Config {
        p2p: true,
        rtr_supported: rtr,
        rtr_preferred: preferred,
        ..mpa::Config::default()
    }
}

/// RFC 6581 §9.2: in peer-to-peer mode the responder echoes P2P, picks exactly one RTR type,
/// and the initiator's first FPDU is that zero-length RTR message (tagged RTRs with a
/// non-zero STag); the responder consumes it and the application sees nothing of it.
#[test]
fn rfc6581_p2p_rtr_each_type() {
    for t in [RtrType::Write, RtrType::Read, RtrType::Send] {
        let mut p = Pair::negotiate(p2p(RtrSet::ALL, None), p2p(RtrSet::ALL, Some(t)));
        let (b_got, a_got) = exchange(&mut p);
        assert_eq!(b_got, pattern(5000, 1), "{t:?}");
        assert_eq!(a_got, pattern(300, 2));
        let r = p.b.recv_wcs();
        assert_eq!(
            r.len(),
            1,
            "the RTR must not consume an application receive"
        );
        let msgs = decode(&p.wire_ab, mpa::RxConfig::new(false, false), true);
        match (t, msgs[0].0) {
            (
                RtrType::Write,
                Header::RdmaWrite {
                    stag, last: true, ..
                },
            ) => assert_ne!(stag, 0),
            (RtrType::Read, Header::ReadRequest { request, msn: 1 }) => {
                assert_eq!(request.size, 0);
                assert_ne!(request.sink_stag, 0);
                assert_ne!(request.source_stag, 0);
            }
            (RtrType::Send, Header::Send { msn: 1, mo: 0, .. }) => {
                assert!(msgs[0].1.is_empty());
                // The application's Send follows with MSN 2.
                assert!(matches!(msgs[1].0, Header::Send { msn: 2, .. }));
            }
            other => panic!("unexpected first FPDU for {t:?}: {other:?}"),
        }
        if t == RtrType::Read {
            // The zero-length Read Response came back and freed the ORD credit.
            assert_eq!(p.a.eng.ord_in_use(), 0);
        }
    }
}

/// RFC 5044 §7.1.1 R flag: a rejected Request ends setup on both sides with the reason.
#[test]
fn rfc5044_7_1_1_reject() {
    let want_crc = mpa::Config {
        crc: CrcPolicy::Require,
        ..mpa::Config::default()
    };
    let no_crc = mpa::Config {
        crc: CrcPolicy::Off,
        ..mpa::Config::default()
    };
    let mut p = Pair::negotiate(want_crc, no_crc);
    let src = p.a.mr(8);
    p.a.eng
        .post_send(SendWr::send(5, vec![src.sge(0, 8)]))
        .expect("post");
    p.pump();
    let (reply, _) = ConnFrame::parse(&p.wire_ba).expect("reply");
    assert_eq!(reply.kind, FrameKind::Reply);
    assert!(reply.reject);
    assert!(
        p.b.events
            .iter()
            .any(|e| matches!(e, QpEvent::SetupFailed(SetupError::Rejected(_))))
    );
    assert!(p.a.events.iter().any(|e| matches!(
        e,
        QpEvent::SetupFailed(SetupError::Negotiation(
            mpa::NegotiationError::Rejected { .. }
        ))
    )));
    assert_eq!(p.states(), (QpState::Error, QpState::Error));
    let s = p.a.send_wcs();
    assert_eq!((s[0].wr_id, s[0].status), (5, WcStatus::Flushed));
}

/// RFC 6581 §8: an initiator that cannot meet the responder's ORD sends a Terminate with
/// LLP error "insufficient IRD resources" (code 6) as its first FPDU.
#[test]
fn rfc6581_insufficient_ird_terminate() {
    let init = mpa::Config {
        ird: 1,
        ..mpa::Config::default()
    };
    let a = Side::new(1, Setup::Initiator(init), |_| {});
    let mut a_eng = a.eng;
    let req = a_eng.poll_transmit().expect("request").to_vec();
    a_eng.transmit_done(req.len());
    // A Reply whose ORD (8) exceeds the initiator's IRD (1).
    let (req, _) = ConnFrame::parse(&req).expect("request");
    let mut reply = mpa::respond(&mpa::Config::default(), &req)
        .expect("accept")
        .reply;
    if let Some(e) = reply.enhanced.as_mut() {
        e.ord = 8;
    }
    a_eng.handle_stream(stack::Instant::ZERO, &reply.to_bytes().expect("emit"));
    let mut out = Vec::new();
    a_eng.transmit_all(&mut out);
    let terms = common::wire_terminates(&out, mpa::RxConfig::new(false, false), false);
    assert_eq!(terms.len(), 1);
    assert_eq!(terms[0].cause.layer_etype_ecode(), (0x2, 0x0, 0x06));
    assert!(a_eng.should_close_transport());
    assert_eq!(a_eng.state(), QpState::Error);
}

/// RFC 5044 §7.1 timers: a responder that gets no Request, and an initiator that gets no
/// Reply, give up at their deadline.
#[test]
fn mpa_setup_timeouts() {
    for setup in [
        Setup::Initiator(mpa::Config::default()),
        Setup::Responder(mpa::Config::default()),
    ] {
        let mut s = Side::new(1, setup, |_| {});
        let d = s.eng.poll_timeout().expect("deadline");
        s.eng.handle_timeout(d - Duration::from_millis(1));
        assert_eq!(s.eng.state(), QpState::Idle);
        s.eng.handle_timeout(d);
        assert_eq!(s.eng.state(), QpState::Error);
        assert!(s.eng.should_close_transport() || s.eng.poll_transmit().is_some());
        let mut saw = false;
        while let Some(e) = s.eng.poll_event() {
            saw |= matches!(e, QpEvent::SetupFailed(SetupError::Timeout(_)));
        }
        assert!(saw);
    }
}

/// A malformed frame (not "MPA ID Req Frame") fails setup without a reply.
#[test]
fn rfc5044_7_1_1_bad_key() {
    let mut s = Side::new(2, Setup::Responder(mpa::Config::default()), |_| {});
    s.eng
        .handle_stream(stack::Instant::ZERO, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(s.eng.state(), QpState::Error);
    assert!(s.eng.poll_transmit().is_none());
    assert!(s.eng.should_close_transport());
}
