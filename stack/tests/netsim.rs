//! The same engine, unchanged, inside the deterministic network simulator: each host runs a
//! `netsim::tcp::TcpApp` that shuttles bytes between its smoltcp socket and a `QpEngine`
//! (MPA setup included), over a lossy link.

use std::cell::RefCell;
use std::net::SocketAddrV4;
use std::rc::Rc;
use std::time::Duration;

use netsim::tcp::smoltcp::iface::SocketHandle;
use netsim::tcp::{TcpCtx, TcpHost, TcpHostConfig};
use netsim::{Instant, LinkParams, Sim};
use stack::mpa::{self, CrcPolicy};
use stack::{
    Access, CloseReason, Cq, MemTable, MemoryRegion, MrOptions, QpConfig, QpEngine, QpId, QpState,
    RecvWr, SendWr, Setup, WcStatus,
};

struct Host {
    eng: Rc<RefCell<QpEngine>>,
    mem: std::sync::Arc<MemTable>,
    pd: stack::Pd,
    scq: Cq,
    rcq: Cq,
}

fn host(id: u32, setup: Setup) -> Host {
    let mem = MemTable::new();
    let pd = mem.alloc_pd();
    let scq = Cq::new(64);
    let rcq = Cq::new(64);
    let cfg = QpConfig::new(QpId(id), pd, scq.clone(), rcq.clone());
    let eng = QpEngine::new(cfg, mem.clone(), setup, Duration::ZERO).expect("engine");
    Host {
        eng: Rc::new(RefCell::new(eng)),
        mem,
        pd,
        scq,
        rcq,
    }
}

impl Host {
    fn mr(&self, len: usize) -> MemoryRegion {
        let a = Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE;
        self.mem
            .register_new(self.pd, len, MrOptions::new(a))
            .expect("register")
    }
}

/// The driver loop a `TcpApp` runs on every poll.
fn drive(eng: &RefCell<QpEngine>, cx: &mut TcpCtx<'_>, h: SocketHandle, closed: &mut bool) {
    let now = cx.now().since_start();
    let s = cx.socket(h);
    let mut e = eng.borrow_mut();
    while s.can_recv() {
        let got = s.recv(|d| {
            e.handle_stream(now, d);
            (d.len(), d.len())
        });
        if !matches!(got, Ok(n) if n > 0) {
            break;
        }
    }
    while s.can_send() {
        let Some(bytes) = e.poll_transmit() else {
            break;
        };
        match s.send_slice(bytes) {
            Ok(n) if n > 0 => e.transmit_done(n),
            _ => break,
        }
    }
    if e.should_close_transport() && !*closed {
        s.close();
        *closed = true;
        e.handle_closed(now, CloseReason::Local);
    }
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(13).wrapping_add(seed) ^ ((i >> 9) as u8))
        .collect()
}

/// MPA rev 2 setup with CRC and markers both ways, then a 300 KB RDMA Write, a Send and a
/// 100 KB RDMA Read, over a 1 ms link losing 2% of frames: all data arrives intact.
#[test]
fn engine_over_smoltcp_with_loss() {
    let cfg = mpa::Config {
        crc: CrcPolicy::Require,
        markers_rx: true,
        markers_tx: true,
        ..mpa::Config::default()
    };
    let a = host(1, Setup::Initiator(cfg.clone()));
    let b = host(2, Setup::Responder(cfg));

    let write_data = pattern(300_000, 1);
    let a_src = a.mr(300_000);
    a_src.buf().write_at(0, &write_data).expect("fits");
    let b_dst = b.mr(300_000);
    let b_recv = b.mr(64);
    let read_data = pattern(100_000, 2);
    let b_src = b.mr(100_000);
    b_src.buf().write_at(0, &read_data).expect("fits");
    let a_sink = a.mr(100_000);
    {
        let mut be = b.eng.borrow_mut();
        be.post_recv(RecvWr::new(1, vec![b_recv.sge(0, 64)]))
            .expect("post");
        let mut ae = a.eng.borrow_mut();
        ae.post_send(SendWr::write(
            1,
            vec![a_src.sge(0, 300_000)],
            b_dst.stag(),
            b_dst.to_at(0),
        ))
        .expect("post");
        ae.post_send(SendWr::send(2, vec![a_src.sge(0, 64)]))
            .expect("post");
        ae.post_send(SendWr::read(
            3,
            vec![a_sink.sge(0, 100_000)],
            b_src.stag(),
            b_src.to_at(0),
        ))
        .expect("post");
    }

    let mut sim = Sim::new(7);
    let server_cfg = TcpHostConfig::numbered(2);
    let server_addr = SocketAddrV4::new(server_cfg.addr, 5000);

    let eng_b = b.eng.clone();
    let mut listener = None;
    let mut b_closed = false;
    let server = move |cx: &mut TcpCtx<'_>| {
        let h = *listener.get_or_insert_with(|| {
            let h = cx.new_socket();
            cx.listen(h, 5000).expect("listen");
            h
        });
        drive(&eng_b, cx, h, &mut b_closed);
    };
    let eng_a = a.eng.clone();
    let mut conn = None;
    let mut a_closed = false;
    let client = move |cx: &mut TcpCtx<'_>| {
        let h = *conn.get_or_insert_with(|| {
            let h = cx.new_socket();
            cx.connect(h, server_addr, 40000).expect("connect");
            h
        });
        drive(&eng_a, cx, h, &mut a_closed);
    };
    let srv = sim.add_node(TcpHost::new(server_cfg, server));
    let cli = sim.add_node(TcpHost::new(TcpHostConfig::numbered(1), client));
    let params = LinkParams::default()
        .delay(Duration::from_millis(1))
        .loss(0.02);
    let link = sim.link(cli.iface(0), srv.iface(0), params).expect("link");

    let done = sim.run_until_condition(Instant::from_secs(120), |_| a.scq.len() == 3);
    assert!(done, "operations did not finish in virtual time");
    let wcs = a.scq.drain();
    assert_eq!(
        wcs.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        [
            (1, WcStatus::Success),
            (2, WcStatus::Success),
            (3, WcStatus::Success)
        ]
    );
    assert!(b_dst.buf().to_vec() == write_data);
    assert!(a_sink.buf().to_vec() == read_data);
    let r = b.rcq.drain();
    assert_eq!((r[0].status, r[0].byte_len), (WcStatus::Success, 64));
    assert_eq!(b.eng.borrow().state(), QpState::Rts);
    let s = b
        .eng
        .borrow()
        .session()
        .and_then(|s| s.mpa())
        .cloned()
        .expect("MPA session");
    assert!(s.crc && s.markers_tx && s.markers_rx);
    assert!(a.rcq.is_empty());
    // The run really crossed a lossy network.
    let ab = sim.link_counters(link, netsim::Dir::AtoB);
    let ba = sim.link_counters(link, netsim::Dir::BtoA);
    assert!(ab.dropped_loss + ba.dropped_loss > 0, "{ab:?} {ba:?}");
    assert!(ab.delivered_bytes > 300_000 && ba.delivered_bytes > 100_000);
    assert!(sim.now() > Instant::from_millis(2));
}
