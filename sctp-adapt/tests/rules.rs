//! One test per protocol rule: what RFC 9260 prescribes for malformed, unexpected or
//! out-of-the-blue packets (ABORT with a cause, an ERROR, or silence), plus the
//! acknowledgement and collision rules.

mod common;

use std::time::Duration;

use common::*;
use sctp::wire::{
    Chunk, CommonHeader, DataChunk, ErrorCause, InitChunk, Param, SackChunk, build_packet,
    chunk_type, parse_packet,
};
use sctp::{AbortReason, AssociationConfig, Event, Instant, State};

/// A connected pair that logs every packet, and A's first TSN.
fn setup(seed: u64) -> (Pair, u32) {
    let mut p = Pair::new(seed, AssociationConfig::default());
    p.keep_log = true;
    p.connect();
    let init = parse_packet(&p.log[0].bytes, true).unwrap();
    let Chunk::Init(i) = &init.chunks[0] else {
        panic!("first packet is not INIT")
    };
    let tsn = i.initial_tsn;
    p.run_for(Duration::from_millis(100));
    (p, tsn)
}

/// Stops B's packets from reaching A, so that A never sees acknowledgements of TSNs the
/// test injected in its name (A would rightly abort on a SACK for a TSN it never sent).
fn mute_b(p: &mut Pair) {
    p.filter = Some(Box::new(|_, side, _, _| side == Side::A));
}

fn a_to_b(vtag: u32, chunks: &[Chunk<'_>]) -> Vec<u8> {
    build_packet(
        &CommonHeader {
            src_port: PORT_A,
            dst_port: PORT_B,
            verification_tag: vtag,
        },
        chunks,
    )
}

fn inject_to_b(p: &mut Pair, bytes: Vec<u8>) {
    p.inject(Side::A, addr("10.0.1.1:0"), addr("10.0.1.2:0"), bytes);
}

/// Packets B sent from log index `from` on, parsed.
fn b_sent(p: &Pair, from: usize) -> Vec<(u32, Vec<u8>)> {
    p.log[from..]
        .iter()
        .filter(|s| s.from == Side::B)
        .map(|s| {
            let h = parse_packet(&s.bytes, true).unwrap().header;
            (h.verification_tag, s.bytes.clone())
        })
        .collect()
}

fn chunks_of(bytes: &[u8]) -> Vec<Chunk<'_>> {
    parse_packet(bytes, true).unwrap().chunks
}

fn data(tsn: u32, stream: u16, payload: &[u8]) -> Chunk<'_> {
    Chunk::Data(DataChunk {
        flags: 0b11,
        tsn,
        stream,
        ssn: 0,
        ppid: 0,
        data: payload,
    })
}

fn fresh_b(seed: u64) -> Pair {
    let mut p = Pair::new(seed, AssociationConfig::default());
    p.keep_log = true;
    p
}

fn init_chunk(tag: u32, os: u16, mis: u16, params: Vec<Param>) -> Chunk<'static> {
    Chunk::Init(InitChunk {
        initiate_tag: tag,
        a_rwnd: 65536,
        outbound_streams: os,
        inbound_streams: mis,
        initial_tsn: 100,
        params,
    })
}

// ---------------------------------------------------------------------------- checksum, tags

/// RFC 9260 §6.8: a packet with a wrong CRC32c is silently discarded.
#[test]
fn rfc9260_6_8_bad_checksum_is_silently_discarded() {
    let (mut p, tsn) = setup(31);
    let vtag = p.assoc_b().local_tag();
    let mut bytes = a_to_b(vtag, &[data(tsn, 0, b"payload")]);
    bytes[8] ^= 0xff;
    let n = p.log.len();
    inject_to_b(&mut p, bytes);
    p.run_for(Duration::from_secs(1));
    assert!(p.assoc_b().recv().is_none());
    assert!(b_sent(&p, n).is_empty());
    assert_eq!(p.b.stats().bad_checksum, 1);
}

