//! Tunables. Defaults are the protocol parameter values of RFC 9260 §16 and RFC 7829 §5.1.

use std::net::SocketAddr;
use std::time::Duration;

/// Per-association protocol parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct AssociationConfig {
    /// RTO.Initial (1 s).
    pub rto_initial: Duration,
    /// RTO.Min (1 s).
    pub rto_min: Duration,
    /// RTO.Max (60 s).
    pub rto_max: Duration,
    /// RTO.Alpha (1/8).
    pub rto_alpha: f64,
    /// RTO.Beta (1/4).
    pub rto_beta: f64,
    /// Clock granularity G used when RTTVAR would be 0 (RFC 9260 §6.3.1 C4).
    pub clock_granularity: Duration,
    /// Max.Init.Retransmits (8).
    pub max_init_retransmits: u32,
    /// Association.Max.Retrans (10).
    pub association_max_retrans: u32,
    /// Path.Max.Retrans (5).
    pub path_max_retrans: u32,
    /// PotentiallyFailed.Max.Retrans of RFC 7829 (PFMR). `Some(0)`, the default, is the
    /// "quick failover" variant: a single timeout moves a path to Potentially Failed. `None`
    /// disables SCTP-PF (plain RFC 9260 failover after Path.Max.Retrans).
    pub pf_max_retrans: Option<u32>,
    /// HB.interval (30 s).
    pub hb_interval: Duration,
    /// Whether idle confirmed paths are probed with heartbeats.
    pub heartbeats: bool,
    /// Valid.Cookie.Life (60 s).
    pub valid_cookie_life: Duration,
    /// How long one secret key signs State Cookies before a fresh one replaces it (RFC 9260
    /// §5.1.3: "changed reasonably frequently"; 10 min). Cookies signed with the key before
    /// the current one still verify, so none made within a lifetime of the change is lost.
    pub cookie_key_lifetime: Duration,
    /// Maximum delay before acknowledging DATA (200 ms; RFC 9260 §6.2 caps it at 500 ms).
    pub sack_delay: Duration,
    /// Acknowledge at least every this many packets carrying DATA (2).
    pub sack_freq: u32,
    /// Max.Burst (4): new-data packets sent in reply to one incoming packet or timeout.
    pub max_burst: u32,
    /// Receive buffer in bytes: the a_rwnd announced in INIT / INIT ACK.
    pub recv_buffer: u32,
    /// Bytes of user data that may wait in the send queue (not yet acknowledged).
    pub send_buffer: usize,
    /// Outbound streams requested (OS).
    pub outbound_streams: u16,
    /// Inbound streams accepted (MIS).
    pub max_inbound_streams: u16,
    /// Path MTU of a new path at the IP level (bytes, including the IP header).
    pub pmtu: usize,
    /// Bytes below SCTP besides the IP header, e.g. 8 for UDP encapsulation (RFC 6951).
    pub encapsulation_overhead: usize,
    /// Adaptation Layer Indication announced in INIT and INIT ACK (RFC 5061 §4.2.7);
    /// `Some(ddp_adapt::ADAPTATION_DDP)` for DDP over SCTP (RFC 5043 §5.1, §11.1).
    pub adaptation_indication: Option<u32>,
    /// Concurrent Multipath Transfer: new data striped over every active path at once
    /// instead of one. `None` (the default) sends new data to one path at a time (RFC 9260
    /// §6.4). With CMT on, `pf_max_retrans` of `Some(_)` gives CMT-PF (paths that time out
    /// stop carrying data until a heartbeat answers) and `None` plain CMT.
    pub cmt: Option<CmtConfig>,
}

/// How Concurrent Multipath Transfer (Iyengar, Amer, Stewart: "Concurrent Multipath Transfer
/// Using SCTP Multihoming Over Independent End-to-End Paths", IEEE/ACM ToN 14(5), 2006;
/// the CMT and CMT-PF algorithms of draft-tuexen-tsvwg-sctp-multipath) runs. Every switch is
/// on by default; each can be turned off to measure what it is worth.
#[derive(Debug, Clone, PartialEq)]
pub struct CmtConfig {
    /// Split Fast Retransmit (SFR): a chunk is reported missing only by SACKs that newly
    /// acknowledge data sent to the same destination after it, so that reordering between
    /// paths of different delays does not trigger spurious fast retransmissions.
    pub split_fast_retransmit: bool,
    /// Congestion window update for CMT (CUCv2): a destination's window grows when the
    /// earliest outstanding chunk sent to it is acknowledged (its pseudo-cumulative ack),
    /// not only when the association's cumulative ack moves; retransmissions count on the
    /// destination they were retransmitted to.
    pub cwnd_update: bool,
    /// Delayed ACK for CMT (DAC): as a receiver, out-of-order arrivals do not force an
    /// immediate SACK (reordering across paths is normal), and a SACK that acknowledges two
    /// or more packets carries the CMT DAC flag (0x80 in the SACK chunk flags, as FreeBSD
    /// and usrsctp set it); as a sender, such a SACK that newly acknowledges data of a single
    /// destination counts two miss indications for chunks below all it acknowledged.
    pub delayed_ack: bool,
    /// Tail loss probe per destination (RFC 8985 §7, TLP, applied to each CMT destination as
    /// split fast retransmit applies fast retransmit): when a path's last packets go
    /// unacknowledged for a probe timeout of 2·SRTT plus the worst-case delayed-ACK time
    /// (`sack_delay`), with no new data to send, the path's last packet is retransmitted at
    /// once instead of waiting for T3-rtx (RTO.Min is 1 s). With CMT a destination carries
    /// only part of the data and, under delayed ACK for CMT, receives fewer miss indications,
    /// so a loss among its last few packets otherwise ends in a timeout. A retransmission
    /// after which nothing can be sent until a SACK arrives (the probe, or a T3-rtx
    /// retransmission with nothing behind it) carries the I bit (RFC 9260 §3.3.1), so that
    /// the receiver does not hold its SACK for the delayed-ACK time with the sender idle.
    pub tail_loss_probe: bool,
    /// Where retransmissions go.
    pub rtx_policy: RtxPolicy,
    /// How new data is spread over the active paths.
    pub scheduler: Scheduler,
}

