//! The target side of a remote-invalidation exchange with another RNIC (Linux siw in the
//! interop lab, `tests/interop/scenarios/siw-send-invalidate`).
//!
//! ```text
//! cargo run --release -p softrnic-verbs --example invalidate_peer -- \
//!     --listen 10.99.0.1:7180 [--cases window2,fastreg,window1,region] [--timeout SECS]
//! ```
//!
//! Per case it accepts one connection (MPA responder), exposes one STag and advertises it to
//! the peer, which answers with a Send with Invalidate naming that STag (RFC 5040 §5.3):
//!
//! - `window2`: a Type 2 memory window bound by a Bind work request of the connection's QP
//!   over 2000 bytes in the middle of an 8 KiB region (VA-based, remote write);
//! - `fastreg`: a fast-register STag given 4 KiB in the middle of a 12 KiB buffer by a Fast
//!   Register work request (VA-based, remote write);
//! - `window1`: a Type 1 window bound by the verb — it cannot be invalidated;
//! - `region`: a memory region registered as not invalidatable.
//!
//! For the first two the Send's receive completion must name the STag as invalidated, the
//! STag must be invalid here (a local use of the fast-registered STag is refused), and after
//! a go-ahead the peer's RDMA Write to it must draw the DDP Tagged Buffer Terminate "Invalid
//! STag" (RFC 5041 §7.2) and place nothing. For the last two the Send with Invalidate itself
//! must draw the RDMAP Remote Protection Terminate "STag cannot be Invalidated" (RFC 5040
//! §7.2), and the STag stays valid. In every case the whole buffer behind the STag must keep
//! the pattern it was filled with.
//!
//! The application messages (all integers big endian), each a Send on the connection:
//!
//! ```text
//! peer -> here  HELO  "HELO" u32 0                       (the initiator's first FPDU)
//! here -> peer  ADVT  "ADVT" u32 case u32 stag u32 len u64 to u32 expect
//!               (case 1 window2, 2 fastreg, 3 window1, 4 region; expect 1: the STag can be
//!               invalidated, 0: the Send with Invalidate must draw a Terminate)
//! peer -> here  Send with Invalidate of stag, payload "SINV" u32 stag
//! here -> peer  GOWR  "GOWR" u32 0   (expect 1 only: invalidated here, now Write len bytes)
//! ```
//!
//! Output: one `VERDICT <case> <check> PASS|FAIL <detail>` line per check, then
//! `SUMMARY <passed> passed, <failed> failed`. Exit status 0 when every check passed, 1 when
//! one failed, 2 for bad arguments or when the RNIC cannot listen.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use stack::ddp::{DdpCode, TaggedCode};
use stack::rdmap::{ProtectionCode, TermCause};
use stack::{MrOptions, Sge};
use verbs::{
    Access, Addressing, Event, FastRegRegion, Listener, MemoryRegion, MpaConfig, MwType, Pd,
    QpCaps, RecvWr, RegisteredBuf, Rnic, RnicConfig, SendOp, SendWr, Wc, WcOpcode, WcStatus,
    empty_wc, rnic_open,
};

/// Length of every application message.
const MSG: usize = 32;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Case {
    Window2,
    FastReg,
    Window1,
    Region,
}

