//! # softrnic-capi — the C ABI of softrnic
//!
//! `libsoftrnic.so` (and `libsoftrnic.a`) with the header `include/softrnic.h`, generated
//! from this crate by cbindgen: the OSC-style verbs of [`verbs`] for C programs, one
//! function `softrnic_<verb>` per verb.
//!
//! * **Handles** (`softrnic_rnic *`, `softrnic_pd *`, `softrnic_cq *`, `softrnic_qp *`,
//!   `softrnic_mr *`, `softrnic_listener *`) are opaque: the library looks them up in a
//!   table and never dereferences them, so a NULL, destroyed or forged handle is an error
//!   code. Closing an RNIC invalidates the handles of everything made on it.
//! * **Errors**: every function returns `int`: `SOFTRNIC_OK` (0) or a negative
//!   `softrnic_status`; polls and `softrnic_rnic_advance` return a count (>= 0) on
//!   success. `softrnic_strerror(code)` describes a code (a static string);
//!   `softrnic_last_error()` returns the full message of the calling thread's last error.
//!   No panic crosses the boundary: one becomes `SOFTRNIC_ERR_INTERNAL`.
//! * **Memory**: `softrnic_nsmr_register` allocates zeroed, page-aligned memory
//!   (reach it with `softrnic_mr_write` / `softrnic_mr_read` or the address
//!   `softrnic_mr_query` reports); `softrnic_nsmr_register_mem` registers the caller's
//!   own memory, which must then stay valid until `softrnic_deregister_mem` returned
//!   `SOFTRNIC_OK` (it waits for in-flight work to let go) or the RNIC is closed.
//! * **Threads**: every function may be called from any thread. Connecting is blocking
//!   (`softrnic_qp_active_connect` / `softrnic_qp_passive_connect`), so one process that
//!   connects two of its own QPs runs the passive side in a second thread.
//!
//! `unsafe` is confined to reading and writing what C's raw pointers point to (each block
//! says why it is sound), and to `RegisteredBuf::from_raw` for caller memory.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]
#![allow(non_camel_case_types)]

mod error;
mod handles;

use std::ffi::{CStr, c_char, c_int, c_void};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use verbs::{
    Access, Addressing, Arm, Event, FastRegRegion, MpaConfig, MwType, ProgressMode, QpCaps,
    QpState, RecvWr, RegisteredBuf, RnicConfig, SendOp, SendWr, Sge, TransportAddr, Wc, WcOpcode,
    WcStatus,
};

pub use error::softrnic_status;
use error::{Error, Result, guard, guard_ok, softrnic_status::*};
use handles::{
    ChannelObj, ConnReqObj, CqObj, ListenerObj, MrObj, PdObj, QpObj, RnicObj, SrqObj, get, insert,
    remove,
};

// ------------------------------------------------------------------------ opaque handles

/// An open RNIC (opaque).
pub struct softrnic_rnic {
    _private: [u8; 0],
}

/// A protection domain (opaque).
pub struct softrnic_pd {
    _private: [u8; 0],
}

/// A completion queue (opaque).
pub struct softrnic_cq {
    _private: [u8; 0],
}

/// A queue pair (opaque).
pub struct softrnic_qp {
    _private: [u8; 0],
}

/// A completion channel (opaque): a file descriptor that armed CQs signal.
pub struct softrnic_channel {
    _private: [u8; 0],
}

/// A shared receive queue (opaque).
pub struct softrnic_srq {
    _private: [u8; 0],
}

/// A registered memory region (opaque).
pub struct softrnic_mr {
    _private: [u8; 0],
}

/// A listening endpoint (opaque).
pub struct softrnic_listener {
    _private: [u8; 0],
}

/// A connection request taken from a listener (opaque), until it is accepted or rejected.
pub struct softrnic_conn_request {
    _private: [u8; 0],
}

// ------------------------------------------------------------------------ constants

/// `softrnic_rnic_open` flag: no progress thread; the application drives progress with
/// `softrnic_rnic_advance` (the polls advance too).
pub const SOFTRNIC_RNIC_MANUAL_PROGRESS: u32 = 1;
/// `softrnic_rnic_open` flag: the progress thread does all the progress. Without it, a
/// thread that polls (`softrnic_cq_poll` on an empty unarmed CQ, or `softrnic_rnic_assist`)
/// while the progress thread sleeps does the thread's work itself, and its posts transmit at
/// once, sparing two thread hand-offs per message; see `softrnic_rnic_assist`.
pub const SOFTRNIC_RNIC_NO_INLINE_PROGRESS: u32 = 2;

/// Access right: the local application (receives, RDMA Read sinks, atomic results) may
/// write the region.
pub const SOFTRNIC_ACCESS_LOCAL_WRITE: u32 = 0x01;
/// Access right: the peer may RDMA Read the region.
pub const SOFTRNIC_ACCESS_REMOTE_READ: u32 = 0x02;
/// Access right: the peer may RDMA Write the region (needs local write); RDMA Read sinks
/// need it too.
pub const SOFTRNIC_ACCESS_REMOTE_WRITE: u32 = 0x04;
/// Access right: the peer may run atomics on the region (needs local write).
pub const SOFTRNIC_ACCESS_REMOTE_ATOMIC: u32 = 0x08;
/// Access right: memory windows may be bound to the region.
pub const SOFTRNIC_ACCESS_MW_BIND: u32 = 0x10;

/// `softrnic_event` kind: a QP finished connection setup.
pub const SOFTRNIC_EVENT_ESTABLISHED: u32 = 1;
/// `softrnic_event` kind: the peer rejected the connection.
pub const SOFTRNIC_EVENT_REJECTED: u32 = 2;
/// `softrnic_event` kind: connection setup failed.
pub const SOFTRNIC_EVENT_CONNECT_FAILED: u32 = 3;
/// `softrnic_event` kind: an established connection ended.
pub const SOFTRNIC_EVENT_DISCONNECTED: u32 = 4;
/// `softrnic_event` kind: the QP sent a Terminate (`detail`: its layer, type and code as
/// `layer << 12 | type << 8 | code`, RFC 5040 §8).
pub const SOFTRNIC_EVENT_TERMINATE_SENT: u32 = 5;
/// `softrnic_event` kind: the peer sent a Terminate (`detail` as for TERMINATE_SENT).
pub const SOFTRNIC_EVENT_TERMINATE_RECEIVED: u32 = 6;
/// `softrnic_event` kind: the QP entered the Error state (work requests flushed).
pub const SOFTRNIC_EVENT_QP_ERROR: u32 = 7;
/// `softrnic_event` kind: a completion did not fit a CQ (`detail`: the CQ's id).
pub const SOFTRNIC_EVENT_CQ_OVERFLOW: u32 = 8;
/// `softrnic_event` kind: a take from a shared receive queue left fewer receives than its
/// armed limit (`detail`: the SRQ's id, as `softrnic_srq_id` gives it).
pub const SOFTRNIC_EVENT_SRQ_LIMIT: u32 = 9;
/// `softrnic_event` kind: a path of the QP's multihomed SCTP association changed
/// (`detail`: 1 up, 2 potentially failed, 3 down, 4 now the primary).
pub const SOFTRNIC_EVENT_PATH: u32 = 10;

/// An asynchronous event of the RNIC (`softrnic_rnic_poll_event`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct softrnic_event {
    /// `SOFTRNIC_EVENT_*`.
    pub kind: u32,
    /// The QP's id (`softrnic_qp_id`).
    pub qp_id: u32,
    /// Depends on the kind (see each `SOFTRNIC_EVENT_*`); 0 otherwise.
    pub detail: u32,
}

/// `softrnic_nsmr_reregister` flag: move the region to the protection domain given.
pub const SOFTRNIC_REREG_PD: u32 = 0x01;
/// `softrnic_nsmr_reregister` flag: give the region the access rights given.
pub const SOFTRNIC_REREG_ACCESS: u32 = 0x02;

/// Send work request flag: no completion on success (errors always complete).
pub const SOFTRNIC_WR_UNSIGNALED: u32 = 1;
/// Send work request flag: read fence (start after earlier RDMA Reads and atomics).
pub const SOFTRNIC_WR_FENCE: u32 = 2;
/// Send work request flag: Solicited Event (Send, Send with Invalidate, Immediate Data).
pub const SOFTRNIC_WR_SOLICITED: u32 = 4;

/// Work completion flag: `imm_data` holds received Immediate Data.
pub const SOFTRNIC_WC_WITH_IMM: u32 = 1;
/// Work completion flag: a received Send with Invalidate invalidated `invalidated_stag`.
pub const SOFTRNIC_WC_WITH_INV: u32 = 2;
/// Work completion flag: the received message asked for a Solicited Event.
pub const SOFTRNIC_WC_SOLICITED: u32 = 4;

/// The most SGEs one work request may carry through this ABI.
pub const SOFTRNIC_MAX_SGE: u32 = 1024;

/// The operation of a send work request (`softrnic_send_wr.opcode`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum softrnic_wr_opcode {
    /// Send: the SGL is gathered into one message for a receive of the peer.
    SOFTRNIC_WR_SEND = 0,
    /// Send with Invalidate: also invalidates the peer's STag `invalidate_stag`.
    SOFTRNIC_WR_SEND_WITH_INV = 1,
    /// RDMA Write of the SGL to `remote_to` of `remote_stag`.
    SOFTRNIC_WR_RDMA_WRITE = 2,
    /// RDMA Read of the SGL's length from `remote_to` of `remote_stag` into the SGL (each
    /// sink region needs local and remote write).
    SOFTRNIC_WR_RDMA_READ = 3,
    /// Fetch and Add (RFC 7306) of `compare_add` (mask `compare_add_mask`, 0: plain add) to
    /// the 64-bit value at `remote_to`; the original value lands in the single 8-byte SGE.
    SOFTRNIC_WR_FETCH_ADD = 4,
    /// Compare and Swap (RFC 7306): compare `compare_add` under `compare_add_mask`, swap in
    /// `swap` under `swap_mask` (both masks all ones for a plain 64-bit compare and swap);
    /// the original value lands in the single 8-byte SGE.
    SOFTRNIC_WR_CMP_SWAP = 5,
    /// Local Invalidate of the local STag `invalidate_stag`, in send-queue order (no SGL).
    SOFTRNIC_WR_LOCAL_INV = 6,
    /// Immediate Data (RFC 7306): the eight bytes `imm_data` (no SGL); it consumes a
    /// receive of the peer.
    SOFTRNIC_WR_IMM_DATA = 7,
}

/// The outcome of a work request.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum softrnic_wc_status {
    /// Success.
    SOFTRNIC_WC_SUCCESS = 0,
    /// A received message did not fit, or an atomic result SGE is not 8 bytes.
    SOFTRNIC_WC_LOCAL_LENGTH = 1,
    /// An SGE names an invalid STag, another PD's memory, lacks rights or is out of bounds.
    SOFTRNIC_WC_LOCAL_PROTECTION = 2,
    /// The work request cannot be carried out on this QP (e.g. RDMA Read with ORD 0).
    SOFTRNIC_WC_LOCAL_QP_OPERATION = 3,
    /// The peer refused access to its memory.
    SOFTRNIC_WC_REMOTE_ACCESS = 4,
    /// The peer failed the operation (e.g. no receive posted).
    SOFTRNIC_WC_REMOTE_OPERATION = 5,
    /// The transport failed.
    SOFTRNIC_WC_TRANSPORT = 6,
    /// The QP failed for a reason not tied to this work request.
    SOFTRNIC_WC_FATAL = 7,
    /// Flushed when the QP entered the Error state.
    SOFTRNIC_WC_FLUSHED = 8,
}

/// The operation a completion reports.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum softrnic_wc_opcode {
    /// A Send (of any kind).
    SOFTRNIC_WC_SEND = 0,
    /// An RDMA Write.
    SOFTRNIC_WC_RDMA_WRITE = 1,
    /// An RDMA Read.
    SOFTRNIC_WC_RDMA_READ = 2,
    /// A Fetch and Add.
    SOFTRNIC_WC_FETCH_ADD = 3,
    /// A Compare and Swap.
    SOFTRNIC_WC_CMP_SWAP = 4,
    /// Immediate Data sent.
    SOFTRNIC_WC_IMM_DATA = 5,
    /// A Local Invalidate.
    SOFTRNIC_WC_LOCAL_INV = 6,
    /// A Fast Register.
    SOFTRNIC_WC_FAST_REG = 7,
    /// A memory window bind.
    SOFTRNIC_WC_BIND_MW = 8,
    /// A receive (a Send, or Immediate Data when `SOFTRNIC_WC_WITH_IMM` is set).
    SOFTRNIC_WC_RECV = 9,
}

