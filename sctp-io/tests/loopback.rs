//! UDP encapsulation (RFC 6951) over loopback: association setup, data both ways, and
//! multihomed failover with one path black-holed. Needs no privileges; 127.0.0.2 and
//! 127.0.0.3 are loopback addresses on Linux without configuration.

use std::net::IpAddr;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use sctp_io::{AssociationConfig, Config, Error, Notification, PathState, SctpSocket, Transport};

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// Ephemeral UDP ports at both ends: the client is told the server's bound port.
fn udp(local_port: u16, remote_port: u16) -> Transport {
    Transport::Udp {
        local_port,
        remote_port,
    }
}

fn fast() -> AssociationConfig {
    AssociationConfig {
        rto_initial: Duration::from_millis(100),
        rto_min: Duration::from_millis(50),
        rto_max: Duration::from_millis(400),
        hb_interval: Duration::from_millis(200),
        sack_delay: Duration::from_millis(20),
        ..AssociationConfig::default()
    }
}

fn pattern(stream: u16, seq: u32, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32 ^ seq.wrapping_mul(31) ^ (u32::from(stream) * 7)) as u8)
        .collect()
}

const T: Option<Duration> = Some(Duration::from_secs(10));

/// RFC 6951 §5.3/§5.4 and RFC 9260 §5: the four-way handshake over UDP, then ordered
/// messages on several streams in both directions, every byte checked, then a graceful
/// shutdown (§9.2) seen by both ends.
#[test]
fn rfc6951_udp_encapsulated_association_carries_data_both_ways() {
    let mut scfg = Config::new(udp(0, 0), vec![ip("127.0.0.1")], 7001);
    scfg.association = fast();
    let server = SctpSocket::listen(scfg).unwrap();
    let sport = server.udp_port();
    assert_ne!(sport, 0);
    let mut ccfg = Config::new(udp(0, sport), vec![ip("127.0.0.1")], 0);
    ccfg.association = fast();
    let client = SctpSocket::connect(ccfg, &[ip("127.0.0.1")], 7001, T).unwrap();
    server.accept(T).unwrap();
    assert_eq!(client.poll_notification(), Some(Notification::Connected));

    const N: u32 = 200;
    let echo = thread::spawn(move || {
        for seq in 0..N {
            let m = server.recv(T).unwrap();
            let stream = (seq % 4) as u16;
            assert_eq!(m.stream, stream);
            assert_eq!(m.ppid, 42);
            assert_eq!(m.data, pattern(stream, seq, 100 + seq as usize * 13));
            // Answer with a message of another size (several fragments for large seq).
            server
                .send(
                    stream,
                    43,
                    false,
                    &pattern(stream, seq, 3000 + seq as usize),
                )
                .unwrap();
        }
        // The client's SHUTDOWN ends the association: recv reports it closed.
        assert!(matches!(server.recv(T), Err(Error::Closed)));
        server.wait_closed(T).unwrap();
    });
    for seq in 0..N {
        let stream = (seq % 4) as u16;
        client
            .send(
                stream,
                42,
                false,
                &pattern(stream, seq, 100 + seq as usize * 13),
            )
            .unwrap();
    }
    for seq in 0..N {
        let m = client.recv(T).unwrap();
        let stream = (seq % 4) as u16;
        assert_eq!((m.stream, m.ppid), (stream, 43));
        assert_eq!(m.data, pattern(stream, seq, 3000 + seq as usize));
    }
    client.shutdown();
    client.wait_closed(T).unwrap();
    echo.join().unwrap();
    let io = client.io_stats();
    assert!(io.packets_in > 0 && io.packets_out > 0);
    assert_eq!(io.send_failures, 0);
}

