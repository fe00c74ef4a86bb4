//! DDP over the kernel's SCTP (`ksctp://`): the RFC 5043 LLP of the QP engines carried by
//! one-to-one (`SOCK_STREAM`) kernel SCTP sockets, beside the TCP connections and softrnic's
//! own SCTP endpoints in the same epoll set and thread. A second, independent SCTP under the
//! RNIC, for hosts whose kernel has SCTP.
//!
//! * **Socket options** through nix's extension point for options it does not know
//!   (`sockopt_impl!` over `SetStruct`/`GetStruct`, with the Linux UAPI structures below):
//!   `SCTP_ADAPTATION_LAYER` announces the DDP adaptation (RFC 5043 §5.1) in INIT/INIT ACK;
//!   `SCTP_EVENT` subscribes to association, peer address, shutdown and adaptation
//!   notifications; `SCTP_RECVRCVINFO` has each message come with its `SCTP_RCVINFO`
//!   (PPID, unordered flag); `SCTP_DEFAULT_SNDINFO` sets the PPID (16 for DDP Segments, 17
//!   for session control) and the unordered flag of what is sent; `SCTP_INITMSG`,
//!   `SCTP_NODELAY`; `SCTP_SOCKOPT_BINDX_ADD` and `SCTP_SOCKOPT_CONNECTX` (packed
//!   `sockaddr_in` arrays) bind several local addresses and connect to several peer ones
//!   (multihoming); `SCTP_STATUS` gives the primary path's MTU, from which DDP segments are
//!   sized (RFC 5043 §9).
//! * **Receiving** with `recvmsg`: a message with `MSG_NOTIFICATION` is a notification
//!   ([`parse_notification`]), any other carries its `SCTP_RCVINFO` control message
//!   ([`parse_rcvinfo`]); both are parsed from bytes, checked. A message the kernel hands
//!   over in pieces (no `MSG_EOR` yet) is put together first.
//! * **Setup**: the active side's association comes up (`SCTP_COMM_UP`); the passive side's
//!   arrives through `accept`. The peer must have announced the DDP adaptation (its
//!   `SCTP_ADAPTATION_INDICATION` comes right after `SCTP_COMM_UP`, before any message),
//!   else the association is aborted (RFC 5043 §11.1). Then the DDP Stream Session
//!   Initiate / Accept / Reject of the engine's SCTP LLP, as over softrnic's own SCTP.
//! * **Ending**: a graceful disconnect is `shutdown(SHUT_WR)` (SCTP SHUTDOWN); an abort
//!   closes the socket with a zero linger (SCTP ABORT). Peer address changes become the
//!   same [`Event::Path`] events softrnic's own SCTP gives.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

use crate::Instant;

use mio::unix::SourceFd;
use mio::{Interest, Token};
use nix::errno::Errno;
use nix::sys::socket::{
    self as nsock, AddressFamily, ControlMessageOwned, MsgFlags, SockFlag, SockProtocol, SockType,
    SockaddrIn, sockopt,
};
use nix::{getsockopt_impl, setsockopt_impl, sockopt_impl};
use sctp::ddp_adapt::{self, PeerAdaptation};

use super::Shared;
use super::assoc_qp::{self, Initiate, RequestFrom};
use super::{Cmd, Conn, Core, LoadGuard, end_engine, fail_connect, least_loaded};
use crate::addr::SctpAddr;
use crate::engine::CloseReason;
use crate::shared::{CmError, ConnReqId, Event, ListenerId, PathChange, QpShared, RnicConfig};

/// How long a new association may take to deliver its Session Initiate.
const INITIATE_TIMEOUT: Duration = mpa::negotiate::REQUEST_TIMEOUT;
/// How long a rejected or shut-down association lingers for the peer's side of the close.
const LINGER: Duration = Duration::from_secs(2);
/// Socket buffer sizes asked for (the kernel caps them at its `[rw]mem_max`).
const SOCKET_BUFFER: usize = 4 << 20;
/// Messages read per socket per pass.
const RECV_BATCH: usize = 256;
/// Read buffer: larger than any DDP segment sized from a path MTU.
const READ_BUF: usize = 64 << 10;
/// Largest message put together from pieces: larger ones abort the association.
const MAX_MESSAGE: usize = 1 << 20;
/// Most addresses one `SCTP_SOCKOPT_CONNECTX` names.
pub(crate) const MAX_CONNECTX: usize = 4;

// ------------------------------------------------------------------------------------
// The Linux SCTP socket API (include/uapi/linux/sctp.h, RFC 6458)
// ------------------------------------------------------------------------------------

const SOL_SCTP: libc::c_int = libc::IPPROTO_SCTP;
const SCTP_INITMSG: libc::c_int = 2;
const SCTP_NODELAY: libc::c_int = 3;
const SCTP_ADAPTATION_LAYER: libc::c_int = 7;
const SCTP_STATUS: libc::c_int = 14;
const SCTP_RECVRCVINFO: libc::c_int = 32;
const SCTP_DEFAULT_SNDINFO: libc::c_int = 34;
const SCTP_SOCKOPT_BINDX_ADD: libc::c_int = 100;
const SCTP_SOCKOPT_CONNECTX: libc::c_int = 110;
const SCTP_EVENT: libc::c_int = 127;

/// `cmsg_type` of `struct sctp_rcvinfo` (level `IPPROTO_SCTP`).
const SCTP_RCVINFO: libc::c_int = 3;
/// `snd_flags` / `rcv_flags`: unordered delivery.
const SCTP_UNORDERED: u16 = 1;

/// Notification types (`sn_type`).
const SCTP_ASSOC_CHANGE: u16 = 0x8001;
const SCTP_PEER_ADDR_CHANGE: u16 = 0x8002;
const SCTP_REMOTE_ERROR: u16 = 0x8004;
const SCTP_SHUTDOWN_EVENT: u16 = 0x8005;
const SCTP_ADAPTATION_INDICATION: u16 = 0x8007;

/// `struct sctp_setadaptation`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SetAdaptation {
    ind: u32,
}

/// `struct sctp_initmsg`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct InitMsg {
    num_ostreams: u16,
    max_instreams: u16,
    max_attempts: u16,
    max_init_timeo: u16,
}

/// `struct sctp_event`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SctpEvent {
    assoc_id: i32,
    kind: u16,
    on: u8,
}

/// `struct sctp_sndinfo`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SndInfo {
    sid: u16,
    flags: u16,
    /// Network byte order: the kernel copies it into the DATA chunk as it is.
    ppid: u32,
    context: u32,
    assoc_id: i32,
}

/// `struct sctp_paddrinfo` (packed, aligned to 4: no padding in this layout).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PaddrInfo {
    assoc_id: i32,
    address: [u8; 128],
    state: i32,
    cwnd: u32,
    srtt: u32,
    rto: u32,
    mtu: u32,
}

/// `struct sctp_status`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Status {
    assoc_id: i32,
    state: i32,
    rwnd: u32,
    unackdata: u16,
    penddata: u16,
    instrms: u16,
    outstrms: u16,
    fragmentation_point: u32,
    primary: PaddrInfo,
}

// The kernel answers SCTP_STATUS with exactly its own structure's size, which nix's getter
// checks: the layout must be the kernel's.
const _: () = assert!(std::mem::size_of::<PaddrInfo>() == 152);
const _: () = assert!(std::mem::size_of::<Status>() == 176);
const _: () = assert!(std::mem::size_of::<SndInfo>() == 16);
const _: () = assert!(std::mem::size_of::<SctpEvent>() == 8);
const _: () = assert!(std::mem::size_of::<libc::sockaddr_in>() == 16);

