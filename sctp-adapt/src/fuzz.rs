//! Entry points for fuzzers: arbitrary bytes in, no panic out.
//!
//! - [`packet`]: the codec alone (see [`wire::fuzz_roundtrip`]).
//! - [`association`]: a live association under attack. Two endpoints complete a handshake
//!   in memory, then the input is cut into packets that are delivered to the responder. So
//!   that the fuzzer reaches the state machine instead of failing the cheap checks, each
//!   packet's ports and checksum are corrected and, unless the packet's first byte says
//!   otherwise, its verification tag is set to the right one. Between packets the engine runs
//!   its timers and both sides exchange whatever they send.

use std::net::SocketAddr;
use std::time::Duration;

use crate::config::EndpointConfig;
use crate::endpoint::Endpoint;
use crate::time::Instant;
use crate::wire;

/// Fuzzes the packet codec with `data`.
pub fn packet(data: &[u8]) {
    let _ = wire::fuzz_roundtrip(data);
}

fn pump(a: &mut Endpoint, b: &mut Endpoint, now: Instant) {
    for _ in 0..64 {
        let mut moved = false;
        while let Some(t) = a.poll_transmit(now) {
            b.handle_packet(now, t.remote, t.local, &t.bytes);
            moved = true;
        }
        while let Some(t) = b.poll_transmit(now) {
            a.handle_packet(now, t.remote, t.local, &t.bytes);
            moved = true;
        }
        while a.poll_event().is_some() {}
        while b.poll_event().is_some() {}
        if !moved {
            break;
        }
    }
}

/// Fuzzes an established association with `data`: a sequence of packets, each preceded by
/// a 2-byte big-endian length and a control byte (bit 0: keep the verification tag as given;
/// bits 1-7: milliseconds to let pass before delivery).
pub fn association(data: &[u8]) {
    let a_addr: SocketAddr = SocketAddr::from(([10, 0, 0, 1], 0));
    let b_addr: SocketAddr = SocketAddr::from(([10, 0, 0, 2], 0));
    let mut a = Endpoint::new(EndpointConfig::new(1000, vec![a_addr], 1));
    let mut b = Endpoint::new(EndpointConfig::new(2000, vec![b_addr], 2));
    let mut now = Instant::ZERO;
    let Ok(ia) = a.connect(now, b_addr, 2000) else {
        return;
    };
    pump(&mut a, &mut b, now);
    let Some(ib) = b.accept() else {
        return;
    };
    let tag = b.association(ib).map_or(0, |x| x.local_tag());
    if let Some(x) = a.association_mut(ia) {
        let _ = x.send(0, 0, false, b"seed data");
    }
    pump(&mut a, &mut b, now);
    let mut rest = data;
    while rest.len() >= 3 {
        let len = usize::from(u16::from_be_bytes([rest[0], rest[1]]));
        let ctl = rest[2];
        rest = &rest[3..];
        let take = len.min(rest.len());
        let mut pkt = rest[..take].to_vec();
        rest = &rest[take..];
        if pkt.len() >= wire::COMMON_HEADER_LEN {
            pkt[0..2].copy_from_slice(&1000u16.to_be_bytes());
            pkt[2..4].copy_from_slice(&2000u16.to_be_bytes());
            if ctl & 1 == 0 {
                pkt[4..8].copy_from_slice(&tag.to_be_bytes());
            }
            wire::finish_packet(&mut pkt);
        }
        now += Duration::from_millis(u64::from(ctl >> 1));
        b.handle_packet(now, b_addr, a_addr, &pkt);
        if b.poll_timeout().is_some_and(|t| t <= now) {
            b.handle_timeout(now);
        }
        if a.poll_timeout().is_some_and(|t| t <= now) {
            a.handle_timeout(now);
        }
        pump(&mut a, &mut b, now);
        if let Some(x) = b.association_mut(ib) {
            while x.recv().is_some() {}
        }
    }
}
