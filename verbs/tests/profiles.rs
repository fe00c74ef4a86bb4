//! Interop profiles through the verbs: both ends connect with a profile's MPA settings
//! and runtime quirks (`QpCaps::for_profile`) over loopback and exchange a Send.

use std::time::Duration;

use verbs::{
    Access, MpaRole, MpaSession as Session, Profile, QpCaps, RecvWr, RnicConfig, SendWr, WcStatus,
    empty_wc, rnic_open,
};

const T: Duration = Duration::from_secs(5);

/// Connects an initiator with profile `a` to a responder with profile `b`, sends 100
/// bytes each way, and returns both sessions.
fn run(a: Profile, b: Profile) -> (Session, Session) {
    let ra = rnic_open(RnicConfig::default()).expect("rnic");
    let rb = rnic_open(RnicConfig::default()).expect("rnic");
    let (pa, pb) = (ra.pd_allocate(), rb.pd_allocate());
    let (ca, cb) = (ra.cq_create(16).unwrap(), rb.cq_create(16).unwrap());
    let qa = ra
        .qp_create(pa, &ca, &ca, QpCaps::for_profile(a))
        .expect("qp");
    let qb = rb
        .qp_create(pb, &cb, &cb, QpCaps::for_profile(b))
        .expect("qp");
    let acc = Access::LOCAL_WRITE;
    let ma = ra.nsmr_register(pa, 100, acc).expect("mr");
    let mb = rb.nsmr_register(pb, 100, acc).expect("mr");
    ma.buf().write_at(0, &[0xa5; 100]).expect("fits");
    mb.buf().write_at(0, &[0x5a; 100]).expect("fits");
    // Receive buffers on both sides before connecting.
    let ia = ra.nsmr_register(pa, 100, acc).expect("mr");
    let ib = rb.nsmr_register(pb, 100, acc).expect("mr");
    ra.qp_post_rq(&qa, RecvWr::new(1, vec![ia.sge(0, 100)]))
        .expect("post");
    rb.qp_post_rq(&qb, RecvWr::new(1, vec![ib.sge(0, 100)]))
        .expect("post");
    let l = rb
        .listen("127.0.0.1:0".parse::<std::net::SocketAddr>().expect("addr"))
        .expect("listen");
    let (sa, sb) = std::thread::scope(|s| {
        let h = s.spawn(|| {
            rb.qp_passive_connect(&l, &qb, b.config(MpaRole::Responder), T)
                .expect("accept")
                .0
        });
        let sa = ra
            .qp_active_connect(&qa, l.local_addr, a.config(MpaRole::Initiator), T)
            .expect("connect");
        (sa, h.join().expect("responder thread"))
    });
    ra.qp_post_sq(&qa, SendWr::send(2, vec![ma.sge(0, 100)]))
        .expect("post");
    rb.qp_post_sq(&qb, SendWr::send(2, vec![mb.sge(0, 100)]))
        .expect("post");
    for (r, cq) in [(&ra, &ca), (&rb, &cb)] {
        for _ in 0..2 {
            let mut w = [empty_wc()];
            assert_eq!(r.cq_poll_block(cq, &mut w, T).expect("poll"), 1);
            assert_eq!(w[0].status, WcStatus::Success);
        }
    }
    assert_eq!(ib.buf().to_vec(), vec![0xa5; 100]);
    assert_eq!(ia.buf().to_vec(), vec![0x5a; 100]);
    (
        sa.mpa().cloned().expect("MPA session"),
        sb.mpa().cloned().expect("MPA session"),
    )
}

/// RFC 5044 §7.1 / RFC 6581 with each profile on both ends: the negotiated revision, CRC,
/// P2P and RTR are the profile's (see `mpa::profile`), and data flows after the RTR.
#[test]
fn each_profile_against_itself() {
    let (si, sr) = run(Profile::Rfc, Profile::Rfc);
    assert_eq!((si.revision, si.crc, si.p2p), (2, false, false));
    assert_eq!(sr.rtr, None);
    let (si, _) = run(Profile::Siw, Profile::Siw);
    assert_eq!((si.revision, si.crc, si.p2p), (2, false, false));
    let (si, sr) = run(Profile::Chelsio, Profile::Chelsio);
    assert_eq!((si.revision, si.crc, si.p2p), (2, true, true));
    assert_eq!(sr.rtr, Some(verbs::RtrType::Read));
    assert_eq!((si.ird, si.ord), (32, 32));
    for p in [Profile::T404, Profile::NetEffect] {
        let (si, sr) = run(p, p);
        assert_eq!((si.revision, si.crc, si.enhanced), (1, true, false), "{p}");
        assert_eq!((sr.revision, sr.crc), (1, true));
    }
}

/// Mixed profiles as a user would meet them: a `siw` initiator (first FPDU held) to a
/// `chelsio` responder gets CRC (RFC 5044 §7.1.1 C from the responder) without P2P; a
/// `chelsio` initiator to a `siw` responder gets P2P with the Read RTR, the only one
/// offered (RFC 6581).
#[test]
fn mixed_profiles() {
    let (si, _) = run(Profile::Siw, Profile::Chelsio);
    assert_eq!((si.crc, si.p2p), (true, false));
    let (si, sr) = run(Profile::Chelsio, Profile::Siw);
    assert!(si.p2p && si.crc);
    assert_eq!(sr.rtr, Some(verbs::RtrType::Read));
}
