//! DDP segment and RDMAP message decoders on arbitrary ULPDUs: never panic; every error names a
//! Terminate cause and builds a Terminate that encodes; every decoded header re-encodes to the
//! same header.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = ddp::Segment::parse(data);
    match rdmap::Message::parse(data) {
        Ok(msg) => {
            let bytes = msg.header.to_vec().expect("decoded header encodes");
            let whole = [bytes.as_slice(), msg.payload].concat();
            let again = rdmap::Message::parse(&whole).expect("re-encoded message decodes");
            assert_eq!(again.header, msg.header);
        }
        Err(e) => {
            let _ = e.term_cause().layer_etype_ecode();
            let term = e.terminate(data);
            let mut buf = vec![0u8; term.len()];
            term.emit(&mut buf).expect("terminate encodes");
        }
    }
});
