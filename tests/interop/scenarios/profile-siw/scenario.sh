# shellcheck shell=bash disable=SC2034,SC2016 # variables read by lab.sh; the host command is expanded there
# softrnic --profile siw against stock siw 6.1: rev 2, no CRC, no markers, no P2P; the profile's
# initiator holds its first FPDU (siw 6.1 accept race) so rping completes.
# Both ways with one guest (g1): softrnic initiator -> siw responder (host rping -c), then
# siw initiator -> softrnic responder (guest rping -c); see siw-variants/host-rping.sh and
# siw-variants/guest-rping.sh (the guest side). The check decodes the capture with
# softrnic decode (0 errors, the negotiated session below) and compares opcode counts with tshark.
SCENARIO_SIW_PATCH=""
SCENARIO_HOST_CMD='"$LAB_ROOT/siw-variants/host-rping.sh" --client-opts "--profile siw" --server-opts "--profile siw"'
EXPECT_HOST_INITIATOR="rev=2,crc=off,p2p=off"
EXPECT_SIW_INITIATOR="rev=2,crc=off,p2p=off"
# shellcheck source=../../siw-variants/rping-scenario.sh
. "$LAB_ROOT/siw-variants/rping-scenario.sh"