/// RFC 9260 §8.5: a packet of an association with the wrong verification tag is silently
/// discarded (no data delivered, no ABORT or SACK sent).
#[test]
fn rfc9260_8_5_wrong_verification_tag_is_silently_discarded() {
    let (mut p, tsn) = setup(32);
    let vtag = p.assoc_b().local_tag().wrapping_add(1);
    let n = p.log.len();
    inject_to_b(&mut p, a_to_b(vtag, &[data(tsn, 0, b"forged")]));
    inject_to_b(&mut p, a_to_b(vtag, &[Chunk::Shutdown { cum_tsn_ack: 0 }]));
    p.run_for(Duration::from_secs(1));
    assert!(p.assoc_b().recv().is_none());
    assert_eq!(p.assoc_b().state(), State::Established);
    assert!(b_sent(&p, n).is_empty());
    // The genuine sender's data with that TSN still gets through afterwards.
    p.assoc_a().send(0, 0, false, b"genuine").unwrap();
    p.run_for(Duration::from_secs(1));
    assert_eq!(p.assoc_b().recv().unwrap().data, b"genuine");
}

/// RFC 9260 §8.5.1 rule B: an ABORT is accepted only with our tag and the T bit clear, or
/// the peer's tag and the T bit set; a blind ABORT is ignored.
#[test]
fn rfc9260_8_5_1_abort_verification_tag_and_t_bit() {
    let (mut p, _) = setup(33);
    let (own, peer) = (p.assoc_b().local_tag(), p.assoc_b().peer_tag());
    let abort = |t_bit| Chunk::Abort {
        t_bit,
        causes: vec![],
    };
    for (vtag, t) in [
        (own ^ 1, false),
        (peer ^ 1, true),
        (own, true),
        (peer, false),
    ] {
        inject_to_b(&mut p, a_to_b(vtag, &[abort(t)]));
        p.run_for(Duration::from_millis(10));
        assert_eq!(
            p.assoc_b().state(),
            State::Established,
            "tag {vtag:#x} T={t}"
        );
    }
    inject_to_b(&mut p, a_to_b(peer, &[abort(true)]));
    p.run_for(Duration::from_millis(10));
    assert!(p.events_b.iter().any(|(_, e)| *e
        == Event::Aborted {
            reason: AbortReason::Peer(vec![])
        }));
}

// ---------------------------------------------------------------------------- out of the blue

/// RFC 9260 §8.4 (2): an out-of-the-blue ABORT is silently discarded.
#[test]
fn rfc9260_8_4_ootb_abort_is_discarded() {
    let mut p = fresh_b(34);
    inject_to_b(
        &mut p,
        a_to_b(
            1234,
            &[Chunk::Abort {
                t_bit: false,
                causes: vec![],
            }],
        ),
    );
    p.run_for(Duration::from_millis(10));
    assert!(b_sent(&p, 0).is_empty());
}

/// RFC 9260 §8.4 (5): an out-of-the-blue SHUTDOWN ACK is answered with SHUTDOWN COMPLETE,
/// T bit set, reflecting the packet's verification tag.
#[test]
fn rfc9260_8_4_ootb_shutdown_ack_gets_shutdown_complete_with_t_bit() {
    let mut p = fresh_b(35);
    inject_to_b(&mut p, a_to_b(0xabcd, &[Chunk::ShutdownAck]));
    p.run_for(Duration::from_millis(10));
    let out = b_sent(&p, 0);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].0, 0xabcd);
    assert_eq!(
        chunks_of(&out[0].1),
        vec![Chunk::ShutdownComplete { t_bit: true }]
    );
}

/// RFC 9260 §8.4 (6), (7): out-of-the-blue SHUTDOWN COMPLETE, COOKIE ACK and Stale Cookie
/// ERROR are silently discarded.
#[test]
fn rfc9260_8_4_ootb_shutdown_complete_cookie_ack_stale_error_discarded() {
    let mut p = fresh_b(36);
    inject_to_b(
        &mut p,
        a_to_b(7, &[Chunk::ShutdownComplete { t_bit: false }]),
    );
    inject_to_b(&mut p, a_to_b(7, &[Chunk::CookieAck]));
    inject_to_b(
        &mut p,
        a_to_b(
            7,
            &[Chunk::Error(vec![ErrorCause::StaleCookie {
                staleness_us: 5,
            }])],
        ),
    );
    p.run_for(Duration::from_millis(10));
    assert!(b_sent(&p, 0).is_empty());
}

/// RFC 9260 §8.4 (8): any other out-of-the-blue packet gets an ABORT with the T bit set
/// and the packet's verification tag.
#[test]
fn rfc9260_8_4_ootb_data_gets_abort_with_reflected_tag() {
    let mut p = fresh_b(37);
    inject_to_b(&mut p, a_to_b(0x1111_2222, &[data(5, 0, b"who?")]));
    p.run_for(Duration::from_millis(10));
    let out = b_sent(&p, 0);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].0, 0x1111_2222);
    assert_eq!(
        chunks_of(&out[0].1),
        vec![Chunk::Abort {
            t_bit: true,
            causes: vec![]
        }]
    );
}

