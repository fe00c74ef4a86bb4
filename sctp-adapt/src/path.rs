//! Per-destination state: reachability, congestion control and RTO (RFC 9260 §6.3, §7.2,
//! §8.2; RFC 7829).

use std::net::SocketAddr;
use std::time::Duration;

use crate::config::AssociationConfig;
use crate::time::Instant;

/// Reachability of one destination address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathState {
    /// Named by the peer but not yet confirmed by a heartbeat (RFC 9260 §5.4); no DATA is
    /// sent to it.
    Unconfirmed,
    /// Reachable.
    Active,
    /// Potentially Failed (RFC 7829): at least one timeout beyond PFMR; probed with
    /// heartbeats every RTO and avoided for data while an active path exists.
    PotentiallyFailed,
    /// Failed: more than Path.Max.Retrans consecutive timeouts (RFC 9260 §8.2).
    Inactive,
}

/// A snapshot of one path for monitoring.
#[derive(Debug, Clone, PartialEq)]
pub struct PathStats {
    /// Peer address.
    pub remote: SocketAddr,
    /// Local address packets to it are sent from.
    pub local: SocketAddr,
    /// Reachability.
    pub state: PathState,
    /// Whether this is the configured primary path.
    pub primary: bool,
    /// Whether new data currently goes to this path.
    pub data_path: bool,
    /// Congestion window (bytes).
    pub cwnd: usize,
    /// Slow-start threshold (bytes).
    pub ssthresh: usize,
    /// Bytes of DATA outstanding on this path.
    pub flight: usize,
    /// Smoothed RTT, once measured.
    pub srtt: Option<Duration>,
    /// Current retransmission timeout.
    pub rto: Duration,
    /// Consecutive unacknowledged timeouts (the path error counter).
    pub error_count: u32,
    /// Path MTU (IP level).
    pub pmtu: usize,
    /// Packets sent.
    pub packets_sent: u64,
    /// Bytes sent (SCTP packets).
    pub bytes_sent: u64,
    /// Packets received from this address.
    pub packets_received: u64,
    /// DATA chunks sent for the first time.
    pub data_chunks_sent: u64,
    /// DATA chunks retransmitted to this path.
    pub chunks_retransmitted: u64,
    /// User bytes retransmitted to this path.
    pub bytes_retransmitted: u64,
    /// Retransmission timeouts on this path.
    pub timeouts: u64,
    /// Fast retransmissions charged to this path.
    pub fast_retransmits: u64,
    /// Tail loss probes sent from this path's tail (CMT).
    pub tail_loss_probes: u64,
    /// Heartbeats sent.
    pub heartbeats_sent: u64,
}

#[derive(Debug, Clone)]
pub(crate) struct HbPending {
    pub nonce: u64,
    pub deadline: Instant,
}

#[derive(Debug, Clone)]
pub(crate) struct Path {
    pub remote: SocketAddr,
    pub local: SocketAddr,
    pub state: PathState,
    pub errors: u32,
    pub pmtu: usize,
    pub cwnd: usize,
    pub ssthresh: usize,
    pub pba: usize,
    pub flight: usize,
    pub srtt: Option<f64>,
    pub rttvar: f64,
    pub rto: Duration,
    pub t3: Option<Instant>,
    /// When the last RTT-eligible packet (new DATA, heartbeat) went to this path.
    pub last_active: Instant,
    pub hb_jitter: i64,
    pub hb_pending: Option<HbPending>,
    /// Send a heartbeat at the next opportunity (path entered PF, or a new unconfirmed path).
    pub hb_now: bool,
    pub rtt_probe: Option<(u64, Instant)>,
    /// When the error counter was last incremented.
    pub last_error: Option<Instant>,
    /// With CMT, fast recovery is per destination: the highest TSN outstanding to this
    /// path when it entered fast recovery, which ends once all of those are acknowledged.
    pub recovery_exit: Option<u64>,
    /// With CMT's tail loss probe: when the probe timeout (PTO) of this path expires.
    pub pto: Option<Instant>,
    /// The highest TSN a tail loss probe retransmitted from this path, until acknowledged.
    pub tlp_tsn: Option<u64>,
    /// The probe's TSN was acknowledged by a SACK sent for another path's probe: whether
    /// this one repaired a loss is decided by the next SACK.
    pub tlp_undecided: bool,
    pub stats: PathStats,
}

impl Path {
    pub fn new(
        remote: SocketAddr,
        local: SocketAddr,
        confirmed: bool,
        cfg: &AssociationConfig,
        now: Instant,
    ) -> Path {
        let pmtu = cfg.pmtu;
        let mut p = Path {
            remote,
            local,
            state: if confirmed {
                PathState::Active
            } else {
                PathState::Unconfirmed
            },
            errors: 0,
            pmtu,
            cwnd: 0,
            ssthresh: usize::MAX / 2,
            pba: 0,
            flight: 0,
            srtt: None,
            rttvar: 0.0,
            rto: cfg.rto_initial,
            t3: None,
            last_active: now,
            hb_jitter: 0,
            hb_pending: None,
            hb_now: !confirmed,
            rtt_probe: None,
            last_error: None,
            recovery_exit: None,
            pto: None,
            tlp_tsn: None,
            tlp_undecided: false,
            stats: PathStats {
                remote,
                local,
                state: PathState::Active,
                primary: false,
                data_path: false,
                cwnd: 0,
                ssthresh: 0,
                flight: 0,
                srtt: None,
                rto: cfg.rto_initial,
                error_count: 0,
                pmtu,
                packets_sent: 0,
                bytes_sent: 0,
                packets_received: 0,
                data_chunks_sent: 0,
                chunks_retransmitted: 0,
                bytes_retransmitted: 0,
                timeouts: 0,
                fast_retransmits: 0,
                tail_loss_probes: 0,
                heartbeats_sent: 0,
            },
        };
        p.cwnd = p.initial_cwnd();
        p.ssthresh = usize::try_from(u32::MAX).unwrap_or(usize::MAX);
        p
    }

