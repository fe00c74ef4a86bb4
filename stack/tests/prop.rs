//! Property test: random sequences of operations, checked against a model — over MPA with
//! random framings (CRC, markers per direction, EMSS), copying or zero-copy transmit (gather
//! lists resumed mid-piece after short writes), and random re-chunking / short writes of the
//! byte stream; and over SCTP (RFC 5043) with random segment sizes and every batch of
//! messages delivered in a random order. Every byte placed is checked against the model,
//! and every work request completes successfully in posting order. Over SCTP the Write
//! target and the Read sink are, at random, STags that cannot be invalidated, whose Tagged
//! segments are placed as they arrive (RFC 5041 §2.1).

mod common;

use common::sctp::{SctpPair, cfg};
use common::{Chunking, Opts, Pair, Wire, pattern};
use proptest::prelude::*;
use stack::{MrOptions, RecvWr, SendOp, SendWr, WcStatus};

const REGION: usize = 32 * 1024;

#[derive(Clone, Debug)]
enum Op {
    /// a → b Send of `len` bytes from `off`, gathered in `pieces` SGEs.
    Send {
        off: usize,
        len: usize,
        pieces: usize,
    },
    /// b → a Send (exercises both directions at once).
    SendBack { len: usize },
    /// a writes `len` bytes from `src` to b's region at `dst`.
    Write { src: usize, dst: usize, len: usize },
    /// a reads `len` bytes of b's region at `src` into its sink at `dst`, in `pieces` SGEs.
    Read {
        src: usize,
        dst: usize,
        len: usize,
        pieces: usize,
    },
    /// a adds `add` to b's counter.
    FetchAdd { add: u64 },
    /// Let the pipes run now.
    Pump,
}

/// The expected contents of a tagged region. In order, the last Write (or Read) to a byte
/// decides it. When segments are placed as they arrive, RFC 5040 §5.5 rule 3 applies:
/// messages overlapping in one batch (posted between two pumps, so delivered in any order)
/// may leave any of their values; earlier batches were fully delivered and are overwritten.
struct Model {
    last: Vec<u8>,
    /// Other values a byte may hold: overlapping writes of its latest batch.
    also: Vec<Vec<u8>>,
    batch_of: Vec<u32>,
    batch: u32,
}

impl Model {
    fn new() -> Model {
        Model {
            last: vec![0; REGION],
            also: vec![Vec::new(); REGION],
            batch_of: vec![0; REGION],
            batch: 1,
        }
    }

    fn write(&mut self, at: usize, data: &[u8]) {
        for (i, &v) in data.iter().enumerate() {
            let j = at + i;
            if self.batch_of[j] == self.batch {
                let prev = self.last[j];
                self.also[j].push(prev);
            } else {
                self.also[j].clear();
            }
            self.last[j] = v;
            self.batch_of[j] = self.batch;
        }
    }

    /// Everything posted so far was delivered.
    fn pumped(&mut self) {
        self.batch += 1;
    }

    /// Whether `actual` is what in-order placement gives or, with `any_order`, what
    /// placement in any order within each batch may give.
    fn matches(&self, actual: &[u8], any_order: bool) -> bool {
        actual
            .iter()
            .enumerate()
            .all(|(j, &v)| v == self.last[j] || (any_order && self.also[j].contains(&v)))
    }
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..REGION / 2, 0..6000usize, 1..=6usize).prop_map(|(off, len, pieces)| Op::Send {
            off,
            len,
            pieces
        }),
        (0..3000usize).prop_map(|len| Op::SendBack { len }),
        (0..REGION / 2, 0..REGION / 2, 0..8000usize).prop_map(|(src, dst, len)| Op::Write {
            src,
            dst,
            len
        }),
        (0..REGION / 2, 0..REGION / 2, 0..8000usize, 1..=3usize).prop_map(
            |(src, dst, len, pieces)| Op::Read {
                src,
                dst,
                len,
                pieces
            }
        ),
        any::<u32>().prop_map(|a| Op::FetchAdd { add: u64::from(a) }),
        Just(Op::Pump),
    ]
}

/// Splits `len` bytes starting at `off` into `pieces` contiguous parts.
fn split(off: usize, len: usize, pieces: usize) -> Vec<(usize, usize)> {
    let mut v = Vec::new();
    let mut at = off;
    for i in 0..pieces {
        let n = if i + 1 == pieces {
            off + len - at
        } else {
            len / pieces
        };
        v.push((at, n));
        at += n;
    }
    v
}

