//! Interop profiles: one name that sets every MPA connection option the way a
//! particular kind of peer expects it.
//!
//! Real iWARP peers differ in what they send and what they tolerate, and several
//! of those choices are fixed in the peer (Linux siw decides them at compile
//! time). A [`Profile`] turns a peer's name into the [`Config`] that talks to it
//! and into the runtime [`Quirks`] that the RNIC runtime has to honour:
//!
//! | profile | rev | CRC | markers | P2P / RTR | IRD/ORD |
//! |---|---|---|---|---|---|
//! | `rfc` | 2 | on request | sent on request, not asked for | off (accepted only when enabled) | 16 |
//! | `siw` | 2 | on request | refused | initiator: off; responder: accepts, picks Write, else Read; never Send | 16 (raised up to 128) |
//! | `chelsio` | 2 | required | refused | on, Read RTR | 32 |
//! | `t404` | 1 | required, strict | refused | none in revision 1 (Read only if forced to rev 2) | 16 |
//! | `neteffect` | 1 | required | refused | none | 16 |
//!
//! The sources of each value are cited at [`Profile::config`]; the facts about the
//! peers are collected in `shared/notes/interop-and-platform-facts.md` (taken from
//! the Linux 6.1 sources of siw and cxgb4 and from the nes driver parameters).
//!
//! Quirks every profile gets, because this implementation always behaves that way:
//! a tagged RTR (zero-length RDMA Write or Read) never carries STag 0, which
//! Chelsio rejects; and the responder never sends before it has received the
//! initiator's first FPDU (RFC 5044 §7.1.2; NetEffect's `send_first=0`).

use core::fmt;
use core::str::FromStr;
use core::time::Duration;

use thiserror::Error;

use crate::frame::{RtrSet, RtrType};
use crate::negotiate::{Config, CrcPolicy, Role};

/// How long a `siw`-profile initiator holds its first FPDU after the MPA Reply.
///
/// Linux siw 6.1 sends its MPA Reply before it moves the socket to the QP's receive
/// path (`siw_accept` in siw_cm.c); an FPDU that arrives in between is not seen
/// until more data arrives. The race window is short (the FPDU that was lost in the
/// golden capture `siw-accept-race.pcap` arrived 1.6 ms after the Reply); the hold
/// leaves a wide margin also for guests under emulation and costs one delay per
/// connection, never per message.
pub const SIW_FIRST_FPDU_DELAY: Duration = Duration::from_millis(50);

/// An interop profile: which peer the connection is meant for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Profile {
    /// This implementation's RFC defaults (what the tools use without `--profile`).
    #[default]
    Rfc,
    /// Linux siw (kernel 6.1 defaults).
    Siw,
    /// Chelsio T4–T6 with iw_cxgb4 (module defaults).
    Chelsio,
    /// Chelsio T404-BT (and Windows SMB Direct on T520): MPA revision 1, strict CRC.
    T404,
    /// Intel/NetEffect (nes): MPA revision 1, CRC, the passive side never sends first.
    NetEffect,
}

/// Runtime behaviour a profile asks of the RNIC (outside MPA negotiation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Quirks {
    /// Initiator only: hold the first FPDU this long after the MPA Reply was accepted
    /// (zero: send at once). See [`SIW_FIRST_FPDU_DELAY`].
    pub first_fpdu_delay: Duration,
}

/// A profile name that does not exist.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Error)]
#[error("unknown interop profile '{0}' (known: rfc, siw, chelsio, t404, neteffect)")]
pub struct UnknownProfile(pub String);

impl Profile {
    /// Every profile, in the order `--help` lists them.
    pub const ALL: [Profile; 5] = [
        Profile::Rfc,
        Profile::Siw,
        Profile::Chelsio,
        Profile::T404,
        Profile::NetEffect,
    ];

