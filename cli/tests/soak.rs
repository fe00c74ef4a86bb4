//! Soak: hostile peers against every server tool. For a while (`SOFTRNIC_SOAK_SECS`, default 3
//! seconds per server under `cargo test`; `.ci/run` soaks each for a minute) peers connect to
//! the server and send a random mix of valid and invalid frames — garbage instead of an MPA
//! Request, MPA Requests with random damage (RFC 5044 §7.1, RFC 6581), truncated requests,
//! and valid handshakes followed by FPDUs whose DDP/RDMAP headers (RFC 5041 §4, RFC 5040 §4)
//! and payloads are random, some with a damaged CRC (RFC 5044 §4.4). The server must stay up
//! throughout and then serve a good client, whose data is verified.
//!
//! `sctp-perf -s` (SCTP over UDP, RFC 6951) gets the same treatment at the packet level:
//! random datagrams, and SCTP packets with a correct CRC32c (RFC 9260 §6.8) whose chunks are
//! random or plausible (INIT, COOKIE ECHO with a forged cookie, ABORT, SHUTDOWN, DATA with
//! guessed tags).
//!
//! The random mix is seeded (`SOFTRNIC_SOAK_SEED`, else a fixed seed per server); a failure
//! prints the seed.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use proptest::prelude::{Rng, RngExt};
use proptest::test_runner::{RngAlgorithm, TestRng};
use stack::mpa::fpdu::{FpduEncoder, TxConfig};

use common::{Server, bin, sctp_perf_client};

fn soak_time() -> Duration {
    let secs = std::env::var("SOFTRNIC_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    Duration::from_secs(secs)
}

fn seed_for(tool: &str) -> u64 {
    std::env::var("SOFTRNIC_SOAK_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            tool.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
            })
        })
}

/// An MPA Request as a client sends it: revision 2 with IRD/ORD (RFC 6581) or revision 1.
fn mpa_request(rng: &mut TestRng, crc: bool) -> Vec<u8> {
    let mut f = b"MPA ID Req Frame".to_vec();
    let rev2 = rng.random_bool(0.8);
    let mut flags = if crc { 0x40 } else { 0 };
    let mut pd = Vec::new();
    if rev2 {
        flags |= 0x10;
        pd.extend_from_slice(&[0x00, 0x01, 0x00, 0x01]);
    }
    let extra: usize = rng.random_range(0..24);
    pd.extend((0..extra).map(|_| rng.random::<u8>()));
    f.push(flags);
    f.push(if rev2 { 2 } else { 1 });
    f.extend_from_slice(&(pd.len() as u16).to_be_bytes());
    f.extend_from_slice(&pd);
    f
}

/// A random DDP segment: a tagged or untagged header with random fields (biased towards
/// the values a real peer uses) and a random payload.
fn ddp_segment(rng: &mut TestRng, msn: &mut u32) -> Vec<u8> {
    let tagged = rng.random_bool(0.4);
    let last = rng.random_bool(0.8);
    let ctrl = (u8::from(tagged) << 7) | (u8::from(last) << 6) | 0x01;
    // RDMAP: version 1 and an opcode (Send, Send with SE, Write, Read Request, Terminate,
    // the atomics... or anything).
    let opcode: u8 = if rng.random_bool(0.7) {
        [0x0, 0x1, 0x3, 0x5, 0x7, 0x8][rng.random_range(0..6)]
    } else {
        rng.random_range(0..16)
    };
    let rdmap = if rng.random_bool(0.9) {
        0x40
    } else {
        rng.random::<u8>() & 0xC0
    } | opcode;
    let mut h = vec![ctrl, rdmap];
    if tagged {
        h.extend_from_slice(&rng.random::<u32>().to_be_bytes());
        h.extend_from_slice(&rng.random::<u64>().to_be_bytes());
    } else {
        let queue: u32 = if rng.random_bool(0.8) {
            0
        } else {
            rng.random_range(0..4)
        };
        *msn = msn.wrapping_add(1);
        let m = if rng.random_bool(0.8) {
            *msn
        } else {
            rng.random()
        };
        let mo: u32 = if rng.random_bool(0.8) {
            0
        } else {
            rng.random_range(0..70_000)
        };
        h.extend_from_slice(&rng.random::<u32>().to_be_bytes());
        h.extend_from_slice(&queue.to_be_bytes());
        h.extend_from_slice(&m.to_be_bytes());
        h.extend_from_slice(&mo.to_be_bytes());
    }
    let len: usize = match rng.random_range(0..4) {
        0 => 0,
        1 => 16,
        2 => rng.random_range(0..64),
        _ => rng.random_range(0..1400),
    };
    let mut payload = vec![0u8; len];
    rng.fill_bytes(&mut payload);
    h.extend_from_slice(&payload);
    h
}

