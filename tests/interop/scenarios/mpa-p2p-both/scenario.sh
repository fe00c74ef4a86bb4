# shellcheck shell=bash disable=SC2034,SC2016 # variables read by lab.sh; the host command is expanded there
# RFC 6581 peer-to-peer mode when several RTR types are offered: the responder must pick exactly
# one (zrlio/softiwarp issues #18/#20). siw built with peer_to_peer = true and both RTR types
# (siw-variants/p2p-both.patch) offers Read + Write; softrnic --p2p accepts and picks Write.
# softrnic --p2p offers Send + Write + Read; siw's responder picks Write (siw_proc_mpareq), which
# softrnic's initiator then sends as its RTR.
# Both ways with one guest (g1): softrnic initiator -> siw responder (host rping -c), then
# siw initiator -> softrnic responder (guest rping -c); see siw-variants/host-rping.sh and
# siw-variants/guest-rping.sh (the guest side). The check decodes the capture with
# softrnic decode (0 errors, the negotiated session below) and compares opcode counts with tshark.
SCENARIO_SIW_PATCH=p2p-both
SCENARIO_HOST_CMD='"$LAB_ROOT/siw-variants/host-rping.sh" --client-opts "--p2p" --server-opts "--p2p"'
EXPECT_HOST_INITIATOR="rev=2,crc=off,p2p=write"
EXPECT_SIW_INITIATOR="rev=2,crc=off,p2p=write"
# shellcheck source=../../siw-variants/rping-scenario.sh
. "$LAB_ROOT/siw-variants/rping-scenario.sh"
