//! `Rnic::wait_tx_acked` over real kernel TCP on loopback: it returns only once the peer's
//! TCP has acknowledged every byte the QP handed to its socket (RDMA Write completions come
//! earlier, when the data was handed over), so an application can close or start a closing
//! exchange elsewhere without overtaking data still in flight.

use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use socket2::{Domain, Socket, Type};
use stack::mpa::{Role, Session};
use stack::{
    Access, AdoptRole, Cq, MrOptions, ProgressMode, QpAttr, Rnic, RnicConfig, RnicError, SendWr,
};

const LEN: usize = 1 << 20;

fn session() -> Session {
    Session {
        role: Role::Initiator,
        revision: 2,
        crc: false,
        markers_tx: false,
        markers_rx: false,
        enhanced: true,
        ird: 0,
        ord: 0,
        p2p: false,
        rtr: None,
        peer_private_data: Vec::new(),
    }
}

/// A listener whose accepted sockets have a small receive buffer (so a peer that does not
/// read closes its window after a few KB).
fn small_window_listener() -> (Socket, SocketAddr) {
    let s = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    s.set_recv_buffer_size(8 * 1024).unwrap();
    s.bind(&SocketAddr::from(([127, 0, 0, 1], 0)).into())
        .unwrap();
    s.listen(1).unwrap();
    let addr = s.local_addr().unwrap().as_socket().unwrap();
    (s, addr)
}

fn check(progress: ProgressMode) {
    let rnic = Rnic::open(RnicConfig {
        progress,
        ..RnicConfig::default()
    })
    .unwrap();
    let pd = rnic.alloc_pd();
    let scq = Cq::new(64);
    let qp = rnic
        .create_qp(QpAttr::new(pd, scq.clone(), Cq::new(64)))
        .unwrap();
    let (l, addr) = small_window_listener();
    let ours = TcpStream::connect(addr).unwrap();
    let (peer, _) = l.accept().unwrap();
    let mut peer: TcpStream = peer.into();
    rnic.adopt(&qp, ours, AdoptRole::Established(session()))
        .unwrap();
    rnic.wait_established(&qp, Duration::from_secs(5)).unwrap();

    let src = rnic
        .mem()
        .register_new(pd, LEN, MrOptions::new(Access::LOCAL_WRITE))
        .unwrap();
    qp.post_send(SendWr::write(1, vec![src.sge(0, LEN as u32)], 0x1234, 0))
        .unwrap();
    // The Write completes once handed to the socket: the peer's window does not matter.
    let start = Instant::now();
    let wc = loop {
        if progress == ProgressMode::Manual {
            let _ = rnic.advance(Duration::from_millis(1));
        }
        if let Some(wc) = scq.poll_one() {
            break wc;
        }
        assert!(start.elapsed() < Duration::from_secs(5), "no completion");
        std::thread::sleep(Duration::from_millis(1));
    };
    assert!(wc.status.is_success(), "{wc:?}");

    // The peer reads nothing: most of the megabyte is unacknowledged.
    let r = rnic.wait_tx_acked(&qp, Duration::from_millis(300));
    assert!(matches!(r, Err(RnicError::Timeout)), "{r:?}");

    // The peer reads everything: the wait ends, and only after the peer got it all.
    peer.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let reader = std::thread::spawn(move || {
        let mut got = 0usize;
        let mut b = vec![0u8; 64 * 1024];
        while let Ok(n) = peer.read(&mut b) {
            if n == 0 {
                break;
            }
            got += n;
        }
        got
    });
    rnic.wait_tx_acked(&qp, Duration::from_secs(10)).unwrap();
    let got = reader.join().unwrap();
    // Every payload octet plus the FPDU framing (header, CRC field) arrived.
    assert!(got > LEN, "the peer read only {got} bytes");
}

/// Threaded progress: a peer that does not read keeps the call waiting (timeout); once it
/// reads, the call returns Ok.
#[test]
fn wait_tx_acked_waits_for_the_peers_tcp_acks() {
    check(ProgressMode::Thread);
}

/// The same with manual progress (the call drives the RNIC itself).
#[test]
fn wait_tx_acked_manual_progress() {
    check(ProgressMode::Manual);
}

/// A QP without a connection has nothing to wait for: a NotConnected error, at once.
#[test]
fn wait_tx_acked_unconnected_qp() {
    let rnic = Rnic::open(RnicConfig::default()).unwrap();
    let pd = rnic.alloc_pd();
    let qp = rnic
        .create_qp(QpAttr::new(pd, Cq::new(4), Cq::new(4)))
        .unwrap();
    match rnic.wait_tx_acked(&qp, Duration::from_secs(5)) {
        Err(RnicError::Io(e)) => assert_eq!(e.kind(), std::io::ErrorKind::NotConnected),
        r => panic!("{r:?}"),
    }
}
