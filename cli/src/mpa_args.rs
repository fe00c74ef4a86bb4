//! The connection options every connecting tool takes: the lower layer (`--transport`,
//! with `--bind`, `--udp-port`, `--sctp-mtu` for SCTP) and the MPA options (`--profile`,
//! `--mpa-rev`, `--crc`, `--markers`, `--p2p --rtr`, `--ird/--ord`), turned into a
//! [`TransportAddr`] and an [`mpa::Config`].
//!
//! `--profile NAME` starts from what that kind of peer expects ([`mpa::Profile`]);
//! every explicit option then overrides the profile's value. Without `--profile` the
//! base is the `rfc` profile. Over SCTP (RFC 5043) only IRD/ORD and the private data
//! apply; the MPA-only options are refused there.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::Duration;

use clap::builder::PossibleValue;
use clap::{Args, ValueEnum};
use stack::addr::{
    DEFAULT_SCTP_MTU, DevAddr, DevKind, Multipath, SCTP_UDP_PORT, SctpAddr, SctpEncap,
    TransportAddr,
};
use stack::mpa::{self, CrcPolicy, Profile, Role, RtrSet, RtrType};

/// `--cmt` values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum CmtArg {
    /// One path at a time, the others for failover.
    #[default]
    Off,
    /// Concurrent Multipath Transfer with CMT-PF.
    #[value(alias = "on")]
    Pf,
    /// Concurrent Multipath Transfer without the Potentially Failed state.
    Nopf,
}

impl CmtArg {
    /// The transport address's multipath mode.
    pub fn multipath(self) -> Multipath {
        match self {
            CmtArg::Off => Multipath::Failover,
            CmtArg::Pf => Multipath::CmtPf,
            CmtArg::Nopf => Multipath::Cmt,
        }
    }
}

/// `--transport` values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum TransportArg {
    /// MPA over the kernel's TCP.
    #[default]
    Tcp,
    /// DDP over softrnic's SCTP with UDP encapsulation (RFC 5043 + RFC 6951; no privileges).
    #[value(name = "sctp+udp", alias = "sctp-udp")]
    SctpUdp,
    /// DDP over softrnic's SCTP on raw IPv4 (protocol 132; root or CAP_NET_RAW, and a host
    /// without kernel SCTP).
    Sctp,
    /// DDP over the kernel's SCTP sockets (RFC 5043; a kernel with SCTP, no privileges).
    Ksctp,
    /// MPA over softrnic's own TCP/IP on a TAP device (kernel bypass; `--device`, and
    /// `--bind` for the stack's own IPv4 address; CAP_NET_ADMIN or a TAP device owned by
    /// the user).
    Tap,
    /// MPA over softrnic's own TCP/IP on an AF_XDP socket on the interface `--device`
    /// (kernel bypass; `--bind` for the stack's address; root; a build with the `xdp`
    /// feature).
    Xdp,
}

/// `--xdp-mode` values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum XdpModeArg {
    /// Generic XDP, copy mode: every interface.
    #[default]
    Skb,
    /// The driver's native XDP (zero-copy where the driver offers it).
    Native,
}

/// `--xdp-take` values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum XdpTakeArg {
    /// The frames of the RNIC's own address; the rest stays with the kernel.
    #[default]
    Addr,
    /// Every frame of the queue.
    All,
}

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

/// `--profile` values: the interop profiles of [`mpa::Profile`], each listed with its
/// one-line summary in `--help`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProfileArg(pub Profile);

impl ValueEnum for ProfileArg {
    fn value_variants<'a>() -> &'a [Self] {
        const ALL: [ProfileArg; 5] = [
            ProfileArg(Profile::ALL[0]),
            ProfileArg(Profile::ALL[1]),
            ProfileArg(Profile::ALL[2]),
            ProfileArg(Profile::ALL[3]),
            ProfileArg(Profile::ALL[4]),
        ];
        &ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        let v = PossibleValue::new(self.0.name()).help(self.0.summary());
        Some(if self.0 == Profile::NetEffect {
            v.alias("nes")
        } else {
            v
        })
    }
}

