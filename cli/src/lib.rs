//! The `softrnic` command-line tool's library: capture reading, TCP reassembly and the iWARP
//! capture decoder behind `softrnic decode`.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod capture;
pub mod decode;
pub mod tcp;
