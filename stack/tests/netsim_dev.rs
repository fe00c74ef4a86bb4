//! softrnic's device TCP/IP — the stack the runtime runs on TAP and AF_XDP devices
//! (`stack::device`), not netsim's own smoltcp host — inside the deterministic network
//! simulator: each netsim node is a [`FrameDevice`] carrying a `QpEngine`'s MPA stream (RFC
//! 5044) over one of the stack's TCP connections, in virtual time, over clean, lossy and
//! jumbo-frame links. The same seed gives the same run, frame for frame.

mod common;

use std::cell::RefCell;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::rc::Rc;
use std::time::Duration;

use common::{Side, pattern};
use netsim::{Dir, Instant, LinkCounters, LinkParams, Node, Sim};
use smoltcp::iface::SocketHandle;
use stack::device::{DeviceConfig, FrameDevice};
use stack::mpa::{self, CrcPolicy};
use stack::{CloseReason, QpState, RecvWr, SendWr, Setup, WcStatus};

const SERVER: Ipv4Addr = Ipv4Addr::new(10, 9, 0, 2);
const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 9, 0, 1);
const PORT: u16 = 7174;

/// A host: the device stack, one TCP connection, and the engine on it.
struct DevHost {
    dev: FrameDevice,
    side: Rc<RefCell<Side>>,
    sock: SocketHandle,
    closed: bool,
    last: Instant,
}

impl DevHost {
    fn new(addr: Ipv4Addr, mtu: usize, seed: u64, side: Rc<RefCell<Side>>) -> DevHost {
        let mut cfg = DeviceConfig::new(addr, 24);
        cfg.mtu = Some(mtu);
        let mut dev = FrameDevice::new("sim0", &cfg, seed);
        let sock = if addr == SERVER {
            dev.listen(PORT).expect("listen")
        } else {
            dev.connect(SocketAddrV4::new(SERVER, PORT), None)
                .expect("connect")
        };
        DevHost {
            dev,
            side,
            sock,
            closed: false,
            last: Instant::ZERO,
        }
    }

    /// Runs the stack, moves bytes between the socket and the engine, runs it again.
    fn step(&mut self, now: Instant) {
        self.last = now;
        self.dev.poll(now);
        {
            let mut side = self.side.borrow_mut();
            let s = self.dev.socket(self.sock);
            while s.can_recv() {
                let got = s.recv(|d| {
                    side.eng.handle_stream(now, d);
                    (d.len(), d.len())
                });
                if !matches!(got, Ok(n) if n > 0) {
                    break;
                }
            }
            while s.can_send() {
                let Some(bytes) = side.eng.poll_transmit() else {
                    break;
                };
                match s.send_slice(bytes) {
                    Ok(n) if n > 0 => side.eng.transmit_done(n),
                    _ => break,
                }
            }
            if side.eng.should_close_transport() && !self.closed {
                s.close();
                self.closed = true;
                side.eng.handle_closed(now, CloseReason::Local);
            }
        }
        self.dev.poll(now);
    }
}

impl Node for DevHost {
    fn interface_count(&self) -> usize {
        1
    }

    fn handle_frame(&mut self, now: Instant, _iface: usize, frame: Vec<u8>) {
        self.dev.receive(frame);
        self.step(now);
    }

    fn poll_transmit(&mut self, _now: Instant) -> Option<(usize, Vec<u8>)> {
        self.dev.transmit().map(|f| (0, f))
    }

    fn poll_timeout(&mut self) -> Option<Instant> {
        let dev = self.dev.poll_at(self.last);
        let eng = self.side.borrow().eng.poll_timeout();
        [dev, eng].into_iter().flatten().min()
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.side.borrow_mut().eng.handle_timeout(now);
        self.step(now);
    }
}

/// What a run did: when it finished and what crossed the link each way.
#[derive(Debug, PartialEq)]
struct Outcome {
    done_at: Instant,
    ab: LinkCounters,
    ba: LinkCounters,
}