// ------------------------------------------------------------------------ plain structs

/// A scatter/gather element: `len` bytes at Tagged Offset `to` of local region `stag`
/// (VA-based regions: `to` is the address; see `softrnic_mr_info.base_to`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct softrnic_sge {
    /// Tagged Offset of the first byte.
    pub to: u64,
    /// Length in bytes.
    pub len: u32,
    /// Local STag (lkey).
    pub stag: u32,
}

/// A send-queue work request. Zero-initialise it, then set what the opcode uses.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct softrnic_send_wr {
    /// Returned in the completion.
    pub wr_id: u64,
    /// A `softrnic_wr_opcode`.
    pub opcode: u32,
    /// `SOFTRNIC_WR_*` flags.
    pub flags: u32,
    /// The SGL (`num_sge` elements; may be NULL when `num_sge` is 0).
    pub sg_list: *const softrnic_sge,
    /// Elements in `sg_list`.
    pub num_sge: u32,
    /// RDMA Write / Read / atomics: the peer's STag.
    pub remote_stag: u32,
    /// RDMA Write / Read / atomics: the peer's Tagged Offset.
    pub remote_to: u64,
    /// Send with Invalidate: the peer's STag; Local Invalidate: the local STag.
    pub invalidate_stag: u32,
    /// Padding (ignored).
    pub reserved: u32,
    /// Fetch and Add: the addend; Compare and Swap: the compare value.
    pub compare_add: u64,
    /// Fetch and Add: add mask; Compare and Swap: compare mask.
    pub compare_add_mask: u64,
    /// Compare and Swap: the swap value.
    pub swap: u64,
    /// Compare and Swap: swap mask.
    pub swap_mask: u64,
    /// Immediate Data.
    pub imm_data: [u8; 8],
}

/// A receive-queue work request.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct softrnic_recv_wr {
    /// Returned in the completion.
    pub wr_id: u64,
    /// Where the message is scattered (every region needs local write).
    pub sg_list: *const softrnic_sge,
    /// Elements in `sg_list`.
    pub num_sge: u32,
}

/// A work completion.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct softrnic_wc {
    /// The work request's `wr_id`.
    pub wr_id: u64,
    /// Outcome.
    pub status: softrnic_wc_status,
    /// The operation.
    pub opcode: softrnic_wc_opcode,
    /// Bytes transferred (message length for receives, bytes read for RDMA Reads).
    pub byte_len: u32,
    /// The QP (see `softrnic_qp_id`).
    pub qp_id: u32,
    /// `SOFTRNIC_WC_*` flags.
    pub flags: u32,
    /// With `SOFTRNIC_WC_WITH_INV`: the STag the peer invalidated.
    pub invalidated_stag: u32,
    /// With `SOFTRNIC_WC_WITH_IMM`: the Immediate Data.
    pub imm_data: [u8; 8],
}

/// What `softrnic_mr_query` reports of a region.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct softrnic_mr_info {
    /// The STag (lkey and rkey).
    pub stag: u32,
    /// `SOFTRNIC_ACCESS_*` rights.
    pub access: u32,
    /// Tagged Offset of the first byte (its address: regions are VA-based).
    pub base_to: u64,
    /// Length in bytes.
    pub length: u64,
    /// Address of the first byte (the library's buffer or the caller's memory).
    pub addr: *mut c_void,
}

/// Where an RNIC's progress was made so far (`softrnic_rnic_progress_stats`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct softrnic_progress_stats {
    /// Posts the posting thread transmitted itself, the progress thread being asleep.
    pub inline_posts: u64,
    /// Pieces of work (arrivals placed, completions, timers, commands) done by application
    /// threads: `softrnic_rnic_assist` and the polls that call it.
    pub assisted_work: u64,
    /// Times a progress thread went to sleep waiting on its sockets.
    pub thread_sleeps: u64,
    /// Times a progress thread went to sleep leaving its sockets to a polling application
    /// thread.
    pub thread_leased_sleeps: u64,
}

/// QP sizes for `softrnic_qp_create` (NULL there: 256-deep queues, 6 SGEs, no first-FPDU
/// hold).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct softrnic_qp_attr {
    /// Send queue depth (0: 256).
    pub sq_depth: u32,
    /// Receive queue depth (0: 256).
    pub rq_depth: u32,
    /// SGEs per work request (0: 6; at least 6).
    pub max_sge: u32,
    /// Initiator only: hold the first FPDU this many milliseconds after the MPA Reply was
    /// accepted (0: send at once). 50 is what the `siw` interop profile uses: Linux siw 6.1
    /// moves the socket to its QP only after sending its Reply, and an FPDU that arrives in
    /// between is not seen (siw's accept race). Costs once per connection.
    pub first_fpdu_delay_ms: u32,
}

/// Connection parameters (NULL where taken: MPA revision 2, IRD = ORD = 1, no private
/// data).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct softrnic_conn_param {
    /// Incoming RDMA Reads and atomics the peer may have outstanding (<= 0x3FFF).
    pub ird: u16,
    /// Outgoing RDMA Reads and atomics outstanding (<= 0x3FFF).
    pub ord: u16,
    /// Bytes of `private_data`.
    pub private_data_len: u32,
    /// Private data for the MPA Request or Reply (may be NULL when the length is 0).
    pub private_data: *const u8,
}

// ------------------------------------------------------------------------ helpers

/// A "forever" far enough and still representable as an `Instant` deadline.
const FOREVER: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

fn timeout(ms: c_int) -> Duration {
    u64::try_from(ms).map_or(FOREVER, Duration::from_millis)
}

fn null(what: &str) -> Error {
    Error::new(SOFTRNIC_ERR_NULL, format!("{what} is NULL"))
}

fn invalid(msg: impl Into<String>) -> Error {
    Error::new(SOFTRNIC_ERR_INVALID_ARG, msg)
}

/// Writes `v` to the out-parameter `out`.
///
/// # Safety
/// `out` is NULL (an error) or valid for a write of `T`.
unsafe fn put<T>(out: *mut T, v: T, what: &str) -> Result<()> {
    if out.is_null() {
        return Err(null(what));
    }
    // SAFETY: non-null, and the caller vouches that it is valid for a write of T.
    unsafe { out.write(v) };
    Ok(())
}

fn access(bits: u32) -> Result<Access> {
    if bits & !0x1f != 0 {
        return Err(invalid(format!("unknown access bits {:#x}", bits & !0x1f)));
    }
    Ok(Access::from_bits_truncate(bits as u8))
}

/// Copies a C SGL.
///
/// # Safety
/// `list` is NULL or valid for reads of `n` `softrnic_sge`s.
unsafe fn sgl(list: *const softrnic_sge, n: u32) -> Result<Vec<Sge>> {
    if n == 0 {
        return Ok(Vec::new());
    }
    if list.is_null() {
        return Err(null("sg_list (with num_sge > 0)"));
    }
    if n > SOFTRNIC_MAX_SGE {
        return Err(Error::new(
            SOFTRNIC_ERR_INVALID_WR,
            format!("{n} SGEs given, at most {SOFTRNIC_MAX_SGE} allowed"),
        ));
    }
    // SAFETY: non-null, n > 0 and bounded, and the caller vouches for n readable elements
    // (plain integers: every bit pattern is valid).
    let list = unsafe { std::slice::from_raw_parts(list, n as usize) };
    Ok(list
        .iter()
        .map(|s| Sge {
            stag: s.stag,
            to: s.to,
            len: s.len,
        })
        .collect())
}

/// Reads a NUL-terminated address string.
///
/// # Safety
/// `s` is NULL or points to a NUL-terminated string.
unsafe fn transport_addr(s: *const c_char) -> Result<TransportAddr> {
    if s.is_null() {
        return Err(null("the address"));
    }
    // SAFETY: non-null and NUL-terminated per the caller.
    let s = unsafe { CStr::from_ptr(s) };
    let s = s
        .to_str()
        .map_err(|_| invalid("the address is not UTF-8"))?;
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok(a.into());
    }
    s.parse::<TransportAddr>()
        .map_err(|e| invalid(format!("bad address {s:?}: {e}")))
}

/// The MPA settings of a connection.
///
/// # Safety
/// `p` is NULL or points to a `softrnic_conn_param` whose `private_data` is valid for
/// `private_data_len` bytes (or NULL with length 0).
unsafe fn conn_config(p: *const softrnic_conn_param) -> Result<MpaConfig> {
    let mut cfg = MpaConfig::default();
    if p.is_null() {
        return Ok(cfg);
    }
    // SAFETY: non-null and valid per the caller; plain integers and a pointer.
    let p = unsafe { p.read() };
    cfg.ird = p.ird;
    cfg.ord = p.ord;
    if p.private_data_len > 0 {
        if p.private_data.is_null() {
            return Err(null("private_data (with private_data_len > 0)"));
        }
        // SAFETY: non-null and valid for private_data_len bytes per the caller.
        let pd = unsafe { std::slice::from_raw_parts(p.private_data, p.private_data_len as usize) };
        cfg.private_data = pd.to_vec();
    }
    Ok(cfg)
}

fn same_rnic(a: &Arc<RnicObj>, b: &Arc<RnicObj>, what: &str) -> Result<()> {
    if Arc::ptr_eq(a, b) {
        Ok(())
    } else {
        Err(invalid(format!("{what} belong to different RNICs")))
    }
}

fn wc_to_c(w: &Wc) -> softrnic_wc {
    use softrnic_wc_opcode::*;
    use softrnic_wc_status::*;
    let mut flags = 0;
    if w.imm_data.is_some() {
        flags |= SOFTRNIC_WC_WITH_IMM;
    }
    if w.invalidated_stag.is_some() {
        flags |= SOFTRNIC_WC_WITH_INV;
    }
    if w.solicited {
        flags |= SOFTRNIC_WC_SOLICITED;
    }
    softrnic_wc {
        wr_id: w.wr_id,
        status: match w.status {
            WcStatus::Success => SOFTRNIC_WC_SUCCESS,
            WcStatus::LocalLength => SOFTRNIC_WC_LOCAL_LENGTH,
            WcStatus::LocalProtection => SOFTRNIC_WC_LOCAL_PROTECTION,
            WcStatus::LocalQpOperation => SOFTRNIC_WC_LOCAL_QP_OPERATION,
            WcStatus::RemoteAccess => SOFTRNIC_WC_REMOTE_ACCESS,
            WcStatus::RemoteOperation => SOFTRNIC_WC_REMOTE_OPERATION,
            WcStatus::Transport => SOFTRNIC_WC_TRANSPORT,
            WcStatus::Fatal => SOFTRNIC_WC_FATAL,
            WcStatus::Flushed => SOFTRNIC_WC_FLUSHED,
        },
        opcode: match w.opcode {
            WcOpcode::Send => SOFTRNIC_WC_SEND,
            WcOpcode::RdmaWrite => SOFTRNIC_WC_RDMA_WRITE,
            WcOpcode::RdmaRead => SOFTRNIC_WC_RDMA_READ,
            WcOpcode::FetchAdd => SOFTRNIC_WC_FETCH_ADD,
            WcOpcode::CmpSwap => SOFTRNIC_WC_CMP_SWAP,
            WcOpcode::ImmediateData => SOFTRNIC_WC_IMM_DATA,
            WcOpcode::LocalInvalidate => SOFTRNIC_WC_LOCAL_INV,
            WcOpcode::FastRegister => SOFTRNIC_WC_FAST_REG,
            WcOpcode::BindWindow => SOFTRNIC_WC_BIND_MW,
            WcOpcode::Recv => SOFTRNIC_WC_RECV,
        },
        byte_len: w.byte_len,
        qp_id: w.qp.0,
        flags,
        invalidated_stag: w.invalidated_stag.unwrap_or(0),
        imm_data: w.imm_data.unwrap_or([0; 8]),
    }
}