impl Case {
    fn parse(s: &str) -> Option<Case> {
        Some(match s {
            "window2" => Case::Window2,
            "fastreg" => Case::FastReg,
            "window1" => Case::Window1,
            "region" => Case::Region,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Case::Window2 => "window2",
            Case::FastReg => "fastreg",
            Case::Window1 => "window1",
            Case::Region => "region",
        }
    }

    fn id(self) -> u32 {
        match self {
            Case::Window2 => 1,
            Case::FastReg => 2,
            Case::Window1 => 3,
            Case::Region => 4,
        }
    }

    /// Whether a peer's Send with Invalidate may invalidate the case's STag.
    fn invalidatable(self) -> bool {
        matches!(self, Case::Window2 | Case::FastReg)
    }
}

struct Args {
    listen: SocketAddr,
    cases: Vec<Case>,
    timeout: Duration,
}

fn parse_args() -> Result<Args, String> {
    let mut listen = None;
    let mut cases = vec![Case::Window2, Case::FastReg, Case::Window1, Case::Region];
    let mut timeout = Duration::from_secs(60);
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut val = || it.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--listen" => {
                let v = val()?;
                listen = Some(v.parse().map_err(|e| format!("--listen {v}: {e}"))?);
            }
            "--cases" => {
                let v = val()?;
                cases = v
                    .split(',')
                    .map(|c| Case::parse(c).ok_or(format!("unknown case {c}")))
                    .collect::<Result<_, _>>()?;
            }
            "--timeout" => {
                let v = val()?;
                timeout = Duration::from_secs(
                    v.parse()
                        .map_err(|e| format!("--timeout {v}: {e} (seconds)"))?,
                );
            }
            _ => return Err(format!("unknown argument {a}")),
        }
    }
    Ok(Args {
        listen: listen.ok_or("--listen ADDR:PORT is required")?,
        cases,
        timeout,
    })
}

/// The verdict lines of a run.
#[derive(Default)]
struct Verdicts {
    passed: usize,
    failed: usize,
}

impl Verdicts {
    fn check(&mut self, case: Case, check: &str, ok: bool, detail: impl AsRef<str>) {
        if ok {
            self.passed += 1;
        } else {
            self.failed += 1;
        }
        let v = if ok { "PASS" } else { "FAIL" };
        println!("VERDICT {} {check} {v} {}", case.name(), detail.as_ref());
    }
}

/// A 4-byte tag and a u32 in a message buffer.
fn message(tag: &[u8; 4], v: u32) -> [u8; MSG] {
    let mut m = [0u8; MSG];
    m[..4].copy_from_slice(tag);
    m[4..8].copy_from_slice(&v.to_be_bytes());
    m
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// One accepted connection and its buffers.
struct Conn<'a> {
    r: &'a Rnic,
    pd: Pd,
    cq: verbs::Cq,
    qp: verbs::Qp,
    recv: MemoryRegion,
    send: MemoryRegion,
    timeout: Duration,
}

impl Conn<'_> {
    /// The next completion, or an error after the timeout.
    fn next_wc(&self) -> Result<Wc, String> {
        let mut w = [empty_wc()];
        match self.r.cq_poll_block(&self.cq, &mut w, self.timeout) {
            Ok(1) => Ok(w[0]),
            Ok(_) => Err("no completion in time".into()),
            Err(e) => Err(format!("polling the CQ: {e}")),
        }
    }

    /// The next receive completion (successful send completions in between are skipped).
    fn recv_wc(&self) -> Result<Wc, String> {
        loop {
            let wc = self.next_wc()?;
            if wc.opcode == WcOpcode::Recv {
                return Ok(wc);
            }
            if wc.status != WcStatus::Success {
                return Err(format!("work request {} failed: {:?}", wc.wr_id, wc.status));
            }
        }
    }

    /// Posts a receive into slot `slot` of the receive buffer.
    fn post_recv(&self, slot: u64) -> Result<(), String> {
        self.r
            .qp_post_rq(
                &self.qp,
                RecvWr::new(slot, vec![self.recv.sge(slot * MSG as u64, MSG as u32)]),
            )
            .map_err(|e| format!("post receive: {e}"))
    }

    fn received(&self, slot: u64) -> Vec<u8> {
        let off = slot as usize * MSG;
        self.recv
            .buf()
            .read_range(off..off + MSG)
            .unwrap_or_default()
    }

    /// Sends `m` from slot `slot` of the send buffer and waits for its completion.
    fn send(&self, slot: u64, m: &[u8]) -> Result<(), String> {
        let off = slot * MSG as u64;
        self.send
            .buf()
            .write_at(off as usize, m)
            .map_err(|e| e.to_string())?;
        let id = 100 + slot;
        self.r
            .qp_post_sq(
                &self.qp,
                SendWr::send(id, vec![self.send.sge(off, m.len() as u32)]),
            )
            .map_err(|e| format!("post send: {e}"))?;
        let wc = self.next_wc()?;
        if wc.wr_id != id || wc.status != WcStatus::Success {
            return Err(format!(
                "send {id}: completion {} {:?}",
                wc.wr_id, wc.status
            ));
        }
        Ok(())
    }

    /// Waits for the Terminate this QP sends (only this QP's events are taken: a connection
    /// request for the next case stays queued).
    fn terminate_sent(&self) -> Option<TermCause> {
        let end = Instant::now() + self.timeout;
        while Instant::now() < end {
            match self.r.as_stack().poll_event_for(self.qp.id()) {
                Some(Event::TerminateSent { terminate, .. }) => return Some(terminate.cause),
                Some(_) => {}
                None => std::thread::sleep(Duration::from_millis(5)),
            }
        }
        None
    }
}

