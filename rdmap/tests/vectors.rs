//! Known vectors: ULPDUs captured from Linux siw 6.1 (tests/data/golden/siw-rping-crc.pcap)
//! and a Terminate built byte by byte from RFC 5040 §4.8 Figures 7 and 8.

use rdmap::codes::{DdpCode, TaggedCode};
use rdmap::{
    Header, Message, Opcode, ProtectionCode, ReadRequest, TermCause, Terminate, TerminatedDdpHeader,
};

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("test vector is hex"))
        .collect()
}

/// RFC 5040 Appendix A.4: a Send from siw — `41 43` (DDP untagged, last, DV 1; RDMAP RV 1,
/// Send), QN 0, MSN 1, MO 0, then 16 octets of rping payload.
#[test]
fn rfc5040_a4_siw_send() {
    let ulpdu = hex("41430000000000000000000000010000000000001000000000001111110000000040");
    assert_eq!(ulpdu.len(), 34);
    let m = Message::parse(&ulpdu).expect("siw Send decodes");
    assert_eq!(m.opcode(), Opcode::Send);
    assert_eq!(
        m.header,
        Header::Send {
            solicited_event: false,
            invalidate_stag: None,
            last: true,
            msn: 1,
            mo: 0
        }
    );
    assert_eq!(m.payload.len(), 16);
    assert_eq!(m.header.encode(m.payload).expect("encodes"), ulpdu);
}

/// RFC 5040 §4.4 and Appendix A.2: a 46-octet RDMA Read Request from siw — the 18-octet
/// untagged header on QN 1 followed by the 28-octet Read Request header.
#[test]
fn rfc5040_4_4_siw_read_request() {
    let ulpdu = hex("4141 00000000 00000001 00000001 00000000
         32ae6100 000056439706eb10 00000040 11111100 0000100000000000");
    assert_eq!(ulpdu.len(), 46);
    let m = Message::parse(&ulpdu).expect("siw Read Request decodes");
    assert_eq!(
        m.header,
        Header::ReadRequest {
            msn: 1,
            request: ReadRequest {
                sink_stag: 0x32ae_6100,
                sink_to: 0x0000_5643_9706_eb10,
                size: 64,
                source_stag: 0x1111_1100,
                source_to: 0x0000_1000_0000_0000,
            }
        }
    );
    assert!(m.payload.is_empty());
    assert_eq!(m.header.to_vec().expect("encodes"), ulpdu);
}

/// RFC 5040 §4.5 and Appendix A.3: a Read Response from siw (`c1 42`) Places at the Sink
/// STag/TO of the Read Request above.
#[test]
fn rfc5040_4_5_siw_read_response() {
    let ulpdu = hex("c142 32ae6100 000056439706eb10 72646d612d70696e672d303a20");
    let m = Message::parse(&ulpdu).expect("decodes");
    assert_eq!(
        m.header,
        Header::ReadResponse {
            last: true,
            stag: 0x32ae_6100,
            to: 0x0000_5643_9706_eb10
        }
    );
    assert_eq!(m.payload, b"rdma-ping-0: ");
}

/// RFC 5040 §4.3 and Appendix A.1: a first, non-last RDMA Write segment from siw (`81 40`).
#[test]
fn rfc5040_4_3_siw_rdma_write_first_segment() {
    let ulpdu = hex("8140 22222200 0000200000000000 72646d61");
    let m = Message::parse(&ulpdu).expect("decodes");
    assert_eq!(
        m.header,
        Header::RdmaWrite {
            last: false,
            stag: 0x2222_2200,
            to: 0x0000_2000_0000_0000
        }
    );
    assert_eq!(m.header.encode(m.payload).expect("encodes"), ulpdu);
}

/// RFC 5040 §4.8 Figures 7–8, built by hand: a Terminate (QN 2, MSN 1) reporting a Remote
/// Protection Error / Base or bounds violation on an RDMA Read Request, with M, D and R set,
/// the 46-octet segment length, the Read Request's 18-octet DDP header and its 28-octet
/// RDMA header.
#[test]
fn rfc5040_4_8_terminate_figure() {
    let rr_ddp = "4141 00000000 00000001 00000005 00000000";
    let rr_hdr = "00000001 0000000000001000 00001000 00000002 0000000000002000";
    let ulpdu = hex(&format!(
        "4147 00000000 00000002 00000001 00000000
         01 01 e0 00
         002e
         {rr_ddp}
         {rr_hdr}"
    ));
    assert_eq!(ulpdu.len(), 18 + 4 + 2 + 18 + 28);
    let m = Message::parse(&ulpdu).expect("Terminate decodes");
    let Header::Terminate { msn, terminate } = m.header else {
        panic!("expected Terminate, got {:?}", m.header)
    };
    assert_eq!(msn, 1);
    assert_eq!(
        terminate.cause,
        TermCause::protection(ProtectionCode::BaseOrBounds)
    );
    assert!(terminate.m && terminate.d && terminate.r);
    assert_eq!(terminate.ddp_segment_length, 46);
    let copied = terminate.ddp_header.expect("D set");
    assert!(matches!(copied, TerminatedDdpHeader::Untagged(_)));
    assert_eq!(copied.opcode(), Some(Opcode::ReadRequest));
    assert_eq!(
        terminate.rdma_header,
        Some(ReadRequest {
            sink_stag: 1,
            sink_to: 0x1000,
            size: 0x1000,
            source_stag: 2,
            source_to: 0x2000
        })
    );
    assert_eq!(m.header.to_vec().expect("encodes"), ulpdu);

    // Building the same Terminate from the offending segment gives the same bytes.
    let offending = hex(&format!("{rr_ddp} {rr_hdr}"));
    let built = Terminate::for_segment(
        TermCause::protection(ProtectionCode::BaseOrBounds),
        &offending,
    );
    assert_eq!(built, terminate);
}

/// RFC 5040 §4.8 and RFC 5041 §7.2: a DDP-layer Terminate for a tagged segment copies the
/// 14-octet tagged header (M and D set, R clear).
#[test]
fn rfc5040_4_8_terminate_ddp_tagged() {
    let write = hex("c140 22222200 0000200000000000 41424344");
    let cause = TermCause::Ddp(DdpCode::Tagged(TaggedCode::BaseOrBounds));
    let t = Terminate::for_segment(cause, &write);
    let bytes = Header::Terminate {
        msn: 1,
        terminate: t,
    }
    .to_vec()
    .expect("encodes");
    let expected = hex("4147 00000000 00000002 00000001 00000000
         11 01 c0 00 0012 c140 22222200 0000200000000000");
    assert_eq!(bytes, expected);
}

/// RFC 6581 §9 (control flags B, C, D): the zero-length RTR messages. Their STag is not 0
/// (Chelsio rejects STag 0 although RFC 5041 §5.2 forbids checking it).
#[test]
fn rfc6581_9_rtr_messages() {
    assert_eq!(
        Header::rtr_write().to_vec().expect("encodes"),
        hex("c140 00000001 0000000000000000")
    );
    assert_eq!(
        Header::rtr_read(1).to_vec().expect("encodes"),
        hex("4141 00000000 00000001 00000001 00000000
             00000001 0000000000000000 00000000 00000001 0000000000000000")
    );
    assert_eq!(
        Header::rtr_send(1).to_vec().expect("encodes"),
        hex("4143 00000000 00000000 00000001 00000000")
    );
}
