//! Status codes, the thread's last error message, and the guard every exported function
//! runs its body in (errors and panics become negative codes).

use std::cell::RefCell;
use std::ffi::{CString, c_char, c_int};
use std::panic::{AssertUnwindSafe, catch_unwind};

use verbs::{CmError, MemError, PostError, RnicError, VerbsError};

/// What a call returned: `SOFTRNIC_OK` (0) or a negative error code. Functions that count
/// (polls, `softrnic_rnic_advance`) return the count (>= 0) on success.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub enum softrnic_status {
    /// Success.
    SOFTRNIC_OK = 0,
    /// A required pointer argument is NULL.
    SOFTRNIC_ERR_NULL = -1,
    /// A handle is not a live handle of the expected type (destroyed, closed, never made).
    SOFTRNIC_ERR_BAD_HANDLE = -2,
    /// An argument is out of range (unknown flag or opcode, bad depth, bad address, objects
    /// of different RNICs).
    SOFTRNIC_ERR_INVALID_ARG = -3,
    /// Memory could not be allocated, or no STag is left.
    SOFTRNIC_ERR_NO_MEMORY = -4,
    /// The object is in use (a PD with memory or QPs, a CQ with QPs, a connected QP, a
    /// region with windows bound).
    SOFTRNIC_ERR_BUSY = -5,
    /// The STag is not registered on this RNIC (or its key does not match).
    SOFTRNIC_ERR_UNKNOWN_STAG = -6,
    /// The STag is still valid (deallocate needs an invalidated STag).
    SOFTRNIC_ERR_STAG_VALID = -7,
    /// Access rights are not allowed (remote write or atomic without local write).
    SOFTRNIC_ERR_ACCESS = -8,
    /// A range lies outside a buffer or region.
    SOFTRNIC_ERR_RANGE = -9,
    /// The QP's state does not accept the post (not connected, or in error).
    SOFTRNIC_ERR_QP_STATE = -10,
    /// The work queue is full.
    SOFTRNIC_ERR_QUEUE_FULL = -11,
    /// The work request is malformed (too many SGEs, too long, wrong SGL for its operation).
    SOFTRNIC_ERR_INVALID_WR = -12,
    /// The wait timed out.
    SOFTRNIC_ERR_TIMEOUT = -13,
    /// Connection setup failed (TCP, MPA negotiation, aborted).
    SOFTRNIC_ERR_CONNECT = -14,
    /// The peer rejected the connection.
    SOFTRNIC_ERR_REJECTED = -15,
    /// A socket or system call failed.
    SOFTRNIC_ERR_IO = -16,
    /// The RNIC is closed.
    SOFTRNIC_ERR_CLOSED = -17,
    /// `softrnic_rnic_advance` on an RNIC with a progress thread.
    SOFTRNIC_ERR_NOT_MANUAL = -18,
    /// An internal error (a panic inside the library, caught at the boundary).
    SOFTRNIC_ERR_INTERNAL = -19,
}

use softrnic_status::*;

/// Every status, for `softrnic_strerror` and the tests.
pub(crate) const ALL: [softrnic_status; 20] = [
    SOFTRNIC_OK,
    SOFTRNIC_ERR_NULL,
    SOFTRNIC_ERR_BAD_HANDLE,
    SOFTRNIC_ERR_INVALID_ARG,
    SOFTRNIC_ERR_NO_MEMORY,
    SOFTRNIC_ERR_BUSY,
    SOFTRNIC_ERR_UNKNOWN_STAG,
    SOFTRNIC_ERR_STAG_VALID,
    SOFTRNIC_ERR_ACCESS,
    SOFTRNIC_ERR_RANGE,
    SOFTRNIC_ERR_QP_STATE,
    SOFTRNIC_ERR_QUEUE_FULL,
    SOFTRNIC_ERR_INVALID_WR,
    SOFTRNIC_ERR_TIMEOUT,
    SOFTRNIC_ERR_CONNECT,
    SOFTRNIC_ERR_REJECTED,
    SOFTRNIC_ERR_IO,
    SOFTRNIC_ERR_CLOSED,
    SOFTRNIC_ERR_NOT_MANUAL,
    SOFTRNIC_ERR_INTERNAL,
];