/// The most completions one poll moves.
const POLL_CHUNK: u32 = 4096;

/// Polls into C's array.
///
/// # Safety
/// `wc` is NULL or valid for writes of `max` `softrnic_wc`s.
unsafe fn poll_into(
    wc: *mut softrnic_wc,
    max: u32,
    poll: impl FnOnce(&mut [Wc]) -> Result<usize>,
) -> Result<c_int> {
    if max == 0 {
        return Ok(0);
    }
    if wc.is_null() {
        return Err(null("the completion array"));
    }
    let mut buf = vec![verbs::empty_wc(); max.min(POLL_CHUNK) as usize];
    let n = poll(&mut buf)?;
    for (i, w) in buf[..n].iter().enumerate() {
        // SAFETY: i < n <= max, and the caller vouches that wc has room for max entries;
        // `write` does not read the (possibly uninitialised) old value.
        unsafe { wc.add(i).write(wc_to_c(w)) };
    }
    Ok(n as c_int)
}

// ------------------------------------------------------------------------ errors

/// A static description of a status code ("unknown status code" for a number that is
/// none). Never NULL.
#[unsafe(no_mangle)]
pub extern "C" fn softrnic_strerror(code: c_int) -> *const c_char {
    softrnic_status::from_code(code)
        .map_or(c"unknown status code", softrnic_status::text)
        .as_ptr()
}

/// The full message of the calling thread's last error ("" before the first). Calls that
/// succeed leave it alone. The string stays valid until this thread's next failing call.
/// Never NULL.
#[unsafe(no_mangle)]
pub extern "C" fn softrnic_last_error() -> *const c_char {
    error::last_error_ptr()
}

// ------------------------------------------------------------------------ RNIC

/// `rnic_open`: opens an RNIC into `*out`. `flags`: 0 (a progress thread, with inline
/// progress), `SOFTRNIC_RNIC_MANUAL_PROGRESS`, or `SOFTRNIC_RNIC_NO_INLINE_PROGRESS`.
///
/// # Safety
/// `out` is NULL (an error) or valid for a write of a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn softrnic_rnic_open(flags: u32, out: *mut *mut softrnic_rnic) -> c_int {
    guard_ok(|| {
        if out.is_null() {
            return Err(null("out"));
        }
        let known = SOFTRNIC_RNIC_MANUAL_PROGRESS | SOFTRNIC_RNIC_NO_INLINE_PROGRESS;
        if flags & !known != 0 {
            return Err(invalid(format!("unknown RNIC flags {:#x}", flags & !known)));
        }
        let cfg = RnicConfig {
            progress: if flags & SOFTRNIC_RNIC_MANUAL_PROGRESS != 0 {
                ProgressMode::Manual
            } else {
                ProgressMode::Thread
            },
            inline_progress: flags & SOFTRNIC_RNIC_NO_INLINE_PROGRESS == 0,
            ..RnicConfig::default()
        };
        let rnic = verbs::rnic_open(cfg)?;
        let h = insert(None, Arc::new(RnicObj { rnic }));
        // SAFETY: `out` is non-null and valid for a write per the caller.
        unsafe { put(out, h, "out") }
    })
}

/// `rnic_close`: aborts every connection, flushes outstanding work, stops the progress
/// thread and invalidates the handles of every PD, CQ, QP, region and listener of the
/// RNIC. Call it when no other thread is inside a call on the RNIC's objects (the RNIC
/// then closes before this returns; otherwise when the last such call returns).
#[unsafe(no_mangle)]
pub extern "C" fn softrnic_rnic_close(rnic: *mut softrnic_rnic) -> c_int {
    guard_ok(|| {
        let r = handles::remove_rnic(rnic)?;
        drop(r);
        Ok(())
    })
}

/// `rnic_advance`: in manual-progress mode, runs the progress engine once, waiting up to
/// `timeout_ms` (negative: without limit) for socket activity. Returns the work done
/// (>= 0).
#[unsafe(no_mangle)]
pub extern "C" fn softrnic_rnic_advance(rnic: *mut softrnic_rnic, timeout_ms: c_int) -> c_int {
    guard(|| {
        let (r, _) = get::<RnicObj>(rnic)?;
        let n = r.rnic.advance(timeout(timeout_ms))?;
        Ok(c_int::try_from(n).unwrap_or(c_int::MAX))
    })
}

/// `rnic_assist`: the polling application's share of progress. With a progress thread
/// (and without `SOFTRNIC_RNIC_NO_INLINE_PROGRESS`), runs the thread's pass in the calling
/// thread when the thread sleeps; called again and again (less than a millisecond apart),
/// it takes over the sockets: the thread stops watching them, arrivals are placed by these
/// calls and posts transmit in the posting thread, until the calls stop for 10 ms or
/// `softrnic_rnic_end_assist`. For a loop that polls memory rather than a CQ (the RDMA
/// Write ping-pong). In manual-progress mode it is `softrnic_rnic_advance(rnic, 0)`.
/// Returns the work done (>= 0).
#[unsafe(no_mangle)]
pub extern "C" fn softrnic_rnic_assist(rnic: *mut softrnic_rnic) -> c_int {
    guard(|| {
        let (r, _) = get::<RnicObj>(rnic)?;
        let n = r.rnic.as_stack().assist();
        Ok(c_int::try_from(n).unwrap_or(c_int::MAX))
    })
}

/// `rnic_end_assist`: ends what `softrnic_rnic_assist` started, before the application
/// stops polling (to block, say): a sleeping progress thread watches its sockets again at
/// once. `softrnic_cq_poll_block` and `softrnic_cq_arm` do this themselves.
#[unsafe(no_mangle)]
pub extern "C" fn softrnic_rnic_end_assist(rnic: *mut softrnic_rnic) -> c_int {
    guard_ok(|| {
        let (r, _) = get::<RnicObj>(rnic)?;
        r.rnic.as_stack().end_assist();
        Ok(())
    })
}

/// `rnic_progress_stats`: where the RNIC's progress was made so far, into `*out`.
///
/// # Safety
/// `out` is NULL (an error) or valid for a write of a `softrnic_progress_stats`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn softrnic_rnic_progress_stats(
    rnic: *mut softrnic_rnic,
    out: *mut softrnic_progress_stats,
) -> c_int {
    guard_ok(|| {
        let (r, _) = get::<RnicObj>(rnic)?;
        let s = r.rnic.as_stack().progress_stats();
        let stats = softrnic_progress_stats {
            inline_posts: s.inline_posts,
            assisted_work: s.assisted_work,
            thread_sleeps: s.thread_sleeps,
            thread_leased_sleeps: s.thread_leased_sleeps,
        };
        // SAFETY: `out` is NULL (an error) or valid for a write per the caller.
        unsafe { put(out, stats, "out") }
    })
}

// ------------------------------------------------------------------------ PDs

/// `pd_allocate`: a protection domain into `*out`.
///
/// # Safety
/// `out` is NULL (an error) or valid for a write of a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn softrnic_pd_allocate(
    rnic: *mut softrnic_rnic,
    out: *mut *mut softrnic_pd,
) -> c_int {
    guard_ok(|| {
        let (r, rid) = get::<RnicObj>(rnic)?;
        if out.is_null() {
            return Err(null("out"));
        }
        let pd = r.rnic.pd_allocate();
        let h = insert(Some(rid), Arc::new(PdObj { rnic: r, pd }));
        // SAFETY: `out` is non-null and valid for a write per the caller.
        unsafe { put(out, h, "out") }
    })
}

/// `pd_deallocate`: fails with `SOFTRNIC_ERR_BUSY` while regions or QPs use the PD.
#[unsafe(no_mangle)]
pub extern "C" fn softrnic_pd_deallocate(pd: *mut softrnic_pd) -> c_int {
    guard_ok(|| {
        let (p, _) = get::<PdObj>(pd)?;
        p.rnic.rnic.pd_deallocate(p.pd)?;
        remove::<PdObj>(pd);
        Ok(())
    })
}

// ------------------------------------------------------------------------ memory

fn register(
    p: &Arc<PdObj>,
    rid: usize,
    buf: &Arc<RegisteredBuf>,
    acc: Access,
    caller_mem: bool,
) -> Result<*mut softrnic_mr> {
    let mr = p.rnic.rnic.nsmr_register_buf(
        p.pd,
        buf,
        0..buf.len(),
        acc,
        verbs::Addressing::VirtualAddress,
    )?;
    Ok(insert(
        Some(rid),
        Arc::new(MrObj {
            rnic: p.rnic.clone(),
            mr,
            caller_mem,
        }),
    ))
}

/// `nsmr_register`: allocates `len` zeroed, page-aligned bytes and registers them
/// (VA-based) in `pd` with `access` (`SOFTRNIC_ACCESS_*`). The memory belongs to the
/// library and is freed when the region is deregistered (or the RNIC closed) and no
/// posted work request names it.
///
/// # Safety
/// `out` is NULL (an error) or valid for a write of a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn softrnic_nsmr_register(
    pd: *mut softrnic_pd,
    len: usize,
    access: u32,
    out: *mut *mut softrnic_mr,
) -> c_int {
    guard_ok(|| {
        let (p, rid) = get::<PdObj>(pd)?;
        let acc = self::access(access)?;
        if out.is_null() {
            return Err(null("out"));
        }
        let buf = RegisteredBuf::try_new(len)?;
        let h = register(&p, rid, &buf, acc, false)?;
        // SAFETY: `out` is non-null and valid for a write per the caller.
        unsafe { put(out, h, "out") }
    })
}

/// `nsmr_register` of the caller's memory: registers the `len` bytes at `addr`
/// (VA-based: Tagged Offsets are addresses) in `pd` with `access`.
///
/// # Safety
/// * `addr` must be valid for reads and writes of `len` bytes (not NULL unless `len` is
///   0) and stay valid, unmoved and unfreed until `softrnic_deregister_mem` of the region
///   returned `SOFTRNIC_OK`, or else until `softrnic_rnic_close` of its RNIC returned: the
///   library reads and writes it from its progress thread (posted work, the peer's RDMA
///   Writes and Reads).
/// * While registered the memory may change at any time (peer RDMA Writes, received
///   messages, RDMA Read responses): read it only after a completion says it is placed.
/// * `out` is NULL (an error) or valid for a write of a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn softrnic_nsmr_register_mem(
    pd: *mut softrnic_pd,
    addr: *mut c_void,
    len: usize,
    access: u32,
    out: *mut *mut softrnic_mr,
) -> c_int {
    guard_ok(|| {
        let (p, rid) = get::<PdObj>(pd)?;
        let acc = self::access(access)?;
        if out.is_null() {
            return Err(null("out"));
        }
        if addr.is_null() && len > 0 {
            return Err(null("addr (with len > 0)"));
        }
        if isize::try_from(len).is_err() || (addr as usize).checked_add(len).is_none() {
            return Err(Error::new(
                SOFTRNIC_ERR_RANGE,
                format!("{len} bytes at {addr:p} wrap the address space"),
            ));
        }
        // SAFETY: the caller guarantees (see `# Safety`) that `addr` is valid for reads and
        // writes of `len` bytes until it is deregistered with no work left naming it or the
        // RNIC closes, which is how long the stack holds the buffer; the library touches it
        // only through RegisteredBuf's raw copies, never through Rust references; non-null
        // unless `len` is 0.
        let buf = unsafe { RegisteredBuf::from_raw(addr.cast::<u8>(), len) };
        let h = register(&p, rid, &buf, acc, true)?;
        // SAFETY: `out` is non-null and valid for a write per the caller.
        unsafe { put(out, h, "out") }
    })
}

/// Reports a region's STag, rights, Tagged Offset base, length and address.
///
/// # Safety
/// `out` is NULL (an error) or valid for a write of a `softrnic_mr_info`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn softrnic_mr_query(
    mr: *const softrnic_mr,
    out: *mut softrnic_mr_info,
) -> c_int {
    guard_ok(|| {
        let (m, _) = get::<MrObj>(mr)?;
        let r = &m.mr;
        let addr = r.buf().addr() as usize + r.buf_offset();
        let info = softrnic_mr_info {
            stag: r.stag(),
            access: u32::from(r.access().bits()),
            base_to: r.base_to(),
            length: r.len(),
            // The buffer's address was exposed when RegisteredBuf::addr cast it to an
            // integer; C may read and write through it.
            addr: std::ptr::with_exposed_provenance_mut(addr),
        };
        // SAFETY: `out` is non-null and valid for a write per the caller.
        unsafe { put(out, info, "out") }
    })
}