/// MPA options of a connection.
#[derive(Args, Clone, Debug, Default)]
pub struct MpaArgs {
    /// Interop profile: set MPA revision, CRC, markers, P2P/RTR, IRD/ORD and runtime quirks
    /// to what that peer expects; the options below override single values.
    #[arg(long, value_enum, value_name = "NAME")]
    pub profile: Option<ProfileArg>,
    /// MPA revision (1 or 2) [default: the profile's, 2].
    #[arg(long = "mpa-rev", value_parser = clap::value_parser!(u8).range(1..=2))]
    pub mpa_rev: Option<u8>,
    /// Require MPA CRC32c (C flag set) [default: the profile's; CRC is used when the peer asks].
    #[arg(long)]
    pub crc: bool,
    /// Ask for MPA markers (M flag set; markers are also sent when the peer asks).
    #[arg(long)]
    pub markers: bool,
    /// RFC 6581 peer-to-peer mode (initiator: ask for it; responder: accept it).
    #[arg(long)]
    pub p2p: bool,
    /// The one RTR message type to offer or accept in peer-to-peer mode (implies --p2p)
    /// [default: the profile's, any].
    #[arg(long, value_enum)]
    pub rtr: Option<RtrArg>,
    /// IRD to advertise [default: the profile's, 16].
    #[arg(long)]
    pub ird: Option<u16>,
    /// ORD to advertise [default: the profile's, 16].
    #[arg(long)]
    pub ord: Option<u16>,
    /// Lower layer: `tcp` (MPA over kernel TCP), `sctp+udp` (DDP over softrnic's SCTP,
    /// UDP-encapsulated, no privileges), `sctp` (softrnic's SCTP on raw IPv4, root), `ksctp`
    /// (DDP over the kernel's SCTP sockets, where the kernel has SCTP) or `tap` (MPA over
    /// softrnic's own TCP/IP on the TAP device `--device`, with the address `--bind`). Over
    /// SCTP a client names the server's addresses comma-separated for multihoming.
    #[arg(long, value_enum, default_value_t = TransportArg::Tcp)]
    pub transport: TransportArg,
    /// SCTP: our local addresses, comma-separated (a server listens and a client sends
    /// from them; all are announced to the peer) [default: server 127.0.0.1; client the
    /// address the host routes the server's from].
    ///
    /// TAP: the one IPv4 address softrnic's stack takes on the device (an address of the
    /// device's subnet that the host does not use), with `/PREFIX` in `--prefix`.
    #[arg(long, value_delimiter = ',', value_name = "ADDR[,ADDR]")]
    pub bind: Vec<IpAddr>,
    /// TAP: the device (opened, or created when missing); AF_XDP: the interface; SCTP
    /// (`--transport sctp`): `tap:IFACE` or `xdp:IFACE`, to carry SCTP as raw IPv4 on
    /// softrnic's own IP on that device (`--bind` gives the stack's addresses).
    #[arg(long, value_name = "IFACE")]
    pub device: Option<String>,
    /// AF_XDP: the interface queue to bind.
    #[arg(long = "xdp-queue", default_value_t = 0)]
    pub xdp_queue: u32,
    /// AF_XDP: generic XDP in copy mode (`skb`) or the driver's native XDP.
    #[arg(long = "xdp-mode", value_enum, default_value_t = XdpModeArg::Skb)]
    pub xdp_mode: XdpModeArg,
    /// AF_XDP: which frames softrnic's XDP program hands to the RNIC: those of `--bind`'s
    /// address (ARP and IPv4; the host keeps the rest of the interface) or every frame of
    /// the queue.
    #[arg(long = "xdp-take", value_enum, default_value_t = XdpTakeArg::Addr)]
    pub xdp_take: XdpTakeArg,
    /// TAP and AF_XDP: the prefix length of `--bind`'s subnet.
    #[arg(long, default_value_t = stack::addr::DEFAULT_DEV_PREFIX,
          value_parser = clap::value_parser!(u8).range(1..=32))]
    pub prefix: u8,
    /// SCTP over UDP: the UDP encapsulation port (a server's own, a client's peer's).
    #[arg(long = "udp-port", default_value_t = SCTP_UDP_PORT)]
    pub udp_port: u16,
    /// SCTP: the path MTU DDP segments are sized to (RFC 5043 §9), 576-65535.
    #[arg(long = "sctp-mtu", default_value_t = DEFAULT_SCTP_MTU as u16,
          value_parser = clap::value_parser!(u16).range(576..))]
    pub sctp_mtu: u16,
    /// SCTP with several addresses: stripe new data over every active path (Concurrent
    /// Multipath Transfer). `--cmt` alone or `--cmt pf`: with CMT-PF (a path that times out
    /// carries nothing until a heartbeat answers); `--cmt nopf`: without it; `off` (the
    /// default): one path at a time, the others for failover.
    #[arg(long, value_enum, value_name = "MODE", num_args = 0..=1,
          default_value = "off", default_missing_value = "pf")]
    pub cmt: CmtArg,
}

