//! The decoder on traffic no golden capture has: markers in both directions (RFC 5044 §4.3),
//! CRC (§4.4) and RFC 6581 peer-to-peer mode with each RTR type, produced by the real engine in
//! netsim and read back from the link's capture.

use harness::mpa::{Capture, Scenario};
use mpa::{CrcPolicy, RtrSet, RtrType};
use rdmap::Header;
use softrnic::capture::read_bytes;
use softrnic::decode::{ConnStatus, FpduRecord, Record, decode_frames};

fn run(mpa: mpa::Config, seed: u64) -> softrnic::decode::Report {
    let mut s = Scenario::named("loss").unwrap();
    s.bytes = 1024 * 1024;
    s.mpa = mpa;
    let r = s.run(seed, Capture::Memory).unwrap();
    assert!(r.ok(), "{r:?}");
    decode_frames(&read_bytes(&r.capture.expect("capture"), "sim").unwrap())
}

#[test]
fn markers_both_ways_with_crc_decode_cleanly() {
    let report = run(
        mpa::Config {
            crc: CrcPolicy::Require,
            markers_rx: true,
            markers_tx: true,
            ..mpa::Config::default()
        },
        11,
    );
    assert_eq!(report.errors(), 0, "{:#?}", report.connections);
    let c = report.mpa_connections().next().expect("one MPA connection");
    assert_eq!(c.status, ConnStatus::Established);
    let s = c.session.as_ref().unwrap();
    assert!(s.markers_tx && s.markers_rx && s.crc);
    let fpdus = c.fpdus[0] + c.fpdus[1];
    assert!(fpdus > 100);
    assert_eq!(c.crc_good, fpdus, "every FPDU's CRC checked and good");
    // Large FPDUs span 512-octet marker periods: the decoder stripped markers from them.
    assert!(
        c.events
            .iter()
            .any(|e| matches!(&e.record, Record::Fpdu(f) if f.markers > 0)),
        "no FPDU with markers"
    );
}

#[test]
fn p2p_rtr_of_each_type_is_decoded_as_the_first_fpdu() {
    for (seed, rtr) in [
        (21, RtrType::Write),
        (22, RtrType::Read),
        (23, RtrType::Send),
    ] {
        let report = run(
            mpa::Config {
                p2p: true,
                ird: 4,
                ord: 4,
                ird_max: 4,
                rtr_supported: RtrSet::only(rtr),
                ..mpa::Config::default()
            },
            seed,
        );
        assert_eq!(report.errors(), 0, "{rtr}: {:#?}", report.connections);
        let c = report.mpa_connections().next().unwrap();
        let s = c.session.as_ref().unwrap();
        assert!(s.p2p);
        assert_eq!(s.rtr, Some(rtr));
        let first_fpdu = c
            .events
            .iter()
            .find(|e| e.ulpdu.is_some() && e.dir == softrnic::decode::Dir::ToResponder)
            .expect("an FPDU from the initiator");
        let Record::Fpdu(FpduRecord {
            p2p_rtr,
            message: Ok(header),
            payload_len,
            ..
        }) = &first_fpdu.record
        else {
            panic!("not a valid FPDU: {}", first_fpdu.text);
        };
        assert!(p2p_rtr, "{}", first_fpdu.text);
        // The RTR message (RFC 6581): a zero-length Write or Send, or a zero-size Read Request.
        match (rtr, header) {
            (RtrType::Write, Header::RdmaWrite { .. }) | (RtrType::Send, Header::Send { .. }) => {
                assert_eq!(*payload_len, 0, "{}", first_fpdu.text);
            }
            (RtrType::Read, Header::ReadRequest { request, .. }) => {
                assert_eq!(request.size, 0, "{}", first_fpdu.text);
            }
            _ => panic!("{rtr}: {}", first_fpdu.text),
        }
        // The text printer shows it.
        assert!(first_fpdu.text.contains("[P2P RTR]"), "{}", first_fpdu.text);
    }
}
