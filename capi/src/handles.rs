//! The handle table. A handle given to C is a number dressed as a pointer to an opaque
//! type: the library never dereferences it, it looks it up here. A NULL, forged, destroyed
//! or wrongly typed handle is therefore an error code, never a wild memory access, and
//! numbers are never reused, so a stale handle cannot name a newer object.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use verbs::{CompletionChannel, Cq, CqId, Listener, MemoryRegion, Pd, Qp, Srq};

use crate::error::{Error, Result, softrnic_status};

/// An open RNIC.
#[derive(Debug)]
pub(crate) struct RnicObj {
    pub(crate) rnic: verbs::Rnic,
}

/// A protection domain.
#[derive(Debug)]
pub(crate) struct PdObj {
    pub(crate) rnic: Arc<RnicObj>,
    pub(crate) pd: Pd,
}

/// A completion queue.
#[derive(Debug)]
pub(crate) struct CqObj {
    pub(crate) rnic: Arc<RnicObj>,
    pub(crate) cq: Cq,
}

/// A queue pair.
#[derive(Debug)]
pub(crate) struct QpObj {
    pub(crate) rnic: Arc<RnicObj>,
    pub(crate) qp: Qp,
}

/// A registered memory region.
#[derive(Debug)]
pub(crate) struct MrObj {
    pub(crate) rnic: Arc<RnicObj>,
    pub(crate) mr: MemoryRegion,
    /// The memory is the caller's (`softrnic_nsmr_register_mem`).
    pub(crate) caller_mem: bool,
}

/// A listener.
#[derive(Debug)]
pub(crate) struct ListenerObj {
    pub(crate) rnic: Arc<RnicObj>,
    pub(crate) listener: Listener,
}

/// A completion channel.
#[derive(Debug)]
pub(crate) struct ChannelObj {
    pub(crate) rnic: Arc<RnicObj>,
    pub(crate) channel: CompletionChannel,
    /// CQs that fired and were not yet handed out by `softrnic_channel_get_cq`.
    pub(crate) pending: Mutex<std::collections::VecDeque<CqId>>,
}

/// A connection request taken from a listener, not yet accepted or rejected.
#[derive(Debug)]
pub(crate) struct ConnReqObj {
    pub(crate) rnic: Arc<RnicObj>,
    pub(crate) req: verbs::ConnectRequest,
}

/// A shared receive queue.
#[derive(Debug)]
pub(crate) struct SrqObj {
    pub(crate) rnic: Arc<RnicObj>,
    pub(crate) srq: Srq,
}

#[derive(Clone, Debug)]
pub(crate) enum Object {
    Rnic(Arc<RnicObj>),
    Pd(Arc<PdObj>),
    Cq(Arc<CqObj>),
    Qp(Arc<QpObj>),
    Mr(Arc<MrObj>),
    Listener(Arc<ListenerObj>),
    Channel(Arc<ChannelObj>),
    Srq(Arc<SrqObj>),
    ConnReq(Arc<ConnReqObj>),
}

struct Entry {
    /// The handle number of the RNIC the object belongs to (its own for an RNIC).
    rnic: usize,
    obj: Object,
}

struct Table {
    next: usize,
    map: BTreeMap<usize, Entry>,
}

static TABLE: Mutex<Table> = Mutex::new(Table {
    next: 1,
    map: BTreeMap::new(),
});

fn table() -> MutexGuard<'static, Table> {
    TABLE.lock().unwrap_or_else(|p| p.into_inner())
}

/// An object kind with its opaque C type.
pub(crate) trait Kind: Sized {
    /// The opaque C type the handle points to.
    type C;
    /// What the handle is called in messages.
    const WHAT: &'static str;
    fn wrap(obj: Arc<Self>) -> Object;
    fn unwrap(obj: &Object) -> Option<&Arc<Self>>;
}

macro_rules! kind {
    ($obj:ident, $c:ty, $variant:ident, $what:literal) => {
        impl Kind for $obj {
            type C = $c;
            const WHAT: &'static str = $what;
            fn wrap(obj: Arc<Self>) -> Object {
                Object::$variant(obj)
            }
            fn unwrap(obj: &Object) -> Option<&Arc<Self>> {
                match obj {
                    Object::$variant(o) => Some(o),
                    _ => None,
                }
            }
        }
    };
}

kind!(RnicObj, crate::softrnic_rnic, Rnic, "RNIC");
kind!(PdObj, crate::softrnic_pd, Pd, "PD");
kind!(CqObj, crate::softrnic_cq, Cq, "CQ");
kind!(QpObj, crate::softrnic_qp, Qp, "QP");
kind!(MrObj, crate::softrnic_mr, Mr, "memory region");
kind!(ListenerObj, crate::softrnic_listener, Listener, "listener");
kind!(
    ChannelObj,
    crate::softrnic_channel,
    Channel,
    "completion channel"
);
kind!(SrqObj, crate::softrnic_srq, Srq, "shared receive queue");
kind!(
    ConnReqObj,
    crate::softrnic_conn_request,
    ConnReq,
    "connection request"
);

/// Handle numbers are multiples of 16, so they look like (and never collide with small)
/// aligned pointers.
const STEP: usize = 16;

