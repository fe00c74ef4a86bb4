//! AF_XDP: frames straight between a NIC queue and the progress core, past the kernel's
//! network stack (kernel bypass).
//!
//! An XSK socket is bound to one queue of an interface; its UMEM (the frame memory the
//! kernel and the core share) is owned here. softrnic's own XDP program (`xdp_steer.bpf.c`,
//! built by the build script) decides which arriving frames go to the socket:
//!
//! - [`XdpTake::Addresses`] (the default): IPv4 frames to the stack's own addresses and ARP
//!   frames asking for or answering about them. Everything else passes to the kernel, which
//!   goes on using the interface; the stack's addresses must be addresses the host does not
//!   use. No frame for the stack reaches the kernel's TCP, so the kernel never answers a
//!   peer of the RNIC with a reset.
//! - [`XdpTake::All`]: every frame on the queue (on a one-queue device such as a veth, the
//!   whole interface) goes to the socket.
//!
//! The program is attached through a BPF link when the first socket on an interface opens
//! and detached when the last one closes; the kernel also detaches it when the process ends
//! in any way. With several queues, the NIC's flow steering (`ethtool -N`) decides which
//! queue, and so which socket, a frame reaches.
//!
//! Copy mode (generic XDP, `mode=skb`, the default) works on every interface; `mode=native`
//! asks the driver for native XDP (and zero-copy where the driver offers it).
//!
//! A UMEM frame is 4 KiB (3840 bytes of frame after the kernel's headroom). Jumbo frames use
//! multi-buffer AF_XDP (Linux 6.6): the program is multi-buffer aware (`xdp.frags`), the
//! socket is bound with XDP_USE_SG, and a frame larger than a UMEM frame travels as a chain
//! of descriptors, every one but the last marked XDP_PKT_CONTD, on the RX ring as on the TX
//! ring (a 9014-byte frame: 3840 + 3840 + 1334). A frame that fits one UMEM frame is one
//! descriptor, as without multi-buffer. On a kernel without multi-buffer AF_XDP the socket
//! binds without it and the MTU is at most [`SINGLE_BUFFER_MTU`]. (UMEM chunks larger than
//! a page would also hold a jumbo frame whole, but the kernel takes them only in hugetlb
//! memory, which a host has only when its administrator reserved some.)

// The UMEM is memory the kernel reads and writes: its rings and frames are touched here only.
#![allow(unsafe_code)]

use std::io::{self, Write};
use std::num::NonZeroU32;
use std::os::fd::{AsRawFd, RawFd};

use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use aya::maps::{Array, HashMap as BpfHashMap, MapData, XskMap};
use aya::programs::Xdp;
use xsk_rs::config::{
    BindFlags, FrameSize, Interface, LibxdpFlags, QueueSize, SocketConfig, UmemConfig, XdpFlags,
};
use xsk_rs::{CompQueue, FillQueue, FrameDesc, RxQueue, Socket, TxQueue, Umem};

use super::DeviceError;

/// UMEM frame size.
const FRAME: u32 = 4096;
/// Frames in the UMEM: half for receiving, half for sending.
const FRAMES: u32 = 4096;
/// Ring sizes (fill, completion, RX, TX).
const RING: u32 = 2048;
/// Frames queued on the TX ring before the kernel is asked to send them (one `sendto`
/// per batch rather than per frame; what is left is sent at the end of the poll).
const TX_BATCH: usize = 32;
/// Descriptors taken from the RX ring at once.
const RX_BATCH: usize = 64;
/// Bytes of a frame one UMEM frame holds: the frame less the kernel's XDP headroom (256),
/// which the kernel leaves in front of received data and xsk-rs in front of sent data.
const FRAME_ROOM: usize = FRAME as usize - 256;
/// Largest MTU when a frame must fit one UMEM frame (no multi-buffer AF_XDP): 3826.
pub const SINGLE_BUFFER_MTU: usize = FRAME_ROOM - 14;
/// UMEM frames one sent frame may take with multi-buffer AF_XDP: copy mode takes up to
/// MAX_SKB_FRAGS + 1 (18 in a default kernel build), which hold a 65535-byte MTU's frame.
const MAX_TX_PARTS: usize = 18;
/// Largest MTU with multi-buffer AF_XDP (jumbo frames; 65535, as a veth's).
pub const MULTI_BUFFER_MTU: usize = 65_535;
/// The descriptor option marking a frame continued in the next descriptor (XDP_PKT_CONTD).
const XDP_PKT_CONTD: u32 = 1;

