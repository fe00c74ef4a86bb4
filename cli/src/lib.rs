//! The `softrnic` command-line tool's library: `softrnic demo`, the perftest-style benchmark
//! tools, rping, sctp-perf and sim. The capture decoder behind `softrnic decode` is the
//! `decode` crate (re-exported here as `decode`, `capture` and `tcp`).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub use decode::{self, capture, tcp};
pub mod demo;
pub mod mpa_args;
pub mod perf;
pub mod rping;
pub mod sctp_perf;
pub mod sim;
