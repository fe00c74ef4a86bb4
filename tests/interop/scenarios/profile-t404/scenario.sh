# shellcheck shell=bash disable=SC2034,SC2016 # variables read by lab.sh; the host command is expanded there
# softrnic --profile t404 (MPA rev 1, CRC required and strict) against siw built like a T404
# (siw-variants/t404.patch: mpa_version = 1, mpa_crc_required = true): rev 1 with CRC both ways;
# the strict side would refuse a frame without C = 1.
# Both ways with one guest (g1): softrnic initiator -> siw responder (host rping -c), then
# siw initiator -> softrnic responder (guest rping -c); see siw-variants/host-rping.sh and
# siw-variants/guest-rping.sh (the guest side). The check decodes the capture with
# softrnic decode (0 errors, the negotiated session below) and compares opcode counts with tshark.
SCENARIO_SIW_PATCH=t404
SCENARIO_HOST_CMD='"$LAB_ROOT/siw-variants/host-rping.sh" --client-opts "--profile t404" --server-opts "--profile t404" --siw-server-no-read'
EXPECT_HOST_INITIATOR="rev=1,crc=on,p2p=off"
EXPECT_SIW_INITIATOR="rev=1,crc=on,p2p=off"
# shellcheck source=../../siw-variants/rping-scenario.sh
. "$LAB_ROOT/siw-variants/rping-scenario.sh"