/// How the XDP program runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum XdpMode {
    /// Generic XDP (copy mode): every interface.
    #[default]
    Skb,
    /// The driver's native XDP.
    Native,
}

/// Which frames of a queue the XDP program hands to the RNIC (the module documentation
/// says more).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum XdpTake {
    /// IPv4 and ARP frames for the stack's own addresses; the rest to the kernel.
    #[default]
    Addresses,
    /// Every frame.
    All,
}

/// The XDP program compiled by the build script.
static STEER_PROGRAM: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/xdp_steer.bpf.o"));

/// softrnic's XDP program attached to one interface, and its maps.
struct Steering {
    /// Holds the loaded program and its link: dropping it detaches the program.
    _ebpf: aya::Ebpf,
    xsks: XskMap<MapData>,
    addrs: BpfHashMap<MapData, u32, u32>,
    mode: XdpMode,
    take: XdpTake,
    /// The program is multi-buffer aware (`xdp.frags`).
    frags: bool,
}

/// An interface: its name in a network namespace (the namespace file's inode).
type IfaceKey = (u64, String);

/// The programs this process has attached, by interface (several sockets on one interface
/// share one program).
static STEERING: Mutex<Vec<(IfaceKey, Weak<Mutex<Steering>>)>> = Mutex::new(Vec::new());

/// The calling thread's interface `name` (threads may sit in different namespaces).
fn iface_key(name: &str) -> IfaceKey {
    use std::os::unix::fs::MetadataExt;
    let ns = std::fs::metadata("/proc/thread-self/ns/net").map_or(0, |m| m.ino());
    (ns, name.to_string())
}

fn lock_steering(s: &Mutex<Steering>) -> MutexGuard<'_, Steering> {
    s.lock().unwrap_or_else(|p| p.into_inner())
}

impl Steering {
    /// The program on `name`, attached now unless this process attached it already.
    fn get(name: &str, mode: XdpMode, take: XdpTake) -> Result<Arc<Mutex<Steering>>, DeviceError> {
        let key = iface_key(name);
        let mut all = STEERING.lock().unwrap_or_else(|p| p.into_inner());
        all.retain(|(_, w)| w.strong_count() > 0);
        if let Some(s) = all
            .iter()
            .find(|(k, _)| *k == key)
            .and_then(|(_, w)| w.upgrade())
        {
            let g = lock_steering(&s);
            if g.mode != mode || g.take != take {
                return Err(DeviceError::Conflict {
                    name: name.to_string(),
                    why: format!(
                        "its XDP program runs in {:?} mode taking {:?}; every socket on one interface must ask for the same",
                        g.mode, g.take
                    ),
                });
            }
            drop(g);
            return Ok(s);
        }
        let s = Arc::new(Mutex::new(Steering::attach(name, mode, take)?));
        all.push((key, Arc::downgrade(&s)));
        Ok(s)
    }

