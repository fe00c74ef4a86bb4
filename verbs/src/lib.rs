//! # softrnic-verbs — the OSC-iWARP verbs over the softrnic runtime
//!
//! The RDMA Consortium / OpenSource iWARP verbs, one Rust method per verb, as thin wrappers
//! over [`stack::Rnic`] (the progress thread, kernel TCP and connection management) and
//! [`stack::MemTable`] (protection domains and STags). Every verb keeps its name, so code
//! written against the verbs specification maps line by line:
//!
//! | verb | here |
//! |---|---|
//! | `rnic_open` / `rnic_close` | [`rnic_open`], [`Rnic::close`] |
//! | `rnic_advance` | [`Rnic::advance`] (manual-progress mode) |
//! | `pd_allocate` / `pd_deallocate` | [`Rnic::pd_allocate`], [`Rnic::pd_deallocate`] |
//! | `nsmr_register` | [`Rnic::nsmr_register`] (non-shared memory region) |
//! | `register_sge` | [`Rnic::register_sge`] (register exactly one element, get its SGE) |
//! | `create_sgl` | [`Rnic::create_sgl`] (a validated scatter/gather list) |
//! | `deregister_mem` / `deallocate_stag` | [`Rnic::deregister_mem`], [`Rnic::deallocate_stag`] |
//! | `cq_create` / `cq_destroy` | [`Rnic::cq_create`], [`Rnic::cq_destroy`] |
//! | `cq_poll` / `cq_poll_block` | [`Rnic::cq_poll`], [`Rnic::cq_poll_block`] (batch into a slice) |
//! | `qp_create` / `qp_destroy` | [`Rnic::qp_create`], [`Rnic::qp_destroy`] |
//! | `qp_post_sq` / `qp_post_rq` | [`Rnic::qp_post_sq`], [`Rnic::qp_post_rq`] |
//! | `qp_active_connect` / `qp_passive_connect` | [`Rnic::qp_active_connect`], [`Rnic::qp_passive_connect`] |
//! | `qp_register_fd` | [`Rnic::qp_register_fd`] (adopt a connected socket) |
//! | `qp_disconnect` | [`Rnic::qp_disconnect`] |
//!
//! Beyond the list: [`Rnic::listen`] (the passive side's endpoint), the non-blocking
//! connection events ([`Rnic::poll_event`], re-exported [`Event`]) and the asynchronous
//! errors (QP error, CQ overflow) they carry.
//!
//! The resource rules of the verbs are enforced: a PD cannot be deallocated while memory or
//! QPs use it, a CQ cannot be destroyed while a QP uses it, and every handle is checked to
//! belong to the RNIC it is used with.
//!
//! # Example: Send and RDMA Write over loopback
//!
//! ```
//! use std::time::Duration;
//! use verbs::{rnic_open, Access, MpaConfig, RecvWr, RnicConfig, SendWr, WcStatus};
//!
//! let t = Duration::from_secs(5);
//! let server = rnic_open(RnicConfig::default())?;
//! let client = rnic_open(RnicConfig::default())?;
//!
//! // Server: PD, CQ, QP, memory; a receive posted before the connection.
//! let spd = server.pd_allocate();
//! let scq = server.cq_create(64)?;
//! let sqp = server.qp_create(spd, &scq, &scq, Default::default())?;
//! let smr = server.nsmr_register(spd, 4096, Access::LOCAL_WRITE | Access::REMOTE_WRITE)?;
//! server.qp_post_rq(&sqp, RecvWr::new(1, vec![smr.sge(0, 64)]))?;
//! let listener = server.listen("127.0.0.1:0".parse::<std::net::SocketAddr>().unwrap())?;
//!
//! // Client.
//! let cpd = client.pd_allocate();
//! let ccq = client.cq_create(64)?;
//! let cqp = client.qp_create(cpd, &ccq, &ccq, Default::default())?;
//! let cmr = client.nsmr_register(cpd, 4096, Access::LOCAL_WRITE)?;
//! cmr.buf().write_at(0, b"hello, iWARP")?;
//!
//! std::thread::scope(|s| -> Result<(), verbs::VerbsError> {
//!     let accept = s.spawn(|| server.qp_passive_connect(&listener, &sqp, MpaConfig::default(), t));
//!     client.qp_active_connect(&cqp, listener.local_addr, MpaConfig::default(), t)?;
//!     accept.join().unwrap()?;
//!     Ok(())
//! })?;
//!
//! client.qp_post_sq(&cqp, SendWr::send(7, vec![cmr.sge(0, 12)]))?;
//! client.qp_post_sq(&cqp, SendWr::write(8, vec![cmr.sge(0, 12)], smr.stag(), smr.to_at(100)))?;
//!
//! let mut wcs = [verbs::empty_wc(); 4];
//! let n = server.cq_poll_block(&scq, &mut wcs, t)?;
//! assert_eq!((n, wcs[0].wr_id, wcs[0].status), (1, 1, WcStatus::Success));
//! assert_eq!(smr.buf().read_range(0..12)?, b"hello, iWARP");
//!
//! let mut got = 0;
//! while got < 2 {
//!     got += client.cq_poll_block(&ccq, &mut wcs[got..], t)?;
//! }
//! assert!(wcs[..2].iter().all(|w| w.status == WcStatus::Success));
//! client.qp_disconnect(&cqp)?;
//! # Ok::<(), verbs::VerbsError>(())
//! ```

