//! The connection setup cases against a scripted peer that breaks one rule of RFC 5044 or
//! RFC 6581 at a time: each case must find its rule broken (FAIL), so that none of them can
//! pass whatever the peer does.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use conform::{Config, PeerApp, Verdict};
use mpa::{ConnFrame, FrameKind};

/// What the scripted peer does with a Request (given raw, since some are malformed).
#[derive(Clone, Copy)]
enum Script {
    /// Accepts every Request as it is: any revision, any length, with a Reply echoing it.
    AcceptAnything,
    /// Accepts with Res bits set in the Reply.
    ReservedBits,
    /// Accepts with a Reply ORD above the Request's IRD.
    OrdAboveIrd,
    /// Accepts, then sends octets before the initiator's first FPDU.
    Chatty,
    /// Rejects with R 1 but keeps the connection open.
    RejectStayOpen,
    /// Says nothing and never closes.
    Mute,
    /// Accepts P2P without echoing it.
    NoP2pEcho,
    /// Accepts, then takes every FPDU without a word.
    Swallow,
    /// Accepts, answers the first Send (an rping start advertisement) with an RDMA Read
    /// Request of it, as an rping server does, then takes every FPDU without a word.
    RpingSwallow,
    /// An rping server whose inbound Read queue holds `absorb` Read Requests: it answers
    /// the first `absorb` of the runner's Read Requests with Read Responses and the next with
    /// a Terminate (control word as given, the Request's DDP header copied), then closes.
    RpingIrd { absorb: usize, control: [u8; 4] },
    /// Accepts, then answers the first FPDU with a Terminate (control word as given, the
    /// DDP header of the FPDU copied when `copy`), then closes unless `linger`, after
    /// sending `more` further FPDUs.
    Terminate {
        control: [u8; 4],
        copy: bool,
        more: usize,
        linger: bool,
    },
}

/// An FPDU (CRC off, no markers) carrying `ulpdu`.
fn fpdu(ulpdu: &[u8]) -> Vec<u8> {
    let mut v = (ulpdu.len() as u16).to_be_bytes().to_vec();
    v.extend_from_slice(ulpdu);
    v.resize(v.len() + (4 - (2 + ulpdu.len()) % 4) % 4, 0);
    v.extend_from_slice(&[0; 4]);
    v
}

/// Reads FPDUs (CRC off, no markers) one after the other, keeping what follows one.
#[derive(Default)]
struct FpduReader {
    buf: Vec<u8>,
}

impl FpduReader {
    fn next(&mut self, s: &mut TcpStream) -> Option<Vec<u8>> {
        let deadline = Instant::now() + Duration::from_secs(2);
        let mut chunk = [0u8; 4096];
        let _ = s.set_read_timeout(Some(Duration::from_millis(50)));
        while Instant::now() < deadline {
            if self.buf.len() >= 2 {
                let n = usize::from(u16::from_be_bytes([self.buf[0], self.buf[1]]));
                let wire = 2 + n + (4 - (2 + n) % 4) % 4 + 4;
                if self.buf.len() >= wire {
                    let u = self.buf[2..2 + n].to_vec();
                    self.buf.drain(..wire);
                    return Some(u);
                }
            }
            match s.read(&mut chunk) {
                Ok(0) => return None,
                Ok(k) => self.buf.extend_from_slice(&chunk[..k]),
                Err(_) => {}
            }
        }
        None
    }
}

/// Reads the first FPDU's ULPDU (CRC off, no markers).
fn read_fpdu(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut buf = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut chunk = [0u8; 4096];
    while Instant::now() < deadline {
        if buf.len() >= 2 {
            let n = usize::from(u16::from_be_bytes([buf[0], buf[1]]));
            if buf.len() >= 2 + n {
                return Some(buf[2..2 + n].to_vec());
            }
        }
        match s.read(&mut chunk) {
            Ok(0) => return None,
            Ok(k) => buf.extend_from_slice(&chunk[..k]),
            Err(_) => {}
        }
    }
    None
}