/// Runs `ops` on an established pair and checks everything against the model; `fixed`:
/// the Write target and Read sink are STags that cannot be invalidated (placed as their
/// segments arrive over SCTP).
fn check<P: Wire>(mut p: P, ops: &[Op], fixed: bool) -> Result<(), TestCaseError> {
    let tagged = if fixed {
        MrOptions::new(common::all_access()).not_invalidatable()
    } else {
        MrOptions::new(common::all_access())
    };
    let a_src = p.a().mr(REGION);
    a_src.buf().write_at(0, &pattern(REGION, 1)).expect("fits");
    let a_sink = p.a().mr_with(REGION, tagged.clone());
    let a_recv = p.a().mr(24 * 3000);
    let b_dst = p.b().mr_with(REGION, tagged);
    let b_src = p.b().mr(REGION);
    b_src.buf().write_at(0, &pattern(REGION, 2)).expect("fits");
    let b_recv = p.b().mr(24 * 6000);
    let b_ctr = p.b().mr(8);
    let a_res = p.a().mr(8 * 64);

    let mut model_dst = Model::new();
    let mut model_sink = Model::new();
    let mut expected_recv_b: Vec<Vec<u8>> = Vec::new();
    let mut expected_recv_a: Vec<Vec<u8>> = Vec::new();
    let mut counter = 0u64;
    let mut originals = Vec::new();
    let mut posted = 0u64;
    let mut recv_b = Vec::new();
    let mut recv_a = Vec::new();

    for (i, op) in ops.iter().enumerate() {
        let id = i as u64;
        match *op {
            Op::Send { off, len, pieces } => {
                let sgl = split(off, len, pieces)
                    .into_iter()
                    .map(|(o, n)| a_src.sge(o as u64, n as u32))
                    .collect();
                // Each receive gets a private slice of b's receive region.
                let slot = expected_recv_b.len() * 6000;
                p.b()
                    .eng
                    .post_recv(RecvWr::new(id, vec![b_recv.sge(slot as u64, 6000)]))
                    .expect("recv");
                recv_b.push((id, slot));
                expected_recv_b.push(pattern(REGION, 1)[off..off + len].to_vec());
                p.a().eng.post_send(SendWr::send(id, sgl)).expect("send");
                posted += 1;
            }
            Op::SendBack { len } => {
                let slot = expected_recv_a.len() * 3000;
                p.a()
                    .eng
                    .post_recv(RecvWr::new(id, vec![a_recv.sge(slot as u64, 3000)]))
                    .expect("recv");
                recv_a.push((id, slot));
                expected_recv_a.push(pattern(REGION, 2)[..len].to_vec());
                p.b()
                    .eng
                    .post_send(SendWr::send(id, vec![b_src.sge(0, len as u32)]))
                    .expect("send");
            }
            Op::Write { src, dst, len } => {
                model_dst.write(dst, &pattern(REGION, 1)[src..src + len]);
                let wr = SendWr::write(
                    id,
                    vec![a_src.sge(src as u64, len as u32)],
                    b_dst.stag(),
                    b_dst.to_at(dst as u64),
                );
                p.a().eng.post_send(wr).expect("write");
                posted += 1;
            }
            Op::Read {
                src,
                dst,
                len,
                pieces,
            } => {
                model_sink.write(dst, &pattern(REGION, 2)[src..src + len]);
                let sgl = split(dst, len, pieces)
                    .into_iter()
                    .map(|(o, n)| a_sink.sge(o as u64, n as u32))
                    .collect();
                p.a()
                    .eng
                    .post_send(SendWr::read(id, sgl, b_src.stag(), b_src.to_at(src as u64)))
                    .expect("read");
                posted += 1;
            }
            Op::FetchAdd { add } => {
                let slot = originals.len() as u64 % 64;
                originals.push((slot, counter));
                counter = counter.wrapping_add(add);
                let op = SendOp::FetchAdd {
                    remote_stag: b_ctr.stag(),
                    remote_to: b_ctr.to_at(0),
                    add,
                    add_mask: 0,
                };
                p.a()
                    .eng
                    .post_send(SendWr::new(id, op, vec![a_res.sge(slot * 8, 8)]))
                    .expect("atomic");
                posted += 1;
                // Results share 64 slots: settle before a slot could be reused.
                p.pump();
                model_dst.pumped();
                model_sink.pumped();
            }
            Op::Pump => {
                p.pump();
                model_dst.pumped();
                model_sink.pumped();
            }
        }
    }
    p.pump();
    // Everything completed successfully, in posting order.
    let s = p.a().send_wcs();
    prop_assert_eq!(s.len() as u64, posted);
    prop_assert!(s.iter().all(|w| w.status == WcStatus::Success), "{:?}", s);
    prop_assert!(s.windows(2).all(|w| w[0].wr_id < w[1].wr_id));
    let rb = p.b().recv_wcs();
    prop_assert_eq!(rb.len(), recv_b.len());
    let b_recv_now = b_recv.buf().to_vec();
    for (wc, ((id, slot), want)) in rb.iter().zip(recv_b.iter().zip(&expected_recv_b)) {
        prop_assert_eq!(wc.wr_id, *id);
        prop_assert_eq!(wc.status, WcStatus::Success);
        prop_assert_eq!(wc.byte_len as usize, want.len());
        prop_assert!(b_recv_now[*slot..*slot + want.len()] == want[..]);
    }
    let ra = p.a().recv_wcs();
    prop_assert_eq!(ra.len(), recv_a.len());
    let a_recv_now = a_recv.buf().to_vec();
    for (wc, ((_, slot), want)) in ra.iter().zip(recv_a.iter().zip(&expected_recv_a)) {
        prop_assert_eq!(wc.byte_len as usize, want.len());
        prop_assert!(a_recv_now[*slot..*slot + want.len()] == want[..]);
    }
    prop_assert!(
        model_dst.matches(&b_dst.buf().to_vec(), fixed),
        "write region differs"
    );
    prop_assert!(
        model_sink.matches(&a_sink.buf().to_vec(), fixed),
        "read sink differs"
    );
    let ctr = u64::from_ne_bytes(b_ctr.buf().to_vec().try_into().expect("8"));
    prop_assert_eq!(ctr, counter);
    let res = a_res.buf().to_vec();
    let last_per_slot: std::collections::BTreeMap<u64, u64> = originals.iter().copied().collect();
    for (slot, orig) in last_per_slot {
        let at = slot as usize * 8;
        prop_assert_eq!(
            u64::from_ne_bytes(res[at..at + 8].try_into().expect("8")),
            orig
        );
    }
    prop_assert_eq!(p.a().eng.state(), stack::QpState::Rts);
    prop_assert_eq!(p.b().eng.state(), stack::QpState::Rts);
    Ok(())
}

