//! RFC 5043 over the association engine: the Adaptation Layer Indication in INIT and
//! INIT ACK (§5.1, §11.1), and a DDP Stream Session carried as unordered PPID 16/17
//! messages end to end (§5.2, §6.2, §10).

mod common;

use std::time::Duration;

use common::*;
use sctp::AssociationConfig;
use sctp::ddp_adapt::{
    ADAPTATION_DDP, PPID_DDP_SEGMENT, PPID_DDP_STREAM_SESSION_CONTROL, PeerAdaptation,
    SessionEvent, StreamSession, max_ddp_segment,
};
use sctp::wire::{Chunk, Param, param_type, parse_packet};

fn ddp_config() -> AssociationConfig {
    AssociationConfig {
        adaptation_indication: Some(ADAPTATION_DDP),
        ..AssociationConfig::default()
    }
}

fn ali_of(params: &[Param]) -> Option<Vec<u8>> {
    params.iter().find_map(|p| match p {
        Param::Unknown { code, value } if *code == param_type::ADAPTATION_LAYER_INDICATION => {
            Some(value.clone())
        }
        _ => None,
    })
}

/// RFC 5043 §5.1 / §11.1: both INIT and INIT ACK carry 0xC006 with value 1; each side
/// learns the other's indication (the responder through its state cookie) and the peer's
/// indication is not reported back as an unrecognized parameter.
#[test]
fn rfc5043_5_1_adaptation_indication_in_init_and_init_ack() {
    let mut p = Pair::new(7, ddp_config());
    p.keep_log = true;
    p.connect();
    let init = parse_packet(&p.log[0].bytes, true).unwrap();
    let Chunk::Init(i) = &init.chunks[0] else {
        panic!("first packet is not INIT")
    };
    assert_eq!(ali_of(&i.params), Some(vec![0, 0, 0, 1]));
    let ack = parse_packet(&p.log[1].bytes, true).unwrap();
    let Chunk::InitAck(ia) = &ack.chunks[0] else {
        panic!("second packet is not INIT ACK")
    };
    assert_eq!(ali_of(&ia.params), Some(vec![0, 0, 0, 1]));
    assert!(
        !ia.params
            .iter()
            .any(|p| matches!(p, Param::UnrecognizedParam(_))),
        "the indication must be understood, not reported"
    );
    assert_eq!(
        p.assoc_a().peer_adaptation_indication(),
        Some(ADAPTATION_DDP)
    );
    assert_eq!(
        p.assoc_b().peer_adaptation_indication(),
        Some(ADAPTATION_DDP)
    );
    assert!(PeerAdaptation::classify(p.assoc_a().peer_adaptation_indication()).ddp_allowed());
}

/// RFC 5043 §11.1: a peer without the indication (NONE) must not be used for DDP.
#[test]
fn rfc5043_11_1_peer_without_indication_is_not_ddp() {
    let mut p = Pair::with_configs(
        8,
        config(8, a_addrs(), PORT_A, ddp_config()),
        config(9, b_addrs(), PORT_B, AssociationConfig::default()),
    );
    p.connect();
    assert_eq!(p.assoc_a().peer_adaptation_indication(), None);
    assert_eq!(
        PeerAdaptation::classify(p.assoc_a().peer_adaptation_indication()),
        PeerAdaptation::None
    );
    assert_eq!(
        p.assoc_b().peer_adaptation_indication(),
        Some(ADAPTATION_DDP)
    );
}

