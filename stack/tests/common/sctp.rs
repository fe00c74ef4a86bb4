//! Test harness: two engines over the SCTP LLP (RFC 5043) back to back. Messages move from
//! one engine's `poll_message` to the other's `handle_message`; with a shuffle seed every
//! batch is delivered in a random order (SCTP unordered delivery). Every message that
//! crossed is kept for the tests to decode.

use stack::llp::sctp::SctpConfig;
use stack::{QpState, Setup};

use super::{Rng, Side, Wire};

/// Default largest DDP segment.
pub const SEG: usize = 1400;

/// An SCTP LLP configuration with `SEG`-octet segments.
pub fn cfg(ird: u16, ord: u16, pd: &[u8]) -> SctpConfig {
    SctpConfig {
        ird,
        ord,
        private_data: pd.to_vec(),
        max_segment: SEG,
        enhanced: true,
        stream: 0,
    }
}

/// A captured message: (from a?, ppid, data).
pub type Messages = Vec<(bool, u32, Vec<u8>)>;

/// Two engines over the SCTP LLP.
pub struct SctpPair {
    pub a: Side,
    pub b: Side,
    rng: Option<Rng>,
    /// Every message that crossed: (from a, PPID, data).
    pub wire: Messages,
}

impl SctpPair {
    pub fn new(ca: SctpConfig, cb: SctpConfig, shuffle_seed: Option<u64>) -> SctpPair {
        SctpPair {
            a: Side::new(1, Setup::SctpInitiator(ca), |_| {}),
            b: Side::new(2, Setup::SctpResponder(cb), |_| {}),
            rng: shuffle_seed.map(Rng::new),
            wire: Vec::new(),
        }
    }

    /// Established with IRD = ORD = 8; `seed`: shuffle every batch.
    pub fn established(seed: Option<u64>) -> SctpPair {
        let mut p = SctpPair::new(cfg(8, 8, b"hi"), cfg(8, 8, b"yo"), seed);
        p.pump();
        assert_eq!(p.a.eng.state(), QpState::Rts);
        assert_eq!(p.b.eng.state(), QpState::Rts);
        p
    }

    /// Takes every message `side` has for SCTP.
    pub fn take(side: &mut Side) -> Vec<(u16, u32, Vec<u8>)> {
        let mut v = Vec::new();
        while let Some((s, ppid, d)) = side.eng.poll_message() {
            v.push((s, ppid, d.to_vec()));
            side.eng.message_done();
        }
        v
    }

    /// Moves messages both ways until none is left; each batch is delivered shuffled.
    pub fn pump(&mut self) {
        for _ in 0..100_000 {
            let ab = Self::take(&mut self.a);
            let ba = Self::take(&mut self.b);
            if ab.is_empty() && ba.is_empty() {
                break;
            }
            for (from_a, mut batch) in [(true, ab), (false, ba)] {
                if let Some(r) = self.rng.as_mut() {
                    for i in (1..batch.len()).rev() {
                        let j = (r.next() % (i as u64 + 1)) as usize;
                        batch.swap(i, j);
                    }
                }
                for (_, ppid, d) in batch {
                    self.wire.push((from_a, ppid, d.clone()));
                    let to = if from_a { &mut self.b } else { &mut self.a };
                    to.eng.handle_message(stack::Instant::ZERO, ppid, true, &d);
                }
            }
        }
        for s in [&mut self.a, &mut self.b] {
            while let Some(e) = s.eng.poll_event() {
                s.events.push(e);
            }
        }
    }
}

impl Wire for SctpPair {
    fn a(&mut self) -> &mut Side {
        &mut self.a
    }

    fn b(&mut self) -> &mut Side {
        &mut self.b
    }

    fn pump(&mut self) {
        SctpPair::pump(self);
    }
}

/// Whether this kernel makes SCTP sockets.
pub fn kernel_has_sctp() -> bool {
    socket2::Socket::new(
        socket2::Domain::IPV4,
        socket2::Type::STREAM,
        Some(socket2::Protocol::from(132)),
    )
    .is_ok()
}

/// For a test that needs the kernel's SCTP: whether this kernel has it. Where
/// `SOFTRNIC_REQUIRE_KERNEL_SCTP` is set (the interop lab's guest) a kernel without it fails
/// the test instead of letting it pass without running.
pub fn kernel_sctp_for_test() -> bool {
    let has = kernel_has_sctp();
    assert!(
        has || std::env::var_os("SOFTRNIC_REQUIRE_KERNEL_SCTP").is_none(),
        "SOFTRNIC_REQUIRE_KERNEL_SCTP is set but this kernel makes no SCTP socket"
    );
    has
}
