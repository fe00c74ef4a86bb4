//! Protection domains, registered memory and the STag table.
//!
//! # Model
//!
//! * A [`Pd`] (protection domain) groups memory regions and queue pairs: a QP may only touch
//!   memory registered in its own PD (RFC 5041 §8.2, RFC 5040 §5.3 "associated with the RDMAP
//!   Stream").
//! * A [`RegisteredBuf`] is a block of memory that stays alive and in place while anything
//!   refers to it. The stack allocates it (page aligned, zeroed), or the caller hands over raw
//!   memory through the `unsafe` [`RegisteredBuf::from_raw`] (for a future C ABI). It is shared
//!   as an `Arc` between the application and the [`MemTable`]; the application reads and
//!   writes it with copy methods while the engine places incoming data through the table, the
//!   RDMA model, where the NIC and the host share the buffer.
//! * [`MemTable::register`] makes a [`MemoryRegion`]: a range of a buffer with access rights,
//!   a Tagged Offset base (zero-based, or the buffer's virtual address as iWARP VA-based
//!   addressing does) and an STag = 24-bit index + 8-bit consumer key. The key is the
//!   consumer's choice or, by default, a per-index counter that changes whenever an index is
//!   reused, so a stale STag does not silently match a new registration. Changing the key of
//!   an existing registration is an explicit operation ([`MemTable::rekey`]) that is only
//!   allowed once the STag has been invalidated (the verbs "fast register" rule).
//! * Access rights: local read is always granted; remote write and remote atomic need local
//!   write (the verbs rule, [`MemError::RemoteNeedsLocalWrite`]).
//! * Index 0 is never handed out, so STags 0x00000000..=0x000000ff never name memory (some
//!   peers treat STag 0 specially).
//!
//! # Lookups for the engine
//!
//! Every lookup the protocol engine makes returns the exact error the protocol prescribes and
//! touches no memory when it fails: [`MemTable::check_sink`] (RDMA Write and Read Response
//! placement, DDP tagged checks of RFC 5041 §7.1), [`MemTable::check_read_source`] (RFC 5040
//! §5.2.1), [`MemTable::check_atomic`] (RFC 7306 §5.1–§5.2), [`MemTable::remote_invalidate`]
//! (RFC 5040 §5.3) and [`MemTable::resolve_local`] for the local scatter/gather lists of work
//! requests ([`LocalError`]).
//!
//! # `unsafe`
//!
//! This module is the only place in the crate with `unsafe` code: the raw-pointer copies into
//! and out of a [`RegisteredBuf`], its allocation and release, the atomic view used by RFC 7306
//! atomics, the raw registration path and [`write_parts`], which hands ranges of registered
//! memory to `sendmsg` as raw iovecs (zero-copy transmit). Registered memory is not kept
//! as a Rust slice, since the application may write it at any time: bytes are copied in and
//! out or given to the kernel by address. The one exception is [`RegisteredBuf::read_with`],
//! which lends a range that a posted send is reading to the CRC routine for the length of
//! one call (under the verbs contract the application does not touch it then; a copy
//! through a bounce buffer first cost about 7 % of the sender's CPU time). Each block
//! states why it is sound.

#![allow(unsafe_code)]

use std::alloc::{self, Layout};
use std::collections::VecDeque;
use std::ops::Range;
use std::ptr::NonNull;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard};

pub use ddp::Access;
use ddp::{DdpError, TaggedBuffer, TaggedRepr};
use netsim::rng::splitmix64;
use rdmap::{AtomicRequest, ReadRequest, TermCause};
use thiserror::Error;

/// Alignment of buffers the stack allocates.
pub const PAGE_SIZE: usize = 4096;

/// Largest STag index (24 bits).
pub const MAX_STAG_INDEX: u32 = 0x00ff_ffff;

/// The 24-bit index of an STag.
pub const fn stag_index(stag: u32) -> u32 {
    stag >> 8
}

/// The 8-bit consumer key of an STag.
pub const fn stag_key(stag: u32) -> u8 {
    (stag & 0xff) as u8
}

/// The STag made of `index` (24 bits; higher bits are dropped) and `key`.
pub const fn make_stag(index: u32, key: u8) -> u32 {
    ((index & MAX_STAG_INDEX) << 8) | key as u32
}

/// A protection domain.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Pd(u32);

impl Pd {
    /// The numeric id (unique within its [`MemTable`]).
    pub const fn id(self) -> u32 {
        self.0
    }
}

/// Errors of the memory verbs and of [`RegisteredBuf`] accesses.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum MemError {
    /// Remote write or remote atomic access was asked for without local write.
    #[error(
        "access {access} is not allowed: remote write and remote atomic access need local write"
    )]
    RemoteNeedsLocalWrite {
        /// The rights asked for.
        access: Access,
    },
    /// A range does not lie inside the buffer.
    #[error("range {start}..{end} lies outside the {len}-byte buffer")]
    OutOfBounds {
        /// First byte of the range.
        start: usize,
        /// One past the last byte of the range.
        end: usize,
        /// Length of the buffer.
        len: usize,
    },
    /// All 2^24 − 1 STag indices are in use.
    #[error("no free STag index left (all {MAX_STAG_INDEX} are registered)")]
    TableFull,
    /// The memory could not be allocated (too large for this machine or for an allocation).
    #[error("cannot allocate {len} bytes of registered memory")]
    NoMemory {
        /// Bytes asked for.
        len: usize,
    },
    /// No memory region is registered under the STag.
    #[error("STag {stag:#010x} is not registered (or its key does not match)")]
    UnknownStag {
        /// The STag given.
        stag: u32,
    },
    /// The region belongs to another protection domain.
    #[error("STag {stag:#010x} belongs to protection domain {owner}, not {pd}")]
    PdMismatch {
        /// The STag given.
        stag: u32,
        /// PD the region belongs to.
        owner: u32,
        /// PD the caller used.
        pd: u32,
    },
    /// The key of a valid STag can only change after it has been invalidated.
    #[error("STag {stag:#010x} is still valid; invalidate it before giving it a new key")]
    StillValid {
        /// The STag given.
        stag: u32,
    },
    /// The region was registered without the right to be invalidated.
    #[error("STag {stag:#010x} was registered as not invalidatable")]
    NotInvalidatable {
        /// The STag given.
        stag: u32,
    },
    /// A Fast Register names an STag that was not allocated for fast registration.
    #[error("STag {stag:#010x} is not a fast-register STag")]
    NotFastReg {
        /// The STag given.
        stag: u32,
    },
    /// A Fast Register must give the STag a new consumer key, so that the STag of its last
    /// use is refused from then on.
    #[error("Fast Register of STag {stag:#010x} keeps its key {key:#04x}: rotate the key")]
    KeyNotRotated {
        /// The STag given.
        stag: u32,
        /// The key it already had.
        key: u8,
    },
    /// A region with memory windows bound to it cannot be deregistered.
    #[error("STag {stag:#010x} has {windows} memory window(s) bound to it")]
    WindowsBound {
        /// The region's STag.
        stag: u32,
        /// Windows bound.
        windows: u32,
    },
    /// A memory window operation named an STag that is not a window of that kind (or a
    /// window where a region is needed).
    #[error("STag {stag:#010x} is not {what}")]
    NotAWindow {
        /// The STag given.
        stag: u32,
        /// What was needed.
        what: &'static str,
    },
    /// A window bind asks for rights the region lacks, or the region does not allow
    /// windows.
    #[error("window rights {asked} exceed what region {region:#010x} grants ({granted})")]
    WindowRights {
        /// The region.
        region: u32,
        /// Rights asked for.
        asked: Access,
        /// Rights of the region.
        granted: Access,
    },
    /// A window range outside its region.
    #[error("window TO {to:#x} + {len} lies outside region {region:#010x}")]
    WindowBounds {
        /// The region.
        region: u32,
        /// TO asked for.
        to: u64,
        /// Length asked for.
        len: u64,
    },
    /// A Type 2 window that is bound (in use) cannot be bound again before it is
    /// invalidated.
    #[error("memory window {stag:#010x} is bound; invalidate it first")]
    WindowInUse {
        /// The window's STag.
        stag: u32,
    },
    /// A Fast Register of an STag that has no memory mapped to it.
    #[error("no memory is mapped to fast-register STag {stag:#010x}")]
    NotMapped {
        /// The STag given.
        stag: u32,
    },
    /// A Fast Register asks for more memory than the STag was allocated for.
    #[error(
        "Fast Register of {len} bytes exceeds the {max} bytes STag {stag:#010x} was allocated for"
    )]
    FastRegTooLong {
        /// The STag given.
        stag: u32,
        /// Bytes asked for.
        len: u64,
        /// Its maximum.
        max: u64,
    },
    /// A shared registration or a re-registration named an STag that is not a memory region
    /// (a memory window, or a fast-register STag).
    #[error("STag {stag:#010x} is not a memory region ({what})")]
    NotARegion {
        /// The STag given.
        stag: u32,
        /// What it is.
        what: &'static str,
    },
    /// The Tagged Offset range of a registration wraps past 2^64.
    #[error("base TO {base:#x} plus length {len} wraps past 2^64")]
    ToWrap {
        /// Base TO.
        base: u64,
        /// Length.
        len: u64,
    },
}

/// Refuses a shared registration or a re-registration of anything but a memory region.
fn region_only(e: &Entry, stag: u32) -> Result<(), MemError> {
    if e.window.is_some() {
        return Err(MemError::NotARegion {
            stag,
            what: "a memory window",
        });
    }
    if e.fast_reg.is_some() {
        return Err(MemError::NotARegion {
            stag,
            what: "a fast-register STag",
        });
    }
    Ok(())
}

/// Refuses an operation on entry `e` (named by `stag`) from another protection domain.
fn same_pd(e: &Entry, stag: u32, pd: Pd) -> Result<(), MemError> {
    if e.pd == pd {
        Ok(())
    } else {
        Err(MemError::PdMismatch {
            stag,
            owner: e.pd.0,
            pd: pd.0,
        })
    }
}