proptest! {
    #[test]
    fn random_operations_random_chunking(
        ops in prop::collection::vec(op(), 1..24),
        crc in any::<bool>(),
        markers_ab in any::<bool>(),
        markers_ba in any::<bool>(),
        emss in prop_oneof![Just(1448u32), Just(536u32), 200u32..9000],
        max_chunk in prop_oneof![Just(0usize), 1..64usize, 64..5000usize],
        short_writes in any::<bool>(),
        seed in any::<u64>(),
        zero_copy in any::<bool>(),
    ) {
        let o = Opts {
            crc, markers_ab, markers_ba, emss, ord_a: 3, ird_b: 3, zero_copy, ..Opts::default()
        };
        let p = Pair::established(&o)
            .with_chunking(Chunking { max_chunk, short_writes, seed });
        check(p, &ops, false)?;
    }

    /// RFC 5043 §5.2, §9, §10: the same model over the SCTP LLP, segments of a random
    /// maximum size, every batch of messages delivered in a random order; with `fixed`,
    /// Tagged segments placed as they arrive (RFC 5041 §2.1, RFC 5040 §5.5).
    #[test]
    fn random_operations_over_sctp_in_random_order(
        ops in prop::collection::vec(op(), 1..24),
        max_segment in prop_oneof![Just(1426usize), 100usize..2000, 2000usize..65000],
        seed in any::<u64>(),
        fixed in any::<bool>(),
    ) {
        let mut ca = cfg(3, 3, b"");
        ca.max_segment = max_segment;
        let mut cb = cfg(3, 3, b"");
        cb.max_segment = max_segment;
        let mut p = SctpPair::new(ca, cb, Some(seed));
        p.pump();
        prop_assert_eq!(p.a.eng.state(), stack::QpState::Rts);
        check(p, &ops, fixed)?;
    }
}
