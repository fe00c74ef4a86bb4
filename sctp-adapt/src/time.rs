//! Caller-supplied time.
//!
//! The engine never reads a clock. Every entry point takes `now` as an [`Instant`]: a count
//! of nanoseconds since an epoch the caller picks (process start, simulation start). All
//! arithmetic saturates, so a far-future deadline never wraps into the past. The type is the
//! simulator's ([`netsim::Instant`]), so the engine runs on simulated time as it is; a
//! real-time driver takes `std::time::Instant::now() - start` through [`Instant::from_nanos`].

pub use netsim::Instant;
pub(crate) use netsim::time::duration_nanos as nanos;