/// RFC 9260 §8.4 (3): an endpoint that does not listen (any more) answers an INIT with an
/// ABORT carrying the INIT's Initiate Tag; an association it had goes on.
#[test]
fn rfc9260_8_4_endpoint_that_stopped_listening_aborts_new_inits() {
    let (mut p, _) = setup(41);
    p.b.set_accept_incoming(false);
    let from = p.log.len();
    let acks = p.b.stats().init_acks_sent;
    // A second peer endpoint (another SCTP port at A's address) starts an association.
    let init = build_packet(
        &CommonHeader {
            src_port: PORT_A + 1,
            dst_port: PORT_B,
            verification_tag: 0,
        },
        &[init_chunk(0x5151, 4, 4, vec![])],
    );
    inject_to_b(&mut p, init);
    p.run_for(Duration::from_millis(10));
    let out = b_sent(&p, from);
    assert_eq!(out.len(), 1, "one reply to the INIT");
    assert_eq!(out[0].0, 0x5151);
    assert!(matches!(
        chunks_of(&out[0].1)[..],
        [Chunk::Abort { t_bit: false, .. }]
    ));
    assert_eq!(p.b.stats().init_acks_sent, acks);
    // The association of before still carries data.
    p.assoc_a().send(0, 9, false, b"still here").unwrap();
    assert!(p.run_until(p.now + Duration::from_secs(1), |p| {
        p.assoc_b().recv().is_some_and(|m| m.data == b"still here")
    }));
}

// ---------------------------------------------------------------------------- INIT rules

/// RFC 9260 §3.3.2: an INIT whose Initiate Tag is 0 is silently discarded.
#[test]
fn rfc9260_3_3_2_init_with_zero_initiate_tag_is_discarded() {
    let mut p = fresh_b(38);
    inject_to_b(&mut p, a_to_b(0, &[init_chunk(0, 1, 1, vec![])]));
    p.run_for(Duration::from_millis(10));
    assert!(b_sent(&p, 0).is_empty());
}

/// RFC 9260 §3.3.2: OS or MIS of 0: ABORT using the Initiate Tag as verification tag.
#[test]
fn rfc9260_3_3_2_init_with_zero_streams_gets_abort() {
    for (os, mis) in [(0u16, 5u16), (5, 0)] {
        let mut p = fresh_b(39);
        inject_to_b(&mut p, a_to_b(0, &[init_chunk(0x77, os, mis, vec![])]));
        p.run_for(Duration::from_millis(10));
        let out = b_sent(&p, 0);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].0, 0x77);
        assert!(
            matches!(&chunks_of(&out[0].1)[0], Chunk::Abort { t_bit: false, causes } if causes == &vec![ErrorCause::InvalidMandatoryParam])
        );
    }
}

/// RFC 9260 §8.5.1 rule A: a packet carrying INIT must have tag 0 and no other chunk;
/// otherwise it is discarded.
#[test]
fn rfc9260_8_5_1_init_with_tag_or_bundled_is_discarded() {
    let mut p = fresh_b(40);
    inject_to_b(&mut p, a_to_b(9, &[init_chunk(0x77, 1, 1, vec![])]));
    inject_to_b(
        &mut p,
        a_to_b(0, &[init_chunk(0x77, 1, 1, vec![]), Chunk::CookieAck]),
    );
    p.run_for(Duration::from_millis(10));
    assert!(b_sent(&p, 0).is_empty());
}