// One `sockopt_impl!` per option, not a table macro around it: nix's macro recognises a
// literal `bool` type (sent as a C int), which a `$ty:ty` passed through another macro no
// longer is (it would be sent as one byte, and the kernel refuses SCTP_NODELAY with EINVAL).
sockopt_impl!(
    /// `SCTP_ADAPTATION_LAYER`: the Adaptation Layer Indication our INIT / INIT ACK carry.
    AdaptationLayer, SetOnly, SOL_SCTP, SCTP_ADAPTATION_LAYER, SetAdaptation
);
sockopt_impl!(
    /// `SCTP_INITMSG`: streams and INIT retransmissions of new associations.
    InitMsgOpt, SetOnly, SOL_SCTP, SCTP_INITMSG, InitMsg
);
sockopt_impl!(
    /// `SCTP_NODELAY`: no Nagle-like bundling delay.
    NoDelay, SetOnly, SOL_SCTP, SCTP_NODELAY, bool
);
sockopt_impl!(
    /// `SCTP_RECVRCVINFO`: every received message comes with an `SCTP_RCVINFO`.
    RecvRcvInfo, SetOnly, SOL_SCTP, SCTP_RECVRCVINFO, bool
);
sockopt_impl!(
    /// `SCTP_EVENT`: one notification type on or off.
    EventOpt, SetOnly, SOL_SCTP, SCTP_EVENT, SctpEvent
);
sockopt_impl!(
    /// `SCTP_DEFAULT_SNDINFO`: stream, flags and PPID of what `send` sends.
    DefaultSndInfo, SetOnly, SOL_SCTP, SCTP_DEFAULT_SNDINFO, SndInfo
);
sockopt_impl!(
    /// `SCTP_SOCKOPT_BINDX_ADD` with one address: `sctp_bindx(SCTP_BINDX_ADD_ADDR)`.
    BindxAdd, SetOnly, SOL_SCTP, SCTP_SOCKOPT_BINDX_ADD, libc::sockaddr_in
);
sockopt_impl!(
    /// `SCTP_STATUS` of the socket's association.
    StatusOpt, GetOnly, SOL_SCTP, SCTP_STATUS, Status
);

/// `SCTP_SOCKOPT_CONNECTX` with `N` addresses: `sctp_connectx`. The option's length gives
/// the number of addresses, so each count is a type of its own.
macro_rules! connectx {
    ($($name:ident $n:literal),*) => {$(
        sockopt_impl!(
            /// `SCTP_SOCKOPT_CONNECTX` with this many peer addresses.
            $name, SetOnly, SOL_SCTP, SCTP_SOCKOPT_CONNECTX, [libc::sockaddr_in; $n]
        );
    )*};
}
connectx!(ConnectX1 1, ConnectX2 2, ConnectX3 3, ConnectX4 4);

// ------------------------------------------------------------------------------------
// Notifications and receive information, parsed from bytes
// ------------------------------------------------------------------------------------

/// `sac_state` of an `SCTP_ASSOC_CHANGE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AssocChange {
    /// `SCTP_COMM_UP`: the association is established.
    CommUp,
    /// `SCTP_COMM_LOST`: gone (ABORT, or retransmissions exhausted).
    CommLost,
    /// `SCTP_RESTART`: the peer restarted.
    Restart,
    /// `SCTP_SHUTDOWN_COMP`: a graceful shutdown completed.
    ShutdownComplete,
    /// `SCTP_CANT_STR_ASSOC`: the association could not be started.
    CantStart,
    /// A state this code does not know.
    Other(u16),
}

/// A peer address state of an `SCTP_PEER_ADDR_CHANGE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AddrState {
    /// `SCTP_ADDR_AVAILABLE` or `SCTP_ADDR_CONFIRMED`: the path is active.
    Available,
    /// `SCTP_ADDR_UNREACHABLE`.
    Unreachable,
    /// `SCTP_ADDR_POTENTIALLY_FAILED` (RFC 7829).
    PotentiallyFailed,
    /// `SCTP_ADDR_MADE_PRIM`: now the primary path.
    MadePrimary,
    /// `SCTP_ADDR_ADDED`, `SCTP_ADDR_REMOVED` or another state.
    Other(i32),
}

/// An SCTP notification (RFC 6458 §6.1), as far as the carrier uses it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Notification {
    /// `SCTP_ASSOC_CHANGE`, with the error and stream counts.
    Assoc {
        change: AssocChange,
        error: u16,
        outbound: u16,
        inbound: u16,
    },
    /// `SCTP_PEER_ADDR_CHANGE` (the address `None` when not IPv4/IPv6).
    PeerAddr {
        addr: Option<IpAddr>,
        state: AddrState,
        error: i32,
    },
    /// `SCTP_SHUTDOWN_EVENT`: the peer started a graceful shutdown.
    Shutdown,
    /// `SCTP_ADAPTATION_INDICATION`: the peer's Adaptation Layer Indication.
    Adaptation(u32),
    /// `SCTP_REMOTE_ERROR`: the peer sent an ERROR chunk with this cause.
    RemoteError(u16),
    /// Another notification type.
    Other(u16),
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// A `struct sockaddr_storage` (or what of it is there): the IP address.
fn sockaddr_ip(b: &[u8]) -> Option<IpAddr> {
    match i32::from(u16_at(b, 0)?) {
        libc::AF_INET => {
            let o: [u8; 4] = b.get(4..8)?.try_into().ok()?;
            Some(IpAddr::from(o))
        }
        libc::AF_INET6 => {
            let o: [u8; 16] = b.get(8..24)?.try_into().ok()?;
            Some(IpAddr::from(o))
        }
        _ => None,
    }
}

/// Parses a notification (the bytes of a message received with `MSG_NOTIFICATION`);
/// `None` when it is shorter than its type needs or than the length it states.
pub(crate) fn parse_notification(b: &[u8]) -> Option<Notification> {
    let kind = u16_at(b, 0)?;
    let len = u32_at(b, 4)? as usize;
    if len < 8 || len > b.len() {
        return None;
    }
    let b = &b[..len];
    Some(match kind {
        SCTP_ASSOC_CHANGE => Notification::Assoc {
            change: match u16_at(b, 8)? {
                0 => AssocChange::CommUp,
                1 => AssocChange::CommLost,
                2 => AssocChange::Restart,
                3 => AssocChange::ShutdownComplete,
                4 => AssocChange::CantStart,
                s => AssocChange::Other(s),
            },
            error: u16_at(b, 10)?,
            outbound: u16_at(b, 12)?,
            inbound: u16_at(b, 14)?,
        },
        SCTP_PEER_ADDR_CHANGE => {
            // spc_aaddr (sockaddr_storage, 128 octets) at 8, spc_state at 136, spc_error
            // at 140 (the structure is packed and 4-aligned).
            let state = u32_at(b, 136)? as i32;
            Notification::PeerAddr {
                addr: sockaddr_ip(b.get(8..136)?),
                state: match state {
                    0 | 5 => AddrState::Available,
                    1 => AddrState::Unreachable,
                    4 => AddrState::MadePrimary,
                    6 => AddrState::PotentiallyFailed,
                    s => AddrState::Other(s),
                },
                error: u32_at(b, 140)? as i32,
            }
        }
        SCTP_SHUTDOWN_EVENT => Notification::Shutdown,
        SCTP_ADAPTATION_INDICATION => Notification::Adaptation(u32_at(b, 8)?),
        SCTP_REMOTE_ERROR => Notification::RemoteError(u16::from_be(u16_at(b, 8)?)),
        other => Notification::Other(other),
    })
}

/// What `SCTP_RCVINFO` says of a received message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RcvInfo {
    /// Stream.
    pub sid: u16,
    /// PPID (host byte order).
    pub ppid: u32,
    /// Sent unordered.
    pub unordered: bool,
}

/// Parses the data of an `SCTP_RCVINFO` control message (`struct sctp_rcvinfo`: sid, ssn,
/// flags, 2 octets of padding, ppid in network byte order, tsn, cumtsn, context, assoc id);
/// `None` when too short.
pub(crate) fn parse_rcvinfo(b: &[u8]) -> Option<RcvInfo> {
    if b.len() < 28 {
        return None;
    }
    Some(RcvInfo {
        sid: u16_at(b, 0)?,
        unordered: u16_at(b, 4)? & SCTP_UNORDERED != 0,
        ppid: u32::from_be(u32_at(b, 8)?),
    })
}

