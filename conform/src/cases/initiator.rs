//! The cases of the peer as initiator: the runner listens, takes one connection per case,
//! reads the peer's MPA Request and answers as a responder would (or deliberately not).

use rdmap::Terminate;

use super::*;

/// The runner's responder settings: revision 2 (1 accepted), CRC when asked, markers when
/// asked, IRD/ORD 1 raised up to 16 for the peer, P2P with the RTR types `rtr` (preferring
/// `preferred`).
fn responder_config(rtr: RtrSet, preferred: Option<RtrType>) -> mpa::Config {
    mpa::Config {
        markers_tx: true,
        ird_max: 16,
        relaxed_ird_ord: true,
        p2p: !rtr.is_empty(),
        rtr_supported: rtr,
        rtr_preferred: preferred,
        ..mpa::Config::default()
    }
}

impl Ctx<'_> {
    /// The next connection of the peer and its MPA Request.
    fn accept_request(&mut self) -> Result<(Conn, ConnFrame), Outcome> {
        let Some(listener) = self.listener else {
            return Err(Outcome::new(NA, "-", "-")
                .because("needs the peer as initiator (softrnic conform --listen)"));
        };
        let mut c = Conn::accept(self.case, listener, self.cfg.accept_timeout).map_err(|e| {
            Outcome::new(Fail, "listening", format!("no connection: {e}"))
                .because("the peer must connect once per case")
        })?;
        match c.read_frame(self.cfg.step) {
            ReplyOutcome::Frame(f) if f.kind == FrameKind::Request => Ok((c, f)),
            other => {
                let o = Outcome::new(Fail, "TCP accept", describe_reply(&other))
                    .because("no MPA Request");
                Err(done(self, c, o))
            }
        }
    }

    /// Accepts the peer's next connection with `cfg`: the live connection (Reply sent) and
    /// the session, or the outcome.
    fn accept_with(&mut self, cfg: &mpa::Config) -> Result<(Live, mpa::Session), Outcome> {
        let (c, req) = self.accept_request()?;
        self.respond(c, req, cfg)
    }

    /// Answers the peer's Request `req` on `c` with `cfg`: the live connection (Reply sent)
    /// and the session, or (Reject sent) the outcome.
    fn respond(
        &mut self,
        mut c: Conn,
        req: ConnFrame,
        cfg: &mpa::Config,
    ) -> Result<(Live, mpa::Session), Outcome> {
        match mpa::respond(cfg, &req) {
            Ok(acc) => {
                let _ = c.send_raw(&bytes_of(&acc.reply));
                let s = acc.session;
                c.start_fpdus(s.crc, s.markers_tx, s.markers_rx);
                let live = Live {
                    c,
                    sent: vec![format!(
                        "(peer: {}) {}",
                        describe_frame(&req),
                        describe_frame(&acc.reply)
                    )],
                    reply: req,
                    msn: [1, 1],
                };
                Ok((live, s))
            }
            Err(rej) => {
                let _ = c.send_raw(&bytes_of(&rej.reply));
                let o = Outcome::new(NA, describe_frame(&rej.reply), describe_frame(&req)).because(
                    format!("the peer's Request cannot be accepted: {}", rej.reason),
                );
                Err(done(self, c, o))
            }
        }
    }
}

/// The RTR message `u` is, if it is one.
fn rtr_of(u: &[u8]) -> Option<(RtrType, Option<Header>)> {
    let m = Message::parse(u).ok()?;
    let t = match m.header {
        Header::RdmaWrite { .. } if m.payload.is_empty() => RtrType::Write,
        Header::ReadRequest { request, .. } if request.size == 0 => RtrType::Read,
        Header::Send { .. } if m.payload.is_empty() => RtrType::Send,
        _ => return None,
    };
    Some((t, Some(m.header)))
}

fn rtr_type_name(t: RtrType) -> &'static str {
    match t {
        RtrType::Write => "Write",
        RtrType::Read => "Read",
        RtrType::Send => "Send",
    }
}

