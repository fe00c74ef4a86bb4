//! Shared receive queues (RDMA Verbs; ibverbs' `ibv_create_srq`): one queue of receive
//! work requests that any number of QPs of its protection domain draw from, so the receive
//! memory of idle QPs stops growing with their number.
//!
//! A QP created with an SRQ ([`crate::QpConfig::srq`]) has no receive queue of its own to
//! post to: when the first segment of an untagged message for queue 0 (a Send or Immediate
//! Data, RFC 5040 §5.3, RFC 7306 §6) arrives and the QP holds no buffer, it takes the oldest
//! receive of the SRQ, which then completes on the QP's receive CQ as usual. An SRQ with
//! nothing posted is an empty receive queue: the message gets the DDP Terminate for a
//! missing buffer (RFC 5041 §7.2). The SRQ limit ([`Srq::arm_limit`]) fires once, as an
//! asynchronous event, when a take leaves fewer receives than the limit, so the
//! application can post more before a QP runs dry.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::engine::PostError;
use crate::mem::Pd;
use crate::wr::RecvWr;

/// Identifies an SRQ (unique within the process).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SrqId(pub u32);

/// A shared receive queue; a cheap `Clone` (an `Arc` inside) for the application and the
/// QPs that draw from it.
#[derive(Clone, Debug)]
pub struct Srq {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    id: SrqId,
    pd: Pd,
    depth: usize,
    max_sge: usize,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    wrs: VecDeque<RecvWr>,
    /// Armed limit: fire when fewer than this many remain.
    limit: Option<usize>,
}

/// What [`Srq::take`] hands a QP.
#[derive(Debug)]
pub(crate) struct Taken {
    /// The receive.
    pub wr: RecvWr,
    /// The take left fewer receives than the armed limit (which is now disarmed).
    pub limit_reached: bool,
}

impl Srq {
    /// An SRQ of `pd` holding at most `depth` receives of at most `max_sge` SGEs each.
    pub fn new(pd: Pd, depth: usize, max_sge: usize) -> Srq {
        static NEXT: AtomicU32 = AtomicU32::new(1);
        Srq {
            inner: Arc::new(Inner {
                id: SrqId(NEXT.fetch_add(1, Ordering::Relaxed)),
                pd,
                depth,
                max_sge,
                state: Mutex::new(State::default()),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every update is a single push, pop or assignment: a poisoned lock is consistent.
        self.inner.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Its id (in limit events).
    pub fn id(&self) -> SrqId {
        self.inner.id
    }

    /// Its protection domain: only QPs of this PD may use it.
    pub fn pd(&self) -> Pd {
        self.inner.pd
    }

    /// The most receives it holds.
    pub fn depth(&self) -> usize {
        self.inner.depth
    }

    /// Receives posted and not yet taken by a QP.
    pub fn len(&self) -> usize {
        self.lock().wrs.len()
    }

    /// Whether no receive is waiting.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Posts a receive (ibverbs' `ibv_post_srq_recv`). Refused when full, with too many
    /// SGEs, or longer than a message can be; its SGEs are resolved against the PD when a
    /// QP takes it.
    pub fn post_recv(&self, wr: RecvWr) -> Result<(), PostError> {
        if wr.sgl.len() > self.inner.max_sge {
            return Err(PostError::TooManySge {
                given: wr.sgl.len(),
                max: self.inner.max_sge,
            });
        }
        let len = wr.sgl_len();
        if len > u64::from(u32::MAX) {
            return Err(PostError::MessageTooLong { len });
        }
        let mut s = self.lock();
        if s.wrs.len() >= self.inner.depth {
            return Err(PostError::QueueFull {
                depth: self.inner.depth,
            });
        }
        s.wrs.push_back(wr);
        Ok(())
    }

    /// Arms the limit (ibverbs' `srq_limit`): once a QP's take leaves fewer than `limit`
    /// receives, an asynchronous event reports it (once; arm again after). 0 disarms.
    pub fn arm_limit(&self, limit: usize) {
        self.lock().limit = (limit > 0).then_some(limit);
    }

    /// The oldest receive, for a QP that needs a buffer.
    pub(crate) fn take(&self) -> Option<Taken> {
        let mut s = self.lock();
        let wr = s.wrs.pop_front()?;
        let limit_reached = s.limit.is_some_and(|l| s.wrs.len() < l);
        if limit_reached {
            s.limit = None;
        }
        Some(Taken { wr, limit_reached })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wr::Sge;

    fn wr(id: u64) -> RecvWr {
        RecvWr::new(
            id,
            vec![Sge {
                stag: 0x100,
                to: 0,
                len: 8,
            }],
        )
    }

    /// Receives come out oldest first; a full SRQ and too many SGEs are refused; the limit
    /// fires once, when a take leaves fewer than it.
    #[test]
    fn verbs_srq_order_depth_and_limit() {
        let srq = Srq::new(crate::MemTable::new().alloc_pd(), 3, 1);
        for i in 0..3 {
            srq.post_recv(wr(i)).expect("room");
        }
        assert!(matches!(
            srq.post_recv(wr(9)),
            Err(PostError::QueueFull { depth: 3 })
        ));
        let mut two = wr(9);
        two.sgl.push(two.sgl[0]);
        srq.take().expect("one");
        assert!(matches!(
            srq.post_recv(two),
            Err(PostError::TooManySge { given: 2, max: 1 })
        ));
        srq.arm_limit(2);
        let t = srq.take().expect("two");
        assert_eq!((t.wr.wr_id, t.limit_reached), (1, true));
        let t = srq.take().expect("three");
        assert_eq!((t.wr.wr_id, t.limit_reached), (2, false), "fired once");
        assert!(srq.take().is_none());
        assert!(srq.is_empty());
    }
}
