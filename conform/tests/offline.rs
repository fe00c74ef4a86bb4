//! The runner's pieces that need no peer: the capture (read back by the capture decoder),
//! the reports and the case selection.

use std::net::SocketAddr;

use conform::capture::{ConnRecord, Dir, write_pcap};
use conform::{CaseResult, Config, Llp, PeerApp, Report, Verdict};
use mpa::{ConnFrame, FpduEncoder, FrameKind, TxConfig};
use rdmap::Header;

/// The capture: an MPA Request, its Reply and one FPDU, written as pcap and read back by the
/// capture decoder as one established MPA connection with the FPDU in it.
#[test]
fn capture_decodes_as_an_mpa_connection() {
    let local: SocketAddr = "10.0.0.1:40000".parse().unwrap();
    let peer: SocketAddr = "10.0.0.2:7174".parse().unwrap();
    let mut rec = ConnRecord::new("test", local, peer);
    let mut req = ConnFrame::new(FrameKind::Request, 1);
    req.crc = true;
    let mut rep = ConnFrame::new(FrameKind::Reply, 1);
    rep.crc = true;
    rec.data(Dir::ToPeer, &req.to_bytes().unwrap());
    rec.data(Dir::FromPeer, &rep.to_bytes().unwrap());
    let send = Header::Send {
        solicited_event: false,
        invalidate_stag: None,
        last: true,
        msn: 1,
        mo: 0,
    }
    .encode(b"ping")
    .unwrap();
    let mut fpdu = Vec::new();
    FpduEncoder::new(TxConfig {
        crc: true,
        markers: false,
    })
    .encode(&[&send], &mut fpdu)
    .unwrap();
    rec.data(Dir::ToPeer, &fpdu);
    rec.fin(Dir::ToPeer);
    rec.fin(Dir::FromPeer);
    let mut second = rec.clone();
    second.local.set_port(40001);
    let mut pcap = Vec::new();
    write_pcap(&[rec, second], &mut pcap).expect("write");
    let frames = decode::capture::read_bytes(&pcap, "test").expect("read back");
    // Per connection: three handshake packets, three data packets, two FINs.
    assert_eq!(frames.len(), 16);
    let report = decode::decode_frames(&frames);
    let conns: Vec<_> = report.mpa_connections().collect();
    assert_eq!(conns.len(), 2);
    for c in conns {
        assert_eq!(c.status, decode::ConnStatus::Established);
        assert_eq!((c.initiator.ip(), c.responder), (local.ip(), peer));
        assert_eq!(c.fpdus, [1, 0]);
        assert_eq!((c.crc_good, c.crc_bad), (1, 0));
    }
}

/// The capture of a connection the peer opened (the runner listening): the peer's SYN comes
/// first and the decoder sees the peer as the MPA initiator.
#[test]
fn capture_of_a_peer_initiated_connection() {
    let local: SocketAddr = "10.0.0.1:7174".parse().unwrap();
    let peer: SocketAddr = "10.0.0.2:40000".parse().unwrap();
    let mut rec = ConnRecord::new("test", local, peer);
    rec.peer_opened = true;
    let req = ConnFrame::new(FrameKind::Request, 2);
    let mut rep = ConnFrame::new(FrameKind::Reply, 2);
    rep.reject = true;
    rec.data(Dir::FromPeer, &req.to_bytes().unwrap());
    rec.data(Dir::ToPeer, &rep.to_bytes().unwrap());
    let mut pcap = Vec::new();
    write_pcap(&[rec], &mut pcap).expect("write");
    let frames = decode::capture::read_bytes(&pcap, "test").expect("read back");
    let syn = etherparse::SlicedPacket::from_ip(&frames[0].data).expect("IPv4/TCP");
    let Some(etherparse::TransportSlice::Tcp(tcp)) = syn.transport else {
        panic!("not TCP")
    };
    assert!(tcp.syn() && !tcp.ack());
    assert_eq!(tcp.source_port(), peer.port());
    let report = decode::decode_frames(&frames);
    let c = report.mpa_connections().next().expect("an MPA connection");
    assert_eq!((c.initiator, c.responder), (peer, local));
    assert_eq!(c.status, decode::ConnStatus::Rejected);
}

fn result(id: &str, verdict: Verdict, reason: &str) -> CaseResult {
    CaseResult {
        id: id.into(),
        clause: "RFC 5044 §7.1.1 <Rev>".into(),
        sent: "a & b".into(),
        requires: "x".into(),
        observed: "y | z".into(),
        verdict,
        reason: reason.into(),
        millis: 1500,
    }
}

