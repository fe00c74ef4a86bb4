//! Data transfer through two engines back to back: every operation, data verified
//! byte for byte, under CRC on/off, markers on/off and random re-chunking.

mod common;

use common::{Chunking, Opts, Pair, decode, pattern};
use stack::mpa::RxConfig;
use stack::rdmap::Header;
use stack::{Access, MrOptions, QpState, RecvWr, SendOp, SendWr, WcOpcode, WcStatus};

fn variants() -> Vec<(Opts, Chunking)> {
    let mut v = Vec::new();
    for crc in [false, true] {
        for markers in [false, true] {
            for chunk in [0usize, 7, 1000] {
                v.push((
                    Opts {
                        crc,
                        markers_ab: markers,
                        markers_ba: markers,
                        ..Opts::default()
                    },
                    Chunking {
                        max_chunk: chunk,
                        short_writes: chunk == 7,
                        seed: 42 + chunk as u64,
                    },
                ));
            }
        }
    }
    v
}

/// RFC 5040 §5.3 / RFC 5041 §5.2: a Send larger than the MULPDU is segmented, reassembled and
/// delivered byte for byte into a multi-SGE receive; multi-SGE gather on the send side.
#[test]
fn rfc5040_5_3_send_multi_sge_large_all_framings() {
    for (o, c) in variants() {
        let mut p = Pair::established(&o).with_chunking(c.clone());
        let data = pattern(100_000, 3);
        let src = p.a.mr(data.len());
        src.buf().write_at(0, &data).expect("fits");
        let dst = p.b.mr(120_000);
        // Gather from three pieces, scatter into four.
        let sgl = vec![
            src.sge(0, 10_000),
            src.sge(10_000, 1),
            src.sge(10_001, 89_999),
        ];
        let rsgl = vec![
            dst.sge(0, 5),
            dst.sge(1000, 50_000),
            dst.sge(60_000, 3),
            dst.sge(70_000, 50_000),
        ];
        p.b.eng.post_recv(RecvWr::new(77, rsgl)).expect("post recv");
        p.a.eng.post_send(SendWr::send(11, sgl)).expect("post send");
        p.pump();
        let r = p.b.recv_wcs();
        assert_eq!(r.len(), 1, "{o:?} {c:?}");
        assert_eq!(r[0].status, WcStatus::Success);
        assert_eq!(
            (r[0].wr_id, r[0].byte_len, r[0].opcode),
            (77, 100_000, WcOpcode::Recv)
        );
        let s = p.a.send_wcs();
        assert_eq!(s.len(), 1);
        assert_eq!(
            (s[0].wr_id, s[0].status, s[0].byte_len),
            (11, WcStatus::Success, 100_000)
        );
        let got = dst.buf().to_vec();
        let mut expect = vec![0u8; 120_000];
        expect[0..5].copy_from_slice(&data[0..5]);
        expect[1000..51_000].copy_from_slice(&data[5..50_005]);
        expect[60_000..60_003].copy_from_slice(&data[50_005..50_008]);
        expect[70_000..119_992].copy_from_slice(&data[50_008..]);
        assert!(got == expect, "data mismatch for {o:?} {c:?}");
        // Many FPDUs on the wire, none larger than the MULPDU.
        let rx = RxConfig::new(o.crc, o.markers_ab);
        let msgs = decode(&p.wire_ab, rx, false);
        assert!(msgs.len() >= 100_000 / 1442);
        assert!(msgs.iter().all(|(_, pl)| pl.len() + 18 <= p.a.eng.mulpdu()));
        assert_eq!(p.states(), (QpState::Rts, QpState::Rts));
    }
}