/// A Terminate ULPDU: untagged, QN 2, MSN 1, the given control word, then (with `copy`) the
/// segment length and the DDP header of `seg`.
fn terminate(control: [u8; 4], copy: bool, seg: &[u8]) -> Vec<u8> {
    let mut u = vec![0x41, 0x47, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0];
    u.extend_from_slice(&control);
    if copy {
        u.extend_from_slice(&(seg.len() as u16).to_be_bytes());
        let n = if seg.first().is_some_and(|c| c & 0x80 != 0) {
            14
        } else {
            18
        };
        u.extend_from_slice(&seg[..n.min(seg.len())]);
    }
    u
}

/// Reads the Request: its octets once they make a frame (or what came within 1 s).
fn read_request(s: &mut TcpStream) -> Vec<u8> {
    let mut buf = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(1);
    let _ = s.set_read_timeout(Some(Duration::from_millis(50)));
    let mut chunk = [0u8; 2048];
    while Instant::now() < deadline {
        if buf.len() >= 20 {
            let pd = usize::from(u16::from_be_bytes([buf[18], buf[19]]));
            if buf.len() >= 20 + pd {
                break;
            }
        }
        match s.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(_) => {}
        }
    }
    buf
}

/// A Reply echoing `req`'s revision and enhanced data, accepting.
fn echo_reply(raw: &[u8]) -> ConnFrame {
    let mut rev = raw.get(17).copied().unwrap_or(1);
    if rev == 0 {
        rev = 1;
    }
    let mut reply = ConnFrame::new(FrameKind::Reply, rev);
    if let Ok((req, _)) = ConnFrame::parse(raw) {
        reply.enhanced_flag = req.enhanced_flag;
        reply.enhanced = req.enhanced;
    } else if rev == 2 && raw.get(16).is_some_and(|f| f & 0x10 != 0) {
        reply.enhanced_flag = true;
        reply.enhanced = mpa::EnhancedData::parse(raw.get(20..24).unwrap_or(&[]));
    }
    reply
}

fn serve(mut s: TcpStream, script: Script) {
    let raw = read_request(&mut s);
    let mut reply = echo_reply(&raw);
    let mut after: &[u8] = &[];
    match script {
        Script::AcceptAnything
        | Script::Swallow
        | Script::RpingSwallow
        | Script::RpingIrd { .. }
        | Script::Terminate { .. } => {}
        Script::ReservedBits => reply.reserved = 0x3,
        Script::OrdAboveIrd => {
            if let Some(e) = reply.enhanced.as_mut() {
                e.ord = e.ird + 5;
            }
        }
        Script::Chatty => after = b"early!!!",
        Script::RejectStayOpen => reply.reject = true,
        Script::Mute => {
            std::thread::sleep(Duration::from_secs(5));
            return;
        }
        Script::NoP2pEcho => {
            if let Some(e) = reply.enhanced.as_mut() {
                e.p2p = false;
                e.rtr = mpa::RtrSet::EMPTY;
            }
        }
    }
    let mut out = reply.to_bytes().unwrap_or_default();
    out.extend_from_slice(after);
    let _ = s.write_all(&out);
    let mut reader = FpduReader::default();
    if let Script::RpingSwallow | Script::RpingIrd { .. } = script {
        let Some(adv) = reader.next(&mut s) else {
            return;
        };
        let field = |r: std::ops::Range<usize>| adv.get(r).unwrap_or(&[]).to_vec();
        let buf = u64::from_be_bytes(field(18..26).try_into().unwrap_or([0; 8]));
        let rkey = u32::from_be_bytes(field(26..30).try_into().unwrap_or([0; 4]));
        let size = u32::from_be_bytes(field(30..34).try_into().unwrap_or([0; 4]));
        let read = rdmap::Header::ReadRequest {
            msn: 1,
            request: rdmap::ReadRequest {
                sink_stag: 0x1234_5601,
                sink_to: 0x1000,
                size,
                source_stag: rkey,
                source_to: buf,
            },
        }
        .to_vec()
        .unwrap_or_default();
        let _ = s.write_all(&fpdu(&read));
    }
    if let Script::RpingIrd { absorb, control } = script {
        let mut reads = 0;
        while let Some(u) = reader.next(&mut s) {
            // Untagged, QN 1: a Read Request (sink STag, sink TO, size from octet 18 on).
            if u.len() < 34 || u[0] & 0x80 != 0 || u[6..10] != [0, 0, 0, 1] {
                continue;
            }
            reads += 1;
            if reads > absorb {
                let _ = s.write_all(&fpdu(&terminate(control, true, &u)));
                return;
            }
            let size = u32::from_be_bytes(u[30..34].try_into().unwrap_or([0; 4]));
            let mut resp = vec![0xc1, 0x42];
            resp.extend_from_slice(&u[18..30]);
            resp.resize(resp.len() + size.min(64) as usize, 0x5a);
            let _ = s.write_all(&fpdu(&resp));
        }
        return;
    }
    if let Script::Terminate {
        control,
        copy,
        more,
        linger,
    } = script
    {
        let Some(seg) = read_fpdu(&mut s) else {
            return;
        };
        let mut out = fpdu(&terminate(control, copy, &seg));
        for msn in 0..more {
            // A Send, MSN 1, 2, ...
            let mut send = vec![0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 0];
            send.extend_from_slice(&(msn as u32 + 1).to_be_bytes());
            send.extend_from_slice(&[0, 0, 0, 0]);
            out.extend_from_slice(&fpdu(&send));
        }
        let _ = s.write_all(&out);
        if !linger {
            return;
        }
    }
    // Hold the connection (reading what comes) until the runner closes it or 5 s pass.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut sink = [0u8; 4096];
    while Instant::now() < deadline {
        match s.read(&mut sink) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => return,
        }
    }
}