pub(super) fn init_request(ctx: &mut Ctx<'_>) -> Outcome {
    let (c, req) = match ctx.accept_request() {
        Ok(x) => x,
        Err(o) => return o,
    };
    let mut wrong = Vec::new();
    if !(1..=2).contains(&req.revision) {
        wrong.push(format!("revision {}", req.revision));
    }
    if req.reject {
        wrong.push("R set in a Request".to_string());
    }
    if req.reserved != 0 {
        wrong.push(format!("Res bits {:#x}", req.reserved));
    }
    if req.revision == 2 && req.enhanced_flag && req.enhanced.is_none() {
        wrong.push("H without IRD/ORD".to_string());
    }
    let seen = describe_frame(&req);
    let o = if wrong.is_empty() {
        Outcome::new(Pass, "(listening)", seen)
    } else {
        Outcome::new(Fail, "(listening)", seen).because(wrong.join("; "))
    };
    done(ctx, c, o)
}

pub(super) fn init_waits_for_reply(ctx: &mut Ctx<'_>) -> Outcome {
    let (mut c, req) = match ctx.accept_request() {
        Ok(x) => x,
        Err(o) => return o,
    };
    let early = c.pending() + c.quiet_for(QUIET);
    let sent = format!("no Reply for {} ms", QUIET.as_millis());
    let o = if early == 0 {
        Outcome::new(
            Pass,
            sent,
            format!("{}; then nothing", describe_frame(&req)),
        )
    } else {
        Outcome::new(
            Fail,
            sent,
            format!("{}; then {early} octets", describe_frame(&req)),
        )
        .because("the initiator must wait for the Reply before it sends an FPDU")
    };
    done(ctx, c, o)
}

pub(super) fn init_reject(ctx: &mut Ctx<'_>) -> Outcome {
    let (mut c, req) = match ctx.accept_request() {
        Ok(x) => x,
        Err(o) => return o,
    };
    let pd = b"softrnic conform: rejected";
    let reply = mpa::reject_reply(&responder_config(RtrSet::ALL, None), &req, pd);
    let _ = c.send_raw(&bytes_of(&reply));
    let sent = format!(
        "{} with {} octets of private data",
        describe_frame(&reply),
        pd.len()
    );
    let closed = c.wait_close(ctx.cfg.step);
    let after = c.pending();
    let seen = format!(
        "{}; then {after} octets{}",
        describe_frame(&req),
        if closed { ", closed" } else { ", still open" }
    );
    let o = if after > 0 {
        Outcome::new(Fail, sent, seen).because("a rejected initiator must send no FPDU")
    } else if !closed {
        Outcome::new(Fail, sent, seen).because("a rejected initiator must close the connection")
    } else {
        Outcome::new(Pass, sent, seen)
    };
    done(ctx, c, o)
}

/// Takes the peer's next FPDU; answers a Read RTR with its zero-length Read Response.
fn next_fpdu(live: &mut Live, step: Duration) -> Result<RxFpdu, String> {
    match live.c.recv(step) {
        RxOutcome::Fpdu(f) => {
            if let Some((RtrType::Read, Some(Header::ReadRequest { request, .. }))) =
                rtr_of(&f.ulpdu)
            {
                let resp = Header::ReadResponse {
                    last: true,
                    stag: request.sink_stag,
                    to: request.sink_to,
                }
                .to_vec()
                .unwrap_or_default();
                live.send("zero-length Read Response".into(), &resp);
            }
            Ok(f)
        }
        RxOutcome::Framing(e) => Err(format!("framing error: {e}")),
        RxOutcome::Closed => Err("closed the connection".into()),
        RxOutcome::Timeout => Err("no FPDU in time".into()),
    }
}

