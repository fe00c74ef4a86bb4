//! The RNIC's QP engine over DDP over SCTP (RFC 5043) in the deterministic network simulator:
//! two multihomed hosts (two interfaces, two links), lossy, reordering and duplicating links,
//! and the primary path failing mid-transfer. RDMA Writes, Sends and RDMA Reads run across;
//! every byte is verified and the QPs stay in RTS (the association moves to the other path).

mod common;

use std::cell::RefCell;
use std::net::Ipv4Addr;
use std::rc::Rc;
use std::time::Duration;

use common::{Side, pattern};
use netsim::{LinkParams, Sim};
use stack::llp::sctp::SctpConfig;
use stack::sctp::netsim_host::{App, SctpHost};
use stack::sctp::{self, AssocId, Endpoint, EndpointConfig, Event};
use stack::{QpState, RecvWr, SendWr, Setup, WcStatus};

fn ips(host: u8) -> Vec<Ipv4Addr> {
    vec![Ipv4Addr::new(10, 0, 1, host), Ipv4Addr::new(10, 0, 2, host)]
}

fn ep_config(port: u16, host: u8, seed: u64, listen: bool) -> EndpointConfig {
    let mut c = EndpointConfig::new(
        port,
        ips(host).into_iter().map(SctpHost::sock).collect(),
        seed,
    );
    c.accept_incoming = listen;
    c.association.adaptation_indication = Some(sctp::ddp_adapt::ADAPTATION_DDP);
    c
}

fn llp() -> SctpConfig {
    SctpConfig {
        ird: 16,
        ord: 16,
        private_data: Vec::new(),
        max_segment: sctp::ddp_adapt::max_ddp_segment(1500, 20),
        enhanced: true,
        stream: 0,
    }
}

/// One host's RNIC side: the QP engine and the association it runs on.
struct Rnic {
    side: Side,
    assoc: Option<AssocId>,
    events: Vec<Event>,
}

fn now_of(t: sctp::Instant) -> Duration {
    Duration::from_nanos(t.as_nanos())
}

/// Moves messages between the association and the engine, both ways.
fn drive(r: &mut Rnic, ep: &mut Endpoint, now: sctp::Instant) {
    while let Some((_, e)) = ep.poll_event() {
        r.events.push(e);
    }
    let Some(id) = r.assoc else {
        return;
    };
    let Some(a) = ep.association_mut(id) else {
        return;
    };
    while let Some(m) = a.recv() {
        r.side
            .eng
            .handle_message(now_of(now), m.ppid, m.unordered, &m.data);
    }
    if r.side.eng.poll_timeout().is_some_and(|d| d <= now_of(now)) {
        r.side.eng.handle_timeout(now_of(now));
    }
    if a.state() != sctp::State::Established {
        return;
    }
    while let Some((stream, ppid, data)) = r.side.eng.poll_message() {
        match a.send(stream, ppid, true, data) {
            Ok(()) => r.side.eng.message_done(),
            Err(sctp::SendError::BufferFull { .. }) => break,
            Err(e) => panic!("{e}"),
        }
    }
}

struct Outcome {
    a: Rc<RefCell<Rnic>>,
    b: Rc<RefCell<Rnic>>,
    sim_time: netsim::Instant,
}

/// Runs `work` (posted once both QPs are in RTS) until `done`, over two links with
/// `params`; the primary link goes down at `fail_at`.
fn run(
    seed: u64,
    params: LinkParams,
    fail_at: Option<netsim::Instant>,
    work: impl Fn(&mut Rnic, &mut Rnic) + 'static,
    done: impl Fn(&Rnic, &Rnic) -> bool,
) -> Outcome {
    let mut sim = Sim::new(seed);
    let a = Rc::new(RefCell::new(Rnic {
        side: Side::new(1, Setup::SctpInitiator(llp()), |_| {}),
        assoc: None,
        events: Vec::new(),
    }));
    let b = Rc::new(RefCell::new(Rnic {
        side: Side::new(2, Setup::SctpResponder(llp()), |_| {}),
        assoc: None,
        events: Vec::new(),
    }));
    let (ra, rb) = (a.clone(), b.clone());
    let posted = Rc::new(RefCell::new(false));
    let (pa, bb) = (posted.clone(), b.clone());
    let app_a: App = Box::new(move |ep, now| {
        let mut r = ra.borrow_mut();
        if r.assoc.is_none() {
            r.assoc = Some(
                ep.connect(now, SctpHost::sock(Ipv4Addr::new(10, 0, 1, 2)), 6000)
                    .expect("connect"),
            );
        }
        if !*pa.borrow()
            && r.side.eng.state() == QpState::Rts
            && let Ok(mut rb) = bb.try_borrow_mut()
            && rb.side.eng.state() == QpState::Rts
        {
            *pa.borrow_mut() = true;
            work(&mut r, &mut rb);
        }
        drive(&mut r, ep, now);
    });
    let app_b: App = Box::new(move |ep, now| {
        let mut r = rb.borrow_mut();
        if let Some(id) = ep.accept() {
            r.assoc = Some(id);
        }
        drive(&mut r, ep, now);
    });
    let ha = sim.add_node(SctpHost::new(
        1,
        2,
        ips(1),
        Endpoint::new(ep_config(5000, 1, seed, false)),
        app_a,
    ));
    let hb = sim.add_node(SctpHost::new(
        2,
        1,
        ips(2),
        Endpoint::new(ep_config(6000, 2, seed ^ 0x55, true)),
        app_b,
    ));
    let l1 = sim.link(ha.iface(0), hb.iface(0), params.clone()).unwrap();
    sim.link(ha.iface(1), hb.iface(1), params).unwrap();
    if let Some(t) = fail_at {
        sim.link_down_at(l1, t).unwrap();
    }
    let (ca, cb) = (a.clone(), b.clone());
    sim.run_until_condition(netsim::Instant::from_secs(300), move |_| {
        match (ca.try_borrow(), cb.try_borrow()) {
            (Ok(x), Ok(y)) => done(&x, &y),
            _ => false,
        }
    });
    Outcome {
        a,
        b,
        sim_time: sim.now(),
    }
}

