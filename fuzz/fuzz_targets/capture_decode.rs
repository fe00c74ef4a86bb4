//! The whole capture decoder (pcap/pcapng reader, TCP reassembly, MPA, DDP, RDMAP) on arbitrary
//! files: never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(frames) = softrnic::capture::read_bytes(data, "fuzz") {
        let report = softrnic::decode::decode_frames(&frames);
        let mut sink = Vec::new();
        let opts = softrnic::decode::DecodeOptions {
            frames: true,
            summary: true,
            hex: true,
            ..Default::default()
        };
        let _ = softrnic::decode::print_report("fuzz", &report, &opts, &mut sink);
    }
});
