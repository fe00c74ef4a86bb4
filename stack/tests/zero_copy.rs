//! Zero-copy transmit (`QpConfig::zero_copy_tx`, `QpEngine::transmit_with`): payloads go
//! out as ranges of registered memory between generated headers and PAD + CRC, and the
//! wire must be exactly what the copying path produces — same FPDUs, same CRCs — however
//! the transport cuts the writes, with completions at the same byte counts.

mod common;

use common::{Rng, Side, flatten, pattern, session};
use stack::mem::TxPart;
use stack::mpa::{Role, RxConfig};
use stack::{MemoryRegion, SendWr, Setup};

/// An established initiator with EMSS 9000, copying or zero-copy, and a 96 KiB source
/// region holding `pattern(.., 7)`.
fn side(zero_copy: bool, crc: bool, markers: bool) -> (Side, MemoryRegion) {
    let s = session(Role::Initiator, crc, markers, markers, 8, 8);
    let side = Side::new(1, Setup::Established(s), |c| {
        c.emss = 9000;
        c.zero_copy_tx = zero_copy;
    });
    let mr = side.mr(96 * 1024);
    mr.buf().write_at(0, &pattern(96 * 1024, 7)).unwrap();
    (side, mr)
}

/// The same mix on every engine: a 64 KiB Write, a 3-SGE Send, a small Write (copied even
/// in zero-copy mode), a Write of an odd length (PAD), all signaled.
fn post_mix(s: &mut Side, mr: &MemoryRegion) {
    let (stag, to) = (0x1234_5600, 0x10_0000);
    let wrs = [
        SendWr::write(1, vec![mr.sge(0, 64 * 1024)], stag, to),
        SendWr::send(
            2,
            vec![mr.sge(100, 3000), mr.sge(50_000, 7001), mr.sge(9, 2500)],
        ),
        SendWr::write(3, vec![mr.sge(5, 100)], stag, to),
        SendWr::write(4, vec![mr.sge(3, 12_345)], stag, to),
    ];
    for wr in wrs {
        s.eng.post_send(wr).unwrap();
    }
}

/// Drains an engine: returns the wire and, after every accepted chunk, (bytes so far,
/// completions so far). `step` says how many bytes the transport takes of what it is
/// offered; `vectored` takes them through `transmit_with`, else `poll_transmit`.
fn drain(
    s: &mut Side,
    vectored: bool,
    mut step: impl FnMut(usize) -> usize,
    saw_mem: &mut bool,
) -> (Vec<u8>, Vec<(usize, usize)>) {
    let mut wire = Vec::new();
    let mut trace = Vec::new();
    let mut wcs = 0;
    loop {
        let chunk = if vectored {
            let mut taken = Vec::new();
            let r = s.eng.transmit_with(|parts| {
                *saw_mem |= parts.iter().any(|p| matches!(p, TxPart::Mem { .. }));
                let n = step(parts.iter().map(|p| p.len()).sum());
                taken = flatten(parts, n);
                Ok::<usize, ()>(n)
            });
            if r.is_none() {
                break;
            }
            taken
        } else {
            let Some(b) = s.eng.poll_transmit() else {
                break;
            };
            let n = step(b.len());
            let c = b[..n].to_vec();
            s.eng.transmit_done(n);
            c
        };
        wire.extend_from_slice(&chunk);
        wcs += s.send_wcs().len();
        trace.push((wire.len(), wcs));
    }
    (wire, trace)
}

/// Completions seen at each byte count of `trace`, as a function of the byte count.
fn wcs_at(trace: &[(usize, usize)], bytes: usize) -> usize {
    trace
        .iter()
        .take_while(|(b, _)| *b <= bytes)
        .last()
        .map_or(0, |(_, w)| *w)
}

