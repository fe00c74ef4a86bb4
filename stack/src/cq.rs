//! Completion queues, work completions and completion channels.
//!
//! A [`Cq`] is a bounded ring of [`Wc`]s shared (it is a cheap `Clone`, an `Arc` inside) by
//! any number of QPs and by the application. The application takes completions with
//! [`Cq::poll`] (a batch at a time), blocks with [`Cq::wait`], or arms the CQ
//! ([`Cq::arm`]) and watches a [`CompletionChannel`]: a Linux eventfd that becomes readable
//! when an armed CQ gets a completion (every completion, or only solicited and error ones),
//! so it folds into any epoll loop.
//!
//! A full CQ never drops a completion silently: the completion that does not fit is
//! counted, the CQ is marked overflowed, an [`AsyncEvent::CqOverflow`] is queued on the CQ
//! ([`Cq::poll_async`]) and the pushing QP is told (it moves to the Error state, as the verbs
//! model requires).

use std::collections::VecDeque;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rdmap::TermCause;
use thiserror::Error;

/// Identifies a QP in completions and events.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QpId(pub u32);

/// Identifies a CQ (unique within the process).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CqId(pub u32);

/// The operation a completion reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WcOpcode {
    /// A Send of any of the four kinds.
    Send,
    /// An RDMA Write.
    RdmaWrite,
    /// An RDMA Read.
    RdmaRead,
    /// An atomic Fetch and Add.
    FetchAdd,
    /// An atomic Compare and Swap.
    CmpSwap,
    /// An Immediate Data message sent.
    ImmediateData,
    /// A Local Invalidate.
    LocalInvalidate,
    /// A Fast Register.
    FastRegister,
    /// A memory window bind.
    BindWindow,
    /// A receive: an incoming Send, or an incoming Immediate Data message (then
    /// [`Wc::imm_data`] is set).
    Recv,
}

impl std::fmt::Display for WcOpcode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            WcOpcode::Send => "Send",
            WcOpcode::RdmaWrite => "RDMA Write",
            WcOpcode::RdmaRead => "RDMA Read",
            WcOpcode::FetchAdd => "Fetch and Add",
            WcOpcode::CmpSwap => "Compare and Swap",
            WcOpcode::ImmediateData => "Immediate Data",
            WcOpcode::LocalInvalidate => "Local Invalidate",
            WcOpcode::FastRegister => "Fast Register",
            WcOpcode::BindWindow => "Bind Memory Window",
            WcOpcode::Recv => "receive",
        })
    }
}

impl std::fmt::Display for WcStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            WcStatus::Success => "success",
            WcStatus::LocalLength => {
                "local length error (the message did not fit the receive buffer, or an atomic's result buffer is not 8 bytes)"
            }
            WcStatus::LocalProtection => {
                "local protection error (an SGE names an invalid STag, another PD's memory, lacks rights or lies out of bounds)"
            }
            WcStatus::LocalQpOperation => {
                "local QP operation error (not possible on this QP, e.g. an RDMA Read with ORD 0)"
            }
            WcStatus::RemoteAccess => "remote access error (the peer refused access to its memory)",
            WcStatus::RemoteOperation => {
                "remote operation error (the peer failed the operation, e.g. no receive buffer posted)"
            }
            WcStatus::Transport => "transport error (the connection failed)",
            WcStatus::Fatal => "fatal QP error",
            WcStatus::Flushed => "flushed (the QP entered the Error state)",
        })
    }
}

/// In words: "RDMA Read 7 on QP 1: remote access error (...); Terminate received: ...".
impl std::fmt::Display for Wc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} on QP {}: {}",
            self.opcode, self.wr_id, self.qp.0, self.status
        )?;
        if let Some(t) = &self.term {
            let who = match t.origin {
                TermOrigin::Sent => "sent",
                TermOrigin::Received => "received",
            };
            write!(f, "; Terminate {who}: {}", t.cause)?;
        }
        Ok(())
    }
}

/// Which side sent the Terminate a completion refers to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TermOrigin {
    /// This side sent it (it found the error).
    Sent,
    /// The peer sent it.
    Received,
}

