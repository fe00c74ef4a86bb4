//! Link model: parameters, impairments and counters of one direction of a link.
//!
//! Each direction of a point-to-point link is a FIFO transmitter followed by a wire:
//!
//! 1. A frame offered by the sending side is counted in [`LinkCounters::sent`]. It is dropped
//!    if the link is down, or if it is longer than [`LinkParams::mtu`] plus the 14-byte
//!    Ethernet header. If the transmitter is busy it waits in the queue; a full queue
//!    ([`QueueLimit`]) drops the new frame (drop-tail). The frame being serialised does not
//!    count against the queue limit.
//! 2. Serialisation takes `len * 8 / bandwidth` seconds (rounded up to whole nanoseconds), one
//!    frame after another. Only the frame's own bytes count (no preamble or inter-frame gap).
//! 3. When a frame has been serialised the impairments are applied, in this order: burst loss
//!    (Gilbert–Elliott), i.i.d. loss, bit corruption, duplication, reordering. Parameters in
//!    force at that moment apply.
//! 4. The frame arrives after the propagation delay plus a uniform jitter in `[0, jitter]`.
//!    Jitter never reorders frames: an arrival is held back to no earlier than the previous
//!    one. Only a frame picked for reordering skips that rule and is delayed by
//!    [`LinkParams::reorder_delay`] on top, so later frames overtake it.
//!
//! When a link goes down, queued frames and frames on the wire are dropped
//! ([`LinkCounters::dropped_down`]).

use std::time::Duration;

use thiserror::Error;

use crate::time::duration_nanos;

/// Length of an Ethernet II header (destination, source, EtherType); frames carry no FCS.
pub const ETHERNET_HEADER_LEN: usize = 14;

/// Identifies a link within one [`Sim`](crate::Sim).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LinkId(pub(crate) usize);

impl LinkId {
    /// The link's index, in the order links were created (starting at 0).
    pub fn index(self) -> usize {
        self.0
    }
}

/// One direction of a link. A link made by `sim.link(a, b, ..)` carries frames from `a` to `b`
/// in [`Dir::AtoB`] and back in [`Dir::BtoA`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Dir {
    /// From the first interface given to [`Sim::link`](crate::Sim::link) to the second.
    AtoB,
    /// From the second interface to the first.
    BtoA,
}

impl Dir {
    /// Both directions, `AtoB` first.
    pub const BOTH: [Dir; 2] = [Dir::AtoB, Dir::BtoA];

    pub(crate) fn index(self) -> usize {
        match self {
            Dir::AtoB => 0,
            Dir::BtoA => 1,
        }
    }
}

/// How much a link direction may hold waiting for the transmitter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueLimit {
    /// At most this many frames wait (0: only the frame being serialised is accepted).
    Packets(usize),
    /// Waiting frames total at most this many bytes.
    Bytes(usize),
    /// No limit.
    Unlimited,
}

/// Gilbert–Elliott burst-loss model: a two-state Markov chain stepped once per frame.
///
/// In the good state a frame is lost with probability `loss_good`, in the bad state with
/// `loss_bad`. Before each frame the chain moves good→bad with probability `p` and bad→good
/// with probability `r`; the time spent in the bad state is geometric with mean `1 / r`
/// frames, the long-run share of frames in the bad state is `p / (p + r)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GilbertElliott {
    /// Probability of moving from the good to the bad state, per frame.
    pub p: f64,
    /// Probability of moving from the bad to the good state, per frame.
    pub r: f64,
    /// Loss probability in the good state (often 0; `1 - k` in the classic notation).
    pub loss_good: f64,
    /// Loss probability in the bad state (often 1; `1 - h` in the classic notation).
    pub loss_bad: f64,
}

impl GilbertElliott {
    /// The simple Gilbert model: nothing lost in the good state, everything in the bad state.
    /// Loss bursts then have mean length `1 / r` and the loss rate is `p / (p + r)`.
    pub fn gilbert(p: f64, r: f64) -> GilbertElliott {
        GilbertElliott {
            p,
            r,
            loss_good: 0.0,
            loss_bad: 1.0,
        }
    }
}