impl MpaArgs {
    /// The chosen profile (`rfc` when none was given).
    pub fn profile(&self) -> Profile {
        self.profile.map_or(Profile::Rfc, |p| p.0)
    }

    /// The MPA configuration for our `role`: the profile's settings with every explicit
    /// option applied on top, and `private_data` as the ULP's private data of our
    /// Request or Reply.
    pub fn config_for(&self, role: Role, private_data: Vec<u8>) -> mpa::Config {
        let mut c = self.profile().config(role);
        if let Some(rev) = self.mpa_rev {
            c.revision = rev;
            c.enhanced = rev >= 2;
        }
        if self.crc && !c.crc.sends_c() {
            c.crc = CrcPolicy::Require;
        }
        if self.markers {
            c.markers_rx = true;
            c.markers_tx = true;
        }
        if self.p2p || self.rtr.is_some() {
            c.p2p = true;
        }
        if let Some(t) = self.rtr.map(RtrType::from) {
            c.rtr_supported = RtrSet::only(t);
            c.rtr_preferred = Some(t);
        }
        if self.ird.is_some() || self.ord.is_some() {
            c.ird = self.ird.unwrap_or(c.ird);
            c.ord = self.ord.unwrap_or(c.ord);
            c.ird_max = c.ird.max(c.ord);
        }
        c.private_data = private_data;
        c
    }

    /// The configuration as [`MpaArgs::config_for`] the initiator. Tools that also
    /// accept connections should call `config_for(Role::Responder, ..)` there: some
    /// profiles differ by role (a `siw` responder accepts P2P, its initiator does not).
    pub fn config(&self, private_data: Vec<u8>) -> mpa::Config {
        self.config_for(Role::Initiator, private_data)
    }

    /// The profile's runtime quirk for initiators: how long to hold the first FPDU
    /// after the MPA Reply (`stack::QpAttr::first_fpdu_delay`).
    pub fn first_fpdu_delay(&self) -> Duration {
        self.profile().quirks().first_fpdu_delay
    }

    /// Whether the connection runs over SCTP.
    pub fn sctp(&self) -> bool {
        matches!(
            self.transport,
            TransportArg::SctpUdp | TransportArg::Sctp | TransportArg::Ksctp
        )
    }

    /// Whether the connection runs on a raw-Ethernet device with softrnic's TCP/IP.
    pub fn device(&self) -> bool {
        matches!(self.transport, TransportArg::Tap | TransportArg::Xdp)
    }

    /// Refuses MPA-only options over SCTP (they would be silently meaningless), and
    /// device options without a device.
    pub fn check(&self) -> Result<(), String> {
        for (flag, v) in [("--ird", self.ird), ("--ord", self.ord)] {
            if let Some(v) = v.filter(|&v| v > stack::mpa::frame::IRD_ORD_MAX) {
                return Err(format!(
                    "{flag} {v}: IRD and ORD must be 0 .. {} (14-bit fields, RFC 6581)",
                    stack::mpa::frame::IRD_ORD_MAX
                ));
            }
        }
        if self.device() {
            let t = self.transport_name();
            if self.device.is_none() {
                return Err(format!(
                    "--transport {t} needs --device IFACE (the TAP device or the AF_XDP interface)"
                ));
            }
            return match self.bind.as_slice() {
                [IpAddr::V4(_)] => Ok(()),
                _ => Err(format!(
                    "--transport {t} needs --bind with the one IPv4 address softrnic's stack \
                     takes on the device (one the host does not use)"
                )),
            };
        }
        if let Some(d) = &self.device {
            if self.transport != TransportArg::Sctp {
                return Err("--device applies to --transport tap|xdp|sctp only".into());
            }
            if self.sctp_device().is_none() {
                return Err(format!(
                    "--device {d:?}: over --transport sctp it is tap:IFACE or xdp:IFACE (SCTP as \
                     raw IPv4 on softrnic's own IP on that device)"
                ));
            }
        }
        if !self.sctp() {
            if self.cmt != CmtArg::Off {
                return Err(
                    "--cmt applies to --transport sctp+udp|sctp only (multipath is SCTP's)".into(),
                );
            }
            if !self.bind.is_empty() {
                return Err(
                    "--bind applies to --transport sctp+udp|sctp|ksctp|tap|xdp only".into(),
                );
            }
            return Ok(());
        }
        if self.transport == TransportArg::Ksctp && self.cmt != CmtArg::Off {
            return Err(
                "--cmt applies to softrnic's SCTP (--transport sctp+udp|sctp); the kernel's SCTP \
                 uses its paths its own way"
                    .into(),
            );
        }
        let mpa_only = [
            (self.profile.is_some(), "--profile"),
            (self.mpa_rev.is_some(), "--mpa-rev"),
            (self.crc, "--crc (SCTP has its own CRC32c)"),
            (self.markers, "--markers"),
            (self.p2p || self.rtr.is_some(), "--p2p/--rtr"),
        ];
        match mpa_only.iter().find(|(given, _)| *given) {
            Some((_, name)) => Err(format!(
                "{name} is an MPA option and does not apply to --transport {}",
                self.transport_name()
            )),
            None => Ok(()),
        }
    }

