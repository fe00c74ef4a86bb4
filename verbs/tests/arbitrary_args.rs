//! Property test: every verb driven with arbitrary arguments returns an error or succeeds —
//! never a panic, an abort or an allocation for arguments it refuses (the OSC/ibverbs
//! convention). Sizes up to `usize::MAX` and timeouts up to `Duration::MAX` included.

use std::time::Duration;

use proptest::prelude::*;
use verbs::{Access, QpCaps, RecvWr, RegisteredBuf, RnicConfig, SendWr, Sge, rnic_open};

#[derive(Clone, Debug)]
enum Op {
    Register {
        pd: u8,
        len: usize,
        access: u8,
    },
    RegisterSge {
        pd: u8,
        offset: usize,
        len: usize,
        access: u8,
    },
    Deregister {
        which: u8,
    },
    DeallocateStag {
        stag: u32,
    },
    InvalidateStag {
        pd: u8,
        stag: u32,
    },
    CreateSgl {
        pd: u8,
        stag: u32,
        to: u64,
        len: u32,
    },
    PollBlock {
        timeout: Duration,
        empty: bool,
    },
    QpCreate {
        pd: u8,
        sq: usize,
        rq: usize,
        sge: usize,
    },
    PostSq {
        stag: u32,
        to: u64,
        len: u32,
        remote: u32,
    },
    PostRq {
        stag: u32,
        to: u64,
        len: u32,
    },
    PdDeallocate {
        pd: u8,
    },
}