/// A scripted peer on an ephemeral port, serving every connection with `script`.
fn peer(script: Script) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr");
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            std::thread::spawn(move || serve(s, script));
        }
    });
    addr
}

/// The verdict of case `id` against `script`.
fn verdict(script: Script, id: &str) -> (Verdict, String) {
    let mut cfg = Config::new(peer(script));
    cfg.app = PeerApp::Bare;
    cfg.step = Duration::from_secs(1);
    cfg.request_timeout = Duration::from_secs(1);
    cfg.select = vec![id.to_string()];
    let report = conform::run(&cfg, |_| {});
    let r = report.result(id).expect("the case ran");
    (r.verdict, format!("{r:?}"))
}

fn assert_fails(script: Script, id: &str) {
    let (v, r) = verdict(script, id);
    assert_eq!(v, Verdict::Fail, "{r}");
}

/// RFC 5044 §7.1.1 Rev: accepting revision 3 fails mpa-rev-unknown.
#[test]
fn rfc5044_7_1_1_accepting_an_unknown_revision_fails() {
    assert_fails(Script::AcceptAnything, "mpa-rev-unknown");
}

/// RFC 5044 §7.1.1 PD_Length: accepting 513 octets of private data fails mpa-pd-513.
#[test]
fn rfc5044_7_1_1_accepting_513_octets_of_private_data_fails() {
    assert_fails(Script::AcceptAnything, "mpa-pd-513");
}

/// RFC 5044 §7.1.1 Res: a Reply with Res bits set fails mpa-reserved-bits.
#[test]
fn rfc5044_7_1_1_reserved_bits_in_the_reply_fail() {
    assert_fails(Script::ReservedBits, "mpa-reserved-bits");
    assert_fails(Script::ReservedBits, "mpa-rev2");
}

/// RFC 6581 §7: a Reply ORD above the initiator's IRD fails mpa-ird-ord.
#[test]
fn rfc6581_7_reply_ord_above_the_initiators_ird_fails() {
    assert_fails(Script::OrdAboveIrd, "mpa-ird-ord");
}

/// RFC 5044 §7.1.2: octets from the responder before the initiator's first FPDU fail
/// mpa-responder-waits.
#[test]
fn rfc5044_7_1_2_a_responder_that_sends_first_fails() {
    assert_fails(Script::Chatty, "mpa-responder-waits");
}

/// RFC 5044 §7.1.2: a reject that leaves the connection open fails mpa-reject-close.
#[test]
fn rfc5044_7_1_2_a_reject_without_close_fails() {
    assert_fails(Script::RejectStayOpen, "mpa-reject-close");
}