pub(super) fn init_first_fpdu(ctx: &mut Ctx<'_>) -> Outcome {
    let cfg = responder_config(RtrSet::ALL, Some(RtrType::Write));
    let (mut live, session) = match ctx.accept_with(&cfg) {
        Ok(x) => x,
        Err(o) => return o,
    };
    let mut seen = Vec::new();
    let mut verdict = None;
    // In P2P mode the RTR comes first; the application's first message follows.
    for _ in 0..2 {
        match next_fpdu(&mut live, ctx.cfg.step) {
            Ok(f) => {
                seen.push(format!(
                    "{}{}",
                    describe_ulpdu(&f.ulpdu),
                    match f.crc_ok {
                        Some(true) => ", good CRC",
                        Some(false) => ", wrong CRC",
                        None => "",
                    }
                ));
                if Message::parse(&f.ulpdu).is_err() {
                    verdict = Some((Fail, "the first FPDU is not a valid ULPDU"));
                    break;
                }
                if f.crc_ok == Some(false) {
                    verdict = Some((Fail, "the CRC of the first FPDU is wrong"));
                    break;
                }
                let is_rtr = session.p2p && seen.len() == 1 && rtr_of(&f.ulpdu).is_some();
                if is_rtr {
                    continue;
                }
                verdict = Some(match first_message_wrong(ctx.cfg.app, &f.ulpdu) {
                    Some(why) => (Fail, why),
                    None => (Pass, ""),
                });
                break;
            }
            Err(e) => {
                seen.push(e);
                verdict = Some((Fail, "no first FPDU after the Reply"));
                break;
            }
        }
    }
    let (v, why) = verdict.unwrap_or((Fail, "no message after the RTR"));
    let o = Outcome::new(v, live.sent(), seen.join("; ")).because(why);
    done(ctx, live.c, o)
}

/// What is wrong with the first message (after any RTR) of an initiating application, by
/// what that application sends first: an rping client its 16-octet start advertisement, a
/// perftest `-R` client its 16-octet version string, both as a Send with MSN 1.
fn first_message_wrong(app: PeerApp, ulpdu: &[u8]) -> Option<&'static str> {
    let len = match Message::parse(ulpdu) {
        Ok(Message {
            header: Header::Send { msn: 1, .. },
            payload,
        }) => Some(payload.len()),
        _ => None,
    };
    match app {
        PeerApp::RpingClient if len != Some(RPING_RECV_LEN) => {
            Some("an rping client's first message is a 16-octet Send, MSN 1")
        }
        PeerApp::PerftestClient if len != Some(PERF_VERSION_LEN) => Some(
            "a perftest -R client's first message is its version string, a 16-octet Send, MSN 1",
        ),
        _ => None,
    }
}

/// The RTR type the runner selects among the peer's offer (Write, Read, Send in that order,
/// among `acceptable`).
fn pick(req: &ConnFrame, acceptable: &[RtrType]) -> Option<RtrType> {
    let e = req.enhanced.filter(|e| e.p2p && req.revision == 2)?;
    acceptable.iter().copied().find(|t| e.rtr.contains(*t))
}

pub(super) fn init_rtr_type(ctx: &mut Ctx<'_>) -> Outcome {
    rtr_case(ctx, &RtrType::PREFERENCE, false)
}

pub(super) fn init_rtr_stag(ctx: &mut Ctx<'_>) -> Outcome {
    rtr_case(ctx, &[RtrType::Write, RtrType::Read], true)
}

/// Accepts P2P with one of `acceptable` the peer offered and judges the RTR: its type, or
/// (with `stag`) the STags of a tagged one.
fn rtr_case(ctx: &mut Ctx<'_>, acceptable: &[RtrType], stag: bool) -> Outcome {
    let (c, req) = match ctx.accept_request() {
        Ok(x) => x,
        Err(o) => return o,
    };
    let Some(t) = pick(&req, acceptable) else {
        let o = Outcome::new(NA, "-", describe_frame(&req)).because(if stag {
            "the peer offers no tagged RTR in peer-to-peer mode"
        } else {
            "the peer does not ask for peer-to-peer mode"
        });
        return done(ctx, c, o);
    };
    let cfg = responder_config(RtrSet::only(t), Some(t));
    let (mut live, _) = match ctx.respond(c, req, &cfg) {
        Ok(x) => x,
        Err(o) => return o,
    };
    let o = match next_fpdu(&mut live, ctx.cfg.step) {
        Err(e) => Outcome::new(Fail, live.sent(), e).because("no RTR after the Reply"),
        Ok(f) => {
            let seen = describe_ulpdu(&f.ulpdu);
            match (rtr_of(&f.ulpdu), stag) {
                (Some((got, _)), false) if got == t => Outcome::new(Pass, live.sent(), seen),
                (_, false) => Outcome::new(Fail, live.sent(), seen).because(format!(
                    "the first FPDU must be the {} RTR the Reply selected",
                    rtr_type_name(t)
                )),
                (Some((_, Some(h))), true) => {
                    // The STag the responder looks up: the Write's, or the Read's Data
                    // Source STag. A Read RTR's sink STag only comes back to the initiator
                    // itself in the zero-length Read Response (Linux siw's Read RTR names
                    // sink STag 0 and source STag 1).
                    let zero = match h {
                        Header::RdmaWrite { stag, .. } => stag == 0,
                        Header::ReadRequest { request, .. } => request.source_stag == 0,
                        _ => false,
                    };
                    if zero {
                        Outcome::new(Deviation, live.sent(), seen).because(
                            "an RTR whose STag for the responder is 0: RFC 5041 §5.2 allows it, Chelsio adapters refuse it (Linux siw and softrnic send 1)",
                        )
                    } else {
                        Outcome::new(Pass, live.sent(), seen)
                    }
                }
                (_, true) => Outcome::new(NA, live.sent(), seen)
                    .because("the first FPDU is not the RTR (judged by init-rtr-type)"),
            }
        }
    };
    done(ctx, live.c, o)
}