#![warn(missing_docs)]
#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::net::TcpStream;
use std::ops::Range;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use thiserror::Error;

pub use stack::addr::{SctpAddr, SctpEncap, TransportAddr};
pub use stack::llp::{LlpSession, SctpSession, Session};
pub use stack::mpa::Config as MpaConfig;
pub use stack::mpa::Session as MpaSession;
/// Interop profiles: `Profile::Siw.config(MpaRole::Initiator)` is the [`MpaConfig`] for
/// connecting to Linux siw; [`QpCaps::for_profile`] carries its runtime quirks.
pub use stack::mpa::{Profile, Role as MpaRole, RtrType};
pub use stack::{
    Access, Addressing, AdoptRole, Arm, CloseReason, CmError, CompletionChannel, ConnectRequest,
    Cq, CqId, Event, FastRegRegion, Listener, MemError, MemoryRegion, MwType, PathChange, Pd,
    PostError, ProgressMode, QpId, QpState, RecvWr, RegisteredBuf, Rereg, RnicConfig, RnicError,
    SctpRequest, SendOp, SendWr, Sge, Srq, SrqId, Wc, WcOpcode, WcStatus,
};

/// Errors of the verbs.
#[derive(Debug, Error)]
pub enum VerbsError {
    /// The runtime refused or failed (connection management, I/O, closed RNIC).
    #[error("{0}")]
    Rnic(#[from] RnicError),
    /// A memory verb failed.
    #[error("{0}")]
    Mem(#[from] MemError),
    /// A post was refused (nothing was queued).
    #[error("{0}")]
    Post(#[from] PostError),
    /// A local scatter/gather element is invalid.
    #[error("invalid scatter/gather element: {0}")]
    Sgl(String),
    /// The PD is not allocated on this RNIC.
    #[error("protection domain {0:?} is not allocated on this RNIC")]
    UnknownPd(Pd),
    /// The PD still has memory regions or QPs.
    #[error("protection domain {pd:?} is still in use ({regions} memory regions, {qps} QPs)")]
    PdInUse {
        /// The PD.
        pd: Pd,
        /// Memory regions registered in it.
        regions: usize,
        /// QPs created in it.
        qps: usize,
    },
    /// The CQ is not one of this RNIC's.
    #[error("CQ {0:?} was not created on this RNIC (or was destroyed)")]
    UnknownCq(CqId),
    /// The CQ is still used by QPs.
    #[error("CQ {cq:?} is still used by {qps} QP(s)")]
    CqInUse {
        /// The CQ.
        cq: CqId,
        /// QPs using it.
        qps: usize,
    },
    /// The STag is not registered through this RNIC's verbs.
    #[error("STag {0:#010x} is not registered on this RNIC")]
    UnknownStag(u32),
    /// `deallocate_stag` needs an invalidated STag.
    #[error("STag {0:#010x} is still valid: deregister it or invalidate it first")]
    StagValid(u32),
    /// No completion arrived in time.
    #[error("no completion within {0:?}")]
    Timeout(Duration),
    /// The completion channel could not be made (no eventfd).
    #[error("cannot create a completion channel: {0}")]
    Channel(String),
    /// A CQ depth outside 1 ..= [`MAX_CQ_DEPTH`].
    #[error("CQ depth {0} is out of range: a CQ holds 1 .. {MAX_CQ_DEPTH} completions")]
    CqDepth(usize),
}

/// The deepest CQ [`Rnic::cq_create`] makes (entries are allocated as completions arrive).
pub const MAX_CQ_DEPTH: usize = 1 << 22;

/// Result of the verbs.
pub type Result<T, E = VerbsError> = std::result::Result<T, E>;

/// QP sizes for [`Rnic::qp_create`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpCaps {
    /// Send queue depth.
    pub sq_depth: usize,
    /// Receive queue depth.
    pub rq_depth: usize,
    /// SGEs per work request (at least 6).
    pub max_sge: usize,
    /// Initiator interop quirk (zero: off): hold the first FPDU this long after the MPA
    /// Reply ([`stack::QpAttr::first_fpdu_delay`]); set by [`QpCaps::for_profile`].
    pub first_fpdu_delay: Duration,
}

impl Default for QpCaps {
    fn default() -> Self {
        QpCaps {
            sq_depth: 256,
            rq_depth: 256,
            max_sge: stack::wr::MIN_MAX_SGE,
            first_fpdu_delay: Duration::ZERO,
        }
    }
}

impl QpCaps {
    /// Default sizes with the runtime quirks of interop `profile` (e.g. `siw` holds the
    /// initiator's first FPDU, Linux siw 6.1's accept race).
    pub fn for_profile(profile: Profile) -> QpCaps {
        QpCaps {
            first_fpdu_delay: profile.quirks().first_fpdu_delay,
            ..QpCaps::default()
        }
    }
}

/// A queue pair (cheap to clone).
#[derive(Clone, Debug)]
pub struct Qp {
    inner: stack::Qp,
}

/// Largest IRD and ORD the RNIC takes (the 14 bits RFC 6581 carries them in).
pub const MAX_IRD_ORD: u16 = 0x3FFF;

/// What [`Rnic::query_rnic`] reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RnicAttr {
    /// Vendor.
    pub vendor: &'static str,
    /// Software version.
    pub version: &'static str,
    /// Protocols spoken.
    pub transport: &'static str,
    /// SGEs per work request every QP accepts (a QP may be created with more).
    pub min_max_sge: usize,
    /// Largest CQ.
    pub max_cq_depth: usize,
    /// Largest IRD (RDMA Reads and Atomics the peer may have outstanding).
    pub max_ird: u16,
    /// Largest ORD.
    pub max_ord: u16,
    /// STags that can exist at once (24-bit index; index 0 and its key space are never
    /// handed out).
    pub max_stags: u32,
    /// Memory window types.
    pub memory_windows: &'static [MwType],
    /// Fast registration ([`SendOp::FastRegister`]).
    pub fast_registration: bool,
    /// RFC 7306 atomics.
    pub atomics: bool,
    /// RFC 7306 Immediate Data.
    pub immediate_data: bool,
    /// Send with Invalidate (RFC 5040 §5.3).
    pub send_with_invalidate: bool,
    /// Completion channels and CQ arming ([`Rnic::channel_create`]).
    pub completion_channels: bool,
}

/// What [`Rnic::qp_query`] reports.
#[derive(Clone, Debug)]
pub struct QpInfo {
    /// The QP.
    pub id: QpId,
    /// Its state.
    pub state: QpState,
    /// Its protection domain.
    pub pd: Pd,
    /// Send queue depth.
    pub sq_depth: usize,
    /// Receive queue depth.
    pub rq_depth: usize,
    /// SGEs per work request.
    pub max_sge: usize,
    /// Send work requests not yet completed.
    pub sq_outstanding: usize,
    /// Receives posted and not yet completed.
    pub rq_posted: usize,
    /// Largest ULPDU (MULPDU) of the connection (0 before it is up).
    pub mulpdu: usize,
    /// What the connection negotiated (`None` before it is up).
    pub session: Option<Session>,
}

impl Qp {
    /// Its id (in completions and events).
    pub fn id(&self) -> QpId {
        self.inner.id()
    }