// ------------------------------------------------------------------------------------
// Sockets
// ------------------------------------------------------------------------------------

/// Why a kernel SCTP socket could not be made.
fn socket_error(e: Errno) -> io::Error {
    match e {
        Errno::EPROTONOSUPPORT | Errno::ESOCKTNOSUPPORT | Errno::EAFNOSUPPORT => io::Error::new(
            io::ErrorKind::Unsupported,
            "this kernel has no SCTP (modprobe sctp)",
        ),
        e => io::Error::from(e),
    }
}

fn nix_err(what: &str, e: Errno) -> io::Error {
    io::Error::new(io::Error::from(e).kind(), format!("{what}: {e}"))
}

fn sockaddr_in(a: SocketAddrV4) -> libc::sockaddr_in {
    *SockaddrIn::from(a).as_ref()
}

fn v4(ip: &IpAddr) -> io::Result<Ipv4Addr> {
    match ip {
        IpAddr::V4(a) => Ok(*a),
        IpAddr::V6(_) => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "ksctp:// takes IPv4 addresses",
        )),
    }
}

/// A non-blocking one-to-one SCTP socket with the options every RNIC socket has: the DDP
/// adaptation announced, notifications and receive information on, no delay, one stream
/// each way, 4 MiB buffers.
pub(crate) fn open_socket() -> io::Result<OwnedFd> {
    let fd = nsock::socket(
        AddressFamily::Inet,
        SockType::Stream,
        SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
        SockProtocol::Sctp,
    )
    .map_err(socket_error)?;
    let set = |what: &str, r: nix::Result<()>| r.map_err(|e| nix_err(what, e));
    set(
        "SCTP_ADAPTATION_LAYER",
        nsock::setsockopt(
            &fd,
            AdaptationLayer,
            &SetAdaptation {
                ind: ddp_adapt::ADAPTATION_DDP,
            },
        ),
    )?;
    set(
        "SCTP_INITMSG",
        nsock::setsockopt(
            &fd,
            InitMsgOpt,
            &InitMsg {
                num_ostreams: 1,
                max_instreams: 1,
                max_attempts: 0,
                max_init_timeo: 0,
            },
        ),
    )?;
    set("SCTP_NODELAY", nsock::setsockopt(&fd, NoDelay, &true))?;
    set(
        "SCTP_RECVRCVINFO",
        nsock::setsockopt(&fd, RecvRcvInfo, &true),
    )?;
    for kind in [
        SCTP_ASSOC_CHANGE,
        SCTP_PEER_ADDR_CHANGE,
        SCTP_REMOTE_ERROR,
        SCTP_SHUTDOWN_EVENT,
        SCTP_ADAPTATION_INDICATION,
    ] {
        let ev = SctpEvent {
            assoc_id: 0,
            kind,
            on: 1,
        };
        set("SCTP_EVENT", nsock::setsockopt(&fd, EventOpt, &ev))?;
    }
    // Best effort: capped by the kernel's limits.
    let _ = nsock::setsockopt(&fd, sockopt::SndBuf, &SOCKET_BUFFER);
    let _ = nsock::setsockopt(&fd, sockopt::RcvBuf, &SOCKET_BUFFER);
    Ok(fd)
}

/// Binds `fd` to `addrs` (all at `port`): the first with `bind`, the others with
/// `sctp_bindx`; none: the wildcard address (every local address).
fn bind_all(fd: &OwnedFd, addrs: &[IpAddr], port: u16) -> io::Result<()> {
    let first = match addrs.first() {
        Some(a) => v4(a)?,
        None => Ipv4Addr::UNSPECIFIED,
    };
    nsock::bind(
        fd.as_raw_fd(),
        &SockaddrIn::from(SocketAddrV4::new(first, port)),
    )
    .map_err(|e| nix_err(&format!("bind {first}:{port}"), e))?;
    for a in addrs.iter().skip(1) {
        let a = v4(a)?;
        nsock::setsockopt(fd, BindxAdd, &sockaddr_in(SocketAddrV4::new(a, 0)))
            .map_err(|e| nix_err(&format!("sctp_bindx {a}"), e))?;
    }
    Ok(())
}

/// `sctp_connectx` to the peer's addresses at `port` (non-blocking: in progress).
fn connectx(fd: &OwnedFd, peers: &[IpAddr], port: u16) -> io::Result<()> {
    let mut sa = Vec::with_capacity(peers.len());
    for p in peers {
        sa.push(sockaddr_in(SocketAddrV4::new(v4(p)?, port)));
    }
    let r = match sa.as_slice() {
        [a] => nsock::setsockopt(fd, ConnectX1, &[*a]),
        [a, b] => nsock::setsockopt(fd, ConnectX2, &[*a, *b]),
        [a, b, c] => nsock::setsockopt(fd, ConnectX3, &[*a, *b, *c]),
        [a, b, c, d] => nsock::setsockopt(fd, ConnectX4, &[*a, *b, *c, *d]),
        _ => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("ksctp:// connects to 1 to {MAX_CONNECTX} peer addresses"),
            ));
        }
    };
    match r {
        Ok(()) | Err(Errno::EINPROGRESS) => Ok(()),
        Err(e) => Err(nix_err("sctp_connectx", e)),
    }
}

/// The association's status, `None` when the socket has none.
fn status(fd: &OwnedFd) -> Option<Status> {
    nsock::getsockopt(fd, StatusOpt).ok()
}

/// The largest DDP segment for the association on `fd`: sized from its primary path's MTU
/// (RFC 5043 §9) and never above the kernel's fragmentation point (less the DDP-SSN).
fn segment_size(fd: &OwnedFd, fallback_mtu: usize) -> usize {
    let (mtu, frag) = status(fd).map_or((fallback_mtu, 0), |s| {
        (s.primary.mtu as usize, s.fragmentation_point as usize)
    });
    let mtu = if mtu == 0 { fallback_mtu } else { mtu };
    let seg = ddp_adapt::max_ddp_segment(mtu, 20);
    if frag > 2 {
        seg.min(frag - 2).max(ddp_adapt::MIN_MAX_SEGMENT)
    } else {
        seg
    }
}

/// An SCTP listener on kernel sockets, opened by the application thread (so that socket,
/// bind and listen errors reach it).
#[derive(Debug)]
pub(crate) struct KsctpListen {
    sock: OwnedFd,
    mtu: usize,
}

impl KsctpListen {
    /// Opens, binds (every address of `a`, or the wildcard) and listens; returns the
    /// listener and the address bound (the port chosen when `a.port` is 0).
    pub(crate) fn open(a: &SctpAddr, _cfg: &RnicConfig) -> io::Result<(KsctpListen, SctpAddr)> {
        let sock = open_socket()?;
        bind_all(&sock, &a.addrs, a.port)?;
        nsock::listen(
            &sock,
            nsock::Backlog::new(128).unwrap_or(nsock::Backlog::MAXCONN),
        )
        .map_err(|e| nix_err("listen", e))?;
        let mut bound = a.clone();
        if let Ok(s) = nsock::getsockname::<SockaddrIn>(sock.as_raw_fd()) {
            bound.port = s.port();
        }
        if bound.addrs.is_empty() {
            bound.addrs.push(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
        }
        Ok((KsctpListen { sock, mtu: a.mtu }, bound))
    }
}

/// An active connection's socket, opened (and the connect started) by the application
/// thread.
#[derive(Debug)]
pub(crate) struct KsctpConnect {
    sock: OwnedFd,
    mtu: usize,
}

impl KsctpConnect {
    /// Opens a socket, binds it to `a.local` when given and starts `sctp_connectx` to
    /// `a.addrs`.
    pub(crate) fn open(a: &SctpAddr, _cfg: &RnicConfig) -> io::Result<KsctpConnect> {
        if a.addrs.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "no peer address",
            ));
        }
        let sock = open_socket()?;
        if !a.local.is_empty() {
            bind_all(&sock, &a.local, 0)?;
        }
        connectx(&sock, &a.addrs, a.port)?;
        Ok(KsctpConnect { sock, mtu: a.mtu })
    }
}

