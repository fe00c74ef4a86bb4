//! Work requests: what the application posts to a QP's send and receive queues.

/// A scatter/gather element: `len` bytes at Tagged Offset `to` of the local region `stag`
/// (the lkey). `to` is numbered as the region was registered: an offset for zero-based
/// regions, an address for VA-based ones ([`crate::mem::MemoryRegion::sge`] builds one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Sge {
    /// Local STag (lkey).
    pub stag: u32,
    /// Tagged Offset of the first byte.
    pub to: u64,
    /// Length in bytes.
    pub len: u32,
}

/// Minimum number of SGEs every QP accepts per work request.
pub const MIN_MAX_SGE: usize = 6;

/// The operation of a send-queue work request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SendOp {
    /// Send (RFC 5040 §5.3): the SGL is gathered into one untagged message on queue 0.
    /// `solicited` selects Send with Solicited Event; `invalidate` names an STag the peer
    /// invalidates (Send with Invalidate). All four opcodes are reachable.
    Send {
        /// Solicited Event.
        solicited: bool,
        /// Remote STag to invalidate.
        invalidate: Option<u32>,
    },
    /// RDMA Write (RFC 5040 §5.1) of the gathered SGL to `remote_to` of `remote_stag`.
    Write {
        /// Data Sink STag.
        remote_stag: u32,
        /// Data Sink Tagged Offset.
        remote_to: u64,
    },
    /// RDMA Read (RFC 5040 §5.2) of the SGL's total length from `remote_to` of
    /// `remote_stag` into the SGL. Every SGE becomes one RDMA Read Request whose Data Sink
    /// STag is the SGE's own STag (so each sink region needs local and remote write), reading
    /// the next part of the remote range; each uses one ORD credit.
    Read {
        /// Data Source STag.
        remote_stag: u32,
        /// Data Source Tagged Offset.
        remote_to: u64,
    },
    /// Masked Fetch and Add (RFC 7306 §5.1.1) on the 64-bit value at `remote_to`; the
    /// original value is written to the single 8-byte SGE (host byte order).
    FetchAdd {
        /// Remote STag.
        remote_stag: u32,
        /// Remote Tagged Offset (8-byte aligned address).
        remote_to: u64,
        /// Add Data.
        add: u64,
        /// Add Mask (0: plain 64-bit add).
        add_mask: u64,
    },
    /// Masked Compare and Swap (RFC 7306 §5.1.2); the original value is written to the
    /// single 8-byte SGE.
    CmpSwap {
        /// Remote STag.
        remote_stag: u32,
        /// Remote Tagged Offset (8-byte aligned address).
        remote_to: u64,
        /// Compare Data.
        compare: u64,
        /// Compare Mask.
        compare_mask: u64,
        /// Swap Data.
        swap: u64,
        /// Swap Mask.
        swap_mask: u64,
    },
    /// Immediate Data (RFC 7306 §6): eight bytes delivered in the peer's receive completion;
    /// it consumes one of the peer's receive buffers. The SGL must be empty.
    ImmediateData {
        /// The eight bytes.
        data: [u8; 8],
        /// Immediate Data with Solicited Event.
        solicited: bool,
    },
    /// Local Invalidate of a local STag, executed in send-queue order.
    LocalInvalidate {
        /// The STag to invalidate.
        stag: u32,
    },
    /// Bind a Type 2 memory window (RDMA Verbs' Bind Memory Window work request, ibverbs'
    /// `IBV_WR_BIND_MW`), executed in send-queue order: the window whose index `mw` names
    /// (from [`crate::MemTable::alloc_mw`], unbound) covers `len` bytes at Tagged Offset
    /// `to` of the region `region` with rights `access` (a subset of the region's, which
    /// must grant window binds), under `mw`'s consumer key (new after the first binding);
    /// only this QP's stream may use it. The SGL must be empty.
    BindWindow {
        /// The window's STag with its new key.
        mw: u32,
        /// The region's STag.
        region: u32,
        /// First Tagged Offset (in the region's numbering).
        to: u64,
        /// Length.
        len: u64,
        /// Rights (remote read, write, atomic).
        access: crate::Access,
        /// Whether the window's Tagged Offsets start at 0 (else they are the region's).
        zero_based: bool,
    },
    /// Fast Register (RDMA Verbs' Fast-Register work request, the kernel verbs'
    /// `IB_WR_REG_MR`), executed in send-queue order: the fast-register STag (from
    /// [`crate::MemTable::alloc_fast_reg`]) whose index `stag` names becomes valid with the
    /// memory last mapped to it ([`crate::MemTable::map_fast_reg`]), rights `access` and
    /// `stag`'s consumer key, which must be new. The STag must be invalid. The SGL must be
    /// empty.
    FastRegister {
        /// The STag with its new key.
        stag: u32,
        /// Rights granted (remote write and remote atomic need local write).
        access: crate::Access,
    },
}