/// Checks a registration's rights and range of `buf` and returns its length and base TO.
fn layout(
    buf: &RegisteredBuf,
    range: &Range<usize>,
    access: Access,
    addressing: Addressing,
) -> Result<(u64, u64), MemError> {
    if (access.contains(Access::REMOTE_WRITE) || access.contains(Access::REMOTE_ATOMIC))
        && !access.contains(Access::LOCAL_WRITE)
    {
        return Err(MemError::RemoteNeedsLocalWrite { access });
    }
    if range.start > range.end || range.end > buf.len() {
        return Err(MemError::OutOfBounds {
            start: range.start,
            end: range.end,
            len: buf.len(),
        });
    }
    let len = (range.end - range.start) as u64;
    let base_to = match addressing {
        Addressing::ZeroBased => 0,
        Addressing::VirtualAddress => buf.addr().wrapping_add(range.start as u64),
    };
    if base_to.checked_add(len).is_none() {
        return Err(MemError::ToWrap { base: base_to, len });
    }
    Ok((len, base_to))
}

/// The memory [`MemTable::map_fast_reg`] maps to a fast-register STag (the kernel verbs'
/// `ib_map_mr_sg`); a Fast Register work request then makes it valid.
#[derive(Clone, Debug)]
pub struct FastRegRegion {
    /// The buffer.
    pub buf: Arc<RegisteredBuf>,
    /// The bytes of it the STag covers.
    pub range: Range<usize>,
    /// TO numbering.
    pub addressing: Addressing,
}

impl FastRegRegion {
    /// All of `buf`, VA-based.
    pub fn new(buf: &Arc<RegisteredBuf>) -> FastRegRegion {
        FastRegRegion {
            buf: buf.clone(),
            range: 0..buf.len(),
            addressing: Addressing::VirtualAddress,
        }
    }

    /// Only `range` of the buffer.
    pub fn range(mut self, range: Range<usize>) -> Self {
        self.range = range;
        self
    }

    /// Zero-based Tagged Offsets.
    pub fn zero_based(mut self) -> Self {
        self.addressing = Addressing::ZeroBased;
        self
    }

    /// The Tagged Offset of byte `offset` of the range once registered.
    pub fn to_at(&self, offset: u64) -> u64 {
        match self.addressing {
            Addressing::ZeroBased => offset,
            Addressing::VirtualAddress => self.buf.addr() + self.range.start as u64 + offset,
        }
    }
}

/// How the Tagged Offsets of a region are numbered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Addressing {
    /// The first byte of the region has TO 0.
    ZeroBased,
    /// The first byte of the region has TO = its virtual address (iWARP VA-based STags).
    #[default]
    VirtualAddress,
}

enum Backing {
    /// Allocated here with this layout; released on drop.
    Owned(Layout),
    /// Memory owned by the caller of [`RegisteredBuf::from_raw`].
    Borrowed,
}

/// A block of memory that stays alive and in place while registered: the application's view
/// of registered memory, shared with the engine through the [`MemTable`].
///
/// Reads and writes are byte copies ([`RegisteredBuf::read_with`] lends a range to one
/// read-only call, for the CRC of bytes being sent). The engine may write into the buffer (RDMA Write, Read
/// Response, Send placement) while the application holds it: as on any RNIC, the application
/// must not read data the peer has not finished placing (it learns that from a completion or
/// from its own protocol), or it sees a mix of old and new bytes.
pub struct RegisteredBuf {
    ptr: NonNull<u8>,
    len: usize,
    backing: Backing,
}

// SAFETY: the buffer is plain bytes reached only through raw-pointer copies, atomics and the
// call-long loan of `read_with`; no references into it escape, so it may move between and be
// shared by threads. Concurrent byte
// copies from two sides are the RDMA shared-buffer model described on the type.
unsafe impl Send for RegisteredBuf {}
// SAFETY: see the `Send` impl: all access is by copy through `&self` methods.
unsafe impl Sync for RegisteredBuf {}

impl std::fmt::Debug for RegisteredBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegisteredBuf")
            .field("addr", &format_args!("{:#x}", self.addr()))
            .field("len", &self.len)
            .field("owned", &matches!(self.backing, Backing::Owned(_)))
            .finish()
    }
}

impl RegisteredBuf {
    /// A new zeroed, page-aligned buffer of `len` bytes.
    ///
    /// # Panics
    /// Aborts like any allocation when memory is exhausted; panics if `len` rounded up to a
    /// page overflows `isize`.
    pub fn new(len: usize) -> Arc<RegisteredBuf> {
        match RegisteredBuf::try_new(len) {
            Ok(b) => b,
            Err(_) => panic!("cannot allocate a buffer of {len} bytes"),
        }
    }

    /// [`RegisteredBuf::new`] that returns an error instead of panicking or aborting when
    /// `len` bytes cannot be had (a size no allocation can have, or the allocator refuses).
    pub fn try_new(len: usize) -> Result<Arc<RegisteredBuf>, MemError> {
        // A zero-sized allocation is not allowed; keep one byte behind an empty buffer.
        let layout = Layout::from_size_align(len.max(1), PAGE_SIZE)
            .map_err(|_| MemError::NoMemory { len })?;
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).ok_or(MemError::NoMemory { len })?;
        Ok(Arc::new(RegisteredBuf {
            ptr,
            len,
            backing: Backing::Owned(layout),
        }))
    }

    /// A buffer holding a copy of `data`.
    pub fn from_slice(data: &[u8]) -> Arc<RegisteredBuf> {
        let b = RegisteredBuf::new(data.len());
        // Same length, offset 0: cannot fail.
        let _ = b.write_at(0, data);
        b
    }

    /// Wraps memory the caller owns, for registration through a C ABI.
    ///
    /// # Safety
    /// * `ptr` must be valid for reads and writes of `len` bytes, and stay valid and unmoved
    ///   for as long as the returned buffer (or any clone of the `Arc`, including the one the
    ///   [`MemTable`] keeps while the region is registered) exists. The memory is not freed
    ///   when the buffer is dropped; the caller frees it after deregistering and dropping
    ///   every handle.
    /// * The memory must not be accessed through Rust references while the buffer exists
    ///   (only through raw pointers, C code or this buffer's methods), since the engine writes
    ///   it at any time.
    /// * `ptr` must not be null unless `len` is 0.
    pub unsafe fn from_raw(ptr: *mut u8, len: usize) -> Arc<RegisteredBuf> {
        let ptr = NonNull::new(ptr).unwrap_or(NonNull::dangling());
        Arc::new(RegisteredBuf {
            ptr,
            len,
            backing: Backing::Borrowed,
        })
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Address of the first byte (the TO base of a VA-based registration).
    pub fn addr(&self) -> u64 {
        self.ptr.as_ptr() as usize as u64
    }

    fn check(&self, offset: usize, len: usize) -> Result<(), MemError> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(MemError::OutOfBounds {
                start: offset,
                end: offset.saturating_add(len),
                len: self.len,
            }),
        }
    }

    /// Lends the `len` bytes starting at `offset` to `f` for one read-only pass (e.g. to
    /// checksum bytes that are then sent from here by address, without a staging copy).
    ///
    /// The bytes are those of a registered range that a posted work request is sending:
    /// under the verbs contract the application leaves them alone until that request
    /// completes. An application that writes them anyway gets what any RNIC gives it,
    /// undefined bytes on the wire; here the CRC of this pass would then not match the
    /// bytes the kernel copies later, and the peer rejects the FPDU (RFC 5044 §8).
    pub fn read_with<R>(
        &self,
        offset: usize,
        len: usize,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<R, MemError> {
        self.check(offset, len)?;
        // SAFETY: offset..offset + len lies inside the buffer (checked above), which stays
        // allocated and in place while `self` is borrowed, so the slice is valid for reads
        // for the whole call; it does not outlive `f`. Within the crate nothing writes this
        // buffer while `f` runs: the engine that places into registered memory runs on the
        // same progress core, one call at a time. A concurrent write by the application
        // breaks the contract documented above and on [`RegisteredBuf`], exactly as its
        // copies would (racing byte copies are the shared-buffer model of the type).
        let bytes = unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(offset), len) };
        Ok(f(bytes))
    }

    /// Copies `dst.len()` bytes starting at `offset` into `dst`.
    pub fn read_at(&self, offset: usize, dst: &mut [u8]) -> Result<(), MemError> {
        self.check(offset, dst.len())?;
        // SAFETY: offset..offset + dst.len() lies inside the buffer (checked above), which is
        // valid for reads while `self` lives; `dst` is a distinct Rust slice, so the ranges do
        // not overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.ptr.as_ptr().add(offset),
                dst.as_mut_ptr(),
                dst.len(),
            );
        }
        Ok(())
    }

    /// Appends the `len` bytes starting at `offset` to `out`, copying them once, straight
    /// into `out`'s spare capacity (`out` is not zero-filled first). Nothing is appended
    /// on error.
    pub fn append_to(&self, offset: usize, len: usize, out: &mut Vec<u8>) -> Result<(), MemError> {
        self.check(offset, len)?;
        out.reserve(len);
        let at = out.len();
        // SAFETY: offset..offset + len lies inside the buffer (checked above), which is valid
        // for reads while `self` lives. `reserve` left at least `len` bytes of spare capacity,
        // so at..at + len is valid for writes inside `out`'s own allocation, which cannot
        // overlap the buffer (owned buffers are separate allocations; borrowed memory must not
        // be reachable through Rust references, see `from_raw`). The copy initialises exactly
        // those `len` bytes, so `set_len` only exposes initialised bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.ptr.as_ptr().add(offset),
                out.as_mut_ptr().add(at),
                len,
            );
            out.set_len(at + len);
        }
        Ok(())
    }

    /// Copies `src` into the buffer starting at `offset`.
    pub fn write_at(&self, offset: usize, src: &[u8]) -> Result<(), MemError> {
        self.check(offset, src.len())?;
        // SAFETY: offset..offset + src.len() lies inside the buffer (checked above), which is
        // valid for writes while `self` lives; no Rust reference into the buffer exists, and
        // `src` cannot alias it: the buffer is only reachable through raw pointers.
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.as_ptr().add(offset), src.len());
        }
        Ok(())
    }

    /// Sets every byte to `byte`.
    pub fn fill(&self, byte: u8) {
        // SAFETY: the whole buffer (len bytes from ptr) is valid for writes while `self` lives.
        unsafe {
            std::ptr::write_bytes(self.ptr.as_ptr(), byte, self.len);
        }
    }

    /// A copy of the whole buffer.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = vec![0u8; self.len];
        // Whole buffer into a vector of its length: cannot fail.
        let _ = self.read_at(0, &mut v);
        v
    }

    /// A copy of `range`.
    pub fn read_range(&self, range: Range<usize>) -> Result<Vec<u8>, MemError> {
        let mut v = vec![0u8; range.end.saturating_sub(range.start)];
        self.read_at(range.start, &mut v)?;
        Ok(v)
    }

    /// The 64-bit word at `offset` as an atomic, if it is in bounds and 8-byte aligned in
    /// memory (RFC 7306 atomics work on aligned 64-bit values in host byte order).
    pub(crate) fn atomic_u64(&self, offset: usize) -> Option<&AtomicU64> {
        self.check(offset, 8).ok()?;
        // SAFETY: in bounds (checked above), so the pointer stays inside the allocation.
        let p = unsafe { self.ptr.as_ptr().add(offset) };
        if !(p as usize).is_multiple_of(8) {
            return None;
        }
        // SAFETY: `p` is 8-byte aligned and valid for reads and writes of 8 bytes for the
        // lifetime of `&self`; all concurrent accesses to these bytes by the stack are atomic
        // or byte copies under the shared-buffer model of the type.
        Some(unsafe { AtomicU64::from_ptr(p.cast::<u64>()) })
    }
}

