//! A listening endpoint's sockets shared with another endpoint that runs one of its
//! associations ([`PacketIo::receive_with`], [`PacketIo::try_clone`],
//! [`PacketIo::handle_inbound`]): the listener reads every packet and passes on those of the
//! moved association, which sends through the duplicated sockets. UDP encapsulation (RFC
//! 6951) on loopback; needs no privileges.

use std::net::IpAddr;
use std::time::{Duration, Instant as StdInstant};

use sctp::{Endpoint, EndpointConfig, Instant, State};
use sctp_io::driver::{Inbound, InboundPacket, PacketIo, engine_addr};
use sctp_io::net::Transport;

const SERVER_PORT: u16 = 7301;
const CLIENT_PORT: u16 = 7302;

fn lo() -> IpAddr {
    "127.0.0.1".parse().unwrap()
}

fn config(port: u16, seed: u64, listen: bool) -> EndpointConfig {
    let mut c = EndpointConfig::new(port, vec![engine_addr(lo())], seed);
    c.accept_incoming = listen;
    c
}

fn pattern(seed: u32, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2654435761).wrapping_add(seed) as u8)
        .collect()
}

struct Net {
    start: StdInstant,
    server: (PacketIo, Endpoint),
    client: (PacketIo, Endpoint),
    /// The moved association's endpoint and its handle on the server's sockets.
    moved: Option<(PacketIo, Endpoint)>,
    /// The moved association's peer (address, SCTP port).
    peer: Option<(IpAddr, u16)>,
    diverted: usize,
}

impl Net {
    fn now(&self) -> Instant {
        Instant::from_nanos(self.start.elapsed().as_nanos() as u64)
    }

    /// One round: timers, sends, and whatever has arrived (the server's reads passed on
    /// to the moved endpoint when they are its association's).
    fn step(&mut self) {
        let now = self.now();
        let mut eps: Vec<&mut (PacketIo, Endpoint)> = vec![&mut self.server, &mut self.client];
        if let Some(m) = self.moved.as_mut() {
            eps.push(m);
        }
        for (io, ep) in eps {
            if ep.poll_timeout().is_some_and(|d| d <= now) {
                ep.handle_timeout(now);
            }
            io.flush(ep, now);
        }
        std::thread::sleep(Duration::from_millis(1));
        let mut held: Vec<InboundPacket> = Vec::new();
        let peer = self.peer;
        let (io, ep) = &mut self.server;
        io.receive_with(ep, now, 64, |p: &Inbound<'_>| {
            let src = u16::from_be_bytes([p.packet[0], p.packet[1]]);
            if peer != Some((p.from, src)) {
                return false;
            }
            held.push(p.to_packet());
            true
        });
        self.diverted += held.len();
        if let Some((io, ep)) = self.moved.as_mut() {
            for h in &held {
                io.handle_inbound(ep, now, &h.as_inbound());
            }
        }
        let (io, ep) = &mut self.client;
        io.receive(ep, now, 64);
    }

    fn run_until(&mut self, what: &str, mut done: impl FnMut(&mut Net) -> bool) {
        let until = StdInstant::now() + Duration::from_secs(10);
        while !done(self) {
            assert!(StdInstant::now() < until, "{what}: not within 10 s");
            self.step();
        }
    }
}

/// RFC 6951 UDP encapsulation, RFC 9260 §8.5: an association the listener accepted goes on
/// in an endpoint of its own that sends through the listener's duplicated sockets and gets
/// its packets from the listener's reads — data both ways, every byte checked, then a
/// graceful shutdown (§9.2) — and the listener answers none of them out of the blue
/// (§8.4), as it would if they reached its own endpoint.
#[test]
fn listener_passes_a_moved_association_its_packets() {
    let server_io = PacketIo::open(
        Transport::Udp {
            local_port: 0,
            remote_port: sctp_io::net::SCTP_UDP_PORT,
        },
        &[lo()],
        SERVER_PORT,
    )
    .unwrap();
    let client_io = PacketIo::open(
        Transport::Udp {
            local_port: 0,
            remote_port: server_io.udp_port(),
        },
        &[lo()],
        CLIENT_PORT,
    )
    .unwrap();
    let mut net = Net {
        start: StdInstant::now(),
        server: (server_io, Endpoint::new(config(SERVER_PORT, 1, true))),
        client: (client_io, Endpoint::new(config(CLIENT_PORT, 2, false))),
        moved: None,
        peer: None,
        diverted: 0,
    };
    let now = net.now();
    let cid = net
        .client
        .1
        .connect(now, engine_addr(lo()), SERVER_PORT)
        .unwrap();
    let mut sid = None;
    net.run_until("handshake", |n| {
        sid = sid.or_else(|| n.server.1.accept());
        sid.is_some() && n.client.1.association(cid).map(|a| a.state()) == Some(State::Established)
    });

    // Move the accepted association to an endpoint of its own.
    let a = net.server.1.remove(sid.unwrap()).unwrap();
    net.peer = Some((lo(), a.peer_port()));
    let mut ep = Endpoint::new(config(SERVER_PORT, 3, false));
    let mid = ep.adopt(a);
    net.moved = Some((net.server.0.try_clone().unwrap(), ep));

    const N: u32 = 40;
    for i in 0..N {
        let len = 100 + i as usize * 97;
        let c = net.client.1.association_mut(cid).unwrap();
        c.send(0, i, false, &pattern(i, len)).unwrap();
        let m = net.moved.as_mut().unwrap();
        m.1.association_mut(mid)
            .unwrap()
            .send(1, i, false, &pattern(1000 + i, len))
            .unwrap();
    }
    let (mut at_server, mut at_client) = (Vec::new(), Vec::new());
    net.run_until("data both ways", |n| {
        let m = n.moved.as_mut().unwrap();
        while let Some(x) = m.1.association_mut(mid).unwrap().recv() {
            at_server.push(x);
        }
        while let Some(x) = n.client.1.association_mut(cid).unwrap().recv() {
            at_client.push(x);
        }
        at_server.len() == N as usize && at_client.len() == N as usize
    });
    for (i, (s, c)) in at_server.iter().zip(&at_client).enumerate() {
        let (i, len) = (i as u32, 100 + i * 97);
        assert_eq!((s.ppid, &s.data[..]), (i, &pattern(i, len)[..]));
        assert_eq!((c.ppid, &c.data[..]), (i, &pattern(1000 + i, len)[..]));
    }
    assert!(
        net.diverted >= N as usize / 4,
        "{} packets passed on",
        net.diverted
    );

    let now = net.now();
    net.client.1.association_mut(cid).unwrap().shutdown(now);
    net.run_until("shutdown", |n| {
        let m = n.moved.as_ref().unwrap();
        n.client
            .1
            .association(cid)
            .is_none_or(|a| a.state() == State::Closed)
            && m.1
                .association(mid)
                .is_none_or(|a| a.state() == State::Closed)
    });
    let stats = net.server.1.stats();
    assert_eq!(
        (stats.ootb_aborts, stats.ootb_discarded, stats.malformed),
        (0, 0, 0),
        "the listener saw the moved association's packets: {stats:?}"
    );
}
