//! The catalogue: a table of cases, each on a connection of its own. A row names the RFC
//! clause, what the RFC requires, and how the case runs: most rows are one of a few shapes
//! (one MPA Request and its answer, one invalid segment and its Terminate, one RTR type)
//! with the row's own data (what is sent, which answers are allowed); the others name a
//! function with a dialogue of its own.

use std::time::Duration;

use ddp::{DdpCode, TaggedCode, UntaggedCode};
use mpa::{ConnFrame, EnhancedData, FrameKind, RtrSet, RtrType};
use rdmap::{Header, Message, OperationCode, ProtectionCode, RdmapCode, ReadRequest, TermCause};

use crate::wire::{Conn, DEST_LEN, Dest, ReplyOutcome, RxFpdu, RxOutcome};
use crate::{Case, Ctx, Outcome, PeerApp, Verdict};
use decode::terminate::{self as term, Layout, PeerTerminate};

use Verdict::{Deviation, Fail, NotApplicable as NA, Pass};

/// The STag and Tagged Offset the runner advertises as its rping start buffer (it holds no
/// memory: the peer's Read Request is only inspected).
pub(crate) const RUNNER_STAG: u32 = 0x0000_5a01;
pub(crate) const RUNNER_TO: u64 = 0x0000_7000_0000_1000;
/// The STag the runner names as the sink of its own Read Requests.
const RUNNER_SINK_STAG: u32 = 0x0000_5b01;
/// rping's default size, what the runner advertises.
pub(crate) const ADV_SIZE: u32 = 64;
/// The receive buffer an rping application posts (`struct rping_rdma_info`).
const RPING_RECV_LEN: usize = 16;
/// How far past the start of the peer's buffer the bounds cases reach (more than any rping
/// buffer, which is at most 64 KiB).
const FAR: u64 = 1 << 20;
/// The bit flipped in a real STag to make one the peer never registered (as `softrnic
/// rping --inject bad-stag` does).
pub(crate) const STAG_FLIP: u32 = 0x0080_0000;
/// What the peer did when it closed and sent nothing else.
const CLOSED_WITHOUT_TERMINATE: &str = "closed the connection without a Terminate";
/// How often a refused connection to a perftest server is tried again.
const PERF_CONNECT_RETRY: Duration = Duration::from_millis(100);
/// How long "the peer stays quiet" is watched.
const QUIET: Duration = Duration::from_millis(400);

macro_rules! case {
    ($id:literal, $clause:literal, $requires:literal, $run:expr) => {
        Case {
            id: $id,
            clause: $clause,
            requires: $requires,
            peer_initiates: false,
            sctp: false,
            run: $run,
        }
    };
    (sctp $id:literal, $clause:literal, $requires:literal, $f:path) => {
        Case {
            id: $id,
            clause: $clause,
            requires: $requires,
            peer_initiates: false,
            sctp: true,
            run: Script($f),
        }
    };
    (initiator $id:literal, $clause:literal, $requires:literal, $f:ident) => {
        Case {
            id: $id,
            clause: $clause,
            requires: $requires,
            peer_initiates: true,
            sctp: false,
            run: Script($f),
        }
    };
}