/// RFC 5044 §7.1: a responder that neither answers nor closes fails the Request timer case
/// and the revision 2 case.
#[test]
fn rfc5044_7_1_a_mute_responder_fails() {
    assert_fails(Script::Mute, "mpa-request-timeout");
    assert_fails(Script::Mute, "mpa-rev2");
}

/// RFC 6581 §9: accepting P2P without echoing it fails mpa-p2p-echo and leaves the RTR
/// cases N/A.
#[test]
fn rfc6581_9_p2p_not_echoed_fails() {
    assert_fails(Script::NoP2pEcho, "mpa-p2p-echo");
    let (v, r) = verdict(Script::NoP2pEcho, "mpa-rtr-write");
    assert_eq!(v, Verdict::NotApplicable, "{r}");
}

/// RFC 5041 §7.1: a responder that takes an invalid segment without a Terminate fails.
#[test]
fn rfc5041_7_1_no_terminate_for_an_invalid_segment_fails() {
    assert_fails(Script::Swallow, "ddp-invalid-qn");
    assert_fails(Script::Swallow, "ddp-invalid-stag");
}

/// RFC 5044 §4.4, §8: a responder that takes an FPDU with a wrong CRC in silence fails.
#[test]
fn rfc5044_4_4_a_wrong_crc_taken_silently_fails() {
    assert_fails(Script::Swallow, "mpa-crc-error");
}

/// RFC 5041 §7.1, RFC 5040 §5.2.1, §6.1, §5.3: an rping server whose RNIC takes everything
/// in silence fails every case that needs its buffers.
#[test]
fn rfc5041_5040_an_rnic_that_refuses_nothing_fails() {
    let mut cfg = Config::new(peer(Script::RpingSwallow));
    cfg.step = Duration::from_millis(500);
    cfg.select = ["ddp-", "rdmap-"].map(String::from).to_vec();
    // ddp-access and the two Atomic cases need buffers rping does not expose (one without a
    // remote right, one with remote atomic rights); rdmap-after-terminate needs a Terminate
    // to follow.
    cfg.skip = [
        "ddp-access",
        "=rdmap-atomic",
        "rdmap-atomic-alignment",
        "rdmap-after-terminate",
    ]
    .map(String::from)
    .to_vec();
    let report = conform::run(&cfg, |_| {});
    assert!(report.results.len() >= 18, "{report:?}");
    for r in &report.results {
        // RFC 7306 §6: Immediate Data into a posted receive is valid, and taken in silence.
        let want = if r.id == "rdmap-immediate" {
            Verdict::Pass
        } else {
            Verdict::Fail
        };
        assert_eq!(r.verdict, want, "{r:?}");
    }
    assert!(report.result("rdmap-immediate").is_some(), "{report:?}");
}

/// DDP Untagged 'Invalid QN' as the peer might send it: `copy` with the header.
fn invalid_qn(copy: bool, flags: u8, more: usize, linger: bool) -> Script {
    Script::Terminate {
        control: [0x12, 0x01, flags, 0],
        copy,
        more,
        linger,
    }
}

/// RFC 5041 §7.2, RFC 5040 §4.8: the right Terminate passes; a wrong cause, a missing header
/// copy or a wrong one fail.
#[test]
fn rfc5040_4_8_terminate_causes_and_copies_are_judged() {
    assert_eq!(
        verdict(invalid_qn(true, 0xc0, 0, false), "ddp-invalid-qn").0,
        Verdict::Pass
    );
    assert_fails(invalid_qn(false, 0, 0, false), "ddp-invalid-qn");
    // The cause of an Invalid QN answers an RDMA Write to an invalid STag.
    assert_fails(invalid_qn(true, 0xc0, 0, false), "ddp-invalid-stag");
}

/// RFC 5040 §4.8: reserved bits of the Terminate Control set (not siw's pattern) fail the
/// layout case; siw's pattern is a DEVIATION.
#[test]
fn rfc5040_4_8_terminate_control_reserved_bits() {
    assert_fails(invalid_qn(true, 0x18, 0, false), "rdmap-terminate-layout");
    let siw = Script::Terminate {
        control: [0x21, 0x01, 0x03, 0],
        copy: true,
        more: 0,
        linger: false,
    };
    let (v, r) = verdict(siw, "rdmap-terminate-layout");
    assert_eq!(v, Verdict::Deviation, "{r}");
    assert_eq!(verdict(siw, "ddp-invalid-qn").0, Verdict::Pass);
}