    /// Current state.
    pub fn state(&self) -> QpState {
        self.inner.state()
    }

    /// The negotiated MPA session, once connected.
    pub fn session(&self) -> Option<Session> {
        self.inner.session()
    }

    /// The runtime's QP.
    pub fn as_stack(&self) -> &stack::Qp {
        &self.inner
    }
}

/// A scatter/gather list validated by [`Rnic::create_sgl`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sgl {
    sges: Vec<Sge>,
    len: u64,
}

impl Sgl {
    /// The elements.
    pub fn sges(&self) -> &[Sge] {
        &self.sges
    }

    /// Total length in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether it covers no byte.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The elements, for a work request.
    pub fn to_vec(&self) -> Vec<Sge> {
        self.sges.clone()
    }
}

/// A placeholder completion, to size the slices [`Rnic::cq_poll`] fills.
pub fn empty_wc() -> Wc {
    Wc::new(QpId(0), 0, WcOpcode::Send, WcStatus::Success)
}

#[derive(Debug, Default)]
struct Book {
    pds: HashMap<Pd, PdUse>,
    /// STag index (the STag without its consumer key, which a Fast Register changes) → PD,
    /// for registrations and STags made through the verbs.
    stags: HashMap<u32, Pd>,
    cqs: HashMap<CqId, Cq>,
    /// QP → (PD, send CQ, recv CQ).
    qps: HashMap<QpId, (Pd, CqId, CqId)>,
}

#[derive(Debug, Default, Clone, Copy)]
struct PdUse {
    regions: usize,
    qps: usize,
}

/// An open RNIC: the handle every verb is called on.
#[derive(Debug)]
pub struct Rnic {
    rnic: stack::Rnic,
    book: Mutex<Book>,
}

/// `rnic_open`: opens an RNIC (with a progress thread, or in manual-progress mode).
pub fn rnic_open(cfg: RnicConfig) -> Result<Rnic> {
    Ok(Rnic {
        rnic: stack::Rnic::open(cfg)?,
        book: Mutex::new(Book::default()),
    })
}

impl Rnic {
    fn book(&self) -> MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The runtime RNIC underneath.
    pub fn as_stack(&self) -> &stack::Rnic {
        &self.rnic
    }