/// How a case drives the peer and judges what it does. Most cases are one of a few shapes
/// with different data: their row of the catalogue names the shape and gives the data (what
/// is sent, what answer is allowed); the others run a dialogue of their own.
#[derive(Clone, Copy)]
pub(crate) enum Drive {
    /// Sends one MPA Request and judges the peer's answer to it.
    Reply(RequestProbe),
    /// Sends one invalid segment on a connection in full operation and judges the Terminate
    /// it must draw.
    Terminate(SegmentProbe),
    /// Offers one RTR type in P2P mode, checks the selection and drives the RTR message.
    Rtr(RtrType),
    /// A dialogue of its own.
    Script(fn(&mut Ctx<'_>) -> Outcome),
}

use Drive::{Rtr, Script};

/// An MPA Request and how the peer's answer to it is judged.
#[derive(Clone, Copy)]
pub(crate) struct RequestProbe {
    /// The Request's octets and their description.
    request: fn(&Ctx<'_>) -> (Vec<u8>, String),
    /// The verdict on the answer, and why (empty for PASS).
    judge: fn(&ReplyOutcome) -> (Verdict, String),
}

/// A segment the peer must refuse with a Terminate.
#[derive(Clone, Copy)]
pub(crate) struct SegmentProbe {
    /// The connection it is sent on, and how it is built there.
    open: Open,
    /// The causes the Terminate may name.
    allowed: &'static [TermCause],
    /// Whether the Terminate must copy the segment's DDP header.
    copy: Copy,
}

/// The connection a [`SegmentProbe`] is sent on, with the builder of its segment.
#[derive(Clone, Copy)]
pub(crate) enum Open {
    /// A connection for any application ([`live_any`]); the builder gets the peer's buffer
    /// when the peer is an rping server.
    Any(fn(&mut Live, Option<&ReadRequest>) -> Segment),
    /// An rping connection after its opening, or a perftest test connection after the
    /// `-R` opening; the builder gets the peer's buffer.
    Rping(fn(&mut Live, &ReadRequest) -> Segment),
    /// As [`Open::Rping`], for a segment that lands in a posted receive: rping only (a
    /// perftest `-R` server posts none on its test connection).
    Receive(fn(&mut Live, &ReadRequest) -> Segment),
    /// As [`Open::Rping`], for a Read Request of the peer's buffer, which must grant remote
    /// read (not a perftest write-bw server's).
    Readable(fn(&mut Live, &ReadRequest) -> Segment),
    /// As [`Open::Rping`], for an RDMA Write into the peer's buffer judged on a check other
    /// than the access right: the buffer must grant remote write (not a perftest atomic-bw
    /// server's).
    Writable(fn(&mut Live, &ReadRequest) -> Segment),
    /// Two rping connections ([`two_rping`]): the segment is sent on the second, built with
    /// the buffer of the first, which stays open until the Terminate is judged.
    Second(fn(&mut Live, &ReadRequest) -> Segment),
}

/// What a [`SegmentProbe`] sends: the ULPDU, its description, and the Read Request whose
/// header the Terminate must copy (with R).
pub(crate) struct Segment {
    what: String,
    ulpdu: Vec<u8>,
    read: Option<ReadRequest>,
}

impl Segment {
    fn new(what: String, ulpdu: Vec<u8>) -> Segment {
        Segment {
            what,
            ulpdu,
            read: None,
        }
    }

    /// A Read Request (MSN `msn`) of `request`, its header to be copied.
    fn read(what: String, msn: u32, request: ReadRequest) -> Segment {
        Segment {
            what,
            ulpdu: read_request_ulpdu(msn, request),
            read: Some(request),
        }
    }
}

/// A [`Drive::Reply`] row.
const fn reply(
    request: fn(&Ctx<'_>) -> (Vec<u8>, String),
    judge: fn(&ReplyOutcome) -> (Verdict, String),
) -> Drive {
    Drive::Reply(RequestProbe { request, judge })
}

/// A [`Drive::Terminate`] row.
const fn terminate(open: Open, allowed: &'static [TermCause], copy: Copy) -> Drive {
    Drive::Terminate(SegmentProbe {
        open,
        allowed,
        copy,
    })
}

/// A verdict with its reason.
fn verdict(v: Verdict, why: &str) -> (Verdict, String) {
    (v, why.to_string())
}

static CATALOGUE: &[Case] = &[
    case!(
        "mpa-rev2",
        "RFC 5044 §7.1.1 Rev, RFC 6581 §7",
        "accept a revision 2 Request with H: Reply Rev 2, R 0, H 1 with IRD/ORD, Res 0",
        reply(
            |ctx| frame(&ctx.request(1, 1, None)),
            |r| match r {
                ReplyOutcome::Frame(f) => {
                    let mut wrong = Vec::new();
                    if f.kind != FrameKind::Reply {
                        wrong.push("not a Reply (key)");
                    }
                    if f.reject {
                        wrong.push("rejected a valid revision 2 Request");
                    }
                    if f.revision != 2 {
                        wrong.push("revision is not 2");
                    }
                    if !f.enhanced_flag || f.enhanced.is_none() {
                        wrong.push("H not echoed with IRD/ORD");
                    }
                    if f.reserved != 0 {
                        wrong.push("Res bits set");
                    }
                    if wrong.is_empty() {
                        verdict(Pass, "")
                    } else {
                        (Fail, wrong.join("; "))
                    }
                }
                _ => verdict(Fail, "no valid Reply to a valid Request"),
            }
        )
    ),
    case!(
        "mpa-rev1",
        "RFC 5044 §7.1.1 Rev",
        "answer revision 1 with revision 1 (accept) or reject it; never a higher revision",
        reply(
            |ctx| {
                let mut req = ConnFrame::new(FrameKind::Request, 1);
                req.crc = ctx.cfg.crc;
                frame(&req)
            },
            |r| match r {
                ReplyOutcome::Frame(f) if f.reject => verdict(NA, "the peer declines revision 1"),
                ReplyOutcome::Frame(f) if f.revision == 1 && f.kind == FrameKind::Reply => {
                    verdict(Pass, "")
                }
                ReplyOutcome::Frame(_) => verdict(Fail, "accepted with a revision other than 1"),
                ReplyOutcome::Closed(_) => verdict(NA, "the peer declines revision 1 (closed)"),
                _ => verdict(Fail, "no Reply"),
            }
        )
    ),
    case!(
        "mpa-rev-unknown",
        "RFC 5044 §7.1.1 Rev",
        "not accept an unknown revision: Reply with R 1 or close",
        reply(
            |_| frame(&unknown_rev_request()),
            |r| match r {
                ReplyOutcome::Frame(f) if f.reject => verdict(Pass, ""),
                ReplyOutcome::Closed(_) => verdict(Pass, ""),
                ReplyOutcome::Frame(_) => verdict(Fail, "accepted an unknown revision"),
                _ => verdict(Fail, "neither refused nor closed"),
            }
        )
    ),
    case!(
        "mpa-reject-close",
        "RFC 5044 §7.1.2",
        "close the TCP connection after a rejecting Reply",
        Script(mpa_reject_close)
    ),
    case!(
        "mpa-reserved-bits",
        "RFC 5044 §7.1.1 Res",
        "ignore the Res bits of the Request and send them as 0",
        reply(
            |ctx| {
                let mut req = ctx.request(1, 1, None);
                req.reserved = 0x0f;
                frame(&req)
            },
            |r| match r {
                ReplyOutcome::Frame(f) if f.reject => {
                    verdict(Fail, "reserved bits must not be checked on receipt")
                }
                ReplyOutcome::Frame(f) if f.reserved != 0 => {
                    verdict(Fail, "reserved bits must be sent as 0")
                }
                ReplyOutcome::Frame(_) => verdict(Pass, ""),
                _ => verdict(Fail, "no Reply"),
            }
        )
    ),
    case!(
        "mpa-markers",
        "RFC 5044 §7.1.1 M, §5",
        "with M 1 in the Request: reject, or insert a marker every 512 octets pointing at its FPDU",
        Script(mpa_markers)
    ),
    case!(
        "mpa-crc",
        "RFC 5044 §7.1.1 C, §4.4",
        "with C 1 in the Request: reject, or use CRC32c on every FPDU it sends",
        Script(mpa_crc)
    ),
    case!(
        "mpa-crc-not-requested",
        "RFC 5044 §7.1.1 C",
        "a Request with C 0: accepted (CRC then runs if the Reply sets C)",
        reply(
            |_| frame(&enhanced_request(1, 1, None)),
            |r| match r {
                ReplyOutcome::Frame(f) if f.reject => verdict(
                    Deviation,
                    "refuses a Request without C (CRC required and strict, as Chelsio T404 and siw built with mpa_crc_required): RFC 5044 runs CRC when either side sets C",
                ),
                ReplyOutcome::Frame(f) if f.kind == FrameKind::Reply => verdict(Pass, ""),
                _ => verdict(Fail, "no Reply"),
            }
        )
    ),
    case!(
        "mpa-crc-error",
        "RFC 5044 §4.4, §8",
        "an FPDU with a wrong CRC: Terminate LLP/MPA 'MPA CRC Error' (0x2/0x0/0x02) or close, before anything else (the FPDU is not taken)",
        Script(mpa_crc_error)
    ),
    case!(
        "mpa-pd-512",
        "RFC 5044 §7.1.1 PD_Length",
        "accept 512 octets of private data (RFC 6581 enhanced data included)",
        reply(
            |ctx| frame(&pd_508_request(ctx)),
            |r| match r {
                ReplyOutcome::Frame(f) if !f.reject && f.kind == FrameKind::Reply => {
                    verdict(Pass, "")
                }
                _ => verdict(Fail, "512 octets of private data are allowed"),
            }
        )
    ),
    case!(
        "mpa-pd-513",
        "RFC 5044 §7.1.1 PD_Length",
        "refuse PD_Length above 512: Reply with R 1 or close",
        reply(
            |ctx| {
                let mut bytes = bytes_of(&pd_508_request(ctx));
                bytes.push(0x5a);
                if let Some(len) = bytes.get_mut(18..20) {
                    len.copy_from_slice(&513u16.to_be_bytes());
                }
                (
                    bytes,
                    "Request Rev 2 H1 IRD 1 ORD 1 PD_Length 513".to_string(),
                )
            },
            |r| match r {
                ReplyOutcome::Frame(f) if f.reject => verdict(Pass, ""),
                ReplyOutcome::Closed(_) => verdict(Pass, ""),
                ReplyOutcome::Frame(_) => verdict(
                    Fail,
                    "accepted a Request with more than 512 octets of private data",
                ),
                _ => verdict(Fail, "neither refused nor closed"),
            }
        )
    ),
    case!(
        "mpa-ird-ord",
        "RFC 6581 §7",
        "Reply ORD not above the initiator's IRD (IRD 2, ORD 8 sent)",
        reply(
            |ctx| frame(&ctx.request(2, 8, None)),
            |r| match r {
                ReplyOutcome::Frame(f) if f.reject =>
                    verdict(Fail, "refused a valid enhanced Request"),
                ReplyOutcome::Frame(f) => match f.enhanced {
                    Some(e) if e.ord <= 2 => verdict(Pass, ""),
                    Some(e) => (
                        Fail,
                        format!("Reply ORD {} exceeds the initiator's IRD 2", e.ord),
                    ),
                    None => verdict(Fail, "no IRD/ORD in the Reply"),
                },
                _ => verdict(Fail, "no Reply"),
            }
        )
    ),
    case!(
        "mpa-p2p-echo",
        "RFC 6581 §9 P2P",
        "accept P2P and echo the P2P flag with one RTR type, or reject (no matching RTR)",
        Script(mpa_p2p_echo)
    ),
    case!(
        "mpa-rtr-write",
        "RFC 6581 §9 RTR",
        "offered only the Write RTR: select exactly it (or reject); take the zero-length Write",
        Rtr(RtrType::Write)
    ),
    case!(
        "mpa-rtr-read",
        "RFC 6581 §9 RTR",
        "offered only the Read RTR: select exactly it (or reject); answer it with a zero-length Read Response",
        Rtr(RtrType::Read)
    ),
    case!(
        "mpa-rtr-send",
        "RFC 6581 §9 RTR",
        "offered only the Send RTR: select exactly it (or reject); take the zero-length Send",
        Rtr(RtrType::Send)
    ),
    case!(
        "mpa-rtr-choice",
        "RFC 6581 §9 RTR",
        "offered all three RTR types: select exactly one",
        Script(mpa_rtr_choice)
    ),
    case!(
        "mpa-rtr-stag0",
        "RFC 5041 §5.2, RFC 6581 §9",
        "a zero-length Write RTR with STag 0: not checked, the connection goes on",
        Script(mpa_rtr_stag0)
    ),
    case!(
        "mpa-responder-waits",
        "RFC 5044 §7.1.2",
        "the responder sends nothing after its Reply until the initiator's first FPDU",
        Script(mpa_responder_waits)
    ),
    case!(
        "mpa-request-timeout",
        "RFC 5044 §7.1 (Request timer)",
        "give up on an initiator that never completes its Request: close the connection",
        Script(mpa_request_timeout)
    ),
    case!(
        "ddp-version",
        "RFC 5041 §4.1 DV, §7.2",
        "DV 0 on an untagged segment: Terminate DDP Untagged 'Invalid DDP version' (0x1/0x2/0x06); a header copy, if any, is the header sent",
        terminate(
            Open::Any(|live, _| {
                let msn = live.next_send_msn();
                Segment::new(
                    format!("Send MSN {msn} with DV 0"),
                    untagged_raw(0x40, RDMAP_SEND, 0, msn),
                )
            }),
            &[ddp_cause(DdpCode::Untagged(UntaggedCode::InvalidVersion))],
            Copy::Optional,
        )
    ),
    case!(
        "ddp-invalid-qn",
        "RFC 5041 §7.1, §7.2",
        "a Send on QN 5: Terminate DDP Untagged 'Invalid QN' (0x1/0x2/0x01), header copied",
        terminate(
            Open::Any(|live, _| {
                let msn = live.next_send_msn();
                Segment::new(
                    format!("Send on QN 5 MSN {msn}"),
                    untagged_raw(DDP_UNTAGGED_LAST, RDMAP_SEND, 5, msn),
                )
            }),
            &[ddp_cause(DdpCode::Untagged(UntaggedCode::InvalidQn))],
            Copy::Required,
        )
    ),
    case!(
        "ddp-msn-range",
        "RFC 5041 §7.1, §7.2",
        "a Send with MSN far ahead: Terminate DDP Untagged 'MSN range is not valid' (0x1/0x2/0x03), header copied",
        terminate(
            Open::Any(|_, _| {
                let msn = 0x0100_0000;
                Segment::new(
                    format!("Send MSN {msn:#x}"),
                    send_ulpdu(msn, &[0u8; RPING_RECV_LEN]),
                )
            }),
            &[ddp_cause(DdpCode::Untagged(UntaggedCode::MsnRange))],
            Copy::Required,
        )
    ),
    case!(
        "ddp-no-buffer",
        "RFC 5041 §7.1, §7.2",
        "a Send beyond the posted receives: Terminate DDP Untagged 'no buffer available' (0x1/0x2/0x02), header copied",
        Script(ddp_no_buffer)
    ),
    case!(
        "ddp-too-long",
        "RFC 5041 §7.1, §7.2",
        "a 64-octet Send into a 16-octet receive: Terminate DDP Untagged 'Message too long' (0x1/0x2/0x05), header copied",
        terminate(
            Open::Receive(|live, _| {
                let msn = live.next_send_msn();
                Segment::new(
                    format!("Send MSN {msn} of 64 octets"),
                    send_ulpdu(msn, &[0x33u8; 64]),
                )
            }),
            &[ddp_cause(DdpCode::Untagged(UntaggedCode::TooLong))],
            Copy::Required,
        )
    ),
    case!(
        "ddp-invalid-stag",
        "RFC 5041 §7.1, §7.2",
        "an RDMA Write to an STag never advertised: Terminate DDP Tagged 'Invalid STag' (0x1/0x1/0x00), header copied",
        terminate(
            Open::Any(|_, read| {
                let (stag, to) = unadvertised(read);
                Segment::new(
                    format!("RDMA Write of 16 octets to STag {stag:#x} TO {to:#x}"),
                    write_ulpdu(stag, to, &[0x44u8; 16]),
                )
            }),
            &[ddp_cause(DdpCode::Tagged(TaggedCode::InvalidStag))],
            Copy::Required,
        )
    ),
    case!(
        "ddp-bounds",
        "RFC 5041 §7.1, §7.2",
        "an RDMA Write past the advertised buffer: Terminate DDP Tagged 'Base or bounds violation' (0x1/0x1/0x01), header copied",
        terminate(
            Open::Writable(|_, read| {
                let to = read.sink_to.wrapping_add(FAR);
                Segment::new(
                    format!(
                        "RDMA Write of 16 octets to the peer's buffer STag {:#x} at TO {to:#x} (1 MiB in)",
                        read.sink_stag
                    ),
                    write_ulpdu(read.sink_stag, to, &[0x44u8; 16]),
                )
            }),
            &[ddp_cause(DdpCode::Tagged(TaggedCode::BaseOrBounds))],
            Copy::Required,
        )
    ),
    case!(
        "ddp-to-wrap",
        "RFC 5041 §7.1, §7.2",
        "an RDMA Write whose TO + length wraps 64 bits: Terminate DDP Tagged 'TO wrap' (0x1/0x1/0x03), header copied",
        terminate(
            Open::Writable(|_, read| {
                let to = u64::MAX - 7;
                Segment::new(
                    format!(
                        "RDMA Write of 16 octets to the peer's buffer STag {:#x} at TO {to:#x}",
                        read.sink_stag
                    ),
                    write_ulpdu(read.sink_stag, to, &[0x44u8; 16]),
                )
            }),
            &[ddp_cause(DdpCode::Tagged(TaggedCode::ToWrap))],
            Copy::Required,
        )
    ),
    case!(
        "ddp-stag-not-associated",
        "RFC 5041 §7.1, §7.2",
        "an RDMA Write to a buffer of another connection (another PD): Terminate DDP Tagged 'STag not associated with DDP Stream' (0x1/0x1/0x02), header copied",
        terminate(
            Open::Second(|_, theirs| {
                Segment::new(
                    format!(
                        "on a second connection, an RDMA Write of 16 octets to the first one's buffer STag {:#x}",
                        theirs.sink_stag
                    ),
                    write_ulpdu(theirs.sink_stag, theirs.sink_to, &[0x44u8; 16]),
                )
            }),
            &[ddp_cause(DdpCode::Tagged(TaggedCode::StagNotAssociated))],
            Copy::Required,
        )
    ),
    case!(
        "ddp-invalid-mo",
        "RFC 5041 §7.1, §7.2",
        "a Send segment at MO 4096 of a 16-octet receive: Terminate DDP Untagged 'Invalid MO' (0x1/0x2/0x04), header copied",
        terminate(
            Open::Receive(|live, _| {
                let msn = live.next_send_msn();
                let u = Header::Send {
                    solicited_event: false,
                    invalidate_stag: None,
                    last: true,
                    msn,
                    mo: 4096,
                }
                .encode(&[0u8; RPING_RECV_LEN])
                .unwrap_or_default();
                Segment::new(format!("Send MSN {msn} segment of 16 octets at MO 4096"), u)
            }),
            &[ddp_cause(DdpCode::Untagged(UntaggedCode::InvalidMo))],
            Copy::Required,
        )
    ),
    case!(
        "ddp-access",
        "RFC 5040 §4.8 (Access rights violation), §7.1",
        "a Read Request of a buffer without remote read rights (a write-bw server's): Terminate RDMAP Remote Protection 'Access rights violation' (0x0/0x1/0x02), DDP and Read Request headers copied",
        Script(ddp_access)
    ),
    case!(
        "rdmap-version",
        "RFC 5040 §4.1 RV, §7.2",
        "RV 0: Terminate RDMAP Remote Operation 'Invalid RDMAP version' (0x0/0x2/0x05); a header copy, if any, is the header sent",
        terminate(
            Open::Any(|live, _| {
                let msn = live.next_send_msn();
                Segment::new(
                    format!("Send MSN {msn} with RV 0"),
                    untagged_raw(DDP_UNTAGGED_LAST, 0x03, 0, msn),
                )
            }),
            &[operation(OperationCode::InvalidVersion)],
            Copy::Optional,
        )
    ),
    case!(
        "rdmap-opcode",
        "RFC 5040 §4.1 OpCode, §7.2",
        "reserved opcode 0xC: Terminate RDMAP Remote Operation 'Unexpected OpCode' (0x0/0x2/0x06); a header copy, if any, is the header sent",
        terminate(
            Open::Any(|live, _| {
                let msn = live.next_send_msn();
                Segment::new(
                    format!("untagged message on QN 0 MSN {msn} with opcode 0xC"),
                    untagged_raw(DDP_UNTAGGED_LAST, 0x4c, 0, msn),
                )
            }),
            &[operation(OperationCode::UnexpectedOpcode)],
            Copy::Optional,
        )
    ),
    case!(
        "rdmap-read",
        "RFC 5040 §5.2.1, §5.2.2",
        "a valid RDMA Read Request: one Read Response to the named sink STag/TO, L set, the size asked",
        Script(rdmap_read)
    ),
    case!(
        "rdmap-read-invalid-stag",
        "RFC 5040 §4.8, §7.1",
        "a Read Request for an STag never advertised: Terminate RDMAP Remote Protection 'Invalid STag' (0x0/0x1/0x00), DDP and Read Request headers copied",
        terminate(
            Open::Rping(|live, peer| {
                let msn = live.next_read_msn();
                let req = read_of(peer.sink_stag ^ STAG_FLIP, peer.sink_to, 16);
                Segment::read(
                    format!(
                        "Read Request MSN {msn}: 16 octets from STag {:#x} (never advertised)",
                        req.source_stag
                    ),
                    msn,
                    req,
                )
            }),
            &[protection(ProtectionCode::InvalidStag)],
            Copy::Required,
        )
    ),
    case!(
        "rdmap-read-bounds",
        "RFC 5040 §4.8, §7.1",
        "a Read Request past the buffer: Terminate RDMAP Remote Protection 'Base or bounds violation' (0x0/0x1/0x01), headers copied",
        terminate(
            Open::Readable(|live, peer| {
                let msn = live.next_read_msn();
                let req = read_of(peer.sink_stag, peer.sink_to.wrapping_add(FAR), 16);
                Segment::read(
                    format!(
                        "Read Request MSN {msn}: 16 octets of STag {:#x} at TO {:#x} (1 MiB in)",
                        req.source_stag, req.source_to
                    ),
                    msn,
                    req,
                )
            }),
            &[protection(ProtectionCode::BaseOrBounds)],
            Copy::Required,
        )
    ),
    case!(
        "rdmap-read-not-associated",
        "RFC 5040 §4.8, §7.1",
        "a Read Request of a buffer of another connection: Terminate RDMAP Remote Protection 'STag not associated with RDMAP Stream' (0x0/0x1/0x03), headers copied",
        terminate(
            Open::Second(|live, theirs| {
                let msn = live.next_read_msn();
                Segment::read(
                    format!(
                        "on a second connection, Read Request MSN {msn}: 16 octets of the first one's buffer STag {:#x}",
                        theirs.sink_stag
                    ),
                    msn,
                    read_of(theirs.sink_stag, theirs.sink_to, 16),
                )
            }),
            &[protection(ProtectionCode::StagNotAssociated)],
            Copy::Required,
        )
    ),
    case!(
        "rdmap-atomic-access",
        "RFC 7306 §5.1, RFC 5040 §4.8",
        "a Fetch and Add on a buffer without remote atomic rights: Terminate RDMAP Remote Protection 'Access rights violation' (0x0/0x1/0x02), header copied",
        Script(rdmap_atomic_access)
    ),
    case!(
        "rdmap-atomic",
        "RFC 7306 §5.2.1, §5.2.2",
        "a Fetch and Add of 1 on the buffer's first 64-bit word, which grants remote atomic access: an Atomic Response (QN 3, MSN 1, L) with the Request Identifier and the word's original value",
        Script(rdmap_atomic)
    ),
    case!(
        "rdmap-atomic-alignment",
        "RFC 7306 §5.2.1, §8.2",
        "a Fetch and Add at a Tagged Offset 4 octets into the buffer (in bounds, not 64-bit aligned): Terminate RDMAP Remote Operation 'Catastrophic error, localized to RDMAP Stream' (0x0/0x2/0x07), header copied; no Atomic Response",
        Script(rdmap_atomic_alignment)
    ),
    case!(
        "rdmap-immediate",
        "RFC 7306 §6 (Immediate Data)",
        "an Immediate Data message (opcode 0x8, QN 0, 8 octets into the posted receive): taken without a Terminate",
        Script(rdmap_immediate)
    ),
    case!(
        "rdmap-invalidate",
        "RFC 5040 §5.3 (Send with Invalidate)",
        "a Send with Invalidate of the peer's buffer STag, then an RDMA Write to it: Terminate DDP Tagged 'Invalid STag' (0x1/0x1/0x00)",
        Script(rdmap_invalidate)
    ),
    case!(
        "rdmap-invalidate-invalid",
        "RFC 5040 §5.3, §7.2",
        "a Send with Invalidate of an STag never advertised: Terminate RDMAP 'STag cannot be Invalidated' (0x0/0x2/0x09 or 0x0/0x1/0x09), header copied",
        terminate(
            Open::Receive(|live, peer| {
                let msn = live.next_send_msn();
                let stag = peer.sink_stag ^ STAG_FLIP;
                Segment::new(
                    format!("Send with Invalidate MSN {msn} of STag {stag:#x} (never advertised)"),
                    send_invalidate_ulpdu(msn, stag),
                )
            }),
            &CANNOT_INVALIDATE,
            Copy::Required,
        )
    ),
    case!(
        "rdmap-ird",
        "RFC 5040 §6.1, RFC 6581 §7 IRD",
        "IRD + 2 Read Requests in one segment (more than it can hold even with one answered at once): Terminate DDP Untagged 'Invalid MSN' (0x1/0x2/0x02 or 0x03) for a Request beyond the IRD, header copied",
        Script(rdmap_ird)
    ),
    case!(
        "rdmap-terminate-layout",
        "RFC 5040 §4.8 Terminate Control",
        "Layer in bits 0-3, Error Type 4-7, M/D/R bits 16-18, reserved bits 0",
        Script(rdmap_terminate_layout)
    ),
    case!(
        "rdmap-after-terminate",
        "RFC 5040 §7.1 (Terminate is the last message)",
        "nothing after its Terminate; the stream is closed",
        Script(rdmap_after_terminate)
    ),
    case!(
        initiator "init-request",
        "RFC 5044 §7.1.1",
        "a well-formed Request: the key, Rev 1 or 2, R 0, Res 0, PD_Length at most 512, IRD/ORD with H",
        init_request
    ),
    case!(
        initiator "init-waits-for-reply",
        "RFC 5044 §7.1.2",
        "nothing after the Request until the Reply",
        init_waits_for_reply
    ),
    case!(
        initiator "init-reject",
        "RFC 5044 §7.1.1 R, §7.1.2",
        "after a Reply with R 1 (and private data): no FPDU, the connection closed",
        init_reject
    ),
    case!(
        initiator "init-first-fpdu",
        "RFC 5044 §7.1.2",
        "after the Reply, the initiator's first FPDU: a well-formed ULPDU (with a good CRC when negotiated)",
        init_first_fpdu
    ),
    case!(
        initiator "init-rtr-type",
        "RFC 6581 §9 RTR",
        "in P2P mode the first FPDU is the RTR of the type the Reply selected",
        init_rtr_type
    ),
    case!(
        initiator "init-rtr-stag",
        "RFC 6581 §9 RTR, RFC 5041 §5.2",
        "a tagged RTR with a non-zero STag where the responder looks one up (the Write's STag, the Read's Data Source STag), as Chelsio adapters need",
        init_rtr_stag
    ),
    case!(
        initiator "init-after-terminate",
        "RFC 5040 §7.1 (Terminate is the last message)",
        "after receiving a Terminate: no FPDU (no Terminate in reply), the stream closed",
        init_after_terminate
    ),
    case!(
        sctp "rfc5043-adaptation",
        "RFC 5043 §5.1, §11.1",
        "the INIT ACK carries the Adaptation Layer Indication (type 0xC006) with DDP's code point 0x00000001",
        crate::sctp::sctp_adaptation
    ),
    case!(
        sctp "rfc5043-session-accept",
        "RFC 5043 §5.2.1, §5.2.3, §6.2, RFC 6581 §7",
        "a valid Enhanced Initiate is answered by one unordered PPID 17 message: DDP-SSN 0, Enhanced Accept (0x006) with IRD/ORD, at most 512 octets of Private Data",
        crate::sctp::sctp_session_accept
    ),
    case!(
        sctp "rfc5043-segment-framing",
        "RFC 5043 §5.2, §5.2.1, §5.2.2, §10",
        "each DDP Segment is one unordered SCTP message with PPID 16: the DDP-SSN following the Accept's, then one whole DDP Segment",
        crate::sctp::sctp_segment_framing
    ),
    case!(
        sctp "rfc5043-segment-before-initiate",
        "RFC 5043 §6.1, §6.2",
        "a DDP Segment before any Session Initiate fits no legal sequence: the session ends (Session Terminate or the association aborted), no Accept, no segment",
        crate::sctp::sctp_segment_before_initiate
    ),
    case!(
        sctp "rfc5043-unknown-function",
        "RFC 5043 §5.2.3, §6.1",
        "a session control message with an unassigned function code (0x00F) fits no legal sequence: the session ends, no Accept",
        crate::sctp::sctp_unknown_function
    ),
    case!(
        sctp "rfc5043-terminate",
        "RFC 5040 §4.8, §7.1, RFC 5043 §5.2, §5.2.2",
        "a Read Request for an STag never advertised: the Terminate (RDMAP Remote Protection 'Invalid STag', 0x0/0x1/0x00, DDP and Read Request headers copied) as one unordered PPID 16 message, the next DDP-SSN",
        crate::sctp::sctp_terminate
    ),
    case!(
        sctp "rfc5043-after-terminate",
        "RFC 5040 §7.1 (Terminate is the last message), RFC 5043 §6",
        "after its Terminate, a valid Send draws nothing: no DDP Segment, the session ends (Session Terminate, or the association shut down or aborted)",
        crate::sctp::sctp_after_terminate
    ),
];

mod initiator;
use initiator::{
    init_after_terminate, init_first_fpdu, init_reject, init_request, init_rtr_stag, init_rtr_type,
    init_waits_for_reply,
};

/// Every case, in the order a run takes them.
pub fn catalogue() -> &'static [Case] {
    CATALOGUE
}

// ------------------------------------------------------------------------------------------
// Frames and messages
// ------------------------------------------------------------------------------------------

/// An enhanced (revision 2, H) Request with IRD/ORD and no private data.
fn enhanced_request(ird: u16, ord: u16, rtr: Option<RtrSet>) -> ConnFrame {
    let mut f = ConnFrame::new(FrameKind::Request, 2);
    f.enhanced_flag = true;
    f.enhanced = Some(EnhancedData {
        ird,
        ord,
        p2p: rtr.is_some(),
        rtr: rtr.unwrap_or(RtrSet::EMPTY),
    });
    f
}

fn rtr_name(s: &RtrSet) -> String {
    let v: Vec<&str> = [(s.write, "Write"), (s.read, "Read"), (s.send, "Send")]
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, n)| *n)
        .collect();
    if v.is_empty() {
        "none".into()
    } else {
        v.join("+")
    }
}

/// A frame in words.
fn describe_frame(f: &ConnFrame) -> String {
    let kind = match f.kind {
        FrameKind::Request => "Request",
        FrameKind::Reply => "Reply",
    };
    let mut s = format!(
        "{kind} Rev {} M{} C{} R{} H{}",
        f.revision,
        u8::from(f.markers),
        u8::from(f.crc),
        u8::from(f.reject),
        u8::from(f.enhanced_flag)
    );
    if f.reserved != 0 {
        s.push_str(&format!(" Res {:#x}", f.reserved));
    }
    if let Some(e) = f.enhanced {
        s.push_str(&format!(" IRD {} ORD {}", e.ird, e.ord));
        if e.p2p {
            s.push_str(&format!(" P2P RTR {}", rtr_name(&e.rtr)));
        }
    }
    s.push_str(&format!(" PD {}", f.pd_length()));
    s
}

fn bytes_of(f: &ConnFrame) -> Vec<u8> {
    f.to_bytes().unwrap_or_default()
}

/// A Send message (QN 0) carrying `payload`: the header of the RTR Send (one whole message
/// at MO 0, no solicited event, no invalidation) with the payload after it.
pub(crate) fn send_ulpdu(msn: u32, payload: &[u8]) -> Vec<u8> {
    Header::rtr_send(msn).encode(payload).unwrap_or_default()
}

/// An untagged segment by hand: DDP control `ddp_ctrl` (T 0; L and DV as given), RDMAP
/// control `rdmap_ctrl`, QN, MSN, MO 0, and an rping receive's worth of zeros.
fn untagged_raw(ddp_ctrl: u8, rdmap_ctrl: u8, qn: u32, msn: u32) -> Vec<u8> {
    let mut v = vec![ddp_ctrl, rdmap_ctrl, 0, 0, 0, 0];
    v.extend_from_slice(&qn.to_be_bytes());
    v.extend_from_slice(&msn.to_be_bytes());
    v.extend_from_slice(&0u32.to_be_bytes());
    v.extend_from_slice(&[0u8; RPING_RECV_LEN]);
    v
}

/// DDP control octet: untagged, last, DV 1.
const DDP_UNTAGGED_LAST: u8 = 0x41;
/// RDMAP control octet of a Send (RV 1).
const RDMAP_SEND: u8 = 0x43;

fn write_ulpdu(stag: u32, to: u64, payload: &[u8]) -> Vec<u8> {
    Header::RdmaWrite {
        last: true,
        stag,
        to,
    }
    .encode(payload)
    .unwrap_or_default()
}

pub(crate) fn read_request_ulpdu(msn: u32, request: ReadRequest) -> Vec<u8> {
    Header::ReadRequest { msn, request }
        .to_vec()
        .unwrap_or_default()
}

/// The rping advertisement `{u64 buf, u32 rkey, u32 size}`, big endian.
pub(crate) fn rping_info(buf: u64, rkey: u32, size: u32) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&buf.to_be_bytes());
    b[8..12].copy_from_slice(&rkey.to_be_bytes());
    b[12..].copy_from_slice(&size.to_be_bytes());
    b
}

