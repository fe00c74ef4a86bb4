//! The MPA connection options every connecting tool takes (`--mpa-rev`, `--crc`,
//! `--markers`, `--p2p --rtr`, `--ird/--ord`), turned into an [`mpa::Config`].

use clap::{Args, ValueEnum};
use stack::mpa::{self, CrcPolicy, RtrSet, RtrType};

/// RTR message type for `--rtr`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum RtrArg {
    /// Zero-length RDMA Write.
    Write,
    /// Zero-length RDMA Read.
    Read,
    /// Zero-length Send.
    Send,
}

impl From<RtrArg> for RtrType {
    fn from(r: RtrArg) -> RtrType {
        match r {
            RtrArg::Write => RtrType::Write,
            RtrArg::Read => RtrType::Read,
            RtrArg::Send => RtrType::Send,
        }
    }
}

/// MPA options of a connection.
#[derive(Args, Clone, Debug)]
pub struct MpaArgs {
    /// MPA revision (1 or 2).
    #[arg(long = "mpa-rev", default_value_t = 2)]
    pub mpa_rev: u8,
    /// Require MPA CRC32c (C flag set).
    #[arg(long)]
    pub crc: bool,
    /// Ask for MPA markers (M flag set; markers are also sent when the peer asks).
    #[arg(long)]
    pub markers: bool,
    /// RFC 6581 peer-to-peer mode.
    #[arg(long)]
    pub p2p: bool,
    /// RTR message type in peer-to-peer mode.
    #[arg(long, value_enum, requires = "p2p")]
    pub rtr: Option<RtrArg>,
    /// IRD to advertise.
    #[arg(long, default_value_t = 16)]
    pub ird: u16,
    /// ORD to advertise.
    #[arg(long, default_value_t = 16)]
    pub ord: u16,
}

impl MpaArgs {
    /// The MPA configuration these options describe, with `private_data` as the ULP's
    /// private data of our Request or Reply.
    pub fn config(&self, private_data: Vec<u8>) -> mpa::Config {
        let rtr = self.rtr.map(RtrType::from);
        mpa::Config {
            revision: self.mpa_rev,
            crc: if self.crc {
                CrcPolicy::Require
            } else {
                CrcPolicy::Accept
            },
            markers_rx: self.markers,
            markers_tx: true,
            enhanced: self.mpa_rev >= 2,
            ird: self.ird,
            ord: self.ord,
            ird_max: self.ird.max(self.ord),
            relaxed_ird_ord: true,
            p2p: self.p2p,
            rtr_supported: match rtr {
                Some(t) => RtrSet::only(t),
                None => RtrSet::ALL,
            },
            rtr_preferred: rtr,
            private_data,
            ..mpa::Config::default()
        }
    }
}