    /// The device address: the listener's own (`peer` None) or the peer's with `--bind` as
    /// the local address.
    fn dev_addr(&self, peer: Option<Ipv4Addr>, port: u16) -> Option<TransportAddr> {
        let (Some(dev), [IpAddr::V4(own)]) = (&self.device, self.bind.as_slice()) else {
            return None;
        };
        if !self.device() {
            return None;
        }
        Some(TransportAddr::Dev(DevAddr {
            kind: if self.transport == TransportArg::Xdp {
                DevKind::Xdp
            } else {
                DevKind::Tap
            },
            device: dev.clone(),
            addr: SocketAddrV4::new(peer.unwrap_or(*own), port),
            local: peer.map(|_| *own),
            prefix: self.prefix,
            gateway: None,
            mtu: None,
            mac: None,
            queue: self.xdp_queue,
            native: self.xdp_mode == XdpModeArg::Native,
            take_all: self.xdp_take == XdpTakeArg::All,
        }))
    }

    /// `--transport`'s value as the user wrote it.
    fn transport_name(&self) -> String {
        self.transport
            .to_possible_value()
            .map_or_else(String::new, |v| v.get_name().to_string())
    }

    /// `--device` for SCTP: the device kind and name.
    fn sctp_device(&self) -> Option<(DevKind, String)> {
        let d = self.device.as_deref()?;
        match d.split_once(':') {
            Some(("tap", n)) if !n.is_empty() => Some((DevKind::Tap, n.to_string())),
            Some(("xdp", n)) if !n.is_empty() => Some((DevKind::Xdp, n.to_string())),
            _ => None,
        }
    }

    fn sctp_addr(&self, addrs: Vec<IpAddr>, port: u16, encap_port: u16) -> SctpAddr {
        SctpAddr {
            addrs,
            port,
            encap: match self.transport {
                TransportArg::Sctp => SctpEncap::RawIpv4,
                TransportArg::Ksctp => SctpEncap::Kernel,
                _ => SctpEncap::Udp(encap_port),
            },
            local: Vec::new(),
            mtu: usize::from(self.sctp_mtu),
            device: if self.transport == TransportArg::Sctp {
                self.sctp_device()
            } else {
                None
            },
            multipath: self.cmt.multipath(),
        }
    }

    /// Where a server listens on `port`: TCP on every address, or SCTP on `--bind`'s
    /// addresses (127.0.0.1 without it).
    pub fn listen_addr(&self, port: u16) -> TransportAddr {
        if let Some(d) = self.dev_addr(None, port) {
            return d;
        }
        if !self.sctp() {
            return SocketAddr::from(([0, 0, 0, 0], port)).into();
        }
        let addrs = if self.bind.is_empty() {
            vec![IpAddr::from([127, 0, 0, 1])]
        } else {
            self.bind.clone()
        };
        TransportAddr::Sctp(self.sctp_addr(addrs, port, self.udp_port))
    }