/// RFC 9260 §3.2.1 and §3.3.3: unrecognised INIT parameters are handled by their two
/// upper bits; those marked for reporting come back as Unrecognized Parameter in the INIT
/// ACK; after a "stop" parameter nothing further is processed.
#[test]
fn rfc9260_3_2_1_unknown_init_parameters_by_upper_bits() {
    let mut p = fresh_b(41);
    let unknown = |code: u16| Param::Unknown {
        code,
        value: vec![1, 2, 3],
    };
    let params = vec![
        unknown(0xC001),
        unknown(0x8002),
        unknown(0x4003),
        Param::Ipv4("10.9.9.9".parse().unwrap()),
    ];
    inject_to_b(&mut p, a_to_b(0, &[init_chunk(0x99, 4, 4, params)]));
    p.run_for(Duration::from_millis(10));
    let out = b_sent(&p, 0);
    assert_eq!(out.len(), 1);
    let Chunk::InitAck(ack) = &chunks_of(&out[0].1)[0] else {
        panic!("no INIT ACK")
    };
    let reported: Vec<Vec<u8>> = ack
        .params
        .iter()
        .filter_map(|p| match p {
            Param::UnrecognizedParam(v) => Some(v.clone()),
            _ => None,
        })
        .collect();
    let tlv = |code: u16| {
        let mut v = code.to_be_bytes().to_vec();
        v.extend_from_slice(&[0, 7, 1, 2, 3, 0]);
        v
    };
    assert_eq!(reported, vec![tlv(0xC001), tlv(0x4003)]);
}

/// RFC 9260 §3.3.2.1: a Host Name Address is answered with ABORT (Unresolvable Address).
#[test]
fn rfc9260_3_3_2_1_host_name_address_gets_abort() {
    let mut p = fresh_b(42);
    let params = vec![Param::HostNameAddress(b"example\0".to_vec())];
    inject_to_b(&mut p, a_to_b(0, &[init_chunk(0x55, 4, 4, params)]));
    p.run_for(Duration::from_millis(10));
    let out = b_sent(&p, 0);
    assert_eq!(out[0].0, 0x55);
    assert!(
        matches!(&chunks_of(&out[0].1)[0], Chunk::Abort { causes, .. } if matches!(causes[0], ErrorCause::UnresolvableAddress(_)))
    );
}

// ---------------------------------------------------------------------------- cookies

/// RFC 9260 §5.1.5: a COOKIE ECHO whose cookie fails the MAC check is silently discarded;
/// the initiator's retransmission of the genuine cookie then succeeds.
#[test]
fn rfc9260_5_1_5_tampered_cookie_is_discarded() {
    let mut p = Pair::new(43, AssociationConfig::default());
    p.keep_log = true;
    let mut tampered = false;
    p.filter = Some(Box::new(move |_, side, bytes, _| {
        if side == Side::A && chunk_types(bytes) == vec![chunk_type::COOKIE_ECHO] && !tampered {
            tampered = true;
            let n = bytes.len();
            bytes[n - 40] ^= 0x40;
            sctp::wire::finish_packet(bytes);
        }
        true
    }));
    let id =
        p.a.connect(Instant::ZERO, addr("10.0.1.2:0"), PORT_B)
            .unwrap();
    p.a_id = Some(id);
    p.run_for(Duration::from_millis(100));
    assert_eq!(p.b.stats().bad_cookies, 1);
    assert!(p.b_id.is_none());
    assert!(
        !p.log
            .iter()
            .any(|s| s.from == Side::B && chunk_types(&s.bytes) == vec![chunk_type::COOKIE_ACK])
    );
    assert!(p.run_until(Instant::from_secs(5), |p| p.b_id.is_some()
        && p.connected_a()));
    assert!(p.now >= Instant::from_secs(1));
}

/// A connects to B; every COOKIE ECHO from A is dropped, the first one kept.
fn connect_holding_cookie_echo(p: &mut Pair) -> std::rc::Rc<std::cell::RefCell<Option<Vec<u8>>>> {
    let held: std::rc::Rc<std::cell::RefCell<Option<Vec<u8>>>> = Default::default();
    let h = held.clone();
    p.filter = Some(Box::new(move |_, side, bytes, _| {
        if side == Side::A && chunk_types(bytes) == vec![chunk_type::COOKIE_ECHO] {
            h.borrow_mut().get_or_insert_with(|| bytes.clone());
            return false;
        }
        true
    }));
    let id =
        p.a.connect(Instant::ZERO, addr("10.0.1.2:0"), PORT_B)
            .unwrap();
    p.a_id = Some(id);
    held
}