/// RFC 5040 §7.1: FPDUs after the Terminate, or a stream left open, fail.
#[test]
fn rfc5040_7_1_anything_after_a_terminate_fails() {
    assert_eq!(
        verdict(invalid_qn(true, 0xc0, 0, false), "rdmap-after-terminate").0,
        Verdict::Pass
    );
    assert_fails(invalid_qn(true, 0xc0, 1, false), "rdmap-after-terminate");
    assert_fails(invalid_qn(true, 0xc0, 0, true), "rdmap-after-terminate");
}

/// The same scripted peer passes what it does right: a plain Reply to revision 2 passes
/// mpa-rev2 and accepting revision 1 passes mpa-rev1.
#[test]
fn rfc5044_7_1_1_a_plain_reply_passes() {
    assert_eq!(verdict(Script::AcceptAnything, "mpa-rev2").0, Verdict::Pass);
    assert_eq!(verdict(Script::AcceptAnything, "mpa-rev1").0, Verdict::Pass);
}

/// MSN range (0x1/0x2/0x03) with M and D, as RFC 5041 §7.2 has it for a Read queue overrun.
const MSN_RANGE: [u8; 4] = [0x12, 0x03, 0xc0, 0];

/// RFC 5040 §6.1, RFC 5041 §7.1: a responder that answers one Read Request of a burst at once
/// and queues IRD more (as Linux siw 6.1 does) is not judged on timing: the Terminate for
/// the first Request it cannot hold passes, and one that holds every Request fails.
#[test]
fn rfc5040_6_1_ird_overrun_judged_whatever_the_responders_timing() {
    let strict = Script::RpingIrd {
        absorb: 1,
        control: MSN_RANGE,
    };
    assert_eq!(verdict_rping(strict, "rdmap-ird").0, Verdict::Pass);
    let siw_like = Script::RpingIrd {
        absorb: 2,
        control: MSN_RANGE,
    };
    let (v, r) = verdict_rping(siw_like, "rdmap-ird");
    assert_eq!(v, Verdict::Pass, "{r}");
    let endless = Script::RpingIrd {
        absorb: 100,
        control: MSN_RANGE,
    };
    let (v, r) = verdict_rping(endless, "rdmap-ird");
    assert_eq!(v, Verdict::Fail, "{r}");
    // siw's cause for the overrun: RDMAP Remote Operation, Catastrophic error localized to
    // the stream (0x0/0x2/0x07), with the DDP header copied (M, D).
    let siw = Script::RpingIrd {
        absorb: 2,
        control: [0x02, 0x07, 0xc0, 0],
    };
    let (v, r) = verdict_rping(siw, "rdmap-ird");
    assert_eq!(v, Verdict::Deviation, "{r}");
    assert!(r.contains("Linux siw 6.1"), "{r}");
}

/// The verdict of case `id` against `script` as an rping server.
fn verdict_rping(script: Script, id: &str) -> (Verdict, String) {
    let mut cfg = Config::new(peer(script));
    cfg.step = Duration::from_secs(1);
    cfg.select = vec![id.to_string()];
    let report = conform::run(&cfg, |_| {});
    let r = report.result(id).expect("the case ran");
    (r.verdict, format!("{r:?}"))
}

/// A responder that accepts P2P selecting the Write RTR whatever was offered (as Linux siw
/// 6.1 does); every connection's octets after the Reply go to the receiver.
fn p2p_write_peer() -> (SocketAddr, std::sync::mpsc::Receiver<Vec<u8>>) {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for mut s in l.incoming().flatten() {
            let tx = tx.clone();
            std::thread::spawn(move || {
                let raw = read_request(&mut s);
                let mut reply = echo_reply(&raw);
                if let Some(e) = reply.enhanced.as_mut().filter(|e| e.p2p) {
                    e.rtr = mpa::RtrSet::only(mpa::RtrType::Write);
                }
                let _ = s.write_all(&reply.to_bytes().unwrap_or_default());
                let _ = s.set_read_timeout(Some(Duration::from_secs(3)));
                let mut got = Vec::new();
                let _ = s.read_to_end(&mut got);
                let _ = tx.send(got);
            });
        }
    });
    (addr, rx)
}