    fn attach(name: &str, mode: XdpMode, take: XdpTake) -> Result<Steering, DeviceError> {
        let err = |what: &str, e: &dyn std::error::Error| bpf_error(name, what, e);
        let mut ebpf = aya::Ebpf::load(STEER_PROGRAM).map_err(|e| err("XDP program", &e))?;
        // The multi-buffer program (jumbo frames) where the kernel has multi-buffer XDP
        // (5.18 and later), the single-buffer one otherwise.
        let mut frags = true;
        let mut loaded = None;
        for prog_name in ["softrnic_steer", "softrnic_steer_linear"] {
            let prog: &mut Xdp = ebpf
                .program_mut(prog_name)
                .ok_or_else(|| open_error(name, "XDP program", "softrnic_steer missing"))?
                .try_into()
                .map_err(|e| err("XDP program", &e))?;
            match prog.load() {
                Ok(()) => {
                    loaded = Some(prog_name);
                    break;
                }
                Err(e) if frags => {
                    tracing::debug!(iface = name, error = %chain(&e),
                        "no multi-buffer XDP: jumbo frames stay with the kernel");
                    frags = false;
                }
                Err(e) => return Err(err("loading the XDP program", &e)),
            }
        }
        let prog: &mut Xdp = loaded
            .and_then(|n| ebpf.program_mut(n))
            .ok_or_else(|| open_error(name, "XDP program", "not loaded"))?
            .try_into()
            .map_err(|e| err("XDP program", &e))?;
        let flags = match mode {
            XdpMode::Skb => aya::programs::XdpMode::Skb,
            XdpMode::Native => aya::programs::XdpMode::Driver,
        };
        prog.attach(name, flags)
            .map_err(|e| err("attaching the XDP program", &e))?;
        let mut config: Array<MapData, u32> = ebpf
            .take_map("config")
            .ok_or_else(|| open_error(name, "XDP program", "no config map"))?
            .try_into()
            .map_err(|e| err("XDP config map", &e))?;
        config
            .set(0, u32::from(take == XdpTake::All), 0)
            .map_err(|e| err("XDP config map", &e))?;
        let xsks = ebpf
            .take_map("xsks")
            .ok_or_else(|| open_error(name, "XDP program", "no xsks map"))?
            .try_into()
            .map_err(|e| err("XDP socket map", &e))?;
        let addrs = ebpf
            .take_map("addrs")
            .ok_or_else(|| open_error(name, "XDP program", "no addrs map"))?
            .try_into()
            .map_err(|e| err("XDP address map", &e))?;
        Ok(Steering {
            _ebpf: ebpf,
            xsks,
            addrs,
            mode,
            take,
            frags,
        })
    }
}

/// An error and its sources on one line (aya keeps the OS error in a source).
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

/// One AF_XDP socket and its UMEM.
pub struct XdpLink {
    // Field order: the queues (the socket) drop before the UMEM they use.
    tx_q: TxQueue,
    rx_q: RxQueue,
    fq: FillQueue,
    cq: CompQueue,
    umem: Umem,
    /// TX frames free to fill.
    tx_free: Vec<FrameDesc>,
    /// Descriptors the completion queue fills.
    done: Vec<FrameDesc>,
    /// The UMEM frames of one frame being sent.
    tx_chain: Vec<FrameDesc>,
    /// Descriptors taken from the RX queue; `rx_next` is the next to read.
    rx_descs: Vec<FrameDesc>,
    rx_next: usize,
    rx_count: usize,
    /// Bytes of a multi-buffer frame already copied out (its next buffer goes after them).
    rx_have: usize,
    /// The frame being received does not fit the caller's buffer: it is dropped.
    rx_overflow: bool,
    /// Received frames read out, to go back on the fill queue.
    refill: Vec<FrameDesc>,
    /// Bound with XDP_USE_SG: a frame may span several UMEM frames.
    sg: bool,
    fd: RawFd,
    name: String,
    /// The interface's MTU and MAC address when the socket was bound.
    iface_mtu: Option<usize>,
    iface_mac: Option<[u8; 6]>,
    /// Frames on the TX ring since the last wakeup.
    unkicked: usize,
    /// The interface's XDP program (after the socket: the socket closes first).
    steering: Arc<Mutex<Steering>>,
    /// The addresses this link asked the program for (removed on drop).
    steered: Vec<Ipv4Addr>,
}

impl Drop for XdpLink {
    fn drop(&mut self) {
        let mut s = lock_steering(&self.steering);
        for ip in &self.steered {
            let _ = s.addrs.remove(&u32::from_ne_bytes(ip.octets()));
        }
    }
}

impl std::fmt::Debug for XdpLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XdpLink")
            .field("name", &self.name)
            .field("tx_free", &self.tx_free.len())
            .finish_non_exhaustive()
    }
}