/// RFC 5044 §4.4 / RFC 5041 §5: zero-copy transmit puts the same FPDUs on the wire as the
/// copying path (CRC on and off), resuming correctly after short writes that end inside a
/// header, a payload range or a CRC; payload ranges really are offered as registered
/// memory; and a Write or Send completes only once its last byte was accepted, at exactly
/// the byte count where the copying path completes it.
#[test]
fn rfc5044_4_4_zero_copy_wire_identical_with_short_writes() {
    for crc in [true, false] {
        let (mut copy, mr_c) = side(false, crc, false);
        post_mix(&mut copy, &mr_c);
        let mut unused = false;
        let (want, _) = drain(&mut copy, false, |n| n, &mut unused);
        assert!(!unused);
        // The reference decodes as the four messages.
        let msgs = common::decode(&want, RxConfig::new(crc, false), false);
        let payload: usize = msgs.iter().map(|(_, p)| p.len()).sum();
        assert_eq!(payload, 64 * 1024 + 3000 + 7001 + 2500 + 100 + 12_345);

        for seed in [1u64, 2, 3] {
            // Byte-at-a-time bursts and random cuts, both engines cut identically.
            let mut r1 = Rng::new(seed);
            let mut r2 = Rng::new(seed);
            let (mut c, mc) = side(false, crc, false);
            post_mix(&mut c, &mc);
            let (wire_c, trace_c) = drain(&mut c, false, |n| r1.between1(n.min(5000)), &mut unused);
            let (mut z, mz) = side(true, crc, false);
            post_mix(&mut z, &mz);
            let mut saw_mem = false;
            let (wire_z, trace_z) = drain(&mut z, true, |n| r2.between1(n.min(5000)), &mut saw_mem);
            assert!(saw_mem, "payloads offered as registered memory");
            assert_eq!(wire_c, want, "copy path, seed {seed}");
            assert_eq!(wire_z, want, "zero-copy path, crc {crc} seed {seed}");
            for &(bytes, _) in trace_c.iter().chain(&trace_z) {
                assert_eq!(
                    wcs_at(&trace_z, bytes),
                    wcs_at(&trace_c, bytes),
                    "completions after {bytes} bytes"
                );
            }
            assert_eq!(trace_z.last().map(|t| t.1), Some(4));
            // Nothing completes before its last FPDU is accepted: the 64 KiB Write spans
            // several 9000-byte FPDUs, so after the first FPDU nothing has completed.
            assert_eq!(wcs_at(&trace_z, 9000), 0);
        }
    }
}

/// A driver that mixes `poll_transmit` (which copies a registered range when it comes up)
/// with `transmit_with` on a zero-copy engine still sends the exact stream.
#[test]
fn zero_copy_engine_served_by_poll_transmit_and_transmit_with() {
    let (mut copy, mc) = side(false, true, false);
    post_mix(&mut copy, &mc);
    let mut unused = false;
    let (want, _) = drain(&mut copy, false, |n| n, &mut unused);

    let (mut z, mz) = side(true, true, false);
    post_mix(&mut z, &mz);
    let mut rng = Rng::new(9);
    let mut wire = Vec::new();
    let mut i = 0u32;
    loop {
        i += 1;
        let chunk = if i.is_multiple_of(2) {
            let Some(b) = z.eng.poll_transmit() else {
                break;
            };
            let n = rng.between1(b.len());
            let c = b[..n].to_vec();
            z.eng.transmit_done(n);
            c
        } else {
            let mut taken = Vec::new();
            let r = z.eng.transmit_with(|parts| {
                let n = rng.between1(parts.iter().map(|p| p.len()).sum());
                taken = flatten(parts, n);
                Ok::<usize, ()>(n)
            });
            if r.is_none() {
                break;
            }
            taken
        };
        wire.extend_from_slice(&chunk);
    }
    assert_eq!(wire, want);
    assert_eq!(z.send_wcs().len(), 4);
}

/// RFC 5044 §4.3: with markers on, payloads are cut by markers, so zero-copy transmit
/// falls back to copying (no registered ranges offered) and the wire is unchanged.
#[test]
fn rfc5044_4_3_markers_fall_back_to_copying() {
    let (mut copy, mc) = side(false, true, true);
    post_mix(&mut copy, &mc);
    let mut unused = false;
    let (want, _) = drain(&mut copy, false, |n| n, &mut unused);
    let (mut z, mz) = side(true, true, true);
    post_mix(&mut z, &mz);
    let mut saw_mem = false;
    let (wire, trace) = drain(&mut z, true, |n| n, &mut saw_mem);
    assert!(!saw_mem, "markers on: nothing offered as registered memory");
    assert_eq!(wire, want);
    assert_eq!(trace.last().map(|t| t.1), Some(4));
}

/// A write error (e.g. the socket would block) takes nothing: the same gather list is
/// offered again, and the stream continues unchanged.
#[test]
fn zero_copy_failed_write_takes_nothing() {
    let (mut copy, mc) = side(false, true, false);
    post_mix(&mut copy, &mc);
    let mut unused = false;
    let (want, _) = drain(&mut copy, false, |n| n, &mut unused);
    let (mut z, mz) = side(true, true, false);
    post_mix(&mut z, &mz);
    let mut wire = Vec::new();
    let mut wcs = 0;
    let mut fail = true;
    loop {
        let mut taken = Vec::new();
        let r = z.eng.transmit_with(|parts| {
            if fail {
                return Err("would block");
            }
            let n = parts.iter().map(|p| p.len()).sum::<usize>().min(7000);
            taken = flatten(parts, n);
            Ok(n)
        });
        match r {
            None => break,
            Some(Err(_)) => assert!(z.send_wcs().is_empty(), "a failed write completes nothing"),
            Some(Ok(_)) => {
                wire.extend_from_slice(&taken);
                wcs += z.send_wcs().len();
            }
        }
        fail = !fail;
    }
    assert_eq!(wire, want);
    assert_eq!(wcs, 4);
}