/// Copies `len` bytes from `src` into the region at byte `offset` (bounds-checked).
///
/// # Safety
/// `src` is NULL (an error unless `len` is 0) or valid for reads of `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn softrnic_mr_write(
    mr: *mut softrnic_mr,
    offset: usize,
    src: *const c_void,
    len: usize,
) -> c_int {
    guard_ok(|| {
        let (m, _) = get::<MrObj>(mr)?;
        if !check_copy(&m, offset, len, src.is_null(), "src")? {
            return Ok(());
        }
        // Copied through a staging buffer by raw copy: `src` may itself be registered
        // memory the progress thread writes, which a Rust slice must not alias.
        let mut tmp = vec![0u8; len];
        // SAFETY: `src` is non-null and valid for `len` bytes per the caller; `tmp` is a
        // fresh allocation of `len` bytes, so the two do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(src.cast::<u8>(), tmp.as_mut_ptr(), len) };
        m.mr.buf().write_at(m.mr.buf_offset() + offset, &tmp)?;
        Ok(())
    })
}

/// Copies `len` bytes of the region at byte `offset` into `dst` (bounds-checked).
///
/// # Safety
/// `dst` is NULL (an error unless `len` is 0) or valid for writes of `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn softrnic_mr_read(
    mr: *const softrnic_mr,
    offset: usize,
    dst: *mut c_void,
    len: usize,
) -> c_int {
    guard_ok(|| {
        let (m, _) = get::<MrObj>(mr)?;
        if !check_copy(&m, offset, len, dst.is_null(), "dst")? {
            return Ok(());
        }
        let mut tmp = vec![0u8; len];
        m.mr.buf().read_at(m.mr.buf_offset() + offset, &mut tmp)?;
        // SAFETY: `dst` is non-null and valid for writes of `len` bytes per the caller;
        // `tmp` is our own allocation of `len` bytes, so the two do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(tmp.as_ptr(), dst.cast::<u8>(), len) };
        Ok(())
    })
}

/// Checks a copy of `len` bytes at byte `offset` of `m` through the caller's pointer
/// `what` (`is_null`: it is NULL, which only a copy of nothing may be); false when there is
/// nothing to copy.
fn check_copy(m: &MrObj, offset: usize, len: usize, is_null: bool, what: &str) -> Result<bool> {
    if len == 0 {
        return Ok(false);
    }
    if is_null {
        return Err(null(what));
    }
    check_range(m, offset, len)?;
    Ok(true)
}

fn check_range(m: &MrObj, offset: usize, len: usize) -> Result<()> {
    match offset.checked_add(len) {
        Some(end) if end as u64 <= m.mr.len() => Ok(()),
        _ => Err(Error::new(
            SOFTRNIC_ERR_RANGE,
            format!(
                "{len} bytes at offset {offset} lie outside the {}-byte region",
                m.mr.len()
            ),
        )),
    }
}

/// How long `softrnic_deregister_mem` waits for in-flight work to let go of caller memory.
const RELEASE_WAIT: Duration = Duration::from_secs(1);

/// `smr_register` (RDMA Verbs "Register Shared Memory Region"): registers the memory of
/// `mr` again, in `pd` (of the same RNIC) with `access` (`SOFTRNIC_ACCESS_*`), under a new
/// STag (VA-based, like every region of the C ABI). The two registrations are independent:
/// each has its own rights and is deregistered on its own; caller memory stays in use until
/// the last of them is deregistered.
///
/// # Safety
/// `out` is NULL (an error) or valid for a write of a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn softrnic_smr_register(
    mr: *mut softrnic_mr,
    pd: *mut softrnic_pd,
    access: u32,
    out: *mut *mut softrnic_mr,
) -> c_int {
    guard_ok(|| {
        let (m, _) = get::<MrObj>(mr)?;
        let (p, rid) = get::<PdObj>(pd)?;
        if !Arc::ptr_eq(&m.rnic, &p.rnic) {
            return Err(invalid("the region and the PD belong to different RNICs"));
        }
        let acc = self::access(access)?;
        if out.is_null() {
            return Err(null("out"));
        }
        let shared =
            p.rnic
                .rnic
                .smr_register(&m.mr, p.pd, acc, verbs::Addressing::VirtualAddress)?;
        let h = insert(
            Some(rid),
            Arc::new(MrObj {
                rnic: p.rnic.clone(),
                mr: shared,
                caller_mem: m.caller_mem,
            }),
        );
        // SAFETY: `out` is non-null and valid for a write per the caller.
        unsafe { put(out, h, "out") }
    })
}

/// `nsmr_reregister` (RDMA Verbs "Reregister Memory Region", ibverbs' `ibv_rereg_mr`):
/// changes region `mr` in place — its protection domain to `pd` with `SOFTRNIC_REREG_PD`
/// (`pd` is ignored without it and may be NULL), its rights to `access` with
/// `SOFTRNIC_REREG_ACCESS`. The handle and the STag stay; `softrnic_mr_query` shows the new
/// values. Refused while memory windows are bound to the region (`SOFTRNIC_ERR_BUSY`);
/// on error nothing changes. (New memory is a new registration: deregister, register.)
#[unsafe(no_mangle)]
pub extern "C" fn softrnic_nsmr_reregister(
    mr: *mut softrnic_mr,
    flags: u32,
    pd: *mut softrnic_pd,
    access: u32,
) -> c_int {
    guard_ok(|| {
        let (m, _) = get::<MrObj>(mr)?;
        if flags & !(SOFTRNIC_REREG_PD | SOFTRNIC_REREG_ACCESS) != 0 {
            return Err(invalid(format!("unknown reregister flags {flags:#x}")));
        }
        let mut change = verbs::Rereg::default();
        if flags & SOFTRNIC_REREG_PD != 0 {
            let (p, _) = get::<PdObj>(pd)?;
            if !Arc::ptr_eq(&m.rnic, &p.rnic) {
                return Err(invalid("the region and the PD belong to different RNICs"));
            }
            change.pd = Some(p.pd);
        }
        if flags & SOFTRNIC_REREG_ACCESS != 0 {
            change.access = Some(self::access(access)?);
        }
        let new = m.rnic.rnic.nsmr_reregister(&m.mr, change)?;
        handles::replace::<MrObj>(
            mr,
            Arc::new(MrObj {
                rnic: m.rnic.clone(),
                mr: new,
                caller_mem: m.caller_mem,
            }),
        );
        Ok(())
    })
}

/// `deregister_mem`: removes the registration and invalidates the handle.
///
/// For the caller's memory (`softrnic_nsmr_register_mem`) it then waits (up to a second)
/// until no posted or in-flight work of the library holds the memory: `SOFTRNIC_OK` means
/// the program may free it now. `SOFTRNIC_ERR_BUSY` after a successful deregistration
/// (the handle is gone all the same) means work still holds it (a receive or RDMA Read
/// still posted into it, a QP that used it not yet destroyed): keep the memory until that
/// work completes and its QP is destroyed, or until `softrnic_rnic_close` returned.
#[unsafe(no_mangle)]
pub extern "C" fn softrnic_deregister_mem(mr: *mut softrnic_mr) -> c_int {
    guard_ok(|| {
        let (m, _) = get::<MrObj>(mr)?;
        m.rnic.rnic.deregister_mem(&m.mr)?;
        remove::<MrObj>(mr);
        if m.caller_mem {
            // The table no longer hands the buffer out, so the count only falls: once this
            // region's reference is the last, nothing in the stack can touch the memory.
            // Other registrations of the same memory (softrnic_smr_register) keep it: each
            // holds it twice (its handle and the STag table).
            let others = handles::regions_sharing(m.mr.buf());
            let start = std::time::Instant::now();
            while Arc::strong_count(m.mr.buf()) > 1 + 2 * others {
                if start.elapsed() > RELEASE_WAIT {
                    return Err(Error::new(
                        SOFTRNIC_ERR_BUSY,
                        "region deregistered, but posted or in-flight work still holds its \
                         memory: keep it until that work completes and its QP is destroyed, or \
                         until the RNIC is closed",
                    ));
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        Ok(())
    })
}

/// `deallocate_stag`: releases an STag of `rnic` that was invalidated (by a Local
/// Invalidate or a peer's Send with Invalidate); the handle of its region becomes invalid.
/// `SOFTRNIC_ERR_UNKNOWN_STAG` for an STag not registered there, `SOFTRNIC_ERR_STAG_VALID`
/// for one still valid.
#[unsafe(no_mangle)]
pub extern "C" fn softrnic_deallocate_stag(rnic: *mut softrnic_rnic, stag: u32) -> c_int {
    guard_ok(|| {
        let (r, rid) = get::<RnicObj>(rnic)?;
        r.rnic.deallocate_stag(stag)?;
        handles::remove_mrs_of_stag(rid, stag >> 8);
        Ok(())
    })
}

// ------------------------------------------------------------------------ CQs

/// `cq_create`: a CQ of `depth` entries (1 .. 2^22) into `*out`.
///
/// # Safety
/// `out` is NULL (an error) or valid for a write of a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn softrnic_cq_create(
    rnic: *mut softrnic_rnic,
    depth: u32,
    out: *mut *mut softrnic_cq,
) -> c_int {
    guard_ok(|| {
        let (r, rid) = get::<RnicObj>(rnic)?;
        if out.is_null() {
            return Err(null("out"));
        }
        let cq = r.rnic.cq_create(depth as usize)?;
        let h = insert(Some(rid), Arc::new(CqObj { rnic: r, cq }));
        // SAFETY: `out` is non-null and valid for a write per the caller.
        unsafe { put(out, h, "out") }
    })
}

/// `channel_create` (ibverbs' `ibv_create_comp_channel`): a completion channel of `rnic`.
/// Its file descriptor (`softrnic_channel_fd`) becomes readable when an armed CQ on it
/// gets a completion; `softrnic_channel_get_cq` then names the CQ.
///
/// # Safety
/// `out` is NULL (an error) or valid for a write of a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn softrnic_channel_create(
    rnic: *mut softrnic_rnic,
    out: *mut *mut softrnic_channel,
) -> c_int {
    guard_ok(|| {
        let (r, rid) = get::<RnicObj>(rnic)?;
        if out.is_null() {
            return Err(null("out"));
        }
        let channel = r.rnic.channel_create()?;
        let h = insert(
            Some(rid),
            Arc::new(ChannelObj {
                rnic: r,
                channel,
                pending: Default::default(),
            }),
        );
        // SAFETY: `out` is non-null and valid for a write per the caller.
        unsafe { put(out, h, "out") }
    })
}

/// The channel's file descriptor, for `poll`/`epoll` (readable while a signal is pending);
/// the library owns it. Returns the descriptor, or a negative status.
#[unsafe(no_mangle)]
pub extern "C" fn softrnic_channel_fd(channel: *mut softrnic_channel) -> c_int {
    guard(|| {
        use std::os::fd::{AsFd, AsRawFd};
        let (c, _) = get::<ChannelObj>(channel)?;
        Ok(c.channel.as_fd().as_raw_fd())
    })
}

/// `get_cq_event` (ibverbs' `ibv_get_cq_event`): waits up to `timeout_ms` (negative:
/// forever) for the channel to be signalled and stores the CQ that fired in `*cq` (several
/// CQs that fired are returned by successive calls). `SOFTRNIC_ERR_TIMEOUT` when none did.
/// Arm the CQ again (`softrnic_cq_arm`) and poll it after this.
///
/// # Safety
/// `cq` is NULL (an error) or valid for a write of a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn softrnic_channel_get_cq(
    channel: *mut softrnic_channel,
    timeout_ms: c_int,
    cq: *mut *mut softrnic_cq,
) -> c_int {
    guard_ok(|| {
        let (c, rid) = get::<ChannelObj>(channel)?;
        if cq.is_null() {
            return Err(null("cq"));
        }
        let start = std::time::Instant::now();
        let limit = timeout(timeout_ms);
        loop {
            let next = {
                let mut pending = c.pending.lock().unwrap_or_else(|p| p.into_inner());
                if pending.is_empty() {
                    pending.extend(c.channel.get_events());
                }
                pending.pop_front()
            };
            if let Some(id) = next {
                let h = handles::cq_handle(rid, id);
                if h.is_null() {
                    // The CQ was destroyed since it fired.
                    continue;
                }
                // SAFETY: `cq` is non-null and valid for a write per the caller.
                return unsafe { put(cq, h, "cq") };
            }
            let left = limit.saturating_sub(start.elapsed());
            if left.is_zero() || !c.channel.wait(left.min(Duration::from_secs(3600))) {
                return Err(Error::new(
                    SOFTRNIC_ERR_TIMEOUT,
                    format!("no completion event within {timeout_ms} ms"),
                ));
            }
        }
    })
}