/// A received ULPDU in words.
pub(crate) fn describe_ulpdu(u: &[u8]) -> String {
    if let Some(t) = term::read(u) {
        return t.describe();
    }
    match Message::parse(u) {
        Ok(m) => match m.header {
            Header::RdmaWrite { stag, to, .. } => {
                format!(
                    "RDMA Write STag {stag:#x} TO {to:#x}, {} octets",
                    m.payload.len()
                )
            }
            Header::ReadRequest { msn, request: r } => format!(
                "Read Request MSN {msn}: {} octets from STag {:#x} TO {:#x} to STag {:#x} TO {:#x}",
                r.size, r.source_stag, r.source_to, r.sink_stag, r.sink_to
            ),
            Header::ReadResponse { last, stag, to } => format!(
                "Read Response STag {stag:#x} TO {to:#x}{}, {} octets",
                if last { " L" } else { "" },
                m.payload.len()
            ),
            Header::Send { msn, .. } => format!("Send MSN {msn}, {} octets", m.payload.len()),
            h => format!("{:?}", h.opcode()),
        },
        Err(e) => format!("unparseable ULPDU of {} octets ({e})", u.len()),
    }
}

// ------------------------------------------------------------------------------------------
// Connections
// ------------------------------------------------------------------------------------------

impl Ctx<'_> {
    fn connect(&mut self) -> Result<Conn, Outcome> {
        // A perftest -R server serves one test and is started again for the next (and
        // listens for its test connection only after the control exchange): a refused
        // connection is tried again for one step, as perftest's client retries.
        let start = std::time::Instant::now();
        loop {
            match Conn::connect(self.case, self.cfg.peer, self.cfg.step) {
                Ok(c) => return Ok(c),
                Err(e)
                    if self.cfg.app.is_perftest()
                        && e.kind() == std::io::ErrorKind::ConnectionRefused
                        && start.elapsed() < self.cfg.step =>
                {
                    std::thread::sleep(PERF_CONNECT_RETRY);
                }
                Err(e) => {
                    return Err(Outcome::new(Fail, "TCP SYN", format!("no connection: {e}"))
                        .because("the peer must be listening"));
                }
            }
        }
    }

    /// A Request with rping's settings (revision 2, H, IRD/ORD `ird`/`ord`, P2P offering
    /// `rtr`), C set when the run asks for CRC in every Request.
    fn request(&self, ird: u16, ord: u16, rtr: Option<RtrSet>) -> ConnFrame {
        let mut f = enhanced_request(ird, ord, rtr);
        f.crc = self.cfg.crc;
        f
    }

    fn keep(&mut self, c: Conn) {
        self.conns.push(c.close());
    }

    fn needs_rping(&self) -> Result<(), Outcome> {
        match self.cfg.app {
            PeerApp::RpingServer
            | PeerApp::WriteBwServer
            | PeerApp::ReadBwServer
            | PeerApp::AtomicBwServer => Ok(()),
            PeerApp::RpingClient | PeerApp::PerftestClient | PeerApp::Bare => Err(Outcome::new(NA, "-", "-").because(
                "needs a peer application that exposes a buffer (run with --app rping-server, write-bw-server, read-bw-server or atomic-bw-server)",
            )),
        }
    }

    /// The case's segment lands in a posted receive of the test connection: a perftest
    /// `-R` server posts none there.
    fn needs_receive(&self) -> Result<(), Outcome> {
        if self.cfg.app.is_perftest() {
            return Err(Outcome::new(NA, "-", "-").because(
                "needs a receive posted on the connection: a perftest -R server posts none on its test connection (only its control connection takes Sends)",
            ));
        }
        self.needs_rping()
    }

    /// The case reads the peer's buffer: a perftest write-bw server's grants no remote read,
    /// an atomic-bw server's remote atomic access only.
    fn needs_remote_read(&self) -> Result<(), Outcome> {
        match self.cfg.app {
            PeerApp::WriteBwServer => Err(Outcome::new(NA, "-", "-").because(
                "needs a buffer with remote read rights: a write-bw server's grants remote write only (ddp-access checks that its Read is refused)",
            )),
            PeerApp::AtomicBwServer => Err(Outcome::new(NA, "-", "-").because(
                "needs a buffer with remote read rights: an atomic-bw server's grants remote atomic access only (ddp-access checks that its Read is refused)",
            )),
            _ => self.needs_rping(),
        }
    }

    /// The case writes into the peer's buffer and judges a DDP check other than the access
    /// right: an atomic-bw server's buffer grants no remote write, and a peer may check the
    /// right first (RFC 5041 §7.2 orders no checks).
    fn needs_remote_write(&self) -> Result<(), Outcome> {
        if self.cfg.app == PeerApp::AtomicBwServer {
            return Err(Outcome::new(NA, "-", "-").because(
                "needs a buffer with remote write rights: an atomic-bw server's grants remote atomic access only",
            ));
        }
        self.needs_rping()
    }

    /// The case sends an Atomic Request the peer must carry out: its application's buffer
    /// must grant remote atomic access (perftest's atomic-bw server's does).
    fn needs_remote_atomic(&self) -> Result<(), Outcome> {
        if self.cfg.app != PeerApp::AtomicBwServer {
            return Err(Outcome::new(NA, "-", "-").because(
                "needs a buffer with remote atomic rights: only a perftest atomic-bw server exposes one (run with --app atomic-bw-server)",
            ));
        }
        Ok(())
    }

    /// The case opens two connections in full operation: a perftest `-R` server takes one
    /// test connection.
    fn needs_two_connections(&self) -> Result<(), Outcome> {
        if self.cfg.app.is_perftest() {
            return Err(Outcome::new(NA, "-", "-").because(
                "needs two connections to the application: a perftest -R server takes one test connection",
            ));
        }
        self.needs_rping()
    }

    /// Connects, sends `request` and waits for the answer.
    fn negotiate(&mut self, request: &[u8]) -> Result<(Conn, ReplyOutcome), Outcome> {
        let mut c = self.connect()?;
        if let Err(e) = c.send_raw(request) {
            let o = Outcome::new(Fail, "MPA Request", format!("write failed: {e}"));
            self.keep(c);
            return Err(o);
        }
        let r = c.read_frame(self.cfg.step);
        Ok((c, r))
    }
}

fn describe_reply(r: &ReplyOutcome) -> String {
    match r {
        ReplyOutcome::Frame(f) => describe_frame(f),
        ReplyOutcome::Malformed(e, _) => format!("malformed frame ({e})"),
        ReplyOutcome::Closed(n) => format!("closed the connection ({n} octets before)"),
        ReplyOutcome::Timeout(n) => format!("no Reply in time ({n} octets)"),
    }
}