/// RFC 5043 §6.2 over a lossy association: Initiate / Accept and DDP Segments travel as
/// unordered messages with PPIDs 17 and 16 and arrive in DDP-SSN order.
#[test]
fn rfc5043_6_2_session_over_an_association() {
    let mut p = Pair::connected(11, ddp_config());
    p.loss = 0.05;
    p.reorder = 0.2;
    let max = max_ddp_segment(1500, 20);
    let mut active = StreamSession::initiate(2, max, b"hello").unwrap();
    let mut passive = StreamSession::listen(2, max);
    let mut got = Vec::new();
    // One step: move queued messages through the association both ways.
    fn pump(
        p: &mut Pair,
        active: &mut StreamSession,
        passive: &mut StreamSession,
        got: &mut Vec<SessionEvent>,
    ) {
        for o in active.poll_outgoing() {
            assert!(o.ppid == PPID_DDP_SEGMENT || o.ppid == PPID_DDP_STREAM_SESSION_CONTROL);
            p.assoc_a()
                .send(o.stream, o.ppid, o.unordered(), &o.data)
                .unwrap();
        }
        for o in passive.poll_outgoing() {
            p.assoc_b()
                .send(o.stream, o.ppid, o.unordered(), &o.data)
                .unwrap();
        }
        p.run_for(Duration::from_millis(50));
        while let Some(m) = p.assoc_b().recv() {
            assert!(m.unordered);
            got.extend(passive.receive(m.ppid, m.unordered, &m.data));
        }
        while let Some(m) = p.assoc_a().recv() {
            got.extend(active.receive(m.ppid, m.unordered, &m.data));
        }
    }
    pump(&mut p, &mut active, &mut passive, &mut got);
    for _ in 0..100 {
        if !got.is_empty() {
            break;
        }
        pump(&mut p, &mut active, &mut passive, &mut got);
    }
    assert_eq!(got, vec![SessionEvent::InitiateReceived(b"hello".to_vec())]);
    got.clear();
    passive.accept(b"welcome").unwrap();
    for _ in 0..100 {
        pump(&mut p, &mut active, &mut passive, &mut got);
        if !got.is_empty() {
            break;
        }
    }
    assert_eq!(got, vec![SessionEvent::Accepted(b"welcome".to_vec())]);
    got.clear();
    for i in 0..200u32 {
        active.send_segment(&pattern(u64::from(i), 1000)).unwrap();
    }
    // Segments whose first octet has the T bit set are also offered ahead of a gap
    // (RFC 5041 §2.1); only the in-order deliveries are counted here.
    for _ in 0..400 {
        pump(&mut p, &mut active, &mut passive, &mut got);
        got.retain(|e| !matches!(e, SessionEvent::Ahead { .. }));
        if got.len() == 200 {
            break;
        }
    }
    let want: Vec<SessionEvent> = (0..200u64)
        .map(|i| SessionEvent::Segment(pattern(i, 1000)))
        .collect();
    assert_eq!(got, want);
}

/// RFC 5043 §10: a sender keeps fewer than 32768 DATA chunks of its stream
/// unacknowledged, so every DDP-SSN in flight is inside the receiver's window.
/// `unacked_chunks` counts what `send` took and the peer has not acknowledged, per stream,
/// which the RNIC's SCTP transport holds under `MAX_UNACKED_CHUNKS`.
#[test]
fn rfc5043_10_unacknowledged_chunks_are_counted_per_stream() {
    assert_eq!(sctp::ddp_adapt::MAX_UNACKED_CHUNKS, 32767);
    assert!(sctp::ddp_adapt::MAX_UNACKED_CHUNKS < usize::from(sctp::ddp_adapt::SSN_WINDOW));
    let mut p = Pair::connected(61, AssociationConfig::default());
    for i in 0..10 {
        p.assoc_a().send(0, 16, true, &pattern(i, 100)).unwrap();
    }
    p.assoc_a().send(1, 16, true, &pattern(99, 100)).unwrap();
    assert_eq!(p.assoc_a().unacked_chunks(0), 10);
    assert_eq!(p.assoc_a().unacked_chunks(1), 1);
    p.run_for(Duration::from_secs(2));
    assert_eq!(p.assoc_a().unacked_chunks(0), 0);
    assert_eq!(p.assoc_a().unacked_chunks(1), 0);
}