    /// Where a client connects: `host` at `port` over TCP (`tcp` resolves it), or over
    /// SCTP to the comma-separated addresses in `host`.
    pub fn connect_addr(
        &self,
        host: &str,
        port: u16,
        tcp: impl FnOnce(&str, u16) -> Result<SocketAddr, String>,
    ) -> Result<TransportAddr, String> {
        if self.device() {
            let t = self.transport_name();
            let peer: Ipv4Addr = host.trim().parse().map_err(|_| {
                format!("{host:?}: over --transport {t} the server is named by IPv4 address")
            })?;
            return self
                .dev_addr(Some(peer), port)
                .ok_or_else(|| format!("--transport {t} needs --device and --bind"));
        }
        if !self.sctp() {
            return tcp(host, port).map(TransportAddr::from);
        }
        let mut addrs = Vec::new();
        for h in host.split(',') {
            let h = h.trim().trim_start_matches('[').trim_end_matches(']');
            addrs.push(h.parse::<IpAddr>().map_err(|_| {
                format!(
                    "{h:?}: SCTP servers are named by IP address (comma-separated for multihoming)"
                )
            })?);
        }
        let mut a = self.sctp_addr(addrs, port, self.udp_port);
        a.local = self.bind.clone();
        Ok(TransportAddr::Sctp(a))
    }

    /// Whether the user gave `--ird` or `--ord` (tools with their own IRD/ORD defaults,
    /// like rping's 1/1, apply those only when not).
    pub fn ird_ord_given(&self) -> bool {
        self.ird.is_some() || self.ord.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        mpa: MpaArgs,
    }

    fn parse(args: &[&str]) -> MpaArgs {
        let mut argv = vec!["t"];
        argv.extend_from_slice(args);
        Cli::try_parse_from(argv).expect("valid options").mpa
    }

    /// Without options the tools keep their pre-profile behaviour (the `rfc` profile):
    /// RFC 5044 §7.1.1 revision 2, C = 0, M = 0; RFC 6581 IRD = ORD = 16, no P2P.
    #[test]
    fn no_options_is_rfc_profile() {
        let a = parse(&[]);
        assert_eq!(a.profile(), Profile::Rfc);
        for role in [Role::Initiator, Role::Responder] {
            assert_eq!(
                a.config_for(role, vec![1, 2]),
                mpa::Config {
                    private_data: vec![1, 2],
                    ..Profile::Rfc.config(role)
                }
            );
        }
        let c = a.config(Vec::new());
        assert_eq!(
            (c.revision, c.crc, c.ird, c.ord, c.p2p),
            (2, CrcPolicy::Accept, 16, 16, false)
        );
        assert!(a.first_fpdu_delay().is_zero());
        assert!(!a.ird_ord_given());
    }

    /// `--cmt` reaches the SCTP transport address (bare `--cmt` is CMT-PF) and is refused
    /// for TCP, which has one path.
    #[test]
    fn cmt_is_sctp_only() {
        let a = parse(&["--transport", "sctp+udp", "--cmt"]);
        a.check().unwrap();
        let TransportAddr::Sctp(s) = a.listen_addr(7174) else {
            panic!("not SCTP")
        };
        assert_eq!(s.multipath, Multipath::CmtPf);
        let n = parse(&["--transport", "sctp+udp", "--cmt", "nopf"]);
        let TransportAddr::Sctp(s) = n.listen_addr(7174) else {
            panic!("not SCTP")
        };
        assert_eq!(s.multipath, Multipath::Cmt);
        let e = parse(&["--cmt"]).check().unwrap_err();
        assert!(e.contains("--cmt applies to"), "{e}");
        assert!(parse(&[]).check().is_ok());
    }

    /// `--transport ksctp` names the kernel's SCTP with the same `--bind` and address
    /// syntax as softrnic's SCTP (multihomed: comma-separated addresses), and refuses the
    /// options that belong to softrnic's SCTP or to MPA.
    #[test]
    fn ksctp_transport_addresses() {
        let a = parse(&["--transport", "ksctp", "--bind", "10.99.0.2,10.99.1.2"]);
        a.check().unwrap();
        let l = a.listen_addr(7174);
        assert_eq!(l.to_string(), "ksctp://10.99.0.2,10.99.1.2:7174");
        let c = a
            .connect_addr("10.99.0.1,10.99.1.1", 7174, |_, _| unreachable!())
            .unwrap();
        assert_eq!(
            c.to_string(),
            "ksctp://10.99.0.1,10.99.1.1:7174?bind=10.99.0.2,10.99.1.2"
        );
        let e = parse(&["--transport", "ksctp", "--cmt"])
            .check()
            .unwrap_err();
        assert!(e.contains("kernel's SCTP"), "{e}");
        let e = parse(&["--transport", "ksctp", "--crc"])
            .check()
            .unwrap_err();
        assert!(e.contains("--transport ksctp"), "{e}");
    }