/// A Terminate attached to an error completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TermInfo {
    /// Layer / error type / error code.
    pub cause: TermCause,
    /// Who sent it.
    pub origin: TermOrigin,
}

/// Completion status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WcStatus {
    /// The work request completed successfully.
    Success,
    /// Local length error: a received message did not fit the receive buffer, or an atomic
    /// result buffer is not 8 bytes.
    LocalLength,
    /// Local protection error: an SGE names an invalid STag, another PD's memory, lacks the
    /// needed rights or lies out of bounds.
    LocalProtection,
    /// Local QP operation error: the work request cannot be carried out on this QP (for
    /// example an RDMA Read on a connection whose ORD is 0).
    LocalQpOperation,
    /// The peer refused access to its memory (Terminate with a Remote Protection or DDP
    /// tagged-buffer error).
    RemoteAccess,
    /// The peer failed the operation (Terminate with a Remote Operation or DDP
    /// untagged-buffer error, e.g. no receive buffer posted).
    RemoteOperation,
    /// The transport failed (LLP error, connection lost, MPA error).
    Transport,
    /// The QP failed for a reason not tied to this work request.
    Fatal,
    /// The work request was flushed when the QP entered the Error state.
    Flushed,
}

impl WcStatus {
    /// Whether this is [`WcStatus::Success`].
    pub fn is_success(self) -> bool {
        self == WcStatus::Success
    }
}

/// A work completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Wc {
    /// The work request's cookie.
    pub wr_id: u64,
    /// Outcome.
    pub status: WcStatus,
    /// The operation.
    pub opcode: WcOpcode,
    /// Bytes transferred (received message length for receives, bytes read for Reads).
    pub byte_len: u32,
    /// The QP.
    pub qp: QpId,
    /// RFC 7306 Immediate Data received.
    pub imm_data: Option<[u8; 8]>,
    /// The STag a received Send with Invalidate invalidated.
    pub invalidated_stag: Option<u32>,
    /// The received message asked for a Solicited Event.
    pub solicited: bool,
    /// The Terminate behind an error status, when one was sent or received.
    pub term: Option<TermInfo>,
}

impl Wc {
    /// A completion with no optional fields set.
    pub fn new(qp: QpId, wr_id: u64, opcode: WcOpcode, status: WcStatus) -> Wc {
        Wc {
            wr_id,
            status,
            opcode,
            byte_len: 0,
            qp,
            imm_data: None,
            invalidated_stag: None,
            solicited: false,
            term: None,
        }
    }
}

/// Asynchronous errors recorded on a CQ, not tied to one work request. (A QP's own
/// failures, Terminates and state changes are reported by [`crate::QpEngine::poll_event`].)
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AsyncEvent {
    /// A completion did not fit the CQ; `qp` pushed it and moved to Error.
    CqOverflow {
        /// The CQ.
        cq: CqId,
        /// The QP whose completion did not fit.
        qp: QpId,
    },
}

/// What an armed CQ notifies on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Arm {
    /// The next completion of any kind.
    NextCompletion,
    /// The next solicited receive completion, or the next error completion.
    Solicited,
}

/// The CQ was full: the completion was not queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
#[error("completion queue {cq:?} is full ({capacity} entries): completion lost, CQ overflowed")]
pub struct CqOverflowError {
    /// The CQ.
    pub cq: CqId,
    /// Its capacity.
    pub capacity: usize,
}

#[derive(Debug)]
struct CqState {
    ring: VecDeque<Wc>,
    capacity: usize,
    armed: Option<Arm>,
    overflowed: bool,
    lost: u64,
    events: VecDeque<AsyncEvent>,
    /// The waiters blocked now were already notified (a push since the last one began to
    /// wait): later pushes need not notify again until a new wait begins.
    notified: bool,
    /// The fewest completions any blocked waiter waits for ([`Cq::wait_for`]; 1 with no
    /// waiter): a push notifies once the CQ holds that many.
    want: usize,
}

