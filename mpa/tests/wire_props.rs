//! Property tests for MPA frames and FPDU framing (RFC 5044 §4, §7.1.1; RFC 6581).

use std::time::Instant;

use mpa::crc;
use mpa::fpdu::{CrcStatus, DeframeError, Deframer, FpduEncoder, RxConfig, TxConfig};
use mpa::frame::{
    ConnFrame, ConnFramePacket, EnhancedData, FrameError, FrameKind, HEADER_LEN, REPLY_KEY,
    REQUEST_KEY, RtrSet,
};
use mpa::negotiate::{self, Config};
use proptest::prelude::*;

fn enhanced_strategy() -> impl Strategy<Value = EnhancedData> {
    (
        0u16..=0x3fff,
        0u16..=0x3fff,
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(ird, ord, p2p, send, write, read)| EnhancedData {
            ird,
            ord,
            p2p,
            rtr: RtrSet { send, write, read },
        })
}

/// Frames that `parse` must reproduce exactly (see `ConnFrame::is_canonical`).
fn frame_strategy() -> impl Strategy<Value = ConnFrame> {
    (
        any::<bool>(),
        any::<[bool; 4]>(),
        0u8..16,
        prop_oneof![Just(1u8), Just(2u8), any::<u8>()],
        proptest::option::of(enhanced_strategy()),
        proptest::collection::vec(any::<u8>(), 0..=512),
    )
        .prop_map(|(req, [m, c, r, h], reserved, revision, enh, mut pd)| {
            let split = revision == 2 && h;
            let enhanced = match (split, enh) {
                (true, Some(e)) => {
                    pd.truncate(508);
                    Some(e)
                }
                (true, None) => {
                    pd.truncate(3);
                    None
                }
                (false, _) => None,
            };
            ConnFrame {
                kind: if req {
                    FrameKind::Request
                } else {
                    FrameKind::Reply
                },
                markers: m,
                crc: c,
                reject: r,
                enhanced_flag: h,
                reserved,
                revision,
                enhanced,
                private_data: pd,
            }
        })
}

/// Byte strings that often start like an MPA frame.
fn frameish_bytes() -> impl Strategy<Value = Vec<u8>> {
    (
        0u8..3,
        proptest::collection::vec(any::<u8>(), 0..600),
        any::<u16>(),
    )
        .prop_map(|(k, tail, pd_len)| {
            let mut v = match k {
                0 => REQUEST_KEY.to_vec(),
                1 => REPLY_KEY.to_vec(),
                _ => Vec::new(),
            };
            v.extend_from_slice(&tail);
            if k < 2 && v.len() >= HEADER_LEN && pd_len % 2 == 0 {
                // Make PD_Length plausible half of the time.
                let pd = pd_len % 520;
                v[18..20].copy_from_slice(&pd.to_be_bytes());
            }
            v
        })
}