/// A connection in full operation.
pub(crate) struct Live {
    c: Conn,
    reply: ConnFrame,
    /// Next MSN per queue (Send, Read Request).
    msn: [u32; 2],
    sent: Vec<String>,
}

impl Live {
    fn send(&mut self, what: String, ulpdu: &[u8]) {
        let _ = self.c.send_ulpdu(ulpdu);
        self.sent.push(what);
    }

    fn next_send_msn(&mut self) -> u32 {
        let m = self.msn[0];
        self.msn[0] = m.wrapping_add(1);
        m
    }

    fn next_read_msn(&mut self) -> u32 {
        let m = self.msn[1];
        self.msn[1] = m.wrapping_add(1);
        m
    }

    fn sent(&self) -> String {
        self.sent.join("; ")
    }

    /// Completes a P2P setup with the RTR the Reply selected (see [`send_rtr`]) before the
    /// case closes the connection.
    fn send_selected_rtr(&mut self, chosen: RtrSet) {
        if let Some(what) = send_rtr(&mut self.c, chosen, &mut self.msn) {
            self.sent.push(what);
        }
    }
}

/// Sends, on `c` (in full operation), the RTR of the type a P2P Reply selected (Write, else
/// Read, else Send) and says what was sent; `None` when nothing was selected.
///
/// Every case that gets an accepting P2P Reply sends it before it closes: a responder in P2P
/// mode is not established until the RTR arrives, and a close before that is a path real
/// stacks handle badly (Linux 6.1's siw then reports the close to iw_cm in the connection's
/// receive state, which ends in the BUG() of `cm_close_handler` and leaves the host's
/// connection manager dead).
fn send_rtr(c: &mut Conn, chosen: RtrSet, msn: &mut [u32; 2]) -> Option<String> {
    let (what, u) = if chosen.write {
        (
            "zero-length RDMA Write STag 0x1 TO 0 (RTR)".to_string(),
            Header::rtr_write().to_vec(),
        )
    } else if chosen.read {
        let m = msn[1];
        msn[1] = m.wrapping_add(1);
        (
            format!("zero-length Read Request MSN {m} STag 0x1 (RTR)"),
            Header::rtr_read(m).to_vec(),
        )
    } else if chosen.send {
        let m = msn[0];
        msn[0] = m.wrapping_add(1);
        (
            format!("zero-length Send MSN {m} (RTR)"),
            Header::rtr_send(m).to_vec(),
        )
    } else {
        return None;
    };
    let _ = c.send_ulpdu(&u.unwrap_or_default());
    Some(what)
}

/// The settings of one of the runner's Requests, as a refusal names them: "IRD/ORD 1/1"
/// (perftest's control connection: "IRD/ORD 0/0"), or the revision when it has none.
fn describe_request_settings(request: &ConnFrame) -> String {
    match request.enhanced {
        Some(e) => format!("IRD/ORD {}/{}", e.ird, e.ord),
        None => format!("revision {} without IRD/ORD", request.revision),
    }
}

/// Opens a connection in full operation with `request` (which the peer must accept).
fn open_live(ctx: &mut Ctx<'_>, request: &ConnFrame) -> Result<Live, Outcome> {
    let (mut c, r) = ctx.negotiate(&bytes_of(request))?;
    let reply = match r {
        ReplyOutcome::Frame(f) if f.kind == FrameKind::Reply && !f.reject => f,
        other => {
            let o = Outcome::new(Fail, describe_frame(request), describe_reply(&other)).because(
                format!(
                    "the peer refused a Request with {}",
                    describe_request_settings(request)
                ),
            );
            ctx.keep(c);
            return Err(o);
        }
    };
    c.start_fpdus(request.crc || reply.crc, reply.markers, request.markers);
    if !ctx.cfg.first_fpdu_delay.is_zero() {
        std::thread::sleep(ctx.cfg.first_fpdu_delay);
    }
    Ok(Live {
        c,
        sent: vec![describe_frame(request)],
        reply,
        msn: [1, 1],
    })
}

/// The rping opening: the runner advertises its start buffer; the peer's Read Request of it
/// names the peer's own rdma buffer (sink STag and TO).
fn rping_start(live: &mut Live, step: Duration) -> Result<ReadRequest, String> {
    let msn = live.next_send_msn();
    live.send(
        format!("Send MSN {msn} {{buf {RUNNER_TO:#x}, rkey {RUNNER_STAG:#x}, size {ADV_SIZE}}}"),
        &send_ulpdu(msn, &rping_info(RUNNER_TO, RUNNER_STAG, ADV_SIZE)),
    );
    match live.c.recv(step) {
        RxOutcome::Fpdu(f) => match Message::parse(&f.ulpdu) {
            Ok(Message {
                header: Header::ReadRequest { request, .. },
                ..
            }) if request.source_stag == RUNNER_STAG => Ok(request),
            _ => Err(describe_ulpdu(&f.ulpdu)),
        },
        RxOutcome::Framing(e) => Err(format!("framing error: {e}")),
        RxOutcome::Closed => Err("closed the connection".into()),
        RxOutcome::Timeout => Err("no RDMA Read Request in time".into()),
    }
}

/// Opens a live connection to the peer's application and runs its opening: rping's
/// Request and start advertisement, or perftest's `-R` opening ([`perf_live`]). The peer's
/// buffer comes as the sink STag and TO of the returned Read Request (rping's own Read
/// Request; for perftest, the server's `pingpong_dest` in that form).
fn rping_live(ctx: &mut Ctx<'_>) -> Result<(Live, ReadRequest), Outcome> {
    ctx.needs_rping()?;
    if ctx.cfg.app.is_perftest() {
        return perf_live(ctx);
    }
    let mut live = open_live(ctx, &ctx.request(1, 1, None))?;
    match rping_start(&mut live, ctx.cfg.step) {
        Ok(r) => Ok((live, r)),
        Err(e) => {
            let o = Outcome::new(Fail, live.sent(), e).because(
                "an rping server answers the start advertisement with an RDMA Read Request of it",
            );
            ctx.keep(live.c);
            Err(o)
        }
    }
}

// ------------------------------------------------------------------------------------------
// perftest's -R opening
// ------------------------------------------------------------------------------------------

/// The version the runner announces as a perftest client (servers refuse below 5.70).
const PERF_VERSION: &[u8] = b"6.06";
/// perftest's version field: NUL padded to 16 octets.
const PERF_VERSION_LEN: usize = 16;
/// The cycle buffer (the page size) and cache line size the runner announces.
const PERF_CYCLE: u32 = 4096;
const PERF_CACHE_LINE: u32 = 64;
/// The MTU: the ASCII digit of the verbs MTU enum (3: 1024) and a NUL.
const PERF_MTU: [u8; 2] = [b'3', 0];

/// One control exchange of perftest's `-R` protocol: the runner's Send on the control
/// connection, then the server's Send, whose payload is returned.
fn perf_xchg(ctrl: &mut Live, what: &str, mine: &[u8], step: Duration) -> Result<Vec<u8>, String> {
    let msn = ctrl.next_send_msn();
    ctrl.send(format!("Send MSN {msn} ({what})"), &send_ulpdu(msn, mine));
    match ctrl.c.recv(step) {
        RxOutcome::Fpdu(f) => match Message::parse(&f.ulpdu) {
            Ok(Message {
                header: Header::Send { .. },
                payload,
            }) => Ok(payload.to_vec()),
            _ => Err(format!(
                "answered the {what} with {}",
                describe_ulpdu(&f.ulpdu)
            )),
        },
        RxOutcome::Framing(e) => Err(format!("after the {what}: framing error: {e}")),
        RxOutcome::Closed => Err(format!("closed the control connection after the {what}")),
        RxOutcome::Timeout => Err(format!("no answer to the {what} in time")),
    }
}

/// perftest's `-R` opening, as its client plays it (see [`PeerApp::WriteBwServer`]): the
/// control connection and its exchanges, the test connection (the runner's Request has
/// rping's IRD/ORD 1/1, so that Read and Atomic Requests are not beyond any IRD it
/// negotiates itself), then the `pingpong_dest` exchanges; the server's last one names its
/// buffer. The control connection stays open until the case is over; the test connection
/// is returned with the server's buffer as the sink of a Read Request.
fn perf_live(ctx: &mut Ctx<'_>) -> Result<(Live, ReadRequest), Outcome> {
    let step = ctx.cfg.step;
    let mut ctrl = open_live(ctx, &ctx.request(0, 0, None))?;
    let mut version = [0u8; PERF_VERSION_LEN];
    version[..PERF_VERSION.len()].copy_from_slice(PERF_VERSION);
    let opening: [(&str, Vec<u8>); 5] = [
        ("version 6.06", version.to_vec()),
        ("cycle buffer 4096", PERF_CYCLE.to_be_bytes().to_vec()),
        ("cache line 64", PERF_CACHE_LINE.to_be_bytes().to_vec()),
        ("MTU 1024", PERF_MTU.to_vec()),
        ("zero pingpong_dest", Dest::default().to_bytes().to_vec()),
    ];
    let fail = |ctx: &mut Ctx<'_>, ctrl: Live, e: String| {
        let o = Outcome::new(Fail, ctrl.sent(), e).because(
            "a perftest -R server answers each control message of its client with one Send",
        );
        ctx.keep(ctrl.c);
        o
    };
    for (what, mine) in &opening {
        if let Err(e) = perf_xchg(&mut ctrl, what, mine, step) {
            return Err(fail(ctx, ctrl, e));
        }
    }
    let test_req = ctx.request(1, 1, None);
    let mut test = match open_live(ctx, &test_req) {
        Ok(l) => l,
        Err(o) => {
            ctx.keep(ctrl.c);
            return Err(o);
        }
    };
    let mine = Dest {
        out_reads: 1,
        qpn: 1,
        rkey: RUNNER_STAG,
        vaddr: RUNNER_TO,
        ..Dest::default()
    };
    let mut theirs = None;
    let dests = [
        ("zero pingpong_dest", Dest::default()),
        ("pingpong_dest 1", mine),
        ("pingpong_dest 2", mine),
        ("pingpong_dest 3", mine),
    ];
    for (what, d) in dests {
        match perf_xchg(&mut ctrl, what, &d.to_bytes(), step) {
            Ok(v) => match Dest::parse(&v) {
                Some(d) => theirs = Some(d),
                None => {
                    let e = format!("a pingpong_dest of {} octets, not {DEST_LEN}", v.len());
                    ctx.keep(test.c);
                    return Err(fail(ctx, ctrl, e));
                }
            },
            Err(e) => {
                ctx.keep(test.c);
                return Err(fail(ctx, ctrl, e));
            }
        }
    }
    let theirs = theirs.unwrap_or_default();
    test.sent.insert(
        0,
        format!(
            "the perftest -R opening on a control connection (Request IRD/ORD 0/0; version, cycle buffer, cache line, MTU and 4 pingpong_dest exchanges; the server's buffer: STag {:#x} at {:#x}), and on the test connection",
            theirs.rkey, theirs.vaddr
        ),
    );
    ctx.held.push(ctrl.c);
    Ok((
        test,
        ReadRequest {
            sink_stag: theirs.rkey,
            sink_to: theirs.vaddr,
            size: 0,
            source_stag: RUNNER_STAG,
            source_to: RUNNER_TO,
        },
    ))
}

/// A connection on which the peer's Reply grants IRD 0 (a perftest write-bw server accepts
/// its test connection with IRD/ORD 0/0) takes no Read or Atomic Request: whatever one names,
/// it is beyond the IRD (RFC 5040 §6.1, RFC 6581 §7), and a peer may refuse it as such
/// before it looks at the STag. Cases that judge what such a Request names are then N/A;
/// the connection is closed.
fn no_ird(ctx: &mut Ctx<'_>, live: Live) -> Result<Live, Outcome> {
    match live.reply.enhanced {
        Some(e) if e.ird == 0 => {
            let o = Outcome::new(NA, live.sent(), describe_frame(&live.reply)).because(
                "the peer's Reply grants IRD 0: a Read or Atomic Request is beyond its IRD whatever it names (a write-bw server given --ird 1 --ord 1, e.g. softrnic write-bw, takes them)",
            );
            Err(done(ctx, live.c, o))
        }
        _ => Ok(live),
    }
}

/// The application's session ([`rping_live`]) for a case that sends a Read or Atomic
/// Request: N/A (the connection closed) when the peer's Reply grants IRD 0 ([`no_ird`]).
fn request_live(ctx: &mut Ctx<'_>) -> Result<(Live, ReadRequest), Outcome> {
    let (live, peer) = rping_live(ctx)?;
    Ok((no_ird(ctx, live)?, peer))
}

/// Waits for the peer's Terminate (skipping other FPDUs, which are listed).
fn await_terminate(live: &mut Live, step: Duration) -> Result<PeerTerminate, String> {
    let mut seen = Vec::new();
    loop {
        match live.c.recv(step) {
            RxOutcome::Fpdu(RxFpdu { ulpdu, .. }) => {
                if let Some(t) = term::read(&ulpdu) {
                    return Ok(t);
                }
                seen.push(describe_ulpdu(&ulpdu));
            }
            RxOutcome::Framing(e) => seen.push(format!("framing error: {e}")),
            RxOutcome::Closed => {
                seen.push(CLOSED_WITHOUT_TERMINATE.into());
                return Err(seen.join("; "));
            }
            RxOutcome::Timeout => {
                seen.push(format!("no Terminate within {} s", step.as_secs_f32()));
                return Err(seen.join("; "));
            }
        }
        if seen.len() > 64 {
            return Err(format!("{} FPDUs and no Terminate", seen.len()));
        }
    }
}

/// Whether the Terminate must copy the DDP header of the offending segment.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Copy {
    /// D set with the header (RFC 5040 §4.8, §7.1: errors in a segment whose layout is
    /// known).
    Required,
    /// The segment's layout is unknown (wrong DDP or RDMAP version, reserved opcode): the
    /// copy may be left out, but when D is set it must be the header sent.
    Optional,
}