// ------------------------------------------------------------------------------------
// The core's side
// ------------------------------------------------------------------------------------

/// Where an association stands.
#[derive(Debug)]
enum Role {
    /// Active: the association is coming up.
    Connecting { qp: Arc<QpShared>, cfg: mpa::Config },
    /// Passive: waiting for the Session Initiate.
    Waiting { deadline: Instant },
    /// Passive: reported as a connection request (the Initiate waits in `held`).
    Requested { req: ConnReqId },
    /// A QP runs on it.
    Qp {
        qp: Arc<QpShared>,
        /// SHUTDOWN started.
        shut: bool,
        span: tracing::Span,
    },
    /// Rejected: shutting down.
    Closing { deadline: Instant },
}

/// One kernel SCTP association (a one-to-one socket) of the core.
#[derive(Debug)]
pub(crate) struct KAssoc {
    sock: OwnedFd,
    role: Role,
    listener: Option<ListenerId>,
    mtu: usize,
    /// The peer's Adaptation Layer Indication, once notified.
    peer_adaptation: Option<u32>,
    /// `SCTP_COMM_UP` seen.
    up: bool,
    /// Messages received that wait for a QP (the Initiate).
    held: Vec<(RcvInfo, Vec<u8>)>,
    /// A message the kernel handed over in part so far.
    partial: Vec<u8>,
    /// The PPID `SCTP_DEFAULT_SNDINFO` now sends with.
    snd_ppid: Option<u32>,
    /// Placed on a progress thread (counted in its load) once established.
    placed: Option<LoadGuard>,
}

/// A kernel SCTP listener or association.
#[derive(Debug)]
pub(crate) enum Ksctp {
    Listener { id: ListenerId, l: KsctpListen },
    Assoc(Box<KAssoc>),
}

impl Ksctp {
    fn fd(&self) -> std::os::fd::RawFd {
        match self {
            Ksctp::Listener { l, .. } => l.sock.as_raw_fd(),
            Ksctp::Assoc(a) => a.sock.as_raw_fd(),
        }
    }

    /// The QP of this association.
    pub(super) fn has_qp(&self, qp: &Arc<QpShared>) -> bool {
        match self {
            Ksctp::Assoc(a) => matches!(&a.role,
                Role::Qp { qp: q, .. } | Role::Connecting { qp: q, .. } if Arc::ptr_eq(q, qp)),
            Ksctp::Listener { .. } => false,
        }
    }

    /// The listener `id`.
    pub(super) fn is_listener(&self, id: ListenerId) -> bool {
        matches!(self, Ksctp::Listener { id: i, .. } if *i == id)
    }

    /// The next deadline: setup and linger timers, the engine's.
    pub(super) fn next_deadline(&self, now: Instant) -> Option<Instant> {
        let Ksctp::Assoc(a) = self else {
            return None;
        };
        match &a.role {
            Role::Waiting { deadline } | Role::Closing { deadline } => Some(*deadline),
            Role::Qp { qp, .. } => qp.engine_deadline(now),
            _ => None,
        }
    }

    /// The QP on this association rang its doorbell.
    pub(super) fn doorbell(&self) -> bool {
        matches!(self, Ksctp::Assoc(a) if matches!(&a.role,
            Role::Qp { qp, .. } if qp.tx_pending.swap(false, std::sync::atomic::Ordering::SeqCst)))
    }

    /// Connection request `req` waits here.
    fn has_request(&self, req: ConnReqId) -> bool {
        matches!(self, Ksctp::Assoc(a) if matches!(a.role, Role::Requested { req: r } if r == req))
    }
}

/// What one read pass found.
#[derive(Default)]
struct Received {
    msgs: Vec<(RcvInfo, Vec<u8>)>,
    paths: Vec<(IpAddr, PathChange)>,
    /// The association ended, and how.
    ended: Option<CloseReason>,
    /// The batch was full: the socket may hold more (readiness is edge-triggered).
    more: bool,
}

impl KAssoc {
    fn new(sock: OwnedFd, role: Role, listener: Option<ListenerId>, mtu: usize) -> KAssoc {
        KAssoc {
            sock,
            role,
            listener,
            mtu,
            peer_adaptation: None,
            up: false,
            held: Vec::new(),
            partial: Vec::new(),
            snd_ppid: None,
            placed: None,
        }
    }

    /// The QP of this association once it is established and not yet placed on a progress
    /// thread. Each association is a socket of its own (one-to-one style), so both an
    /// active association and one a listener accepted may move.
    fn placeable_qp(&self) -> Option<&Arc<QpShared>> {
        match &self.role {
            Role::Qp {
                qp, shut: false, ..
            } if self.placed.is_none() && qp.engine_rts() => Some(qp),
            _ => None,
        }
    }

    /// Reads what the socket has: messages, notifications, the end.
    fn receive(&mut self, buf: &mut [u8]) -> Received {
        let mut r = Received::default();
        let mut cmsg = nix::cmsg_space!([u8; 32]);
        r.more = true;
        for _ in 0..RECV_BATCH {
            let mut iov = [io::IoSliceMut::new(buf)];
            let res = nsock::recvmsg::<()>(
                self.sock.as_raw_fd(),
                &mut iov,
                Some(&mut cmsg),
                MsgFlags::empty(),
            );
            let (n, flags, info) = match res {
                Ok(m) => {
                    let mut info = None;
                    if let Ok(cs) = m.cmsgs() {
                        for c in cs {
                            if let ControlMessageOwned::Unknown(u) = c
                                && u.cmsg_header.cmsg_level == SOL_SCTP
                                && u.cmsg_header.cmsg_type == SCTP_RCVINFO
                            {
                                info = parse_rcvinfo(&u.data_bytes);
                            }
                        }
                    }
                    (m.bytes, m.flags, info)
                }
                Err(Errno::EAGAIN) => {
                    r.more = false;
                    break;
                }
                Err(Errno::EINTR) => continue,
                Err(e) => {
                    tracing::debug!(error = %e, "kernel SCTP receive");
                    r.ended = Some(CloseReason::Reset);
                    break;
                }
            };
            if n == 0 && !flags.contains(MsgFlags::MSG_NOTIFICATION) {
                // End of stream: the association shut down.
                r.ended.get_or_insert(CloseReason::PeerClosed);
                break;
            }
            if self.partial.len() + n > MAX_MESSAGE {
                tracing::warn!("kernel SCTP message over {MAX_MESSAGE} octets: aborting");
                self.partial.clear();
                r.ended = Some(CloseReason::Reset);
                break;
            }
            self.partial.extend_from_slice(&buf[..n]);
            if !flags.contains(MsgFlags::MSG_EOR) {
                continue;
            }
            let msg = std::mem::take(&mut self.partial);
            if flags.contains(MsgFlags::MSG_NOTIFICATION) {
                self.notification(&msg, &mut r);
            } else if let Some(info) = info {
                r.msgs.push((info, msg));
            } else {
                tracing::warn!(
                    len = msg.len(),
                    "kernel SCTP message without SCTP_RCVINFO: dropped"
                );
            }
        }
        r
    }

