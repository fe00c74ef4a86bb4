//! Answering an INIT (RFC 9260 §5.1, §5.2.1, §5.2.2) — shared by the stateless endpoint and by
//! associations that receive an INIT (collisions and restarts).

use std::net::{IpAddr, SocketAddr};

use crate::config::AssociationConfig;
use crate::cookie::{Cookie, MAX_COOKIE_ADDRS};
use crate::time::{Instant, nanos};
use crate::wire::{
    Chunk, CommonHeader, ErrorCause, InitChunk, Param, UnknownAction, build_packet, param_type,
};

/// What to do with a received INIT.
#[derive(Debug)]
pub(crate) enum InitReply {
    /// Silently discard (RFC 9260 §3.3.2: Initiate Tag 0).
    Discard,
    /// Send this packet (an ABORT) and do nothing else.
    Abort(Vec<u8>),
    /// Send this INIT ACK packet.
    InitAck(Vec<u8>),
}

/// Who is answering and with which tags.
pub(crate) struct Responder<'a> {
    pub config: &'a AssociationConfig,
    pub key: &'a [u8; 32],
    pub local_port: u16,
    pub local_addrs: &'a [SocketAddr],
    /// Our Initiate Tag for the INIT ACK.
    pub local_tag: u32,
    /// Our initial TSN.
    pub local_tsn: u32,
    /// Tie-tags (RFC 9260 §5.2.2): zero for a fresh INIT.
    pub tie_tags: (u32, u32),
}

/// Peer transport addresses named by an INIT or INIT ACK: the packet's source first, then the
/// address parameters (with the source's port), without duplicates or unusable addresses.
pub(crate) fn peer_addresses(source: SocketAddr, params: &[Param]) -> Vec<SocketAddr> {
    let mut out = vec![source];
    for p in params {
        let ip = match p {
            Param::Ipv4(a) => IpAddr::V4(*a),
            Param::Ipv6(a) => IpAddr::V6(*a),
            _ => continue,
        };
        if ip.is_unspecified() || ip.is_multicast() {
            continue;
        }
        let a = SocketAddr::new(ip, source.port());
        if !out.contains(&a) && out.len() < MAX_COOKIE_ADDRS {
            out.push(a);
        }
    }
    out
}

/// Applies RFC 9260 §3.2.1 to the parameters of an INIT or INIT ACK: returns the parameters
/// to report (whole TLVs, re-emitted) and whether processing stopped early. Parameters after a
/// stop are not looked at.
pub(crate) fn unrecognized_params(params: &[Param]) -> (Vec<Vec<u8>>, usize) {
    let mut report = Vec::new();
    for (i, p) in params.iter().enumerate() {
        if let Param::Unknown { code, value } = p {
            if *code == param_type::ADAPTATION_LAYER_INDICATION && value.len() == 4 {
                // Understood (RFC 5061 §4.2.7): not reported back.
                continue;
            }
            let action = UnknownAction::for_param(*code);
            if action.reports() {
                let mut tlv = Vec::new();
                p.emit(&mut tlv);
                report.push(tlv);
            }
            if !action.continues() {
                return (report, i + 1);
            }
        }
    }
    (report, params.len())
}