impl Drop for RegisteredBuf {
    fn drop(&mut self) {
        if let Backing::Owned(layout) = self.backing {
            // SAFETY: `ptr` was returned by `alloc_zeroed` with exactly this layout and is
            // released only here, once.
            unsafe { alloc::dealloc(self.ptr.as_ptr(), layout) };
        }
    }
}

/// Options of [`MemTable::register`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MrOptions {
    /// Rights granted (local read is implied).
    pub access: Access,
    /// TO numbering.
    pub addressing: Addressing,
    /// Consumer key; `None` picks the index's current default key.
    pub key: Option<u8>,
    /// The part of the buffer to register; `None` registers all of it.
    pub range: Option<Range<usize>>,
    /// Whether a local invalidate or a remote Send with Invalidate may invalidate the STag.
    pub invalidatable: bool,
}

/// What [`MemTable::reregister`] changes; `None` keeps the region's current value.
#[derive(Clone, Debug, Default)]
pub struct Rereg {
    /// A new protection domain.
    pub pd: Option<Pd>,
    /// New rights.
    pub access: Option<Access>,
    /// New memory: a buffer and the range of it to register.
    pub memory: Option<(Arc<RegisteredBuf>, Range<usize>)>,
    /// New Tagged Offset numbering (kept by default: zero-based stays zero-based).
    pub addressing: Option<Addressing>,
    /// A new consumer key.
    pub key: Option<u8>,
    /// Whether the STag may be invalidated.
    pub invalidatable: Option<bool>,
}

impl MrOptions {
    /// The whole buffer, VA-based, default key, invalidatable.
    pub fn new(access: Access) -> MrOptions {
        MrOptions {
            access,
            addressing: Addressing::VirtualAddress,
            key: None,
            range: None,
            invalidatable: true,
        }
    }

    /// Zero-based Tagged Offsets.
    pub fn zero_based(mut self) -> Self {
        self.addressing = Addressing::ZeroBased;
        self
    }

    /// A consumer key.
    pub fn key(mut self, key: u8) -> Self {
        self.key = Some(key);
        self
    }

    /// Registers only `range` of the buffer.
    pub fn range(mut self, range: Range<usize>) -> Self {
        self.range = Some(range);
        self
    }

    /// Forbids invalidation.
    pub fn not_invalidatable(mut self) -> Self {
        self.invalidatable = false;
        self
    }
}

/// A registered memory region: what the application gets back from registration.
#[derive(Clone, Debug)]
pub struct MemoryRegion {
    stag: u32,
    pd: Pd,
    access: Access,
    base_to: u64,
    len: u64,
    buf: Arc<RegisteredBuf>,
    buf_off: usize,
}

impl MemoryRegion {
    /// The STag (also used as lkey and rkey).
    pub fn stag(&self) -> u32 {
        self.stag
    }

    /// The protection domain.
    pub fn pd(&self) -> Pd {
        self.pd
    }

    /// Rights granted.
    pub fn access(&self) -> Access {
        self.access
    }

    /// TO of the region's first byte.
    pub fn base_to(&self) -> u64 {
        self.base_to
    }

    /// TO of the byte at `offset` into the region.
    pub fn to_at(&self, offset: u64) -> u64 {
        self.base_to.wrapping_add(offset)
    }

    /// Length in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the region is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The underlying buffer.
    pub fn buf(&self) -> &Arc<RegisteredBuf> {
        &self.buf
    }

    /// Offset of the region's first byte in [`MemoryRegion::buf`].
    pub fn buf_offset(&self) -> usize {
        self.buf_off
    }

    /// A scatter/gather element covering `len` bytes at `offset` into the region.
    pub fn sge(&self, offset: u64, len: u32) -> crate::wr::Sge {
        crate::wr::Sge {
            stag: self.stag,
            to: self.to_at(offset),
            len,
        }
    }
}

/// What an STag resolves to, as the table reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MrInfo {
    /// Current STag (index and key).
    pub stag: u32,
    /// Protection domain.
    pub pd: Pd,
    /// Whether the STag is valid (not invalidated).
    pub valid: bool,
    /// Rights.
    pub access: Access,
    /// Base TO.
    pub base_to: u64,
    /// Length.
    pub len: u64,
    /// Whether it may be invalidated.
    pub invalidatable: bool,
}

#[derive(Debug)]
struct Entry {
    key: u8,
    pd: Pd,
    access: Access,
    base_to: u64,
    len: u64,
    buf: Arc<RegisteredBuf>,
    buf_off: usize,
    valid: bool,
    invalidatable: bool,
    /// A fast-register STag: the most bytes a Fast Register may give it.
    fast_reg: Option<u64>,
    /// The memory mapped to a fast-register STag for its next Fast Register.
    mapped: Option<FastRegRegion>,
    /// A fast-register STag has been registered before (its next key must be new).
    used: bool,
    /// A memory window: its type, the QP a Type 2 binding belongs to, and the slot of the
    /// region it is bound to.
    window: Option<Window>,
    /// Memory windows bound to this region now.
    windows: u32,
}

/// What a memory window entry knows of its binding.
#[derive(Clone, Copy, Debug)]
struct Window {
    ty: MwType,
    qp: Option<u32>,
    region: Option<usize>,
}

/// The type of a memory window (RDMA Verbs; ibverbs' `IBV_MW_TYPE_1/2`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MwType {
    /// Bound and unbound by a verb ([`MemTable::bind_mw`] with no QP); a bind of length 0
    /// unbinds it. It cannot be invalidated (locally or by a peer).
    Type1,
    /// Bound by a Bind work request on a QP ([`crate::SendOp::BindWindow`]) and usable only
    /// by that QP's stream; ended by Local Invalidate or the peer's Send with Invalidate.
    Type2,
}

/// The RDMAP Stream an incoming message arrived on, as the memory checks see it: its QP's
/// PD and the QP (a Type 2 memory window belongs to one QP). A bare [`Pd`] is a stream of
/// no particular QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamOwner {
    /// The QP's protection domain.
    pub pd: Pd,
    /// The QP.
    pub qp: Option<u32>,
}

impl From<Pd> for StreamOwner {
    fn from(pd: Pd) -> StreamOwner {
        StreamOwner { pd, qp: None }
    }
}

impl Entry {
    fn stag(&self, index: u32) -> u32 {
        make_stag(index, self.key)
    }

    /// The application's handle of this region, at table index `index`.
    fn region(&self, index: u32) -> MemoryRegion {
        MemoryRegion {
            stag: self.stag(index),
            pd: self.pd,
            access: self.access,
            base_to: self.base_to,
            len: self.len,
            buf: self.buf.clone(),
            buf_off: self.buf_off,
        }
    }

    fn tagged_buffer(&self, index: u32, on: StreamOwner) -> TaggedBuffer {
        let qp_ok = match self.window {
            Some(Window {
                qp: Some(owner), ..
            }) => on.qp == Some(owner),
            _ => true,
        };
        TaggedBuffer {
            stag: self.stag(index),
            valid: self.valid,
            associated: self.pd == on.pd && qp_ok,
            base_to: self.base_to,
            len: self.len,
            access: self.access,
        }
    }

    /// The bytes at `to .. to + len` (already validated to lie in the region).
    fn span(&self, to: u64, len: u64) -> Span {
        let rel = to.wrapping_sub(self.base_to);
        // rel + len <= self.len <= buf.len(), so both fit usize.
        Span {
            buf: self.buf.clone(),
            off: self.buf_off + rel as usize,
            len: len as usize,
        }
    }
}

/// STag indices that cannot be guessed (RFC 5042 §5.1.3, "STag guessing"): registrations
/// live in dense slots, and a slot's STag index is a keyed permutation of the slot number —
/// a 4-round Feistel network on the two 12-bit halves of the 24-bit index — so the index of
/// the next registration says nothing to a peer who holds some, while a lookup stays a few
/// arithmetic operations. The default consumer key of a registration is random too (and
/// differs from the key last used in that slot, so a stale STag stays dead).
#[derive(Debug, Default, Clone)]
struct IndexPerm {
    keys: [u32; 4],
    /// Generator state for default keys (SplitMix64).
    state: u64,
}

impl IndexPerm {
    fn from_seed(mut seed: u64) -> IndexPerm {
        let mut next = || splitmix64(&mut seed);
        IndexPerm {
            keys: [next() as u32, next() as u32, next() as u32, next() as u32],
            state: next(),
        }
    }

    fn round(k: u32, x: u32) -> u32 {
        let mut h = (x ^ k).wrapping_mul(0x9E37_79B1);
        h ^= h >> 15;
        h = h.wrapping_mul(0x85EB_CA6B);
        h ^= h >> 13;
        h & 0xFFF
    }

    /// The STag index of `slot`.
    fn index(&self, slot: u32) -> u32 {
        let (mut l, mut r) = ((slot >> 12) & 0xFFF, slot & 0xFFF);
        for k in self.keys {
            let t = l ^ Self::round(k, r);
            l = r;
            r = t;
        }
        (l << 12) | r
    }