    /// `--profile` alone gives exactly the profile's settings for each role, and its
    /// runtime quirk (siw: first FPDU held, siw 6.1 accept race).
    #[test]
    fn profile_alone() {
        for p in Profile::ALL {
            let a = parse(&["--profile", p.name()]);
            for role in [Role::Initiator, Role::Responder] {
                assert_eq!(a.config_for(role, Vec::new()), p.config(role), "{p} {role}");
            }
            assert_eq!(a.first_fpdu_delay(), p.quirks().first_fpdu_delay);
        }
        assert_eq!(parse(&["--profile", "nes"]).profile(), Profile::NetEffect);
        assert!(
            parse(&["--profile", "siw"])
                .config_for(Role::Responder, Vec::new())
                .p2p
        );
        assert!(!parse(&["--profile", "siw"]).config(Vec::new()).p2p);
    }

    /// Explicit options override single values of the profile (RFC 5044 §7.1.1 Rev/C/M,
    /// RFC 6581 P2P/RTR and IRD/ORD) and leave the rest as the profile has it.
    #[test]
    fn explicit_options_override_profile() {
        // t404 is revision 1 with strict CRC; --mpa-rev 2 brings enhanced data back,
        // --crc does not weaken strict CRC to plain Require.
        let a = parse(&["--profile", "t404", "--mpa-rev", "2", "--crc"]);
        let c = a.config(Vec::new());
        assert_eq!((c.revision, c.enhanced), (2, true));
        assert_eq!(c.crc, CrcPolicy::RequireStrict);
        assert_eq!(c.rtr_supported, RtrSet::only(RtrType::Read));

        // chelsio: P2P with Read RTR; --rtr write replaces the RTR, keeps CRC and IRD/ORD.
        let c = parse(&["--profile", "chelsio", "--rtr", "write"]).config(Vec::new());
        assert!(c.p2p);
        assert_eq!(c.rtr_supported, RtrSet::only(RtrType::Write));
        assert_eq!(c.rtr_preferred, Some(RtrType::Write));
        assert_eq!((c.crc, c.ird, c.ord), (CrcPolicy::Require, 32, 32));

        // siw: --ird/--ord override (the other keeps the profile's), --markers asks for
        // and allows markers, --crc requires CRC.
        let a = parse(&["--profile", "siw", "--ord", "4", "--markers", "--crc"]);
        assert!(a.ird_ord_given());
        let c = a.config_for(Role::Responder, Vec::new());
        assert_eq!((c.ird, c.ord, c.ird_max), (16, 4, 16));
        assert!(c.markers_rx && c.markers_tx);
        assert_eq!(c.crc, CrcPolicy::Require);
        assert!(c.p2p);
        assert_eq!(a.first_fpdu_delay(), Profile::Siw.quirks().first_fpdu_delay);

        // --p2p on a siw initiator offers siw's own RTR set (Write and Read, no Send).
        let c = parse(&["--profile", "siw", "--p2p"]).config(Vec::new());
        assert!(c.p2p);
        assert_eq!(
            c.rtr_supported,
            RtrSet {
                send: false,
                write: true,
                read: true
            }
        );
        // Without a profile, --p2p offers every RTR type and --rtr implies --p2p.
        let c = parse(&["--p2p"]).config(Vec::new());
        assert_eq!(
            (c.p2p, c.rtr_supported, c.rtr_preferred),
            (true, RtrSet::ALL, None)
        );
        let c = parse(&["--rtr", "send"]).config(Vec::new());
        assert!(c.p2p);
        assert_eq!(c.rtr_supported, RtrSet::only(RtrType::Send));
        // --mpa-rev 1 on the default profile drops enhanced data.
        let c = parse(&["--mpa-rev", "1"]).config(Vec::new());
        assert_eq!((c.revision, c.enhanced), (1, false));
        assert_eq!(c.validate(), Ok(()));
    }

    /// Bad values are refused by the parser with a message naming the choices.
    #[test]
    fn bad_values_rejected() {
        let err = Cli::try_parse_from(["t", "--profile", "cxgb3"])
            .err()
            .expect("unknown profile")
            .to_string();
        assert!(
            err.contains("chelsio") && err.contains("neteffect"),
            "{err}"
        );
        assert!(Cli::try_parse_from(["t", "--mpa-rev", "3"]).is_err());
    }
}