proptest! {
    /// RFC 5044 §7.1.1 / RFC 6581: every frame round-trips (emit, parse, equal)
    /// and parse consumes exactly the emitted length, even with trailing octets.
    #[test]
    fn rfc5044_7_1_1_frame_round_trip(f in frame_strategy(), trailer in proptest::collection::vec(any::<u8>(), 0..8)) {
        prop_assert!(f.is_canonical());
        let mut bytes = f.to_bytes().expect("canonical frames emit");
        prop_assert_eq!(bytes.len(), f.buffer_len());
        let len = bytes.len();
        bytes.extend_from_slice(&trailer);
        let (g, used) = ConnFrame::parse(&bytes).expect("parses");
        prop_assert_eq!(used, len);
        prop_assert_eq!(&g, &f);
        let p = ConnFramePacket::new_checked(&bytes[..]).expect("checked");
        prop_assert_eq!(p.frame_len(), len);
        prop_assert_eq!(p.enhanced_data(), f.enhanced);
        prop_assert_eq!(p.ulp_private_data(), &f.private_data[..]);
    }

    /// Any truncation of a valid frame is `Truncated` with the exact shortfall,
    /// never a protocol error.
    #[test]
    fn truncated_frames_ask_for_more(f in frame_strategy()) {
        let bytes = f.to_bytes().expect("emit");
        for k in 0..bytes.len() {
            let needed = if k < HEADER_LEN { HEADER_LEN - k } else { bytes.len() - k };
            prop_assert_eq!(ConnFrame::parse(&bytes[..k]), Err(FrameError::Truncated { needed }));
        }
    }

    /// Garbage never panics; whatever parses re-emits to the same octets, and
    /// negotiation on it returns normally.
    #[test]
    fn garbage_frames_never_panic(bytes in frameish_bytes()) {
        let p = ConnFramePacket::new_unchecked(&bytes[..]);
        let _ = (p.kind(), p.flags(), p.revision(), p.pd_length(), p.private_data(), p.enhanced_data(), p.ulp_private_data());
        match ConnFrame::parse(&bytes) {
            Ok((f, used)) => {
                prop_assert_eq!(f.to_bytes().expect("re-emit"), bytes[..used].to_vec());
                let cfg = Config::default();
                let _ = negotiate::respond(&cfg, &f);
                let sent = negotiate::request(&cfg).expect("valid");
                let _ = negotiate::complete(&cfg, &sent, &f);
            }
            Err(FrameError::Truncated { needed }) => prop_assert!(needed > 0),
            Err(_) => {}
        }
    }

    /// The deframer never panics on arbitrary input in arbitrary chunks.
    #[test]
    fn garbage_streams_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..3000),
        crc in any::<bool>(), markers in any::<bool>(), offset in 0u32..512, chunk in 1usize..50,
    ) {
        let mut d = Deframer::new(RxConfig::new(crc, markers).with_start_offset(offset));
        for c in bytes.chunks(chunk) {
            d.push(c);
        }
        for r in d.by_ref() {
            if let Err(e) = r {
                let _ = (e.to_string(), e.term_code(), e.is_fatal());
            }
        }
    }
}

/// Test content: deterministic but distinct per FPDU.
fn ulpdu(i: usize, len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|j| {
            (j as u8)
                .wrapping_mul(31)
                .wrapping_add(seed)
                .wrapping_add(i as u8)
        })
        .collect()
}

struct Encoded {
    wire: Vec<u8>,
    ulpdus: Vec<Vec<u8>>,
    starts: Vec<usize>,
    lens: Vec<usize>,
}

fn encode_all(cfg: TxConfig, offset: u32, sizes: &[usize], seed: u8) -> Encoded {
    let mut e = FpduEncoder::with_offset(cfg, offset);
    let mut wire = Vec::new();
    let mut ulpdus = Vec::new();
    let mut starts = Vec::new();
    let mut lens = Vec::new();
    for (i, &n) in sizes.iter().enumerate() {
        let u = ulpdu(i, n, seed);
        // Gather: split the ULPDU in a "header" and a "payload" part.
        let (h, p) = u.split_at(n.min(14));
        let predicted = e.fpdu_len(n);
        starts.push(wire.len());
        let written = e.encode(&[h, p], &mut wire).expect("encodable");
        assert_eq!(written, predicted);
        lens.push(written);
        ulpdus.push(u);
    }
    Encoded {
        wire,
        ulpdus,
        starts,
        lens,
    }
}

fn is_marker_pos(offset: u32, p: usize) -> bool {
    (offset as usize + p).is_multiple_of(512)
}