/// Judges the peer's Terminate for the segment `sent` (whose DDP header must be copied with
/// D as `copy` says), against the causes allowed; `read` is the Read Request whose header
/// must be copied with R. The Terminate Control's layout is not judged here (see
/// rdmap-terminate-layout).
pub(crate) fn judge(
    t: &PeerTerminate,
    allowed: &[TermCause],
    sent: &[u8],
    copy: Copy,
    read: Option<&ReadRequest>,
) -> (Verdict, String) {
    let mut wrong = Vec::new();
    if !cause_matches(t, allowed) {
        let want: Vec<String> = allowed.iter().map(ToString::to_string).collect();
        wrong.push(format!("cause should be {}", want.join(" or ")));
    }
    let hlen = if sent.first().is_some_and(|c| c & 0x80 != 0) {
        ddp::TAGGED_HEADER_LEN
    } else {
        ddp::UNTAGGED_HEADER_LEN
    };
    match (&t.ddp_header, sent.get(..hlen)) {
        (Some(h), Some(s)) if h.as_slice() == s => {}
        (Some(h), Some(s)) => wrong.push(format!(
            "the copied DDP header is not the one sent ({})",
            header_diff(s, h)
        )),
        (Some(_), None) => wrong.push("the copied DDP header is not the one sent".into()),
        (None, _) if copy == Copy::Optional => {}
        (None, _) => wrong.push("D clear: the DDP header of the segment is not copied".into()),
    }
    if let Some(r) = read {
        match &t.rdma_header {
            Some(h) if h == r => {}
            Some(_) => wrong.push("the copied Read Request header is not the one sent".into()),
            None => wrong.push("R clear or no Read Request header copied".into()),
        }
    }
    if wrong.is_empty() {
        (Pass, String::new())
    } else {
        (Fail, wrong.join("; "))
    }
}

/// The fields in which a copied DDP header `copy` differs from the header `sent` (RFC 5041
/// §4.2, §4.3 layouts, by the T bit of the header sent), e.g. "MSN 16 instead of 1".
fn header_diff(sent: &[u8], copy: &[u8]) -> String {
    let tagged = sent.first().is_some_and(|c| c & 0x80 != 0);
    let fields: &[(&str, std::ops::Range<usize>)] = if tagged {
        &[
            ("control", 0..1),
            ("RsvdULP", 1..2),
            ("STag", 2..6),
            ("TO", 6..14),
        ]
    } else {
        &[
            ("control", 0..1),
            ("RsvdULP", 1..6),
            ("QN", 6..10),
            ("MSN", 10..14),
            ("MO", 14..18),
        ]
    };
    let num = |b: &[u8]| b.iter().fold(0u64, |a, x| (a << 8) | u64::from(*x));
    let mut out = Vec::new();
    for (name, r) in fields {
        match (sent.get(r.clone()), copy.get(r.clone())) {
            (Some(a), Some(b)) if a == b => {}
            (Some(a), Some(b)) => {
                out.push(format!("{name} {:#x} instead of {:#x}", num(b), num(a)));
            }
            _ => out.push(format!("{name} missing")),
        }
    }
    if out.is_empty() {
        format!("{} octets instead of {}", copy.len(), sent.len())
    } else {
        out.join(", ")
    }
}

/// Whether the Terminate's cause is one of `allowed`. A Terminate Control without M, D or R
/// shows no sign of its layout, so a cause that matches with Layer and Error Type exchanged
/// is taken as sent in the low-bit-first layout: the layout is judged by one case only
/// (rdmap-terminate-layout), the cause by the others.
fn cause_matches(t: &PeerTerminate, allowed: &[TermCause]) -> bool {
    if allowed.contains(&t.cause) {
        return true;
    }
    let (l, e, c) = t.cause.layer_etype_ecode();
    let no_flags = t.control[2] == 0 && t.control[3] == 0;
    no_flags && allowed.contains(&TermCause::from_wire(e, l, c))
}

/// Sends `ulpdu` on `live` and judges the Terminate it must draw.
fn expect_terminate(
    ctx: &mut Ctx<'_>,
    mut live: Live,
    what: String,
    ulpdu: &[u8],
    allowed: &[TermCause],
    copy: Copy,
    read: Option<&ReadRequest>,
) -> Outcome {
    live.send(what, ulpdu);
    let o = match await_terminate(&mut live, ctx.cfg.step) {
        Ok(t) => {
            let (v, why) = judge(&t, allowed, ulpdu, copy, read);
            Outcome::new(v, live.sent(), t.describe()).because(why)
        }
        Err(e) => Outcome::new(Fail, live.sent(), e).because("no Terminate for an invalid segment"),
    };
    ctx.keep(live.c);
    o
}

const fn ddp_cause(c: DdpCode) -> TermCause {
    TermCause::Ddp(c)
}

pub(crate) const fn protection(c: ProtectionCode) -> TermCause {
    TermCause::Rdmap(RdmapCode::RemoteProtection(c))
}

const fn operation(c: OperationCode) -> TermCause {
    TermCause::Rdmap(RdmapCode::RemoteOperation(c))
}

/// A live connection for cases that need no application knowledge; with an rping server
/// the opening runs first (so that the peer is in its steady state).
fn live_any(ctx: &mut Ctx<'_>) -> Result<(Live, Option<ReadRequest>), Outcome> {
    match ctx.cfg.app {
        PeerApp::RpingServer
        | PeerApp::WriteBwServer
        | PeerApp::ReadBwServer
        | PeerApp::AtomicBwServer => rping_live(ctx).map(|(l, r)| (l, Some(r))),
        PeerApp::RpingClient | PeerApp::PerftestClient | PeerApp::Bare => {
            open_live(ctx, &ctx.request(1, 1, None)).map(|l| (l, None))
        }
    }
}

// ------------------------------------------------------------------------------------------
// MPA cases
// ------------------------------------------------------------------------------------------

fn done(ctx: &mut Ctx<'_>, c: Conn, o: Outcome) -> Outcome {
    ctx.keep(c);
    o
}

/// Runs `case`'s drive on `ctx`.
pub(crate) fn drive(d: Drive, ctx: &mut Ctx<'_>) -> Outcome {
    match d {
        Drive::Reply(p) => run_request(ctx, p),
        Drive::Terminate(p) => run_segment(ctx, p),
        Drive::Rtr(t) => rtr_case(ctx, t),
        Drive::Script(f) => f(ctx),
    }
}

/// Sends the probe's Request and judges the answer.
fn run_request(ctx: &mut Ctx<'_>, p: RequestProbe) -> Outcome {
    let (bytes, sent) = (p.request)(ctx);
    let (c, r) = match ctx.negotiate(&bytes) {
        Ok(x) => x,
        Err(o) => return o,
    };
    let (v, why) = (p.judge)(&r);
    let o = Outcome::new(v, sent, describe_reply(&r)).because(why);
    done(ctx, c, o)
}

/// Opens the probe's connection, sends its segment and judges the Terminate.
fn run_segment(ctx: &mut Ctx<'_>, p: SegmentProbe) -> Outcome {
    let (live, first, s) = match p.open {
        Open::Any(build) => match live_any(ctx) {
            Ok((mut live, read)) => {
                let s = build(&mut live, read.as_ref());
                (live, None, s)
            }
            Err(o) => return o,
        },
        Open::Rping(build) => match rping_live(ctx) {
            Ok((mut live, read)) => {
                let s = build(&mut live, &read);
                (live, None, s)
            }
            Err(o) => return o,
        },
        Open::Receive(build) => match ctx.needs_receive().and_then(|()| rping_live(ctx)) {
            Ok((mut live, read)) => {
                let s = build(&mut live, &read);
                (live, None, s)
            }
            Err(o) => return o,
        },
        Open::Readable(build) => match ctx.needs_remote_read().and_then(|()| rping_live(ctx)) {
            Ok((mut live, read)) => {
                let s = build(&mut live, &read);
                (live, None, s)
            }
            Err(o) => return o,
        },
        Open::Writable(build) => match ctx.needs_remote_write().and_then(|()| rping_live(ctx)) {
            Ok((mut live, read)) => {
                let s = build(&mut live, &read);
                (live, None, s)
            }
            Err(o) => return o,
        },
        Open::Second(build) => match two_rping(ctx) {
            Ok((first, mut live, theirs)) => {
                let s = build(&mut live, &theirs);
                (live, Some(first), s)
            }
            Err(o) => return o,
        },
    };
    let live = if s.read.is_some() {
        match no_ird(ctx, live) {
            Ok(l) => l,
            Err(o) => {
                return match first {
                    Some(first) => done(ctx, first.c, o),
                    None => o,
                };
            }
        }
    } else {
        live
    };
    let o = expect_terminate(
        ctx,
        live,
        s.what,
        &s.ulpdu,
        p.allowed,
        p.copy,
        s.read.as_ref(),
    );
    match first {
        Some(first) => done(ctx, first.c, o),
        None => o,
    }
}

/// A Request's octets and description.
fn frame(f: &ConnFrame) -> (Vec<u8>, String) {
    (bytes_of(f), describe_frame(f))
}

/// A Request with rping's settings and 508 octets of private data (512 with the enhanced
/// data).
fn pd_508_request(ctx: &Ctx<'_>) -> ConnFrame {
    let mut req = ctx.request(1, 1, None);
    req.private_data = (0..508u32).map(|i| (i % 251) as u8).collect();
    req
}

/// An STag the peer never advertised (the peer's buffer's STag with [`STAG_FLIP`] when known)
/// and a TO.
fn unadvertised(read: Option<&ReadRequest>) -> (u32, u64) {
    read.map_or((0x00ff_ff00, 0), |r| (r.sink_stag ^ STAG_FLIP, r.sink_to))
}

/// Reads what follows a Terminate on `live` until the close, a quiet `step` or 17 FPDUs:
/// each FPDU described, and whether the connection closed.
fn after_terminate(live: &mut Live, step: Duration) -> (Vec<String>, bool) {
    let mut after = Vec::new();
    let closed = loop {
        match live.c.recv(step) {
            RxOutcome::Fpdu(f) => after.push(describe_ulpdu(&f.ulpdu)),
            RxOutcome::Closed => break true,
            RxOutcome::Framing(e) => after.push(format!("framing error: {e}")),
            RxOutcome::Timeout => break false,
        }
        if after.len() > 16 {
            break false;
        }
    };
    (after, closed)
}

/// [`after_terminate`]'s findings in words.
fn describe_after(after: &[String], closed: bool) -> String {
    format!(
        "{}{}",
        if after.is_empty() {
            "nothing".to_string()
        } else {
            after.join(", ")
        },
        if closed { "; closed" } else { "; still open" }
    )
}

fn unknown_rev_request() -> ConnFrame {
    ConnFrame::new(FrameKind::Request, 3)
}

fn mpa_reject_close(ctx: &mut Ctx<'_>) -> Outcome {
    let req = unknown_rev_request();
    let (mut c, r) = match ctx.negotiate(&bytes_of(&req)) {
        Ok(x) => x,
        Err(o) => return o,
    };
    let sent = describe_frame(&req);
    let o = match &r {
        ReplyOutcome::Frame(f) if f.reject => {
            if c.wait_close(ctx.cfg.step) {
                Outcome::new(Pass, sent, format!("{}, then closed", describe_frame(f)))
            } else {
                Outcome::new(
                    Fail,
                    sent,
                    format!("{}, connection left open", describe_frame(f)),
                )
                .because("a rejecting responder must close the connection")
            }
        }
        ReplyOutcome::Closed(_) => Outcome::new(Pass, sent, describe_reply(&r)),
        _ => Outcome::new(NA, sent, describe_reply(&r))
            .because("the peer did not reject (judged by mpa-rev-unknown)"),
    };
    done(ctx, c, o)
}

/// Negotiates `req`, which the peer may decline (N/A) but must answer; the connection in
/// full operation when accepted.
fn accept(ctx: &mut Ctx<'_>, req: &ConnFrame) -> Result<Live, Outcome> {
    let (mut c, r) = ctx.negotiate(&bytes_of(req))?;
    let reply = match r {
        ReplyOutcome::Frame(f) if f.kind == FrameKind::Reply && !f.reject => f,
        ReplyOutcome::Frame(f) if f.reject => {
            let o = Outcome::new(NA, describe_frame(req), describe_frame(&f))
                .because("the peer declines the feature");
            return Err(done(ctx, c, o));
        }
        other => {
            let o = Outcome::new(Fail, describe_frame(req), describe_reply(&other))
                .because("no valid Reply");
            return Err(done(ctx, c, o));
        }
    };
    c.start_fpdus(req.crc || reply.crc, reply.markers, req.markers);
    if !ctx.cfg.first_fpdu_delay.is_zero() {
        std::thread::sleep(ctx.cfg.first_fpdu_delay);
    }
    Ok(Live {
        c,
        sent: vec![describe_frame(req)],
        reply,
        msn: [1, 1],
    })
}

/// Negotiates `req` and, when accepted and the application allows, runs the rping opening
/// on it: the peer's first FPDU is returned for the caller to judge.
fn accept_and_first_fpdu(
    ctx: &mut Ctx<'_>,
    req: &ConnFrame,
) -> Result<(Live, Option<Result<RxFpdu, String>>), Outcome> {
    let mut live = accept(ctx, req)?;
    if ctx.cfg.app != PeerApp::RpingServer {
        return Ok((live, None));
    }
    let msn = live.next_send_msn();
    live.send(
        format!("Send MSN {msn} (rping start advertisement)"),
        &send_ulpdu(msn, &rping_info(RUNNER_TO, RUNNER_STAG, ADV_SIZE)),
    );
    let first = match live.c.recv(ctx.cfg.step) {
        RxOutcome::Fpdu(f) => Ok(f),
        RxOutcome::Framing(e) => Err(format!("framing error: {e}")),
        RxOutcome::Closed => Err("closed the connection".into()),
        RxOutcome::Timeout => Err("no FPDU in time".into()),
    };
    Ok((live, Some(first)))
}

fn mpa_markers(ctx: &mut Ctx<'_>) -> Outcome {
    let mut req = ctx.request(1, 1, None);
    req.markers = true;
    let (live, first) = match accept_and_first_fpdu(ctx, &req) {
        Ok(x) => x,
        Err(o) => return o,
    };
    let reply = describe_frame(&live.reply);
    let o = match first {
        None => Outcome::new(Pass, live.sent(), format!("{reply} (accepted)"))
            .because("markers accepted; not exercised without an application model"),
        Some(Ok(f)) => Outcome::new(
            Pass,
            live.sent(),
            format!("{reply}; {} with valid markers", describe_ulpdu(&f.ulpdu)),
        ),
        Some(Err(e)) => Outcome::new(Fail, live.sent(), format!("{reply}; {e}"))
            .because("accepted markers but did not send them where RFC 5044 §5 puts them"),
    };
    done(ctx, live.c, o)
}

fn mpa_crc(ctx: &mut Ctx<'_>) -> Outcome {
    let mut req = ctx.request(1, 1, None);
    req.crc = true;
    let (live, first) = match accept_and_first_fpdu(ctx, &req) {
        Ok(x) => x,
        Err(o) => return o,
    };
    let reply = describe_frame(&live.reply);
    let o = match first {
        None => Outcome::new(Pass, live.sent(), format!("{reply} (accepted)"))
            .because("CRC accepted; not exercised without an application model"),
        Some(Ok(f)) if f.crc_ok == Some(true) => Outcome::new(
            Pass,
            live.sent(),
            format!("{reply}; {} with a good CRC", describe_ulpdu(&f.ulpdu)),
        ),
        Some(Ok(f)) => Outcome::new(
            Fail,
            live.sent(),
            format!("{reply}; {} with a wrong CRC", describe_ulpdu(&f.ulpdu)),
        )
        .because("the CRC field does not match the FPDU (RFC 5044 §4.4)"),
        Some(Err(e)) => {
            Outcome::new(Fail, live.sent(), format!("{reply}; {e}")).because("no FPDU to check")
        }
    };
    done(ctx, live.c, o)
}