/// Parameters of one direction of a link.
///
/// `Default` is an unimpaired gigabit link: 1 Gbit/s, 50 µs propagation delay, MTU 1500, a
/// queue of 1000 frames. Fields are public; the builder-style methods are shorthand.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkParams {
    /// Bits per second; `None` means frames take no time to serialise.
    pub bandwidth_bps: Option<u64>,
    /// Propagation delay.
    pub delay: Duration,
    /// Extra delay drawn uniformly from `[0, jitter]` per frame (never reorders by itself).
    pub jitter: Duration,
    /// Largest Ethernet payload (IP packet) accepted; longer frames are dropped.
    pub mtu: usize,
    /// Transmit queue limit (drop-tail).
    pub queue_limit: QueueLimit,
    /// Independent per-frame loss probability.
    pub loss: f64,
    /// Burst loss, applied before (and in addition to) `loss`.
    pub gilbert_elliott: Option<GilbertElliott>,
    /// Probability that a frame is delivered twice.
    pub duplicate: f64,
    /// Probability that a frame is held back by `reorder_delay` so later frames overtake it.
    pub reorder: f64,
    /// Extra delay of a reordered frame.
    pub reorder_delay: Duration,
    /// Probability that a frame is corrupted.
    pub corrupt: f64,
    /// How many distinct bits a corrupted frame has flipped, chosen uniformly (at least one;
    /// at most every bit past `corrupt_offset`).
    pub corrupt_bits: u32,
    /// Corruption never touches the first `corrupt_offset` bytes (e.g. 14 keeps the Ethernet
    /// header intact so the frame still reaches its destination). With
    /// [`CorruptScope::PayloadFixChecksums`] the offset counts from the start of the transport
    /// payload instead.
    pub corrupt_offset: usize,
    /// Which bits corruption may flip, and whether checksums are repaired afterwards.
    pub corrupt_scope: CorruptScope,
}

/// What a corrupted frame has flipped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CorruptScope {
    /// Any bit past [`LinkParams::corrupt_offset`]; checksums are left as they are, so the
    /// receiver's IPv4 header checksum or TCP/UDP checksum normally catches the damage.
    #[default]
    Frame,
    /// Only bits of the TCP or UDP payload of an unfragmented IPv4 frame (past
    /// [`LinkParams::corrupt_offset`] bytes of that payload); the IPv4 header checksum and the
    /// TCP/UDP checksum are recomputed afterwards ([`crate::wire::fix_checksums`]), so the
    /// damage passes IP and TCP and reaches the application protocol. Frames of other kinds, and
    /// frames with no payload (pure ACKs), are never corrupted.
    PayloadFixChecksums,
}

impl Default for LinkParams {
    fn default() -> Self {
        LinkParams {
            bandwidth_bps: Some(1_000_000_000),
            delay: Duration::from_micros(50),
            jitter: Duration::ZERO,
            mtu: 1500,
            queue_limit: QueueLimit::Packets(1000),
            loss: 0.0,
            gilbert_elliott: None,
            duplicate: 0.0,
            reorder: 0.0,
            reorder_delay: Duration::ZERO,
            corrupt: 0.0,
            corrupt_bits: 1,
            corrupt_offset: 0,
            corrupt_scope: CorruptScope::Frame,
        }
    }
}

/// A parameter that is out of range.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ParamError {
    /// A probability outside `[0, 1]` or not a number.
    #[error("link parameter `{name}` is {value}, but a probability must be between 0 and 1")]
    Probability {
        /// The field name.
        name: &'static str,
        /// The value given.
        value: f64,
    },
    /// A bandwidth of zero bits per second.
    #[error("link bandwidth must be at least 1 bit/s (use `None` for unlimited)")]
    ZeroBandwidth,
}

impl LinkParams {
    /// No bandwidth limit, no delay, no queue limit, no impairments.
    pub fn ideal() -> LinkParams {
        LinkParams {
            bandwidth_bps: None,
            delay: Duration::ZERO,
            queue_limit: QueueLimit::Unlimited,
            ..LinkParams::default()
        }
    }

    /// Sets the bandwidth in bits per second.
    pub fn bandwidth(mut self, bps: u64) -> Self {
        self.bandwidth_bps = Some(bps);
        self
    }
    /// Sets the propagation delay.
    pub fn delay(mut self, d: Duration) -> Self {
        self.delay = d;
        self
    }
    /// Sets the jitter.
    pub fn jitter(mut self, d: Duration) -> Self {
        self.jitter = d;
        self
    }
    /// Sets the MTU.
    pub fn mtu(mut self, mtu: usize) -> Self {
        self.mtu = mtu;
        self
    }
    /// Sets the queue limit.
    pub fn queue_limit(mut self, limit: QueueLimit) -> Self {
        self.queue_limit = limit;
        self
    }
    /// Sets the i.i.d. loss probability.
    pub fn loss(mut self, p: f64) -> Self {
        self.loss = p;
        self
    }
    /// Sets the Gilbert–Elliott burst-loss model.
    pub fn gilbert_elliott(mut self, ge: GilbertElliott) -> Self {
        self.gilbert_elliott = Some(ge);
        self
    }
    /// Sets the duplication probability.
    pub fn duplicate(mut self, p: f64) -> Self {
        self.duplicate = p;
        self
    }
    /// Sets the reordering probability and the extra delay of a reordered frame.
    pub fn reorder(mut self, p: f64, extra_delay: Duration) -> Self {
        self.reorder = p;
        self.reorder_delay = extra_delay;
        self
    }
    /// Sets the corruption probability.
    pub fn corrupt(mut self, p: f64) -> Self {
        self.corrupt = p;
        self
    }
    /// Sets which bits corruption may flip ([`CorruptScope`]).
    pub fn corrupt_scope(mut self, scope: CorruptScope) -> Self {
        self.corrupt_scope = scope;
        self
    }