    /// `rnic_close`: aborts every connection, flushes outstanding work and joins the
    /// progress thread.
    pub fn close(self) {
        self.rnic.close();
    }

    /// `rnic_advance`: in manual-progress mode, runs the progress engine once in this
    /// thread, waiting up to `timeout` for socket activity. Returns the work done.
    pub fn advance(&self, timeout: Duration) -> Result<usize> {
        Ok(self.rnic.advance(timeout)?)
    }

    // ---------------------------------------------------------------- protection domains

    /// `pd_allocate`.
    pub fn pd_allocate(&self) -> Pd {
        let pd = self.rnic.alloc_pd();
        self.book().pds.insert(pd, PdUse::default());
        pd
    }

    /// `pd_deallocate`: fails while memory regions or QPs use the PD.
    pub fn pd_deallocate(&self, pd: Pd) -> Result<()> {
        let mut b = self.book();
        let u = *b.pds.get(&pd).ok_or(VerbsError::UnknownPd(pd))?;
        if u.regions > 0 || u.qps > 0 {
            return Err(VerbsError::PdInUse {
                pd,
                regions: u.regions,
                qps: u.qps,
            });
        }
        b.pds.remove(&pd);
        Ok(())
    }

    fn check_pd(&self, pd: Pd) -> Result<()> {
        if self.book().pds.contains_key(&pd) {
            Ok(())
        } else {
            Err(VerbsError::UnknownPd(pd))
        }
    }

    // ---------------------------------------------------------------- memory

    fn record_region(&self, mr: &MemoryRegion) {
        self.record_stag(mr.stag(), mr.pd());
    }

    fn record_stag(&self, stag: u32, pd: Pd) {
        let mut b = self.book();
        b.stags.insert(stag >> 8, pd);
        if let Some(u) = b.pds.get_mut(&pd) {
            u.regions += 1;
        }
    }

    /// `allocate_stag` (RDMA Verbs "Allocate STag" for fast registration): an STag in `pd`
    /// with no memory behind it, invalid until a [`SendOp::FastRegister`] work request gives
    /// it at most `max_len` bytes of the memory [`Rnic::fast_reg_map`] mapped to it.
    /// Release it with [`Rnic::deallocate_stag`] once invalid.
    pub fn allocate_stag(&self, pd: Pd, max_len: u64) -> Result<u32> {
        self.check_pd(pd)?;
        let stag = self.rnic.mem().alloc_fast_reg(pd, max_len)?;
        self.record_stag(stag, pd);
        Ok(stag)
    }

    /// `allocate_window` (RDMA Verbs "Allocate Memory Window", ibverbs' `ibv_alloc_mw`): a
    /// memory window of type `ty` in `pd`, unbound. Type 1 is bound with
    /// [`Rnic::bind_window`]; Type 2 by a [`SendOp::BindWindow`] work request.
    pub fn allocate_window(&self, pd: Pd, ty: MwType) -> Result<u32> {
        self.check_pd(pd)?;
        let stag = self.rnic.mem().alloc_mw(pd, ty)?;
        self.record_stag(stag, pd);
        Ok(stag)
    }

    /// `bind_window` (RDMA Verbs "Bind Memory Window" for Type 1): the window whose index
    /// `mw` names exposes `len` bytes at Tagged Offset `to` of `region` with `access` (a
    /// subset of the region's, which needs [`Access::MW_BIND`]), under `mw`'s key (new
    /// after the first binding). A length of 0 unbinds it.
    #[allow(clippy::too_many_arguments)]
    pub fn bind_window(
        &self,
        pd: Pd,
        mw: u32,
        region: &MemoryRegion,
        to: u64,
        len: u64,
        access: Access,
        addressing: Addressing,
    ) -> Result<()> {
        Ok(self
            .rnic
            .mem()
            .bind_mw(pd, None, mw, region.stag(), to, len, access, addressing)?)
    }

    /// `deallocate_window`: releases an unbound (or invalidated) window.
    pub fn deallocate_window(&self, mw: u32) -> Result<()> {
        self.deallocate_stag(mw)
    }

    /// Maps `region` to the fast-register STag `stag` for its next Fast Register work
    /// request (the range is checked now; the STag changes only when the request runs).
    pub fn fast_reg_map(&self, pd: Pd, stag: u32, region: FastRegRegion) -> Result<()> {
        Ok(self.rnic.mem().map_fast_reg(pd, stag, region)?)
    }

    /// `nsmr_register`: allocates `len` bytes of page-aligned, zeroed memory and registers
    /// it (VA-based) in `pd` with `access`.
    pub fn nsmr_register(&self, pd: Pd, len: usize, access: Access) -> Result<MemoryRegion> {
        // Arguments first: nothing is allocated for an unknown PD.
        self.check_pd(pd)?;
        let buf = RegisteredBuf::try_new(len)?;
        self.nsmr_register_buf(pd, &buf, 0..len, access, Addressing::default())
    }

