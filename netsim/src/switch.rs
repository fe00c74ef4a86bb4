//! A learning Ethernet switch, itself just a [`Node`].
//!
//! A switched segment is a [`Switch`] with one link from each host interface to a switch port;
//! each of those links has its own parameters and impairments. The switch forwards instantly
//! (no processing delay of its own; give the links delay instead).

use std::collections::{BTreeMap, VecDeque};

use crate::link::ETHERNET_HEADER_LEN;
use crate::node::Node;
use crate::time::Instant;

/// Counters of a [`Switch`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SwitchCounters {
    /// Frames received on any port.
    pub received: u64,
    /// Frames forwarded to a single learned port.
    pub forwarded: u64,
    /// Frames flooded (broadcast, multicast or unknown destination).
    pub flooded: u64,
    /// Frames whose destination was learned on the port they came in on.
    pub filtered: u64,
    /// Frames shorter than an Ethernet header.
    pub runts: u64,
}

/// A learning switch with a fixed number of ports.
///
/// It learns the source address of each frame on the port it arrived on (no ageing; an
/// address that moves is re-learned on its new port; a port whose link goes down forgets its
/// addresses). Frames to a learned unicast address go out of that port only; broadcast,
/// multicast and unknown destinations are flooded to every other port in ascending port order.
#[derive(Debug)]
pub struct Switch {
    ports: usize,
    table: BTreeMap<[u8; 6], usize>,
    out: VecDeque<(usize, Vec<u8>)>,
    counters: SwitchCounters,
}

impl Switch {
    /// A switch with `ports` ports (interfaces `0..ports`).
    pub fn new(ports: usize) -> Switch {
        Switch {
            ports,
            table: BTreeMap::new(),
            out: VecDeque::new(),
            counters: Default::default(),
        }
    }

    /// The port `mac` was learned on, if any.
    pub fn lookup(&self, mac: [u8; 6]) -> Option<usize> {
        self.table.get(&mac).copied()
    }

    /// The switch's counters.
    pub fn counters(&self) -> SwitchCounters {
        self.counters
    }
}

fn mac_at(frame: &[u8], offset: usize) -> Option<[u8; 6]> {
    frame.get(offset..offset + 6)?.try_into().ok()
}

impl Node for Switch {
    fn interface_count(&self) -> usize {
        self.ports
    }

    fn handle_frame(&mut self, _now: Instant, port: usize, frame: Vec<u8>) {
        self.counters.received += 1;
        let (Some(dst), Some(src)) = (mac_at(&frame, 0), mac_at(&frame, 6)) else {
            self.counters.runts += 1;
            return;
        };
        if frame.len() < ETHERNET_HEADER_LEN {
            self.counters.runts += 1;
            return;
        }
        // Group bit clear: a unicast source worth learning.
        if src[0] & 1 == 0 {
            self.table.insert(src, port);
        }
        let known = if dst[0] & 1 == 0 {
            self.table.get(&dst).copied()
        } else {
            None
        };
        match known {
            Some(out) if out == port => self.counters.filtered += 1,
            Some(out) => {
                self.counters.forwarded += 1;
                self.out.push_back((out, frame));
            }
            None => {
                self.counters.flooded += 1;
                for out in (0..self.ports).filter(|&p| p != port) {
                    self.out.push_back((out, frame.clone()));
                }
            }
        }
    }

    fn poll_transmit(&mut self, _now: Instant) -> Option<(usize, Vec<u8>)> {
        self.out.pop_front()
    }

    fn poll_timeout(&mut self) -> Option<Instant> {
        None
    }

    fn handle_timeout(&mut self, _now: Instant) {}

    fn handle_link_change(&mut self, _now: Instant, port: usize, up: bool) {
        if !up {
            self.table.retain(|_, p| *p != port);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(dst: [u8; 6], src: [u8; 6]) -> Vec<u8> {
        let mut f = Vec::new();
        f.extend_from_slice(&dst);
        f.extend_from_slice(&src);
        f.extend_from_slice(&[0x08, 0x00, 0xAA]);
        f
    }

    const A: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const B: [u8; 6] = [2, 0, 0, 0, 0, 2];
    const BCAST: [u8; 6] = [0xff; 6];

    fn drain(s: &mut Switch) -> Vec<(usize, Vec<u8>)> {
        std::iter::from_fn(|| s.poll_transmit(Instant::ZERO)).collect()
    }

    #[test]
    fn floods_unknown_then_forwards_learned() {
        let mut s = Switch::new(3);
        s.handle_frame(Instant::ZERO, 0, frame(B, A));
        let out = drain(&mut s);
        assert_eq!(out.iter().map(|(p, _)| *p).collect::<Vec<_>>(), vec![1, 2]);
        assert_eq!(s.lookup(A), Some(0));
        s.handle_frame(Instant::ZERO, 2, frame(A, B));
        assert_eq!(drain(&mut s), vec![(0, frame(A, B))]);
        s.handle_frame(Instant::ZERO, 1, frame(BCAST, [2, 0, 0, 0, 0, 3]));
        assert_eq!(drain(&mut s).len(), 2);
        assert_eq!(s.counters().flooded, 2);
        assert_eq!(s.counters().forwarded, 1);
    }

    #[test]
    fn filters_same_port_and_drops_runts() {
        let mut s = Switch::new(2);
        s.handle_frame(Instant::ZERO, 0, frame(B, A));
        s.handle_frame(Instant::ZERO, 0, frame(BCAST, B));
        drain(&mut s);
        s.handle_frame(Instant::ZERO, 0, frame(B, A));
        assert!(drain(&mut s).is_empty());
        assert_eq!(s.counters().filtered, 1);
        s.handle_frame(Instant::ZERO, 0, vec![1, 2, 3]);
        assert_eq!(s.counters().runts, 1);
        s.handle_link_change(Instant::ZERO, 0, false);
        assert_eq!(s.lookup(A), None);
    }
}
