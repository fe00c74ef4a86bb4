//! Raw IPv4 (protocol 132) over loopback. Needs root or CAP_NET_RAW and a host without
//! kernel SCTP: run with `cargo test -p softrnic-sctp-io --test raw -- --ignored`.

use std::net::IpAddr;
use std::time::Duration;

use sctp_io::{Config, Notification, SctpSocket, Transport};

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

const T: Option<Duration> = Some(Duration::from_secs(10));

/// RFC 9260 over raw IPv4: two endpoints on the same address 127.0.0.1 share every SCTP
/// packet the host receives; each keeps only its own port, the association comes up,
/// data flows both ways and shuts down cleanly.
#[test]
#[ignore = "needs root or CAP_NET_RAW (raw IPv4 sockets)"]
fn raw_ipv4_association_both_ways() {
    let server = SctpSocket::listen(Config::new(Transport::RawIpv4, vec![ip("127.0.0.1")], 7101))
        .expect("raw socket (root?)");
    let client = SctpSocket::connect(
        Config::new(Transport::RawIpv4, vec![ip("127.0.0.1")], 0),
        &[ip("127.0.0.1")],
        7101,
        T,
    )
    .unwrap();
    server.accept(T).unwrap();
    assert_eq!(client.poll_notification(), Some(Notification::Connected));
    for i in 0..100u32 {
        client.send(0, 7, false, &vec![i as u8; 3000]).unwrap();
    }
    for i in 0..100u32 {
        let m = server.recv(T).unwrap();
        assert_eq!(m.data, vec![i as u8; 3000]);
        server.send(1, 8, false, &i.to_be_bytes()).unwrap();
    }
    for i in 0..100u32 {
        assert_eq!(client.recv(T).unwrap().data, i.to_be_bytes());
    }
    client.shutdown();
    client.wait_closed(T).unwrap();
    server.wait_closed(T).unwrap();
    // Packets of the other endpoint's port were seen and ignored, never handed to SCTP.
    assert!(client.io_stats().foreign > 0 && server.io_stats().foreign > 0);
}
