//! The RFC 5043 cases: DDP over SCTP, against a peer on softrnic's SCTP with RFC 6951 UDP
//! encapsulation. Each case runs on an SCTP association of its own (the runner announces the
//! DDP Adaptation Layer Indication, as §5.1 requires of both ends), sends DDP Stream Session
//! Control messages (PPID 17) and DDP Segments (PPID 16) built by hand, and judges the
//! messages the peer sends back and whether the association survives.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};

use decode::terminate::{self as term, PeerTerminate};
use mpa::EnhancedData;
use rdmap::{Header, Message as RdmapMessage, ProtectionCode, ReadRequest};
use sctp::ddp_adapt::{
    self, ADAPTATION_DDP, DdpSctpMessage, FunctionCode, PPID_DDP_SEGMENT,
    PPID_DDP_STREAM_SESSION_CONTROL, SessionControl,
};
use sctp_io::{Error as SockError, Message, SctpSocket, Transport};

use crate::cases::{
    ADV_SIZE, Copy, RUNNER_STAG, RUNNER_TO, STAG_FLIP, describe_ulpdu, judge, protection, read_of,
    read_request_ulpdu, rping_info, send_ulpdu,
};
use crate::{Ctx, Llp, Outcome, PeerApp, Verdict};

use Verdict::{Fail, NotApplicable as NA, Pass};

/// The DDP stream (SCTP stream) every case uses.
const STREAM: u16 = 0;
/// A function code RFC 5043 §5.2.3 and RFC 6581 §7 leave unassigned.
const UNKNOWN_FUNCTION: u16 = 0x000F;

/// The local address the host routes towards `peer` from.
fn local_toward(peer: SocketAddr) -> IpAddr {
    if peer.ip().is_loopback() {
        return peer.ip();
    }
    UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))
        .and_then(|s| {
            s.connect(peer)?;
            s.local_addr()
        })
        .map(|a| a.ip())
        .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED))
}

impl Ctx<'_> {
    /// An SCTP association to the peer, announcing the DDP adaptation.
    fn associate(&mut self) -> Result<SctpSocket, Outcome> {
        let udp_port = match self.cfg.llp {
            Llp::SctpUdp { udp_port } => udp_port,
            Llp::Mpa => {
                return Err(
                    Outcome::new(NA, "-", "-").because("an SCTP case (run with --llp sctp)")
                );
            }
        };
        let peer = self.cfg.peer;
        let mut c = sctp_io::Config::new(
            Transport::Udp {
                local_port: 0,
                remote_port: udp_port,
            },
            vec![local_toward(peer)],
            0,
        );
        c.association.adaptation_indication = Some(ADAPTATION_DDP);
        let s = SctpSocket::connect(c, &[peer.ip()], peer.port(), Some(self.cfg.step)).map_err(
            |e| {
                Outcome::new(
                    Fail,
                    "INIT with Adaptation Layer Indication 0x00000001",
                    "-",
                )
                .because(format!(
                    "no SCTP association to {peer} (UDP port {udp_port}): {e}"
                ))
            },
        )?;
        self.associations += 1;
        Ok(s)
    }
}

/// The Enhanced DDP Stream Session Initiate (RFC 6581 §7) with IRD/ORD 1/1, DDP-SSN 0.
fn initiate() -> (Vec<u8>, String) {
    let pd = EnhancedData {
        ird: 1,
        ord: 1,
        p2p: false,
        rtr: Default::default(),
    }
    .to_bytes()
    .map(|b| b.to_vec())
    .unwrap_or_default();
    let m = SessionControl {
        ddp_ssn: 0,
        function: FunctionCode::EnhancedInitiate,
        private_data: pd,
    }
    .emit()
    .unwrap_or_default();
    (
        m,
        "PPID 17 DDP-SSN 0 Enhanced Initiate (IRD/ORD 1/1)".to_string(),
    )
}

/// A received message in words.
fn describe(m: &Message) -> String {
    let order = if m.unordered { "unordered" } else { "ordered" };
    let body = match ddp_adapt::parse(m.ppid, &m.data) {
        Ok(DdpSctpMessage::Control(c)) => format!(
            "DDP-SSN {} {:?} ({} octets of Private Data)",
            c.ddp_ssn,
            c.function,
            c.private_data.len()
        ),
        Ok(DdpSctpMessage::Segment(s)) => {
            format!("DDP-SSN {} {}", s.ddp_ssn, describe_ulpdu(s.segment))
        }
        Err(e) => format!("{} octets: {e}", m.data.len()),
    };
    format!("PPID {} {order}: {body}", m.ppid)
}