/// Builds the reply to an INIT received on `local` from `remote` (SCTP source port
/// `peer_port`).
pub(crate) fn answer_init(
    now: Instant,
    r: &Responder<'_>,
    local: SocketAddr,
    remote: SocketAddr,
    peer_port: u16,
    init: &InitChunk,
) -> InitReply {
    // RFC 9260 §3.3.2: an Initiate Tag of 0 means the packet is silently discarded.
    if init.initiate_tag == 0 {
        return InitReply::Discard;
    }
    let abort = |causes: Vec<ErrorCause>| {
        InitReply::Abort(build_packet(
            &CommonHeader {
                src_port: r.local_port,
                dst_port: peer_port,
                verification_tag: init.initiate_tag,
            },
            &[Chunk::Abort {
                t_bit: false,
                causes,
            }],
        ))
    };
    // RFC 9260 §3.3.2: OS or MIS of 0: discard, and answer with an ABORT carrying the
    // Initiate Tag as its verification tag.
    if init.outbound_streams == 0 || init.inbound_streams == 0 {
        return abort(vec![ErrorCause::InvalidMandatoryParam]);
    }
    let (report, considered) = unrecognized_params(&init.params);
    let considered = &init.params[..considered];
    // RFC 9260 §3.3.2.1: a Host Name Address is not supported; reply with ABORT and an
    // Unresolvable Address cause.
    if let Some(p) = considered
        .iter()
        .find(|p| matches!(p, Param::HostNameAddress(_)))
    {
        let mut tlv = Vec::new();
        p.emit(&mut tlv);
        return abort(vec![ErrorCause::UnresolvableAddress(tlv)]);
    }
    let supported: Option<&Vec<u16>> = considered.iter().find_map(|p| match p {
        Param::SupportedAddressTypes(t) => Some(t),
        _ => None,
    });
    let family_ok = |a: &SocketAddr| match supported {
        None => true,
        Some(t) => t.contains(&match a {
            SocketAddr::V4(_) => param_type::IPV4_ADDRESS,
            SocketAddr::V6(_) => param_type::IPV6_ADDRESS,
        }),
    };
    // RFC 9260 §5.1.2: if none of our address types is acceptable to the peer, abort with
    // Unresolvable Address.
    if !family_ok(&local) && !r.local_addrs.iter().any(family_ok) {
        return abort(vec![ErrorCause::UnresolvableAddress(Vec::new())]);
    }
    let mut lifetime = r.config.valid_cookie_life;
    if let Some(ms) = considered.iter().find_map(|p| match p {
        Param::CookiePreservative(ms) => Some(*ms),
        _ => None,
    }) {
        // RFC 9260 §5.2.6: honour a requested extension, but never beyond one more lifetime.
        lifetime += std::time::Duration::from_millis(u64::from(ms)).min(r.config.valid_cookie_life);
    }
    let out_streams = r.config.outbound_streams.min(init.inbound_streams);
    let in_streams = r.config.max_inbound_streams.min(init.outbound_streams);
    let cookie = Cookie {
        created_ns: now.as_nanos(),
        lifetime_ns: nanos(lifetime),
        local_tag: r.local_tag,
        peer_tag: init.initiate_tag,
        local_tsn: r.local_tsn,
        peer_tsn: init.initial_tsn,
        peer_rwnd: init.a_rwnd,
        outbound_streams: out_streams,
        inbound_streams: in_streams,
        local_port: r.local_port,
        peer_port,
        local_tie_tag: r.tie_tags.0,
        peer_tie_tag: r.tie_tags.1,
        local_addr: local,
        peer_addrs: peer_addresses(remote, considered),
        peer_adaptation: adaptation_of(considered),
    };
    let mut params = address_params(r.local_addrs, family_ok);
    params.push(Param::StateCookie(cookie.seal(r.key)));
    if let Some(x) = r.config.adaptation_indication {
        params.push(adaptation_param(x));
    }
    for tlv in report {
        params.push(Param::UnrecognizedParam(tlv));
    }
    let ack = InitChunk {
        initiate_tag: r.local_tag,
        a_rwnd: r.config.recv_buffer,
        outbound_streams: out_streams,
        inbound_streams: in_streams,
        initial_tsn: r.local_tsn,
        params,
    };
    InitReply::InitAck(build_packet(
        &CommonHeader {
            src_port: r.local_port,
            dst_port: peer_port,
            verification_tag: init.initiate_tag,
        },
        &[Chunk::InitAck(ack)],
    ))
}

/// IPv4/IPv6 Address parameters for our addresses (RFC 9260 §3.3.2.1).
pub(crate) fn address_params(
    local_addrs: &[SocketAddr],
    keep: impl Fn(&SocketAddr) -> bool,
) -> Vec<Param> {
    let mut out: Vec<Param> = Vec::new();
    for a in local_addrs.iter().filter(|a| keep(a)) {
        let p = match a.ip() {
            IpAddr::V4(ip) => Param::Ipv4(ip),
            IpAddr::V6(ip) => Param::Ipv6(ip),
        };
        if !out.contains(&p) {
            out.push(p);
        }
    }
    out
}

/// The Adaptation Layer Indication parameter (RFC 5061 §4.2.7) with code point `x`.
pub(crate) fn adaptation_param(x: u32) -> Param {
    Param::Unknown {
        code: param_type::ADAPTATION_LAYER_INDICATION,
        value: x.to_be_bytes().to_vec(),
    }
}

/// The Adaptation Code Point among INIT / INIT ACK parameters, if any.
pub(crate) fn adaptation_of(params: &[Param]) -> Option<u32> {
    params.iter().find_map(|p| match p {
        Param::Unknown { code, value }
            if *code == param_type::ADAPTATION_LAYER_INDICATION && value.len() == 4 =>
        {
            Some(u32::from_be_bytes([value[0], value[1], value[2], value[3]]))
        }
        _ => None,
    })
}