impl softrnic_status {
    /// The short description `softrnic_strerror` returns (NUL-terminated).
    pub(crate) fn text(self) -> &'static std::ffi::CStr {
        match self {
            SOFTRNIC_OK => c"success",
            SOFTRNIC_ERR_NULL => c"a required pointer argument is NULL",
            SOFTRNIC_ERR_BAD_HANDLE => c"not a live handle of the expected type",
            SOFTRNIC_ERR_INVALID_ARG => c"invalid argument",
            SOFTRNIC_ERR_NO_MEMORY => c"out of memory or STags",
            SOFTRNIC_ERR_BUSY => c"resource in use",
            SOFTRNIC_ERR_UNKNOWN_STAG => c"unknown STag",
            SOFTRNIC_ERR_STAG_VALID => c"STag still valid",
            SOFTRNIC_ERR_ACCESS => c"access rights not allowed",
            SOFTRNIC_ERR_RANGE => c"range out of bounds",
            SOFTRNIC_ERR_QP_STATE => c"QP state does not allow the operation",
            SOFTRNIC_ERR_QUEUE_FULL => c"work queue full",
            SOFTRNIC_ERR_INVALID_WR => c"invalid work request",
            SOFTRNIC_ERR_TIMEOUT => c"timed out",
            SOFTRNIC_ERR_CONNECT => c"connection setup failed",
            SOFTRNIC_ERR_REJECTED => c"connection rejected by the peer",
            SOFTRNIC_ERR_IO => c"I/O error",
            SOFTRNIC_ERR_CLOSED => c"RNIC closed",
            SOFTRNIC_ERR_NOT_MANUAL => c"RNIC is not in manual-progress mode",
            SOFTRNIC_ERR_INTERNAL => c"internal error",
        }
    }

    pub(crate) fn from_code(code: c_int) -> Option<softrnic_status> {
        ALL.into_iter().find(|s| *s as c_int == code)
    }
}

/// An error of a call: its code and full message.
#[derive(Debug)]
pub(crate) struct Error {
    pub(crate) code: softrnic_status,
    pub(crate) msg: String,
}

impl Error {
    pub(crate) fn new(code: softrnic_status, msg: impl Into<String>) -> Error {
        Error {
            code,
            msg: msg.into(),
        }
    }
}

pub(crate) type Result<T, E = Error> = std::result::Result<T, E>;

fn rnic_code(e: &RnicError) -> softrnic_status {
    match e {
        RnicError::Io(_) | RnicError::Device(_) => SOFTRNIC_ERR_IO,
        RnicError::Engine(_) | RnicError::Mpa(_) => SOFTRNIC_ERR_INVALID_ARG,
        RnicError::Cm(CmError::Rejected { .. }) => SOFTRNIC_ERR_REJECTED,
        RnicError::Cm(_) => SOFTRNIC_ERR_CONNECT,
        RnicError::QpBusy(_) => SOFTRNIC_ERR_BUSY,
        RnicError::UnknownQp(_) | RnicError::UnknownRequest(_) | RnicError::UnknownListener(_) => {
            SOFTRNIC_ERR_BAD_HANDLE
        }
        RnicError::Timeout => SOFTRNIC_ERR_TIMEOUT,
        RnicError::Closed => SOFTRNIC_ERR_CLOSED,
        RnicError::NotManual => SOFTRNIC_ERR_NOT_MANUAL,
        RnicError::Modify(_) => SOFTRNIC_ERR_QP_STATE,
    }
}

fn mem_code(e: &MemError) -> softrnic_status {
    match e {
        MemError::RemoteNeedsLocalWrite { .. } | MemError::WindowRights { .. } => {
            SOFTRNIC_ERR_ACCESS
        }
        MemError::OutOfBounds { .. }
        | MemError::ToWrap { .. }
        | MemError::WindowBounds { .. }
        | MemError::FastRegTooLong { .. } => SOFTRNIC_ERR_RANGE,
        MemError::TableFull | MemError::NoMemory { .. } => SOFTRNIC_ERR_NO_MEMORY,
        MemError::UnknownStag { .. } => SOFTRNIC_ERR_UNKNOWN_STAG,
        MemError::StillValid { .. } => SOFTRNIC_ERR_STAG_VALID,
        MemError::WindowsBound { .. } | MemError::WindowInUse { .. } => SOFTRNIC_ERR_BUSY,
        _ => SOFTRNIC_ERR_INVALID_ARG,
    }
}