/// A message the peer meant as a DDP Segment in words: its octets read as a segment
/// whatever the PPID says.
fn describe_segment(m: &Message) -> String {
    if m.ppid == PPID_DDP_SEGMENT || m.data.len() < 2 {
        return describe(m);
    }
    let order = if m.unordered { "unordered" } else { "ordered" };
    format!(
        "PPID {} {order}: DDP-SSN {} {}",
        m.ppid,
        u16::from_be_bytes([m.data[0], m.data[1]]),
        describe_ulpdu(&m.data[2..])
    )
}

/// Sends `data` with `ppid` on the case's stream, unordered (RFC 5043 §10).
fn send(s: &SctpSocket, ppid: u32, data: &[u8]) -> Result<(), String> {
    s.send(STREAM, ppid, true, data)
        .map_err(|e| format!("the association refused the message: {e}"))
}

/// What the peer did next: a message, or the end of the association.
enum Next {
    Msg(Message),
    Ended(String),
    Quiet,
}

fn next(s: &SctpSocket, ctx: &Ctx<'_>) -> Next {
    match s.recv(Some(ctx.cfg.step)) {
        Ok(m) => Next::Msg(m),
        Err(SockError::TimedOut) => Next::Quiet,
        Err(SockError::Aborted(r)) => Next::Ended(format!("aborted the association ({r})")),
        Err(e) => Next::Ended(format!("ended the association ({e})")),
    }
}

/// The Session Accept's faults against RFC 5043 §5.2, §5.2.1, §5.2.3 and RFC 6581 §7, §10.
fn accept_faults(m: &Message) -> Vec<String> {
    let mut wrong = Vec::new();
    if m.ppid != PPID_DDP_STREAM_SESSION_CONTROL {
        wrong.push(format!("PPID {}, not 17 (§5.2)", m.ppid));
    }
    if !m.unordered {
        wrong.push("sent ordered (§10)".to_string());
    }
    match SessionControl::parse(&m.data) {
        Ok(c) => {
            if c.ddp_ssn != 0 {
                wrong.push(format!(
                    "DDP-SSN {}, not 0, the first of the session (§5.2.1, §6.2)",
                    c.ddp_ssn
                ));
            }
            if c.function != FunctionCode::EnhancedAccept {
                wrong.push(format!(
                    "{:?}, not the Enhanced Accept (RFC 6581 §7, §10)",
                    c.function
                ));
            }
        }
        Err(e) => wrong.push(format!("not a valid session control message: {e}")),
    }
    wrong
}

/// An association with a session the peer accepted: the Accept message, or the outcome.
fn session(ctx: &mut Ctx<'_>) -> Result<(SctpSocket, Message, String), Outcome> {
    let s = ctx.associate()?;
    let (init, sent) = initiate();
    if let Err(e) = send(&s, PPID_DDP_STREAM_SESSION_CONTROL, &init) {
        s.abort();
        return Err(Outcome::new(Fail, sent, "-").because(e));
    }
    match next(&s, ctx) {
        Next::Msg(m) => Ok((s, m, sent)),
        Next::Ended(what) => Err(Outcome::new(Fail, sent, what)
            .because("the peer did not accept a valid Enhanced Initiate")),
        Next::Quiet => {
            s.abort();
            Err(Outcome::new(Fail, sent, "no answer")
                .because("the peer did not answer a valid Enhanced Initiate"))
        }
    }
}

/// RFC 5043 §5.1, §11.1: the peer's INIT ACK carries the DDP Adaptation Layer Indication.
pub(crate) fn sctp_adaptation(ctx: &mut Ctx<'_>) -> Outcome {
    let s = match ctx.associate() {
        Ok(s) => s,
        Err(o) => return o,
    };
    let ind = s.peer_adaptation_indication();
    s.abort();
    let sent = "INIT with Adaptation Layer Indication 0x00000001";
    match ind {
        Some(ADAPTATION_DDP) => Outcome::new(
            Pass,
            sent,
            "INIT ACK with Adaptation Layer Indication 0x00000001",
        ),
        Some(x) => Outcome::new(
            Fail,
            sent,
            format!("INIT ACK with Adaptation Layer Indication {x:#010x}"),
        )
        .because("an indication other than DDP's (0x00000001)"),
        None => Outcome::new(
            Fail,
            sent,
            "INIT ACK without an Adaptation Layer Indication",
        )
        .because("a DDP endpoint announces the indication 0x00000001 (§5.1)"),
    }
}