impl Default for CmtConfig {
    fn default() -> Self {
        CmtConfig {
            split_fast_retransmit: true,
            cwnd_update: true,
            delayed_ack: true,
            tail_loss_probe: true,
            rtx_policy: RtxPolicy::Ssthresh,
            scheduler: Scheduler::Striped,
        }
    }
}

/// Retransmission destination policies of CMT (Iyengar et al. §V). Only active paths are
/// candidates (with CMT-PF, Potentially Failed paths never carry retransmissions); with none
/// active, the path new data would take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RtxPolicy {
    /// RTX-SAME: to the destination of the original transmission while it is active.
    Same,
    /// RTX-ASAP: to any active destination with room in its congestion window, preferring
    /// the original one.
    Asap,
    /// RTX-CWND: to the active destination with the largest congestion window.
    Cwnd,
    /// RTX-SSTHRESH: to the active destination with the largest slow-start threshold (the
    /// one least recently hit by loss). The default, as the authors recommend.
    Ssthresh,
}

/// How CMT chooses the path for new data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheduler {
    /// Bandwidth: each packet of new data goes to the next active path, in turn, that has
    /// room in its congestion window.
    Striped,
    /// Latency: a message of at most `small_message` bytes goes to the active path with the
    /// lowest smoothed RTT that has room (paths not yet measured count as slowest); larger
    /// messages are striped.
    LowestRtt {
        /// Largest message (bytes) sent on the lowest-RTT path.
        small_message: usize,
    },
}

impl Default for AssociationConfig {
    fn default() -> Self {
        AssociationConfig {
            rto_initial: Duration::from_secs(1),
            rto_min: Duration::from_secs(1),
            rto_max: Duration::from_secs(60),
            rto_alpha: 0.125,
            rto_beta: 0.25,
            clock_granularity: Duration::from_millis(1),
            max_init_retransmits: 8,
            association_max_retrans: 10,
            path_max_retrans: 5,
            pf_max_retrans: Some(0),
            hb_interval: Duration::from_secs(30),
            heartbeats: true,
            valid_cookie_life: Duration::from_secs(60),
            cookie_key_lifetime: Duration::from_secs(600),
            sack_delay: Duration::from_millis(200),
            sack_freq: 2,
            max_burst: 4,
            recv_buffer: 1 << 20,
            send_buffer: 4 << 20,
            outbound_streams: 16,
            max_inbound_streams: 16,
            pmtu: 1500,
            encapsulation_overhead: 0,
            adaptation_indication: None,
            cmt: None,
        }
    }
}

/// Endpoint configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct EndpointConfig {
    /// Local SCTP port.
    pub port: u16,
    /// Local addresses (the network-level addresses packets are sent from and received on).
    /// All of them are announced to peers in INIT and INIT ACK.
    pub local_addrs: Vec<SocketAddr>,
    /// Seed for verification tags, initial TSNs, heartbeat nonces and (unless
    /// `cookie_secret` is given) the cookie key, when `entropy` is `None`: reproducible runs
    /// (simulator, tests). 64 bits are not enough to keep them secret: production sets
    /// `entropy`.
    pub seed: u64,
    /// 256 bits from the operating system's generator: when given, the ChaCha20 generator
    /// behind tags, TSNs, nonces and the cookie key is keyed with them and `seed` is unused.
    pub entropy: Option<[u8; 32]>,
    /// Key for signing state cookies; drawn from the generator when `None`.
    pub cookie_secret: Option<[u8; 32]>,
    /// Whether incoming INITs are answered (a listening endpoint).
    pub accept_incoming: bool,
    /// Parameters for every association of this endpoint.
    pub association: AssociationConfig,
}

impl EndpointConfig {
    /// A configuration with default protocol parameters.
    pub fn new(port: u16, local_addrs: Vec<SocketAddr>, seed: u64) -> EndpointConfig {
        EndpointConfig {
            port,
            local_addrs,
            seed,
            entropy: None,
            cookie_secret: None,
            accept_incoming: true,
            association: AssociationConfig::default(),
        }
    }
}