fn open_error(name: &str, what: &str, e: impl std::fmt::Display + std::fmt::Debug) -> DeviceError {
    // xsk-rs's errors keep the OS error in their Debug form only.
    with_hint(name, what, format!("{e} ({e:?})"))
}

/// An error of the XDP program's loader (aya keeps the OS error in a source).
fn bpf_error(name: &str, what: &str, e: &dyn std::error::Error) -> DeviceError {
    with_hint(name, what, chain(e))
}

/// The error, and what to do about it where that is known.
fn with_hint(name: &str, what: &str, s: String) -> DeviceError {
    let hint = if s.contains("Operation not permitted") || s.contains("os error 1)") {
        " — AF_XDP needs root (CAP_NET_ADMIN, CAP_BPF and CAP_NET_RAW)"
    } else if s.contains("No such device") || s.contains("os error 19") {
        " — no such interface (ip link shows the names)"
    } else if what.starts_with("attaching") && (s.contains("busy") || s.contains("os error 16")) {
        " — another XDP program is attached to the interface (`ip link set IFACE xdp off` \
         removes one a killed process left behind)"
    } else if s.contains("busy") || s.contains("os error 16") {
        " — the queue is busy: another AF_XDP socket holds it (or one just closed: try again)"
    } else if s.contains("not supported") || s.contains("os error 95") {
        " — the driver has no XDP in this mode: use mode=skb (generic XDP)"
    } else {
        ""
    };
    DeviceError::Open(format!("AF_XDP on {name}: {what}: {s}{hint}"))
}

/// Turns off libxdp's and libbpf's own messages on stderr (once per process): errors reach
/// the caller as [`DeviceError`]s instead.
fn quiet_libraries() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: both calls only replace a global callback pointer; `None` (NULL) is the
        // documented way to disable printing. They run once, before any socket is made.
        unsafe {
            libxdp_sys::libxdp_set_print(None);
            libbpf_sys::libbpf_set_print(None);
        }
    });
}