#[derive(Debug)]
struct CqShared {
    id: CqId,
    state: Mutex<CqState>,
    ready: Condvar,
    /// Threads blocked (or about to block) in [`Cq::wait`]. Changed only under the state
    /// lock, so a push (which also holds it) sees every waiter that could miss its wake-up;
    /// the Condvar is notified only when there is one (a notify is a system call).
    waiters: AtomicUsize,
    /// The ring's length, stored under the state lock after every change, so
    /// [`Cq::len`] and [`Cq::is_empty`] read it without taking the lock (an application
    /// polling an empty CQ does not contend with the progress core pushing to it).
    queued: AtomicUsize,
    channel: Option<CompletionChannel>,
}

/// A completion queue (cheap to clone; clones share the queue).
#[derive(Clone, Debug)]
pub struct Cq {
    shared: Arc<CqShared>,
}

static NEXT_CQ: AtomicU32 = AtomicU32::new(1);

impl Cq {
    /// A CQ holding at most `capacity` completions, without a completion channel.
    pub fn new(capacity: usize) -> Cq {
        Cq::build(capacity, None)
    }

    /// A CQ that signals `channel` when armed.
    pub fn with_channel(capacity: usize, channel: &CompletionChannel) -> Cq {
        Cq::build(capacity, Some(channel.clone()))
    }

    /// Whether the CQ is attached to a completion channel (arming it means something).
    pub fn has_channel(&self) -> bool {
        self.shared.channel.is_some()
    }

    /// Whether the CQ is attached to `channel`.
    pub fn channel_is(&self, channel: &CompletionChannel) -> bool {
        self.shared
            .channel
            .as_ref()
            .is_some_and(|c| Arc::ptr_eq(&c.shared, &channel.shared))
    }