proptest! {
    /// RFC 5044 §4.1, §4.3, §4.4: encode then deframe returns the same ULPDUs, offsets
    /// and wire lengths for any sizes, CRC/marker settings, start offset and
    /// re-chunking of the stream (including one octet at a time).
    #[test]
    fn rfc5044_4_1_fpdu_round_trip_any_chunking(
        sizes in proptest::collection::vec(0usize..4000, 1..6),
        crc in any::<bool>(), markers in any::<bool>(),
        offset in 0u32..512, seed in any::<u8>(),
        chunks in proptest::collection::vec(1usize..700, 1..12), one_by_one in any::<bool>(),
    ) {
        let enc = encode_all(TxConfig { crc, markers }, offset, &sizes, seed);
        let mut d = Deframer::new(RxConfig::new(crc, markers).with_start_offset(offset));
        if one_by_one {
            for b in &enc.wire {
                d.push(std::slice::from_ref(b));
            }
        } else {
            let mut rest = &enc.wire[..];
            for c in chunks.iter().cycle() {
                if rest.is_empty() {
                    break;
                }
                let (now, later) = rest.split_at((*c).min(rest.len()));
                d.push(now);
                rest = later;
            }
        }
        prop_assert!(!d.in_progress());
        let got: Vec<_> = d.by_ref().collect();
        prop_assert_eq!(got.len(), sizes.len());
        for (i, r) in got.into_iter().enumerate() {
            let f = r.expect("clean stream");
            prop_assert_eq!(&f.ulpdu, &enc.ulpdus[i]);
            prop_assert_eq!(f.stream_offset, enc.starts[i] as u64);
            prop_assert_eq!(f.wire_len, enc.lens[i]);
            let expected_markers = if markers {
                (enc.starts[i]..enc.starts[i] + enc.lens[i]).filter(|p| is_marker_pos(offset, *p)).count()
            } else {
                0
            };
            prop_assert_eq!(f.markers, expected_markers);
            if crc {
                prop_assert_eq!(f.crc, CrcStatus::Good);
            } else {
                prop_assert_eq!(f.crc, CrcStatus::NotNegotiated { field: [0; 4] });
            }
        }
    }

    /// RFC 5044 §4.2 / §4.3: with markers on, a marker sits at every stream position
    /// ≡ 0 (mod 512) from the origin — and nowhere else — with zero reserved
    /// bits and an FPDUPTR of 0 when it opens an FPDU, otherwise the distance
    /// back to that FPDU's ULPDU_Length. Checked against an independent
    /// marker-stripping parser; with 4-aligned phases the CRC covers all octets
    /// before the last four.
    #[test]
    fn rfc5044_4_3_markers_every_512_with_correct_pointer(
        sizes in proptest::collection::vec(0usize..3000, 1..6),
        crc in any::<bool>(), offset in 0u32..512, seed in any::<u8>(),
    ) {
        let enc = encode_all(TxConfig { crc, markers: true }, offset, &sizes, seed);
        let mut stripped = Vec::with_capacity(enc.wire.len());
        let mut p = 0;
        while p < enc.wire.len() {
            if is_marker_pos(offset, p) {
                let fi = enc.starts.iter().rposition(|s| *s <= p).expect("inside an FPDU");
                let start = enc.starts[fi];
                prop_assert!(p < start + enc.lens[fi]);
                let m = &enc.wire[p..p + 4];
                prop_assert_eq!(&m[..2], &[0u8, 0][..]);
                let ptr = usize::from(u16::from_be_bytes([m[2], m[3]]));
                let header = start + if is_marker_pos(offset, start) { 4 } else { 0 };
                let expected = if p == start { 0 } else { p - header };
                prop_assert_eq!(ptr, expected, "marker at {}", p);
                p += 4;
            } else {
                stripped.push(enc.wire[p]);
                p += 1;
            }
        }
        // Naive parse of the marker-free stream.
        let mut q = 0;
        for u in &enc.ulpdus {
            let len = usize::from(u16::from_be_bytes([stripped[q], stripped[q + 1]]));
            prop_assert_eq!(len, u.len());
            prop_assert_eq!(&stripped[q + 2..q + 2 + len], &u[..]);
            let pad = (4 - (2 + len) % 4) % 4;
            prop_assert!(stripped[q + 2 + len..q + 2 + len + pad].iter().all(|b| *b == 0));
            q += 2 + len + pad + 4;
        }
        prop_assert_eq!(q, stripped.len());
        if crc && offset % 4 == 0 {
            for (s, l) in enc.starts.iter().zip(&enc.lens) {
                let f = &enc.wire[*s..s + l];
                let (body, field) = f.split_at(l - 4);
                prop_assert_eq!(field, &crc::to_wire(crc::crc32c(body))[..]);
            }
        }
    }

    /// RFC 5044 §4.4: flipping any single bit of a CRC-protected stream (4-aligned
    /// marker phase, as on a real connection) is detected — an error, or an FPDU
    /// left incomplete — and no FPDU that differs from what was sent is delivered.
    #[test]
    fn rfc5044_4_4_single_bit_flip_is_caught(
        sizes in proptest::collection::vec(0usize..2000, 1..5),
        markers in any::<bool>(), phase in 0u32..128, seed in any::<u8>(), bit in any::<usize>(),
    ) {
        let offset = phase * 4;
        let enc = encode_all(TxConfig { crc: true, markers }, offset, &sizes, seed);
        let mut wire = enc.wire.clone();
        let bit = bit % (wire.len() * 8);
        wire[bit / 8] ^= 1 << (bit % 8);
        let mut d = Deframer::new(RxConfig::new(true, markers).with_start_offset(offset));
        d.push(&wire);
        let results: Vec<_> = d.by_ref().collect();
        let mut any_error = false;
        for r in &results {
            match r {
                Ok(f) => {
                    let i = enc.starts.iter().position(|s| *s as u64 == f.stream_offset);
                    let i = i.expect("delivered FPDUs start where one was sent");
                    prop_assert_eq!(&f.ulpdu, &enc.ulpdus[i]);
                    prop_assert_eq!(f.wire_len, enc.lens[i]);
                    prop_assert!(!(enc.starts[i]..enc.starts[i] + enc.lens[i]).contains(&(bit / 8)));
                }
                Err(_) => any_error = true,
            }
        }
        prop_assert!(any_error || d.in_progress());
    }
}

