//! Streaming FPDU deframer fed arbitrary bytes in arbitrary chunks, with CRC and markers on or
//! off and any marker phase: never panics, never reports an FPDU longer than the stream.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mpa::{Deframer, RxConfig};

fuzz_target!(|data: &[u8]| {
    let Some((&cfg, rest)) = data.split_first() else {
        return;
    };
    let Some((&chunk, stream)) = rest.split_first() else {
        return;
    };
    let crc = cfg & 1 != 0;
    let markers = cfg & 2 != 0;
    let start = u32::from(cfg >> 2) * 8; // 0..504 in steps of 8
    let mut d = Deframer::new(RxConfig::new(crc, markers).with_start_offset(start));
    let chunk = usize::from(chunk).max(1);
    let mut total = 0usize;
    for piece in stream.chunks(chunk) {
        d.push(piece);
        for item in &mut d {
            if let Ok(fpdu) = item {
                total += fpdu.wire_len;
                assert!(fpdu.ulpdu.len() < fpdu.wire_len);
            }
        }
    }
    assert!(total <= stream.len());
});
