//! Runtime guarantees the interop profiles (`mpa::Profile`) rely on, checked on the bytes
//! two engines exchange: tagged RTRs never carry STag 0, and a responder sends nothing
//! before the initiator's first FPDU.

mod common;

use common::{Pair, decode, pattern};
use stack::mpa::{self, ConnFrame, Profile, Role, RtrSet, RtrType};
use stack::rdmap::Header;
use stack::{QpState, RecvWr, SendWr};

/// Chelsio rejects a zero-length tagged RTR whose STag is 0 (notes: interop facts; RFC 5041
/// does not forbid it). Every tagged RTR the engine sends — the Read RTR of the `chelsio`
/// profile and the Write RTR a `siw` responder picks — carries a non-zero STag.
#[test]
fn rfc6581_tagged_rtr_never_stag_zero() {
    let write_offer = mpa::Config {
        p2p: true,
        rtr_supported: RtrSet {
            send: false,
            write: true,
            read: true,
        },
        ..Profile::Rfc.config(Role::Initiator)
    };
    for (ini, resp, want) in [
        (
            Profile::Chelsio.config(Role::Initiator),
            Profile::Chelsio.config(Role::Responder),
            RtrType::Read,
        ),
        (
            write_offer,
            Profile::Siw.config(Role::Responder),
            RtrType::Write,
        ),
    ] {
        let crc = ini.crc.sends_c() || resp.crc.sends_c();
        let mut p = Pair::negotiate(ini, resp);
        p.pump();
        assert_eq!(p.states(), (QpState::Rts, QpState::Rts), "{want:?}");
        let msgs = decode(&p.wire_ab, mpa::RxConfig::new(crc, false), true);
        match (want, msgs.first().map(|m| m.0)) {
            (RtrType::Read, Some(Header::ReadRequest { request, .. })) => {
                assert_eq!(request.size, 0);
                assert_ne!(request.sink_stag, 0);
                assert_ne!(request.source_stag, 0);
            }
            (RtrType::Write, Some(Header::RdmaWrite { stag, .. })) => {
                assert_ne!(stag, 0);
                assert!(msgs[0].1.is_empty());
            }
            (t, other) => panic!("first FPDU for a {t:?} RTR: {other:?}"),
        }
    }
}

/// RFC 5044 §7.1.2 (and NetEffect's `send_first=0`, notes): the responder must not send an
/// FPDU before it has received one from the initiator, in revision 1 without P2P (the
/// `neteffect` and `t404` profiles) as in revision 2. A Send the responder posts right away
/// stays queued — only the MPA Reply crosses — until the initiator's first Send arrives.
#[test]
fn rfc5044_7_1_2_responder_never_sends_first() {
    for profile in [
        Profile::NetEffect,
        Profile::T404,
        Profile::Rfc,
        Profile::Siw,
    ] {
        let ini = profile.config(Role::Initiator);
        let resp = profile.config(Role::Responder);
        let crc = ini.crc.sends_c() || resp.crc.sends_c();
        let mut p = Pair::negotiate(ini, resp);
        let bsrc = p.b.mr(64);
        bsrc.buf().write_at(0, &pattern(64, 9)).expect("fits");
        let adst = p.a.mr(64);
        p.a.eng
            .post_recv(RecvWr::new(1, vec![adst.sge(0, 64)]))
            .expect("post");
        p.b.eng
            .post_send(SendWr::send(1, vec![bsrc.sge(0, 64)]))
            .expect("post");
        p.pump();
        assert_eq!(p.states(), (QpState::Rts, QpState::Rts), "{profile}");
        let (reply, reply_len) = ConnFrame::parse(&p.wire_ba).expect("the MPA Reply");
        assert!(!reply.reject);
        assert_eq!(
            p.wire_ba.len(),
            reply_len,
            "{profile}: the responder sent an FPDU before the initiator's first"
        );
        assert!(p.a.recv_wcs().is_empty());

        // The initiator's first FPDU releases the responder's Send.
        let asrc = p.a.mr(16);
        let bdst = p.b.mr(16);
        p.b.eng
            .post_recv(RecvWr::new(2, vec![bdst.sge(0, 16)]))
            .expect("post");
        p.a.eng
            .post_send(SendWr::send(2, vec![asrc.sge(0, 16)]))
            .expect("post");
        p.pump();
        assert!(p.wire_ba.len() > reply_len, "{profile}");
        let got = p.a.recv_wcs();
        assert_eq!(got.len(), 1, "{profile}");
        assert_eq!(adst.buf().to_vec(), pattern(64, 9));
        let from_b = decode(&p.wire_ba, mpa::RxConfig::new(crc, false), true);
        assert!(matches!(from_b[0].0, Header::Send { msn: 1, .. }));
    }
}