/// RFC 9260 §5.1.5 step 3 and §5.2.6: a cookie older than Valid.Cookie.Life is answered
/// with a Stale Cookie ERROR; the initiator starts over with a Cookie Preservative.
#[test]
fn rfc9260_5_2_6_stale_cookie_error_and_cookie_preservative() {
    let mut p = Pair::new(44, AssociationConfig::default());
    p.keep_log = true;
    let held = connect_holding_cookie_echo(&mut p);
    p.run_until(Instant::from_secs(65), |_| false);
    let n = p.log.len();
    p.filter = None;
    let cookie = held.borrow().clone().unwrap();
    inject_to_b(&mut p, cookie);
    assert!(p.run_until(Instant::from_secs(70), |p| p.connected_a()));
    let stale = b_sent(&p, n)
        .into_iter()
        .find_map(|(_, b)| match chunks_of(&b).first() {
            Some(Chunk::Error(c)) => Some(c.clone()),
            _ => None,
        })
        .expect("stale cookie error");
    // Created at ~10 ms with a 60 s lifetime, presented at 65 s: about 5 s stale.
    let ErrorCause::StaleCookie { staleness_us } = stale[0] else {
        panic!()
    };
    assert!(
        (4_900_000..5_100_000).contains(&staleness_us),
        "{staleness_us}"
    );
    let new_init = p.log[n..]
        .iter()
        .filter(|s| s.from == Side::A)
        .find_map(|s| match chunks_of(&s.bytes).first() {
            Some(Chunk::Init(i)) => Some(i.clone()),
            _ => None,
        })
        .expect("new INIT");
    assert!(
        new_init
            .params
            .iter()
            .any(|p| matches!(p, Param::CookiePreservative(ms) if *ms >= 4900))
    );
}

/// Holds A's first COOKIE ECHO, then delivers it to B at `at`; returns B's bad-cookie count
/// and whether the association came up from it. The cookie key lives `key_life`.
fn cookie_after_rotation(seed: u64, key_life: Duration, at: Instant) -> (u64, u64, bool) {
    let cfg = AssociationConfig {
        cookie_key_lifetime: key_life,
        ..AssociationConfig::default()
    };
    let mut p = Pair::new(seed, cfg);
    let held = connect_holding_cookie_echo(&mut p);
    p.run_for(Duration::from_millis(100));
    // A retransmits the COOKIE ECHO (dropped) meanwhile; B hears nothing until `at`.
    p.run_until(at, |_| false);
    let cookie = held.borrow().clone().unwrap();
    inject_to_b(&mut p, cookie);
    p.run_for(Duration::from_millis(10));
    (
        p.b.stats().bad_cookies,
        p.b.stats().key_rotations,
        p.b_id.is_some(),
    )
}

/// RFC 9260 §5.1.3: the State Cookie secret key is changed periodically; a cookie signed
/// with the key just replaced still verifies (it is within its lifetime), so a key change
/// loses no association.
#[test]
fn rfc9260_5_1_3_cookie_of_the_previous_key_still_verifies() {
    let (bad, rotations, up) =
        cookie_after_rotation(46, Duration::from_secs(30), Instant::from_secs(35));
    assert_eq!(rotations, 1);
    assert_eq!(bad, 0);
    assert!(
        up,
        "the association comes up from the cookie of the previous key"
    );
}

/// RFC 9260 §5.1.3 and §5.1.5: a cookie signed with a key two changes old no longer
/// verifies (even inside Valid.Cookie.Life) and is discarded.
#[test]
fn rfc9260_5_1_3_cookie_of_a_retired_key_is_discarded() {
    let (bad, rotations, up) =
        cookie_after_rotation(47, Duration::from_secs(20), Instant::from_secs(45));
    assert_eq!(rotations, 1, "one lazy change covering two lifetimes");
    assert_eq!(bad, 1);
    assert!(!up);
}

/// RFC 9260 §5.1 / §3.3.10.2: an INIT ACK without a State Cookie is answered with ABORT
/// carrying Missing Mandatory Parameter (State Cookie).
#[test]
fn rfc9260_5_1_init_ack_without_cookie_gets_abort() {
    let mut p = Pair::new(45, AssociationConfig::default());
    p.keep_log = true;
    p.filter = Some(Box::new(move |_, side, bytes, _| {
        if side == Side::B && chunk_types(bytes) == vec![chunk_type::INIT_ACK] {
            let pk = parse_packet(bytes, true).unwrap();
            let Chunk::InitAck(mut ia) = pk.chunks[0].clone() else {
                return true;
            };
            ia.params.retain(|p| !matches!(p, Param::StateCookie(_)));
            *bytes = build_packet(&pk.header, &[Chunk::InitAck(ia)]);
        }
        true
    }));
    let id =
        p.a.connect(Instant::ZERO, addr("10.0.1.2:0"), PORT_B)
            .unwrap();
    p.a_id = Some(id);
    p.run_for(Duration::from_millis(100));
    let abort = p
        .log
        .iter()
        .filter(|s| s.from == Side::A)
        .find_map(|s| match chunks_of(&s.bytes).first() {
            Some(Chunk::Abort { causes, .. }) => Some(causes.clone()),
            _ => None,
        })
        .expect("ABORT");
    assert_eq!(abort, vec![ErrorCause::MissingMandatoryParam(vec![7])]);
    assert!(matches!(
        &p.events_a[0].1,
        Event::Aborted {
            reason: AbortReason::SetupFailed(_)
        }
    ));
}

