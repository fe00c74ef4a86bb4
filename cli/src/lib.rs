//! The `softrnic` command-line tool's library: `softrnic demo`, the perftest-style benchmark
//! tools, rping, sctp-perf, sim and the `conform` command (over the `conform` crate). The capture decoder behind `softrnic decode` is the
//! `decode` crate (re-exported here as `decode`, `capture` and `tcp`).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub use decode::{self, capture, tcp};
pub mod conform;
pub mod demo;
pub mod mpa_args;
pub mod perf;
pub mod rping;
pub mod sctp_perf;
pub mod sim;