/// RFC 5040 §4.1 Figure 4 opcodes 0x3–0x6 and §5.3: all four Send variants go out with their
/// opcode; the receiver reports the Solicited Event flag and performs the invalidation.
#[test]
fn rfc5040_5_3_four_send_variants() {
    let mut p = Pair::established(&Opts::default());
    let victim1 = p.b.mr(64);
    let victim2 = p.b.mr(64);
    let src = p.a.mr(16);
    src.buf().write_at(0, b"0123456789abcdef").expect("fits");
    let dst = p.b.mr(64);
    for i in 0..4u64 {
        p.b.eng
            .post_recv(RecvWr::new(100 + i, vec![dst.sge(i * 16, 16)]))
            .expect("post");
    }
    let ops = [
        SendOp::Send {
            solicited: false,
            invalidate: None,
        },
        SendOp::Send {
            solicited: false,
            invalidate: Some(victim1.stag()),
        },
        SendOp::Send {
            solicited: true,
            invalidate: None,
        },
        SendOp::Send {
            solicited: true,
            invalidate: Some(victim2.stag()),
        },
    ];
    for (i, op) in ops.into_iter().enumerate() {
        p.a.eng
            .post_send(SendWr::new(i as u64, op, vec![src.sge(i as u64 * 4, 4)]))
            .expect("post");
    }
    p.pump();
    let r = p.b.recv_wcs();
    assert_eq!(r.len(), 4);
    assert_eq!(
        r.iter().map(|w| w.solicited).collect::<Vec<_>>(),
        [false, false, true, true]
    );
    assert_eq!(
        r.iter().map(|w| w.invalidated_stag).collect::<Vec<_>>(),
        [None, Some(victim1.stag()), None, Some(victim2.stag())]
    );
    assert!(
        r.iter()
            .all(|w| w.status == WcStatus::Success && w.byte_len == 4)
    );
    assert!(!p.b.mem.query(victim1.stag()).expect("registered").valid);
    assert!(!p.b.mem.query(victim2.stag()).expect("registered").valid);
    assert_eq!(&dst.buf().to_vec()[..4], b"0123");
    assert_eq!(&dst.buf().to_vec()[48..52], b"cdef");
    let opcodes: Vec<u8> = decode(&p.wire_ab, RxConfig::new(true, false), false)
        .iter()
        .map(|(h, _)| h.opcode().code())
        .collect();
    assert_eq!(opcodes, [0x3, 0x4, 0x5, 0x6]);
    assert_eq!(p.a.send_wcs().len(), 4);
}

/// RFC 5040 §5.1: RDMA Write places data at the Data Sink TO of a VA-based and of a
/// zero-based STag, segment by segment, without consuming a receive.
#[test]
fn rfc5040_5_1_rdma_write_va_and_zero_based() {
    for (o, c) in variants() {
        let mut p = Pair::established(&o).with_chunking(c);
        let data = pattern(50_000, 9);
        let src = p.a.mr(data.len());
        src.buf().write_at(0, &data).expect("fits");
        let va = p.b.mr(60_000);
        let zb =
            p.b.mr_with(60_000, MrOptions::new(common::all_access()).zero_based());
        let w1 = SendWr::write(1, vec![src.sge(0, 50_000)], va.stag(), va.to_at(100));
        let w2 = SendWr::write(2, vec![src.sge(10, 30_000), src.sge(0, 10)], zb.stag(), 5);
        p.a.eng.post_send(w1).expect("post");
        p.a.eng.post_send(w2).expect("post");
        p.pump();
        let s = p.a.send_wcs();
        assert_eq!(
            s.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
            [(1, WcStatus::Success), (2, WcStatus::Success)]
        );
        assert_eq!(s[0].opcode, WcOpcode::RdmaWrite);
        assert_eq!(&va.buf().to_vec()[100..50_100], &data[..]);
        assert!(va.buf().to_vec()[..100].iter().all(|&x| x == 0));
        let z = zb.buf().to_vec();
        assert_eq!(&z[5..30_005], &data[10..30_010]);
        assert_eq!(&z[30_005..30_015], &data[..10]);
        assert!(p.b.recv_wcs().is_empty());
    }
}