    /// Largest SCTP packet on this path: PMTU less the IP header and any encapsulation.
    pub fn mtu(&self, cfg: &AssociationConfig) -> usize {
        let ip = if self.remote.is_ipv4() { 20 } else { 40 };
        self.pmtu
            .saturating_sub(ip + cfg.encapsulation_overhead)
            .max(crate::wire::COMMON_HEADER_LEN + crate::wire::DATA_HEADER_LEN + 4)
    }

    /// RFC 9260 §7.2.1: initial cwnd = min(4 * MTU, max(2 * MTU, 4404)).
    pub fn initial_cwnd(&self) -> usize {
        let mtu = self.pmtu;
        (4 * mtu).min((2 * mtu).max(4404))
    }

    /// Usable for data (not unconfirmed).
    pub fn confirmed(&self) -> bool {
        self.state != PathState::Unconfirmed
    }

    /// RFC 9260 §6.3.1: a new RTT measurement.
    pub fn rtt_sample(&mut self, r: Duration, cfg: &AssociationConfig) {
        let r = r.as_nanos() as f64;
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = r / 2.0;
            }
            Some(s) => {
                self.rttvar = (1.0 - cfg.rto_beta) * self.rttvar + cfg.rto_beta * (s - r).abs();
                self.srtt = Some((1.0 - cfg.rto_alpha) * s + cfg.rto_alpha * r);
            }
        }
        let g = cfg.clock_granularity.as_nanos() as f64;
        if self.rttvar < g {
            // C4: RTTVAR of 0 is replaced by the clock granularity.
            self.rttvar = self.rttvar.max(g);
        }
        let rto = self.srtt.unwrap_or(r) + 4.0 * self.rttvar;
        // RTO.Max wins over RTO.Min should a configuration set them the wrong way round
        // (`Duration::clamp` would panic).
        self.rto = Duration::from_nanos(rto.clamp(0.0, 1.0e18) as u64)
            .max(cfg.rto_min)
            .min(cfg.rto_max);
    }

    /// RFC 9260 §6.3.3 E2: double the RTO, up to RTO.Max.
    pub fn backoff(&mut self, cfg: &AssociationConfig) {
        self.rto = (self.rto * 2).min(cfg.rto_max);
    }

    /// When the next idle heartbeat is due (RFC 9260 §8.3: RTO + HB.interval, jittered by
    /// ±50 % of the RTO).
    pub fn hb_due(&self, cfg: &AssociationConfig) -> Option<Instant> {
        if self.hb_pending.is_some() {
            return None;
        }
        if self.hb_now {
            return Some(self.last_active);
        }
        match self.state {
            PathState::Unconfirmed | PathState::PotentiallyFailed => {
                Some(self.last_active + self.rto)
            }
            PathState::Active | PathState::Inactive => {
                if !cfg.heartbeats {
                    return None;
                }
                let base = self.last_active + self.rto + cfg.hb_interval;
                Some(if self.hb_jitter >= 0 {
                    base + Duration::from_nanos(self.hb_jitter as u64)
                } else {
                    Instant::from_nanos(
                        base.as_nanos()
                            .saturating_sub(self.hb_jitter.unsigned_abs()),
                    )
                })
            }
        }
    }

    pub fn snapshot(&self, primary: bool, data_path: bool) -> PathStats {
        let mut s = self.stats.clone();
        s.local = self.local;
        s.state = self.state;
        s.primary = primary;
        s.data_path = data_path;
        s.cwnd = self.cwnd;
        s.ssthresh = self.ssthresh;
        s.flight = self.flight;
        s.srtt = self.srtt.map(|n| Duration::from_nanos(n as u64));
        s.rto = self.rto;
        s.error_count = self.errors;
        s.pmtu = self.pmtu;
        s
    }
}

/// The local address to send from towards `remote`: the one sharing the longest address
/// prefix with it (what on-link routing would pick), else the first of the same family.
pub(crate) fn choose_local(local_addrs: &[SocketAddr], remote: &SocketAddr) -> SocketAddr {
    fn prefix(a: &SocketAddr, b: &SocketAddr) -> Option<u32> {
        match (a.ip(), b.ip()) {
            (std::net::IpAddr::V4(x), std::net::IpAddr::V4(y)) => {
                Some((u32::from(x) ^ u32::from(y)).leading_zeros())
            }
            (std::net::IpAddr::V6(x), std::net::IpAddr::V6(y)) => {
                Some((u128::from(x) ^ u128::from(y)).leading_zeros())
            }
            _ => None,
        }
    }
    let mut best: Option<(u32, SocketAddr)> = None;
    for a in local_addrs {
        if let Some(p) = prefix(a, remote)
            && best.is_none_or(|(bp, _)| p > bp)
        {
            best = Some((p, *a));
        }
    }
    best.map(|(_, a)| a)
        .or_else(|| local_addrs.first().copied())
        .unwrap_or_else(|| {
            SocketAddr::new(
                if remote.is_ipv4() {
                    std::net::Ipv4Addr::UNSPECIFIED.into()
                } else {
                    std::net::Ipv6Addr::UNSPECIFIED.into()
                },
                0,
            )
        })
}