/// Destroys a completion channel; `SOFTRNIC_ERR_BUSY` while CQs use it.
#[unsafe(no_mangle)]
pub extern "C" fn softrnic_channel_destroy(channel: *mut softrnic_channel) -> c_int {
    guard_ok(|| {
        let (c, _) = get::<ChannelObj>(channel)?;
        let cqs = handles::cqs_on_channel(&c.channel);
        if cqs > 0 {
            return Err(Error::new(
                SOFTRNIC_ERR_BUSY,
                format!("{cqs} CQ(s) still use the completion channel: destroy them first"),
            ));
        }
        remove::<ChannelObj>(channel);
        Ok(())
    })
}

/// `cq_create` of a CQ attached to `channel` (of the same RNIC).
///
/// # Safety
/// `out` is NULL (an error) or valid for a write of a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn softrnic_cq_create_with_channel(
    rnic: *mut softrnic_rnic,
    depth: u32,
    channel: *mut softrnic_channel,
    out: *mut *mut softrnic_cq,
) -> c_int {
    guard_ok(|| {
        let (r, rid) = get::<RnicObj>(rnic)?;
        let (c, _) = get::<ChannelObj>(channel)?;
        same_rnic(&r, &c.rnic, "the RNIC and the channel")?;
        if out.is_null() {
            return Err(null("out"));
        }
        let cq = r.rnic.cq_create_with_channel(depth as usize, &c.channel)?;
        let h = insert(Some(rid), Arc::new(CqObj { rnic: r, cq }));
        // SAFETY: `out` is non-null and valid for a write per the caller.
        unsafe { put(out, h, "out") }
    })
}

/// `cq_arm` (ibverbs' `ibv_req_notify_cq`): the CQ's channel is signalled once, for the next
/// completion (`solicited_only` 0) or the next solicited or error completion (non-zero).
/// Poll the CQ after arming: a completion already queued signals nothing. A CQ without a
/// channel is refused.
#[unsafe(no_mangle)]
pub extern "C" fn softrnic_cq_arm(cq: *mut softrnic_cq, solicited_only: c_int) -> c_int {
    guard_ok(|| {
        let (c, _) = get::<CqObj>(cq)?;
        if !c.cq.has_channel() {
            return Err(invalid("the CQ has no completion channel"));
        }
        let arm = if solicited_only != 0 {
            Arm::Solicited
        } else {
            Arm::NextCompletion
        };
        c.rnic.rnic.cq_arm(&c.cq, arm);
        Ok(())
    })
}

/// `cq_destroy`: fails with `SOFTRNIC_ERR_BUSY` while QPs use the CQ.
#[unsafe(no_mangle)]
pub extern "C" fn softrnic_cq_destroy(cq: *mut softrnic_cq) -> c_int {
    guard_ok(|| {
        let (c, _) = get::<CqObj>(cq)?;
        c.rnic.rnic.cq_destroy(&c.cq)?;
        remove::<CqObj>(cq);
        Ok(())
    })
}

/// `cq_poll`: moves up to `max` completions (at most 4096 a call) into `wc`; returns how
/// many (0 when none is waiting).
///
/// # Safety
/// `wc` is NULL (an error unless `max` is 0) or valid for writes of `max` entries.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn softrnic_cq_poll(
    cq: *mut softrnic_cq,
    wc: *mut softrnic_wc,
    max: u32,
) -> c_int {
    guard(|| {
        let (c, _) = get::<CqObj>(cq)?;
        // SAFETY: `wc` has room for `max` entries per the caller.
        unsafe { poll_into(wc, max, |out| Ok(c.rnic.rnic.cq_poll(&c.cq, out))) }
    })
}

/// `cq_poll_block`: waits up to `timeout_ms` (negative: without limit) for a completion,
/// then moves up to `max` into `wc`; returns how many (>= 1), or `SOFTRNIC_ERR_TIMEOUT`.
///
/// # Safety
/// `wc` is NULL (an error unless `max` is 0) or valid for writes of `max` entries.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn softrnic_cq_poll_block(
    cq: *mut softrnic_cq,
    wc: *mut softrnic_wc,
    max: u32,
    timeout_ms: c_int,
) -> c_int {
    guard(|| {
        let (c, _) = get::<CqObj>(cq)?;
        let t = timeout(timeout_ms);
        // SAFETY: `wc` has room for `max` entries per the caller.
        unsafe {
            poll_into(wc, max, |out| {
                Ok(c.rnic.rnic.cq_poll_block(&c.cq, out, t)?)
            })
        }
    })
}

// ------------------------------------------------------------------------ QPs

/// `qp_create`: a QP in `pd` with its send and receive CQs (may be the same; all of one
/// RNIC) and sizes `attr` (NULL: defaults) into `*out`.
///
/// # Safety
/// `attr` is NULL or points to a `softrnic_qp_attr`; `out` is NULL (an error) or valid
/// for a write of a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn softrnic_qp_create(
    pd: *mut softrnic_pd,
    send_cq: *mut softrnic_cq,
    recv_cq: *mut softrnic_cq,
    attr: *const softrnic_qp_attr,
    out: *mut *mut softrnic_qp,
) -> c_int {
    // SAFETY: forwarded from the caller's guarantees.
    guard_ok(|| unsafe { create_qp(pd, send_cq, recv_cq, None, attr, out) })
}

/// `qp_create` of a QP that takes its receives from `srq` (of the same PD) and has no
/// receive queue of its own (`softrnic_qp_post_rq` on it fails).
///
/// # Safety
/// As `softrnic_qp_create`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn softrnic_qp_create_with_srq(
    pd: *mut softrnic_pd,
    send_cq: *mut softrnic_cq,
    recv_cq: *mut softrnic_cq,
    srq: *mut softrnic_srq,
    attr: *const softrnic_qp_attr,
    out: *mut *mut softrnic_qp,
) -> c_int {
    guard_ok(|| {
        let (s, _) = get::<SrqObj>(srq)?;
        // SAFETY: forwarded from the caller's guarantees.
        unsafe { create_qp(pd, send_cq, recv_cq, Some(&s), attr, out) }
    })
}

/// `qp_create`, on an SRQ or not.
///
/// # Safety
/// As `softrnic_qp_create`.
unsafe fn create_qp(
    pd: *mut softrnic_pd,
    send_cq: *mut softrnic_cq,
    recv_cq: *mut softrnic_cq,
    srq: Option<&SrqObj>,
    attr: *const softrnic_qp_attr,
    out: *mut *mut softrnic_qp,
) -> Result<()> {
    let (p, rid) = get::<PdObj>(pd)?;
    let (scq, _) = get::<CqObj>(send_cq)?;
    let (rcq, _) = get::<CqObj>(recv_cq)?;
    same_rnic(&p.rnic, &scq.rnic, "the PD and the send CQ")?;
    same_rnic(&p.rnic, &rcq.rnic, "the PD and the receive CQ")?;
    if let Some(s) = srq {
        same_rnic(&p.rnic, &s.rnic, "the PD and the SRQ")?;
    }
    if out.is_null() {
        return Err(null("out"));
    }
    let mut caps = QpCaps::default();
    if !attr.is_null() {
        // SAFETY: non-null, and the caller vouches it points to a softrnic_qp_attr
        // (plain integers).
        let a = unsafe { attr.read() };
        let or = |v: u32, d: usize| if v == 0 { d } else { v as usize };
        caps.sq_depth = or(a.sq_depth, caps.sq_depth);
        caps.rq_depth = or(a.rq_depth, caps.rq_depth);
        caps.max_sge = or(a.max_sge, caps.max_sge);
        caps.first_fpdu_delay = Duration::from_millis(u64::from(a.first_fpdu_delay_ms));
    }
    let qp = match srq {
        Some(s) => p
            .rnic
            .rnic
            .qp_create_with_srq(p.pd, &scq.cq, &rcq.cq, caps, &s.srq)?,
        None => p.rnic.rnic.qp_create(p.pd, &scq.cq, &rcq.cq, caps)?,
    };
    let h = insert(
        Some(rid),
        Arc::new(QpObj {
            rnic: p.rnic.clone(),
            qp,
        }),
    );
    // SAFETY: `out` is non-null and valid for a write per the caller.
    unsafe { put(out, h, "out") }
}

/// `srq_create` (ibverbs' `ibv_create_srq`): a shared receive queue in `pd` holding up to
/// `depth` receives of at most `max_sge` elements each.
///
/// # Safety
/// `out` is NULL (an error) or valid for a write of a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn softrnic_srq_create(
    pd: *mut softrnic_pd,
    depth: u32,
    max_sge: u32,
    out: *mut *mut softrnic_srq,
) -> c_int {
    guard_ok(|| {
        let (p, rid) = get::<PdObj>(pd)?;
        if out.is_null() {
            return Err(null("out"));
        }
        let srq = p
            .rnic
            .rnic
            .srq_create(p.pd, depth as usize, max_sge as usize)?;
        let h = insert(
            Some(rid),
            Arc::new(SrqObj {
                rnic: p.rnic.clone(),
                srq,
            }),
        );
        // SAFETY: `out` is non-null and valid for a write per the caller.
        unsafe { put(out, h, "out") }
    })
}

/// The SRQ's id (as `SOFTRNIC_EVENT_SRQ_LIMIT` names it).
///
/// # Safety
/// `out` is NULL (an error) or valid for a write of a `uint32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn softrnic_srq_id(srq: *const softrnic_srq, out: *mut u32) -> c_int {
    guard_ok(|| {
        let (s, _) = get::<SrqObj>(srq)?;
        // SAFETY: valid for a write (or NULL) per the caller.
        unsafe { put(out, s.srq.id().0, "out") }
    })
}

/// `srq_post_recv`: posts a receive to the SRQ; any QP created on it may take it.
///
/// # Safety
/// `wr` is NULL (an error) or points to a `softrnic_recv_wr` whose `sg_list` is valid for
/// `num_sge` elements (or NULL with `num_sge` 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn softrnic_srq_post_recv(
    srq: *mut softrnic_srq,
    wr: *const softrnic_recv_wr,
) -> c_int {
    guard_ok(|| {
        let (s, _) = get::<SrqObj>(srq)?;
        if wr.is_null() {
            return Err(null("wr"));
        }
        // SAFETY: non-null and pointing to a softrnic_recv_wr per the caller.
        let wr = unsafe { wr.read() };
        // SAFETY: the SGL is valid for `num_sge` elements per the caller.
        let sges = unsafe { sgl(wr.sg_list, wr.num_sge) }?;
        s.rnic
            .rnic
            .srq_post_recv(&s.srq, RecvWr::new(wr.wr_id, sges))?;
        Ok(())
    })
}

/// Arms the SRQ limit (ibverbs' `srq_limit`): once a take leaves fewer than `limit`
/// receives, one `SOFTRNIC_EVENT_SRQ_LIMIT` event is queued on the RNIC; arm again after it.
#[unsafe(no_mangle)]
pub extern "C" fn softrnic_srq_arm_limit(srq: *mut softrnic_srq, limit: u32) -> c_int {
    guard_ok(|| {
        let (s, _) = get::<SrqObj>(srq)?;
        s.rnic.rnic.srq_arm_limit(&s.srq, limit as usize);
        Ok(())
    })
}

/// Destroys an SRQ; `SOFTRNIC_ERR_BUSY` while QPs use it.
#[unsafe(no_mangle)]
pub extern "C" fn softrnic_srq_destroy(srq: *mut softrnic_srq) -> c_int {
    guard_ok(|| {
        let (s, _) = get::<SrqObj>(srq)?;
        let qps = handles::qps_on_srq(&s.srq);
        if qps > 0 {
            return Err(Error::new(
                SOFTRNIC_ERR_BUSY,
                format!("{qps} QP(s) still take receives from the SRQ: destroy them first"),
            ));
        }
        remove::<SrqObj>(srq);
        Ok(())
    })
}