/// RFC 5040 §5.2: RDMA Read. Multi-SGE: one Read Request per SGE, each naming its SGE's
/// STag as Data Sink and the next part of the source; data lands byte for byte.
#[test]
fn rfc5040_5_2_rdma_read_multi_sge() {
    for (o, c) in variants() {
        let mut p = Pair::established(&o).with_chunking(c);
        let data = pattern(40_000, 5);
        let src = p.b.mr(data.len());
        src.buf().write_at(0, &data).expect("fits");
        let s1 = p.a.mr(10_000);
        let s2 =
            p.a.mr_with(40_000, MrOptions::new(common::all_access()).zero_based());
        let wr = SendWr::read(
            5,
            vec![s1.sge(0, 10_000), s2.sge(100, 30_000)],
            src.stag(),
            src.to_at(0),
        );
        p.a.eng.post_send(wr).expect("post");
        p.pump();
        let s = p.a.send_wcs();
        assert_eq!(s.len(), 1);
        assert_eq!(
            (s[0].status, s[0].opcode, s[0].byte_len),
            (WcStatus::Success, WcOpcode::RdmaRead, 40_000)
        );
        assert_eq!(s1.buf().to_vec(), &data[..10_000]);
        assert_eq!(&s2.buf().to_vec()[100..30_100], &data[10_000..]);
        let reqs: Vec<_> = decode(&p.wire_ab, RxConfig::new(o.crc, o.markers_ab), false)
            .into_iter()
            .filter_map(|(h, _)| match h {
                Header::ReadRequest { request, msn } => Some((msn, request)),
                _ => None,
            })
            .collect();
        assert_eq!(reqs.len(), 2);
        assert_eq!((reqs[0].0, reqs[1].0), (1, 2), "QN 1 MSNs start at 1");
        assert_eq!(reqs[0].1.sink_stag, s1.stag());
        assert_eq!(reqs[1].1.sink_stag, s2.stag());
        assert_eq!(reqs[1].1.sink_to, 100);
        assert_eq!(reqs[1].1.source_to, src.to_at(10_000));
        assert_eq!(reqs[1].1.size, 30_000);
    }
}

/// RFC 5040 §6.1 / RFC 6581 ORD: with ORD 1 only one Read Request is outstanding at a
/// time; later Reads wait in order and all complete in posting order.
#[test]
fn rfc5040_6_1_ord_limits_outstanding_reads() {
    let o = Opts {
        ord_a: 1,
        ird_b: 1,
        ..Opts::default()
    };
    let mut p = Pair::established(&o);
    let src = p.b.mr(4096);
    src.buf().write_at(0, &pattern(4096, 1)).expect("fits");
    let sink = p.a.mr(4096);
    for i in 0..4u64 {
        let wr = SendWr::read(
            i,
            vec![sink.sge(i * 1024, 1024)],
            src.stag(),
            src.to_at(i * 1024),
        );
        p.a.eng.post_send(wr).expect("post");
    }
    // Only one Read Request leaves before a response comes back.
    let mut out = Vec::new();
    p.a.eng.transmit_all(&mut out);
    let first = decode(&out, RxConfig::new(true, false), false);
    assert_eq!(first.len(), 1);
    assert_eq!(p.a.eng.ord_in_use(), 1);
    p.b.eng.handle_stream(p.now, &out);
    p.pump();
    let s = p.a.send_wcs();
    assert_eq!(s.iter().map(|w| w.wr_id).collect::<Vec<_>>(), [0, 1, 2, 3]);
    assert!(s.iter().all(|w| w.status == WcStatus::Success));
    assert_eq!(sink.buf().to_vec(), pattern(4096, 1));
    assert_eq!(p.a.eng.ord_in_use(), 0);
}

/// RFC 5040 §5.5 (completion order): a Send posted after a Read completes after it.
#[test]
fn rfc5040_5_5_completions_in_posting_order() {
    let mut p = Pair::established(&Opts::default());
    let src = p.b.mr(64);
    let sink = p.a.mr(64);
    let buf = p.b.mr(64);
    p.b.eng
        .post_recv(RecvWr::new(9, vec![buf.sge(0, 64)]))
        .expect("post");
    p.a.eng
        .post_send(SendWr::read(
            1,
            vec![sink.sge(0, 64)],
            src.stag(),
            src.to_at(0),
        ))
        .expect("post");
    p.a.eng
        .post_send(SendWr::send(2, vec![sink.sge(0, 8)]))
        .expect("post");
    // Let only a's bytes go (the Send is fully written) before any response arrives.
    let mut out = Vec::new();
    p.a.eng.transmit_all(&mut out);
    assert!(
        p.a.scq.is_empty(),
        "the Send must not complete before the Read"
    );
    p.b.eng.handle_stream(p.now, &out);
    p.pump();
    let s = p.a.send_wcs();
    assert_eq!(s.iter().map(|w| w.wr_id).collect::<Vec<_>>(), [1, 2]);
}