fn mpa_crc_error(ctx: &mut Ctx<'_>) -> Outcome {
    let mut req = ctx.request(1, 1, None);
    req.crc = true;
    // No opening: the FPDU with the bad CRC is the first one.
    let mut live = match accept(ctx, &req) {
        Ok(l) => l,
        Err(o) => return o,
    };
    let msn = live.next_send_msn();
    let ulpdu = send_ulpdu(msn, &rping_info(RUNNER_TO, RUNNER_STAG, ADV_SIZE));
    let mut fpdu = Vec::new();
    live.c.frame(&ulpdu, &mut fpdu);
    if let Some(last) = fpdu.last_mut() {
        *last ^= 0xff;
    }
    live.sent.push(format!(
        "Send MSN {msn} with its CRC field's last octet inverted"
    ));
    let _ = live.c.send_raw(&fpdu);
    let want = TermCause::Mpa(rdmap::MpaCode::CrcError);
    // The Terminate (or the close) must come first: anything else means the FPDU was taken.
    let o = match live.c.recv(ctx.cfg.step) {
        RxOutcome::Fpdu(f) => match term::read(&f.ulpdu) {
            Some(t) if cause_matches(&t, &[want]) => Outcome::new(Pass, live.sent(), t.describe()),
            Some(t) => Outcome::new(Fail, live.sent(), t.describe())
                .because(format!("the cause should be {want}")),
            None => Outcome::new(Fail, live.sent(), describe_ulpdu(&f.ulpdu))
                .because("the FPDU with a wrong CRC was taken"),
        },
        RxOutcome::Closed => Outcome::new(Pass, live.sent(), CLOSED_WITHOUT_TERMINATE),
        RxOutcome::Framing(e) => {
            Outcome::new(Fail, live.sent(), format!("framing error: {e}")).because("no Terminate")
        }
        RxOutcome::Timeout => Outcome::new(Fail, live.sent(), "neither Terminate nor close")
            .because("a CRC error must end the stream"),
    };
    done(ctx, live.c, o)
}

fn mpa_p2p_echo(ctx: &mut Ctx<'_>) -> Outcome {
    let req = ctx.request(1, 1, Some(RtrSet::ALL));
    let (c, r) = match ctx.negotiate(&bytes_of(&req)) {
        Ok(x) => x,
        Err(o) => return o,
    };
    let (mut sent, seen) = (describe_frame(&req), describe_reply(&r));
    let mut c = c;
    let o = match &r {
        ReplyOutcome::Frame(f) if f.reject => {
            Outcome::new(NA, sent, seen).because("the peer declines peer-to-peer mode")
        }
        ReplyOutcome::Frame(f) => match f.enhanced {
            Some(e) if e.p2p => {
                c.start_fpdus(f.crc, f.markers, false);
                if !ctx.cfg.first_fpdu_delay.is_zero() {
                    std::thread::sleep(ctx.cfg.first_fpdu_delay);
                }
                if let Some(rtr) = send_rtr(&mut c, e.rtr, &mut [1, 1]) {
                    sent = format!("{sent}; {rtr}");
                }
                Outcome::new(Pass, sent, seen)
            }
            Some(_) => Outcome::new(Fail, sent, seen).because(
                "accepted a P2P Request without echoing P2P (a responder that does not run P2P must reject)",
            ),
            None => Outcome::new(Fail, sent, seen).because("no enhanced data in the Reply"),
        },
        _ => Outcome::new(Fail, sent, seen).because("no Reply"),
    };
    done(ctx, c, o)
}

/// Negotiates P2P offering `offer`; the accepted Reply and live connection, or the outcome.
fn p2p_live(ctx: &mut Ctx<'_>, offer: RtrSet) -> Result<(Live, RtrSet), Outcome> {
    let req = ctx.request(1, 1, Some(offer));
    let (mut c, r) = ctx.negotiate(&bytes_of(&req))?;
    let (sent, seen) = (describe_frame(&req), describe_reply(&r));
    let f = match r {
        ReplyOutcome::Frame(f) if f.kind == FrameKind::Reply => f,
        _ => {
            return Err(done(
                ctx,
                c,
                Outcome::new(Fail, sent, seen).because("no Reply"),
            ));
        }
    };
    if f.reject {
        return Err(done(
            ctx,
            c,
            Outcome::new(NA, sent, seen).because("the peer declines this RTR type"),
        ));
    }
    let Some(e) = f.enhanced.filter(|e| e.p2p) else {
        return Err(done(
            ctx,
            c,
            Outcome::new(NA, sent, seen)
                .because("the Reply does not run P2P (judged by mpa-p2p-echo)"),
        ));
    };
    c.start_fpdus(f.crc, f.markers, false);
    if !ctx.cfg.first_fpdu_delay.is_zero() {
        std::thread::sleep(ctx.cfg.first_fpdu_delay);
    }
    Ok((
        Live {
            c,
            sent: vec![sent],
            reply: f,
            msn: [1, 1],
        },
        e.rtr,
    ))
}

/// Checks the selection of `t` and drives its RTR message.
fn rtr_case(ctx: &mut Ctx<'_>, t: RtrType) -> Outcome {
    let (mut live, chosen) = match p2p_live(ctx, RtrSet::only(t)) {
        Ok(x) => x,
        Err(o) => return o,
    };
    let reply = describe_frame(&live.reply);
    if chosen != RtrSet::only(t) {
        live.send_selected_rtr(chosen);
        let wrong = format!(
            "selected RTR {} when only {} was offered",
            rtr_name(&chosen),
            rtr_name(&RtrSet::only(t))
        );
        let o = if t == RtrType::Send && chosen == RtrSet::only(RtrType::Write) {
            // siw_cm.c (siw_proc_mpareq): "Propose zero length Write if none of Read and
            // Write is indicated".
            Outcome::new(Deviation, live.sent(), reply).because(format!(
                "{wrong}: Linux siw 6.1 knows no Send RTR and proposes the Write RTR instead"
            ))
        } else {
            Outcome::new(Fail, live.sent(), reply).because(wrong)
        };
        return done(ctx, live.c, o);
    }
    let o = match t {
        RtrType::Write => {
            let u = Header::rtr_write().to_vec().unwrap_or_default();
            live.send("zero-length RDMA Write STag 0x1 TO 0".into(), &u);
            quiet_after_rtr(ctx, &mut live, &reply)
        }
        RtrType::Send => {
            let msn = live.next_send_msn();
            let u = Header::rtr_send(msn).to_vec().unwrap_or_default();
            live.send(format!("zero-length Send MSN {msn}"), &u);
            quiet_after_rtr(ctx, &mut live, &reply)
        }
        RtrType::Read => {
            let msn = live.next_read_msn();
            let u = Header::rtr_read(msn).to_vec().unwrap_or_default();
            live.send(format!("zero-length Read Request MSN {msn} STag 0x1"), &u);
            match live.c.recv(ctx.cfg.step) {
                RxOutcome::Fpdu(f) => match Message::parse(&f.ulpdu) {
                    Ok(Message {
                        header:
                            Header::ReadResponse {
                                last: true, stag, ..
                            },
                        payload,
                    }) if payload.is_empty() && stag == rdmap::RTR_STAG => Outcome::new(
                        Pass,
                        live.sent(),
                        format!("{reply}; {}", describe_ulpdu(&f.ulpdu)),
                    ),
                    _ => Outcome::new(
                        Fail,
                        live.sent(),
                        format!("{reply}; {}", describe_ulpdu(&f.ulpdu)),
                    )
                    .because(
                        "a Read RTR is answered with a zero-length Read Response to its sink STag",
                    ),
                },
                other => Outcome::new(Fail, live.sent(), format!("{reply}; {other:?}"))
                    .because("no zero-length Read Response"),
            }
        }
    };
    done(ctx, live.c, o)
}

/// After an RTR the peer must not Terminate; quiet (or a non-Terminate FPDU) passes.
fn quiet_after_rtr(ctx: &Ctx<'_>, live: &mut Live, reply: &str) -> Outcome {
    let _ = ctx;
    match live.c.recv(QUIET) {
        RxOutcome::Timeout => Outcome::new(Pass, live.sent(), format!("{reply}; quiet")),
        RxOutcome::Fpdu(f) if term::read(&f.ulpdu).is_none() => Outcome::new(
            Pass,
            live.sent(),
            format!("{reply}; {}", describe_ulpdu(&f.ulpdu)),
        ),
        RxOutcome::Fpdu(f) => Outcome::new(
            Fail,
            live.sent(),
            format!("{reply}; {}", describe_ulpdu(&f.ulpdu)),
        )
        .because("the negotiated RTR drew a Terminate"),
        other => Outcome::new(Fail, live.sent(), format!("{reply}; {other:?}"))
            .because("the connection did not survive the RTR"),
    }
}

fn mpa_rtr_choice(ctx: &mut Ctx<'_>) -> Outcome {
    let (mut live, chosen) = match p2p_live(ctx, RtrSet::ALL) {
        Ok(x) => x,
        Err(o) => return o,
    };
    let reply = describe_frame(&live.reply);
    live.send_selected_rtr(chosen);
    let o = if chosen.single().is_some() {
        Outcome::new(Pass, live.sent(), reply)
    } else {
        Outcome::new(Fail, live.sent(), reply).because(format!(
            "selected {} RTR types ({}); exactly one is required",
            chosen.len(),
            rtr_name(&chosen)
        ))
    };
    done(ctx, live.c, o)
}

fn mpa_rtr_stag0(ctx: &mut Ctx<'_>) -> Outcome {
    let (mut live, chosen) = match p2p_live(ctx, RtrSet::only(RtrType::Write)) {
        Ok(x) => x,
        Err(o) => return o,
    };
    let reply = describe_frame(&live.reply);
    if chosen != RtrSet::only(RtrType::Write) {
        live.send_selected_rtr(chosen);
        let o = Outcome::new(NA, live.sent(), reply)
            .because("the Write RTR was not selected (judged by mpa-rtr-write)");
        return done(ctx, live.c, o);
    }
    let u = write_ulpdu(0, 0, &[]);
    live.send("zero-length RDMA Write STag 0 TO 0".into(), &u);
    let o = match live.c.recv(QUIET) {
        RxOutcome::Timeout => Outcome::new(Pass, live.sent(), format!("{reply}; quiet")),
        RxOutcome::Fpdu(f) => match term::read(&f.ulpdu) {
            Some(t) if t.cause == ddp_cause(DdpCode::Tagged(TaggedCode::InvalidStag)) => {
                Outcome::new(Deviation, live.sent(), t.describe()).because(
                    "refuses a tagged RTR with STag 0 as Chelsio adapters do (RFC 5041 §5.2 forbids checking it)",
                )
            }
            Some(t) => Outcome::new(Fail, live.sent(), t.describe())
                .because("an RTR with STag 0 must not be checked"),
            None => Outcome::new(Pass, live.sent(), describe_ulpdu(&f.ulpdu)),
        },
        other => Outcome::new(Fail, live.sent(), format!("{other:?}"))
            .because("the connection did not survive the RTR"),
    };
    done(ctx, live.c, o)
}

fn mpa_responder_waits(ctx: &mut Ctx<'_>) -> Outcome {
    let req = ctx.request(1, 1, None);
    let (mut c, r) = match ctx.negotiate(&bytes_of(&req)) {
        Ok(x) => x,
        Err(o) => return o,
    };
    let sent = describe_frame(&req);
    let o = match &r {
        ReplyOutcome::Frame(f) if !f.reject => {
            let early = c.pending() + c.quiet_for(QUIET);
            if early == 0 {
                Outcome::new(
                    Pass,
                    sent,
                    format!(
                        "{}; nothing for {} ms",
                        describe_frame(f),
                        QUIET.as_millis()
                    ),
                )
            } else {
                Outcome::new(
                    Fail,
                    sent,
                    format!("{}; then {early} octets unprompted", describe_frame(f)),
                )
                .because("a responder must wait for the initiator's first FPDU")
            }
        }
        _ => Outcome::new(Fail, sent, describe_reply(&r)).because("no accepting Reply"),
    };
    done(ctx, c, o)
}

fn mpa_request_timeout(ctx: &mut Ctx<'_>) -> Outcome {
    let mut c = match ctx.connect() {
        Ok(c) => c,
        Err(o) => return o,
    };
    let partial = mpa::frame::REQUEST_KEY.get(..10).unwrap_or(&[]);
    let _ = c.send_raw(partial);
    let sent = "the first 10 octets of an MPA Request, then nothing".to_string();
    let start = std::time::Instant::now();
    let closed = c.wait_close(ctx.cfg.request_timeout);
    let o = if closed {
        Outcome::new(
            Pass,
            sent,
            format!("closed after {:.1} s", start.elapsed().as_secs_f32()),
        )
    } else {
        Outcome::new(
            Fail,
            sent,
            format!("still open after {} s", ctx.cfg.request_timeout.as_secs()),
        )
        .because("a responder must not wait forever for the MPA Request")
    };
    done(ctx, c, o)
}

// ------------------------------------------------------------------------------------------
// DDP and RDMAP cases
// ------------------------------------------------------------------------------------------

fn ddp_no_buffer(ctx: &mut Ctx<'_>) -> Outcome {
    let (mut live, _) = match rping_live(ctx) {
        Ok(x) => x,
        Err(o) => return o,
    };
    let second = if ctx.cfg.app.is_perftest() {
        // A perftest -R server posts no receive on its test connection: the first Send
        // has none.
        let m = live.next_send_msn();
        let u = send_ulpdu(m, &rping_info(RUNNER_TO, RUNNER_STAG, ADV_SIZE));
        live.send(
            format!("Send MSN {m} of 16 octets on the test connection (no receive posted)"),
            &u,
        );
        u
    } else {
        // The server keeps one receive posted: the first Send takes it, the second has none.
        let m1 = live.next_send_msn();
        let m2 = live.next_send_msn();
        let first = send_ulpdu(m1, &rping_info(RUNNER_TO, RUNNER_STAG, ADV_SIZE));
        let second = send_ulpdu(m2, &rping_info(RUNNER_TO, RUNNER_STAG, ADV_SIZE));
        let mut both = Vec::new();
        live.c.frame(&first, &mut both);
        live.c.frame(&second, &mut both);
        let _ = live.c.send_raw(&both);
        live.sent
            .push(format!("Send MSN {m1} and Send MSN {m2} in one segment"));
        second
    };
    let o = match await_terminate(&mut live, ctx.cfg.step) {
        Ok(t) => {
            let (v, why) = judge(
                &t,
                &[ddp_cause(DdpCode::Untagged(UntaggedCode::NoBuffer))],
                &second,
                Copy::Required,
                None,
            );
            Outcome::new(v, live.sent(), t.describe()).because(why)
        }
        Err(e) => {
            Outcome::new(Fail, live.sent(), e).because("no Terminate for a Send without a receive")
        }
    };
    done(ctx, live.c, o)
}