impl XdpLink {
    /// Binds an AF_XDP socket to queue `queue` of interface `name`, with softrnic's XDP
    /// program (attached now if this process has not yet) handing it the frames `take` says.
    pub fn open(
        name: &str,
        queue: u32,
        mode: XdpMode,
        take: XdpTake,
    ) -> Result<XdpLink, DeviceError> {
        quiet_libraries();
        let steering = Steering::get(name, mode, take)?;
        let q = |n| QueueSize::new(n).map_err(|e| open_error(name, "ring size", e));
        let ucfg = UmemConfig::builder()
            .frame_size(FrameSize::new(FRAME).map_err(|e| open_error(name, "frame size", e))?)
            .fill_queue_size(q(RING)?)
            .comp_queue_size(q(RING)?)
            .build()
            .map_err(|e| open_error(name, "UMEM configuration", e))?;
        let count = NonZeroU32::new(FRAMES).ok_or_else(|| open_error(name, "UMEM", "no frames"))?;
        let (umem, mut descs) =
            Umem::new(ucfg, count, false).map_err(|e| open_error(name, "UMEM", e))?;
        let iface: Interface = name
            .parse()
            .map_err(|e| open_error(name, "interface name", e))?;
        // Multi-buffer (XDP_USE_SG, Linux 6.6) when the program takes multi-buffer frames:
        // frames larger than a UMEM frame arrive as a chain of descriptors. A kernel without
        // it refuses the flag; the socket then binds without it and the MTU stays within
        // one UMEM frame.
        let frags = lock_steering(&steering).frags;
        let socket = |sg: bool| {
            let mut bind = match mode {
                XdpMode::Skb => BindFlags::XDP_COPY | BindFlags::XDP_USE_NEED_WAKEUP,
                XdpMode::Native => BindFlags::XDP_USE_NEED_WAKEUP,
            };
            if sg {
                bind |= BindFlags::XDP_USE_SG;
            }
            let scfg = SocketConfig::builder()
                // The program is softrnic's own (above), not libxdp's.
                .libxdp_flags(LibxdpFlags::XSK_LIBXDP_FLAGS_INHIBIT_PROG_LOAD)
                .rx_queue_size(q(RING)?)
                .tx_queue_size(q(RING)?)
                .xdp_flags(match mode {
                    XdpMode::Skb => XdpFlags::XDP_FLAGS_SKB_MODE,
                    XdpMode::Native => XdpFlags::XDP_FLAGS_DRV_MODE,
                })
                .bind_flags(bind)
                .build();
            // SAFETY: the UMEM is owned by the link together with the socket's queues and
            // outlives them (declared after them, so dropped after), as the socket requires.
            unsafe { Socket::new(scfg, &umem, &iface, queue) }
                .map_err(|e| open_error(name, "socket", e))
        };
        let (sg, (tx_q, rx_q, rings)) = match socket(frags) {
            Ok(s) => (frags, s),
            Err(e) if frags => {
                tracing::debug!(iface = name, error = %e,
                    "AF_XDP socket without multi-buffer: jumbo frames do not fit");
                (false, socket(false)?)
            }
            Err(e) => return Err(e),
        };
        let (mut fq, cq) = rings.ok_or_else(|| open_error(name, "socket", "no fill queue"))?;
        let rx_frames = descs.split_off(descs.len() / 2);
        // SAFETY: these frames belong to this UMEM and nothing else uses them: the kernel
        // owns them until it hands them back on the RX queue.
        let given = unsafe { fq.produce(&rx_frames) };
        if given != rx_frames.len() {
            return Err(open_error(
                name,
                "fill queue",
                "could not hand the RX frames over",
            ));
        }
        let fd = rx_q.fd().as_raw_fd();
        lock_steering(&steering)
            .xsks
            .set(queue, fd, 0)
            .map_err(|e| bpf_error(name, "XDP socket map", &e))?;
        Ok(XdpLink {
            tx_q,
            rx_q,
            fq,
            cq,
            umem,
            done: descs.clone(),
            tx_free: descs,
            tx_chain: Vec::with_capacity(MAX_TX_PARTS),
            rx_descs: vec![FrameDesc::default(); RX_BATCH],
            rx_next: 0,
            rx_count: 0,
            rx_have: 0,
            rx_overflow: false,
            refill: Vec::with_capacity(rx_frames.len()),
            sg,
            fd,
            name: name.to_string(),
            iface_mtu: iface_ioctl(name, libc::SIOCGIFMTU).and_then(|r| {
                // SAFETY: SIOCGIFMTU filled the union's MTU member.
                usize::try_from(unsafe { r.ifr_ifru.ifru_mtu }).ok()
            }),
            iface_mac: iface_ioctl(name, libc::SIOCGIFHWADDR).and_then(|r| {
                // SAFETY: SIOCGIFHWADDR filled the union's hardware address member.
                let a = unsafe { r.ifr_ifru.ifru_hwaddr };
                (a.sa_family == libc::ARPHRD_ETHER)
                    .then(|| std::array::from_fn(|i| a.sa_data[i] as u8))
            }),
            unkicked: 0,
            steering,
            steered: Vec::new(),
        })
    }

