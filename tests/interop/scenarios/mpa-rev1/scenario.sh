# shellcheck shell=bash disable=SC2034,SC2016 # variables read by lab.sh; the host command is expanded there
# MPA revision 1 (RFC 5044 §7.1.1 Rev): siw built with mpa_version = 1 (siw-variants/mpa-rev1.patch)
# sends rev 1 Requests; softrnic's responder answers rev 1; softrnic --mpa-rev 1 sends rev 1 and
# siw's responder echoes it. No enhanced data (RFC 6581 needs rev 2), no CRC.
# Both ways with one guest (g1): softrnic initiator -> siw responder (host rping -c), then
# siw initiator -> softrnic responder (guest rping -c); see siw-variants/host-rping.sh and
# siw-variants/guest-rping.sh (the guest side). The check decodes the capture with
# softrnic decode (0 errors, the negotiated session below) and compares opcode counts with tshark.
SCENARIO_SIW_PATCH=mpa-rev1
SCENARIO_HOST_CMD='"$LAB_ROOT/siw-variants/host-rping.sh" --client-opts "--mpa-rev 1" --server-opts "" --siw-server-no-read'
EXPECT_HOST_INITIATOR="rev=1,crc=off,p2p=off"
EXPECT_SIW_INITIATOR="rev=1,crc=off,p2p=off"
# shellcheck source=../../siw-variants/rping-scenario.sh
. "$LAB_ROOT/siw-variants/rping-scenario.sh"
