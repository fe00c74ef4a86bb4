//! Virtual time.
//!
//! The simulator never reads a wall clock. [`Instant`] is a point on the simulation's own time
//! line, counted in nanoseconds from the start of the run; intervals are plain
//! [`std::time::Duration`]s. All arithmetic saturates, so a far-future deadline can never wrap
//! round into the past.
//!
//! The sans-IO SCTP engine takes its time as this same type (`sctp::Instant`), counted from
//! whatever epoch its driver picks, so an engine inside the simulator runs on simulated time
//! without conversion.

use core::fmt;
use core::ops::{Add, AddAssign, Sub};
use std::time::Duration;

/// A point in virtual time: nanoseconds since the simulation started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(u64);

impl Instant {
    /// The start of every simulation.
    pub const ZERO: Instant = Instant(0);
    /// The last representable instant (about 584 years in).
    pub const MAX: Instant = Instant(u64::MAX);

    /// The instant `nanos` nanoseconds after the start.
    pub const fn from_nanos(nanos: u64) -> Instant {
        Instant(nanos)
    }

    /// The instant `micros` microseconds after the start (saturating).
    pub const fn from_micros(micros: u64) -> Instant {
        Instant(micros.saturating_mul(1_000))
    }

    /// The instant `millis` milliseconds after the start (saturating).
    pub const fn from_millis(millis: u64) -> Instant {
        Instant(millis.saturating_mul(1_000_000))
    }

    /// The instant `secs` seconds after the start (saturating).
    pub const fn from_secs(secs: u64) -> Instant {
        Instant(secs.saturating_mul(1_000_000_000))
    }

    /// The instant `d` after the start (saturating); the inverse of [`Instant::since_start`].
    pub fn from_duration(d: Duration) -> Instant {
        Instant(duration_nanos(d))
    }

    /// Nanoseconds since the start.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// Whole microseconds since the start (rounded down).
    pub const fn as_micros(self) -> u64 {
        self.0 / 1_000
    }

    /// The time since the start as a [`Duration`].
    pub const fn since_start(self) -> Duration {
        Duration::from_nanos(self.0)
    }

    /// `self + d`, or `None` if that is past [`Instant::MAX`].
    pub fn checked_add(self, d: Duration) -> Option<Instant> {
        let nanos = u64::try_from(d.as_nanos()).ok()?;
        self.0.checked_add(nanos).map(Instant)
    }

    /// `self + d`, clamped to [`Instant::MAX`].
    pub fn saturating_add(self, d: Duration) -> Instant {
        self.checked_add(d).unwrap_or(Instant::MAX)
    }

    /// The time from `earlier` to `self`, or zero if `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    /// Saturating addition.
    fn add(self, d: Duration) -> Instant {
        self.saturating_add(d)
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        *self = self.saturating_add(d);
    }
}

impl Sub<Duration> for Instant {
    type Output = Instant;
    /// Saturating subtraction: never before [`Instant::ZERO`].
    fn sub(self, d: Duration) -> Instant {
        Instant(self.0.saturating_sub(duration_nanos(d)))
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    /// Saturating difference: zero if `rhs` is later than `self`.
    fn sub(self, rhs: Instant) -> Duration {
        self.saturating_duration_since(rhs)
    }
}

impl fmt::Display for Instant {
    /// Seconds with nanosecond precision, e.g. `1.000250000s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}.{:09}s",
            self.0 / 1_000_000_000,
            self.0 % 1_000_000_000
        )
    }
}

/// Nanoseconds in `d`, clamped to `u64::MAX`.
pub fn duration_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subtracting_a_duration_saturates_at_zero() {
        let t = Instant::from_millis(5);
        assert_eq!(t - Duration::from_millis(2), Instant::from_millis(3));
        assert_eq!(t - Duration::from_secs(1), Instant::ZERO);
        assert_eq!(Instant::MAX - Duration::MAX, Instant::ZERO);
    }

    #[test]
    fn arithmetic_saturates() {
        assert_eq!(Instant::MAX + Duration::from_secs(1), Instant::MAX);
        assert_eq!(Instant::ZERO - Instant::from_secs(1), Duration::ZERO);
        assert_eq!(
            Instant::from_secs(2) - Instant::from_millis(500),
            Duration::from_millis(1500)
        );
        assert_eq!(Instant::from_micros(3).as_nanos(), 3_000);
        assert_eq!(Instant::ZERO.checked_add(Duration::MAX), None);
        assert_eq!(Instant::from_duration(Duration::MAX), Instant::MAX);
        assert_eq!(
            Instant::from_duration(Duration::from_micros(7)).since_start(),
            Duration::from_micros(7)
        );
    }

    #[test]
    fn display_has_nanosecond_precision() {
        assert_eq!(
            Instant::from_nanos(1_000_250_001).to_string(),
            "1.000250001s"
        );
    }
}