    /// Checks that every probability is in `[0, 1]` and the bandwidth is not zero.
    pub fn validate(&self) -> Result<(), ParamError> {
        let mut probs = vec![
            ("loss", self.loss),
            ("duplicate", self.duplicate),
            ("reorder", self.reorder),
            ("corrupt", self.corrupt),
        ];
        if let Some(ge) = &self.gilbert_elliott {
            probs.extend([
                ("gilbert_elliott.p", ge.p),
                ("gilbert_elliott.r", ge.r),
                ("gilbert_elliott.loss_good", ge.loss_good),
                ("gilbert_elliott.loss_bad", ge.loss_bad),
            ]);
        }
        for (name, value) in probs {
            if !(0.0..=1.0).contains(&value) {
                return Err(ParamError::Probability { name, value });
            }
        }
        if self.bandwidth_bps == Some(0) {
            return Err(ParamError::ZeroBandwidth);
        }
        Ok(())
    }

    /// Time to serialise a frame of `len` bytes, rounded up to whole nanoseconds.
    pub fn serialisation_time(&self, len: usize) -> Duration {
        match self.bandwidth_bps {
            None | Some(0) => Duration::ZERO,
            Some(bps) => {
                let bits = (len as u128).saturating_mul(8);
                let nanos = bits.saturating_mul(1_000_000_000).div_ceil(u128::from(bps));
                Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
            }
        }
    }

    /// The largest frame (Ethernet header included) this direction accepts.
    pub fn max_frame_len(&self) -> usize {
        self.mtu.saturating_add(ETHERNET_HEADER_LEN)
    }

    pub(crate) fn jitter_nanos(&self) -> u64 {
        duration_nanos(self.jitter)
    }
}

/// Counters of one link direction. Once the simulation is idle,
/// `sent + duplicated == delivered + dropped_total()`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkCounters {
    /// Frames offered by the sending side.
    pub sent: u64,
    /// Bytes offered by the sending side.
    pub sent_bytes: u64,
    /// Frames handed to the receiving side (duplicates included).
    pub delivered: u64,
    /// Bytes handed to the receiving side.
    pub delivered_bytes: u64,
    /// Frames dropped because they exceeded the MTU.
    pub dropped_mtu: u64,
    /// Frames dropped because the queue was full.
    pub dropped_queue: u64,
    /// Frames dropped by i.i.d. loss.
    pub dropped_loss: u64,
    /// Frames dropped by the Gilbert–Elliott model.
    pub dropped_burst: u64,
    /// Frames dropped because the link was down (on offer, queued or on the wire).
    pub dropped_down: u64,
    /// Extra copies created by duplication.
    pub duplicated: u64,
    /// Frames with flipped bits.
    pub corrupted: u64,
    /// Frames held back so that later frames overtook them.
    pub reordered: u64,
}

impl LinkCounters {
    /// All drops, whatever the cause.
    pub fn dropped_total(&self) -> u64 {
        self.dropped_mtu
            + self.dropped_queue
            + self.dropped_loss
            + self.dropped_burst
            + self.dropped_down
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialisation_time_rounds_up() {
        let p = LinkParams::default().bandwidth(1_000_000_000);
        // 1500 bytes at 1 Gbit/s: 12000 bits = 12 µs exactly.
        assert_eq!(p.serialisation_time(1500), Duration::from_micros(12));
        // 1 byte at 3 bit/s: 8/3 s = 2.666...s, rounded up to the next nanosecond.
        let slow = LinkParams::default().bandwidth(3);
        assert_eq!(
            slow.serialisation_time(1),
            Duration::from_nanos(2_666_666_667)
        );
        assert_eq!(LinkParams::ideal().serialisation_time(9000), Duration::ZERO);
    }

    #[test]
    fn validate_rejects_bad_probabilities() {
        assert!(LinkParams::default().validate().is_ok());
        assert!(matches!(
            LinkParams::default().loss(1.5).validate(),
            Err(ParamError::Probability { name: "loss", .. })
        ));
        assert!(
            LinkParams::default()
                .duplicate(f64::NAN)
                .validate()
                .is_err()
        );
        let ge = GilbertElliott {
            r: -0.1,
            ..GilbertElliott::gilbert(0.1, 0.5)
        };
        assert!(
            LinkParams::default()
                .gilbert_elliott(ge)
                .validate()
                .is_err()
        );
        assert_eq!(
            LinkParams::default().bandwidth(0).validate(),
            Err(ParamError::ZeroBandwidth)
        );
    }
}