/// RFC 9260 §8.2 / RFC 7829 over RFC 6951: the server is multihomed on 127.0.0.1 and
/// 127.0.0.2; black-holing its 127.0.0.1 socket mid-transfer moves the client's data to
/// 127.0.0.2 (Potentially Failed, then a primary change), every message still arrives in
/// order, and the path events are reported.
#[test]
fn rfc9260_8_2_multihomed_failover_over_udp_loopback() {
    let mut scfg = Config::new(udp(0, 0), vec![ip("127.0.0.1"), ip("127.0.0.2")], 7002);
    scfg.association = fast();
    let server = Arc::new(SctpSocket::listen(scfg).unwrap());
    let sport = server.udp_port();
    let mut ccfg = Config::new(udp(0, sport), vec![ip("127.0.0.3")], 0);
    ccfg.association = fast();
    let client = SctpSocket::connect(ccfg, &[ip("127.0.0.1")], 7002, T).unwrap();
    server.accept(T).unwrap();
    let mut remotes = client.remote_addrs();
    remotes.sort();
    assert_eq!(remotes, vec![ip("127.0.0.1"), ip("127.0.0.2")]);

    // Wait until the second path is confirmed by a heartbeat.
    let t0 = Instant::now();
    while client
        .path_stats()
        .iter()
        .any(|p| p.state != PathState::Active)
    {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "paths never confirmed"
        );
        thread::sleep(Duration::from_millis(20));
    }
    const N: u32 = 3000;
    let s2 = server.clone();
    let rx = thread::spawn(move || {
        for seq in 0..N {
            let m = s2.recv(T).unwrap();
            assert_eq!(m.data, pattern(0, seq, 1000), "message {seq}");
        }
    });
    for seq in 0..N {
        client.send(0, 1, false, &pattern(0, seq, 1000)).unwrap();
        if seq == N / 3 {
            server.set_blackhole(ip("127.0.0.1"), true);
        }
    }
    rx.join().unwrap();
    let mut events = Vec::new();
    while let Some(n) = client.poll_notification() {
        events.push(n);
    }
    assert!(
        events.contains(&Notification::PathPotentiallyFailed(ip("127.0.0.1"))),
        "events: {events:?}"
    );
    assert!(
        events.contains(&Notification::PrimaryChanged(ip("127.0.0.2"))),
        "events: {events:?}"
    );
    let stats = client.path_stats();
    let p2 = stats
        .iter()
        .find(|p| p.remote.ip() == ip("127.0.0.2"))
        .unwrap();
    assert!(p2.data_chunks_sent > 0, "{stats:?}");
    assert!(server.io_stats().blackholed > 0);
}

/// RFC 6951 §5.3: an encapsulated packet goes from the local encapsulation port to the
/// peer's, and the SCTP CRC32c is still computed over the SCTP packet (UDP carries it
/// unchanged). §5.4: a received packet whose CRC32c is wrong is discarded by SCTP even
/// though its UDP checksum is fine: the INIT is simply retransmitted.
#[test]
fn rfc6951_5_3_ports_and_crc32c_of_encapsulated_packets() {
    let peer = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    peer.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let peer_port = peer.local_addr().unwrap().port();
    let mut ccfg = Config::new(udp(0, peer_port), vec![ip("127.0.0.1")], 0);
    ccfg.association = fast();
    let t = thread::spawn(move || {
        SctpSocket::connect(
            ccfg,
            &[ip("127.0.0.1")],
            7003,
            Some(Duration::from_millis(600)),
        )
    });
    let mut buf = [0u8; 2048];
    let (n, from) = peer.recv_from(&mut buf).unwrap();
    let init = sctp::wire::parse_packet(&buf[..n], true).expect("CRC32c must verify");
    assert!(matches!(init.chunks[0], sctp::wire::Chunk::Init(_)));
    assert_eq!(init.header.dst_port, 7003);
    // Answer with the same bytes but a broken CRC32c (UDP checksum still valid).
    let mut bad = buf[..n].to_vec();
    bad[8] ^= 0xff;
    peer.send_to(&bad, from).unwrap();
    let (n2, from2) = peer.recv_from(&mut buf).unwrap();
    assert_eq!(
        from2, from,
        "the same local encapsulation port is used again"
    );
    let again = sctp::wire::parse_packet(&buf[..n2], true).unwrap();
    assert!(
        matches!(again.chunks[0], sctp::wire::Chunk::Init(_)),
        "the corrupt packet must be ignored and the INIT retransmitted"
    );
    assert!(matches!(t.join().unwrap(), Err(Error::TimedOut)));
}