/// The STag a case exposes and what stands behind it.
struct Exposed {
    stag: u32,
    len: u32,
    to: u64,
    /// The whole buffer behind the STag (more than the STag covers) and its contents.
    buf: Arc<RegisteredBuf>,
    before: Vec<u8>,
}

fn expose(c: &Conn<'_>, case: Case) -> Result<Exposed, String> {
    let mem = c.r.as_stack().mem();
    let e = |e: &dyn std::fmt::Display| format!("{}: {e}", case.name());
    match case {
        Case::Window2 | Case::Window1 => {
            let rights =
                Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE | Access::MW_BIND;
            let region = c.r.nsmr_register(c.pd, 8192, rights).map_err(|x| e(&x))?;
            let before = pattern(8192, case.id() as u8);
            region.buf().write_at(0, &before).map_err(|x| e(&x))?;
            let (to, len) = (region.to_at(1000), 2000u32);
            let ty = if case == Case::Window2 {
                MwType::Type2
            } else {
                MwType::Type1
            };
            let mw = c.r.allocate_window(c.pd, ty).map_err(|x| e(&x))?;
            let stag = if case == Case::Window2 {
                c.r.qp_post_sq(
                    &c.qp,
                    SendWr::new(
                        1,
                        SendOp::BindWindow {
                            mw,
                            region: region.stag(),
                            to,
                            len: u64::from(len),
                            access: Access::REMOTE_WRITE | Access::REMOTE_READ,
                            zero_based: false,
                        },
                        vec![],
                    ),
                )
                .map_err(|x| e(&x))?;
                let wc = c.next_wc()?;
                if (wc.opcode, wc.status) != (WcOpcode::BindWindow, WcStatus::Success) {
                    return Err(format!(
                        "bind work request: {:?} {:?}",
                        wc.opcode, wc.status
                    ));
                }
                mw
            } else {
                c.r.bind_window(
                    c.pd,
                    mw,
                    &region,
                    to,
                    u64::from(len),
                    Access::REMOTE_WRITE | Access::REMOTE_READ,
                    Addressing::VirtualAddress,
                )
                .map_err(|x| e(&x))?;
                mw
            };
            Ok(Exposed {
                stag,
                len,
                to,
                buf: region.buf().clone(),
                before,
            })
        }
        Case::FastReg => {
            let buf = RegisteredBuf::try_new(3 * 4096).map_err(|x| e(&x))?;
            let before = pattern(buf.len(), 2);
            buf.write_at(0, &before).map_err(|x| e(&x))?;
            let stag = c.r.allocate_stag(c.pd, 4096).map_err(|x| e(&x))?;
            let region = FastRegRegion::new(&buf).range(4096..8192);
            let to = region.to_at(0);
            c.r.fast_reg_map(c.pd, stag, region).map_err(|x| e(&x))?;
            c.r.qp_post_sq(
                &c.qp,
                SendWr::new(
                    2,
                    SendOp::FastRegister {
                        stag,
                        access: Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ,
                    },
                    vec![],
                ),
            )
            .map_err(|x| e(&x))?;
            let wc = c.next_wc()?;
            if (wc.opcode, wc.status) != (WcOpcode::FastRegister, WcStatus::Success) {
                return Err(format!(
                    "fast register work request: {:?} {:?}",
                    wc.opcode, wc.status
                ));
            }
            if !mem.query(stag).is_some_and(|i| i.valid) {
                return Err("the fast-registered STag is not valid".into());
            }
            Ok(Exposed {
                stag,
                len: 4096,
                to,
                buf,
                before,
            })
        }
        Case::Region => {
            let buf = RegisteredBuf::try_new(4096).map_err(|x| e(&x))?;
            let before = pattern(4096, 4);
            buf.write_at(0, &before).map_err(|x| e(&x))?;
            let opts = MrOptions::new(Access::LOCAL_WRITE | Access::REMOTE_WRITE)
                .range(1024..3072)
                .not_invalidatable();
            let mr = mem.register(c.pd, &buf, opts).map_err(|x| e(&x))?;
            Ok(Exposed {
                stag: mr.stag(),
                len: 2048,
                to: mr.to_at(0),
                buf,
                before,
            })
        }
    }
}