    fn notification(&mut self, b: &[u8], r: &mut Received) {
        let Some(n) = parse_notification(b) else {
            tracing::debug!(len = b.len(), "malformed SCTP notification");
            return;
        };
        tracing::debug!(?n, "SCTP notification");
        match n {
            Notification::Assoc { change, .. } => match change {
                AssocChange::CommUp => self.up = true,
                AssocChange::ShutdownComplete => {
                    r.ended.get_or_insert(CloseReason::PeerClosed);
                }
                AssocChange::CommLost | AssocChange::CantStart => {
                    r.ended = Some(CloseReason::Reset);
                }
                AssocChange::Restart | AssocChange::Other(_) => {}
            },
            Notification::PeerAddr {
                addr: Some(addr),
                state,
                ..
            } => {
                let change = match state {
                    AddrState::Available => Some(PathChange::Up),
                    AddrState::Unreachable => Some(PathChange::Down),
                    AddrState::PotentiallyFailed => Some(PathChange::PotentiallyFailed),
                    AddrState::MadePrimary => Some(PathChange::Primary),
                    AddrState::Other(_) => None,
                };
                if let Some(c) = change {
                    r.paths.push((addr, c));
                }
            }
            Notification::Adaptation(ind) => self.peer_adaptation = Some(ind),
            Notification::PeerAddr { .. }
            | Notification::Shutdown
            | Notification::RemoteError(_)
            | Notification::Other(_) => {}
        }
    }

    /// Whether the peer announced the DDP adaptation (RFC 5043 §11.1).
    fn ddp_peer(&self) -> bool {
        PeerAdaptation::classify(self.peer_adaptation).ddp_allowed()
    }

    /// Sends one message with `ppid`, unordered; false: the socket is full (try later).
    fn send(&mut self, stream: u16, ppid: u32, data: &[u8]) -> io::Result<bool> {
        if self.snd_ppid != Some(ppid) {
            let info = SndInfo {
                sid: stream,
                flags: SCTP_UNORDERED,
                ppid: ppid.to_be(),
                context: 0,
                assoc_id: 0,
            };
            nsock::setsockopt(&self.sock, DefaultSndInfo, &info)
                .map_err(|e| nix_err("SCTP_DEFAULT_SNDINFO", e))?;
            self.snd_ppid = Some(ppid);
        }
        match nsock::send(self.sock.as_raw_fd(), data, MsgFlags::MSG_NOSIGNAL) {
            Ok(_) => Ok(true),
            // Full: the socket's writable edge brings the core back.
            Err(Errno::EAGAIN) => Ok(false),
            Err(e) => Err(nix_err("SCTP send", e)),
        }
    }

    /// Graceful close: SCTP SHUTDOWN once everything queued is sent.
    fn shutdown(&self) {
        let _ = nsock::shutdown(self.sock.as_raw_fd(), nsock::Shutdown::Write);
    }

    /// Abortive close on drop: SCTP ABORT.
    fn abort_on_close(&self) {
        let _ = nsock::setsockopt(
            &self.sock,
            sockopt::Linger,
            &libc::linger {
                l_onoff: 1,
                l_linger: 0,
            },
        );
    }

    /// The peer's primary address and port.
    fn peer(&self) -> SocketAddr {
        nsock::getpeername::<SockaddrIn>(self.sock.as_raw_fd())
            .map(|s| SocketAddr::V4(SocketAddrV4::new(s.ip(), s.port())))
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)))
    }

    fn local(&self) -> SocketAddr {
        nsock::getsockname::<SockaddrIn>(self.sock.as_raw_fd())
            .map(|s| SocketAddr::V4(SocketAddrV4::new(s.ip(), s.port())))
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)))
    }
}

fn qp_span(qp: &QpShared, a: &KAssoc) -> tracing::Span {
    tracing::info_span!(
        "qp",
        qp = qp.id.0,
        llp = "kernel SCTP",
        local = %a.local(),
        peer = %a.peer(),
    )
}

impl Core {
    fn register_ksctp(&mut self, k: Ksctp, interest: Interest) -> io::Result<Token> {
        let t = self.token();
        self.poll
            .registry()
            .register(&mut SourceFd(&k.fd()), t, interest)?;
        self.add_conn(t, Conn::Ksctp(Box::new(k)));
        Ok(t)
    }

    /// Drops a kernel SCTP listener or association (closing its socket).
    pub(super) fn remove_ksctp(&mut self, t: Token) {
        drop(self.take_ksctp(t));
    }

    /// Takes a kernel SCTP listener or association out of this core: its socket leaves the
    /// epoll set, its timers are forgotten.
    fn take_ksctp(&mut self, t: Token) -> Option<Box<Ksctp>> {
        self.timerq.forget(t);
        let Some(Conn::Ksctp(k)) = self.conns.remove(&t) else {
            return None;
        };
        let _ = self.poll.registry().deregister(&mut SourceFd(&k.fd()));
        Some(k)
    }

    /// Places an established association on the least-loaded lane, as [`Core::place`]
    /// does a TCP connection: moving it there when that is not this one.
    fn place_ksctp(&mut self, shared: &Shared, t: Token, qp: Arc<QpShared>) {
        let (to, guard) = least_loaded(shared);
        if to == self.lane || shared.stop.load(std::sync::atomic::Ordering::SeqCst) {
            if let Some(Conn::Ksctp(k)) = self.conns.get_mut(&t)
                && let Ksctp::Assoc(a) = &mut **k
            {
                a.placed = Some(guard);
            }
            return;
        }
        let Some(mut k) = self.take_ksctp(t) else {
            return;
        };
        if let Ksctp::Assoc(a) = &mut *k {
            a.placed = Some(guard);
            if let Role::Qp { span, .. } = &a.role {
                tracing::debug!(parent: span, lane = to, "placed on progress thread");
            }
        }
        let lane = shared.lane(to);
        let mut cmds = lane.cmds.lock().unwrap_or_else(|p| p.into_inner());
        // Under the new lane's command lock, as for TCP: a command of the QP's that reads the
        // new lane is queued behind the association; one that read the old lane is forwarded.
        qp.lane.store(to, std::sync::atomic::Ordering::SeqCst);
        cmds.push_back(Cmd::MigrateKsctp(qp, k));
        drop(cmds);
        lane.ring();
    }

    /// Takes over an association placed on this lane: its socket joins this core's epoll set
    /// and it is serviced at once (work posted while it moved is in its QP's rings).
    pub(super) fn take_over_ksctp(&mut self, shared: &Shared, qp: Arc<QpShared>, k: Box<Ksctp>) {
        let t = self.token();
        if let Err(e) = self.poll.registry().register(
            &mut SourceFd(&k.fd()),
            t,
            Interest::READABLE | Interest::WRITABLE,
        ) {
            tracing::warn!(qp = qp.id.0, error = %e, "cannot watch the placed kernel SCTP association: aborting it");
            if let Ksctp::Assoc(a) = &*k {
                a.abort_on_close();
            }
            drop(k);
            end_engine(shared, &qp, self.now(), Some(CloseReason::Reset));
            return;
        }
        self.add_conn(t, Conn::Ksctp(k));
        self.service_ksctp(shared, t);
    }

    pub(super) fn listen_ksctp(&mut self, shared: &Shared, id: ListenerId, l: KsctpListen) {
        tracing::info!(listener = id.0, "kernel SCTP listener");
        if let Ok(t) = self.register_ksctp(Ksctp::Listener { id, l }, Interest::READABLE) {
            self.service_ksctp(shared, t);
        }
    }

    pub(super) fn connect_ksctp(
        &mut self,
        shared: &Shared,
        qp: Arc<QpShared>,
        c: KsctpConnect,
        cfg: mpa::Config,
    ) {
        let a = KAssoc::new(
            c.sock,
            Role::Connecting {
                qp: qp.clone(),
                cfg,
            },
            None,
            c.mtu,
        );
        match self.register_ksctp(
            Ksctp::Assoc(Box::new(a)),
            Interest::READABLE | Interest::WRITABLE,
        ) {
            Ok(t) => self.service_ksctp(shared, t),
            Err(e) => fail_connect(shared, &qp, CmError::Tcp(format!("kernel SCTP: {e}"))),
        }
    }