    fn build(capacity: usize, channel: Option<CompletionChannel>) -> Cq {
        Cq {
            shared: Arc::new(CqShared {
                id: CqId(NEXT_CQ.fetch_add(1, Ordering::Relaxed)),
                state: Mutex::new(CqState {
                    // On demand: the ring grows (by doubling) only as far as completions
                    // actually queue up, so a deep CQ costs nothing until it is used.
                    ring: VecDeque::with_capacity(capacity.min(64)),
                    capacity,
                    armed: None,
                    overflowed: false,
                    lost: 0,
                    events: VecDeque::new(),
                    notified: false,
                    want: 1,
                }),
                ready: Condvar::new(),
                waiters: AtomicUsize::new(0),
                queued: AtomicUsize::new(0),
                channel,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, CqState> {
        // Every update under the lock is a single push or pop; a poisoned lock is consistent.
        self.shared.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The CQ's id.
    pub fn id(&self) -> CqId {
        self.shared.id
    }

    /// Capacity.
    pub fn capacity(&self) -> usize {
        self.lock().capacity
    }

    /// Completions waiting.
    pub fn len(&self) -> usize {
        self.shared.queued.load(Ordering::Acquire)
    }

    /// Whether no completion is waiting.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether a completion was ever lost to a full CQ.
    pub fn overflowed(&self) -> bool {
        self.lock().overflowed
    }

    /// Completions lost to overflow.
    pub fn lost(&self) -> u64 {
        self.lock().lost
    }

    /// Moves up to `out.len()` completions into `out`, oldest first; returns how many.
    pub fn poll(&self, out: &mut [Wc]) -> usize {
        let mut s = self.lock();
        let mut n = 0;
        for slot in out.iter_mut() {
            match s.ring.pop_front() {
                Some(wc) => {
                    *slot = wc;
                    n += 1;
                }
                None => break,
            }
        }
        self.shared.queued.store(s.ring.len(), Ordering::Release);
        n
    }

    /// Takes one completion.
    pub fn poll_one(&self) -> Option<Wc> {
        let mut s = self.lock();
        let wc = s.ring.pop_front();
        self.shared.queued.store(s.ring.len(), Ordering::Release);
        wc
    }

    /// Takes every waiting completion.
    pub fn drain(&self) -> Vec<Wc> {
        let mut s = self.lock();
        let all = s.ring.drain(..).collect();
        self.shared.queued.store(0, Ordering::Release);
        all
    }

    /// Blocks until a completion is waiting or `timeout` passes; returns whether one is
    /// waiting. Does not take it (use [`Cq::poll`]).
    pub fn wait(&self, timeout: Duration) -> bool {
        self.wait_for(1, timeout)
    }

    /// Blocks until at least `n` completions are waiting (`n` taken as 1 .. the capacity) or
    /// `timeout` passes; returns whether any is waiting (after a timeout, possibly fewer
    /// than `n`). Does not take them.
    ///
    /// The low-water mark of a socket (`SO_RCVLOWAT`) for completions: an application
    /// that keeps many work requests outstanding and refills its queue in batches sleeps
    /// once per batch instead of once per completion.
    pub fn wait_for(&self, n: usize, timeout: Duration) -> bool {
        let deadline = Instant::now().checked_add(timeout);
        let mut s = self.lock();
        loop {
            // A full CQ counts as enough (it can hold no more).
            let n = n.clamp(1, s.capacity.max(1));
            if s.ring.len() >= n {
                return true;
            }
            let left = match deadline {
                Some(d) => d.saturating_duration_since(Instant::now()),
                None => Duration::from_secs(3600),
            };
            if left.is_zero() {
                return !s.ring.is_empty();
            }
            // Counted under the lock: a push after this point sees the waiter and notifies
            // once the CQ holds what the most eager waiter wants.
            let before = self.shared.waiters.fetch_add(1, Ordering::SeqCst);
            s.want = if before == 0 { n } else { s.want.min(n) };
            s.notified = false;
            s = match self.shared.ready.wait_timeout(s, left) {
                Ok((g, _)) => g,
                Err(p) => p.into_inner().0,
            };
            if self.shared.waiters.fetch_sub(1, Ordering::SeqCst) == 1 {
                s.want = 1;
            }
        }
    }

    /// Whether a push must notify the Condvar (decided under the state lock): some thread
    /// waits and was not notified since it began to, and the CQ holds as many completions
    /// as the most eager waiter wants. Marks the waiters notified.
    fn must_notify(&self, s: &mut CqState) -> bool {
        if self.shared.waiters.load(Ordering::SeqCst) > 0 && !s.notified && s.ring.len() >= s.want {
            s.notified = true;
            true
        } else {
            false
        }
    }

    /// Wakes the threads blocked in [`Cq::wait`] when [`Cq::must_notify`] said so. Called
    /// after the state lock (under which the completion was queued) is released.
    fn wake_waiters(&self, notify: bool) {
        if notify {
            self.shared.ready.notify_all();
        }
    }

    /// Arms the CQ: its channel is signalled once for the next completion matching `arm`.
    /// Arming for solicited completions does not weaken an existing arm for every one.
    pub fn arm(&self, arm: Arm) {
        let mut s = self.lock();
        s.armed = match (s.armed, arm) {
            (Some(Arm::NextCompletion), _) => Some(Arm::NextCompletion),
            _ => Some(arm),
        };
    }

    /// Whether the CQ is armed (its channel not yet signalled since).
    pub fn is_armed(&self) -> bool {
        self.lock().armed.is_some()
    }

    /// The next asynchronous event recorded on this CQ.
    pub fn poll_async(&self) -> Option<AsyncEvent> {
        self.lock().events.pop_front()
    }

    /// Queues a completion (used by the engine). A full CQ records the overflow, queues an
    /// [`AsyncEvent::CqOverflow`], signals the channel and returns the error.
    pub fn push(&self, wc: Wc) -> Result<(), CqOverflowError> {
        let mut s = self.lock();
        if s.ring.len() >= s.capacity {
            s.overflowed = true;
            s.lost += 1;
            s.events.push_back(AsyncEvent::CqOverflow {
                cq: self.shared.id,
                qp: wc.qp,
            });
            let capacity = s.capacity;
            let notify = self.must_notify(&mut s);
            drop(s);
            self.signal();
            self.wake_waiters(notify);
            return Err(CqOverflowError {
                cq: self.shared.id,
                capacity,
            });
        }
        let solicited_or_error = wc.solicited || !wc.status.is_success();
        s.ring.push_back(wc);
        self.shared.queued.store(s.ring.len(), Ordering::Release);
        let fire = match s.armed {
            Some(Arm::NextCompletion) => true,
            Some(Arm::Solicited) => solicited_or_error,
            None => false,
        };
        if fire {
            s.armed = None;
        }
        let notify = self.must_notify(&mut s);
        drop(s);
        self.wake_waiters(notify);
        if fire {
            self.signal();
        }
        Ok(())
    }

    fn signal(&self) {
        if let Some(ch) = &self.shared.channel {
            ch.notify(self.shared.id);
        }
    }
}

#[derive(Debug)]
struct ChannelShared {
    fd: OwnedFd,
    fired: Mutex<VecDeque<CqId>>,
}

/// A completion channel: an eventfd that becomes readable when an armed CQ attached to it
/// gets a matching completion (or an asynchronous event).
///
/// Put [`CompletionChannel::as_fd`] into an epoll set; when it is readable call
/// [`CompletionChannel::get_events`] for the CQs that fired, poll them, and re-arm them.
#[derive(Clone, Debug)]
pub struct CompletionChannel {
    shared: Arc<ChannelShared>,
}

impl CompletionChannel {
    /// A new channel (a non-blocking, close-on-exec eventfd).
    pub fn new() -> std::io::Result<CompletionChannel> {
        use rustix::event::{EventfdFlags, eventfd};
        let fd = eventfd(0, EventfdFlags::NONBLOCK | EventfdFlags::CLOEXEC)?;
        Ok(CompletionChannel {
            shared: Arc::new(ChannelShared {
                fd,
                fired: Mutex::new(VecDeque::new()),
            }),
        })
    }

    fn notify(&self, cq: CqId) {
        {
            let mut f = self.shared.fired.lock().unwrap_or_else(|p| p.into_inner());
            if !f.contains(&cq) {
                f.push_back(cq);
            }
        }
        // The eventfd counter cannot realistically overflow (2^64 − 2 signals); a failed
        // write would only mean it is already readable.
        let _ = rustix::io::write(&self.shared.fd, &1u64.to_ne_bytes());
    }

    /// Consumes the readiness of the eventfd and returns the CQs that fired since the last
    /// call (each once), oldest first. Empty when nothing fired.
    pub fn get_events(&self) -> Vec<CqId> {
        let mut buf = [0u8; 8];
        // EAGAIN (nothing signalled) is the normal "no event" answer.
        let _ = rustix::io::read(&self.shared.fd, &mut buf);
        let mut f = self.shared.fired.lock().unwrap_or_else(|p| p.into_inner());
        f.drain(..).collect()
    }
}

impl CompletionChannel {
    /// Blocks until the channel is signalled (an armed CQ fired) or `timeout` passed;
    /// returns whether it was signalled. The readiness stays until
    /// [`CompletionChannel::get_events`] consumes it.
    pub fn wait(&self, timeout: Duration) -> bool {
        use rustix::event::{PollFd, PollFlags, Timespec, poll};
        let t = Timespec {
            tv_sec: i64::try_from(timeout.as_secs()).unwrap_or(i64::MAX),
            tv_nsec: i64::from(timeout.subsec_nanos()),
        };
        let mut fds = [PollFd::new(&self.shared.fd, PollFlags::IN)];
        matches!(poll(&mut fds, Some(&t)), Ok(n) if n > 0)
    }
}

impl AsFd for CompletionChannel {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.shared.fd.as_fd()
    }
}

impl AsRawFd for CompletionChannel {
    fn as_raw_fd(&self) -> RawFd {
        self.shared.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    /// Error completions read as words: operation, id, QP, what the status means, and the
    /// Terminate behind it.
    #[test]
    fn error_completions_in_words() {
        let mut wc = Wc::new(QpId(3), 7, WcOpcode::RdmaRead, WcStatus::RemoteAccess);
        wc.term = Some(TermInfo {
            cause: TermCause::Ddp(ddp::DdpCode::Tagged(ddp::TaggedCode::InvalidStag)),
            origin: TermOrigin::Received,
        });
        let s = wc.to_string();
        assert!(
            s.starts_with("RDMA Read 7 on QP 3: remote access error"),
            "{s}"
        );
        assert!(
            s.contains("Terminate received: DDP Tagged Buffer Error: Invalid STag"),
            "{s}"
        );
        let f = Wc::new(QpId(1), 2, WcOpcode::Recv, WcStatus::Flushed).to_string();
        assert_eq!(
            f,
            "receive 2 on QP 1: flushed (the QP entered the Error state)"
        );
    }

    use super::*;

    fn wc(id: u64) -> Wc {
        Wc::new(QpId(1), id, WcOpcode::Send, WcStatus::Success)
    }

    fn readable(ch: &CompletionChannel) -> bool {
        let mut fds = [rustix::event::PollFd::new(ch, rustix::event::PollFlags::IN)];
        rustix::event::poll(&mut fds, None).is_ok_and(|n| n > 0)
            && fds[0].revents().contains(rustix::event::PollFlags::IN)
    }

    #[test]
    fn batch_poll_in_order() {
        let cq = Cq::new(8);
        for i in 0..5 {
            cq.push(wc(i)).expect("room");
        }
        let mut out = [wc(99); 3];
        assert_eq!(cq.poll(&mut out), 3);
        assert_eq!(out.map(|w| w.wr_id), [0, 1, 2]);
        assert_eq!(cq.poll(&mut out), 2);
        assert_eq!(out[1].wr_id, 4);
        assert_eq!(cq.poll(&mut out), 0);
    }

    #[test]
    fn overflow_is_reported_not_silent() {
        let cq = Cq::new(2);
        cq.push(wc(0)).expect("room");
        cq.push(wc(1)).expect("room");
        let err = cq.push(wc(2)).expect_err("full");
        assert_eq!(err.capacity, 2);
        assert!(cq.overflowed());
        assert_eq!(cq.lost(), 1);
        assert_eq!(
            cq.poll_async(),
            Some(AsyncEvent::CqOverflow {
                cq: cq.id(),
                qp: QpId(1)
            })
        );
        assert_eq!(cq.len(), 2);
    }

    #[test]
    fn wait_times_out_and_wakes() {
        let cq = Cq::new(4);
        assert!(!cq.wait(Duration::from_millis(5)));
        let c2 = cq.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(10));
            c2.push(wc(7)).expect("room");
        });
        assert!(cq.wait(Duration::from_secs(5)));
        assert_eq!(cq.poll_one().map(|w| w.wr_id), Some(7));
        t.join().expect("thread");
    }

    /// `wait_for(n)` returns once `n` completions are queued, not at the first; a second
    /// waiter that wants fewer is woken at its own count; a count beyond the capacity is
    /// met by a full CQ; a timeout returns whether any completion is queued.
    #[test]
    fn wait_for_sleeps_until_enough_completions() {
        let cq = Cq::new(16);
        let (c2, c3) = (cq.clone(), cq.clone());
        let many = std::thread::spawn(move || {
            assert!(c2.wait_for(5, Duration::from_secs(20)));
            c2.len()
        });
        let one = std::thread::spawn(move || {
            assert!(c3.wait_for(1, Duration::from_secs(20)));
            c3.len()
        });
        for i in 0..5 {
            std::thread::sleep(Duration::from_millis(2));
            cq.push(wc(i)).expect("room");
        }
        assert!(
            many.join().expect("waiter") >= 5,
            "woken before 5 were queued"
        );
        assert!(one.join().expect("waiter") >= 1);
        // Five queued: a wait for three returns at once; one for six times out with some.
        let t0 = Instant::now();
        assert!(cq.wait_for(3, Duration::from_secs(20)));
        assert!(t0.elapsed() < Duration::from_secs(10));
        assert!(cq.wait_for(6, Duration::from_millis(5)));
        assert_eq!(cq.len(), 5);
        cq.drain();
        assert!(!cq.wait_for(2, Duration::from_millis(5)));

        let small = Cq::new(2);
        let s2 = small.clone();
        let full = std::thread::spawn(move || {
            assert!(s2.wait_for(100, Duration::from_secs(20)));
            s2.len()
        });
        small.push(wc(0)).expect("room");
        small.push(wc(1)).expect("room");
        let t0 = Instant::now();
        assert_eq!(full.join().expect("waiter"), 2);
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "a full CQ is enough"
        );
    }

    /// Pushes notify only threads that wait and were not yet notified; every wait that
    /// begins after a notification must still be woken by the next push, and `len` (read
    /// without the lock) follows pushes and polls.
    #[test]
    fn repeated_waits_are_each_woken() {
        let cq = Cq::new(64);
        let c2 = cq.clone();
        let rounds = 50u64;
        let waiter = std::thread::spawn(move || {
            let mut got = Vec::new();
            while got.len() < rounds as usize {
                let t0 = Instant::now();
                assert!(c2.wait(Duration::from_secs(10)));
                // A missed notification shows as the wait running into its timeout.
                assert!(
                    t0.elapsed() < Duration::from_secs(5),
                    "a push must wake the waiter"
                );
                while let Some(w) = c2.poll_one() {
                    got.push(w.wr_id);
                }
            }
            got
        });
        for i in 0..rounds {
            // Give the waiter time to block again, then push.
            std::thread::sleep(Duration::from_micros(200));
            cq.push(wc(i)).expect("room");
        }
        let got = waiter.join().expect("waiter");
        assert_eq!(got, (0..rounds).collect::<Vec<_>>());
        assert!(cq.is_empty());
        cq.push(wc(1)).expect("room");
        cq.push(wc(2)).expect("room");
        assert_eq!(cq.len(), 2);
        assert_eq!(cq.drain().len(), 2);
        assert_eq!(cq.len(), 0);
    }

    #[test]
    fn channel_arm_next_and_solicited() {
        let ch = CompletionChannel::new().expect("eventfd");
        let cq = Cq::with_channel(16, &ch);
        // Not armed: no signal.
        cq.push(wc(0)).expect("room");
        assert!(!readable_now(&ch));
        cq.arm(Arm::NextCompletion);
        cq.push(wc(1)).expect("room");
        assert!(readable(&ch));
        assert_eq!(ch.get_events(), vec![cq.id()]);
        assert!(!readable_now(&ch));
        // Armed once only.
        cq.push(wc(2)).expect("room");
        assert!(!readable_now(&ch));
        // Solicited: an unsolicited success does not fire, a solicited one does.
        cq.arm(Arm::Solicited);
        cq.push(wc(3)).expect("room");
        assert!(!readable_now(&ch));
        let mut s = wc(4);
        s.solicited = true;
        cq.push(s).expect("room");
        assert!(readable_now(&ch));
        assert_eq!(ch.get_events(), vec![cq.id()]);
        // Errors fire a solicited arm too.
        cq.arm(Arm::Solicited);
        let mut e = wc(5);
        e.status = WcStatus::Flushed;
        cq.push(e).expect("room");
        assert_eq!(ch.get_events(), vec![cq.id()]);
    }

    fn readable_now(ch: &CompletionChannel) -> bool {
        ch.wait(Duration::ZERO)
    }

    /// `CompletionChannel::wait` sleeps until an armed CQ fires from another thread, and
    /// times out when nothing fires.
    #[test]
    fn channel_wait_wakes_on_a_completion_and_times_out_otherwise() {
        let ch = CompletionChannel::new().expect("eventfd");
        let cq = Cq::with_channel(16, &ch);
        cq.arm(Arm::NextCompletion);
        assert!(!ch.wait(Duration::from_millis(20)));
        let pusher = {
            let cq = cq.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                cq.push(wc(9)).expect("room");
            })
        };
        assert!(ch.wait(Duration::from_secs(10)));
        assert_eq!(ch.get_events(), vec![cq.id()]);
        assert_eq!(cq.poll_one().map(|w| w.wr_id), Some(9));
        pusher.join().expect("pusher");
    }
}