/// RFC 6581 §9: every case that gets an accepting P2P Reply sends the selected RTR before it
/// closes (a responder in P2P mode is established only by the RTR), also when the Reply is
/// judged wrong: a Write RTR selected when only Send was offered, which is Linux siw 6.1's
/// known deviation.
#[test]
fn rfc6581_9_the_selected_rtr_is_sent_before_close() {
    let (addr, rx) = p2p_write_peer();
    for (id, want) in [
        ("mpa-p2p-echo", Verdict::Pass),
        ("mpa-rtr-choice", Verdict::Pass),
        ("mpa-rtr-send", Verdict::Deviation),
    ] {
        let mut cfg = Config::new(addr);
        cfg.app = PeerApp::Bare;
        cfg.step = Duration::from_secs(1);
        cfg.select = vec![id.to_string()];
        let report = conform::run(&cfg, |_| {});
        let r = report.result(id).expect("the case ran");
        assert_eq!(r.verdict, want, "{r:?}");
        let got = rx
            .recv_timeout(Duration::from_secs(5))
            .expect("a connection");
        // One FPDU: ULPDU_Length 14, a tagged last segment, RDMAP Write, STag 1, TO 0.
        assert!(got.len() >= 20, "{id}: {got:02x?}");
        assert_eq!(&got[..4], &[0, 14, 0xc1, 0x40], "{id}: {got:02x?}");
        assert_eq!(&got[4..8], &1u32.to_be_bytes(), "{id}: {got:02x?}");
    }
}

/// A scripted initiator: a revision 2 P2P Request to `addr` offering only the Read RTR, then
/// after the Reply the Read RTR (size 0) with STags `sink` and `source`; holds the connection
/// until the runner closes it.
fn read_rtr_initiator(addr: SocketAddr, sink: u32, source: u32) {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return;
    };
    let mut req = ConnFrame::new(FrameKind::Request, 2);
    req.enhanced_flag = true;
    req.enhanced = Some(mpa::EnhancedData {
        ird: 1,
        ord: 1,
        p2p: true,
        rtr: mpa::RtrSet::only(mpa::RtrType::Read),
    });
    let _ = s.write_all(&req.to_bytes().unwrap_or_default());
    let _ = read_request(&mut s);
    let rtr = rdmap::Header::ReadRequest {
        msn: 1,
        request: rdmap::ReadRequest {
            sink_stag: sink,
            sink_to: 0,
            size: 0,
            source_stag: source,
            source_to: 0,
        },
    }
    .to_vec()
    .unwrap_or_default();
    let _ = s.write_all(&fpdu(&rtr));
    let _ = s.set_read_timeout(Some(Duration::from_secs(3)));
    let _ = s.read_to_end(&mut Vec::new());
}

/// RFC 6581 §9, RFC 5041 §5.2: init-rtr-stag judges the STag the responder looks up. Linux
/// siw's Read RTR (sink STag 0, Data Source STag 1) passes; a Read RTR whose Data Source
/// STag is 0 is the deviation Chelsio adapters refuse.
#[test]
fn rfc6581_9_read_rtr_judged_by_its_data_source_stag() {
    for (sink, source, want) in [
        (0, 1, Verdict::Pass),
        (1, 1, Verdict::Pass),
        (1, 0, Verdict::Deviation),
    ] {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr");
        let mut cfg = Config::new(addr);
        cfg.listen = true;
        cfg.app = PeerApp::Bare;
        cfg.step = Duration::from_secs(1);
        cfg.accept_timeout = Duration::from_secs(5);
        cfg.select = vec!["init-rtr-stag".into()];
        let t = std::thread::spawn(move || read_rtr_initiator(addr, sink, source));
        let report = conform::run_listening(&cfg, &l, |_| {});
        let _ = t.join();
        let r = report.result("init-rtr-stag").expect("the case ran");
        assert_eq!(r.verdict, want, "sink {sink} source {source}: {r:?}");
    }
}