    /// `nsmr_register` of `range` of an existing buffer, with the addressing mode chosen
    /// (VA-based or zero-based Tagged Offsets).
    pub fn nsmr_register_buf(
        &self,
        pd: Pd,
        buf: &Arc<RegisteredBuf>,
        range: Range<usize>,
        access: Access,
        addressing: Addressing,
    ) -> Result<MemoryRegion> {
        self.check_pd(pd)?;
        let mut opts = stack::MrOptions::new(access).range(range);
        if addressing == Addressing::ZeroBased {
            opts = opts.zero_based();
        }
        let mr = self.rnic.mem().register(pd, buf, opts)?;
        self.record_region(&mr);
        Ok(mr)
    }

    /// `smr_register` (RDMA Verbs "Register Shared Memory Region"): the memory of `mr`
    /// registered again, in `pd` (any of this RNIC's) with `access` and `addressing`, under a
    /// new STag. Each registration keeps its own rights and lifetime.
    pub fn smr_register(
        &self,
        mr: &MemoryRegion,
        pd: Pd,
        access: Access,
        addressing: Addressing,
    ) -> Result<MemoryRegion> {
        self.check_pd(pd)?;
        let mut opts = stack::MrOptions::new(access);
        if addressing == Addressing::ZeroBased {
            opts = opts.zero_based();
        }
        let shared = self.rnic.mem().register_shared(mr.stag(), pd, opts)?;
        self.record_region(&shared);
        Ok(shared)
    }

    /// `nsmr_reregister` (RDMA Verbs "Reregister Memory Region"; ibverbs' `ibv_rereg_mr`):
    /// changes `mr`'s protection domain, rights, memory, addressing or key in place. Returns
    /// the region as it is now (its STag has the new key, if one was given); `mr` is stale.
    /// Refused while memory windows are bound to it; on error nothing changes.
    pub fn nsmr_reregister(&self, mr: &MemoryRegion, change: Rereg) -> Result<MemoryRegion> {
        if let Some(pd) = change.pd {
            self.check_pd(pd)?;
        }
        if !self.book().stags.contains_key(&(mr.stag() >> 8)) {
            return Err(VerbsError::UnknownStag(mr.stag()));
        }
        let new = self.rnic.mem().reregister(mr.stag(), change)?;
        let mut b = self.book();
        if let Some(old) = b.stags.insert(new.stag() >> 8, new.pd())
            && old != new.pd()
        {
            if let Some(u) = b.pds.get_mut(&old) {
                u.regions = u.regions.saturating_sub(1);
            }
            if let Some(u) = b.pds.get_mut(&new.pd()) {
                u.regions += 1;
            }
        }
        Ok(new)
    }

    /// `register_sge`: registers exactly `len` bytes at `offset` of `buf` and returns the
    /// region with the SGE that covers it.
    pub fn register_sge(
        &self,
        pd: Pd,
        buf: &Arc<RegisteredBuf>,
        offset: usize,
        len: u32,
        access: Access,
    ) -> Result<(MemoryRegion, Sge)> {
        let end = offset
            .checked_add(len as usize)
            .ok_or_else(|| VerbsError::Sgl("offset + length overflows".into()))?;
        let mr = self.nsmr_register_buf(pd, buf, offset..end, access, Addressing::default())?;
        let sge = mr.sge(0, len);
        Ok((mr, sge))
    }

    /// `create_sgl`: checks that every element names valid memory of `pd` with `needed`
    /// rights (use [`Access::LOCAL_WRITE`] for receive and RDMA Read sinks,
    /// [`Access::NONE`] for gathers) and returns the list.
    pub fn create_sgl(&self, pd: Pd, sges: &[Sge], needed: Access) -> Result<Sgl> {
        self.check_pd(pd)?;
        self.rnic
            .mem()
            .resolve_sgl(pd, sges, needed)
            .map_err(|e| VerbsError::Sgl(e.to_string()))?;
        Ok(Sgl {
            sges: sges.to_vec(),
            len: sges.iter().map(|s| u64::from(s.len)).sum(),
        })
    }

    /// `deregister_mem`: removes a registration (its STag becomes unknown to the peer and
    /// to local work requests). The buffer lives on while the application holds it.
    pub fn deregister_mem(&self, mr: &MemoryRegion) -> Result<()> {
        self.release_stag(mr.stag())
    }

    /// `deallocate_stag`: releases an STag that has been invalidated (by a Send with
    /// Invalidate from the peer or a Local Invalidate).
    pub fn deallocate_stag(&self, stag: u32) -> Result<()> {
        let info = self
            .rnic
            .mem()
            .query(stag)
            .ok_or(VerbsError::UnknownStag(stag))?;
        if info.valid {
            return Err(VerbsError::StagValid(stag));
        }
        self.release_stag(stag)
    }