    /// Takes every association the listener with token `t` has ready; returns their
    /// tokens.
    fn accept_ksctp_all(&mut self, t: Token) -> Vec<Token> {
        let now = self.now();
        let mut new = Vec::new();
        while let Some(Conn::Ksctp(k)) = self.conns.get(&t) {
            let Ksctp::Listener { id, l } = &**k else {
                break;
            };
            let (id, mtu) = (*id, l.mtu);
            // socket2's accept hands the new descriptor over as an owned socket.
            match socket2::SockRef::from(&l.sock).accept() {
                Ok((s, _)) => {
                    if s.set_nonblocking(true).is_err() {
                        continue;
                    }
                    let a = KAssoc::new(
                        OwnedFd::from(s),
                        Role::Waiting {
                            deadline: now + INITIATE_TIMEOUT,
                        },
                        Some(id),
                        mtu,
                    );
                    tracing::debug!(peer = %a.peer(), listener = id.0, "kernel SCTP association accepted");
                    if let Ok(nt) = self.register_ksctp(
                        Ksctp::Assoc(Box::new(a)),
                        Interest::READABLE | Interest::WRITABLE,
                    ) {
                        new.push(nt);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::EINTR | libc::ECONNABORTED | libc::EPROTO)
                    ) => {}
                Err(e) => {
                    tracing::debug!(error = %e, "kernel SCTP accept");
                    break;
                }
            }
        }
        new
    }

    /// Services a kernel SCTP listener or association.
    pub(super) fn service_ksctp(&mut self, shared: &Shared, t: Token) {
        self.timerq.mark(t);
        if matches!(self.conns.get(&t), Some(Conn::Ksctp(k)) if matches!(**k, Ksctp::Listener { .. }))
        {
            // An association's Initiate may be there already.
            for nt in self.accept_ksctp_all(t) {
                self.service_ksctp(shared, nt);
            }
            return;
        }
        let now = self.now();
        let mut buf = std::mem::take(&mut self.spare_rx);
        if buf.len() < READ_BUF {
            buf.resize(READ_BUF, 0);
        }
        let Some(Conn::Ksctp(k)) = self.conns.get_mut(&t) else {
            self.spare_rx = buf;
            return;
        };
        let Ksctp::Assoc(a) = &mut **k else {
            self.spare_rx = buf;
            return;
        };
        // Until the socket has nothing more (readiness is edge-triggered), a batch at a
        // time, each handed to the engine before the next is read.
        let done = loop {
            let rx = a.receive(&mut buf);
            let more = rx.more && rx.ended.is_none();
            let done = step(shared, a, rx, now);
            if done || !more {
                break done;
            }
        };
        let place = if done || shared.lanes.is_empty() {
            None
        } else {
            a.placeable_qp().cloned()
        };
        self.spare_rx = buf;
        if done {
            self.remove_ksctp(t);
        } else if let Some(qp) = place {
            self.place_ksctp(shared, t, qp);
        }
    }

    /// The kernel SCTP association with connection request `req`.
    fn ksctp_request(&self, req: ConnReqId) -> Option<Token> {
        self.conns.iter().find_map(|(t, c)| match c {
            Conn::Ksctp(k) if k.has_request(req) => Some(*t),
            _ => None,
        })
    }

    /// The token and association of the kernel SCTP association that has connection
    /// request `req`.
    fn ksctp_requested(&mut self, req: ConnReqId) -> Option<(Token, &mut KAssoc)> {
        let t = self.ksctp_request(req)?;
        match self.conns.get_mut(&t) {
            Some(Conn::Ksctp(k)) => match &mut **k {
                Ksctp::Assoc(a) => Some((t, &mut **a)),
                _ => None,
            },
            _ => None,
        }
    }

    /// The kernel SCTP association of `qp`.
    fn ksctp_of(&self, qp: &Arc<QpShared>) -> Option<Token> {
        self.conns.iter().find_map(|(t, c)| match c {
            Conn::Ksctp(k) if k.has_qp(qp) => Some(*t),
            _ => None,
        })
    }

    /// The span of the QP on the kernel SCTP association `t`.
    fn ksctp_qp_span(&self, t: Token) -> Option<tracing::Span> {
        if let Some(Conn::Ksctp(k)) = self.conns.get(&t)
            && let Ksctp::Assoc(a) = &**k
            && let Role::Qp { span, .. } = &a.role
        {
            Some(span.clone())
        } else {
            None
        }
    }

    /// Accepts request `req` on `qp` if a kernel SCTP association has it.
    pub(super) fn accept_ksctp(
        &mut self,
        shared: &Shared,
        req: ConnReqId,
        qp: &Arc<QpShared>,
        cfg: &mpa::Config,
    ) -> bool {
        let now = self.now();
        let Some((t, a)) = self.ksctp_requested(req) else {
            return false;
        };
        let seg = segment_size(&a.sock, a.mtu);
        let held = std::mem::take(&mut a.held);
        let held = held
            .iter()
            .map(|(i, m)| (i.ppid, i.unordered, m.as_slice()));
        // Entered while the engine takes the held Initiate and is established.
        let span = qp_span(qp, a);
        let entered = span.clone().entered();
        if assoc_qp::start_responder(shared, qp, cfg, seg, held, now) {
            drop(entered);
            a.role = Role::Qp {
                qp: qp.clone(),
                shut: false,
                span,
            };
            self.service_ksctp(shared, t);
        } else {
            a.abort_on_close();
            self.remove_ksctp(t);
        }
        true
    }

    /// Rejects request `req` if a kernel SCTP association has it: Session Reject with `pd`,
    /// then SHUTDOWN.
    pub(super) fn reject_ksctp(&mut self, shared: &Shared, req: ConnReqId, pd: &[u8]) -> bool {
        let now = self.now();
        let Some((_, a)) = self.ksctp_requested(req) else {
            return false;
        };
        let held = std::mem::take(&mut a.held);
        let out = assoc_qp::reject_messages(
            held.iter()
                .map(|(i, m)| (i.ppid, i.unordered, m.as_slice())),
            pd,
        );
        for o in out {
            let _ = a.send(o.stream, o.ppid, &o.data);
        }
        a.shutdown();
        a.role = Role::Closing {
            deadline: now + LINGER,
        };
        let _ = shared;
        true
    }

    /// Disconnects (or otherwise moves) `qp` on its kernel SCTP association; false if it
    /// has none.
    pub(super) fn disconnect_ksctp(
        &mut self,
        shared: &Shared,
        qp: &Arc<QpShared>,
        to: crate::QpState,
    ) -> bool {
        let Some(t) = self.ksctp_of(qp) else {
            return false;
        };
        if matches!(self.conns.get(&t), Some(Conn::Ksctp(k)) if matches!(&**k, Ksctp::Assoc(a) if matches!(a.role, Role::Connecting { .. })))
        {
            self.remove_ksctp(t);
            qp.flush_early();
            fail_connect(shared, qp, CmError::Aborted);
            return true;
        }
        let _span = self.ksctp_qp_span(t).map(tracing::Span::entered);
        super::modify_qp(qp, to);
        self.service_ksctp(shared, t);
        true
    }

    /// Aborts `qp`'s kernel SCTP association (QP destroyed); false if it has none.
    pub(super) fn destroy_ksctp(&mut self, shared: &Shared, qp: &Arc<QpShared>) -> bool {
        let Some(t) = self.ksctp_of(qp) else {
            return false;
        };
        let now = self.now();
        // The QP's span, entered while its association is aborted and the QP closed.
        let _span = self.ksctp_qp_span(t).map(tracing::Span::entered);
        if let Some(Conn::Ksctp(k)) = self.conns.get(&t)
            && let Ksctp::Assoc(a) = &**k
        {
            a.abort_on_close();
            if matches!(a.role, Role::Connecting { .. }) {
                fail_connect(shared, qp, CmError::Aborted);
            }
        }
        self.remove_ksctp(t);
        assoc_qp::close(shared, qp, now, CloseReason::Local);
        true
    }

