//! Throughput of the engine itself: two endpoints wired back to back with zero latency, no
//! loss. Run with
//! `cargo test --release -p softrnic-sctp --test bench -- --ignored --nocapture`.

use std::net::SocketAddr;
use std::time::Duration;

use sctp::{AssociationConfig, Endpoint, EndpointConfig, Instant, SendError};

fn run(total: usize, msg: usize, cfg: AssociationConfig) -> (Duration, u64) {
    let a_addr: SocketAddr = "10.0.1.1:0".parse().unwrap();
    let b_addr: SocketAddr = "10.0.1.2:0".parse().unwrap();
    let mut ca = EndpointConfig::new(5000, vec![a_addr], 1);
    ca.association = cfg.clone();
    let mut cb = EndpointConfig::new(6000, vec![b_addr], 2);
    cb.association = cfg;
    let mut a = Endpoint::new(ca);
    let mut b = Endpoint::new(cb);
    let mut now = Instant::ZERO;
    let ia = a.connect(now, b_addr, 6000).unwrap();
    let mut ib = None;
    let payload = vec![0x5au8; msg];
    let (mut sent, mut got) = (0usize, 0usize);
    let mut packets = 0u64;
    let wall = std::time::Instant::now();
    while got < total {
        if let Some(assoc) = a.association_mut(ia)
            && assoc.state() == sctp::State::Established
        {
            while sent < total {
                match assoc.send(0, 0, false, &payload) {
                    Ok(()) => sent += msg,
                    Err(SendError::BufferFull { .. }) => break,
                    Err(e) => panic!("{e}"),
                }
            }
        }
        while let Some(t) = a.poll_transmit(now) {
            packets += 1;
            b.handle_packet(now, t.remote, t.local, &t.bytes);
        }
        if ib.is_none() {
            ib = b.accept();
        }
        if let Some(id) = ib {
            let rb = b.association_mut(id).unwrap();
            while let Some(m) = rb.recv() {
                got += m.data.len();
            }
        }
        while let Some(t) = b.poll_transmit(now) {
            a.handle_packet(now, t.remote, t.local, &t.bytes);
        }
        while a.poll_event().is_some() {}
        while b.poll_event().is_some() {}
        now += Duration::from_micros(20);
        if a.poll_timeout().is_some_and(|t| t <= now) {
            a.handle_timeout(now);
        }
        if b.poll_timeout().is_some_and(|t| t <= now) {
            b.handle_timeout(now);
        }
    }
    (wall.elapsed(), packets)
}

#[test]
#[ignore = "benchmark: run in release mode with --ignored --nocapture"]
fn bulk_throughput() {
    for (msg, pmtu) in [(1000usize, 1500usize), (16384, 1500), (65536, 9000)] {
        let cfg = AssociationConfig {
            pmtu,
            recv_buffer: 4 << 20,
            send_buffer: 8 << 20,
            ..AssociationConfig::default()
        };
        let total = 1usize << 30;
        let (d, packets) = run(total, msg, cfg);
        let gbps = total as f64 * 8.0 / d.as_secs_f64() / 1e9;
        eprintln!(
            "{} MiB in {msg}-byte messages, PMTU {pmtu}: {d:?}, {gbps:.2} Gbit/s, {:.2} Mpkt/s",
            total >> 20,
            packets as f64 / d.as_secs_f64() / 1e6
        );
    }
}