impl SendOp {
    /// Whether the operation uses an ORD credit (outbound RDMA Read or Atomic Request).
    pub fn needs_ord(&self) -> bool {
        matches!(
            self,
            SendOp::Read { .. } | SendOp::FetchAdd { .. } | SendOp::CmpSwap { .. }
        )
    }
}

/// A send-queue work request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SendWr {
    /// Application cookie, returned in the completion.
    pub wr_id: u64,
    /// The operation.
    pub op: SendOp,
    /// Local memory: gathered for Send and Write, scattered for Read, the result for atomics.
    pub sgl: Vec<Sge>,
    /// Whether a successful completion is reported (errors always are).
    pub signaled: bool,
    /// Read fence: do not start before every earlier RDMA Read and Atomic has completed.
    pub fence: bool,
}

impl SendWr {
    /// A signaled, unfenced work request.
    pub fn new(wr_id: u64, op: SendOp, sgl: Vec<Sge>) -> SendWr {
        SendWr {
            wr_id,
            op,
            sgl,
            signaled: true,
            fence: false,
        }
    }

    /// A plain Send.
    pub fn send(wr_id: u64, sgl: Vec<Sge>) -> SendWr {
        SendWr::new(
            wr_id,
            SendOp::Send {
                solicited: false,
                invalidate: None,
            },
            sgl,
        )
    }

    /// An RDMA Write.
    pub fn write(wr_id: u64, sgl: Vec<Sge>, remote_stag: u32, remote_to: u64) -> SendWr {
        SendWr::new(
            wr_id,
            SendOp::Write {
                remote_stag,
                remote_to,
            },
            sgl,
        )
    }

    /// An RDMA Read.
    pub fn read(wr_id: u64, sgl: Vec<Sge>, remote_stag: u32, remote_to: u64) -> SendWr {
        SendWr::new(
            wr_id,
            SendOp::Read {
                remote_stag,
                remote_to,
            },
            sgl,
        )
    }

    /// Marks the request unsignaled.
    pub fn unsignaled(mut self) -> SendWr {
        self.signaled = false;
        self
    }

    /// Sets the read fence.
    pub fn fenced(mut self) -> SendWr {
        self.fence = true;
        self
    }

    /// Total bytes of the SGL.
    pub fn sgl_len(&self) -> u64 {
        self.sgl.iter().map(|s| u64::from(s.len)).sum()
    }
}

/// A receive-queue work request: a buffer for one incoming untagged Send (or Immediate
/// Data) message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecvWr {
    /// Application cookie, returned in the completion.
    pub wr_id: u64,
    /// Where the message is scattered (every SGE needs local write).
    pub sgl: Vec<Sge>,
}

impl RecvWr {
    /// A receive request.
    pub fn new(wr_id: u64, sgl: Vec<Sge>) -> RecvWr {
        RecvWr { wr_id, sgl }
    }

    /// Total bytes of the SGL.
    pub fn sgl_len(&self) -> u64 {
        self.sgl.iter().map(|s| u64::from(s.len)).sum()
    }
}