    /// Deregisters an STag made through the verbs and forgets it; when the table refuses
    /// (e.g. windows are bound to the region), the book keeps it.
    fn release_stag(&self, stag: u32) -> Result<()> {
        if !self.book().stags.contains_key(&(stag >> 8)) {
            return Err(VerbsError::UnknownStag(stag));
        }
        self.rnic.mem().deregister(stag)?;
        let mut b = self.book();
        if let Some(pd) = b.stags.remove(&(stag >> 8))
            && let Some(u) = b.pds.get_mut(&pd)
        {
            u.regions = u.regions.saturating_sub(1);
        }
        Ok(())
    }

    /// Local invalidate of `stag` (outside the send queue).
    pub fn invalidate_stag(&self, pd: Pd, stag: u32) -> Result<()> {
        Ok(self.rnic.mem().invalidate(pd, stag)?)
    }

    // ---------------------------------------------------------------- completion queues

    /// `cq_create`: a CQ of `depth` entries, 1 ..= [`MAX_CQ_DEPTH`] (a CQ that holds no
    /// completion would overflow on the first one).
    pub fn cq_create(&self, depth: usize) -> Result<Cq> {
        self.add_cq(depth, Cq::new)
    }

    /// Checks `depth`, makes the CQ with `make` and records it.
    fn add_cq(&self, depth: usize, make: impl FnOnce(usize) -> Cq) -> Result<Cq> {
        if !(1..=MAX_CQ_DEPTH).contains(&depth) {
            return Err(VerbsError::CqDepth(depth));
        }
        let cq = make(depth);
        self.book().cqs.insert(cq.id(), cq.clone());
        Ok(cq)
    }

    /// `channel_create` (ibverbs' `ibv_create_comp_channel`): a completion channel, an
    /// eventfd (`AsFd`) for poll/epoll that armed CQs attached to it signal.
    pub fn channel_create(&self) -> Result<CompletionChannel> {
        CompletionChannel::new().map_err(|e| VerbsError::Channel(e.to_string()))
    }

    /// `cq_create` of a CQ attached to `channel` (ibverbs' `ibv_create_cq` with a channel).
    pub fn cq_create_with_channel(&self, depth: usize, channel: &CompletionChannel) -> Result<Cq> {
        self.add_cq(depth, |d| Cq::with_channel(d, channel))
    }

    /// `cq_arm` (ibverbs' `ibv_req_notify_cq`): the CQ's channel is signalled once, for its
    /// next completion ([`Arm::NextCompletion`]) or its next solicited or error completion
    /// ([`Arm::Solicited`]). Poll the CQ after arming: a completion that came before the
    /// arm signals nothing.
    ///
    /// Arming says the application is about to sleep on the channel: it ends the
    /// [`stack::Rnic::assist`] lease `cq_poll` took (the progress thread serves the sockets
    /// again at once), and polls of the armed CQ take none.
    pub fn cq_arm(&self, cq: &Cq, arm: Arm) {
        cq.arm(arm);
        self.rnic.end_assist();
    }

    /// `cq_destroy`: fails while QPs use the CQ.
    pub fn cq_destroy(&self, cq: &Cq) -> Result<()> {
        let mut b = self.book();
        if !b.cqs.contains_key(&cq.id()) {
            return Err(VerbsError::UnknownCq(cq.id()));
        }
        let qps = b
            .qps
            .values()
            .filter(|(_, s, r)| *s == cq.id() || *r == cq.id())
            .count();
        if qps > 0 {
            return Err(VerbsError::CqInUse { cq: cq.id(), qps });
        }
        b.cqs.remove(&cq.id());
        Ok(())
    }

    /// `cq_poll`: moves up to `out.len()` completions into `out`; returns how many (0 when
    /// none is waiting). In manual-progress mode it advances the RNIC once first. With a
    /// progress thread that sleeps (and `RnicConfig::inline_progress`, the default), a poll
    /// that finds the CQ empty runs the thread's pass itself ([`stack::Rnic::assist`]), so a
    /// polling application takes its completion without waiting for the thread to wake —
    /// unless the CQ is armed ([`Rnic::cq_arm`]): its application is about to sleep.
    pub fn cq_poll(&self, cq: &Cq, out: &mut [Wc]) -> usize {
        if self.rnic.config().progress == ProgressMode::Manual {
            let _ = self.rnic.advance(Duration::ZERO);
            return cq.poll(out);
        }
        let n = cq.poll(out);
        if n == 0 && !out.is_empty() && !cq.is_armed() && self.rnic.assist() > 0 {
            return cq.poll(out);
        }
        n
    }

    /// `cq_poll_block`: waits up to `timeout` until at least one completion is waiting,
    /// then moves up to `out.len()` into `out`. In manual-progress mode it drives progress
    /// while it waits.
    pub fn cq_poll_block(&self, cq: &Cq, out: &mut [Wc], timeout: Duration) -> Result<usize> {
        // A timeout past the clock's range (Duration::MAX) waits for ever.
        let deadline = Instant::now().checked_add(timeout);
        loop {
            let n = self.cq_poll(cq, out);
            if n > 0 || out.is_empty() {
                return Ok(n);
            }
            let left = deadline.map_or(Duration::from_secs(3600), |d| {
                d.saturating_duration_since(Instant::now())
            });
            if left.is_zero() {
                return Err(VerbsError::Timeout(timeout));
            }
            if self.rnic.config().progress == ProgressMode::Manual {
                self.rnic.advance(left.min(Duration::from_millis(10)))?;
            } else {
                // This thread stops polling: the progress thread takes the sockets back.
                self.rnic.end_assist();
                cq.wait(left);
            }
        }
    }