/// Enters `obj` (of the RNIC whose handle number is `rnic`, or a new RNIC when `None`) and
/// returns its handle.
pub(crate) fn insert<T: Kind>(rnic: Option<usize>, obj: Arc<T>) -> *mut T::C {
    let mut t = table();
    let id = t.next * STEP;
    t.next += 1;
    t.map.insert(
        id,
        Entry {
            rnic: rnic.unwrap_or(id),
            obj: T::wrap(obj),
        },
    );
    std::ptr::without_provenance_mut(id)
}

fn number<T: Kind>(h: *const T::C) -> Result<usize> {
    if h.is_null() {
        return Err(Error::new(
            softrnic_status::SOFTRNIC_ERR_NULL,
            format!("the {} handle is NULL", T::WHAT),
        ));
    }
    Ok(h.addr())
}

fn bad<T: Kind>(id: usize) -> Error {
    Error::new(
        softrnic_status::SOFTRNIC_ERR_BAD_HANDLE,
        format!("{id:#x} is not a live {} handle", T::WHAT),
    )
}

/// The object behind a handle, with the handle number of its RNIC.
pub(crate) fn get<T: Kind>(h: *const T::C) -> Result<(Arc<T>, usize)> {
    let id = number::<T>(h)?;
    let t = table();
    let e = t.map.get(&id).ok_or_else(|| bad::<T>(id))?;
    let o = T::unwrap(&e.obj).ok_or_else(|| bad::<T>(id))?;
    Ok((o.clone(), e.rnic))
}

/// Forgets a handle (after its object was destroyed).
pub(crate) fn remove<T: Kind>(h: *const T::C) {
    if let Ok(id) = number::<T>(h) {
        table().map.remove(&id);
    }
}

/// Forgets an RNIC's handle and those of every object of it; returns the RNIC's object
/// (the RNIC closes when the last reference to it goes).
pub(crate) fn remove_rnic(h: *const crate::softrnic_rnic) -> Result<Arc<RnicObj>> {
    let id = number::<RnicObj>(h)?;
    let mut t = table();
    let rnic = match t.map.get(&id).map(|e| &e.obj) {
        Some(Object::Rnic(r)) => r.clone(),
        _ => return Err(bad::<RnicObj>(id)),
    };
    // The objects are dropped after the lock is released (dropping an RNIC joins its
    // progress thread).
    let mut gone = Vec::new();
    t.map.retain(|_, e| {
        if e.rnic == id {
            gone.push(e.obj.clone());
            false
        } else {
            true
        }
    });
    drop(t);
    drop(gone);
    Ok(rnic)
}

/// Puts `obj` behind the live handle `h` (a re-registered region); nothing for a dead one.
pub(crate) fn replace<T: Kind>(h: *const T::C, obj: Arc<T>) {
    if let Ok(id) = number::<T>(h)
        && let Some(e) = table().map.get_mut(&id)
        && T::unwrap(&e.obj).is_some()
    {
        e.obj = T::wrap(obj);
    }
}

/// The handle of the CQ with id `cq` of RNIC `rnic` (NULL when it has none any more).
pub(crate) fn cq_handle(rnic: usize, cq: CqId) -> *mut crate::softrnic_cq {
    table()
        .map
        .iter()
        .find(|(_, e)| e.rnic == rnic && matches!(&e.obj, Object::Cq(c) if c.cq.id() == cq))
        .map_or(std::ptr::null_mut(), |(id, _)| {
            std::ptr::without_provenance_mut(*id)
        })
}

/// How many live CQ handles are attached to `channel`.
pub(crate) fn cqs_on_channel(channel: &CompletionChannel) -> usize {
    table()
        .map
        .values()
        .filter(|e| matches!(&e.obj, Object::Cq(c) if c.cq.channel_is(channel)))
        .count()
}

/// How many live QP handles take their receives from `srq`.
pub(crate) fn qps_on_srq(srq: &Srq) -> usize {
    table()
        .map
        .values()
        .filter(|e| matches!(&e.obj, Object::Qp(q) if q.qp.as_stack().attr().srq.as_ref().map(Srq::id) == Some(srq.id())))
        .count()
}

/// How many live region handles register `buf`.
pub(crate) fn regions_sharing(buf: &Arc<verbs::RegisteredBuf>) -> usize {
    table()
        .map
        .values()
        .filter(|e| matches!(&e.obj, Object::Mr(m) if Arc::ptr_eq(m.mr.buf(), buf)))
        .count()
}

/// Forgets the handles of the memory regions of RNIC `rnic` whose STag has index `index`
/// (after `softrnic_deallocate_stag` released it).
pub(crate) fn remove_mrs_of_stag(rnic: usize, index: u32) {
    let gone: Vec<Entry>;
    {
        let mut t = table();
        let ids: Vec<usize> = t
            .map
            .iter()
            .filter(|(_, e)| {
                e.rnic == rnic && matches!(&e.obj, Object::Mr(m) if m.mr.stag() >> 8 == index)
            })
            .map(|(id, _)| *id)
            .collect();
        gone = ids.iter().filter_map(|id| t.map.remove(id)).collect();
    }
    drop(gone);
}