/// RFC 5044 §4.1 / §8 (code 3): a corrupted ULPDU_Length beyond the configured maximum stops
/// the deframer with a fatal `BadLength`.
#[test]
fn rfc5044_8_length_beyond_limit_is_fatal_mid_stream() {
    let enc = encode_all(TxConfig::default(), 0, &[10, 20, 30], 1);
    let mut wire = enc.wire.clone();
    let second = enc.starts[1];
    wire[second] = 0xff;
    let mut d = Deframer::new(RxConfig::new(false, false).with_max_ulpdu(1442));
    d.push(&wire);
    let results: Vec<_> = d.by_ref().collect();
    assert_eq!(results.len(), 2);
    assert_eq!(
        results[0].as_ref().expect("first fine").ulpdu,
        enc.ulpdus[0]
    );
    match &results[1] {
        Err(e @ DeframeError::BadLength { offset, .. }) => {
            assert_eq!(*offset, second as u64);
            assert!(e.is_fatal());
        }
        other => panic!("unexpected {other:?}"),
    }
}

/// The deframer is linear: a 1 MiB stream (CRC and markers on, siw-sized
/// FPDUs) fed one octet at a time deframes well under a second.
#[test]
fn deframe_one_mib_in_single_octets_quickly() {
    let cfg = TxConfig {
        crc: true,
        markers: true,
    };
    let mut sizes = Vec::new();
    let mut total = 0;
    let mut i = 0usize;
    while total < 1 << 20 {
        let n = 1 + (i * 7919) % 1430;
        sizes.push(n);
        total += n;
        i += 1;
    }
    let enc = encode_all(cfg, 0, &sizes, 9);
    let start = Instant::now();
    let mut d = Deframer::new(RxConfig::new(true, true));
    let mut got = 0usize;
    let mut count = 0usize;
    for b in &enc.wire {
        d.push(std::slice::from_ref(b));
        for r in d.by_ref() {
            got += r.expect("clean").ulpdu.len();
            count += 1;
        }
    }
    let elapsed = start.elapsed();
    assert_eq!(got, total);
    assert_eq!(count, sizes.len());
    assert!(
        elapsed.as_millis() < 1000,
        "deframing {} octets one at a time took {elapsed:?}",
        enc.wire.len()
    );
}