    /// The profile's name as written on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Profile::Rfc => "rfc",
            Profile::Siw => "siw",
            Profile::Chelsio => "chelsio",
            Profile::T404 => "t404",
            Profile::NetEffect => "neteffect",
        }
    }

    /// One line describing what the profile sets, for `--help`.
    pub fn summary(self) -> &'static str {
        match self {
            Profile::Rfc => "RFC defaults: MPA rev 2, CRC if asked, no markers asked, IRD/ORD 16",
            Profile::Siw => {
                "Linux siw 6.1: rev 2, CRC if asked, markers refused, P2P only as responder \
                 (Write/Read RTR), first FPDU held 50 ms (siw accept race)"
            }
            Profile::Chelsio => {
                "Chelsio iw_cxgb4: rev 2, CRC required, markers off, P2P with Read RTR, IRD/ORD 32"
            }
            Profile::T404 => "Chelsio T404: MPA rev 1, CRC required and strict, markers off",
            Profile::NetEffect => {
                "Intel/NetEffect nes: MPA rev 1, CRC required, passive side never sends first"
            }
        }
    }

    /// The MPA settings for this peer, for our `role` (some peers behave differently
    /// as initiator and responder). Private data is empty; set it afterwards.
    ///
    /// * `rfc` — [`Config::default`]'s RFC 5044/6581 behaviour with IRD = ORD = 16,
    ///   markers inserted when the peer asks (RFC 5044 §7.1.1 M), IRD raised on demand.
    /// * `siw` — siw_main.c: `mpa_version = MPA_REVISION_2`, `mpa_crc_required` and
    ///   `peer_to_peer` false; siw_cm.c: a Request with M = 1 is rejected (markers
    ///   unsupported), a responder accepts P2P whatever its own setting and picks
    ///   Write if offered, else Read, never Send; `relaxed_ird_negotiation = true`,
    ///   `SIW_MAX_IRD_QP` = `SIW_MAX_ORD_QP` = 128 (siw.h).
    /// * `chelsio` — cxgb4 module defaults (notes): `mpa_rev=2`, `crc_enabled=1`,
    ///   `markers_enabled=0`, `peer2peer=1` with `p2p_type` Read; IRD/ORD 32.
    /// * `t404` — notes: revision 1, CRC required and strict
    ///   ([`CrcPolicy::RequireStrict`]), markers off, no Write RTR. Revision 1 has no
    ///   RFC 6581 enhanced data, so no P2P negotiation; if forced to revision 2 with
    ///   P2P, only the Read RTR is offered or accepted.
    /// * `neteffect` — nes driver parameters (notes): `mpa_version=1`, CRC on; the
    ///   passive side never sends first (`send_first=0`), which RFC 5044 §7.1.2
    ///   requires of every responder anyway.
    pub fn config(self, role: Role) -> Config {
        let base = Config {
            ird: 16,
            ord: 16,
            ird_max: 16,
            relaxed_ird_ord: true,
            markers_tx: false,
            ..Config::default()
        };
        match self {
            Profile::Rfc => Config {
                markers_tx: true,
                rtr_supported: RtrSet::ALL,
                ..base
            },
            Profile::Siw => Config {
                ird_max: 128,
                p2p: role == Role::Responder,
                rtr_supported: RtrSet {
                    send: false,
                    write: true,
                    read: true,
                },
                rtr_preferred: Some(RtrType::Write),
                ..base
            },
            Profile::Chelsio => Config {
                crc: CrcPolicy::Require,
                ird: 32,
                ord: 32,
                ird_max: 32,
                p2p: true,
                rtr_supported: match role {
                    Role::Initiator => RtrSet::only(RtrType::Read),
                    Role::Responder => RtrSet {
                        send: false,
                        write: true,
                        read: true,
                    },
                },
                rtr_preferred: Some(RtrType::Read),
                ..base
            },
            Profile::T404 => Config {
                revision: 1,
                enhanced: false,
                crc: CrcPolicy::RequireStrict,
                rtr_supported: RtrSet::only(RtrType::Read),
                rtr_preferred: Some(RtrType::Read),
                ..base
            },
            Profile::NetEffect => Config {
                revision: 1,
                enhanced: false,
                crc: CrcPolicy::Require,
                ..base
            },
        }
    }

    /// The runtime quirks for this peer.
    pub fn quirks(self) -> Quirks {
        Quirks {
            first_fpdu_delay: match self {
                Profile::Siw => SIW_FIRST_FPDU_DELAY,
                _ => Duration::ZERO,
            },
        }
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Profile {
    type Err = UnknownProfile;

    /// Case-insensitive; `nes` is accepted for `neteffect`.
    fn from_str(s: &str) -> Result<Profile, UnknownProfile> {
        let lower = s.trim().to_ascii_lowercase();
        if lower == "nes" {
            return Ok(Profile::NetEffect);
        }
        Profile::ALL
            .into_iter()
            .find(|p| p.name() == lower)
            .ok_or_else(|| UnknownProfile(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::ConnFrame;
    use crate::negotiate::{NegotiationError, RejectReason, complete, request, respond};

    fn handshake(
        ini: &Config,
        resp: &Config,
    ) -> (
        ConnFrame,
        ConnFrame,
        Result<(crate::Session, crate::Session), String>,
    ) {
        let req = request(ini).expect("valid initiator config");
        match respond(resp, &req) {
            Ok(acc) => {
                let r = complete(ini, &req, &acc.reply)
                    .map(|si| (si, acc.session))
                    .map_err(|e| format!("{e:?}"));
                (req, acc.reply, r)
            }
            Err(rej) => (req, rej.reply, Err(format!("{:?}", rej.reason))),
        }
    }

    /// Every profile's configuration is valid in both roles, and names round-trip.
    #[test]
    fn every_profile_valid_and_named() {
        for p in Profile::ALL {
            for role in [Role::Initiator, Role::Responder] {
                assert_eq!(p.config(role).validate(), Ok(()), "{p} {role}");
            }
            assert_eq!(p.name().parse::<Profile>(), Ok(p));
            assert_eq!(p.to_string().to_uppercase().parse::<Profile>(), Ok(p));
            assert!(!p.summary().is_empty());
        }
        assert_eq!("nes".parse::<Profile>(), Ok(Profile::NetEffect));
        let err = "cxgb3".parse::<Profile>().expect_err("unknown");
        assert!(err.to_string().contains("chelsio"));
    }

    /// RFC 5044 §7.1.1 (Rev, C, M) + RFC 6581 (H, IRD/ORD, no P2P): the `siw` initiator's
    /// Request carries what siw 6.1 sends by default (siw_main.c `mpa_version` 2,
    /// `mpa_crc_required` and `peer_to_peer` false; siw_cm.c sets no M flag).
    #[test]
    fn siw_initiator_request_matches_siw_defaults() {
        let req = request(&Profile::Siw.config(Role::Initiator)).expect("valid");
        assert_eq!(req.revision, 2);
        assert!(!req.crc && !req.markers && req.enhanced_flag);
        let e = req.enhanced.expect("enhanced data");
        assert!(!e.p2p);
        assert!(e.rtr.is_empty());
        assert_eq!((e.ird, e.ord), (16, 16));
    }

    /// RFC 6581 (P2P, RTR choice) as siw_cm.c `siw_proc_mpareq` does it: a `siw`
    /// responder accepts P2P, picks Write when offered, else Read, and never Send; it
    /// refuses markers (RFC 5044 §7.1.1 M) and echoes CRC when asked (C).
    #[test]
    fn siw_responder_rtr_choice_markers_crc() {
        let resp = Profile::Siw.config(Role::Responder);
        let offer = |rtr: RtrSet| Config {
            p2p: true,
            rtr_supported: rtr,
            ..Profile::Rfc.config(Role::Initiator)
        };
        let (_, reply, res) = handshake(&offer(RtrSet::ALL), &resp);
        assert_eq!(
            reply.enhanced.expect("enh").rtr,
            RtrSet::only(RtrType::Write)
        );
        assert!(res.is_ok());
        let (_, reply, _) = handshake(
            &offer(RtrSet {
                send: true,
                write: false,
                read: true,
            }),
            &resp,
        );
        assert_eq!(
            reply.enhanced.expect("enh").rtr,
            RtrSet::only(RtrType::Read)
        );
        let (_, reply, res) = handshake(&offer(RtrSet::only(RtrType::Send)), &resp);
        assert!(reply.reject);
        assert!(res.expect_err("no Send RTR").contains("NoMatchingRtr"));

        let markers = Config {
            markers_rx: true,
            ..Profile::Rfc.config(Role::Initiator)
        };
        let (_, reply, res) = handshake(&markers, &resp);
        assert!(reply.reject);
        assert!(res.expect_err("markers").contains("MarkersUnsupported"));

        let crc = Config {
            crc: CrcPolicy::Require,
            ..Profile::Rfc.config(Role::Initiator)
        };
        let (_, reply, res) = handshake(&crc, &resp);
        assert!(reply.crc);
        let (si, sr) = res.expect("agreed");
        assert!(si.crc && sr.crc);
    }

    /// RFC 6581 (IRD/ORD, relaxed as siw's `relaxed_ird_negotiation`): a `siw` responder
    /// raises its IRD up to siw's maximum of 128 to meet a large initiator ORD.
    #[test]
    fn siw_relaxed_ird_up_to_128() {
        let ini = Config {
            ord: 100,
            ..Profile::Rfc.config(Role::Initiator)
        };
        let (_, reply, res) = handshake(&ini, &Profile::Siw.config(Role::Responder));
        assert_eq!(reply.enhanced.expect("enh").ird, 100);
        assert_eq!(res.expect("agreed").0.ord, 100);
    }

    /// RFC 6581 (P2P, Read RTR) with the cxgb4 defaults in the notes (`peer2peer=1`,
    /// `p2p_type` Read, `crc_enabled=1`, IRD/ORD 32): the `chelsio` initiator offers only
    /// the Read RTR with C = 1, and two `chelsio` ends agree on P2P + Read + CRC.
    #[test]
    fn chelsio_p2p_read_rtr_crc() {
        let (req, reply, res) = handshake(
            &Profile::Chelsio.config(Role::Initiator),
            &Profile::Chelsio.config(Role::Responder),
        );
        assert!(req.crc && !req.markers && req.revision == 2);
        let e = req.enhanced.expect("enh");
        assert!(e.p2p);
        assert_eq!(e.rtr, RtrSet::only(RtrType::Read));
        assert_eq!((e.ird, e.ord), (32, 32));
        assert_eq!(
            reply.enhanced.expect("enh").rtr,
            RtrSet::only(RtrType::Read)
        );
        let (si, sr) = res.expect("agreed");
        assert!(si.crc && sr.crc && si.p2p);
        assert_eq!(si.rtr_to_send(), Some(RtrType::Read));
        // A `chelsio` responder picks Read even when Write is offered first.
        let (_, reply, _) = handshake(
            &Profile::Siw.config(Role::Responder),
            &Profile::Chelsio.config(Role::Responder),
        );
        assert_eq!(
            reply.enhanced.expect("enh").rtr,
            RtrSet::only(RtrType::Read)
        );
    }

    /// RFC 5044 §7.1.1 (Rev, C) with the T404 facts of the notes (revision 1, CRC
    /// required and strict): the `t404` Request is revision 1 with C = 1 and no
    /// enhanced data; as responder it rejects a Request without C = 1 (strict), and as
    /// initiator it refuses a Reply without C = 1, which plain `Require` accepts.
    #[test]
    fn t404_rev1_strict_crc() {
        let t404_i = Profile::T404.config(Role::Initiator);
        let t404_r = Profile::T404.config(Role::Responder);
        let req = request(&t404_i).expect("valid");
        assert_eq!(req.revision, 1);
        assert!(req.crc && !req.enhanced_flag && req.enhanced.is_none());

        let rev1_no_crc = Config {
            revision: 1,
            enhanced: false,
            ..Profile::Rfc.config(Role::Initiator)
        };
        let rej = respond(&t404_r, &request(&rev1_no_crc).expect("valid")).expect_err("strict");
        assert_eq!(rej.reason, RejectReason::CrcNotRequested);
        assert!(rej.reply.reject && rej.reply.crc);

        // A Reply with C = 0 (as a responder that ignores C would send).
        let mut reply = respond(&Profile::Rfc.config(Role::Responder), &req)
            .expect("accepted")
            .reply;
        reply.crc = false;
        assert_eq!(
            complete(&t404_i, &req, &reply),
            Err(NegotiationError::CrcNotEchoed)
        );
        let lenient = Config {
            crc: CrcPolicy::Require,
            ..t404_i.clone()
        };
        assert!(
            complete(&lenient, &req, &reply)
                .expect("RFC: C either way")
                .crc
        );

        let (_, reply, res) = handshake(&t404_i, &t404_r);
        assert!(reply.crc && reply.revision == 1);
        let (si, sr) = res.expect("agreed");
        assert!(si.crc && sr.crc && !si.enhanced);
        // An RFC-default initiator (revision 2) is told revision 1 in the reject.
        let rej = respond(
            &t404_r,
            &request(&Profile::Rfc.config(Role::Initiator)).expect("v"),
        )
        .expect_err("rev 2");
        assert_eq!(rej.reply.revision, 1);
    }

    /// RFC 5044 §7.1.1 + §7.1.2 with the nes parameters of the notes (`mpa_version=1`,
    /// CRC on, `send_first=0`): revision 1 with C = 1, and the responder's session must
    /// wait for the initiator's first FPDU.
    #[test]
    fn neteffect_rev1_crc_responder_waits() {
        let (req, reply, res) = handshake(
            &Profile::NetEffect.config(Role::Initiator),
            &Profile::NetEffect.config(Role::Responder),
        );
        assert_eq!((req.revision, reply.revision), (1, 1));
        assert!(req.crc && reply.crc);
        let (si, sr) = res.expect("agreed");
        assert!(sr.must_await_first_fpdu() && !si.must_await_first_fpdu());
    }

    /// The `rfc` profile is what the tools did before profiles existed: revision 2 with
    /// enhanced data, CRC on request, markers sent on request but not asked for,
    /// IRD = ORD = 16 raised on demand, no P2P.
    #[test]
    fn rfc_profile_is_the_tool_default() {
        let c = Profile::Rfc.config(Role::Initiator);
        assert_eq!(
            (c.revision, c.enhanced, c.crc, c.markers_rx, c.markers_tx),
            (2, true, CrcPolicy::Accept, false, true)
        );
        assert_eq!(
            (c.ird, c.ord, c.ird_max, c.relaxed_ird_ord),
            (16, 16, 16, true)
        );
        assert!(!c.p2p);
        assert_eq!(c, Profile::Rfc.config(Role::Responder));
        assert_eq!(Profile::default(), Profile::Rfc);
    }

    /// Runtime quirks: only `siw` holds the first FPDU (siw 6.1 accept race). (Non-zero
    /// RTR STags and a silent responder hold for every profile: stack/tests/profiles.rs.)
    #[test]
    fn quirks_per_profile() {
        for p in Profile::ALL {
            let q = p.quirks();
            assert_eq!(q.first_fpdu_delay.is_zero(), p != Profile::Siw, "{p}");
        }
        assert_eq!(Profile::Siw.quirks().first_fpdu_delay, SIW_FIRST_FPDU_DELAY);
    }
}