/// RFC 7306 §5.1: masked Fetch-and-Add and Compare-and-Swap on the responder's memory; the
/// original value comes back into the requester's 8-byte SGE.
#[test]
fn rfc7306_5_atomics() {
    let mut p = Pair::established(&Opts::default());
    let target = p.b.mr(64);
    target
        .buf()
        .write_at(8, &100u64.to_ne_bytes())
        .expect("fits");
    let res = p.a.mr(32);
    let fa = SendOp::FetchAdd {
        remote_stag: target.stag(),
        remote_to: target.to_at(8),
        add: 5,
        add_mask: 0,
    };
    let cs_hit = SendOp::CmpSwap {
        remote_stag: target.stag(),
        remote_to: target.to_at(8),
        compare: 105,
        compare_mask: u64::MAX,
        swap: 7,
        swap_mask: u64::MAX,
    };
    let cs_miss = SendOp::CmpSwap {
        remote_stag: target.stag(),
        remote_to: target.to_at(8),
        compare: 1,
        compare_mask: u64::MAX,
        swap: 99,
        swap_mask: u64::MAX,
    };
    p.a.eng
        .post_send(SendWr::new(1, fa, vec![res.sge(0, 8)]))
        .expect("post");
    p.a.eng
        .post_send(SendWr::new(2, cs_hit, vec![res.sge(8, 8)]))
        .expect("post");
    p.a.eng
        .post_send(SendWr::new(3, cs_miss, vec![res.sge(16, 8)]))
        .expect("post");
    p.pump();
    let s = p.a.send_wcs();
    assert_eq!(
        s.iter()
            .map(|w| (w.wr_id, w.opcode, w.status))
            .collect::<Vec<_>>(),
        [
            (1, WcOpcode::FetchAdd, WcStatus::Success),
            (2, WcOpcode::CmpSwap, WcStatus::Success),
            (3, WcOpcode::CmpSwap, WcStatus::Success)
        ]
    );
    let r = res.buf().to_vec();
    let word = |i: usize| u64::from_ne_bytes(r[i..i + 8].try_into().expect("8"));
    assert_eq!((word(0), word(8), word(16)), (100, 105, 7));
    let t = target.buf().to_vec();
    assert_eq!(u64::from_ne_bytes(t[8..16].try_into().expect("8")), 7);
    // On the wire: QN 1 Atomic Requests, QN 3 Atomic Responses with MSNs from 1.
    let resp: Vec<u32> = decode(&p.wire_ba, RxConfig::new(true, false), false)
        .iter()
        .filter_map(|(h, _)| match h {
            Header::AtomicResponse { msn, .. } => Some(*msn),
            _ => None,
        })
        .collect();
    assert_eq!(resp, [1, 2, 3]);
}

/// RFC 7306 §6: Immediate Data consumes a receive and is delivered in the completion;
/// it shares QN 0's MSN space with Sends.
#[test]
fn rfc7306_6_immediate_data() {
    let mut p = Pair::established(&Opts::default());
    let buf = p.b.mr(64);
    let src = p.a.mr(8);
    p.b.eng
        .post_recv(RecvWr::new(1, vec![buf.sge(0, 64)]))
        .expect("post");
    p.b.eng
        .post_recv(RecvWr::new(2, vec![buf.sge(0, 64)]))
        .expect("post");
    p.a.eng
        .post_send(SendWr::new(
            7,
            SendOp::ImmediateData {
                data: *b"IMMDATA!",
                solicited: true,
            },
            vec![],
        ))
        .expect("post");
    p.a.eng
        .post_send(SendWr::send(8, vec![src.sge(0, 8)]))
        .expect("post");
    p.pump();
    let r = p.b.recv_wcs();
    assert_eq!(r.len(), 2);
    assert_eq!(r[0].imm_data, Some(*b"IMMDATA!"));
    assert!(r[0].solicited);
    assert_eq!(r[1].byte_len, 8);
    let msns: Vec<u32> = decode(&p.wire_ab, RxConfig::new(true, false), false)
        .iter()
        .filter_map(|(h, _)| match h {
            Header::ImmediateData { msn, .. } | Header::Send { msn, .. } => Some(*msn),
            _ => None,
        })
        .collect();
    assert_eq!(msns, [1, 2]);
}

