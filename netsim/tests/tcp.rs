//! TCP over the simulator: smoltcp hosts moving verified byte streams across impaired links.

use std::net::SocketAddrV4;
use std::time::Duration;

use netsim::tcp::{TcpHost, TcpHostConfig};
use netsim::testing::{BulkReceiver, BulkSender};
use netsim::{Dir, Instant, LinkId, LinkParams, NodeHandle, QueueLimit, Sim};

const PORT: u16 = 5000;

struct Bulk {
    sim: Sim,
    tx: NodeHandle<TcpHost>,
    rx: NodeHandle<TcpHost>,
    link: LinkId,
}

/// Host 1 sends `total` bytes to host 2 over one link with `params`.
fn bulk(seed: u64, params: LinkParams, total: u64) -> Bulk {
    let mut sim = Sim::new(seed);
    let rx_cfg = TcpHostConfig::numbered(2).with_seed(sim.derive_seed(2));
    let tx_cfg = TcpHostConfig::numbered(1).with_seed(sim.derive_seed(1));
    let remote = SocketAddrV4::new(rx_cfg.addr, PORT);
    let rx = sim.add_node(TcpHost::new(rx_cfg, BulkReceiver::new(PORT, total)));
    let tx = sim.add_node(TcpHost::new(tx_cfg, BulkSender::new(remote, 40000, total)));
    let link = sim.link(tx.iface(0), rx.iface(0), params).unwrap();
    Bulk { sim, tx, rx, link }
}

impl Bulk {
    fn receiver(&self) -> &BulkReceiver {
        self.sim.node(self.rx).app::<BulkReceiver>().unwrap()
    }

    /// Runs until the receiver has everything and the sender has closed, or `limit`.
    fn run(&mut self, limit: Instant) -> bool {
        let (tx, rx) = (self.tx, self.rx);
        self.sim.run_until_condition(limit, |sim| {
            let r = sim.node(rx).app::<BulkReceiver>().unwrap();
            let s = sim.node(tx).app::<BulkSender>().unwrap();
            r.complete() && s.finished()
        })
    }
}

fn impaired() -> LinkParams {
    LinkParams::default()
        .bandwidth(1_000_000_000)
        .delay(Duration::from_micros(500))
        .loss(0.01)
        .duplicate(0.01)
        .reorder(0.01, Duration::from_micros(300))
        .queue_limit(QueueLimit::Packets(1000))
}

#[test]
fn bulk_transfer_survives_loss_reordering_and_duplication() {
    let total = 8 * 1024 * 1024;
    let mut b = bulk(42, impaired(), total);
    assert!(
        b.run(Instant::from_secs(600)),
        "stalled at {} of {total} bytes",
        b.receiver().received()
    );
    let r = b.receiver();
    assert_eq!(r.received(), total);
    assert_eq!(r.first_mismatch(), None);
    // The impairments really happened, in both directions.
    let c = b.sim.link_counters(b.link, Dir::AtoB);
    assert!(
        c.dropped_loss > 10 && c.duplicated > 10 && c.reordered > 10,
        "{c:?}"
    );
    let back = b.sim.link_counters(b.link, Dir::BtoA);
    assert!(back.dropped_loss > 0, "{back:?}");
    eprintln!(
        "8 MiB delivered at {}: data {c:?}, acks {back:?}",
        r.done_at().unwrap()
    );
}

#[test]
fn bulk_transfer_completes_across_a_three_second_outage() {
    let total = 8 * 1024 * 1024;
    let params = LinkParams::default()
        .bandwidth(100_000_000)
        .delay(Duration::from_millis(1));
    let mut b = bulk(7, params, total);
    // 8 MiB at 100 Mbit/s takes about 0.7 s: cut the link 0.3 s in, for 3 s.
    let down = Instant::from_millis(300);
    b.sim.link_down_at(b.link, down).unwrap();
    b.sim
        .link_up_at(b.link, down + Duration::from_secs(3))
        .unwrap();
    b.sim.run_until(down);
    let before = b.receiver().received();
    assert!(
        before > 0 && before < total,
        "outage should hit mid-transfer ({before} bytes)"
    );
    assert!(
        b.run(Instant::from_secs(120)),
        "stalled at {}",
        b.receiver().received()
    );
    let r = b.receiver();
    assert_eq!((r.received(), r.first_mismatch()), (total, None));
    assert!(r.done_at().unwrap() > down + Duration::from_secs(3));
    let c = b.sim.link_counters(b.link, Dir::AtoB);
    assert!(c.dropped_down > 0);
    eprintln!(
        "8 MiB delivered at {} across the outage: {c:?}",
        r.done_at().unwrap()
    );
}