    /// The slot of STag index `index`.
    fn slot(&self, index: u32) -> u32 {
        let (mut l, mut r) = ((index >> 12) & 0xFFF, index & 0xFFF);
        for k in self.keys.iter().rev() {
            let t = r ^ Self::round(*k, l);
            r = l;
            l = t;
        }
        (l << 12) | r
    }

    fn next_key(&mut self) -> u8 {
        (splitmix64(&mut self.state) >> 56) as u8
    }
}

#[derive(Debug, Default)]
struct Table {
    /// Registrations by slot; slot 0, and the slot whose index is 0, are never used.
    entries: Vec<Option<Entry>>,
    /// The key last used per slot (a new default key differs from it).
    generation: Vec<u8>,
    /// Released slots, reused oldest first.
    free: VecDeque<u32>,
    next_pd: u32,
    perm: IndexPerm,
}

impl Table {
    /// A free slot, its STag index and the key to use (`key`, or a default one that differs
    /// from the slot's last key).
    fn alloc_slot(&mut self, key: Option<u8>) -> Result<(u32, u32, u8), MemError> {
        let slot = loop {
            let slot = match self.free.pop_front() {
                Some(i) => i,
                None => {
                    let next = self.entries.len().max(1);
                    if next > MAX_STAG_INDEX as usize {
                        return Err(MemError::TableFull);
                    }
                    self.entries.resize_with(next + 1, || None);
                    self.generation.resize(next + 1, 0);
                    next as u32
                }
            };
            // Index 0 stays unused (STags of index 0 name no region, e.g. the RTR's).
            if self.perm.index(slot) != 0 {
                break slot;
            }
        };
        let index = self.perm.index(slot);
        let last = self.generation.get(slot as usize).copied().unwrap_or(0);
        let key = match key {
            Some(k) => k,
            None => loop {
                let k = self.perm.next_key();
                if k != last {
                    break k;
                }
            },
        };
        if let Some(g) = self.generation.get_mut(slot as usize) {
            *g = key;
        }
        Ok((slot, index, key))
    }

    fn slot_of(&self, stag: u32) -> usize {
        self.perm.slot(stag_index(stag)) as usize
    }

    fn get(&self, stag: u32) -> Option<&Entry> {
        self.entries
            .get(self.slot_of(stag))
            .and_then(|e| e.as_ref())
    }

    fn get_mut(&mut self, stag: u32) -> Option<&mut Entry> {
        let slot = self.slot_of(stag);
        self.entries.get_mut(slot).and_then(|e| e.as_mut())
    }

    /// The entry if the STag's key matches too.
    fn exact(&self, stag: u32) -> Option<&Entry> {
        self.get(stag).filter(|e| e.key == stag_key(stag))
    }

    fn tagged_buffer(&self, stag: u32, on: StreamOwner) -> Option<TaggedBuffer> {
        self.get(stag)
            .map(|e| e.tagged_buffer(stag_index(stag), on))
    }

    /// [`MemTable::check_sink`] under the table's lock.
    fn check_sink(
        &self,
        on: StreamOwner,
        header: &TaggedRepr,
        payload_len: usize,
        needed: Access,
    ) -> Result<Option<Span>, DdpError> {
        let tb = self.tagged_buffer(header.stag, on);
        ddp::check_tagged(header, payload_len, tb.as_ref(), needed)?;
        if payload_len == 0 {
            return Ok(None);
        }
        Ok(self
            .get(header.stag)
            .map(|e| e.span(header.to, payload_len as u64)))
    }

    /// Makes the entry in `slot` invalid; a bound memory window also lets its region go
    /// (the region counts one window less).
    fn invalidate_slot(&mut self, slot: usize) {
        let region = match self.entries.get_mut(slot).and_then(|e| e.as_mut()) {
            Some(e) => {
                e.valid = false;
                e.window.as_mut().and_then(|w| w.region.take())
            }
            None => None,
        };
        if let Some(r) = region
            && let Some(Some(m)) = self.entries.get_mut(r)
        {
            m.windows = m.windows.saturating_sub(1);
        }
    }
}

/// One piece of a transmit gather list ([`crate::QpEngine::transmit_with`]): bytes the
/// engine generated (headers, PAD, CRC) or a range of registered memory sent as it is.
#[derive(Clone, Copy, Debug)]
pub enum TxPart<'a> {
    /// Generated bytes.
    Bytes(&'a [u8]),
    /// `len` bytes of `buf` from `offset` (in bounds).
    Mem {
        /// The registered buffer.
        buf: &'a Arc<RegisteredBuf>,
        /// Offset into it.
        offset: usize,
        /// Length.
        len: usize,
    },
}