/// Two rping connections: the buffer the first reveals is used on the second. The first is
/// returned too, to stay open (and its buffer registered) until the case is over.
fn two_rping(ctx: &mut Ctx<'_>) -> Result<(Live, Live, ReadRequest), Outcome> {
    ctx.needs_two_connections()?;
    let (first, theirs) = rping_live(ctx)?;
    let (mut live, _) = match rping_live(ctx) {
        Ok(x) => x,
        Err(o) => {
            ctx.keep(first.c);
            return Err(o);
        }
    };
    live.sent.insert(
        0,
        format!(
            "on a first connection, the rping opening (the peer's buffer: STag {:#x} TO {:#x})",
            theirs.sink_stag, theirs.sink_to
        ),
    );
    Ok((first, live, theirs))
}

fn ddp_access(ctx: &mut Ctx<'_>) -> Outcome {
    // The tool serving the buffer, and the one remote right its buffer grants.
    let (tool, right) = match ctx.cfg.app {
        PeerApp::WriteBwServer => ("write-bw", "write"),
        PeerApp::AtomicBwServer => ("atomic-bw", "atomic"),
        PeerApp::ReadBwServer => return Outcome::new(NA, "-", "-").because(
            "the application exposes no STag that lacks a remote right (read-bw's buffer grants read and write; atomics are rdmap-atomic-access)",
        ),
        PeerApp::RpingServer | PeerApp::RpingClient | PeerApp::PerftestClient | PeerApp::Bare => return Outcome::new(NA, "-", "-").because(
            "the application exposes no STag that lacks a remote right (rping's buffer grants read and write; run with --app write-bw-server)",
        ),
    };
    let (mut live, peer) = match request_live(ctx) {
        Ok(x) => x,
        Err(o) => return o,
    };
    let msn = live.next_read_msn();
    let req = read_of(peer.sink_stag, peer.sink_to, 16);
    let u = read_request_ulpdu(msn, req);
    live.send(
        format!(
            "Read Request MSN {msn}: 16 octets of the {tool} server's buffer STag {:#x} TO {:#x} (remote {right} rights only)",
            peer.sink_stag, peer.sink_to
        ),
        &u,
    );
    let o = match await_terminate(&mut live, ctx.cfg.step) {
        Ok(t) => {
            let allowed = [protection(ProtectionCode::AccessRights)];
            let (v, why) = judge(&t, &allowed, &u, Copy::Required, Some(&req));
            Outcome::new(v, live.sent(), t.describe()).because(why)
        }
        Err(e) => Outcome::new(Fail, live.sent(), e)
            .because("a Read of a buffer without remote read rights must be refused"),
    };
    done(ctx, live.c, o)
}

pub(crate) fn read_of(source_stag: u32, source_to: u64, size: u32) -> ReadRequest {
    ReadRequest {
        sink_stag: RUNNER_SINK_STAG,
        sink_to: 0,
        size,
        source_stag,
        source_to,
    }
}

fn rdmap_read(ctx: &mut Ctx<'_>) -> Outcome {
    let (mut live, peer) = match ctx.needs_remote_read().and_then(|()| rping_live(ctx)) {
        Ok(x) => x,
        Err(o) => return o,
    };
    let msn = live.next_read_msn();
    let req = read_of(peer.sink_stag, peer.sink_to, 16);
    live.send(
        format!(
            "Read Request MSN {msn}: 16 octets of the peer's buffer STag {:#x} TO {:#x}",
            peer.sink_stag, peer.sink_to
        ),
        &read_request_ulpdu(msn, req),
    );
    let o = match live.c.recv(ctx.cfg.step) {
        RxOutcome::Fpdu(f) => {
            let seen = describe_ulpdu(&f.ulpdu);
            match Message::parse(&f.ulpdu) {
                Ok(Message {
                    header: Header::ReadResponse { last, stag, to },
                    payload,
                }) => {
                    if last && stag == RUNNER_SINK_STAG && to == 0 && payload.len() == 16 {
                        Outcome::new(Pass, live.sent(), seen)
                    } else {
                        Outcome::new(Fail, live.sent(), seen).because(
                            "the Read Response must carry the sink STag/TO, L, the 16 octets",
                        )
                    }
                }
                _ => Outcome::new(Fail, live.sent(), seen).because("not a Read Response"),
            }
        }
        other => Outcome::new(Fail, live.sent(), format!("{other:?}")).because("no Read Response"),
    };
    done(ctx, live.c, o)
}

fn rdmap_atomic_access(ctx: &mut Ctx<'_>) -> Outcome {
    if ctx.cfg.app == PeerApp::AtomicBwServer {
        return Outcome::new(NA, "-", "-").because(
            "the application's buffer grants remote atomic access (rdmap-atomic and rdmap-atomic-alignment use it)",
        );
    }
    let (mut live, peer) = match request_live(ctx) {
        Ok(x) => x,
        Err(o) => return o,
    };
    let u = send_fetch_add(
        &mut live,
        ATOMIC_REQUEST_ID,
        peer.sink_stag,
        peer.sink_to,
        "no remote atomic right",
    );
    let allowed = [protection(ProtectionCode::AccessRights)];
    let o = atomic_terminate(
        ctx,
        &mut live,
        &u,
        &allowed,
        "no Terminate for an access the STag does not grant",
    );
    done(ctx, live.c, o)
}

/// Judges the peer's Terminate for the Atomic Request `u` against the causes `allowed`
/// (header copied): N/A when it is 'Unexpected OpCode' (no RFC 7306 on the wire), FAIL with
/// `missing` when none comes.
fn atomic_terminate(
    ctx: &Ctx<'_>,
    live: &mut Live,
    u: &[u8],
    allowed: &[TermCause],
    missing: &str,
) -> Outcome {
    match await_terminate(live, ctx.cfg.step) {
        Ok(t) if cause_matches(&t, &[operation(OperationCode::UnexpectedOpcode)]) => {
            Outcome::new(NA, live.sent(), t.describe())
                .because("the peer does not speak RFC 7306 Atomic Operations")
        }
        Ok(t) => {
            let (v, why) = judge(&t, allowed, u, Copy::Required, None);
            Outcome::new(v, live.sent(), t.describe()).because(why)
        }
        Err(e) => Outcome::new(Fail, live.sent(), e).because(missing),
    }
}

/// The Request Identifier of the runner's Atomic Requests.
const ATOMIC_REQUEST_ID: u32 = 0x5af7_0001;

/// The application's session for a case whose Atomic Request the peer must carry out
/// ([`Ctx::needs_remote_atomic`], then [`request_live`]), and the Atomic Request (MSN and
/// ULPDU) of a Fetch and Add of 1 at `offset` octets into the peer's buffer.
fn atomic_live(ctx: &mut Ctx<'_>, offset: u64) -> Result<(Live, Vec<u8>), Outcome> {
    let (mut live, peer) = ctx.needs_remote_atomic().and_then(|()| request_live(ctx))?;
    let u = send_fetch_add(
        &mut live,
        ATOMIC_REQUEST_ID,
        peer.sink_stag,
        peer.sink_to.wrapping_add(offset),
        &format!("{offset} octets in"),
    );
    Ok((live, u))
}

/// Sends on `live` an Atomic Request (MSN the next on the Read Request queue, Request
/// Identifier `request_id`) of a Fetch and Add of 1 at STag `stag` TO `to`, recorded as
/// "Atomic Request MSN m: Fetch and Add 1 at the peer's buffer STag s TO t (`note`)", and
/// returns its ULPDU.
fn send_fetch_add(live: &mut Live, request_id: u32, stag: u32, to: u64, note: &str) -> Vec<u8> {
    let msn = live.next_read_msn();
    let request = rdmap::AtomicRequest::fetch_add(request_id, stag, to, 1, 0);
    let u = Header::AtomicRequest { msn, request }
        .to_vec()
        .unwrap_or_default();
    live.send(
        format!(
            "Atomic Request MSN {msn}: Fetch and Add 1 at the peer's buffer STag {stag:#x} TO {to:#x} ({note})"
        ),
        &u,
    );
    u
}

fn rdmap_atomic(ctx: &mut Ctx<'_>) -> Outcome {
    let (mut live, _) = match atomic_live(ctx, 0) {
        Ok(x) => x,
        Err(o) => return o,
    };
    let o = match live.c.recv(ctx.cfg.step) {
        RxOutcome::Fpdu(f) => {
            let seen = describe_ulpdu(&f.ulpdu);
            match Message::parse(&f.ulpdu) {
                Ok(Message {
                    header: Header::AtomicResponse { msn, response },
                    ..
                }) => {
                    let seen = format!(
                        "{seen} (Request Identifier {:#x}, original value {:#x})",
                        response.request_id, response.original_value
                    );
                    if msn == 1 && response.request_id == ATOMIC_REQUEST_ID {
                        Outcome::new(Pass, live.sent(), seen)
                    } else {
                        Outcome::new(Fail, live.sent(), seen).because(
                            "the first Atomic Response has MSN 1 and the Request Identifier of its Request",
                        )
                    }
                }
                _ => match term::read(&f.ulpdu) {
                    Some(t) if cause_matches(&t, &[operation(OperationCode::UnexpectedOpcode)]) => {
                        Outcome::new(NA, live.sent(), t.describe())
                            .because("the peer does not speak RFC 7306 Atomic Operations")
                    }
                    _ => Outcome::new(Fail, live.sent(), seen).because(
                        "an Atomic Request the STag grants is answered by an Atomic Response",
                    ),
                },
            }
        }
        other => {
            Outcome::new(Fail, live.sent(), format!("{other:?}")).because("no Atomic Response")
        }
    };
    done(ctx, live.c, o)
}

fn rdmap_atomic_alignment(ctx: &mut Ctx<'_>) -> Outcome {
    let (mut live, u) = match atomic_live(ctx, 4) {
        Ok(x) => x,
        Err(o) => return o,
    };
    let allowed = [operation(OperationCode::CatastrophicStream)];
    let o = atomic_terminate(
        ctx,
        &mut live,
        &u,
        &allowed,
        "an Atomic Request whose address is not 64-bit aligned must be refused",
    );
    done(ctx, live.c, o)
}

fn rdmap_immediate(ctx: &mut Ctx<'_>) -> Outcome {
    let (mut live, _) = match ctx.needs_receive().and_then(|()| rping_live(ctx)) {
        Ok(x) => x,
        Err(o) => return o,
    };
    // The rping server reposted its receive when the start advertisement arrived (it now
    // waits for the Read Response): the Immediate Data lands in it.
    let msn = live.next_send_msn();
    let u = Header::ImmediateData {
        solicited_event: false,
        msn,
        data: *b"softrnic",
    }
    .to_vec()
    .unwrap_or_default();
    live.send(
        format!("Immediate Data MSN {msn} (8 octets) on QN 0, a receive posted"),
        &u,
    );
    let o = match await_terminate(&mut live, ctx.cfg.step) {
        Ok(t) if cause_matches(&t, &[operation(OperationCode::UnexpectedOpcode)]) => {
            Outcome::new(NA, live.sent(), t.describe())
                .because("the peer does not speak RFC 7306 Immediate Data")
        }
        Ok(t) => Outcome::new(Fail, live.sent(), t.describe())
            .because("an Immediate Data message into a posted receive is valid"),
        Err(e) if e.contains(CLOSED_WITHOUT_TERMINATE) => Outcome::new(NA, live.sent(), e)
            .because(
                "the connection was closed without a Terminate: rping's application takes an Immediate Data completion as bogus data and disconnects, so the RNIC's handling cannot be told from the application's",
            ),
        Err(e) => Outcome::new(Pass, live.sent(), e),
    };
    done(ctx, live.c, o)
}

/// The causes of a refused Send with Invalidate (RFC 5040 §7.2 names the code in both Error
/// Types).
const CANNOT_INVALIDATE: [TermCause; 2] = [
    operation(OperationCode::CannotInvalidate),
    protection(ProtectionCode::CannotInvalidate),
];

/// A Send with Invalidate of `stag` carrying an rping advertisement.
fn send_invalidate_ulpdu(msn: u32, stag: u32) -> Vec<u8> {
    Header::Send {
        solicited_event: false,
        invalidate_stag: Some(stag),
        last: true,
        msn,
        mo: 0,
    }
    .encode(&rping_info(RUNNER_TO, RUNNER_STAG, ADV_SIZE))
    .unwrap_or_default()
}

fn rdmap_invalidate(ctx: &mut Ctx<'_>) -> Outcome {
    let (mut live, peer) = match ctx.needs_receive().and_then(|()| rping_live(ctx)) {
        Ok(x) => x,
        Err(o) => return o,
    };
    // Both in one segment: the RNIC handles them before the application can react to the
    // extra Send.
    let msn = live.next_send_msn();
    let inv = send_invalidate_ulpdu(msn, peer.sink_stag);
    let write = write_ulpdu(peer.sink_stag, peer.sink_to, &[0x44u8; 16]);
    let mut both = Vec::new();
    live.c.frame(&inv, &mut both);
    live.c.frame(&write, &mut both);
    let _ = live.c.send_raw(&both);
    live.sent.push(format!(
        "Send with Invalidate MSN {msn} of the peer's buffer STag {:#x} and an RDMA Write of 16 octets to it, in one segment",
        peer.sink_stag
    ));
    let o = match await_terminate(&mut live, ctx.cfg.step) {
        Ok(t) if cause_matches(&t, &CANNOT_INVALIDATE) => {
            Outcome::new(NA, live.sent(), t.describe())
                .because("the peer does not let the buffer's STag be invalidated remotely")
        }
        Ok(t) => {
            let allowed = [ddp_cause(DdpCode::Tagged(TaggedCode::InvalidStag))];
            let (v, why) = judge(&t, &allowed, &write, Copy::Required, None);
            Outcome::new(v, live.sent(), t.describe()).because(why)
        }
        Err(e) => Outcome::new(Fail, live.sent(), e)
            .because("the Write to an invalidated STag was not refused"),
    };
    done(ctx, live.c, o)
}

/// How many Read Requests beyond the IRD `rdmap-ird` sends in one segment. A responder may
/// count a Read Request as done once its response is handed to DDP (its buffer on QN 1 is
/// then free again): Linux siw 6.1 takes the first Read of a burst straight into its idle
/// send slot and queues IRD more. Only IRD + 2 exceed every such responder, whatever its
/// timing.
const IRD_EXCESS: u16 = 2;