/// One hostile peer on a fresh TCP connection to `port`.
fn attack(rng: &mut TestRng, port: u16) {
    let Ok(mut t) = TcpStream::connect(("127.0.0.1", port)) else {
        return;
    };
    let _ = t.set_read_timeout(Some(Duration::from_millis(300)));
    let _ = t.set_write_timeout(Some(Duration::from_millis(500)));
    let _ = t.set_nodelay(true);
    match rng.random_range(0..10) {
        // Connect and go.
        0 => {}
        // Garbage instead of a Request.
        1 | 2 => {
            let mut g = vec![0u8; rng.random_range(1..600)];
            rng.fill_bytes(&mut g);
            let _ = t.write_all(&g);
        }
        // A Request with random damage, or cut short.
        3..=5 => {
            let crc = rng.random_bool(0.5);
            let mut r = mpa_request(rng, crc);
            for _ in 0..rng.random_range(1..4) {
                let i = rng.random_range(0..r.len());
                r[i] = rng.random();
            }
            if rng.random_bool(0.3) {
                r.truncate(rng.random_range(1..r.len()));
            }
            let _ = t.write_all(&r);
            let mut buf = [0u8; 64];
            let _ = t.read(&mut buf);
        }
        // A valid handshake, then random FPDUs.
        _ => {
            let crc = rng.random_bool(0.5);
            if t.write_all(&mpa_request(rng, crc)).is_err() {
                return;
            }
            let mut reply = [0u8; 20];
            if t.read_exact(&mut reply).is_err() || reply[16] & 0x20 != 0 {
                return;
            }
            let mut pd = vec![0u8; usize::from(u16::from_be_bytes([reply[18], reply[19]]))];
            if t.read_exact(&mut pd).is_err() {
                return;
            }
            let mut enc = FpduEncoder::new(TxConfig {
                crc: reply[16] & 0x40 != 0,
                markers: false,
            });
            let mut msn = 0;
            let mut out = Vec::new();
            for _ in 0..rng.random_range(1..12) {
                let seg = ddp_segment(rng, &mut msn);
                let at = out.len();
                if enc.encode(&[&seg], &mut out).is_err() {
                    continue;
                }
                if rng.random_bool(0.15) {
                    let i = rng.random_range(at..out.len());
                    out[i] ^= 1 << rng.random_range(0..8);
                }
            }
            let _ = t.write_all(&out);
            let mut sink = [0u8; 4096];
            let _ = t.read(&mut sink);
        }
    }
}

/// Two hostile peers, each with its own generator from `seed`, run `attack` until `until`;
/// returns how many attacks they made.
fn run_peers(
    seed: u64,
    until: Instant,
    attack: impl Fn(&mut TestRng) + Send + Clone + 'static,
) -> u64 {
    let peers: Vec<_> = (0..2u8)
        .map(|k| {
            let attack = attack.clone();
            std::thread::spawn(move || {
                let mut s = [0u8; 32];
                s[..8].copy_from_slice(&seed.to_le_bytes());
                s[8] = k;
                let mut rng = TestRng::from_seed(RngAlgorithm::ChaCha, &s);
                let mut n = 0u64;
                while Instant::now() < until {
                    attack(&mut rng);
                    n += 1;
                }
                n
            })
        })
        .collect();
    peers
        .into_iter()
        .map(|p| p.join().expect("hostile peer"))
        .sum()
}

/// Attacks the server for the soak time from two peers at once; the server must be up
/// all along.
fn soak(server: &mut Server, tool: &str) {
    let seed = seed_for(tool);
    let until = Instant::now() + soak_time();
    let port = server.port;
    let attacks = run_peers(seed, until, move |rng| attack(rng, port));
    assert!(attacks > 0);
    // The soak step of .ci/run shows how hard each server was pushed.
    eprintln!(
        "{tool}: {attacks} hostile peers in {:?} (seed {seed})",
        soak_time()
    );
    assert!(
        server.alive(),
        "{tool} died under {attacks} hostile peers (seed {seed})"
    );
}

/// rping's persistent server under hostile peers, then two good clients at once with -V.
#[test]
fn rping_persistent_server_survives_a_hostile_soak() {
    let mut srv = Server::rping(&["-P", "--timeout", "5"]);
    soak(&mut srv, "rping");
    // Two good clients at once: each connection is served on its own.
    let port = srv.port.to_string();
    let good_args = [
        "rping",
        "-c",
        "-a",
        "127.0.0.1",
        "--timeout",
        "20",
        "-C",
        "5",
        "-V",
    ];
    let clients: Vec<_> = (0..2)
        .map(|_| {
            let port = port.clone();
            std::thread::spawn(move || {
                bin()
                    .args(good_args)
                    .args(["-p", &port])
                    .output()
                    .expect("client")
            })
        })
        .collect();
    let outs: Vec<_> = clients
        .into_iter()
        .map(|c| c.join().expect("client"))
        .collect();
    let alive = srv.alive();
    let out = srv.kill().text();
    if std::env::var_os("SOFTRNIC_SOAK_SHOW").is_some() {
        eprintln!("{out}");
    }
    for good in outs {
        assert!(
            good.status.success(),
            "good client after the soak: {}\nserver:\n{out}",
            String::from_utf8_lossy(&good.stderr)
        );
    }
    assert!(alive, "the persistent server went on listening:\n{out}");
}

