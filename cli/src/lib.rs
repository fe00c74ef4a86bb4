//! The `softrnic` command-line tool's library: capture reading, TCP reassembly and the iWARP
//! capture decoder behind `softrnic decode`, the `softrnic demo` and the perftest-style
//! benchmark tools.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod capture;
pub mod decode;
pub mod demo;
pub mod mpa_args;
pub mod perf;
pub mod rping;
pub mod sctp_perf;
pub mod sim;
pub mod tcp;