// ---------------------------------------------------------------------------- DATA rules

/// RFC 9260 §6.2: a DATA chunk without user data is answered with ABORT carrying the No User
/// Data cause.
#[test]
fn rfc9260_6_2_data_without_user_data_gets_abort() {
    let (mut p, tsn) = setup(46);
    mute_b(&mut p);
    let vtag = p.assoc_b().local_tag();
    let n = p.log.len();
    inject_to_b(&mut p, a_to_b(vtag, &[data(tsn, 0, b"")]));
    p.run_for(Duration::from_millis(20));
    let out = b_sent(&p, n);
    assert_eq!(
        chunks_of(&out[0].1),
        vec![Chunk::Abort {
            t_bit: false,
            causes: vec![ErrorCause::NoUserData { tsn }]
        }]
    );
    assert!(p.b.associations().is_empty());
    assert!(
        p.events_b
            .iter()
            .any(|(_, e)| matches!(e, Event::Aborted { .. }))
    );
}

/// RFC 9260 §6.5: DATA for a stream that does not exist is acknowledged, reported with an
/// Invalid Stream Identifier ERROR, and dropped.
#[test]
fn rfc9260_6_5_invalid_stream_is_acked_and_reported() {
    let (mut p, tsn) = setup(47);
    mute_b(&mut p);
    let vtag = p.assoc_b().local_tag();
    let n = p.log.len();
    inject_to_b(&mut p, a_to_b(vtag, &[data(tsn, 999, b"nowhere")]));
    p.run_for(Duration::from_millis(20));
    let out = b_sent(&p, n);
    let chunks = chunks_of(&out[0].1);
    assert!(
        matches!(&chunks[0], Chunk::Sack(s) if s.cum_tsn_ack == tsn),
        "{chunks:?}"
    );
    assert_eq!(
        chunks[1],
        Chunk::Error(vec![ErrorCause::InvalidStreamId { stream: 999 }])
    );
    assert!(p.assoc_b().recv().is_none());
}