/// RFC 5043 §5.2.1, §5.2.3, §6.2, RFC 6581 §7: the Accept of a valid Enhanced Initiate.
pub(crate) fn sctp_session_accept(ctx: &mut Ctx<'_>) -> Outcome {
    let (s, m, sent) = match session(ctx) {
        Ok(x) => x,
        Err(o) => return o,
    };
    s.abort();
    let wrong = accept_faults(&m);
    if wrong.is_empty() {
        Outcome::new(Pass, sent, describe(&m))
    } else {
        Outcome::new(Fail, sent, describe(&m)).because(wrong.join("; "))
    }
}

/// A session with an rping server in full operation: the Accept, then rping's start
/// buffer (a Send, DDP-SSN 1), then the first message the peer sends (rping's Read Request
/// when all is well). The association, that message and what was sent; or the outcome.
fn rping_session(ctx: &mut Ctx<'_>) -> Result<(SctpSocket, Message, String), Outcome> {
    if ctx.cfg.app != PeerApp::RpingServer {
        return Err(Outcome::new(NA, "-", "-").because(
            "needs a peer application that answers a Send (run with --app rping-server)",
        ));
    }
    let (s, accept, mut sent) = session(ctx)?;
    let ok = SessionControl::parse(&accept.data)
        .is_ok_and(|c| c.function.base() == FunctionCode::Accept);
    if accept.ppid != PPID_DDP_STREAM_SESSION_CONTROL || !ok {
        s.abort();
        return Err(Outcome::new(NA, sent, describe(&accept))
            .because("the session was not accepted (see rfc5043-session-accept)"));
    }
    let info = rping_info(RUNNER_TO, RUNNER_STAG, ADV_SIZE);
    let seg = ddp_adapt::segment_message(1, &send_ulpdu(1, &info));
    sent.push_str(&format!(
        "; PPID 16 DDP-SSN 1 Send MSN 1: rping start buffer STag {RUNNER_STAG:#x} TO {RUNNER_TO:#x}, {ADV_SIZE} octets"
    ));
    if let Err(e) = send(&s, PPID_DDP_SEGMENT, &seg) {
        s.abort();
        return Err(Outcome::new(Fail, sent, "-").because(e));
    }
    match next(&s, ctx) {
        Next::Msg(m) => Ok((s, m, sent)),
        Next::Ended(what) => {
            Err(Outcome::new(Fail, sent, what).because("no DDP Segment came from the peer"))
        }
        Next::Quiet => {
            s.abort();
            Err(Outcome::new(Fail, sent, "no message")
                .because("the rping server's Read Request did not come"))
        }
    }
}

/// RFC 5043 §5.2, §5.2.2, §10: the peer's DDP Segments once the session is up (rping's
/// Read Request): PPID 16, unordered, one whole DDP Segment behind the next DDP-SSN.
pub(crate) fn sctp_segment_framing(ctx: &mut Ctx<'_>) -> Outcome {
    let (s, m, sent) = match rping_session(ctx) {
        Ok(x) => x,
        Err(o) => return o,
    };
    s.abort();
    let mut wrong = Vec::new();
    if m.ppid != PPID_DDP_SEGMENT {
        wrong.push(format!("PPID {}, not 16 (§5.2)", m.ppid));
    }
    if !m.unordered {
        wrong.push("sent ordered (§10)".to_string());
    }
    if m.data.len() < 2 {
        wrong.push("no DDP-SSN (§5.2.2)".to_string());
    } else {
        let ssn = u16::from_be_bytes([m.data[0], m.data[1]]);
        if ssn != 1 {
            wrong.push(format!(
                "DDP-SSN {ssn}, not 1, the next after the Accept's 0 (§5.2.1)"
            ));
        }
        match RdmapMessage::parse(&m.data[2..]) {
            Ok(r) if matches!(r.header, Header::ReadRequest { .. }) => {}
            Ok(r) => wrong.push(format!(
                "a whole DDP Segment, but {:?} rather than rping's Read Request",
                r.header.opcode()
            )),
            Err(e) => wrong.push(format!("not one whole DDP Segment (§5.2.2): {e}")),
        }
    }
    let observed = describe_segment(&m);
    if wrong.is_empty() {
        Outcome::new(Pass, sent, observed)
    } else {
        Outcome::new(Fail, sent, observed).because(wrong.join("; "))
    }
}