fn accept<'a>(r: &'a Rnic, l: &Listener, timeout: Duration) -> Result<Conn<'a>, String> {
    let pd = r.pd_allocate();
    let cq = r.cq_create(64).map_err(|e| e.to_string())?;
    let qp = r
        .qp_create(pd, &cq, &cq, QpCaps::default())
        .map_err(|e| e.to_string())?;
    let rights = Access::LOCAL_WRITE;
    let recv = r
        .nsmr_register(pd, 4 * MSG, rights)
        .map_err(|e| e.to_string())?;
    let send = r
        .nsmr_register(pd, 4 * MSG, Access::NONE)
        .map_err(|e| e.to_string())?;
    let c = Conn {
        r,
        pd,
        cq,
        qp,
        recv,
        send,
        timeout,
    };
    // HELO and the Send with Invalidate.
    c.post_recv(0)?;
    c.post_recv(1)?;
    let (_, req) = r
        .qp_passive_connect(l, &c.qp, MpaConfig::default(), timeout)
        .map_err(|e| format!("no connection: {e}"))?;
    println!(
        "connection from {} (MPA private data {} octets)",
        req.peer,
        req.private_data().len()
    );
    Ok(c)
}

fn run_case(r: &Rnic, l: &Listener, case: Case, t: Duration, v: &mut Verdicts) {
    let c = match accept(r, l, t) {
        Ok(c) => c,
        Err(e) => return v.check(case, "connect", false, e),
    };
    if let Err(e) = exchange(&c, case, v) {
        v.check(case, "exchange", false, e);
    }
    let _ = r.qp_destroy(&c.qp);
}