/// `poll_event`: takes the RNIC's next asynchronous event (connection setup and teardown,
/// Terminates, QP errors, CQ overflows, SRQ limits, SCTP path changes) into `*out`.
/// Returns 1 with an event, 0 when none is waiting. Connection requests are not reported
/// here (`softrnic_qp_passive_connect` takes them). `softrnic_rnic_event_fd` is readable
/// while events are waiting.
///
/// # Safety
/// `out` is NULL (an error) or valid for a write of a `softrnic_event`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn softrnic_rnic_poll_event(
    rnic: *mut softrnic_rnic,
    out: *mut softrnic_event,
) -> c_int {
    guard(|| {
        let (r, _) = get::<RnicObj>(rnic)?;
        if out.is_null() {
            return Err(null("out"));
        }
        let Some(e) = r.rnic.as_stack().poll_async_event() else {
            return Ok(0);
        };
        // SAFETY: `out` is non-null and valid for a write per the caller.
        unsafe { put(out, c_event(&e), "out") }?;
        Ok(1)
    })
}

/// The RNIC's event file descriptor, for `poll`/`epoll`: readable while events are waiting
/// (including connection requests). Do not read it; call `softrnic_rnic_poll_event`.
/// Returns the descriptor, or a negative status.
#[unsafe(no_mangle)]
pub extern "C" fn softrnic_rnic_event_fd(rnic: *mut softrnic_rnic) -> c_int {
    guard(|| {
        use std::os::fd::AsRawFd;
        let (r, _) = get::<RnicObj>(rnic)?;
        Ok(r.rnic.as_stack().event_fd().as_raw_fd())
    })
}

/// A Terminate's layer, type and code as one number: `layer << 12 | type << 8 | code`.
fn packed_cause((layer, ty, code): (u8, u8, u8)) -> u32 {
    u32::from(layer) << 12 | u32::from(ty) << 8 | u32::from(code)
}

fn c_event(e: &Event) -> softrnic_event {
    let qp_id = e.qp().map_or(0, |q| q.0);
    let (kind, detail) = match e {
        Event::ConnectRequest(_) => (0, 0),
        Event::Established { .. } => (SOFTRNIC_EVENT_ESTABLISHED, 0),
        Event::Rejected { .. } => (SOFTRNIC_EVENT_REJECTED, 0),
        Event::ConnectFailed { .. } => (SOFTRNIC_EVENT_CONNECT_FAILED, 0),
        Event::Disconnected { .. } => (SOFTRNIC_EVENT_DISCONNECTED, 0),
        Event::TerminateSent { terminate, .. } => (
            SOFTRNIC_EVENT_TERMINATE_SENT,
            packed_cause(terminate.cause.layer_etype_ecode()),
        ),
        Event::TerminateReceived { terminate, .. } => (
            SOFTRNIC_EVENT_TERMINATE_RECEIVED,
            packed_cause(terminate.cause.layer_etype_ecode()),
        ),
        Event::QpError { .. } => (SOFTRNIC_EVENT_QP_ERROR, 0),
        Event::CqOverflow { cq, .. } => (SOFTRNIC_EVENT_CQ_OVERFLOW, cq.0),
        Event::SrqLimitReached { srq, .. } => (SOFTRNIC_EVENT_SRQ_LIMIT, srq.0),
        Event::Path { change, .. } => (
            SOFTRNIC_EVENT_PATH,
            match change {
                verbs::PathChange::Up => 1,
                verbs::PathChange::PotentiallyFailed => 2,
                verbs::PathChange::Down => 3,
                verbs::PathChange::Primary => 4,
            },
        ),
    };
    softrnic_event {
        kind,
        qp_id,
        detail,
    }
}

/// `qp_destroy`: aborts the connection, flushes outstanding work requests and invalidates
/// the handle.
#[unsafe(no_mangle)]
pub extern "C" fn softrnic_qp_destroy(qp: *mut softrnic_qp) -> c_int {
    guard_ok(|| {
        let (q, _) = get::<QpObj>(qp)?;
        q.rnic.rnic.qp_destroy(&q.qp)?;
        remove::<QpObj>(qp);
        Ok(())
    })
}

/// The QP's number (as in `softrnic_wc.qp_id`) into `*out`.
///
/// # Safety
/// `out` is NULL (an error) or valid for a write of a `uint32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn softrnic_qp_id(qp: *const softrnic_qp, out: *mut u32) -> c_int {
    guard_ok(|| {
        let (q, _) = get::<QpObj>(qp)?;
        // SAFETY: valid for a write (or NULL) per the caller.
        unsafe { put(out, q.qp.id().0, "out") }
    })
}

fn send_op(wr: &softrnic_send_wr) -> Result<SendOp> {
    use softrnic_wr_opcode::*;
    let solicited = wr.flags & SOFTRNIC_WR_SOLICITED != 0;
    let op = match wr.opcode {
        x if x == SOFTRNIC_WR_SEND as u32 => SendOp::Send {
            solicited,
            invalidate: None,
        },
        x if x == SOFTRNIC_WR_SEND_WITH_INV as u32 => SendOp::Send {
            solicited,
            invalidate: Some(wr.invalidate_stag),
        },
        x if x == SOFTRNIC_WR_RDMA_WRITE as u32 => SendOp::Write {
            remote_stag: wr.remote_stag,
            remote_to: wr.remote_to,
        },
        x if x == SOFTRNIC_WR_RDMA_READ as u32 => SendOp::Read {
            remote_stag: wr.remote_stag,
            remote_to: wr.remote_to,
        },
        x if x == SOFTRNIC_WR_FETCH_ADD as u32 => SendOp::FetchAdd {
            remote_stag: wr.remote_stag,
            remote_to: wr.remote_to,
            add: wr.compare_add,
            add_mask: wr.compare_add_mask,
        },
        x if x == SOFTRNIC_WR_CMP_SWAP as u32 => SendOp::CmpSwap {
            remote_stag: wr.remote_stag,
            remote_to: wr.remote_to,
            compare: wr.compare_add,
            compare_mask: wr.compare_add_mask,
            swap: wr.swap,
            swap_mask: wr.swap_mask,
        },
        x if x == SOFTRNIC_WR_LOCAL_INV as u32 => SendOp::LocalInvalidate {
            stag: wr.invalidate_stag,
        },
        x if x == SOFTRNIC_WR_IMM_DATA as u32 => SendOp::ImmediateData {
            data: wr.imm_data,
            solicited,
        },
        x => return Err(invalid(format!("unknown work request opcode {x}"))),
    };
    Ok(op)
}

/// `qp_post_sq`: posts a send-queue work request (nothing is queued on error).
///
/// # Safety
/// `wr` is NULL (an error) or points to a `softrnic_send_wr` whose `sg_list` is valid for
/// `num_sge` elements (or NULL with `num_sge` 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn softrnic_qp_post_sq(
    qp: *mut softrnic_qp,
    wr: *const softrnic_send_wr,
) -> c_int {
    guard_ok(|| {
        let (q, _) = get::<QpObj>(qp)?;
        if wr.is_null() {
            return Err(null("wr"));
        }
        // SAFETY: non-null and pointing to a softrnic_send_wr per the caller (integers,
        // a pointer and a byte array: every bit pattern is valid).
        let wr = unsafe { wr.read() };
        check_flags(
            wr.flags,
            SOFTRNIC_WR_UNSIGNALED | SOFTRNIC_WR_FENCE | SOFTRNIC_WR_SOLICITED,
        )?;
        let op = send_op(&wr)?;
        // SAFETY: the SGL is valid for `num_sge` elements per the caller.
        let sges = unsafe { sgl(wr.sg_list, wr.num_sge) }?;
        let s = with_flags(SendWr::new(wr.wr_id, op, sges), wr.flags);
        q.rnic.rnic.qp_post_sq(&q.qp, s)?;
        Ok(())
    })
}

/// `qp_post_rq`: posts a receive (also before the QP is connected).
///
/// # Safety
/// `wr` is NULL (an error) or points to a `softrnic_recv_wr` whose `sg_list` is valid for
/// `num_sge` elements (or NULL with `num_sge` 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn softrnic_qp_post_rq(
    qp: *mut softrnic_qp,
    wr: *const softrnic_recv_wr,
) -> c_int {
    guard_ok(|| {
        let (q, _) = get::<QpObj>(qp)?;
        if wr.is_null() {
            return Err(null("wr"));
        }
        // SAFETY: non-null and pointing to a softrnic_recv_wr per the caller.
        let wr = unsafe { wr.read() };
        // SAFETY: the SGL is valid for `num_sge` elements per the caller.
        let sges = unsafe { sgl(wr.sg_list, wr.num_sge) }?;
        q.rnic.rnic.qp_post_rq(&q.qp, RecvWr::new(wr.wr_id, sges))?;
        Ok(())
    })
}

// ------------------------------------------------------------------------ connections

/// Listens on `addr` ("127.0.0.1:0": MPA over kernel TCP, port 0 picks a free port; or a
/// transport address such as "sctp+udp://10.0.0.1:7174") into `*out`.
///
/// # Safety
/// `addr` is NULL (an error) or a NUL-terminated string; `out` is NULL (an error) or
/// valid for a write of a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn softrnic_listen(
    rnic: *mut softrnic_rnic,
    addr: *const c_char,
    out: *mut *mut softrnic_listener,
) -> c_int {
    guard_ok(|| {
        let (r, rid) = get::<RnicObj>(rnic)?;
        // SAFETY: NULL or NUL-terminated per the caller.
        let at = unsafe { transport_addr(addr) }?;
        if out.is_null() {
            return Err(null("out"));
        }
        let listener = r.rnic.listen(at)?;
        let h = insert(Some(rid), Arc::new(ListenerObj { rnic: r, listener }));
        // SAFETY: `out` is non-null and valid for a write per the caller.
        unsafe { put(out, h, "out") }
    })
}

/// The port a listener is bound to (the actual one when port 0 was asked for) into
/// `*port`.
///
/// # Safety
/// `port` is NULL (an error) or valid for a write of a `uint16_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn softrnic_listener_port(
    listener: *const softrnic_listener,
    port: *mut u16,
) -> c_int {
    guard_ok(|| {
        let (l, _) = get::<ListenerObj>(listener)?;
        // SAFETY: valid for a write (or NULL) per the caller.
        unsafe { put(port, l.listener.local_addr.port(), "port") }
    })
}

/// The transport address peers connect to (e.g. "tcp://127.0.0.1:40123"), written
/// NUL-terminated into `buf` of `len` bytes, truncated if it does not fit (as
/// `snprintf`). Returns the length of the full address without the NUL.
///
/// # Safety
/// `buf` is NULL (only with `len` 0) or valid for writes of `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn softrnic_listener_addr(
    listener: *const softrnic_listener,
    buf: *mut c_char,
    len: usize,
) -> c_int {
    guard(|| {
        let (l, _) = get::<ListenerObj>(listener)?;
        let s = l.listener.transport.to_string();
        if len > 0 {
            if buf.is_null() {
                return Err(null("buf (with len > 0)"));
            }
            let n = s.len().min(len - 1);
            // SAFETY: `buf` is valid for `len` bytes per the caller and n + 1 <= len; the
            // source is our own string, so the two do not overlap.
            unsafe {
                std::ptr::copy_nonoverlapping(s.as_ptr(), buf.cast::<u8>(), n);
                buf.add(n).write(0);
            }
        }
        Ok(c_int::try_from(s.len()).unwrap_or(c_int::MAX))
    })
}

/// Stops listening and invalidates the handle.
#[unsafe(no_mangle)]
pub extern "C" fn softrnic_listener_destroy(listener: *mut softrnic_listener) -> c_int {
    guard_ok(|| {
        let (l, _) = get::<ListenerObj>(listener)?;
        l.rnic.rnic.as_stack().close_listener(&l.listener);
        remove::<ListenerObj>(listener);
        Ok(())
    })
}

