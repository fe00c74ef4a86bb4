//! The RFC 5043 cases: DDP over SCTP, against a peer on softrnic's SCTP with RFC 6951 UDP
//! encapsulation. Each case runs on an SCTP association of its own (the runner announces the
//! DDP Adaptation Layer Indication, as §5.1 requires of both ends), sends DDP Stream Session
//! Control messages (PPID 17) and DDP Segments (PPID 16) built by hand, and judges the
//! messages the peer sends back and whether the association survives.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};

use mpa::EnhancedData;
use rdmap::{Header, Message as RdmapMessage};
use sctp::ddp_adapt::{
    self, ADAPTATION_DDP, DdpSctpMessage, FunctionCode, PPID_DDP_SEGMENT,
    PPID_DDP_STREAM_SESSION_CONTROL, SessionControl,
};
use sctp_io::{Error as SockError, Message, SctpSocket, Transport};

use crate::cases::{ADV_SIZE, RUNNER_STAG, RUNNER_TO, describe_ulpdu, rping_info, send_ulpdu};
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

/// RFC 5043 §5.2, §5.2.2, §10: the peer's DDP Segments once the session is up (rping's
/// Read Request): PPID 16, unordered, one whole DDP Segment behind the next DDP-SSN.
pub(crate) fn sctp_segment_framing(ctx: &mut Ctx<'_>) -> Outcome {
    if ctx.cfg.app != PeerApp::RpingServer {
        return Outcome::new(NA, "-", "-")
            .because("needs a peer application that answers a Send (run with --app rping-server)");
    }
    let (s, accept, mut sent) = match session(ctx) {
        Ok(x) => x,
        Err(o) => return o,
    };
    let ok = SessionControl::parse(&accept.data)
        .is_ok_and(|c| c.function.base() == FunctionCode::Accept);
    if accept.ppid != PPID_DDP_STREAM_SESSION_CONTROL || !ok {
        s.abort();
        return Outcome::new(NA, sent, describe(&accept))
            .because("the session was not accepted (see rfc5043-session-accept)");
    }
    let info = rping_info(RUNNER_TO, RUNNER_STAG, ADV_SIZE);
    let seg = ddp_adapt::segment_message(1, &send_ulpdu(1, &info));
    sent.push_str(&format!(
        "; PPID 16 DDP-SSN 1 Send MSN 1: rping start buffer STag {RUNNER_STAG:#x} TO {RUNNER_TO:#x}, {ADV_SIZE} octets"
    ));
    if let Err(e) = send(&s, PPID_DDP_SEGMENT, &seg) {
        s.abort();
        return Outcome::new(Fail, sent, "-").because(e);
    }
    let m = match next(&s, ctx) {
        Next::Msg(m) => m,
        Next::Ended(what) => {
            return Outcome::new(Fail, sent, what).because("no DDP Segment came from the peer");
        }
        Next::Quiet => {
            s.abort();
            return Outcome::new(Fail, sent, "no message")
                .because("the rping server's Read Request did not come");
        }
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
    // The observation reads the octets as a segment whatever the PPID says.
    let observed = if m.ppid == PPID_DDP_SEGMENT || m.data.len() < 2 {
        describe(&m)
    } else {
        let order = if m.unordered { "unordered" } else { "ordered" };
        format!(
            "PPID {} {order}: DDP-SSN {} {}",
            m.ppid,
            u16::from_be_bytes([m.data[0], m.data[1]]),
            describe_ulpdu(&m.data[2..])
        )
    };
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