impl TxPart<'_> {
    /// Its length in bytes.
    pub fn len(&self) -> usize {
        match self {
            TxPart::Bytes(b) => b.len(),
            TxPart::Mem { len, .. } => *len,
        }
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Most pieces handed to one `sendmsg` (well under every kernel's `IOV_MAX`).
pub const MAX_TX_PARTS: usize = 64;

/// Writes `parts` (at most [`MAX_TX_PARTS`] are used) to the socket `fd` with one
/// `sendmsg` (a gather write, `MSG_NOSIGNAL`), registered memory going to the kernel
/// straight from where it lives (no staging copy). Returns how many bytes the kernel
/// accepted (possibly fewer than offered; the caller resumes from there).
///
/// A range of registered memory that is out of bounds makes it fail with `InvalidInput`
/// before anything is written.
pub fn write_parts(
    fd: std::os::fd::BorrowedFd<'_>,
    parts: &[TxPart<'_>],
) -> std::io::Result<usize> {
    use std::os::fd::AsRawFd;
    let mut iov = [libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }; MAX_TX_PARTS];
    let mut n = 0;
    for (slot, part) in iov.iter_mut().zip(parts) {
        let (base, len) = match *part {
            TxPart::Bytes(b) => (b.as_ptr(), b.len()),
            TxPart::Mem { buf, offset, len } => {
                buf.check(offset, len).map_err(|e| {
                    std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string())
                })?;
                // SAFETY: offset..offset + len lies inside the buffer (checked just above),
                // so the pointer stays inside its allocation; nothing is dereferenced here.
                (unsafe { buf.ptr.as_ptr().add(offset) }.cast_const(), len)
            }
        };
        *slot = libc::iovec {
            iov_base: base.cast_mut().cast(),
            iov_len: len,
        };
        n += 1;
    }
    if n == 0 {
        return Ok(0);
    }
    // SAFETY: `msghdr` is plain data for which all-zero is a valid (empty) value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov.as_mut_ptr();
    // n <= MAX_TX_PARTS fits every platform's msg_iovlen type.
    msg.msg_iovlen = n as _;
    // SAFETY: each of the first `n` iovecs describes memory valid for reads of its length
    // for the duration of the call: generated bytes are borrowed slices, registered ranges
    // were bounds-checked and their buffers are kept alive by the borrowed `Arc`s. The kernel
    // only reads them; `msg` has no address or control data. MSG_NOSIGNAL: a reset peer
    // gives EPIPE, not SIGPIPE (as std's socket writes).
    let r = unsafe { libc::sendmsg(fd.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// A contiguous piece of registered memory the engine reads or writes.
#[derive(Clone, Debug)]
pub struct Span {
    /// The buffer.
    pub buf: Arc<RegisteredBuf>,
    /// Offset into the buffer.
    pub off: usize,
    /// Length.
    pub len: usize,
}

impl Span {
    /// Copies `data` in at `offset` into the span; `false` (nothing written) if it does not fit.
    pub fn write(&self, offset: usize, data: &[u8]) -> bool {
        match offset.checked_add(data.len()) {
            Some(end) if end <= self.len => self.buf.write_at(self.off + offset, data).is_ok(),
            _ => false,
        }
    }

    /// Copies bytes out at `offset` into the span; `false` (nothing read) if out of range.
    pub fn read(&self, offset: usize, out: &mut [u8]) -> bool {
        match offset.checked_add(out.len()) {
            Some(end) if end <= self.len => self.buf.read_at(self.off + offset, out).is_ok(),
            _ => false,
        }
    }

    /// Appends `len` bytes at `offset` into the span to `out`; `false` (nothing appended) if
    /// out of range.
    pub fn append_to(&self, offset: usize, len: usize, out: &mut Vec<u8>) -> bool {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => self.buf.append_to(self.off + offset, len, out).is_ok(),
            _ => false,
        }
    }
}

/// A resolved scatter/gather list: the memory of a work request's SGEs, in order.
#[derive(Clone, Debug, Default)]
pub struct SgList {
    spans: Vec<Span>,
    total: u64,
}

impl SgList {
    /// Builds a list from spans.
    pub fn new(spans: Vec<Span>) -> SgList {
        let total = spans.iter().map(|s| s.len as u64).sum();
        SgList { spans, total }
    }

    /// Total length.
    pub fn len(&self) -> u64 {
        self.total
    }

    /// Whether the list covers no bytes.
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// The spans.
    pub fn spans(&self) -> &[Span] {
        &self.spans
    }

    /// Gathers `out.len()` bytes starting at byte `offset` of the list; `false` if the range
    /// runs past the end (nothing meaningful is copied then).
    pub fn gather(&self, offset: u64, out: &mut [u8]) -> bool {
        self.walk(offset, out.len(), |span, at, range| {
            span.read(at, out.get_mut(range).unwrap_or(&mut []))
        })
    }

    /// Appends `len` bytes starting at byte `offset` of the list to `out`; `false` if the range
    /// runs past the end (then what was appended, if anything, is meaningless).
    pub fn gather_append(&self, offset: u64, len: usize, out: &mut Vec<u8>) -> bool {
        self.walk(offset, len, |span, at, range| {
            span.append_to(at, range.len(), out)
        })
    }

    /// Calls `f(buf, offset_in_buf, len)` for each registered range covering bytes
    /// `offset..offset + len` of the list, in order; `false` (and no call) if the range runs
    /// past the end.
    pub fn for_each_range(
        &self,
        offset: u64,
        len: usize,
        mut f: impl FnMut(&Arc<RegisteredBuf>, usize, usize),
    ) -> bool {
        match offset.checked_add(len as u64) {
            Some(end) if end <= self.total => {}
            _ => return false,
        }
        self.walk(offset, len, |span, at, range| {
            f(&span.buf, span.off + at, range.len());
            true
        })
    }

    /// Scatters `data` starting at byte `offset` of the list; `false` if it runs past the end,
    /// in which case nothing is written.
    pub fn scatter(&self, offset: u64, data: &[u8]) -> bool {
        match offset.checked_add(data.len() as u64) {
            Some(end) if end <= self.total => {}
            _ => return false,
        }
        self.walk(offset, data.len(), |span, at, range| {
            span.write(at, data.get(range).unwrap_or(&[]))
        })
    }

    fn walk(
        &self,
        offset: u64,
        len: usize,
        mut f: impl FnMut(&Span, usize, Range<usize>) -> bool,
    ) -> bool {
        match offset.checked_add(len as u64) {
            Some(end) if end <= self.total => {}
            _ => return false,
        }
        let mut skip = offset;
        let mut done = 0usize;
        for span in &self.spans {
            if done == len {
                break;
            }
            let slen = span.len as u64;
            if skip >= slen {
                skip -= slen;
                continue;
            }
            // skip < slen <= usize::MAX.
            let at = skip as usize;
            let n = (span.len - at).min(len - done);
            if !f(span, at, done..done + n) {
                return false;
            }
            done += n;
            skip = 0;
        }
        done == len
    }
}

/// Why a local scatter/gather element cannot be used (a local protection error of the
/// work request, reported in its completion).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum LocalError {
    /// Nothing valid is registered under the STag (unknown index, wrong key or invalidated).
    #[error("local STag {stag:#010x} is not valid")]
    InvalidStag {
        /// The STag.
        stag: u32,
    },
    /// The region belongs to another protection domain than the QP.
    #[error("local STag {stag:#010x} belongs to another protection domain")]
    PdMismatch {
        /// The STag.
        stag: u32,
    },
    /// The region does not grant the access the work request needs.
    #[error("local STag {stag:#010x} grants {granted} but the work request needs {needed}")]
    Rights {
        /// The STag.
        stag: u32,
        /// Rights needed.
        needed: Access,
        /// Rights granted.
        granted: Access,
    },
    /// TO + length wraps or leaves the region.
    #[error("local range TO {to:#x} + {len} lies outside STag {stag:#010x}")]
    Bounds {
        /// The STag.
        stag: u32,
        /// TO.
        to: u64,
        /// Length.
        len: u64,
    },
}

/// The STag table of one RNIC: protection domains and memory registrations.
#[derive(Debug, Default)]
pub struct MemTable {
    inner: Mutex<Table>,
}

impl MemTable {
    /// An empty table whose STag indices and keys come from a secret drawn from the OS's
    /// generator (they cannot be guessed; RFC 5042 §5.1.3).
    pub fn new() -> Arc<MemTable> {
        let seed = getrandom::u64().unwrap_or_else(|_| {
            // No OS generator: the address of a fresh allocation and the time still differ
            // per table; the STags work either way.
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            t ^ (Box::into_raw(Box::new(0u8)) as usize as u64)
        });
        MemTable::with_seed(seed)
    }

    /// A table whose STags follow from `seed`: reproducible runs (the simulator, tests).
    pub fn with_seed(seed: u64) -> Arc<MemTable> {
        Arc::new(MemTable {
            inner: Mutex::new(Table {
                perm: IndexPerm::from_seed(seed),
                ..Table::default()
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Table> {
        // A panic while holding the lock cannot leave the table inconsistent (every update is
        // a single assignment), so a poisoned lock is used as is.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Allocates a protection domain.
    pub fn alloc_pd(&self) -> Pd {
        let mut t = self.lock();
        t.next_pd = t.next_pd.wrapping_add(1);
        Pd(t.next_pd)
    }

    /// Registers (a range of) `buf` in `pd`.
    pub fn register(
        &self,
        pd: Pd,
        buf: &Arc<RegisteredBuf>,
        opts: MrOptions,
    ) -> Result<MemoryRegion, MemError> {
        let a = opts.access;
        let range = opts.range.clone().unwrap_or(0..buf.len());
        let (len, base_to) = layout(buf, &range, a, opts.addressing)?;
        let mut t = self.lock();
        let (slot, index, key) = t.alloc_slot(opts.key)?;
        let entry = Entry {
            key,
            pd,
            access: a,
            base_to,
            len,
            buf: buf.clone(),
            buf_off: range.start,
            valid: true,
            invalidatable: opts.invalidatable,
            fast_reg: None,
            mapped: None,
            used: true,
            window: None,
            windows: 0,
        };
        let region = entry.region(index);
        if let Some(s) = t.entries.get_mut(slot as usize) {
            *s = Some(entry);
        }
        Ok(region)
    }

    /// Registers the memory of the region `stag` again (RDMA Verbs "Register Shared Memory
    /// Region"; ibverbs registers the same address range twice): a new STag for the same
    /// bytes, in `pd` (which may differ from the region's) with `opts`' rights, addressing,
    /// key and invalidation. `opts.range` is relative to the region (`None`: all of it) and
    /// must lie inside it. The two registrations are independent: invalidating or
    /// deregistering one leaves the other as it is. On error nothing changes.
    pub fn register_shared(
        &self,
        stag: u32,
        pd: Pd,
        opts: MrOptions,
    ) -> Result<MemoryRegion, MemError> {
        let (buf, range) = {
            let t = self.lock();
            let e = t.exact(stag).ok_or(MemError::UnknownStag { stag })?;
            region_only(e, stag)?;
            let len = usize::try_from(e.len).unwrap_or(usize::MAX);
            let sub = opts.range.clone().unwrap_or(0..len);
            if sub.start > sub.end || sub.end > len {
                return Err(MemError::OutOfBounds {
                    start: sub.start,
                    end: sub.end,
                    len,
                });
            }
            (e.buf.clone(), e.buf_off + sub.start..e.buf_off + sub.end)
        };
        self.register(
            pd,
            &buf,
            MrOptions {
                range: Some(range),
                ..opts
            },
        )
    }

    /// Changes the region `stag` in place (RDMA Verbs "Reregister Memory Region", ibverbs'
    /// `ibv_rereg_mr`): its protection domain, rights, memory (buffer and range),
    /// addressing and consumer key, each only where `change` says. The STag's index stays;
    /// its key is the new one if given (the returned region names the STag to use from now
    /// on; handles of the old registration are stale). A region with memory windows bound
    /// to it is refused, as are windows and fast-register STags. The checks of
    /// [`MemTable::register`] apply; on error nothing changes.
    pub fn reregister(&self, stag: u32, change: Rereg) -> Result<MemoryRegion, MemError> {
        let mut t = self.lock();
        let e = t.exact(stag).ok_or(MemError::UnknownStag { stag })?;
        region_only(e, stag)?;
        if e.windows > 0 {
            return Err(MemError::WindowsBound {
                stag,
                windows: e.windows,
            });
        }
        let (buf, range) = match change.memory {
            Some((b, r)) => (b, r),
            None => (e.buf.clone(), e.buf_off..e.buf_off + e.len as usize),
        };
        let access = change.access.unwrap_or(e.access);
        let addressing = change.addressing.unwrap_or(if e.base_to == 0 {
            Addressing::ZeroBased
        } else {
            Addressing::VirtualAddress
        });
        let (len, base_to) = layout(&buf, &range, access, addressing)?;
        let pd = change.pd.unwrap_or(e.pd);
        let key = change.key.unwrap_or(e.key);
        let slot = t.slot_of(stag);
        let Some(Some(e)) = t.entries.get_mut(slot) else {
            return Err(MemError::UnknownStag { stag });
        };
        e.pd = pd;
        e.access = access;
        e.base_to = base_to;
        e.len = len;
        e.buf = buf;
        e.buf_off = range.start;
        e.key = key;
        if let Some(i) = change.invalidatable {
            e.invalidatable = i;
        }
        // A re-registration makes an invalidated region valid again, as a new registration.
        e.valid = true;
        Ok(e.region(stag_index(stag)))
    }

    /// Allocates a fast-register STag in `pd` (verbs "Allocate STag" for fast registration,
    /// ibverbs' `ib_alloc_mr`): no memory behind it, invalid until a Fast Register work
    /// request ([`crate::SendOp::FastRegister`]) gives it at most `max_len` bytes. Returns
    /// the STag; each Fast Register gives it a new consumer key.
    pub fn alloc_fast_reg(&self, pd: Pd, max_len: u64) -> Result<u32, MemError> {
        self.alloc_unbacked(pd, |e| {
            e.fast_reg = Some(max_len);
        })
    }

    /// Allocates an STag in `pd` with no memory behind it (invalid, invalidatable), shaped
    /// by `kind` (a fast-register STag or a memory window).
    fn alloc_unbacked(&self, pd: Pd, kind: impl FnOnce(&mut Entry)) -> Result<u32, MemError> {
        let mut t = self.lock();
        let (slot, index, key) = t.alloc_slot(None)?;
        let mut entry = Entry {
            key,
            pd,
            access: Access::NONE,
            base_to: 0,
            len: 0,
            buf: empty_buf(),
            buf_off: 0,
            valid: false,
            invalidatable: true,
            fast_reg: None,
            mapped: None,
            used: false,
            window: None,
            windows: 0,
        };
        kind(&mut entry);
        if let Some(s) = t.entries.get_mut(slot as usize) {
            *s = Some(entry);
        }
        Ok(make_stag(index, key))
    }

    /// Maps `region` to the fast-register STag `stag` (index and current key) of `pd` for
    /// its next Fast Register work request (the kernel verbs' `ib_map_mr_sg`). The range is
    /// checked now; the STag stays as it is until the Fast Register. On error nothing
    /// changes.
    pub fn map_fast_reg(&self, pd: Pd, stag: u32, region: FastRegRegion) -> Result<(), MemError> {
        let mut t = self.lock();
        let Some(e) = t.get_mut(stag).filter(|e| e.key == stag_key(stag)) else {
            return Err(MemError::UnknownStag { stag });
        };
        let Some(max) = e.fast_reg else {
            return Err(MemError::NotFastReg { stag });
        };
        same_pd(e, stag, pd)?;
        let (len, _) = layout(&region.buf, &region.range, Access::NONE, region.addressing)?;
        if len > max {
            return Err(MemError::FastRegTooLong { stag, len, max });
        }
        e.mapped = Some(region);
        Ok(())
    }

    /// Fast Register (what the work request does, in send-queue order): the fast-register
    /// STag whose index `stag` names becomes valid with the memory mapped to it, rights
    /// `access` and `stag`'s consumer key, which must differ from the key of its last
    /// registration (so the STag of its last use is refused from now on; the first may keep
    /// the key [`MemTable::alloc_fast_reg`] returned). The STag must be invalid (newly
    /// allocated, or invalidated locally or by a peer's Send with Invalidate) and in `pd`.
    /// On error nothing changes.
    pub fn fast_register(&self, pd: Pd, stag: u32, access: Access) -> Result<(), MemError> {
        let mut t = self.lock();
        let Some(e) = t.get_mut(stag) else {
            return Err(MemError::UnknownStag { stag });
        };
        if e.fast_reg.is_none() {
            return Err(MemError::NotFastReg { stag });
        }
        same_pd(e, stag, pd)?;
        if e.valid {
            return Err(MemError::StillValid { stag });
        }
        if e.used && e.key == stag_key(stag) {
            return Err(MemError::KeyNotRotated { stag, key: e.key });
        }
        let Some(region) = e.mapped.clone() else {
            return Err(MemError::NotMapped { stag });
        };
        let (len, base_to) = layout(&region.buf, &region.range, access, region.addressing)?;
        e.key = stag_key(stag);
        e.access = access;
        e.base_to = base_to;
        e.len = len;
        e.buf = region.buf;
        e.buf_off = region.range.start;
        e.valid = true;
        e.used = true;
        Ok(())
    }

    /// Allocates a memory window of type `ty` in `pd` (RDMA Verbs "Allocate Memory Window",
    /// ibverbs' `ibv_alloc_mw`): an STag with no memory, invalid until bound to a range of a
    /// region ([`MemTable::bind_mw`], or a Bind work request for Type 2).
    pub fn alloc_mw(&self, pd: Pd, ty: MwType) -> Result<u32, MemError> {
        self.alloc_unbacked(pd, |e| {
            e.invalidatable = ty == MwType::Type2;
            e.window = Some(Window {
                ty,
                qp: None,
                region: None,
            });
        })
    }

    /// Binds the memory window whose index `mw` names to `len` bytes at Tagged Offset `to`
    /// of the region `region` (its exact STag), with rights `access` (remote read, write,
    /// atomic: a subset of the region's, which must grant [`Access::MW_BIND`]) and TO
    /// numbering `addressing`; the window takes `mw`'s consumer key, which must differ from
    /// the key of its last binding. `qp`: `None` for the bind verb (Type 1 only; a length
    /// of 0 unbinds), `Some(qp)` for a Bind work request of that QP (Type 2 only: the
    /// window must be unbound, and only that QP's stream may use it). On error nothing
    /// changes.
    #[allow(clippy::too_many_arguments)]
    pub fn bind_mw(
        &self,
        pd: Pd,
        qp: Option<u32>,
        mw: u32,
        region: u32,
        to: u64,
        len: u64,
        access: Access,
        addressing: Addressing,
    ) -> Result<(), MemError> {
        let mut t = self.lock();
        // The region.
        let Some(r) = t.exact(region).filter(|e| e.valid) else {
            return Err(MemError::UnknownStag { stag: region });
        };
        if r.window.is_some() {
            return Err(MemError::NotAWindow {
                stag: region,
                what: "a memory region",
            });
        }
        same_pd(r, region, pd)?;
        let asked = access & Access::REMOTE;
        if !r.access.contains(Access::MW_BIND) || !r.access.contains(asked) {
            return Err(MemError::WindowRights {
                region,
                asked,
                granted: r.access,
            });
        }
        let in_region = to
            .checked_sub(r.base_to)
            .and_then(|rel| rel.checked_add(len).map(|end| (rel, end)))
            .filter(|&(_, end)| end <= r.len);
        let Some((rel, _)) = in_region else {
            return Err(MemError::WindowBounds { region, to, len });
        };
        let (buf, buf_off) = (r.buf.clone(), r.buf_off + rel as usize);
        let region_slot = t.slot_of(region);
        // The window.
        let Some(w) = t.get(mw) else {
            return Err(MemError::UnknownStag { stag: mw });
        };
        let Some(win) = w.window else {
            return Err(MemError::NotAWindow {
                stag: mw,
                what: "a memory window",
            });
        };
        let kind_ok = matches!(
            (win.ty, qp),
            (MwType::Type1, None) | (MwType::Type2, Some(_))
        );
        if !kind_ok {
            return Err(MemError::NotAWindow {
                stag: mw,
                what: if qp.is_some() {
                    "a Type 2 memory window (a Bind work request binds Type 2 only)"
                } else {
                    "a Type 1 memory window (the bind verb binds Type 1 only)"
                },
            });
        }
        same_pd(w, mw, pd)?;
        if win.ty == MwType::Type2 && w.valid {
            return Err(MemError::WindowInUse { stag: mw });
        }
        if w.used && w.key == stag_key(mw) {
            return Err(MemError::KeyNotRotated {
                stag: mw,
                key: w.key,
            });
        }
        let base_to = match addressing {
            Addressing::ZeroBased => 0,
            Addressing::VirtualAddress => to,
        };
        // Bind: the old binding (Type 1 rebinding) lets its region go first.
        let slot = t.slot_of(mw);
        t.invalidate_slot(slot);
        let bound = len > 0;
        if let Some(Some(e)) = t.entries.get_mut(slot) {
            e.key = stag_key(mw);
            e.access = asked;
            e.base_to = base_to;
            e.len = len;
            e.buf = buf;
            e.buf_off = buf_off;
            e.valid = bound;
            e.used = true;
            e.window = Some(Window {
                ty: win.ty,
                qp,
                region: bound.then_some(region_slot),
            });
        }
        if bound && let Some(Some(r)) = t.entries.get_mut(region_slot) {
            r.windows += 1;
        }
        Ok(())
    }

    /// Allocates a buffer of `len` bytes and registers all of it.
    pub fn register_new(
        &self,
        pd: Pd,
        len: usize,
        opts: MrOptions,
    ) -> Result<MemoryRegion, MemError> {
        self.register(pd, &RegisteredBuf::try_new(len)?, opts)
    }

    /// Removes the registration named by `stag` (index and key must match). The buffer
    /// stays alive as long as the application holds it.
    pub fn deregister(&self, stag: u32) -> Result<(), MemError> {
        let mut t = self.lock();
        let Some(e) = t.exact(stag) else {
            return Err(MemError::UnknownStag { stag });
        };
        if e.windows > 0 {
            return Err(MemError::WindowsBound {
                stag,
                windows: e.windows,
            });
        }
        let i = t.slot_of(stag);
        t.invalidate_slot(i);
        if let Some(slot) = t.entries.get_mut(i) {
            *slot = None;
        }
        t.free.push_back(i as u32);
        Ok(())
    }

    /// Local invalidate (the verbs operation, or a Local Invalidate work request): the STag
    /// becomes unusable until it is given a new key with [`MemTable::rekey`]. Invalidating an
    /// already invalid STag is allowed (verbs semantics).
    pub fn invalidate(&self, pd: Pd, stag: u32) -> Result<(), MemError> {
        let mut t = self.lock();
        let Some(e) = t.get_mut(stag).filter(|e| e.key == stag_key(stag)) else {
            return Err(MemError::UnknownStag { stag });
        };
        same_pd(e, stag, pd)?;
        if !e.invalidatable {
            return Err(MemError::NotInvalidatable { stag });
        }
        let slot = t.slot_of(stag);
        t.invalidate_slot(slot);
        Ok(())
    }

    /// Gives an invalidated registration a new consumer key and makes it valid again
    /// (fast-register style). Returns the new STag.
    pub fn rekey(&self, stag: u32, key: u8) -> Result<u32, MemError> {
        let mut t = self.lock();
        let Some(e) = t.get_mut(stag).filter(|e| e.key == stag_key(stag)) else {
            return Err(MemError::UnknownStag { stag });
        };
        if e.valid {
            return Err(MemError::StillValid { stag });
        }
        e.key = key;
        e.valid = true;
        Ok(make_stag(stag_index(stag), key))
    }

    /// What `stag` names (index and key must match).
    pub fn query(&self, stag: u32) -> Option<MrInfo> {
        let t = self.lock();
        t.exact(stag).map(|e| MrInfo {
            stag,
            pd: e.pd,
            valid: e.valid,
            access: e.access,
            base_to: e.base_to,
            len: e.len,
            invalidatable: e.invalidatable,
        })
    }

    /// Number of registrations.
    pub fn len(&self) -> usize {
        self.lock().entries.iter().filter(|e| e.is_some()).count()
    }

    /// Whether nothing is registered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Validates the tagged segment `header` with `payload_len` bytes arriving on a stream
    /// of `pd` (RFC 5041 §7.1, rights `needed`) and returns where to place it. `Ok(None)` for
    /// a zero-length segment, which is not checked (RFC 5041 §5.2).
    pub fn check_sink(
        &self,
        on: impl Into<StreamOwner>,
        header: &TaggedRepr,
        payload_len: usize,
        needed: Access,
    ) -> Result<Option<Span>, DdpError> {
        self.lock()
            .check_sink(on.into(), header, payload_len, needed)
    }

    /// [`MemTable::check_sink`] for a Tagged segment placed ahead of earlier messages (RFC
    /// 5041 §2.1): the span when the segment passes every check and carries payload, and
    /// the STag cannot be invalidated. An invalidatable STag is never placed ahead: a Send
    /// with Invalidate among the messages not yet arrived would invalidate it before this
    /// segment's turn, and a segment placed through it early would have written through an
    /// invalid STag. `None` leaves the segment to its in-order processing.
    pub fn check_sink_ahead(
        &self,
        on: impl Into<StreamOwner>,
        header: &TaggedRepr,
        payload_len: usize,
        needed: Access,
    ) -> Option<Span> {
        let t = self.lock();
        if t.get(header.stag)?.invalidatable {
            return None;
        }
        t.check_sink(on.into(), header, payload_len, needed)
            .ok()
            .flatten()
    }

    /// Validates an incoming RDMA Read Request's Data Source (RFC 5040 §5.2.1, §7.2) for a
    /// stream of `pd`; returns the source memory (`None` for a zero-length read, which is not
    /// validated).
    pub fn check_read_source(
        &self,
        on: impl Into<StreamOwner>,
        req: &ReadRequest,
    ) -> Result<Option<Span>, TermCause> {
        let t = self.lock();
        let tb = t.tagged_buffer(req.source_stag, on.into());
        rdmap::validate_read_request(req, tb.as_ref())?;
        if req.size == 0 {
            return Ok(None);
        }
        Ok(t.get(req.source_stag)
            .map(|e| e.span(req.source_to, u64::from(req.size))))
    }

    /// Validates an incoming Atomic Request's target (RFC 7306 §5.1–§5.2, §8.2) for a stream
    /// of `pd`; returns the 8-byte target.
    pub fn check_atomic(
        &self,
        on: impl Into<StreamOwner>,
        req: &AtomicRequest,
    ) -> Result<Span, TermCause> {
        let t = self.lock();
        let e = t.get(req.stag);
        let tb = t.tagged_buffer(req.stag, on.into());
        // The alignment rule concerns the memory address of the target.
        let base_address = e.map_or(0, |e| e.buf.addr().wrapping_add(e.buf_off as u64));
        rdmap::validate_atomic_request(req, tb.as_ref(), base_address)?;
        match e {
            Some(e) => Ok(e.span(req.to, rdmap::ATOMIC_OPERAND_LEN)),
            None => Err(TermCause::protection(rdmap::ProtectionCode::InvalidStag)),
        }
    }

    /// Checks that a Send with Invalidate received on a stream of `pd` may invalidate `stag`
    /// (RFC 5040 §5.3, §7.2), without invalidating it.
    pub fn check_remote_invalidate(
        &self,
        on: impl Into<StreamOwner>,
        stag: u32,
    ) -> Result<(), TermCause> {
        let t = self.lock();
        let tb = t.tagged_buffer(stag, on.into());
        rdmap::validate_invalidate(stag, tb.as_ref())?;
        match t.get(stag) {
            // Registered as not invalidatable: the STag exists and is ours, but the operation
            // is not permitted on it — a protection matter.
            Some(e) if !e.invalidatable => Err(TermCause::protection(
                rdmap::ProtectionCode::CannotInvalidate,
            )),
            _ => Ok(()),
        }
    }

    /// Checks and performs the invalidation a Send with Invalidate asks for.
    pub fn remote_invalidate(
        &self,
        on: impl Into<StreamOwner>,
        stag: u32,
    ) -> Result<(), TermCause> {
        self.check_remote_invalidate(on, stag)?;
        let mut t = self.lock();
        let slot = t.slot_of(stag);
        t.invalidate_slot(slot);
        Ok(())
    }

    /// Resolves a local scatter/gather element of a work request of a QP in `pd` that needs
    /// `needed` rights (local read is always granted: pass [`Access::NONE`] for a gather).
    /// A zero-length element resolves to an empty span without any check.
    pub fn resolve_local(
        &self,
        pd: Pd,
        sge: &crate::wr::Sge,
        needed: Access,
    ) -> Result<Span, LocalError> {
        let stag = sge.stag;
        let len = u64::from(sge.len);
        if len == 0 {
            return Ok(Span {
                buf: empty_buf(),
                off: 0,
                len: 0,
            });
        }
        let t = self.lock();
        // Memory windows are for remote access only.
        let Some(e) = t.exact(stag).filter(|e| e.valid && e.window.is_none()) else {
            return Err(LocalError::InvalidStag { stag });
        };
        if e.pd != pd {
            return Err(LocalError::PdMismatch { stag });
        }
        if !e.access.contains(needed) {
            return Err(LocalError::Rights {
                stag,
                needed,
                granted: e.access,
            });
        }
        let fits = sge.to >= e.base_to
            && sge
                .to
                .checked_add(len)
                .is_some_and(|end| end <= e.base_to + e.len);
        if !fits {
            return Err(LocalError::Bounds {
                stag,
                to: sge.to,
                len,
            });
        }
        Ok(e.span(sge.to, len))
    }

    /// Resolves a whole scatter/gather list (see [`MemTable::resolve_local`]).
    pub fn resolve_sgl(
        &self,
        pd: Pd,
        sgl: &[crate::wr::Sge],
        needed: Access,
    ) -> Result<SgList, LocalError> {
        let spans = sgl
            .iter()
            .map(|s| self.resolve_local(pd, s, needed))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(SgList::new(spans))
    }
}

fn empty_buf() -> Arc<RegisteredBuf> {
    use std::sync::OnceLock;
    static EMPTY: OnceLock<Arc<RegisteredBuf>> = OnceLock::new();
    EMPTY.get_or_init(|| RegisteredBuf::new(0)).clone()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wr::Sge;
    use ddp::{DdpCode, StagProblem, TaggedCode};
    use rdmap::{OperationCode, ProtectionCode};

    fn rw() -> Access {
        Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ
    }

    /// A memory table with one protection domain and an unregistered buffer of `len` bytes.
    fn table_with_buf(len: usize) -> (Arc<MemTable>, Pd, Arc<RegisteredBuf>) {
        let t = MemTable::new();
        let pd = t.alloc_pd();
        (t, pd, RegisteredBuf::new(len))
    }

    /// A memory table with two protection domains.
    fn table_with_two_pds() -> (Arc<MemTable>, Pd, Pd) {
        let t = MemTable::new();
        let pd = t.alloc_pd();
        let other = t.alloc_pd();
        (t, pd, other)
    }

    /// Appending copies exactly the requested bytes after what `out` holds, across spans,
    /// and appends nothing out of range.
    #[test]
    fn append_gathers_into_vec() {
        let a = RegisteredBuf::from_slice(b"0123456789");
        let b = RegisteredBuf::from_slice(b"abcdef");
        let mut out = b"hdr".to_vec();
        assert!(a.append_to(2, 3, &mut out).is_ok());
        assert_eq!(out, b"hdr234");
        assert!(a.append_to(8, 3, &mut out).is_err());
        assert!(a.append_to(usize::MAX, 2, &mut out).is_err());
        assert_eq!(out, b"hdr234");
        let sgl = SgList::new(vec![
            Span {
                buf: a.clone(),
                off: 6,
                len: 4,
            },
            Span {
                buf: b.clone(),
                off: 1,
                len: 5,
            },
        ]);
        let mut out = vec![b'x'];
        assert!(sgl.gather_append(2, 5, &mut out));
        assert_eq!(out, b"x89bcd");
        let span = &sgl.spans()[1];
        assert!(span.append_to(3, 2, &mut out));
        assert_eq!(out, b"x89bcdef");
        assert!(!span.append_to(4, 2, &mut out));
        assert!(!sgl.gather_append(5, 5, &mut out));
        assert_eq!(out, b"x89bcdef");
    }

    /// `read_with` lends exactly the requested range, and calls nothing out of range.
    #[test]
    fn read_with_lends_exactly_the_range() {
        let b = RegisteredBuf::from_slice(b"0123456789");
        assert_eq!(b.read_with(2, 5, <[u8]>::to_vec), Ok(b"23456".to_vec()));
        assert_eq!(b.read_with(10, 0, |x| x.len()), Ok(0));
        let mut called = false;
        assert!(b.read_with(8, 3, |_| called = true).is_err());
        assert!(b.read_with(usize::MAX, 2, |_| called = true).is_err());
        assert!(!called);
    }

    #[test]
    fn buffer_is_page_aligned_zeroed_and_copies() {
        let b = RegisteredBuf::new(10_000);
        assert_eq!(b.addr() % PAGE_SIZE as u64, 0);
        assert!(b.to_vec().iter().all(|&x| x == 0));
        b.write_at(9_998, &[1, 2]).expect("in bounds");
        assert_eq!(
            b.write_at(9_999, &[1, 2]),
            Err(MemError::OutOfBounds {
                start: 9_999,
                end: 10_001,
                len: 10_000
            })
        );
        let mut two = [0u8; 2];
        b.read_at(9_998, &mut two).expect("in bounds");
        assert_eq!(two, [1, 2]);
        b.fill(7);
        assert!(b.to_vec().iter().all(|&x| x == 7));
        assert!(b.read_at(usize::MAX, &mut two).is_err());
        let e = RegisteredBuf::new(0);
        assert!(e.is_empty() && e.to_vec().is_empty());
    }

    #[test]
    fn raw_registration_uses_caller_memory() {
        let mut backing = vec![5u8; 64];
        // SAFETY: `backing` outlives `b` (dropped at the end of the test after `b`) and is
        // only touched through `b` while `b` exists.
        let b = unsafe { RegisteredBuf::from_raw(backing.as_mut_ptr(), backing.len()) };
        b.write_at(0, b"hi").expect("in bounds");
        assert_eq!(&b.to_vec()[..3], b"hi\x05");
        drop(b);
        assert_eq!(&backing[..2], b"hi");
    }

    /// Verbs rule: remote write and remote atomic access require local write.
    #[test]
    fn remote_write_needs_local_write() {
        let (t, pd, b) = table_with_buf(64);
        for a in [Access::REMOTE_WRITE, Access::REMOTE_ATOMIC] {
            assert_eq!(
                t.register(pd, &b, MrOptions::new(a)).map(|m| m.stag()),
                Err(MemError::RemoteNeedsLocalWrite { access: a })
            );
        }
        assert!(
            t.register(pd, &b, MrOptions::new(Access::REMOTE_READ))
                .is_ok()
        );
        assert!(
            t.register(
                pd,
                &b,
                MrOptions::new(Access::REMOTE_ATOMIC | Access::LOCAL_WRITE)
            )
            .is_ok()
        );
    }

    #[test]
    fn stag_layout_keys_and_index_reuse() {
        let (t, pd, b) = table_with_buf(64);
        let a = t
            .register(pd, &b, MrOptions::new(rw()).key(0x5a))
            .expect("ok");
        assert_eq!(stag_key(a.stag()), 0x5a);
        assert_ne!(stag_index(a.stag()), 0, "index 0 is never used");
        let b2 = t.register(pd, &b, MrOptions::new(rw())).expect("ok");
        assert_ne!(stag_index(b2.stag()), 0);
        assert_ne!(stag_index(b2.stag()), stag_index(a.stag()));
        t.deregister(b2.stag()).expect("registered");
        assert_eq!(
            t.deregister(b2.stag()),
            Err(MemError::UnknownStag { stag: b2.stag() })
        );
        // The index is reused with a different default key: the stale STag stays dead.
        let c = t.register(pd, &b, MrOptions::new(rw())).expect("ok");
        assert_eq!(stag_index(c.stag()), stag_index(b2.stag()));
        assert_ne!(c.stag(), b2.stag());
        assert!(t.query(b2.stag()).is_none());
        assert!(t.query(c.stag()).is_some());
    }

    #[test]
    fn va_and_zero_based_addressing() {
        let (t, pd, b) = table_with_buf(4096);
        let va = t
            .register(pd, &b, MrOptions::new(rw()).range(100..200))
            .expect("ok");
        assert_eq!(va.base_to(), b.addr() + 100);
        assert_eq!(va.len(), 100);
        let zb = t
            .register(pd, &b, MrOptions::new(rw()).zero_based().range(100..200))
            .expect("ok");
        assert_eq!(zb.base_to(), 0);
        let s = t
            .resolve_local(pd, &zb.sge(10, 5), Access::LOCAL_WRITE)
            .expect("valid");
        assert_eq!((s.off, s.len), (110, 5));
        let s = t
            .resolve_local(pd, &va.sge(10, 5), Access::LOCAL_WRITE)
            .expect("valid");
        assert_eq!((s.off, s.len), (110, 5));
        assert!(
            t.register(pd, &b, MrOptions::new(rw()).range(4000..4097))
                .is_err()
        );
    }

    /// RFC 5041 §7.1: tagged sink checks in order, each with its DDP code; memory untouched.
    #[test]
    fn rfc5041_7_1_sink_checks() {
        let (t, pd, other) = table_with_two_pds();
        let mr = t
            .register_new(pd, 100, MrOptions::new(rw()).zero_based())
            .expect("ok");
        let ro = t
            .register_new(pd, 100, MrOptions::new(Access::REMOTE_READ).zero_based())
            .expect("ok");
        let hdr = |stag, to| TaggedRepr {
            last: true,
            rsvd_ulp: 0x40,
            stag,
            to,
        };
        let code = |r: Result<Option<Span>, DdpError>| r.map(|_| ()).map_err(|e| e.code());
        assert!(
            t.check_sink(pd, &hdr(mr.stag(), 0), 100, Access::REMOTE_WRITE)
                .is_ok()
        );
        assert_eq!(
            code(t.check_sink(pd, &hdr(mr.stag() ^ 1, 0), 1, Access::REMOTE_WRITE)),
            Err(Some(DdpCode::Tagged(TaggedCode::InvalidStag)))
        );
        assert_eq!(
            code(t.check_sink(other, &hdr(mr.stag(), 0), 1, Access::REMOTE_WRITE)),
            Err(Some(DdpCode::Tagged(TaggedCode::StagNotAssociated)))
        );
        assert!(matches!(
            t.check_sink(pd, &hdr(ro.stag(), 0), 1, Access::REMOTE_WRITE),
            Err(DdpError::AccessRights { .. })
        ));
        assert_eq!(
            code(t.check_sink(pd, &hdr(mr.stag(), 1), 100, Access::REMOTE_WRITE)),
            Err(Some(DdpCode::Tagged(TaggedCode::BaseOrBounds)))
        );
        assert_eq!(
            code(t.check_sink(pd, &hdr(mr.stag(), u64::MAX), 2, Access::REMOTE_WRITE)),
            Err(Some(DdpCode::Tagged(TaggedCode::ToWrap)))
        );
        // RFC 5041 §5.2: zero-length segments are not checked.
        assert!(matches!(
            t.check_sink(pd, &hdr(0x0000_0001, 0), 0, Access::REMOTE_WRITE),
            Ok(None)
        ));
        t.invalidate(pd, mr.stag()).expect("ours");
        assert!(matches!(
            t.check_sink(pd, &hdr(mr.stag(), 0), 1, Access::REMOTE_WRITE),
            Err(DdpError::InvalidStag {
                problem: StagProblem::Invalidated,
                ..
            })
        ));
        assert!(mr.buf().to_vec().iter().all(|&b| b == 0));
    }

    /// RFC 5040 §5.3 / §7.2: Send with Invalidate rules.
    #[test]
    fn rfc5040_5_3_remote_invalidate() {
        let (t, pd, other) = table_with_two_pds();
        let mr = t.register_new(pd, 8, MrOptions::new(rw())).expect("ok");
        let fixed = t
            .register_new(pd, 8, MrOptions::new(rw()).not_invalidatable())
            .expect("ok");
        assert_eq!(
            t.remote_invalidate(other, mr.stag()),
            Err(TermCause::protection(ProtectionCode::CannotInvalidate))
        );
        assert_eq!(
            t.remote_invalidate(pd, fixed.stag()),
            Err(TermCause::protection(ProtectionCode::CannotInvalidate))
        );
        assert_eq!(
            t.remote_invalidate(pd, 0xdead_be00),
            Err(TermCause::operation(OperationCode::CannotInvalidate))
        );
        t.remote_invalidate(pd, mr.stag()).expect("allowed");
        assert!(!t.query(mr.stag()).expect("registered").valid);
        assert_eq!(
            t.remote_invalidate(pd, mr.stag()),
            Err(TermCause::operation(OperationCode::CannotInvalidate))
        );
        // Re-keying brings it back under a new STag; the old one stays dead.
        assert_eq!(
            t.rekey(fixed.stag(), 9),
            Err(MemError::StillValid { stag: fixed.stag() })
        );
        // A key other than the region's own (its first key is random).
        let key = stag_key(mr.stag()).wrapping_add(1);
        let new = t.rekey(mr.stag(), key).expect("invalid, so allowed");
        assert_eq!(stag_key(new), key);
        assert!(t.query(new).expect("valid").valid);
        assert!(t.query(mr.stag()).is_none());
    }

    #[test]
    fn local_sge_resolution_errors() {
        let (t, pd, other) = table_with_two_pds();
        let ro = t
            .register_new(pd, 16, MrOptions::new(Access::REMOTE_READ))
            .expect("ok");
        assert!(t.resolve_local(pd, &ro.sge(0, 16), Access::NONE).is_ok());
        assert_eq!(
            t.resolve_local(pd, &ro.sge(0, 16), Access::LOCAL_WRITE)
                .map(|_| ()),
            Err(LocalError::Rights {
                stag: ro.stag(),
                needed: Access::LOCAL_WRITE,
                granted: Access::REMOTE_READ
            })
        );
        assert_eq!(
            t.resolve_local(other, &ro.sge(0, 1), Access::NONE)
                .map(|_| ()),
            Err(LocalError::PdMismatch { stag: ro.stag() })
        );
        assert!(matches!(
            t.resolve_local(pd, &ro.sge(1, 16), Access::NONE),
            Err(LocalError::Bounds { .. })
        ));
        let wrap = Sge {
            stag: ro.stag(),
            to: u64::MAX,
            len: 2,
        };
        assert!(matches!(
            t.resolve_local(pd, &wrap, Access::NONE),
            Err(LocalError::Bounds { .. })
        ));
        assert!(matches!(
            t.resolve_local(
                pd,
                &Sge {
                    stag: 0x5500,
                    to: 0,
                    len: 1
                },
                Access::NONE
            ),
            Err(LocalError::InvalidStag { .. })
        ));
    }

    #[test]
    fn sg_list_gather_scatter_across_spans() {
        let a = RegisteredBuf::new(8);
        let b = RegisteredBuf::new(8);
        let l = SgList::new(vec![
            Span {
                buf: a.clone(),
                off: 5,
                len: 3,
            },
            Span {
                buf: b.clone(),
                off: 0,
                len: 4,
            },
        ]);
        assert_eq!(l.len(), 7);
        assert!(l.scatter(1, &[1, 2, 3, 4]));
        assert_eq!(a.to_vec(), [0, 0, 0, 0, 0, 0, 1, 2]);
        assert_eq!(b.to_vec(), [3, 4, 0, 0, 0, 0, 0, 0]);
        let mut out = [0u8; 5];
        assert!(l.gather(2, &mut out));
        assert_eq!(out, [2, 3, 4, 0, 0]);
        assert!(!l.scatter(5, &[9, 9, 9]));
        assert_eq!(
            b.to_vec(),
            [3, 4, 0, 0, 0, 0, 0, 0],
            "nothing written on overflow"
        );
        assert!(!l.gather(6, &mut out));
    }

    #[test]
    fn atomic_view_needs_alignment() {
        let b = RegisteredBuf::new(16);
        assert!(b.atomic_u64(0).is_some());
        assert!(b.atomic_u64(8).is_some());
        assert!(b.atomic_u64(4).is_none());
        assert!(b.atomic_u64(9).is_none());
        assert!(b.atomic_u64(16).is_none());
    }

    /// RFC 5042 §5.1.3: STags cannot be guessed — consecutive registrations get indices that
    /// are not consecutive (a keyed permutation) in tables keyed differently, every index
    /// maps back to its slot, index 0 is never handed out, and the default keys vary.
    #[test]
    fn rfc5042_5_1_3_stags_are_not_guessable() {
        let p = IndexPerm::from_seed(42);
        for slot in [1u32, 2, 3, 4095, 4096, 0x00ff_fffe, 0x00ff_ffff] {
            assert_eq!(p.slot(p.index(slot)), slot);
        }
        let stags = |t: &MemTable| -> Vec<u32> {
            let pd = t.alloc_pd();
            let b = RegisteredBuf::new(64);
            (0..64)
                .map(|_| t.register(pd, &b, MrOptions::new(rw())).expect("ok").stag())
                .collect()
        };
        let a = stags(&MemTable::with_seed(1));
        let b = stags(&MemTable::with_seed(2));
        assert_eq!(a, stags(&MemTable::with_seed(1)), "reproducible per seed");
        assert_ne!(a, b);
        let idx: Vec<u32> = a.iter().map(|s| stag_index(*s)).collect();
        assert!(idx.iter().all(|&i| i != 0));
        let consecutive = idx.windows(2).filter(|w| w[1] == w[0] + 1).count();
        assert!(consecutive < 4, "indices look sequential: {idx:?}");
        let keys: std::collections::BTreeSet<u8> = a.iter().map(|s| stag_key(*s)).collect();
        assert!(keys.len() > 16, "default keys barely vary: {keys:?}");
    }
}