    /// Asks the XDP program for the frames of `ip` (one of the stack's addresses).
    pub(crate) fn steer(&mut self, ip: Ipv4Addr) -> io::Result<()> {
        if self.steered.contains(&ip) {
            return Ok(());
        }
        lock_steering(&self.steering)
            .addrs
            .insert(u32::from_ne_bytes(ip.octets()), 1, 0)
            .map_err(|e| io::Error::other(format!("XDP address map: {}", chain(&e))))?;
        self.steered.push(ip);
        Ok(())
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The interface's MTU (as the socket was bound).
    pub(crate) fn iface_mtu(&self) -> Option<usize> {
        self.iface_mtu
    }

    /// The interface's MAC address.
    pub(crate) fn iface_mac(&self) -> Option<[u8; 6]> {
        self.iface_mac
    }

    /// The largest MTU this socket carries: jumbo frames with multi-buffer AF_XDP, one
    /// UMEM frame's worth without.
    pub(crate) fn max_mtu(&self) -> usize {
        if self.sg {
            MULTI_BUFFER_MTU
        } else {
            SINGLE_BUFFER_MTU
        }
    }

    /// One received frame into `buf` (`WouldBlock` when none waits). A frame spread over
    /// several UMEM frames (multi-buffer: every descriptor but the last carries
    /// XDP_PKT_CONTD) is put together in `buf`; one larger than `buf` is dropped.
    pub(crate) fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            if self.rx_next == self.rx_count {
                self.refill();
                // SAFETY: the descriptors are filled by the RX queue from frames of this
                // UMEM.
                self.rx_count = unsafe { self.rx_q.consume(&mut self.rx_descs) };
                self.rx_next = 0;
                if self.rx_count == 0 {
                    // The kernel puts a multi-buffer frame on the ring whole; should the rest
                    // come later all the same, `rx_have` keeps what was put together so far.
                    return Err(io::ErrorKind::WouldBlock.into());
                }
            }
            let Some(desc) = self.rx_descs.get(self.rx_next).copied() else {
                self.rx_next = self.rx_count;
                continue;
            };
            self.rx_next += 1;
            {
                // SAFETY: the kernel handed this frame over; nothing writes it until it goes
                // back on the fill queue (after this copy).
                let data = unsafe { self.umem.data(&desc) };
                let part = data.contents();
                let end = self.rx_have + part.len();
                match buf.get_mut(self.rx_have..end) {
                    Some(d) if !self.rx_overflow => d.copy_from_slice(part),
                    _ => self.rx_overflow = true,
                }
                self.rx_have = end;
            }
            self.refill.push(desc);
            if desc.options() & XDP_PKT_CONTD == 0 {
                let n = std::mem::take(&mut self.rx_have);
                if std::mem::take(&mut self.rx_overflow) {
                    tracing::debug!(iface = %self.name, len = n, "received frame too large: dropped");
                    continue;
                }
                return Ok(n);
            }
        }
    }

    /// Frames read out go back to the kernel on the fill queue.
    fn refill(&mut self) {
        if self.refill.is_empty() {
            return;
        }
        // SAFETY: these frames of this UMEM were received and copied out; nothing reads
        // them any more, and the kernel owns them again.
        if unsafe { self.fq.produce(&self.refill) } == self.refill.len() {
            self.refill.clear();
            if self.fq.needs_wakeup() {
                let _ = self.fq.wakeup(self.rx_q.fd_mut(), 0);
            }
        }
    }

    /// Queues one frame for sending (`WouldBlock` while too few TX frames are free). With
    /// multi-buffer a frame larger than a UMEM frame goes as a chain of descriptors, each
    /// but the last marked XDP_PKT_CONTD.
    pub(crate) fn send(&mut self, frame: &[u8]) -> io::Result<usize> {
        let parts = frame.len().div_ceil(FRAME_ROOM).max(1);
        if parts > 1 && (!self.sg || parts > MAX_TX_PARTS) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "frame larger than the AF_XDP socket carries",
            ));
        }
        if self.tx_free.len() < parts {
            self.reclaim();
            if self.tx_free.len() < parts {
                return Err(io::ErrorKind::WouldBlock.into());
            }
        }
        self.tx_chain.clear();
        let at = self.tx_free.len() - parts;
        self.tx_chain.extend(self.tx_free.drain(at..));
        let mut written = true;
        for (i, (desc, chunk)) in self
            .tx_chain
            .iter_mut()
            .zip(frame.chunks(FRAME_ROOM).chain(std::iter::once(&[][..])))
            .enumerate()
        {
            {
                // SAFETY: a free TX frame of this UMEM: the kernel has completed it (or never
                // had it), so nothing else reads or writes it.
                let mut data = unsafe { self.umem.data_mut(desc) };
                let mut cur = data.cursor();
                cur.set_pos(0);
                written &= chunk.len() <= cur.buf_len() && cur.write_all(chunk).is_ok();
            }
            desc.set_options(if i + 1 < parts { XDP_PKT_CONTD } else { 0 });
        }
        // SAFETY: the frames were written above and belong to the kernel until they come
        // back on the completion queue. The chain goes on the ring whole or not at all.
        if !written || unsafe { self.tx_q.produce(&self.tx_chain) } == 0 {
            self.tx_free.append(&mut self.tx_chain);
            return Err(if written {
                io::ErrorKind::WouldBlock.into()
            } else {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "frame larger than a UMEM frame",
                )
            });
        }
        self.unkicked += parts;
        if self.unkicked >= TX_BATCH {
            self.kick()?;
        }
        Ok(frame.len())
    }

    /// Whether a frame of `len` bytes can go out now written in place
    /// ([`XdpLink::send_in_place`]): it fits one UMEM frame, one is free and the TX ring has
    /// room.
    pub(crate) fn tx_room(&mut self, len: usize) -> bool {
        if len > FRAME_ROOM {
            return false;
        }
        if self.tx_free.is_empty() {
            self.reclaim();
        }
        !self.tx_free.is_empty() && self.tx_q.nb_free(1) >= 1
    }

    /// Sends a frame of `len` bytes that `f` writes straight into a UMEM frame (one copy
    /// fewer than [`XdpLink::send`]); [`XdpLink::tx_room`] said there is room. The flag is
    /// `false` if the frame could not be queued after all (it is then lost, as on a wire).
    pub(crate) fn send_in_place<R>(
        &mut self,
        len: usize,
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> (R, bool) {
        let Some(mut desc) = self.tx_free.pop() else {
            let mut scratch = vec![0; len];
            return (f(&mut scratch), false);
        };
        let r = {
            // SAFETY: a free TX frame of this UMEM: the kernel has completed it (or never
            // had it), so nothing else reads or writes it.
            let mut data = unsafe { self.umem.data_mut(&mut desc) };
            data.cursor().set_pos(len);
            let frame = data.contents_mut();
            if frame.len() == len {
                f(frame)
            } else {
                let mut scratch = vec![0; len];
                let r = f(&mut scratch);
                self.tx_free.push(desc);
                return (r, false);
            }
        };
        desc.set_options(0);
        // SAFETY: the frame was written above and belongs to the kernel until it comes back
        // on the completion queue.
        if unsafe { self.tx_q.produce_one(&desc) } == 0 {
            self.tx_free.push(desc);
            return (r, false);
        }
        self.unkicked += 1;
        if self.unkicked >= TX_BATCH {
            let _ = self.kick();
        }
        (r, true)
    }

    /// Asks the kernel to send what the TX ring holds, and gives the fill queue the
    /// frames read out.
    pub(crate) fn kick(&mut self) -> io::Result<()> {
        self.refill();
        if self.unkicked == 0 {
            return Ok(());
        }
        self.unkicked = 0;
        if self.tx_q.needs_wakeup() {
            self.tx_q.wakeup()?;
        }
        Ok(())
    }

    /// TX frames the kernel has sent become free again.
    fn reclaim(&mut self) {
        // SAFETY: the completion queue returns frames of this UMEM that the kernel has
        // finished sending.
        let n = unsafe { self.cq.consume(&mut self.done) };
        self.tx_free
            .extend(self.done.get(..n).unwrap_or_default().iter().copied());
    }
}

/// An interface request (`SIOCGIF*`) about `name`, answered by the kernel of the calling
/// thread's network namespace. (sysfs shows the namespace it was mounted in, which is not
/// the one of a thread that entered another namespace with setns.)
fn iface_ioctl(name: &str, request: libc::c_ulong) -> Option<libc::ifreq> {
    let sock = std::net::UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).ok()?;
    // SAFETY: ifreq is plain data (a name array and a union of integers, addresses and a
    // pointer), for which all zero bytes are a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    if name.len() >= req.ifr_name.len() {
        return None;
    }
    for (d, s) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    // SAFETY: `req` is a valid, NUL-terminated ifreq that the kernel fills for these
    // requests; the socket is open for the duration of the call.
    let r = unsafe { libc::ioctl(sock.as_raw_fd(), request as _, &mut req) };
    (r == 0).then_some(req)
}

impl AsRawFd for XdpLink {
    fn as_raw_fd(&self) -> RawFd {
        self.fd
    }
}