pub(super) fn init_after_terminate(ctx: &mut Ctx<'_>) -> Outcome {
    let cfg = responder_config(RtrSet::ALL, Some(RtrType::Write));
    let (mut live, _) = match ctx.accept_with(&cfg) {
        Ok(x) => x,
        Err(o) => return o,
    };
    let mut before = match next_fpdu(&mut live, ctx.cfg.step) {
        Ok(f) => vec![describe_ulpdu(&f.ulpdu)],
        Err(e) => {
            let o = Outcome::new(NA, live.sent(), e)
                .because("no first FPDU (judged by init-first-fpdu)");
            return done(ctx, live.c, o);
        }
    };
    // What the peer sends before it waits for the runner (an rping client: RTR, then its
    // advertisement) precedes the Terminate; only what follows it counts.
    while let Ok(f) = next_fpdu(&mut live, QUIET) {
        before.push(describe_ulpdu(&f.ulpdu));
        if before.len() > 16 {
            break;
        }
    }
    let first = before.join(", ");
    let cause = TermCause::Rdmap(RdmapCode::LOCAL_CATASTROPHIC);
    let t = Header::Terminate {
        msn: 1,
        terminate: Terminate::bare(cause),
    }
    .to_vec()
    .unwrap_or_default();
    live.send(format!("after its {first}: Terminate ({cause})"), &t);
    let (after, closed) = after_terminate(&mut live, ctx.cfg.step);
    let seen = format!("after the Terminate: {}", describe_after(&after, closed));
    let o = if !after.is_empty() {
        Outcome::new(Fail, live.sent(), seen)
            .because("nothing may follow a received Terminate (no Terminate in reply)")
    } else if !closed {
        Outcome::new(Fail, live.sent(), seen).because("the stream must close after a Terminate")
    } else {
        Outcome::new(Pass, live.sent(), seen)
    };
    done(ctx, live.c, o)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An rping client's and a perftest `-R` client's first message: a Send, MSN 1, of 16
    /// octets (the start advertisement; the version string). Anything else is named.
    #[test]
    fn first_message_of_each_initiating_application() {
        let version = send_ulpdu(
            1,
            &[b'6', b'.', b'0', b'6', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        );
        for app in [PeerApp::RpingClient, PeerApp::PerftestClient] {
            assert_eq!(first_message_wrong(app, &version), None, "{app:?}");
            assert!(first_message_wrong(app, &send_ulpdu(1, &[0; 12])).is_some());
            assert!(first_message_wrong(app, &send_ulpdu(2, &[0; 16])).is_some());
            assert!(first_message_wrong(app, &write_ulpdu(1, 0, &[0; 16])).is_some());
        }
        let why = first_message_wrong(PeerApp::PerftestClient, &send_ulpdu(1, &[0; 56]));
        assert!(why.is_some_and(|w| w.contains("version string")), "{why:?}");
        // Nothing is known of a bare peer's first message.
        assert_eq!(
            first_message_wrong(PeerApp::Bare, &send_ulpdu(7, &[0; 3])),
            None
        );
    }
}