/// `qp_active_connect`: connects `qp` to `addr` ("127.0.0.1:40123" or a transport
/// address) with `param` (NULL: defaults) and waits up to `timeout_ms` (negative: without
/// limit) until the connection is established.
///
/// # Safety
/// `addr` is NULL (an error) or a NUL-terminated string; `param` is NULL or valid (see
/// `softrnic_conn_param`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn softrnic_qp_active_connect(
    qp: *mut softrnic_qp,
    addr: *const c_char,
    param: *const softrnic_conn_param,
    timeout_ms: c_int,
) -> c_int {
    guard_ok(|| {
        let (q, _) = get::<QpObj>(qp)?;
        // SAFETY: NULL or NUL-terminated per the caller.
        let to = unsafe { transport_addr(addr) }?;
        // SAFETY: NULL or valid per the caller.
        let cfg = unsafe { conn_config(param) }?;
        q.rnic
            .rnic
            .qp_active_connect(&q.qp, to, cfg, timeout(timeout_ms))?;
        Ok(())
    })
}

/// `qp_passive_connect`: waits up to `timeout_ms` (negative: without limit) for the next
/// connection request on `listener`, accepts it on `qp` (of the same RNIC) with `param`
/// (NULL: defaults) and waits until the connection is established.
///
/// # Safety
/// `param` is NULL or valid (see `softrnic_conn_param`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn softrnic_qp_passive_connect(
    listener: *mut softrnic_listener,
    qp: *mut softrnic_qp,
    param: *const softrnic_conn_param,
    timeout_ms: c_int,
) -> c_int {
    guard_ok(|| {
        let (l, _) = get::<ListenerObj>(listener)?;
        let (q, _) = get::<QpObj>(qp)?;
        same_rnic(&l.rnic, &q.rnic, "the listener and the QP")?;
        // SAFETY: NULL or valid per the caller.
        let cfg = unsafe { conn_config(param) }?;
        q.rnic
            .rnic
            .qp_passive_connect(&l.listener, &q.qp, cfg, timeout(timeout_ms))?;
        Ok(())
    })
}

/// `qp_disconnect`: graceful close; outstanding work completes, then the connection
/// closes and what is still posted is flushed.
#[unsafe(no_mangle)]
pub extern "C" fn softrnic_qp_disconnect(qp: *mut softrnic_qp) -> c_int {
    guard_ok(|| {
        let (q, _) = get::<QpObj>(qp)?;
        q.rnic.rnic.qp_disconnect(&q.qp)?;
        Ok(())
    })
}

// ------------------------------------------------------------------------ fast registration, windows, QP state

/// The part `[offset, offset + len)` of region `mr`'s memory, for a fast-register mapping or
/// a window bind; `SOFTRNIC_ERR_RANGE` when it leaves the region.
fn region_part(m: &MrObj, offset: u64, len: u64) -> Result<(u64, std::ops::Range<usize>)> {
    let end = offset.checked_add(len).filter(|&e| e <= m.mr.len());
    let Some(end) = end else {
        return Err(Error::new(
            SOFTRNIC_ERR_RANGE,
            format!(
                "offset {offset} + length {len} leaves the region of {} bytes",
                m.mr.len()
            ),
        ));
    };
    let start = m.mr.buf_offset() + offset as usize;
    Ok((m.mr.to_at(offset), start..m.mr.buf_offset() + end as usize))
}

fn addressing(zero_based: u32) -> Addressing {
    if zero_based != 0 {
        Addressing::ZeroBased
    } else {
        Addressing::VirtualAddress
    }
}

/// `allocate_stag` (RDMA Verbs "Allocate STag"): a fast-register STag in `pd` with no
/// memory behind it, for at most `max_len` bytes, into `*out_stag`. It is invalid until
/// `softrnic_fast_reg_map` and a `softrnic_qp_post_fast_reg` make it valid; release it with
/// `softrnic_deallocate_stag` once it is invalid again.
///
/// # Safety
/// `out_stag` is NULL (an error) or valid for a write of a `uint32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn softrnic_allocate_stag(
    pd: *mut softrnic_pd,
    max_len: u64,
    out_stag: *mut u32,
) -> c_int {
    guard_ok(|| {
        let (p, _) = get::<PdObj>(pd)?;
        if out_stag.is_null() {
            return Err(null("out_stag"));
        }
        let stag = p.rnic.rnic.allocate_stag(p.pd, max_len)?;
        // SAFETY: `out_stag` is non-null and valid for a write per the caller.
        unsafe { put(out_stag, stag, "out_stag") }
    })
}

/// `fast_reg_map`: maps `len` bytes at `offset` of region `mr`'s memory to the
/// fast-register STag `stag` of `pd` for its next Fast Register (`zero_based`: its Tagged
/// Offsets start at 0, else they are the addresses). The STag changes only when the work
/// request runs.
#[unsafe(no_mangle)]
pub extern "C" fn softrnic_fast_reg_map(
    pd: *mut softrnic_pd,
    stag: u32,
    mr: *mut softrnic_mr,
    offset: u64,
    len: u64,
    zero_based: u32,
) -> c_int {
    guard_ok(|| {
        let (p, _) = get::<PdObj>(pd)?;
        let (m, _) = get::<MrObj>(mr)?;
        same_rnic(&p.rnic, &m.rnic, "the PD and the region")?;
        let (_, range) = region_part(&m, offset, len)?;
        let mut region = FastRegRegion::new(m.mr.buf()).range(range);
        if zero_based != 0 {
            region = region.zero_based();
        }
        p.rnic.rnic.fast_reg_map(p.pd, stag, region)?;
        Ok(())
    })
}

/// Posts a Fast Register work request: the fast-register STag whose index `stag` names
/// becomes valid, in send-queue order, with the memory mapped to it, rights `access`
/// (`SOFTRNIC_ACCESS_*`) and `stag`'s consumer key (its low byte; it must differ from the
/// key of the last registration). `flags`: `SOFTRNIC_WR_UNSIGNALED`, `SOFTRNIC_WR_FENCE`.
#[unsafe(no_mangle)]
pub extern "C" fn softrnic_qp_post_fast_reg(
    qp: *mut softrnic_qp,
    wr_id: u64,
    stag: u32,
    access: u32,
    flags: u32,
) -> c_int {
    guard_ok(|| {
        let (q, _) = get::<QpObj>(qp)?;
        let access = self::access(access)?;
        post_local(&q, wr_id, SendOp::FastRegister { stag, access }, flags)
    })
}

fn post_local(q: &QpObj, wr_id: u64, op: SendOp, flags: u32) -> Result<()> {
    check_flags(flags, SOFTRNIC_WR_UNSIGNALED | SOFTRNIC_WR_FENCE)?;
    let s = with_flags(SendWr::new(wr_id, op, Vec::new()), flags);
    q.rnic.rnic.qp_post_sq(&q.qp, s)?;
    Ok(())
}

/// Refuses `SOFTRNIC_WR_*` flags outside `known`.
fn check_flags(flags: u32, known: u32) -> Result<()> {
    if flags & !known != 0 {
        return Err(invalid(format!("unknown work request flags {flags:#x}")));
    }
    Ok(())
}

/// `s` with the signaled and fence settings of `flags`.
fn with_flags(mut s: SendWr, flags: u32) -> SendWr {
    s.signaled = flags & SOFTRNIC_WR_UNSIGNALED == 0;
    s.fence = flags & SOFTRNIC_WR_FENCE != 0;
    s
}

/// `allocate_window` (RDMA Verbs "Allocate Memory Window"): a memory window of `type` 1
/// or 2 in `pd`, unbound, into `*out_stag`. Type 1 is bound with `softrnic_bind_window`,
/// Type 2 with `softrnic_qp_post_bind_window`; release it with `softrnic_deallocate_stag`
/// once unbound or invalidated.
///
/// # Safety
/// `out_stag` is NULL (an error) or valid for a write of a `uint32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn softrnic_allocate_window(
    pd: *mut softrnic_pd,
    r#type: u32,
    out_stag: *mut u32,
) -> c_int {
    guard_ok(|| {
        let (p, _) = get::<PdObj>(pd)?;
        let ty = match r#type {
            1 => MwType::Type1,
            2 => MwType::Type2,
            t => return Err(invalid(format!("memory window type {t}: 1 or 2"))),
        };
        if out_stag.is_null() {
            return Err(null("out_stag"));
        }
        let stag = p.rnic.rnic.allocate_window(p.pd, ty)?;
        // SAFETY: `out_stag` is non-null and valid for a write per the caller.
        unsafe { put(out_stag, stag, "out_stag") }
    })
}

/// `bind_window` (Type 1): the window whose index `mw` names exposes `len` bytes at
/// `offset` of region `mr` (which needs `SOFTRNIC_ACCESS_MW_BIND`) with `access` (a subset
/// of the region's remote rights), under `mw`'s key (new after the first binding). A
/// length of 0 unbinds it.
#[unsafe(no_mangle)]
pub extern "C" fn softrnic_bind_window(
    pd: *mut softrnic_pd,
    mw: u32,
    mr: *mut softrnic_mr,
    offset: u64,
    len: u64,
    access: u32,
    zero_based: u32,
) -> c_int {
    guard_ok(|| {
        let (p, _) = get::<PdObj>(pd)?;
        let (m, _) = get::<MrObj>(mr)?;
        same_rnic(&p.rnic, &m.rnic, "the PD and the region")?;
        let access = self::access(access)?;
        let (to, _) = region_part(&m, offset, len)?;
        p.rnic
            .rnic
            .bind_window(p.pd, mw, &m.mr, to, len, access, addressing(zero_based))?;
        Ok(())
    })
}

/// Posts a Bind Memory Window work request (Type 2): in send-queue order, the unbound
/// window whose index `mw` names exposes `len` bytes at `offset` of region `mr` with
/// `access`, under `mw`'s key; only this QP's connection may use it.
#[allow(clippy::too_many_arguments)]
#[unsafe(no_mangle)]
pub extern "C" fn softrnic_qp_post_bind_window(
    qp: *mut softrnic_qp,
    wr_id: u64,
    mw: u32,
    mr: *mut softrnic_mr,
    offset: u64,
    len: u64,
    access: u32,
    zero_based: u32,
    flags: u32,
) -> c_int {
    guard_ok(|| {
        let (q, _) = get::<QpObj>(qp)?;
        let (m, _) = get::<MrObj>(mr)?;
        same_rnic(&q.rnic, &m.rnic, "the QP and the region")?;
        let access = self::access(access)?;
        let (to, _) = region_part(&m, offset, len)?;
        let op = SendOp::BindWindow {
            mw,
            region: m.mr.stag(),
            to,
            len,
            access,
            zero_based: zero_based != 0,
        };
        post_local(&q, wr_id, op, flags)
    })
}

/// QP states, as `softrnic_qp_state` reports them and `softrnic_qp_modify` takes them.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum softrnic_qp_state_t {
    /// Not connected yet (setup in progress).
    SOFTRNIC_QPS_IDLE = 0,
    /// Full operation.
    SOFTRNIC_QPS_RTS = 1,
    /// Graceful close in progress.
    SOFTRNIC_QPS_CLOSING = 2,
    /// A Terminate was sent or received.
    SOFTRNIC_QPS_TERMINATE = 3,
    /// Failed or closed; work requests are flushed.
    SOFTRNIC_QPS_ERROR = 4,
}

/// The QP's state into `*out` (a `softrnic_qp_state_t`).
///
/// # Safety
/// `out` is NULL (an error) or valid for a write of a `uint32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn softrnic_qp_state(qp: *mut softrnic_qp, out: *mut u32) -> c_int {
    guard_ok(|| {
        let (q, _) = get::<QpObj>(qp)?;
        use softrnic_qp_state_t::*;
        let s = match q.qp.state() {
            QpState::Idle => SOFTRNIC_QPS_IDLE,
            QpState::Rts => SOFTRNIC_QPS_RTS,
            QpState::Closing => SOFTRNIC_QPS_CLOSING,
            QpState::Terminate => SOFTRNIC_QPS_TERMINATE,
            QpState::Error => SOFTRNIC_QPS_ERROR,
        };
        // SAFETY: `out` is non-null (checked by put) and valid for a write per the caller.
        unsafe { put(out, s as u32, "out") }
    })
}