/// Each perftest-style server under hostile peers, then a good client of the same tool.
#[test]
fn perf_servers_survive_a_hostile_soak() {
    for tool in [
        "write-bw",
        "write-lat",
        "read-bw",
        "read-lat",
        "send-bw",
        "send-lat",
    ] {
        let args = ["-s", "4096", "-n", "20"];
        let mut srv = Server::perf(tool, &args);
        soak(&mut srv, tool);
        let good = bin()
            .args([tool, "127.0.0.1", "-p", &srv.port.to_string()])
            .args(args)
            .output()
            .expect("client");
        let exit = srv.wait();
        let (status, out) = (exit.status, exit.text());
        assert!(
            good.status.success(),
            "{tool}: good client after the soak: {}\nserver:\n{out}",
            String::from_utf8_lossy(&good.stderr)
        );
        assert!(status.success(), "{tool} server: {status}\n{out}");
    }
}

/// One hostile SCTP-over-UDP datagram to `to` (SCTP port `sctp_port`).
fn sctp_attack(rng: &mut TestRng, udp: &std::net::UdpSocket, to: u16, sctp_port: u16) {
    let mut pkt = Vec::new();
    if rng.random_bool(0.2) {
        pkt.resize(rng.random_range(1..600), 0);
        rng.fill_bytes(&mut pkt);
    } else {
        let tag: u32 = if rng.random_bool(0.3) {
            0
        } else {
            rng.random()
        };
        sctp::wire::CommonHeader {
            src_port: rng.random_range(1..65_535),
            dst_port: if rng.random_bool(0.9) {
                sctp_port
            } else {
                rng.random()
            },
            verification_tag: tag,
        }
        .emit(&mut pkt);
        for _ in 0..rng.random_range(1..4) {
            let kind: u8 = [0, 1, 1, 2, 3, 4, 6, 7, 9, 10, 10, 11, 14][rng.random_range(0..13)];
            let mut value = Vec::new();
            if kind == 1 {
                // INIT: initiate tag, a_rwnd, streams out/in, initial TSN.
                value.extend_from_slice(&rng.random::<u32>().max(1).to_be_bytes());
                value.extend_from_slice(&65_536u32.to_be_bytes());
                value.extend_from_slice(&[0, 10, 0, 10]);
                value.extend_from_slice(&rng.random::<u32>().to_be_bytes());
            } else {
                value.resize(rng.random_range(0..80), 0);
                rng.fill_bytes(&mut value);
            }
            let flags = if rng.random_bool(0.8) {
                0
            } else {
                rng.random()
            };
            pkt.push(if rng.random_bool(0.9) {
                kind
            } else {
                rng.random()
            });
            pkt.push(flags);
            pkt.extend_from_slice(&((4 + value.len()) as u16).to_be_bytes());
            pkt.extend_from_slice(&value);
            while pkt.len() % 4 != 0 {
                pkt.push(0);
            }
        }
        let mut p = sctp::wire::Packet::new_unchecked(&mut pkt[..]);
        if rng.random_bool(0.9) {
            p.fill_checksum();
        }
    }
    let _ = udp.send_to(&pkt, ("127.0.0.1", to));
    // Take whatever came back (INIT ACKs, ABORTs) without waiting for it.
    let mut buf = [0u8; 2048];
    while udp.recv_from(&mut buf).is_ok() {}
}

/// `sctp-perf -s` over UDP under hostile packets from two peers, then a good client whose
/// every byte the server verifies.
#[test]
fn sctp_perf_server_survives_a_hostile_soak() {
    const SCTP_PORT: u16 = 5821;
    let mut srv = Server::sctp_perf(SCTP_PORT);
    let seed = seed_for("sctp-perf");
    let until = Instant::now() + soak_time();
    let udp_port = srv.port;
    let attacks = run_peers(seed, until, move |rng| {
        thread_local! {
            static UDP: std::net::UdpSocket = {
                let udp = std::net::UdpSocket::bind("127.0.0.1:0").expect("udp");
                udp.set_nonblocking(true).expect("non-blocking");
                udp
            };
        }
        UDP.with(|udp| sctp_attack(rng, udp, udp_port, SCTP_PORT));
    });
    eprintln!(
        "sctp-perf: {attacks} hostile packets in {:?} (seed {seed})",
        soak_time()
    );
    assert!(
        srv.alive(),
        "sctp-perf died under {attacks} hostile packets (seed {seed})"
    );
    let good = sctp_perf_client(SCTP_PORT, udp_port)
        .args(["-n", "1M", "--verify"])
        .output()
        .expect("client");
    let exit = srv.wait();
    let (status, out) = (exit.status, exit.text());
    assert!(
        good.status.success(),
        "good client after the soak: {}{}\nserver:\n{out}",
        String::from_utf8_lossy(&good.stdout),
        String::from_utf8_lossy(&good.stderr)
    );
    assert!(status.success(), "sctp-perf server: {status}\n{out}");
}