/// RFC 9260 §3.2: unknown chunk types by their upper two bits: 00 stop and discard, 01 stop,
/// discard and report, 10 skip, 11 skip and report.
#[test]
fn rfc9260_3_2_unknown_chunk_types_by_upper_bits() {
    for (ty, processed, reported) in [
        (0x3Fu8, false, false),
        (0x7F, false, true),
        (0xBF, true, false),
        (0xFF, true, true),
    ] {
        let (mut p, tsn) = setup(48);
        mute_b(&mut p);
        let vtag = p.assoc_b().local_tag();
        let n = p.log.len();
        let unknown = Chunk::Unknown {
            chunk_type: ty,
            flags: 0,
            value: &[9, 9, 9, 9],
        };
        inject_to_b(&mut p, a_to_b(vtag, &[unknown, data(tsn, 0, b"after")]));
        p.run_for(Duration::from_millis(300));
        assert_eq!(p.assoc_b().recv().is_some(), processed, "type {ty:#x}");
        let errors: Vec<Vec<ErrorCause>> = b_sent(&p, n)
            .iter()
            .flat_map(|(_, b)| {
                chunks_of(b)
                    .into_iter()
                    .filter_map(|c| match c {
                        Chunk::Error(e) => Some(e),
                        _ => None,
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
        if reported {
            assert_eq!(
                errors,
                vec![vec![ErrorCause::UnrecognizedChunk(vec![
                    ty, 0, 0, 8, 9, 9, 9, 9
                ])]]
            );
        } else {
            assert!(errors.is_empty(), "type {ty:#x}");
        }
    }
}

/// RFC 9260 §6.2.1 / §3.3.10.13: a SACK acknowledging a TSN that was never sent is a
/// protocol violation: ABORT.
#[test]
fn rfc9260_6_2_1_sack_for_unsent_tsn_gets_abort() {
    let (mut p, tsn) = setup(49);
    let vtag = p.assoc_b().local_tag();
    let n = p.log.len();
    // B has sent nothing, so any cumulative ack beyond B's initial TSN - 1 is bogus.
    let b_next = {
        let ack = parse_packet(&p.log[1].bytes, true).unwrap();
        let Chunk::InitAck(i) = &ack.chunks[0] else {
            panic!()
        };
        i.initial_tsn
    };
    let _ = tsn;
    let sack = Chunk::Sack(SackChunk {
        flags: 0,
        cum_tsn_ack: b_next.wrapping_add(10),
        a_rwnd: 10000,
        gaps: vec![],
        dup_tsns: vec![],
    });
    inject_to_b(&mut p, a_to_b(vtag, &[sack]));
    p.run_for(Duration::from_millis(20));
    let out = b_sent(&p, n);
    assert!(
        matches!(&chunks_of(&out[0].1)[0], Chunk::Abort { causes, .. } if matches!(causes[0], ErrorCause::ProtocolViolation(_)))
    );
    assert!(p.b.associations().is_empty());
    assert!(
        p.events_b
            .iter()
            .any(|(_, e)| matches!(e, Event::Aborted { .. }))
    );
}

/// RFC 9260 §6.2: one DATA packet is acknowledged after the 200 ms delayed-SACK timer; a
/// second packet is acknowledged at once.
#[test]
fn rfc9260_6_2_delayed_sack_timer_and_every_second_packet() {
    let (mut p, _) = setup(50);
    let n = p.log.len();
    let t0 = p.now;
    p.assoc_a().send(0, 0, false, b"one").unwrap();
    p.run_for(Duration::from_millis(400));
    let sacks: Vec<Instant> = p.log[n..]
        .iter()
        .filter(|s| s.from == Side::B && chunk_types(&s.bytes).contains(&chunk_type::SACK))
        .map(|s| s.at)
        .collect();
    // Arrives at +5 ms, acknowledged at +205 ms.
    assert_eq!(sacks, vec![t0 + Duration::from_millis(205)]);
    let n = p.log.len();
    let t1 = p.now;
    p.assoc_a().send(0, 0, false, &pattern(1, 1400)).unwrap();
    p.assoc_a().send(0, 0, false, &pattern(2, 1400)).unwrap();
    p.run_for(Duration::from_millis(400));
    let sacks: Vec<Instant> = p.log[n..]
        .iter()
        .filter(|s| s.from == Side::B && chunk_types(&s.bytes).contains(&chunk_type::SACK))
        .map(|s| s.at)
        .collect();
    assert_eq!(sacks, vec![t1 + Duration::from_millis(5)]);
}

/// RFC 9260 §6.2 / §3.3.4: a hole is reported at once with a gap ack block; a duplicate is
/// reported in the duplicate TSN list.
#[test]
fn rfc9260_3_3_4_gap_blocks_and_duplicate_tsns() {
    let (mut p, tsn) = setup(51);
    mute_b(&mut p);
    let vtag = p.assoc_b().local_tag();
    let n = p.log.len();
    inject_to_b(&mut p, a_to_b(vtag, &[data(tsn, 0, b"a")]));
    inject_to_b(&mut p, a_to_b(vtag, &[data(tsn.wrapping_add(2), 0, b"c")]));
    inject_to_b(&mut p, a_to_b(vtag, &[data(tsn.wrapping_add(3), 0, b"d")]));
    p.run_for(Duration::from_millis(1));
    inject_to_b(&mut p, a_to_b(vtag, &[data(tsn, 0, b"a")]));
    p.run_for(Duration::from_millis(1));
    let sacks: Vec<SackChunk> = b_sent(&p, n)
        .iter()
        .flat_map(|(_, b)| {
            chunks_of(b)
                .into_iter()
                .filter_map(|c| match c {
                    Chunk::Sack(s) => Some(s),
                    _ => None,
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let last = sacks.last().unwrap();
    assert_eq!(last.cum_tsn_ack, tsn);
    assert_eq!(last.gaps, vec![sctp::wire::GapBlock { start: 2, end: 3 }]);
    assert_eq!(last.dup_tsns, vec![tsn]);
}

// ---------------------------------------------------------------------------- collisions

/// RFC 9260 §5.2.1 / §5.2.4 (B): both ends send INIT at the same time; each answers the
/// other's INIT from COOKIE-WAIT, and both end up in one association with matching tags.
#[test]
fn rfc9260_5_2_1_simultaneous_init_collision() {
    let mut p = Pair::new(52, AssociationConfig::default());
    let a =
        p.a.connect(Instant::ZERO, addr("10.0.1.2:0"), PORT_B)
            .unwrap();
    let b =
        p.b.connect(Instant::ZERO, addr("10.0.1.1:0"), PORT_A)
            .unwrap();
    p.a_id = Some(a);
    p.b_id = Some(b);
    assert!(p.run_until(Instant::from_secs(10), |p| {
        p.connected_a() && p.events_b.iter().any(|(_, e)| *e == Event::Connected)
    }));
    p.run_for(Duration::from_millis(100));
    assert_eq!(p.a.associations().len(), 1);
    assert_eq!(p.b.associations().len(), 1);
    let (at, ap) = (p.assoc_a().local_tag(), p.assoc_a().peer_tag());
    let (bt, bp) = (p.assoc_b().local_tag(), p.assoc_b().peer_tag());
    assert_eq!((at, ap), (bp, bt));
    p.assoc_a().send(0, 0, false, b"after collision").unwrap();
    p.assoc_b().send(0, 0, false, b"both ways").unwrap();
    p.run_for(Duration::from_secs(1));
    assert_eq!(p.assoc_b().recv().unwrap().data, b"after collision");
    assert_eq!(p.assoc_a().recv().unwrap().data, b"both ways");
}

/// RFC 9260 §5.2.2 / §5.2.4 (A): the peer restarts (new endpoint, same addresses): the
/// INIT ACK carries tie-tags, the COOKIE ECHO is recognised as a restart, and the
/// association continues with the new tags.
#[test]
fn rfc9260_5_2_4_peer_restart() {
    let (mut p, _) = setup(53);
    let old_b_tag = p.assoc_b().local_tag();
    // A "reboots": a new endpoint on the same addresses and port.
    p.a = sctp::Endpoint::new(config(999, a_addrs(), PORT_A, AssociationConfig::default()));
    p.events_a.clear();
    let id = p.a.connect(p.now, addr("10.0.1.2:0"), PORT_B).unwrap();
    p.a_id = Some(id);
    assert!(p.run_until(p.now + Duration::from_secs(5), |p| p.connected_a()));
    assert!(p.events_b.iter().any(|(_, e)| *e == Event::Restarted));
    assert_eq!(p.b.associations().len(), 1);
    assert_ne!(p.assoc_b().local_tag(), old_b_tag);
    assert_eq!(p.assoc_b().peer_tag(), p.assoc_a().local_tag());
    p.assoc_a().send(0, 0, false, b"after restart").unwrap();
    p.run_for(Duration::from_secs(1));
    assert_eq!(p.assoc_b().recv().unwrap().data, b"after restart");
}

// ---------------------------------------------------------------------------- flow control

/// RFC 9260 §6.1 / §6.2: the sender respects the receiver's window; a receiver that stops
/// reading stops the transfer, and reading reopens the window (window update SACK).
#[test]
fn rfc9260_6_1_receiver_window_limits_sender_and_reopens() {
    let cfg_b = AssociationConfig {
        recv_buffer: 16 * 1024,
        ..AssociationConfig::default()
    };
    let mut p = Pair::with_configs(
        54,
        config(54, a_addrs(), PORT_A, AssociationConfig::default()),
        config(55, b_addrs(), PORT_B, cfg_b),
    );
    p.connect();
    for i in 0..40 {
        p.assoc_a().send(0, 0, false, &pattern(i, 1000)).unwrap();
    }
    p.run_for(Duration::from_secs(5));
    // B has not read: at most one buffer's worth (plus one probe chunk) was accepted.
    let acked = 40_000 - p.assoc_a().buffered_amount();
    assert!((15_000..=18_000).contains(&acked), "{acked}");
    // §6.1 A: the dropped zero-window probes, answered by SACKs, are not path errors.
    assert_eq!(p.assoc_a().path_stats()[0].error_count, 0);
    assert!(p.assoc_a().path_stats()[0].timeouts >= 1);
    assert!(
        !p.events_a
            .iter()
            .any(|(_, e)| matches!(e, Event::PathPotentiallyFailed { .. }))
    );
    let mut n = 0;
    assert!(p.run_until(p.now + Duration::from_secs(30), |p| {
        while let Some(m) = p.assoc_b().recv() {
            assert_eq!(m.data, pattern(n, 1000));
            n += 1;
        }
        n == 40
    }));
}