    // ---------------------------------------------------------------- queue pairs

    /// `qp_create`: a QP in `pd` with its send and receive CQs (they may be the same).
    pub fn qp_create(&self, pd: Pd, send_cq: &Cq, recv_cq: &Cq, caps: QpCaps) -> Result<Qp> {
        self.qp_create_inner(pd, send_cq, recv_cq, caps, None)
    }

    /// `qp_create` of a QP that takes its receives from `srq` (of the same PD) and takes
    /// none of its own.
    pub fn qp_create_with_srq(
        &self,
        pd: Pd,
        send_cq: &Cq,
        recv_cq: &Cq,
        caps: QpCaps,
        srq: &Srq,
    ) -> Result<Qp> {
        self.qp_create_inner(pd, send_cq, recv_cq, caps, Some(srq.clone()))
    }

    fn qp_create_inner(
        &self,
        pd: Pd,
        send_cq: &Cq,
        recv_cq: &Cq,
        caps: QpCaps,
        srq: Option<Srq>,
    ) -> Result<Qp> {
        {
            let b = self.book();
            if !b.pds.contains_key(&pd) {
                return Err(VerbsError::UnknownPd(pd));
            }
            for cq in [send_cq, recv_cq] {
                if !b.cqs.contains_key(&cq.id()) {
                    return Err(VerbsError::UnknownCq(cq.id()));
                }
            }
        }
        let mut attr = stack::QpAttr::new(pd, send_cq.clone(), recv_cq.clone());
        attr.sq_depth = caps.sq_depth;
        attr.rq_depth = caps.rq_depth;
        attr.max_sge = caps.max_sge;
        attr.first_fpdu_delay = caps.first_fpdu_delay;
        attr.srq = srq;
        let inner = self.rnic.create_qp(attr)?;
        let mut b = self.book();
        b.qps.insert(inner.id(), (pd, send_cq.id(), recv_cq.id()));
        if let Some(u) = b.pds.get_mut(&pd) {
            u.qps += 1;
        }
        Ok(Qp { inner })
    }

    /// `srq_create` (ibverbs' `ibv_create_srq`): a shared receive queue of `pd` holding at
    /// most `depth` receives of at most `max_sge` SGEs; QPs of the PD created with it
    /// ([`Rnic::qp_create_with_srq`]) take their receives from it.
    pub fn srq_create(&self, pd: Pd, depth: usize, max_sge: usize) -> Result<Srq> {
        self.check_pd(pd)?;
        Ok(Srq::new(pd, depth, max_sge.max(stack::wr::MIN_MAX_SGE)))
    }

    /// `srq_post_recv` (ibverbs' `ibv_post_srq_recv`): a receive for whichever QP of the
    /// SRQ needs one next.
    pub fn srq_post_recv(&self, srq: &Srq, wr: RecvWr) -> Result<()> {
        Ok(srq.post_recv(wr)?)
    }

    /// `srq_arm_limit` (ibverbs' `srq_limit` of `ibv_modify_srq`): once a take leaves fewer
    /// than `limit` receives, [`Event::SrqLimitReached`] is reported (once; 0 disarms).
    pub fn srq_arm_limit(&self, srq: &Srq, limit: usize) {
        srq.arm_limit(limit);
    }

    /// `qp_destroy`: aborts the connection and flushes every outstanding work request.
    pub fn qp_destroy(&self, qp: &Qp) -> Result<()> {
        self.rnic.destroy_qp(&qp.inner)?;
        let mut b = self.book();
        if let Some((pd, _, _)) = b.qps.remove(&qp.id())
            && let Some(u) = b.pds.get_mut(&pd)
        {
            u.qps = u.qps.saturating_sub(1);
        }
        Ok(())
    }

    /// `qp_post_sq`: posts a send-queue work request.
    pub fn qp_post_sq(&self, qp: &Qp, wr: SendWr) -> Result<()> {
        Ok(qp.inner.post_send(wr)?)
    }

    /// `qp_post_rq`: posts a receive (also before the QP is connected).
    pub fn qp_post_rq(&self, qp: &Qp, wr: RecvWr) -> Result<()> {
        Ok(qp.inner.post_recv(wr)?)
    }

    // ---------------------------------------------------------------- connections