#[test]
fn same_seed_gives_byte_identical_captures_and_other_seeds_differ() {
    let run = |seed: u64| {
        let mut b = bulk(seed, impaired().loss(0.05), 512 * 1024);
        let pcap = b.sim.capture_in_memory(b.link).unwrap();
        assert!(b.run(Instant::from_secs(300)));
        b.sim.finish_capture(pcap).unwrap()
    };
    let first = run(3);
    assert!(first.len() > 512 * 1024, "capture holds the transfer");
    assert_eq!(first, run(3));
    assert_ne!(first, run(4));
}

#[test]
fn capture_file_is_ethernet_pcap_with_virtual_timestamps() {
    use pcap_file::DataLink;
    use pcap_file::pcap::PcapReader;

    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("netsim-tcp.pcap");
    let mut b = bulk(1, impaired(), 64 * 1024);
    let capture = b.sim.capture(b.link, &path).unwrap();
    assert!(b.run(Instant::from_secs(60)));
    let end = b.sim.now();
    // Let the close handshake finish, then flush.
    b.sim.run_until(end + Duration::from_secs(1));
    b.sim.finish_capture(capture).unwrap();

    let mut reader = PcapReader::new(std::fs::File::open(&path).unwrap()).unwrap();
    assert_eq!(reader.header().datalink, DataLink::ETHERNET);
    let mut last = Duration::ZERO;
    let mut count = 0;
    while let Some(pkt) = reader.next_packet() {
        let pkt = pkt.unwrap();
        assert!(pkt.timestamp >= last, "timestamps go forward");
        last = pkt.timestamp;
        // IPv4 or ARP, from the simulated hosts.
        assert!(matches!(&pkt.data[12..14], [0x08, 0x00] | [0x08, 0x06]));
        count += 1;
    }
    let delivered: u64 = Dir::BOTH
        .iter()
        .map(|&d| b.sim.link_counters(b.link, d).delivered)
        .sum();
    assert_eq!(count, delivered);
    // Virtual, not wall-clock, time: the whole exchange fits in the simulated interval.
    assert!(last <= b.sim.now().since_start());
    eprintln!("capture written to {}", path.display());
}

#[test]
fn transfer_across_a_switch_with_corruption_completes_and_stays_unicast() {
    let total = 1024 * 1024;
    let mut sim = Sim::new(9);
    let sw = sim.add_switch(3);
    let rx_cfg = TcpHostConfig::numbered(3).with_seed(sim.derive_seed(3));
    let remote = SocketAddrV4::new(rx_cfg.addr, PORT);
    let tx = sim.add_node(TcpHost::new(
        TcpHostConfig::numbered(1).with_seed(sim.derive_seed(1)),
        BulkSender::new(remote, 40000, total),
    ));
    let idle = sim.add_node(TcpHost::new(TcpHostConfig::numbered(2), ()));
    let rx = sim.add_node(TcpHost::new(rx_cfg, BulkReceiver::new(PORT, total)));
    let port = LinkParams::default().delay(Duration::from_micros(20));
    // Flip a bit in 1 % of frames past the Ethernet header: TCP/IP checksums must catch them.
    let mut corrupting = port.clone().corrupt(0.01);
    corrupting.corrupt_offset = 14;
    let l_tx = sim.link(tx.iface(0), sw.iface(0), corrupting).unwrap();
    let l_idle = sim.link(idle.iface(0), sw.iface(1), port.clone()).unwrap();
    sim.link(rx.iface(0), sw.iface(2), port).unwrap();
    let done = sim.run_until_condition(Instant::from_secs(120), |s| {
        s.node(rx).app::<BulkReceiver>().unwrap().complete()
    });
    let r = sim.node(rx).app::<BulkReceiver>().unwrap();
    assert!(done, "stalled at {}", r.received());
    assert_eq!(r.first_mismatch(), None);
    assert!(sim.link_counters(l_tx, Dir::AtoB).corrupted > 5);
    // The idle host saw only the flooded ARP request, never the unicast transfer.
    let to_idle = sim.link_counters(l_idle, Dir::BtoA);
    assert!(to_idle.delivered <= 2, "{to_idle:?}");
}