fn rdmap_ird(ctx: &mut Ctx<'_>) -> Outcome {
    let (mut live, peer) = match ctx.needs_remote_read().and_then(|()| rping_live(ctx)) {
        Ok(x) => x,
        Err(o) => return o,
    };
    let ird = live.reply.enhanced.map_or(1, |e| e.ird);
    let n = u32::from(ird) + u32::from(IRD_EXCESS);
    let mut batch = Vec::new();
    let mut beyond = Vec::new();
    for i in 0..n {
        let msn = live.next_read_msn();
        let u = read_request_ulpdu(msn, read_of(peer.sink_stag, peer.sink_to, 16));
        live.c.frame(&u, &mut batch);
        if i >= u32::from(ird) {
            beyond.push(u);
        }
    }
    let _ = live.c.send_raw(&batch);
    live.sent.push(format!(
        "{n} Read Requests of 16 octets in one segment (the peer's IRD is {ird})"
    ));
    let allowed = [
        ddp_cause(DdpCode::Untagged(UntaggedCode::NoBuffer)),
        ddp_cause(DdpCode::Untagged(UntaggedCode::MsnRange)),
    ];
    let siw = [operation(OperationCode::CatastrophicStream)];
    let o = match await_terminate(&mut live, ctx.cfg.step) {
        Ok(t) => {
            // The Terminate names whichever Request beyond the IRD overflowed (the first one
            // when the responder counts strictly, a later one when it answered some at once).
            let judged = |causes: &[TermCause]| {
                let all: Vec<_> = beyond
                    .iter()
                    .map(|u| judge(&t, causes, u, Copy::Required, None))
                    .collect();
                all.iter()
                    .find(|(v, _)| *v == Pass)
                    .or(all.last())
                    .cloned()
                    .unwrap_or((Fail, "no Read Request beyond the IRD".into()))
            };
            let (v, why) = match judged(&allowed) {
                (Pass, w) => (Pass, w),
                _ if judged(&siw).0 == Pass => (
                    Deviation,
                    "Linux siw 6.1 reports an overrun of its inbound Read queue as RDMAP Remote Operation 'Catastrophic error, localized to RDMAP Stream' (0x0/0x2/0x07), not as a DDP Untagged MSN error of queue 1".to_string(),
                ),
                other => other,
            };
            Outcome::new(v, live.sent(), t.describe()).because(why)
        }
        Err(e) => Outcome::new(Fail, live.sent(), e)
            .because("Read Requests beyond the IRD must be refused"),
    };
    done(ctx, live.c, o)
}

fn rdmap_terminate_layout(ctx: &mut Ctx<'_>) -> Outcome {
    let (mut live, read) = match live_any(ctx) {
        Ok(x) => x,
        Err(o) => return o,
    };
    let (stag, to) = read.map_or((0x00ff_ff00, 0), |r| (r.sink_stag ^ STAG_FLIP, r.sink_to));
    let u = write_ulpdu(stag, to, &[0x44u8; 16]);
    live.send(
        format!("RDMA Write to STag {stag:#x} (never advertised)"),
        &u,
    );
    let o = match await_terminate(&mut live, ctx.cfg.step) {
        Ok(t) => {
            let seen = format!("control word {:02x?}: {}", t.control, t.describe());
            match t.layout {
                Layout::Rfc => Outcome::new(Pass, live.sent(), seen),
                Layout::LowBitFirst => Outcome::new(Deviation, live.sent(), seen).because(
                    "Linux siw 6.1's layout: Layer and Error Type exchanged, M/D/R in reserved bits",
                ),
                Layout::ReservedBitsSet => Outcome::new(Fail, live.sent(), seen)
                    .because("reserved bits of the Terminate Control are set"),
            }
        }
        Err(e) => Outcome::new(Fail, live.sent(), e).because("no Terminate to inspect"),
    };
    done(ctx, live.c, o)
}

fn rdmap_after_terminate(ctx: &mut Ctx<'_>) -> Outcome {
    let (mut live, _) = match live_any(ctx) {
        Ok(x) => x,
        Err(o) => return o,
    };
    let msn = live.next_send_msn();
    let u = untagged_raw(DDP_UNTAGGED_LAST, RDMAP_SEND, 5, msn);
    live.send(format!("Send on QN 5 MSN {msn}"), &u);
    let t = match await_terminate(&mut live, ctx.cfg.step) {
        Ok(t) => t,
        Err(e) => {
            let o = Outcome::new(NA, live.sent(), e)
                .because("no Terminate to follow (judged by ddp-invalid-qn)");
            return done(ctx, live.c, o);
        }
    };
    let m = live.next_send_msn();
    live.send(
        format!("then a valid Send MSN {m}"),
        &send_ulpdu(m, &rping_info(RUNNER_TO, RUNNER_STAG, ADV_SIZE)),
    );
    let (after, closed) = after_terminate(&mut live, ctx.cfg.step);
    let seen = format!(
        "{}; after it: {}",
        t.describe(),
        describe_after(&after, closed)
    );
    let o = if !after.is_empty() {
        Outcome::new(Fail, live.sent(), seen).because("FPDUs followed the Terminate")
    } else if !closed {
        Outcome::new(Fail, live.sent(), seen)
            .because("the stream was not closed after the Terminate")
    } else {
        Outcome::new(Pass, live.sent(), seen)
    };
    done(ctx, live.c, o)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rdmap::Terminate;

    fn peer_terminate(t: Terminate) -> PeerTerminate {
        let u = Header::Terminate {
            msn: 1,
            terminate: t,
        }
        .to_vec()
        .expect("encode");
        term::read(&u).expect("a Terminate")
    }

    fn invalid_qn_send() -> Vec<u8> {
        untagged_raw(DDP_UNTAGGED_LAST, RDMAP_SEND, 5, 1)
    }

    /// RFC 5040 §4.8, §7.1: the right cause with the DDP header copied passes; a missing or
    /// different copy fails where the copy is required, and only a different one fails
    /// where it is optional.
    #[test]
    fn rfc5040_4_8_header_copies_are_judged() {
        let sent = invalid_qn_send();
        let cause = ddp_cause(DdpCode::Untagged(UntaggedCode::InvalidQn));
        let full = peer_terminate(Terminate::for_segment(cause, &sent));
        assert_eq!(judge(&full, &[cause], &sent, Copy::Required, None).0, Pass);
        let bare = peer_terminate(Terminate::bare(cause));
        assert_eq!(judge(&bare, &[cause], &sent, Copy::Required, None).0, Fail);
        assert_eq!(judge(&bare, &[cause], &sent, Copy::Optional, None).0, Pass);
        let mut other = sent.clone();
        other[13] ^= 1;
        let wrong = peer_terminate(Terminate::for_segment(cause, &other));
        let (v, why) = judge(&wrong, &[cause], &sent, Copy::Optional, None);
        assert_eq!(v, Fail, "{why}");
        let too_long = ddp_cause(DdpCode::Untagged(UntaggedCode::TooLong));
        let (v, why) = judge(&full, &[too_long], &sent, Copy::Required, None);
        assert_eq!(v, Fail);
        assert!(why.contains("cause should be"), "{why}");
    }

    /// RFC 5040 §4.8: a copied DDP header that differs from the one sent is reported field
    /// by field (Linux siw 6.1 copies a failed Read Request with its read size as MSN).
    #[test]
    fn rfc5040_4_8_a_wrong_header_copy_names_the_field() {
        let sent = read_request_ulpdu(1, read_of(0x1234, 0, 16));
        let mut siw = sent.clone();
        siw[10..14].copy_from_slice(&16u32.to_be_bytes());
        let cause = protection(ProtectionCode::InvalidStag);
        let t = peer_terminate(Terminate::for_segment(cause, &siw));
        let (v, why) = judge(&t, &[cause], &sent, Copy::Required, None);
        assert_eq!(v, Fail);
        assert!(why.contains("MSN 0x10 instead of 0x1"), "{why}");
        assert!(!why.contains("QN"), "{why}");
        let w = write_ulpdu(0x5a01, 0x1000, &[0; 4]);
        let mut other = w.clone();
        other[2..6].copy_from_slice(&0x5b01u32.to_be_bytes());
        assert_eq!(header_diff(&w, &other), "STag 0x5b01 instead of 0x5a01");
        assert_eq!(header_diff(&w, &other[..4]), "STag missing, TO missing");
    }

    /// RFC 5040 §4.8: a Read Request error must copy the Read Request header with R.
    #[test]
    fn rfc5040_4_8_read_request_copy_is_required() {
        let req = read_of(0x1234, 0, 16);
        let sent = read_request_ulpdu(1, req);
        let cause = protection(ProtectionCode::InvalidStag);
        let t = peer_terminate(Terminate::for_segment(cause, &sent));
        assert_eq!(
            judge(&t, &[cause], &sent, Copy::Required, Some(&req)).0,
            Pass
        );
        let other = read_of(0x1234, 8, 16);
        assert_eq!(
            judge(&t, &[cause], &sent, Copy::Required, Some(&other)).0,
            Fail
        );
        let mut no_r = Terminate::for_segment(cause, &sent);
        no_r.r = false;
        no_r.rdma_header = None;
        let t = peer_terminate(no_r);
        assert_eq!(
            judge(&t, &[cause], &sent, Copy::Required, Some(&req)).0,
            Fail
        );
    }

    fn row(id: &str) -> Case {
        catalogue()
            .iter()
            .copied()
            .find(|c| c.id == id)
            .unwrap_or_else(|| panic!("no row {id}"))
    }

    /// Every row has an id of its own, so that a selection or a report names one case.
    #[test]
    fn catalogue_ids_are_unique() {
        let mut ids: Vec<&str> = catalogue().iter().map(|c| c.id).collect();
        let n = ids.len();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), n);
    }

    /// RFC 5044 §7.1.1 Rev: the mpa-rev-unknown row, judged from its table data alone,
    /// passes a rejecting Reply or a close and fails an accepting Reply.
    #[test]
    fn rfc5044_7_1_1_unknown_revision_row_judges_the_reply() {
        let Drive::Reply(p) = row("mpa-rev-unknown").run else {
            panic!("mpa-rev-unknown sends one Request");
        };
        let mut reject = ConnFrame::new(FrameKind::Reply, 1);
        reject.reject = true;
        assert_eq!((p.judge)(&ReplyOutcome::Frame(reject)).0, Pass);
        assert_eq!((p.judge)(&ReplyOutcome::Closed(0)).0, Pass);
        let accept = ConnFrame::new(FrameKind::Reply, 3);
        let (v, why) = (p.judge)(&ReplyOutcome::Frame(accept));
        assert_eq!(v, Fail);
        assert_eq!(why, "accepted an unknown revision");
        assert_eq!((p.judge)(&ReplyOutcome::Timeout(0)).0, Fail);
    }

    /// RFC 5041 §7.1, §7.2: the ddp-invalid-qn row sends a Send on QN 5 with the next MSN
    /// and accepts only 'Invalid QN' with the DDP header copied.
    #[test]
    fn rfc5041_7_2_invalid_qn_row_builds_its_segment() {
        let Drive::Terminate(p) = row("ddp-invalid-qn").run else {
            panic!("ddp-invalid-qn sends one segment");
        };
        assert_eq!(
            p.allowed,
            &[ddp_cause(DdpCode::Untagged(UntaggedCode::InvalidQn))]
        );
        assert!(p.copy == Copy::Required);
        let Open::Any(build) = p.open else {
            panic!("ddp-invalid-qn runs on any peer");
        };
        let (_listener, mut live) = loopback_live([1, 1]);
        let s = build(&mut live, None);
        assert_eq!(s.what, "Send on QN 5 MSN 1");
        assert_eq!(s.ulpdu, invalid_qn_send());
        assert_eq!(s.ulpdu.len(), ddp::UNTAGGED_HEADER_LEN + RPING_RECV_LEN);
        assert!(s.read.is_none());
        assert_eq!(live.msn, [2, 1]);
    }

    /// A `Live` over a loopback TCP connection with next MSNs `msn`, and the listener that
    /// must outlive it (nothing answers: what is sent is only recorded and buffered).
    fn loopback_live(msn: [u32; 2]) -> (std::net::TcpListener, Live) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("listener");
        let addr = listener.local_addr().expect("address");
        let live = Live {
            c: Conn::connect("test", addr, Duration::from_secs(1)).expect("connect"),
            reply: ConnFrame::new(FrameKind::Reply, 2),
            msn,
            sent: Vec::new(),
        };
        (listener, live)
    }

    /// RFC 7306 §5.2.1: the runner's Fetch and Add is an Atomic Request with the next MSN of
    /// the Read Request queue, the given Request Identifier, STag and TO, Add Data 1 and Add
    /// Mask zero, recorded with its note.
    #[test]
    fn rfc7306_5_2_1_fetch_add_request_is_built_and_recorded() {
        let (_listener, mut live) = loopback_live([1, 3]);
        let u = send_fetch_add(&mut live, ATOMIC_REQUEST_ID, 0x5a01, 0x1004, "4 octets in");
        assert_eq!(live.msn, [1, 4]);
        assert_eq!(
            live.sent(),
            "Atomic Request MSN 3: Fetch and Add 1 at the peer's buffer STag 0x5a01 TO 0x1004 (4 octets in)"
        );
        let m = Message::parse(&u).expect("an RDMAP message");
        assert_eq!(
            m.header,
            Header::AtomicRequest {
                msn: 3,
                request: rdmap::AtomicRequest::fetch_add(ATOMIC_REQUEST_ID, 0x5a01, 0x1004, 1, 0),
            }
        );
        assert!(m.payload.is_empty());
        let u = send_fetch_add(&mut live, 1, 0x5a01, 0x1000, "no remote atomic right");
        let Ok(Message {
            header: Header::AtomicRequest { msn: 4, request },
            ..
        }) = Message::parse(&u)
        else {
            panic!("the second Atomic Request has MSN 4");
        };
        assert_eq!(request.request_id, 1);
        assert_eq!(
            live.sent.last().map(String::as_str),
            Some(
                "Atomic Request MSN 4: Fetch and Add 1 at the peer's buffer STag 0x5a01 TO 0x1000 (no remote atomic right)"
            )
        );
    }

    /// RFC 5040 §4.8: a control word without M/D/R cannot show its layout, so a cause that
    /// matches with Layer and Error Type exchanged is accepted; with flags set it is not.
    #[test]
    fn rfc5040_4_8_exchanged_layer_and_type_without_flags() {
        let want = operation(OperationCode::InvalidVersion);
        let (l, e, c) = want.layer_etype_ecode();
        let swapped = TermCause::from_wire(e, l, c);
        let t = peer_terminate(Terminate::bare(swapped));
        assert!(cause_matches(&t, &[want]));
        let sent = invalid_qn_send();
        let mut flagged = Terminate::for_segment(want, &sent);
        flagged.cause = swapped;
        let t = peer_terminate(flagged);
        assert!(t.d);
        assert!(!cause_matches(&t, &[want]));
    }
}
