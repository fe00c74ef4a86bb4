//! Corruption confined to the transport payload with the checksums repaired: the damage gets
//! past smoltcp's IPv4 and TCP checks and reaches the application, while plain corruption is
//! caught by the checksums and repaired by retransmission.

use std::net::SocketAddrV4;
use std::time::Duration;

use netsim::tcp::{TcpHost, TcpHostConfig};
use netsim::testing::{BulkReceiver, BulkSender};
use netsim::{CorruptScope, Dir, Instant, LinkParams, Sim};

struct Outcome {
    received: u64,
    first_mismatch: Option<u64>,
    corrupted: u64,
}

/// Sends 400 kB over a link corrupting 5 % of the data direction's frames.
fn run(scope: CorruptScope) -> Outcome {
    let total = 400_000;
    let mut sim = Sim::new(3);
    let rx_cfg = TcpHostConfig::numbered(2).with_seed(sim.derive_seed(2));
    let tx_cfg = TcpHostConfig::numbered(1).with_seed(sim.derive_seed(1));
    let remote = SocketAddrV4::new(rx_cfg.addr, 5000);
    let rx = sim.add_node(TcpHost::new(rx_cfg, BulkReceiver::new(5000, total)));
    let tx = sim.add_node(TcpHost::new(tx_cfg, BulkSender::new(remote, 40000, total)));
    let mut data = LinkParams::default()
        .delay(Duration::from_micros(100))
        .corrupt(0.05)
        .corrupt_scope(scope);
    data.corrupt_offset = 14;
    let link = sim
        .link_asymmetric(tx.iface(0), rx.iface(0), data, LinkParams::default())
        .unwrap();
    sim.run_until_condition(Instant::from_secs(120), |sim| {
        sim.node(rx).app::<BulkReceiver>().unwrap().received() >= total
    });
    let r = sim.node(rx).app::<BulkReceiver>().unwrap();
    Outcome {
        received: r.received(),
        first_mismatch: r.first_mismatch(),
        corrupted: sim.link_counters(link, Dir::AtoB).corrupted,
    }
}

/// Payload-only corruption with repaired checksums (RFC 793 §3.1 checksum recomputed) is
/// delivered to the application as wrong bytes.
#[test]
fn payload_corruption_with_fixed_checksums_reaches_the_application() {
    let o = run(CorruptScope::PayloadFixChecksums);
    assert!(o.corrupted > 3, "{} frames corrupted", o.corrupted);
    assert_eq!(o.received, 400_000);
    assert!(o.first_mismatch.is_some(), "corruption did not get through");
}

/// Plain corruption (RFC 791 / RFC 793 checksums intact) is dropped by the receiver's
/// checksum checks and retransmitted: the stream arrives unharmed.
#[test]
fn frame_corruption_is_caught_by_the_checksums() {
    let o = run(CorruptScope::Frame);
    assert!(o.corrupted > 3, "{} frames corrupted", o.corrupted);
    assert_eq!(o.received, 400_000);
    assert_eq!(o.first_mismatch, None);
}