    /// Listens for [`Rnic::qp_passive_connect`] on a transport address: a `SocketAddr`
    /// (MPA over kernel TCP; port 0: ephemeral) or any [`TransportAddr`], e.g.
    /// `"sctp+udp://10.0.0.1,10.0.1.1:7174".parse()?` for DDP over softrnic's multihomed
    /// SCTP.
    pub fn listen(&self, at: impl Into<TransportAddr>) -> Result<Listener> {
        Ok(self.rnic.listen_on(&at.into())?)
    }

    /// `qp_active_connect`: connects `qp` to a transport address (over TCP: the TCP
    /// connection, then the MPA Request with `cfg`; over SCTP: the association, then the
    /// DDP Stream Session Initiate with `cfg`'s IRD/ORD and private data) and waits until
    /// it is established.
    pub fn qp_active_connect(
        &self,
        qp: &Qp,
        to: impl Into<TransportAddr>,
        cfg: MpaConfig,
        timeout: Duration,
    ) -> Result<Session> {
        Ok(self
            .rnic
            .connect_to_blocking(&qp.inner, &to.into(), cfg, timeout)?)
    }

    /// `qp_passive_connect`: waits for the next connection request on `listener`, accepts
    /// it on `qp` answering with `cfg`, and waits until it is established.
    pub fn qp_passive_connect(
        &self,
        listener: &Listener,
        qp: &Qp,
        cfg: MpaConfig,
        timeout: Duration,
    ) -> Result<(Session, ConnectRequest)> {
        Ok(self
            .rnic
            .accept_blocking(listener, &qp.inner, cfg, timeout)?)
    }

    /// `qp_register_fd`: runs the QP over an already connected TCP socket, as MPA
    /// initiator or responder (or directly in full operation); wait for
    /// [`Event::Established`] or call [`Rnic::wait_established`].
    pub fn qp_register_fd(&self, qp: &Qp, stream: TcpStream, role: AdoptRole) -> Result<()> {
        Ok(self.rnic.adopt(&qp.inner, stream, role)?)
    }

    /// Waits until `qp` is connected.
    pub fn wait_established(&self, qp: &Qp, timeout: Duration) -> Result<Session> {
        Ok(self.rnic.wait_established(&qp.inner, timeout)?)
    }

    /// `qp_disconnect`: graceful close; outstanding work completes, then the connection
    /// closes and whatever is still posted is flushed.
    pub fn qp_disconnect(&self, qp: &Qp) -> Result<()> {
        Ok(self.rnic.disconnect(&qp.inner)?)
    }

    /// `qp_modify` (RDMA Verbs Modify QP): a state transition the consumer asks for, in
    /// order with the work posted before it — `Closing` (as [`Rnic::qp_disconnect`]),
    /// `Terminate` (a Terminate goes to the peer, then the connection closes) or `Error`
    /// (abortive close). Outstanding work requests are flushed. Transitions the QP's state
    /// does not allow fail with [`VerbsError::Rnic`] holding a [`stack::ModifyError`].
    pub fn qp_modify(&self, qp: &Qp, to: QpState) -> Result<()> {
        Ok(self.rnic.modify_qp(&qp.inner, to)?)
    }

    /// `qp_query` (RDMA Verbs Query QP): the QP's attributes and state.
    pub fn qp_query(&self, qp: &Qp) -> QpInfo {
        let attr = qp.inner.attr();
        QpInfo {
            id: qp.inner.id(),
            state: qp.inner.state(),
            pd: attr.pd,
            sq_depth: attr.sq_depth,
            rq_depth: attr.rq_depth,
            max_sge: attr.max_sge,
            sq_outstanding: qp.inner.sq_outstanding(),
            rq_posted: qp.inner.rq_posted(),
            mulpdu: qp.inner.mulpdu(),
            session: qp.inner.session(),
        }
    }

    /// `query_rnic` (RDMA Verbs Query RNIC, ibverbs' `ibv_query_device`): what this RNIC
    /// offers.
    pub fn query_rnic(&self) -> RnicAttr {
        RnicAttr {
            vendor: "softrnic",
            version: env!("CARGO_PKG_VERSION"),
            transport: "iWARP: RDMAP (RFC 5040, RFC 7306) over DDP (RFC 5041) over MPA/TCP \
                        (RFC 5044, RFC 6581) or SCTP (RFC 5043)",
            min_max_sge: stack::wr::MIN_MAX_SGE,
            max_cq_depth: MAX_CQ_DEPTH,
            max_ird: MAX_IRD_ORD,
            max_ord: MAX_IRD_ORD,
            max_stags: stack::mem::MAX_STAG_INDEX - 1,
            memory_windows: &[MwType::Type1, MwType::Type2],
            fast_registration: true,
            atomics: true,
            immediate_data: true,
            send_with_invalidate: true,
            completion_channels: true,
        }
    }

    /// The next connection or asynchronous event, if any.
    pub fn poll_event(&self) -> Option<Event> {
        self.rnic.poll_event()
    }

    /// Waits up to `timeout` for the next event.
    pub fn wait_event(&self, timeout: Duration) -> Option<Event> {
        self.rnic.wait_event(timeout)
    }
}