/// Read Responses are interleaved with the responder's own long Send (tagged and untagged
/// messages may be in progress at once, RFC 5041 §5.3), so neither stalls the other.
#[test]
fn read_responses_interleave_with_own_sends() {
    let mut p = Pair::established(&Opts::default());
    let big = pattern(200_000, 4);
    let a_src = p.a.mr(big.len());
    a_src.buf().write_at(0, &big).expect("fits");
    let b_src = p.b.mr(100_000);
    b_src.buf().write_at(0, &pattern(100_000, 6)).expect("fits");
    let b_buf = p.b.mr(big.len());
    let a_buf = p.a.mr(big.len());
    let a_sink = p.a.mr(100_000);
    p.a.eng
        .post_recv(RecvWr::new(1, vec![a_buf.sge(0, 200_000)]))
        .expect("post");
    p.b.eng
        .post_recv(RecvWr::new(2, vec![b_buf.sge(0, 200_000)]))
        .expect("post");
    // a reads from b while b sends a long message to a.
    p.a.eng
        .post_send(SendWr::read(
            3,
            vec![a_sink.sge(0, 100_000)],
            b_src.stag(),
            b_src.to_at(0),
        ))
        .expect("post");
    p.b.eng
        .post_send(SendWr::send(
            4,
            vec![b_src.sge(0, 100_000), b_src.sge(0, 100_000)],
        ))
        .expect("post");
    p.pump();
    let seq: Vec<u8> = decode(&p.wire_ba, RxConfig::new(true, false), false)
        .iter()
        .map(|(h, _)| h.opcode().code())
        .collect();
    let first_resp = seq.iter().position(|&o| o == 0x2).expect("responses");
    let last_send = seq.iter().rposition(|&o| o == 0x3).expect("sends");
    assert!(
        first_resp < last_send,
        "Read Responses must not wait for the whole Send"
    );
    assert_eq!(a_sink.buf().to_vec(), pattern(100_000, 6));
    assert_eq!(p.a.send_wcs()[0].status, WcStatus::Success);
    assert_eq!(p.a.recv_wcs()[0].byte_len, 200_000);
}

/// Unsignaled successful requests produce no completion; Local Invalidate runs in order.
#[test]
fn unsignaled_and_local_invalidate() {
    let mut p = Pair::established(&Opts::default());
    let src = p.a.mr(8);
    let dst = p.b.mr(8);
    p.a.eng
        .post_send(SendWr::write(1, vec![src.sge(0, 8)], dst.stag(), dst.to_at(0)).unsignaled())
        .expect("post");
    p.a.eng
        .post_send(SendWr::new(
            2,
            SendOp::LocalInvalidate { stag: src.stag() },
            vec![],
        ))
        .expect("post");
    p.pump();
    let s = p.a.send_wcs();
    assert_eq!(s.len(), 1);
    assert_eq!((s[0].wr_id, s[0].opcode), (2, WcOpcode::LocalInvalidate));
    assert!(!p.a.mem.query(src.stag()).expect("registered").valid);
}

/// Short writes: a Send completes only once its last byte has been accepted by the
/// transport.
#[test]
fn send_completes_when_transport_accepts_last_byte() {
    let mut p = Pair::established(&Opts::default());
    let src = p.a.mr(3000);
    p.a.eng
        .post_send(SendWr::send(1, vec![src.sge(0, 3000)]))
        .expect("post");
    let total = p.a.eng.poll_transmit().map(|b| b.len()).expect("bytes");
    p.a.eng.transmit_done(total - 1);
    assert!(p.a.scq.is_empty());
    p.a.eng.transmit_done(1);
    assert_eq!(p.a.send_wcs().len(), 1);
}

/// A graceful close waits for outstanding work, then asks for the transport to close; the
/// QP ends in Error with nothing left to flush.
#[test]
fn graceful_close() {
    let mut p = Pair::established(&Opts::default());
    let src = p.a.mr(100);
    let dst = p.b.mr(100);
    let b_buf = p.b.mr(100);
    p.b.eng
        .post_recv(RecvWr::new(1, vec![b_buf.sge(0, 100)]))
        .expect("post");
    p.a.eng
        .post_send(SendWr::write(
            1,
            vec![src.sge(0, 100)],
            dst.stag(),
            dst.to_at(0),
        ))
        .expect("post");
    p.a.eng.close();
    assert_eq!(p.a.eng.state(), QpState::Closing);
    assert_eq!(
        p.a.eng.post_send(SendWr::send(2, vec![])),
        Err(stack::PostError::InvalidState(QpState::Closing))
    );
    p.pump();
    assert_eq!(p.a.send_wcs()[0].status, WcStatus::Success);
    assert_eq!(p.states(), (QpState::Error, QpState::Error));
    // b's unused receive was flushed.
    let r = p.b.recv_wcs();
    assert_eq!((r[0].wr_id, r[0].status), (1, WcStatus::Flushed));
    let _ = Access::NONE;
}