    /// RNIC close: aborts the association (or closes the listener).
    pub(super) fn shutdown_ksctp(&mut self, shared: &Shared, t: Token) {
        let now = self.now();
        if let Some(Conn::Ksctp(k)) = self.conns.get(&t)
            && let Ksctp::Assoc(a) = &**k
        {
            a.abort_on_close();
            match &a.role {
                Role::Qp { qp, span, .. } => {
                    let _span = span.enter();
                    assoc_qp::close(shared, qp, now, CloseReason::Local);
                }
                Role::Connecting { qp, .. } => fail_connect(shared, qp, CmError::Aborted),
                _ => {}
            }
        }
        self.remove_ksctp(t);
    }

    /// The kernel SCTP listener `id`, closed; false if there is none.
    pub(super) fn close_ksctp_listener(&mut self, id: ListenerId) -> bool {
        let t = self.conns.iter().find_map(|(t, c)| match c {
            Conn::Ksctp(k) if k.is_listener(id) => Some(*t),
            _ => None,
        });
        match t {
            Some(t) => {
                self.remove_ksctp(t);
                true
            }
            None => false,
        }
    }

    /// Data chunks of `qp`'s association not yet acknowledged or not yet sent (a count of
    /// chunks: zero when the peer has everything).
    pub(super) fn ksctp_unacked(&self, qp: &Arc<QpShared>) -> Option<u64> {
        let t = self.ksctp_of(qp)?;
        match self.conns.get(&t) {
            Some(Conn::Ksctp(k)) => match &**k {
                Ksctp::Assoc(a) => {
                    status(&a.sock).map(|s| u64::from(s.unackdata) + u64::from(s.penddata))
                }
                Ksctp::Listener { .. } => None,
            },
            _ => None,
        }
    }
}

/// One pass of an association after a read; true when it is over (the socket is closed
/// when the caller drops it).
fn step(shared: &Shared, a: &mut KAssoc, rx: Received, now: Instant) -> bool {
    let Received {
        mut msgs,
        paths,
        ended,
        ..
    } = rx;
    // RFC 5043 §11.1: no DDP over an association whose peer did not announce it. The
    // indication is notified right after SCTP_COMM_UP, before any message.
    if a.up && !a.ddp_peer() && ended.is_none() && !matches!(a.role, Role::Closing { .. }) {
        tracing::warn!(
            indication = ?a.peer_adaptation,
            "peer did not announce the DDP adaptation (RFC 5043 §11.1): aborting"
        );
        a.abort_on_close();
        match &a.role {
            Role::Connecting { qp, .. } => {
                fail_connect(
                    shared,
                    qp,
                    CmError::Tcp(
                        "the peer did not announce the DDP adaptation (RFC 5043 §11.1)".into(),
                    ),
                );
            }
            Role::Qp { qp, .. } => assoc_qp::close(shared, qp, now, CloseReason::Reset),
            Role::Requested { req } => {
                shared.withdraw_request(*req);
            }
            _ => {}
        }
        return true;
    }
    match &mut a.role {
        Role::Connecting { qp, cfg } => {
            if let Some(reason) = ended {
                let qp = qp.clone();
                qp.flush_early();
                fail_connect(
                    shared,
                    &qp,
                    CmError::Tcp(format!(
                        "kernel SCTP association not established ({reason:?})"
                    )),
                );
                return true;
            }
            if !a.up {
                return false;
            }
            let qp = qp.clone();
            let seg = segment_size(&a.sock, a.mtu);
            if !assoc_qp::start_initiator(shared, &qp, cfg, seg, now) {
                a.abort_on_close();
                return true;
            }
            let span = qp_span(&qp, a);
            span.in_scope(|| {
                tracing::debug!(
                    max_segment = seg,
                    "kernel SCTP association up, DDP session setup starts"
                )
            });
            a.role = Role::Qp {
                qp,
                shut: false,
                span,
            };
            drive(shared, a, msgs, &paths, ended, now)
        }
        Role::Waiting { deadline } => {
            if ended.is_some() {
                return true;
            }
            a.held.append(&mut msgs);
            let Some((info, first)) = a.held.first() else {
                if now >= *deadline {
                    a.abort_on_close();
                    return true;
                }
                return false;
            };
            match assoc_qp::parse_initiate(info.ppid, first) {
                Some(initiate) => {
                    let req = report_initiate(shared, a, initiate);
                    a.role = Role::Requested { req };
                    false
                }
                None => {
                    // Not an Initiate (RFC 5043 §6.1): the session ends.
                    a.abort_on_close();
                    true
                }
            }
        }
        Role::Requested { req } => {
            a.held.append(&mut msgs);
            if ended.is_some() {
                shared.withdraw_request(*req);
                return true;
            }
            false
        }
        Role::Closing { deadline } => {
            if ended.is_some() {
                return true;
            }
            if now >= *deadline {
                a.abort_on_close();
                return true;
            }
            false
        }
        Role::Qp { .. } => drive(shared, a, msgs, &paths, ended, now),
    }
}

/// A connection request for the application from the Initiate on `a`.
fn report_initiate(shared: &Shared, a: &KAssoc, initiate: Initiate) -> ConnReqId {
    let peer = a.peer();
    let from = RequestFrom {
        listener: a.listener,
        peer,
        peer_addrs: vec![peer.ip()],
        local: a.local(),
        scheme: "ksctp",
    };
    assoc_qp::report_request(shared, from, initiate)
}

