//! MPA Request/Reply frame parser: never panics; whatever parses re-emits to a frame that
//! parses back to the same value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mpa::{ConnFrame, ConnFramePacket};

fuzz_target!(|data: &[u8]| {
    // The zero-copy view's accessors must be total.
    let view = ConnFramePacket::new_unchecked(data);
    let _ = (view.check(), view.kind(), view.flags(), view.revision(), view.pd_length());
    let _ = (view.key(), view.frame_len());
    if let Ok((frame, used)) = ConnFrame::parse(data) {
        assert!(used <= data.len());
        let mut out = Vec::new();
        if frame.emit(&mut out).is_ok() {
            let (again, n) = ConnFrame::parse(&out).expect("emitted frame parses");
            assert_eq!(n, out.len());
            assert_eq!(again, frame);
        }
    }
});