/// The RDMAC verbs' Read fence (the ordering RFC 5040 §5.5 leaves to the requester): a
/// fenced Send posted behind an RDMA Read is not sent until the Read Response has arrived;
/// an unfenced one goes out at once behind the Read Request.
#[test]
fn read_fence_holds_a_send_until_the_read_completes() {
    for fenced in [false, true] {
        let o = Opts::default();
        let mut p = Pair::established(&o);
        let src = p.b.mr(4096);
        src.buf().write_at(0, &pattern(4096, 5)).expect("fits");
        let sink = p.a.mr(4096);
        let msg = p.a.mr(8);
        let rbuf = p.b.mr(8);
        p.b.eng
            .post_recv(RecvWr::new(1, vec![rbuf.sge(0, 8)]))
            .expect("post recv");
        p.a.eng
            .post_send(SendWr::read(
                1,
                vec![sink.sge(0, 4096)],
                src.stag(),
                src.to_at(0),
            ))
            .expect("post read");
        let send = SendWr::send(2, vec![msg.sge(0, 8)]);
        let send = if fenced { send.fenced() } else { send };
        p.a.eng.post_send(send).expect("post send");
        // Everything a would send now, before any answer from b.
        let mut wire = Vec::new();
        while let Some(bytes) = p.a.eng.poll_transmit() {
            let n = bytes.len();
            wire.extend_from_slice(bytes);
            p.a.eng.transmit_done(n);
        }
        let rx = RxConfig::new(o.crc, false);
        let sent: Vec<bool> = decode(&wire, rx, false)
            .iter()
            .map(|(h, _)| matches!(h, Header::Send { .. }))
            .collect();
        assert!(!sent.is_empty(), "the Read Request went out");
        assert_eq!(
            sent.iter().any(|&s| s),
            !fenced,
            "fenced {fenced}: the Send went out before the Read Response"
        );
        // Deliver it and let the exchange finish: the Read, then the Send, both succeed.
        p.b.eng.handle_stream(p.now, &wire);
        p.pump();
        let w: Vec<_> = p.a.send_wcs().iter().map(|w| (w.wr_id, w.status)).collect();
        assert_eq!(
            w,
            [(1, WcStatus::Success), (2, WcStatus::Success)],
            "fenced {fenced}"
        );
        assert!(sink.buf().to_vec() == pattern(4096, 5));
        assert_eq!(p.b.recv_wcs().len(), 1);
    }
}

/// RDMA Verbs Modify QP on the engine: Rts → Terminate sends a Terminate (RDMAP Local
/// Catastrophic Error, RFC 5040 §7.1) that the peer receives, flushes the posted receive,
/// and ends in Error once the Terminate has left; transitions the state does not allow
/// are refused and change nothing.
#[test]
fn verbs_modify_qp_to_terminate_and_refused_transitions() {
    let mut p = Pair::established(&Opts::default());
    assert!(p.a.eng.modify(QpState::Rts).is_err());
    assert!(p.a.eng.modify(QpState::Idle).is_err());
    assert_eq!(p.a.eng.state(), QpState::Rts);
    let buf = p.a.mr(64);
    p.a.eng
        .post_recv(RecvWr::new(3, vec![buf.sge(0, 64)]))
        .expect("recv");
    p.a.eng.modify(QpState::Terminate).expect("to Terminate");
    p.pump();
    let t = p.b.terminate_received().expect("the peer got a Terminate");
    assert_eq!(
        t.cause,
        stack::rdmap::TermCause::Rdmap(stack::rdmap::RdmapCode::LOCAL_CATASTROPHIC)
    );
    assert_eq!(p.a.eng.state(), QpState::Error);
    let r = p.a.recv_wcs();
    assert_eq!((r[0].wr_id, r[0].status), (3, WcStatus::Flushed));
    assert!(p.a.eng.modify(QpState::Closing).is_err());
    assert!(p.a.eng.modify(QpState::Error).is_ok());
}
