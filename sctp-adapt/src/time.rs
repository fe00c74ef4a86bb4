//! Caller-supplied time.
//!
//! The engine never reads a clock. Every entry point takes `now` as an [`Instant`]: a count
//! of nanoseconds since an epoch the caller picks (process start, simulation start). All
//! arithmetic saturates, so a far-future deadline never wraps into the past. A simulator with
//! its own nanosecond clock converts with [`Instant::from_nanos`]; a real-time driver takes
//! `std::time::Instant::now() - start`.

use core::ops::{Add, AddAssign, Sub};
use std::time::Duration;

/// A point in time: nanoseconds since the caller's epoch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(u64);

impl Instant {
    /// The epoch.
    pub const ZERO: Instant = Instant(0);
    /// The latest representable instant.
    pub const MAX: Instant = Instant(u64::MAX);

    /// `nanos` nanoseconds after the epoch.
    pub const fn from_nanos(nanos: u64) -> Instant {
        Instant(nanos)
    }

    /// `millis` milliseconds after the epoch (saturating).
    pub const fn from_millis(millis: u64) -> Instant {
        Instant(millis.saturating_mul(1_000_000))
    }

    /// `secs` seconds after the epoch (saturating).
    pub const fn from_secs(secs: u64) -> Instant {
        Instant(secs.saturating_mul(1_000_000_000))
    }

    /// Nanoseconds since the epoch.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// Time from `earlier` to `self`, zero if `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

/// Nanoseconds in `d`, clamped to `u64::MAX`.
pub(crate) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(nanos(d)))
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    fn sub(self, rhs: Instant) -> Duration {
        self.saturating_duration_since(rhs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates() {
        assert_eq!(Instant::MAX + Duration::from_secs(1), Instant::MAX);
        assert_eq!(Instant::ZERO - Instant::from_secs(1), Duration::ZERO);
        assert_eq!(
            Instant::from_secs(2) - Instant::from_millis(500),
            Duration::from_millis(1500)
        );
    }
}