/// RFC 5043 over a multihomed association (RFC 9260 §6.4, §8.2): 2 MiB of RDMA Writes, 64
/// Sends of 16 KiB and 1 MiB of RDMA Reads cross two links with 1 % loss, duplication and
/// reordering while the primary link fails for good at 300 ms. Every byte arrives in place,
/// nothing is misplaced, no Terminate is sent, and data moves to the second path.
#[test]
fn rdma_over_multihomed_sctp_survives_a_path_failure_with_every_byte() {
    const W: usize = 2 << 20;
    const S: usize = 16 << 10;
    const N: u64 = 64;
    const R: usize = 1 << 20;
    for seed in [1u64, 7, 42] {
        let wdata = Rc::new(pattern(W, 3));
        let rdata = Rc::new(pattern(R, 0x60));
        let bufs: Rc<RefCell<Vec<stack::MemoryRegion>>> = Rc::default();
        let (wd, rd, bb) = (wdata.clone(), rdata.clone(), bufs.clone());
        let params = LinkParams::default()
            .bandwidth(100_000_000)
            .delay(Duration::from_millis(2))
            .loss(0.01)
            .duplicate(0.01)
            .reorder(0.02, Duration::from_millis(3));
        let out = run(
            seed,
            params,
            Some(netsim::Instant::from_millis(300)),
            move |a, b| {
                let src = a.side.mr(W);
                src.buf().write_at(0, &wd).unwrap();
                let wdst = b.side.mr(W);
                let rsrc = b.side.mr(R);
                rsrc.buf().write_at(0, &rd).unwrap();
                let sink = a.side.mr(R);
                let rbuf = b.side.mr(S * N as usize);
                for i in 0..N {
                    let off = i * S as u64;
                    b.side
                        .eng
                        .post_recv(RecvWr::new(i, vec![rbuf.sge(off, S as u32)]))
                        .unwrap();
                }
                for k in 0..8u64 {
                    let len = (W / 8) as u32;
                    let off = k * u64::from(len);
                    a.side
                        .eng
                        .post_send(SendWr::write(
                            100 + k,
                            vec![src.sge(off, len)],
                            wdst.stag(),
                            wdst.to_at(off),
                        ))
                        .unwrap();
                }
                for i in 0..N {
                    a.side
                        .eng
                        .post_send(SendWr::send(200 + i, vec![src.sge(i * S as u64, S as u32)]))
                        .unwrap();
                }
                a.side
                    .eng
                    .post_send(SendWr::read(
                        300,
                        vec![sink.sge(0, R as u32)],
                        rsrc.stag(),
                        rsrc.to_at(0),
                    ))
                    .unwrap();
                bb.borrow_mut().extend([wdst, rbuf, sink]);
            },
            |a, b| a.side.scq.len() as u64 > 8 + N && b.side.rcq.len() as u64 >= N,
        );
        let a = out.a.borrow();
        let b = out.b.borrow();
        let swc = a.side.send_wcs();
        let rwc = b.side.recv_wcs();
        assert_eq!(
            swc.len() as u64,
            8 + N + 1,
            "seed {seed} by {}",
            out.sim_time
        );
        assert!(swc.iter().all(|w| w.status == WcStatus::Success), "{swc:?}");
        assert_eq!(rwc.len() as u64, N);
        assert!(rwc.iter().all(|w| w.status == WcStatus::Success));
        let bufs = bufs.borrow();
        assert_eq!(bufs[0].buf().to_vec(), *wdata, "seed {seed}: Write data");
        assert_eq!(
            bufs[1].buf().to_vec(),
            wdata[..S * N as usize],
            "seed {seed}: Sends"
        );
        assert_eq!(bufs[2].buf().to_vec(), *rdata, "seed {seed}: Read data");
        assert_eq!(a.side.eng.state(), QpState::Rts);
        assert_eq!(b.side.eng.state(), QpState::Rts);
        assert!(a.side.terminate_sent().is_none() && b.side.terminate_sent().is_none());
        let alt = SctpHost::sock(Ipv4Addr::new(10, 0, 2, 2));
        assert!(
            a.events.contains(&Event::PrimaryChanged { remote: alt }),
            "seed {seed}: {:?}",
            a.events
        );
    }
}