/// `qp_modify` (RDMA Verbs Modify QP) to `to` (a `softrnic_qp_state_t`): CLOSING (as
/// `softrnic_qp_disconnect`), TERMINATE (a Terminate goes to the peer, then the connection
/// closes) or ERROR (abortive close); outstanding work requests are flushed.
/// `SOFTRNIC_ERR_QP_STATE` for a transition the QP's state does not allow.
#[unsafe(no_mangle)]
pub extern "C" fn softrnic_qp_modify(qp: *mut softrnic_qp, to: u32) -> c_int {
    guard_ok(|| {
        let (q, _) = get::<QpObj>(qp)?;
        let to = match to {
            0 => QpState::Idle,
            1 => QpState::Rts,
            2 => QpState::Closing,
            3 => QpState::Terminate,
            4 => QpState::Error,
            t => return Err(invalid(format!("unknown QP state {t}"))),
        };
        q.rnic.rnic.qp_modify(&q.qp, to)?;
        Ok(())
    })
}

// ------------------------------------------------------------------------ connection management, step by step

/// Copies `data` into `buf` of `len` bytes (truncated) and returns its full length.
///
/// # Safety
/// `buf` is NULL (only with `len` 0) or valid for writes of `len` bytes.
unsafe fn copy_out(data: &[u8], buf: *mut u8, len: usize) -> Result<c_int> {
    let n = data.len().min(len);
    if n > 0 {
        if buf.is_null() {
            return Err(null("buf (with len > 0)"));
        }
        // SAFETY: `buf` is non-null and valid for `len >= n` bytes per the caller; `data`
        // is a live slice of at least `n` bytes that cannot overlap the caller's buffer.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), buf, n) };
    }
    c_int::try_from(data.len()).map_err(|_| invalid("private data too long"))
}

/// `wait_request`: waits up to `timeout_ms` (0: only looks; negative: without limit) for
/// the next connection request on `listener` and hands it out as `*out`, unanswered
/// (`softrnic_conn_request_private_data` shows what the initiator sent; answer with
/// `softrnic_conn_request_accept` or `softrnic_conn_request_reject`).
/// `SOFTRNIC_ERR_TIMEOUT` when none arrived.
///
/// # Safety
/// `out` is NULL (an error) or valid for a write of a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn softrnic_listener_get_request(
    listener: *mut softrnic_listener,
    timeout_ms: c_int,
    out: *mut *mut softrnic_conn_request,
) -> c_int {
    guard_ok(|| {
        let (l, rid) = get::<ListenerObj>(listener)?;
        if out.is_null() {
            return Err(null("out"));
        }
        let req = l
            .rnic
            .rnic
            .as_stack()
            .wait_request(&l.listener, timeout(timeout_ms))?;
        let h = insert(
            Some(rid),
            Arc::new(ConnReqObj {
                rnic: l.rnic.clone(),
                req,
            }),
        );
        // SAFETY: `out` is non-null and valid for a write per the caller.
        unsafe { put(out, h, "out") }
    })
}

/// The initiator's private data of a connection request, written into `buf` of `len`
/// bytes (truncated if it does not fit). Returns its full length.
///
/// # Safety
/// `buf` is NULL (only with `len` 0) or valid for writes of `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn softrnic_conn_request_private_data(
    req: *const softrnic_conn_request,
    buf: *mut u8,
    len: usize,
) -> c_int {
    guard(|| {
        let (r, _) = get::<ConnReqObj>(req)?;
        // SAFETY: as the caller promises for `buf`.
        unsafe { copy_out(r.req.private_data(), buf, len) }
    })
}

/// The initiator's address of a connection request ("192.0.2.1:40000"), written
/// NUL-terminated into `buf` of `len` bytes (truncated as `snprintf`). Returns the length of
/// the full address without the NUL.
///
/// # Safety
/// `buf` is NULL (only with `len` 0) or valid for writes of `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn softrnic_conn_request_peer(
    req: *const softrnic_conn_request,
    buf: *mut c_char,
    len: usize,
) -> c_int {
    guard(|| {
        let (r, _) = get::<ConnReqObj>(req)?;
        let s = r.req.peer.to_string();
        if len > 0 {
            let mut bytes = s.as_bytes()[..s.len().min(len - 1)].to_vec();
            bytes.push(0);
            // SAFETY: as the caller promises for `buf`; `bytes.len() <= len`.
            unsafe { copy_out(&bytes, buf.cast(), len) }?;
        }
        c_int::try_from(s.len()).map_err(|_| invalid("address too long"))
    })
}

/// `accept`: answers connection request `req` on `qp` (of the same RNIC) with `param`
/// (NULL: defaults; its private data goes into the MPA Reply) without waiting: the outcome
/// comes as `SOFTRNIC_EVENT_ESTABLISHED` or `SOFTRNIC_EVENT_CONNECT_FAILED` for the QP
/// (`softrnic_rnic_poll_event`). The request handle is consumed when this succeeds.
///
/// # Safety
/// `param` is NULL or valid (see `softrnic_conn_param`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn softrnic_conn_request_accept(
    req: *mut softrnic_conn_request,
    qp: *mut softrnic_qp,
    param: *const softrnic_conn_param,
) -> c_int {
    guard_ok(|| {
        let (r, _) = get::<ConnReqObj>(req)?;
        let (q, _) = get::<QpObj>(qp)?;
        same_rnic(&r.rnic, &q.rnic, "the request and the QP")?;
        // SAFETY: NULL or valid per the caller.
        let cfg = unsafe { conn_config(param) }?;
        q.rnic
            .rnic
            .as_stack()
            .accept(r.req.id, q.qp.as_stack(), cfg)?;
        remove::<ConnReqObj>(req);
        Ok(())
    })
}

/// `reject`: refuses connection request `req`: an MPA Reply with the Reject bit carrying
/// the `len` bytes of `private_data` goes to the initiator and the connection closes. The
/// request handle is consumed.
///
/// # Safety
/// `private_data` is NULL (only with `len` 0) or valid for reads of `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn softrnic_conn_request_reject(
    req: *mut softrnic_conn_request,
    private_data: *const u8,
    len: usize,
) -> c_int {
    guard_ok(|| {
        let (r, _) = get::<ConnReqObj>(req)?;
        let data: &[u8] = if len == 0 {
            &[]
        } else if private_data.is_null() {
            return Err(null("private_data (with len > 0)"));
        } else {
            // SAFETY: non-null and valid for `len` bytes per the caller.
            unsafe { std::slice::from_raw_parts(private_data, len) }
        };
        let res = r.rnic.rnic.as_stack().reject(r.req.id, data);
        remove::<ConnReqObj>(req);
        res?;
        Ok(())
    })
}

/// `connect`: starts connecting `qp` to `addr` ("127.0.0.1:40123" or a transport address)
/// with `param` (NULL: defaults) without waiting: the outcome comes as
/// `SOFTRNIC_EVENT_ESTABLISHED`, `SOFTRNIC_EVENT_REJECTED` or
/// `SOFTRNIC_EVENT_CONNECT_FAILED` for the QP (`softrnic_rnic_poll_event_data` gives the
/// peer's private data with them).
///
/// # Safety
/// `addr` is NULL (an error) or a NUL-terminated string; `param` is NULL or valid (see
/// `softrnic_conn_param`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn softrnic_qp_connect(
    qp: *mut softrnic_qp,
    addr: *const c_char,
    param: *const softrnic_conn_param,
) -> c_int {
    guard_ok(|| {
        let (q, _) = get::<QpObj>(qp)?;
        // SAFETY: NULL or NUL-terminated per the caller.
        let to = unsafe { transport_addr(addr) }?;
        // SAFETY: NULL or valid per the caller.
        let cfg = unsafe { conn_config(param) }?;
        q.rnic
            .rnic
            .as_stack()
            .connect_to(q.qp.as_stack(), &to, cfg)?;
        Ok(())
    })
}

/// `poll_event` that also hands out the private data the event carries: the peer's (its
/// MPA Reply's) with `SOFTRNIC_EVENT_ESTABLISHED`, the rejecting responder's with
/// `SOFTRNIC_EVENT_REJECTED`; none with the others. The data goes into `buf` of `len`
/// bytes (truncated) and its full length into `*data_len`. Returns 1 with an event, 0
/// when none is waiting.
///
/// # Safety
/// `out` is NULL (an error) or valid for a write of a `softrnic_event`; `buf` is NULL
/// (only with `len` 0) or valid for writes of `len` bytes; `data_len` is NULL (an error)
/// or valid for a write of a `size_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn softrnic_rnic_poll_event_data(
    rnic: *mut softrnic_rnic,
    out: *mut softrnic_event,
    buf: *mut u8,
    len: usize,
    data_len: *mut usize,
) -> c_int {
    guard(|| {
        let (r, _) = get::<RnicObj>(rnic)?;
        if out.is_null() {
            return Err(null("out"));
        }
        if data_len.is_null() {
            return Err(null("data_len"));
        }
        if len > 0 && buf.is_null() {
            return Err(null("buf (with len > 0)"));
        }
        let Some(e) = r.rnic.as_stack().poll_async_event() else {
            return Ok(0);
        };
        let data: &[u8] = match &e {
            Event::Established { session, .. } => &session.peer_private_data,
            Event::Rejected { private_data, .. } => private_data,
            _ => &[],
        };
        // SAFETY: `buf` is valid for `len` bytes per the caller (checked non-null above
        // when `len > 0`).
        unsafe { copy_out(data, buf, len) }?;
        // SAFETY: `data_len` and `out` are non-null and valid for writes per the caller.
        unsafe { put(data_len, data.len(), "data_len") }?;
        // SAFETY: as above.
        unsafe { put(out, c_event(&e), "out") }?;
        Ok(1)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_has_a_distinct_text() {
        let mut seen = std::collections::HashSet::new();
        for s in error::ALL {
            assert_eq!(softrnic_status::from_code(s as c_int), Some(s));
            assert!(seen.insert(s.text()), "{s:?}");
        }
        assert_eq!(softrnic_status::from_code(1), None);
    }

    #[test]
    fn a_panic_becomes_an_internal_error() {
        let code = guard(|| panic!("boom"));
        assert_eq!(code, SOFTRNIC_ERR_INTERNAL as c_int);
        // SAFETY: the pointer is NUL-terminated and valid until this thread's next error.
        let msg = unsafe { CStr::from_ptr(softrnic_last_error()) };
        assert!(msg.to_str().unwrap().contains("boom"), "{msg:?}");
    }

    /// The open flags reach the RNIC's configuration: inline progress by default, off with
    /// `SOFTRNIC_RNIC_NO_INLINE_PROGRESS`, which combines with manual progress.
    #[test]
    fn open_flags_choose_the_progress_mode_and_inline_progress() {
        for (flags, progress, inline) in [
            (0, ProgressMode::Thread, true),
            (
                SOFTRNIC_RNIC_NO_INLINE_PROGRESS,
                ProgressMode::Thread,
                false,
            ),
            (SOFTRNIC_RNIC_MANUAL_PROGRESS, ProgressMode::Manual, true),
            (
                SOFTRNIC_RNIC_MANUAL_PROGRESS | SOFTRNIC_RNIC_NO_INLINE_PROGRESS,
                ProgressMode::Manual,
                false,
            ),
        ] {
            let mut h = std::ptr::null_mut();
            // SAFETY: `h` is a valid out-pointer.
            let rc = unsafe { softrnic_rnic_open(flags, &mut h) };
            assert_eq!(rc, 0, "{flags:#x}");
            let (r, _) = get::<RnicObj>(h).unwrap();
            let cfg = r.rnic.as_stack().config();
            assert_eq!(
                (cfg.progress, cfg.inline_progress),
                (progress, inline),
                "{flags:#x}"
            );
            drop(r);
            assert_eq!(softrnic_rnic_close(h), 0);
        }
        let mut h = std::ptr::null_mut();
        // SAFETY: as above.
        let rc = unsafe { softrnic_rnic_open(4, &mut h) };
        assert_eq!(rc, SOFTRNIC_ERR_INVALID_ARG as c_int);
        // SAFETY: the pointer is NUL-terminated and valid until this thread's next error.
        let msg = unsafe { CStr::from_ptr(softrnic_last_error()) };
        assert!(msg.to_str().unwrap().contains("0x4"), "{msg:?}");
    }
}