fn post_code(e: &PostError) -> softrnic_status {
    match e {
        PostError::InvalidState(_) => SOFTRNIC_ERR_QP_STATE,
        PostError::QueueFull { .. } => SOFTRNIC_ERR_QUEUE_FULL,
        PostError::TooManySge { .. }
        | PostError::MessageTooLong { .. }
        | PostError::InvalidWr(_) => SOFTRNIC_ERR_INVALID_WR,
    }
}

impl From<VerbsError> for Error {
    fn from(e: VerbsError) -> Error {
        let code = match &e {
            VerbsError::Rnic(r) => rnic_code(r),
            VerbsError::Mem(m) => mem_code(m),
            VerbsError::Post(p) => post_code(p),
            VerbsError::Sgl(_) => SOFTRNIC_ERR_INVALID_WR,
            VerbsError::UnknownPd(_) | VerbsError::UnknownCq(_) => SOFTRNIC_ERR_BAD_HANDLE,
            VerbsError::PdInUse { .. } | VerbsError::CqInUse { .. } => SOFTRNIC_ERR_BUSY,
            VerbsError::UnknownStag(_) => SOFTRNIC_ERR_UNKNOWN_STAG,
            VerbsError::StagValid(_) => SOFTRNIC_ERR_STAG_VALID,
            VerbsError::Timeout(_) => SOFTRNIC_ERR_TIMEOUT,
            VerbsError::CqDepth(_) => SOFTRNIC_ERR_INVALID_ARG,
            VerbsError::Channel(_) => SOFTRNIC_ERR_IO,
        };
        Error::new(code, e.to_string())
    }
}

impl From<MemError> for Error {
    fn from(e: MemError) -> Error {
        Error::new(mem_code(&e), e.to_string())
    }
}

impl From<RnicError> for Error {
    fn from(e: RnicError) -> Error {
        Error::new(rnic_code(&e), e.to_string())
    }
}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_last_error(code: softrnic_status, msg: &str) {
    let text = format!(
        "{}: {}",
        code.text().to_str().unwrap_or("error"),
        msg.replace('\0', "\\0")
    );
    let c = CString::new(text).unwrap_or_default();
    // try_with: during thread teardown the slot may be gone; the code is still returned.
    let _ = LAST_ERROR.try_with(|slot| *slot.borrow_mut() = c);
}

/// The message of the last error of this thread (empty before the first).
pub(crate) fn last_error_ptr() -> *const c_char {
    LAST_ERROR
        .try_with(|slot| slot.borrow().as_ptr())
        .unwrap_or(c"".as_ptr())
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> &str {
    p.downcast_ref::<&str>()
        .copied()
        .or_else(|| p.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("panic")
}

/// Runs the body of an exported function: `Ok(n)` returns `n`, an error records its
/// message for `softrnic_last_error` and returns its code, a panic becomes
/// `SOFTRNIC_ERR_INTERNAL` (no unwinding crosses into C).
pub(crate) fn guard(f: impl FnOnce() -> Result<c_int>) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(n)) => n,
        Ok(Err(e)) => {
            set_last_error(e.code, &e.msg);
            e.code as c_int
        }
        Err(p) => {
            let msg = format!("panic inside softrnic: {}", panic_text(&*p));
            // Dropping the payload could itself panic; leak it instead (panics are bugs).
            std::mem::forget(p);
            set_last_error(SOFTRNIC_ERR_INTERNAL, &msg);
            SOFTRNIC_ERR_INTERNAL as c_int
        }
    }
}

/// `guard` for functions whose success is `SOFTRNIC_OK`.
pub(crate) fn guard_ok(f: impl FnOnce() -> Result<()>) -> c_int {
    guard(|| f().map(|()| SOFTRNIC_OK as c_int))
}
