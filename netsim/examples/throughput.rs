//! Measures how fast the simulator runs a TCP bulk transfer: simulated seconds per wall-clock
//! second, events per second. Run with
//! `cargo run --release -p softrnic-netsim --example throughput [MiB]`.

use std::net::SocketAddrV4;
use std::time::Duration;

use netsim::tcp::{TcpHost, TcpHostConfig};
use netsim::testing::{BulkReceiver, BulkSender};
use netsim::{Dir, Instant, LinkParams, Sim};

fn run(name: &str, params: LinkParams, total: u64) {
    let mut sim = Sim::new(1);
    let rx_cfg = TcpHostConfig::numbered(2);
    let remote = SocketAddrV4::new(rx_cfg.addr, 5000);
    let rx = sim.add_node(TcpHost::new(rx_cfg, BulkReceiver::new(5000, total)));
    let tx = sim.add_node(TcpHost::new(
        TcpHostConfig::numbered(1),
        BulkSender::new(remote, 40000, total),
    ));
    let link = sim.link(tx.iface(0), rx.iface(0), params).unwrap();
    let wall = std::time::Instant::now();
    let done = sim.run_until_condition(Instant::from_secs(3600), |s| {
        s.node(rx)
            .app::<BulkReceiver>()
            .is_some_and(|r| r.complete())
    });
    let wall = wall.elapsed().as_secs_f64();
    let simulated = sim.now().since_start().as_secs_f64();
    let c = sim.link_counters(link, Dir::AtoB);
    let goodput = total as f64 * 8.0 / simulated / 1e6;
    println!(
        "{name}: {} MiB {}; simulated {simulated:.3} s ({goodput:.0} Mbit/s goodput) in \
         {wall:.3} s wall = {:.2} simulated s per wall s; {} events ({:.2} M events/s); \
         data frames {} sent, {} lost",
        total >> 20,
        if done { "delivered" } else { "NOT delivered" },
        simulated / wall,
        sim.events_processed(),
        sim.events_processed() as f64 / wall / 1e6,
        c.sent,
        c.dropped_total(),
    );
}

fn main() {
    let mib: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(64);
    let total = mib * 1024 * 1024;
    let gig = LinkParams::default()
        .bandwidth(1_000_000_000)
        .delay(Duration::from_micros(50));
    run("1 Gbit/s clean", gig.clone(), total);
    run("1 Gbit/s 1% loss", gig.clone().loss(0.01), total);
    let ten = gig.bandwidth(10_000_000_000);
    run("10 Gbit/s clean", ten, total);
}