/// Judges the peer's answer to a message that fits no legal sequence of RFC 5043 §6: the
/// session must end (a Session Terminate, or the association aborted or shut down); a
/// Session Accept or a DDP Segment means the peer went on.
fn expect_end(ctx: &mut Ctx<'_>, ppid: u32, data: &[u8], sent: String) -> Outcome {
    let s = match ctx.associate() {
        Ok(s) => s,
        Err(o) => return o,
    };
    if let Err(e) = send(&s, ppid, data) {
        s.abort();
        return Outcome::new(Fail, sent, "-").because(e);
    }
    let o = match next(&s, ctx) {
        Next::Ended(what) => Outcome::new(Pass, sent, what),
        Next::Msg(m) => {
            let terminate = m.ppid == PPID_DDP_STREAM_SESSION_CONTROL
                && SessionControl::parse(&m.data)
                    .is_ok_and(|c| c.function == FunctionCode::Terminate);
            if terminate {
                Outcome::new(Pass, sent, describe(&m))
            } else {
                Outcome::new(Fail, sent, describe(&m))
                    .because("the peer went on instead of terminating the session")
            }
        }
        Next::Quiet => Outcome::new(Fail, sent, "no answer; the association stayed up")
            .because("an illegal sequence must terminate the session"),
    };
    s.abort();
    o
}

/// RFC 5043 §6.1, §6.2: a DDP Segment where the Session Initiate must come first.
pub(crate) fn sctp_segment_before_initiate(ctx: &mut Ctx<'_>) -> Outcome {
    let info = rping_info(RUNNER_TO, RUNNER_STAG, ADV_SIZE);
    let seg = ddp_adapt::segment_message(0, &send_ulpdu(1, &info));
    expect_end(
        ctx,
        PPID_DDP_SEGMENT,
        &seg,
        "PPID 16 DDP-SSN 0 Send MSN 1 (16 octets), no Session Initiate".to_string(),
    )
}

/// RFC 5043 §5.2.3, §6.1: a session control message with an unassigned function code.
pub(crate) fn sctp_unknown_function(ctx: &mut Ctx<'_>) -> Outcome {
    let mut m = Vec::with_capacity(8);
    m.extend_from_slice(&0u16.to_be_bytes());
    m.extend_from_slice(&UNKNOWN_FUNCTION.to_be_bytes());
    m.extend_from_slice(&[0, 1, 0, 1]);
    expect_end(
        ctx,
        PPID_DDP_STREAM_SESSION_CONTROL,
        &m,
        format!(
            "PPID 17 DDP-SSN 0 function code {UNKNOWN_FUNCTION:#05x}, 4 octets of Private Data"
        ),
    )
}

/// The peer's Read Request in a message read as a DDP Segment message (DDP-SSN, then the
/// segment) whatever its PPID (rfc5043-segment-framing judges the PPID).
fn read_request_in(m: &Message) -> Option<ReadRequest> {
    match RdmapMessage::parse(m.data.get(2..)?).ok()?.header {
        Header::ReadRequest { request, .. } => Some(request),
        _ => None,
    }
}

/// A session with an rping server whose Read Request came, and a Read Request of ours for
/// an STag it never advertised (its sink STag with one bit flipped) sent as DDP-SSN 2: the
/// association, the segment sent (DDP-SSN and all), the request and what was sent; or the
/// outcome.
fn invalid_read(ctx: &mut Ctx<'_>) -> Result<(SctpSocket, Vec<u8>, ReadRequest, String), Outcome> {
    let (s, m, mut sent) = rping_session(ctx)?;
    let Some(theirs) = read_request_in(&m) else {
        s.abort();
        return Err(Outcome::new(NA, sent, describe(&m))
            .because("no Read Request from the rping server (see rfc5043-segment-framing)"));
    };
    let req = read_of(theirs.sink_stag ^ STAG_FLIP, theirs.sink_to, 16);
    let seg = ddp_adapt::segment_message(2, &read_request_ulpdu(1, req));
    sent.push_str(&format!(
        "; PPID 16 DDP-SSN 2 Read Request MSN 1: 16 octets from STag {:#x} (never advertised)",
        req.source_stag
    ));
    if let Err(e) = send(&s, PPID_DDP_SEGMENT, &seg) {
        s.abort();
        return Err(Outcome::new(Fail, sent, "-").because(e));
    }
    Ok((s, seg, req, sent))
}