fn exchange(c: &Conn<'_>, case: Case, v: &mut Verdicts) -> Result<(), String> {
    let mem = c.r.as_stack().mem();
    let hello = c.recv_wc()?;
    if hello.status != WcStatus::Success || c.received(0)[..4] != *b"HELO" {
        return Err(format!("no HELO from the peer ({:?})", hello.status));
    }
    let x = expose(c, case)?;
    let mut adv = message(b"ADVT", case.id());
    adv[8..12].copy_from_slice(&x.stag.to_be_bytes());
    adv[12..16].copy_from_slice(&x.len.to_be_bytes());
    adv[16..24].copy_from_slice(&x.to.to_be_bytes());
    adv[24..28].copy_from_slice(&u32::from(case.invalidatable()).to_be_bytes());
    c.send(0, &adv)?;
    println!(
        "{}: advertised STag {:#010x} TO {:#x} length {}",
        case.name(),
        x.stag,
        x.to,
        x.len
    );
    let untouched = |v: &mut Verdicts| {
        let now = x.buf.to_vec();
        let diff = now.iter().zip(&x.before).filter(|(a, b)| a != b).count();
        v.check(
            case,
            "memory-untouched",
            diff == 0,
            format!("{diff} of {} bytes behind the STag changed", now.len()),
        );
    };
    if case.invalidatable() {
        // RFC 5040 §5.3: the Send with Invalidate completes a receive that names the STag
        // it invalidated, which is then invalid.
        let wc = c.recv_wc()?;
        let payload = c.received(1);
        let ok = wc.status == WcStatus::Success
            && wc.invalidated_stag == Some(x.stag)
            && payload[..8] == message(b"SINV", x.stag)[..8];
        v.check(
            case,
            "rfc5040-5.3-recv-completion-invalidated-stag",
            ok,
            format!(
                "receive {:?}, invalidated STag {}, payload {:02x?}",
                wc.status,
                wc.invalidated_stag
                    .map_or("none".into(), |s| format!("{s:#010x}")),
                &payload[..8]
            ),
        );
        let valid = mem.query(x.stag).map(|i| i.valid);
        v.check(
            case,
            "stag-invalid",
            valid == Some(false),
            format!("STag {:#010x} valid: {valid:?}", x.stag),
        );
        if case == Case::FastReg {
            let local = mem.resolve_local(
                c.pd,
                &Sge {
                    stag: x.stag,
                    to: x.to,
                    len: 16,
                },
                Access::NONE,
            );
            v.check(
                case,
                "local-use-refused",
                local.is_err(),
                match local {
                    Err(e) => format!("a local SGE of the STag: {e}"),
                    Ok(_) => "a local SGE of the invalidated STag resolved".into(),
                },
            );
        }
        c.send(1, &message(b"GOWR", 0))?;
        // RFC 5041 §7.2: a tagged segment naming an invalid STag.
        let want = TermCause::Ddp(DdpCode::Tagged(TaggedCode::InvalidStag));
        let got = c.terminate_sent();
        v.check(
            case,
            "rfc5041-7.2-write-to-invalidated-stag-terminate",
            got == Some(want),
            format!(
                "Terminate sent: {}",
                got.map_or("none".into(), |g| g.to_string())
            ),
        );
        untouched(v);
    } else {
        // RFC 5040 §7.2: "STag cannot be Invalidated".
        let want = TermCause::protection(ProtectionCode::CannotInvalidate);
        let got = c.terminate_sent();
        v.check(
            case,
            "rfc5040-7.2-send-with-invalidate-cannot-invalidate",
            got == Some(want),
            format!(
                "Terminate sent: {}",
                got.map_or("none".into(), |g| g.to_string())
            ),
        );
        let valid = mem.query(x.stag).map(|i| i.valid);
        v.check(
            case,
            "stag-still-valid",
            valid == Some(true),
            format!("STag {:#010x} valid: {valid:?}", x.stag),
        );
        // Whatever the receive became, it names no invalidated STag.
        let mut w = [empty_wc(); 4];
        let n = c.r.cq_poll(&c.cq, &mut w);
        let bad = w[..n].iter().any(|w| w.invalidated_stag.is_some());
        v.check(
            case,
            "no-invalidation-reported",
            !bad,
            format!("{n} completions after the Terminate"),
        );
        untouched(v);
    }
    Ok(())
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("invalidate_peer: {e}");
            return ExitCode::from(2);
        }
    };
    let r = match rnic_open(RnicConfig::default()) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("invalidate_peer: cannot open the RNIC: {e}");
            return ExitCode::from(2);
        }
    };
    let l = match r.listen(args.listen) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("invalidate_peer: cannot listen on {}: {e}", args.listen);
            return ExitCode::from(2);
        }
    };
    println!("listening on {}", l.local_addr);
    let mut v = Verdicts::default();
    for &case in &args.cases {
        run_case(&r, &l, case, args.timeout, &mut v);
    }
    println!("SUMMARY {} passed, {} failed", v.passed, v.failed);
    if v.failed == 0 && v.passed > 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
