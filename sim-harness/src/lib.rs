//! # softrnic-sim-harness — the RNIC in the deterministic network simulator
//!
//! Scenario runners that put the RNIC's sans-IO QP engine on simulated hosts in
//! [`netsim`], in virtual time: one seed reproduces a run exactly. Shared by the `softrnic
//! sim` command, the tests and the experiments.
//!
//! * [`mpa`] — RDMA over MPA/TCP (smoltcp) between two hosts on one link: loss, corruption
//!   (caught by the MPA CRC or by TCP's checksum), link flaps, Gilbert-Elliott bursts.
//! * [`sctp`] — RDMA over DDP over SCTP (RFC 5043) between two multihomed hosts: links with
//!   loss, reordering and duplication, and path outages on a schedule.

#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod mpa;
pub mod sctp;
