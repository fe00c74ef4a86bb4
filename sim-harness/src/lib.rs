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
//! * [`experiments`] — multipath experiments over RDMA over SCTP: throughput through path
//!   failures with multihoming, CMT and CMT-PF, and throughput per message size over one
//!   and two paths.
//! * [`plot`] — line charts as PNG files for the experiments' figures.

#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod experiments;
pub mod mpa;
pub mod plot;
pub mod sctp;