/// MPA rev 2 with CRC between two device stacks over `params`; a 1 MiB RDMA Write, a
/// Send and a 256 KiB RDMA Read, every byte checked.
fn transfer(seed: u64, params: LinkParams, mtu: usize) -> Outcome {
    let cfg = mpa::Config {
        crc: CrcPolicy::Require,
        ..mpa::Config::default()
    };
    let a = Rc::new(RefCell::new(Side::new(
        1,
        Setup::Initiator(cfg.clone()),
        |c| {
            c.emss = (mtu - 40) as u32;
        },
    )));
    let b = Rc::new(RefCell::new(Side::new(2, Setup::Responder(cfg), |c| {
        c.emss = (mtu - 40) as u32;
    })));
    const W: usize = 1 << 20;
    const R: usize = 256 << 10;
    let write_data = pattern(W, 3);
    let read_data = pattern(R, 4);
    let (src, sink, dst, rbuf, rsrc) = {
        let (a, b) = (a.borrow(), b.borrow());
        (a.mr(W), a.mr(R), b.mr(W), b.mr(64), b.mr(R))
    };
    src.buf().write_at(0, &write_data).unwrap();
    rsrc.buf().write_at(0, &read_data).unwrap();
    b.borrow_mut()
        .eng
        .post_recv(RecvWr::new(1, vec![rbuf.sge(0, 64)]))
        .unwrap();
    {
        let eng = &mut a.borrow_mut().eng;
        eng.post_send(SendWr::write(
            1,
            vec![src.sge(0, W as u32)],
            dst.stag(),
            dst.to_at(0),
        ))
        .unwrap();
        eng.post_send(SendWr::send(2, vec![src.sge(0, 64)]))
            .unwrap();
        eng.post_send(SendWr::read(
            3,
            vec![sink.sge(0, R as u32)],
            rsrc.stag(),
            rsrc.to_at(0),
        ))
        .unwrap();
    }
    let mut sim = Sim::new(seed);
    let srv = sim.add_node(DevHost::new(SERVER, mtu, sim.derive_seed(2), b.clone()));
    let cli = sim.add_node(DevHost::new(CLIENT, mtu, sim.derive_seed(1), a.clone()));
    let link = sim
        .link(cli.iface(0), srv.iface(0), params.mtu(mtu))
        .expect("link");
    let scq = a.borrow().scq.clone();
    let done = sim.run_until_condition(Instant::from_secs(300), |_| scq.len() == 3);
    assert!(
        done,
        "seed {seed}: the operations did not finish in virtual time"
    );
    let wcs = scq.drain();
    assert_eq!(
        wcs.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        [
            (1, WcStatus::Success),
            (2, WcStatus::Success),
            (3, WcStatus::Success)
        ],
        "seed {seed}"
    );
    assert!(
        dst.buf().to_vec() == write_data,
        "seed {seed}: RDMA Write data"
    );
    assert!(
        sink.buf().to_vec() == read_data,
        "seed {seed}: RDMA Read data"
    );
    let r = b.borrow().rcq.drain();
    assert_eq!(
        (r[0].wr_id, r[0].status, r[0].byte_len),
        (1, WcStatus::Success, 64)
    );
    assert_eq!(b.borrow().eng.state(), QpState::Rts);
    Outcome {
        done_at: sim.now(),
        ab: sim.link_counters(link, Dir::AtoB),
        ba: sim.link_counters(link, Dir::BtoA),
    }
}

/// A clean 1 Gbit/s link with 100 us delay: everything arrives, nothing is retransmitted.
#[test]
fn device_stack_carries_mpa_in_virtual_time() {
    let o = transfer(
        1,
        LinkParams::default().delay(Duration::from_micros(100)),
        1500,
    );
    assert_eq!(o.ab.dropped_total() + o.ba.dropped_total(), 0, "{o:?}");
    assert!(
        o.ab.delivered_bytes > 1 << 20 && o.ba.delivered_bytes > 256 << 10,
        "{o:?}"
    );
    // Ethernet-sized frames: nothing larger than the MTU plus the Ethernet header.
    assert_eq!(o.ab.dropped_mtu + o.ba.dropped_mtu, 0);
}

/// Links that lose 1 % of frames, over several seeds: the device stack's TCP recovers and
/// every byte arrives where it belongs (loss does happen in each run).
#[test]
fn device_stack_recovers_from_loss() {
    for seed in 1..=4 {
        let o = transfer(
            seed,
            LinkParams::default()
                .delay(Duration::from_millis(1))
                .loss(0.01),
            1500,
        );
        assert!(
            o.ab.dropped_loss + o.ba.dropped_loss > 0,
            "seed {seed}: {o:?}"
        );
    }
}

/// Jumbo frames (MTU 9000) end to end: the device stack sends segments larger than an
/// Ethernet MTU and fewer frames than at 1500.
#[test]
fn device_stack_uses_jumbo_frames() {
    let p = LinkParams::default().delay(Duration::from_micros(100));
    let jumbo = transfer(5, p.clone(), 9000);
    let small = transfer(5, p, 1500);
    assert!(jumbo.ab.sent * 3 < small.ab.sent, "{jumbo:?} vs {small:?}");
    assert!(jumbo.ab.sent_bytes / jumbo.ab.sent > 1514, "{jumbo:?}");
}

/// The same seed gives the same run: the device stack's randomness (initial sequence
/// numbers, ports) comes from the simulation's seed.
#[test]
fn device_stack_runs_are_deterministic() {
    let p = || {
        LinkParams::default()
            .delay(Duration::from_millis(1))
            .loss(0.02)
    };
    let (x, y) = (transfer(9, p(), 1500), transfer(9, p(), 1500));
    assert!(x.ab.dropped_loss > 0, "{x:?}");
    assert_eq!(x, y);
}