fn report() -> Report {
    Report {
        peer: "127.0.0.1:7174".into(),
        app: PeerApp::RpingServer,
        llp: Llp::Mpa,
        associations: 0,
        results: vec![
            result("a", Verdict::Pass, ""),
            result("b", Verdict::Fail, "broke \"it\""),
            result("c", Verdict::Deviation, "known"),
            result("d", Verdict::NotApplicable, "declined"),
        ],
        connections: Vec::new(),
    }
}

/// The summary line, the table, JSON and JUnit XML say the same, with XML escaped.
#[test]
fn reports_agree() {
    let r = report();
    assert_eq!(r.summary(), "4 cases: 1 PASS, 1 FAIL, 1 DEVIATION, 1 N/A");
    let table = conform::report::table(&r);
    assert!(
        table.contains("| FAIL | b | RFC 5044 §7.1.1 <Rev> | a & b | x | y / z — broke \"it\" |"),
        "{table}"
    );
    assert!(
        table.ends_with("4 cases: 1 PASS, 1 FAIL, 1 DEVIATION, 1 N/A\n"),
        "{table}"
    );
    let json: serde_json::Value = serde_json::from_str(&conform::report::json(&r)).unwrap();
    assert_eq!(json["summary"]["fail"], 1);
    assert_eq!(json["results"][3]["verdict"], "N/A");
    assert_eq!(json["results"][2]["verdict"], "DEVIATION");
    let xml = conform::report::junit(&r);
    assert!(
        xml.contains(r#"tests="4" failures="2" skipped="1""#),
        "{xml}"
    );
    assert!(
        xml.contains(r#"<failure type="FAIL" message="broke &quot;it&quot;">"#),
        "{xml}"
    );
    assert!(
        xml.contains(r#"<failure type="DEVIATION" message="known">"#),
        "{xml}"
    );
    assert!(xml.contains(r#"<skipped message="declined"/>"#), "{xml}");
    assert!(xml.contains("RFC 5044 §7.1.1 &lt;Rev&gt;"), "{xml}");
    assert!(!xml.contains("a & b"), "{xml}");
}

/// --case and --skip: substrings of ids or clauses, case-insensitive, catalogue order kept;
/// `=ID` an id exactly.
#[test]
fn selection_by_id_and_clause() {
    let mut cfg = Config::new("127.0.0.1:7174".parse().unwrap());
    let all = conform::selected(&cfg);
    let responder = conform::catalogue()
        .iter()
        .filter(|c| !c.peer_initiates && !c.sctp)
        .count();
    assert_eq!(all.len(), responder);
    cfg.listen = true;
    let initiator = conform::selected(&cfg);
    assert!(initiator.iter().all(|c| c.peer_initiates));
    cfg.listen = false;
    // Over SCTP only the RFC 5043 cases run (each names an RFC 5043 clause, some after
    // the RFC 5040 rule they carry over SCTP).
    cfg.llp = Llp::SctpUdp { udp_port: 9899 };
    let sctp = conform::selected(&cfg);
    assert!(!sctp.is_empty());
    assert!(sctp.iter().all(|c| c.sctp
        && !c.peer_initiates
        && c.id.starts_with("rfc5043-")
        && c.clause.contains("RFC 5043")));
    assert_eq!(
        all.len() + initiator.len() + sctp.len(),
        conform::catalogue().len()
    );
    cfg.llp = Llp::Mpa;
    cfg.select = vec!["RFC 6581".into()];
    let p2p = conform::selected(&cfg);
    assert!(!p2p.is_empty() && p2p.iter().all(|c| c.clause.contains("6581")));
    cfg.skip = vec!["RTR".into()];
    let rest = conform::selected(&cfg);
    assert!(rest.iter().all(|c| !c.id.contains("rtr")));
    assert!(rest.len() < p2p.len());
    cfg.select = vec!["no-such-case".into()];
    assert!(conform::selected(&cfg).is_empty());
    // `=ID`: that case alone ("mpa-crc" as a substring also selects mpa-crc-error and
    // mpa-crc-not-requested).
    cfg.skip.clear();
    cfg.select = vec!["mpa-crc".into()];
    assert!(conform::selected(&cfg).len() >= 3);
    cfg.select = vec!["=MPA-CRC".into()];
    let one: Vec<_> = conform::selected(&cfg).iter().map(|c| c.id).collect();
    assert_eq!(one, ["mpa-crc"]);
    cfg.select = vec!["=mpa-cr".into()];
    assert!(conform::selected(&cfg).is_empty());
    // Ids are unique and every case names an RFC clause.
    let mut ids: Vec<_> = conform::catalogue().iter().map(|c| c.id).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), conform::catalogue().len());
    assert!(
        conform::catalogue()
            .iter()
            .all(|c| c.clause.starts_with("RFC "))
    );
}