/// Waits for the peer's Terminate: the message that carries it (read as a DDP Segment
/// message whatever its PPID other than 17, which the judge then checks), or what came
/// instead.
fn await_terminate(s: &SctpSocket, ctx: &Ctx<'_>) -> Result<(Message, PeerTerminate), String> {
    let mut seen = Vec::new();
    loop {
        match next(s, ctx) {
            Next::Msg(m) => {
                if m.ppid != PPID_DDP_STREAM_SESSION_CONTROL
                    && let Some(t) = m.data.get(2..).and_then(term::read)
                {
                    return Ok((m, t));
                }
                seen.push(describe(&m));
            }
            Next::Ended(what) => {
                seen.push(format!("{what} without a Terminate"));
                return Err(seen.join("; "));
            }
            Next::Quiet => {
                seen.push(format!(
                    "no Terminate within {} s",
                    ctx.cfg.step.as_secs_f32()
                ));
                return Err(seen.join("; "));
            }
        }
        if seen.len() > 16 {
            return Err(format!("{} messages and no Terminate", seen.len()));
        }
    }
}

/// RFC 5040 §4.8, §7.1 over RFC 5043 §5.2, §5.2.2: the Terminate for a Read Request of an
/// STag never advertised, as one unordered PPID 16 message behind the next DDP-SSN, with
/// the cause and both headers copied.
pub(crate) fn sctp_terminate(ctx: &mut Ctx<'_>) -> Outcome {
    let (s, seg, req, sent) = match invalid_read(ctx) {
        Ok(x) => x,
        Err(o) => return o,
    };
    let o = match await_terminate(&s, ctx) {
        Ok((m, t)) => {
            let (v, why) = judge(
                &t,
                &[protection(ProtectionCode::InvalidStag)],
                &seg[2..],
                Copy::Required,
                Some(&req),
            );
            let mut wrong: Vec<String> = (!why.is_empty()).then_some(why).into_iter().collect();
            if m.ppid != PPID_DDP_SEGMENT {
                wrong.push(format!("PPID {}, not 16 (§5.2)", m.ppid));
            }
            if !m.unordered {
                wrong.push("sent ordered (§10)".to_string());
            }
            let ssn = u16::from_be_bytes([m.data[0], m.data[1]]);
            if ssn != 2 {
                wrong.push(format!(
                    "DDP-SSN {ssn}, not 2, the next after the Read Request's 1 (§5.2.1)"
                ));
            }
            let v = if wrong.is_empty() { v } else { Fail };
            Outcome::new(v, sent, describe_segment(&m)).because(wrong.join("; "))
        }
        Err(e) => Outcome::new(Fail, sent, e).because("no Terminate for an invalid Read Request"),
    };
    s.abort();
    o
}

/// RFC 5040 §7.1 over RFC 5043 §6: after its Terminate the peer sends no DDP Segment and
/// the session ends, even when a valid Send follows.
pub(crate) fn sctp_after_terminate(ctx: &mut Ctx<'_>) -> Outcome {
    let (s, _, _, mut sent) = match invalid_read(ctx) {
        Ok(x) => x,
        Err(o) => return o,
    };
    let t = match await_terminate(&s, ctx) {
        Ok((_, t)) => t,
        Err(e) => {
            s.abort();
            return Outcome::new(NA, sent, e)
                .because("no Terminate to follow (judged by rfc5043-terminate)");
        }
    };
    let info = rping_info(RUNNER_TO, RUNNER_STAG, ADV_SIZE);
    sent.push_str("; then a valid Send, DDP-SSN 3 MSN 2");
    // The association may be gone already; a refused message is what ending it means.
    let _ = send(
        &s,
        PPID_DDP_SEGMENT,
        &ddp_adapt::segment_message(3, &send_ulpdu(2, &info)),
    );
    let mut after = Vec::new();
    let (ended, end) = loop {
        match next(&s, ctx) {
            Next::Msg(m) => {
                let terminate = m.ppid == PPID_DDP_STREAM_SESSION_CONTROL
                    && SessionControl::parse(&m.data)
                        .is_ok_and(|c| c.function == FunctionCode::Terminate);
                if terminate {
                    break (true, describe(&m));
                }
                after.push(describe(&m));
            }
            Next::Ended(what) => break (true, what),
            Next::Quiet => break (false, "the association stayed up".to_string()),
        }
        if after.len() > 16 {
            break (false, "the association stayed up".to_string());
        }
    };
    s.abort();
    let seen = format!(
        "{}; after it: {}{end}",
        t.describe(),
        if after.is_empty() {
            String::new()
        } else {
            format!("{}; ", after.join(", "))
        }
    );
    if !after.is_empty() {
        Outcome::new(Fail, sent, seen).because("messages followed the Terminate")
    } else if !ended {
        Outcome::new(Fail, sent, seen).because("the session did not end after the Terminate")
    } else {
        Outcome::new(Pass, sent, seen)
    }
}