/// Moves a QP's messages both ways; true when the association is over.
fn drive(
    shared: &Shared,
    a: &mut KAssoc,
    msgs: Vec<(RcvInfo, Vec<u8>)>,
    paths: &[(IpAddr, PathChange)],
    ended: Option<CloseReason>,
    now: Instant,
) -> bool {
    let Role::Qp { qp, shut, span } = &mut a.role else {
        return true;
    };
    let qp = qp.clone();
    let _span = span.clone().entered();
    for (remote, change) in paths {
        shared.publish(Event::Path {
            qp: qp.id,
            remote: *remote,
            change: *change,
        });
    }
    let mut was_shut = *shut;
    let mut slot = qp.lock();
    let Some(eng) = slot.engine.as_mut() else {
        return true;
    };
    qp.drain_rings(eng);
    for (info, m) in msgs {
        eng.handle_message(now, info.ppid, info.unordered, &m);
    }
    if eng.poll_timeout().is_some_and(|d| d <= now) {
        eng.handle_timeout(now);
    }
    let mut finished = false;
    if ended.is_none() && !was_shut {
        while let Some((stream, ppid, data)) = eng.poll_message() {
            // The kernel copies the message: the engine's buffer is only dropped.
            match a.send(stream, ppid, data) {
                Ok(true) => eng.message_done(),
                Ok(false) => break,
                Err(e) => {
                    tracing::debug!(error = %e, "kernel SCTP send failed");
                    finished = true;
                    break;
                }
            }
        }
        if !finished && eng.should_close_transport() {
            was_shut = true;
            a.shutdown();
        }
    }
    if let Some(reason) = ended {
        if reason == CloseReason::Reset {
            // Whatever is left of the association goes with an ABORT.
            a.abort_on_close();
        }
        eng.handle_closed(now, assoc_qp::end_reason(was_shut, reason));
        finished = true;
    } else if finished {
        eng.handle_closed(now, CloseReason::Reset);
        a.abort_on_close();
    }
    super::drain_events(shared, &qp, Some(&mut *eng));
    qp.publish_engine(eng, !finished);
    drop(slot);
    if let Role::Qp { shut, .. } = &mut a.role {
        *shut = was_shut;
    }
    finished
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// An `SCTP_ASSOC_CHANGE` as the kernel lays it out.
    fn assoc_change(state: u16, error: u16) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&SCTP_ASSOC_CHANGE.to_ne_bytes());
        b.extend_from_slice(&0u16.to_ne_bytes());
        b.extend_from_slice(&20u32.to_ne_bytes());
        b.extend_from_slice(&state.to_ne_bytes());
        b.extend_from_slice(&error.to_ne_bytes());
        b.extend_from_slice(&10u16.to_ne_bytes());
        b.extend_from_slice(&1u16.to_ne_bytes());
        b.extend_from_slice(&7i32.to_ne_bytes());
        b
    }

    /// An `SCTP_PEER_ADDR_CHANGE` for an IPv4 address.
    fn peer_addr_change(ip: [u8; 4], state: i32) -> Vec<u8> {
        let mut b = vec![0u8; 148];
        b[0..2].copy_from_slice(&SCTP_PEER_ADDR_CHANGE.to_ne_bytes());
        b[4..8].copy_from_slice(&148u32.to_ne_bytes());
        b[8..10].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
        b[10..12].copy_from_slice(&7174u16.to_be_bytes());
        b[12..16].copy_from_slice(&ip);
        b[136..140].copy_from_slice(&state.to_ne_bytes());
        b[140..144].copy_from_slice(&0i32.to_ne_bytes());
        b
    }

    #[test]
    fn rfc6458_6_1_1_assoc_change_states() {
        let n = parse_notification(&assoc_change(0, 0)).unwrap();
        assert_eq!(
            n,
            Notification::Assoc {
                change: AssocChange::CommUp,
                error: 0,
                outbound: 10,
                inbound: 1
            }
        );
        for (s, c) in [
            (1, AssocChange::CommLost),
            (2, AssocChange::Restart),
            (3, AssocChange::ShutdownComplete),
            (4, AssocChange::CantStart),
            (9, AssocChange::Other(9)),
        ] {
            assert!(matches!(
                parse_notification(&assoc_change(s, 0)),
                Some(Notification::Assoc { change, .. }) if change == c
            ));
        }
    }

    #[test]
    fn rfc6458_6_1_2_peer_addr_change_to_path_events() {
        let n = parse_notification(&peer_addr_change([10, 99, 1, 2], 1)).unwrap();
        assert_eq!(
            n,
            Notification::PeerAddr {
                addr: Some(IpAddr::from([10, 99, 1, 2])),
                state: AddrState::Unreachable,
                error: 0
            }
        );
        for (s, want) in [
            (0, AddrState::Available),
            (5, AddrState::Available),
            (4, AddrState::MadePrimary),
            (6, AddrState::PotentiallyFailed),
            (3, AddrState::Other(3)),
        ] {
            assert!(matches!(
                parse_notification(&peer_addr_change([10, 99, 0, 2], s)),
                Some(Notification::PeerAddr { state, .. }) if state == want
            ));
        }
        // The association learns of it as the same path events softrnic's SCTP gives.
        let mut a = test_assoc();
        let mut r = Received::default();
        a.notification(&peer_addr_change([10, 99, 0, 2], 1), &mut r);
        a.notification(&peer_addr_change([10, 99, 1, 2], 4), &mut r);
        assert_eq!(
            r.paths,
            vec![
                (IpAddr::from([10, 99, 0, 2]), PathChange::Down),
                (IpAddr::from([10, 99, 1, 2]), PathChange::Primary)
            ]
        );
    }

    #[test]
    fn rfc5043_11_1_adaptation_indication_checked() {
        let mut b = Vec::new();
        b.extend_from_slice(&SCTP_ADAPTATION_INDICATION.to_ne_bytes());
        b.extend_from_slice(&0u16.to_ne_bytes());
        b.extend_from_slice(&16u32.to_ne_bytes());
        b.extend_from_slice(&ddp_adapt::ADAPTATION_DDP.to_ne_bytes());
        b.extend_from_slice(&3i32.to_ne_bytes());
        assert_eq!(
            parse_notification(&b),
            Some(Notification::Adaptation(ddp_adapt::ADAPTATION_DDP))
        );
        let mut a = test_assoc();
        assert!(!a.ddp_peer(), "no indication: no DDP");
        a.notification(&b, &mut Received::default());
        assert!(a.ddp_peer());
        b[8..12].copy_from_slice(&0x1234u32.to_ne_bytes());
        a.notification(&b, &mut Received::default());
        assert!(!a.ddp_peer(), "another adaptation: no DDP");
    }

    #[test]
    fn notification_shorter_than_stated_is_refused() {
        let mut b = assoc_change(0, 0);
        b.truncate(12);
        assert_eq!(parse_notification(&b), None);
        let mut p = peer_addr_change([1, 2, 3, 4], 0);
        p[4..8].copy_from_slice(&100u32.to_ne_bytes());
        assert_eq!(parse_notification(&p), None, "length cuts the state off");
    }

    #[test]
    fn rfc6458_5_3_5_rcvinfo_ppid_and_unordered() {
        let mut b = vec![0u8; 28];
        b[0..2].copy_from_slice(&0u16.to_ne_bytes());
        b[4..6].copy_from_slice(&SCTP_UNORDERED.to_ne_bytes());
        b[8..12].copy_from_slice(&ddp_adapt::PPID_DDP_SEGMENT.to_be_bytes());
        assert_eq!(
            parse_rcvinfo(&b),
            Some(RcvInfo {
                sid: 0,
                ppid: 16,
                unordered: true
            })
        );
        b[4..6].copy_from_slice(&0u16.to_ne_bytes());
        b[8..12].copy_from_slice(&17u32.to_be_bytes());
        assert_eq!(
            parse_rcvinfo(&b),
            Some(RcvInfo {
                sid: 0,
                ppid: 17,
                unordered: false
            })
        );
        assert_eq!(parse_rcvinfo(&b[..27]), None);
    }

    #[test]
    fn rfc5043_9_segment_fits_the_path_mtu() {
        // 1500-octet path: IPv4 20 + SCTP 12 + DATA 16 + a SACK's margin 16 + DDP-SSN 2.
        assert_eq!(ddp_adapt::max_ddp_segment(1500, 20), 1434);
    }

    #[test]
    fn no_sctp_in_this_kernel_is_named() {
        match open_socket() {
            Ok(_) => {} // a kernel with SCTP: nothing to check here
            Err(e) => {
                assert_eq!(e.kind(), io::ErrorKind::Unsupported, "{e}");
                assert_eq!(e.to_string(), "this kernel has no SCTP (modprobe sctp)");
            }
        }
        let e = socket_error(Errno::EPROTONOSUPPORT);
        assert_eq!(e.to_string(), "this kernel has no SCTP (modprobe sctp)");
    }

    fn test_assoc() -> KAssoc {
        let fd: OwnedFd = std::fs::File::open("/dev/null").unwrap().into();
        KAssoc::new(
            fd,
            Role::Closing {
                deadline: Instant::ZERO,
            },
            None,
            1500,
        )
    }

    proptest! {
        #[test]
        fn notification_parser_never_panics(b in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = parse_notification(&b);
        }

        #[test]
        fn notification_parser_never_panics_on_known_types(
            kind in prop_oneof![Just(SCTP_ASSOC_CHANGE), Just(SCTP_PEER_ADDR_CHANGE),
                Just(SCTP_ADAPTATION_INDICATION), Just(SCTP_REMOTE_ERROR), Just(SCTP_SHUTDOWN_EVENT)],
            len in 0u32..400,
            rest in proptest::collection::vec(any::<u8>(), 0..300),
        ) {
            let mut b = kind.to_ne_bytes().to_vec();
            b.extend_from_slice(&[0, 0]);
            b.extend_from_slice(&len.to_ne_bytes());
            b.extend_from_slice(&rest);
            if let Some(n) = parse_notification(&b) {
                prop_assert!(len as usize <= b.len());
                let _ = n;
            }
        }

        #[test]
        fn rcvinfo_parser_never_panics(b in proptest::collection::vec(any::<u8>(), 0..64)) {
            let r = parse_rcvinfo(&b);
            prop_assert_eq!(r.is_some(), b.len() >= 28);
        }
    }
}