fn len() -> impl Strategy<Value = usize> {
    prop_oneof![
        0usize..100_000,
        Just(usize::MAX),
        Just(1usize << 50),
        Just(usize::MAX / 2),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (any::<u8>(), len(), any::<u8>()).prop_map(|(pd, len, access)| Op::Register {
            pd,
            len,
            access
        }),
        (any::<u8>(), len(), len(), any::<u8>()).prop_map(|(pd, offset, len, access)| {
            Op::RegisterSge {
                pd,
                offset,
                len,
                access,
            }
        }),
        any::<u8>().prop_map(|which| Op::Deregister { which }),
        any::<u32>().prop_map(|stag| Op::DeallocateStag { stag }),
        (any::<u8>(), any::<u32>()).prop_map(|(pd, stag)| Op::InvalidateStag { pd, stag }),
        (any::<u8>(), any::<u32>(), any::<u64>(), any::<u32>())
            .prop_map(|(pd, stag, to, len)| Op::CreateSgl { pd, stag, to, len }),
        (
            prop_oneof![
                Just(Duration::ZERO),
                Just(Duration::MAX),
                Just(Duration::from_millis(1))
            ],
            any::<bool>()
        )
            .prop_map(|(timeout, empty)| Op::PollBlock { timeout, empty }),
        (any::<u8>(), len(), len(), 0usize..100).prop_map(|(pd, sq, rq, sge)| Op::QpCreate {
            pd,
            sq,
            rq,
            sge
        }),
        (any::<u32>(), any::<u64>(), any::<u32>(), any::<u32>()).prop_map(
            |(stag, to, len, remote)| Op::PostSq {
                stag,
                to,
                len,
                remote
            }
        ),
        (any::<u32>(), any::<u64>(), any::<u32>()).prop_map(|(stag, to, len)| Op::PostRq {
            stag,
            to,
            len
        }),
        any::<u8>().prop_map(|pd| Op::PdDeallocate { pd }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    #[test]
    fn verbs_never_panic_on_arbitrary_arguments(ops in prop::collection::vec(op(), 1..30)) {
        let r = rnic_open(RnicConfig::default()).expect("rnic");
        // A PD of another RNIC is unknown to this one.
        let other = rnic_open(RnicConfig::default()).expect("rnic");
        let foreign = (0..4).map(|_| other.pd_allocate()).last().expect("pd");
        let pds = [r.pd_allocate(), r.pd_allocate(), foreign];
        let pd = |i: u8| pds[usize::from(i) % pds.len()];
        let cq = r.cq_create(16).expect("cq");
        let mut regions = Vec::new();
        let mut qps = Vec::new();
        let buf = RegisteredBuf::new(4096);
        for op in ops {
            match op {
                Op::Register { pd: p, len, access } => {
                    if let Ok(m) = r.nsmr_register(pd(p), len, Access::from_bits_truncate(access)) {
                        regions.push(m);
                    }
                }
                Op::RegisterSge { pd: p, offset, len, access } => {
                    if let Ok((m, _)) = r.register_sge(pd(p), &buf, offset, len as u32, Access::from_bits_truncate(access)) {
                        regions.push(m);
                    }
                }
                Op::Deregister { which } => {
                    if !regions.is_empty() {
                        let m = regions.remove(usize::from(which) % regions.len());
                        let _ = r.deregister_mem(&m);
                    }
                }
                Op::DeallocateStag { stag } => {
                    let _ = r.deallocate_stag(stag);
                }
                Op::InvalidateStag { pd: p, stag } => {
                    let _ = r.invalidate_stag(pd(p), stag);
                }
                Op::CreateSgl { pd: p, stag, to, len } => {
                    let _ = r.create_sgl(pd(p), &[Sge { stag, to, len }], Access::LOCAL_WRITE);
                }
                Op::PollBlock { timeout, empty } => {
                    let mut out = [verbs::empty_wc()];
                    // With a place for a completion only a finite timeout is waited out.
                    if empty {
                        let _ = r.cq_poll_block(&cq, &mut [], timeout);
                    } else if timeout != Duration::MAX {
                        let _ = r.cq_poll_block(&cq, &mut out, timeout);
                    }
                }
                Op::QpCreate { pd: p, sq, rq, sge } => {
                    let caps = QpCaps { sq_depth: sq, rq_depth: rq, max_sge: sge, ..QpCaps::default() };
                    if let Ok(q) = r.qp_create(pd(p), &cq, &cq, caps) {
                        qps.push(q);
                    }
                }
                Op::PostSq { stag, to, len, remote } => {
                    if let Some(q) = qps.last() {
                        let _ = r.qp_post_sq(q, SendWr::write(1, vec![Sge { stag, to, len }], remote, to));
                    }
                }
                Op::PostRq { stag, to, len } => {
                    if let Some(q) = qps.last() {
                        let _ = r.qp_post_rq(q, RecvWr::new(2, vec![Sge { stag, to, len }]));
                    }
                }
                Op::PdDeallocate { pd: p } => {
                    let _ = r.pd_deallocate(pd(p));
                }
            }
        }
    }
}

/// The inputs that used to take the library down: `cq_poll_block(Duration::MAX)`
/// overflowed its deadline, and `nsmr_register` of `usize::MAX` or 2^50 bytes panicked or
/// aborted in the allocator; `cq_create(0)` made a CQ that overflowed on its first
/// completion. Now: a normal return and errors.
#[test]
fn huge_timeouts_and_sizes_are_errors_not_crashes() {
    let r = rnic_open(RnicConfig::default()).expect("rnic");
    let cq = r.cq_create(4).expect("cq");
    for depth in [0, verbs::MAX_CQ_DEPTH + 1, usize::MAX] {
        assert!(
            matches!(r.cq_create(depth), Err(verbs::VerbsError::CqDepth(d)) if d == depth),
            "cq_create({depth})"
        );
    }
    assert_eq!(r.cq_poll_block(&cq, &mut [], Duration::MAX).unwrap(), 0);
    let pd = r.pd_allocate();
    for len in [usize::MAX, 1 << 50, usize::MAX / 2] {
        assert!(
            r.nsmr_register(pd, len, Access::LOCAL_WRITE).is_err(),
            "{len}"
        );
    }
    let other = rnic_open(RnicConfig::default()).expect("rnic");
    let foreign = (0..4).map(|_| other.pd_allocate()).last().expect("pd");
    assert!(
        r.nsmr_register(foreign, 1 << 20, Access::LOCAL_WRITE)
            .is_err()
    );
}
