# shellcheck shell=bash disable=SC2034,SC2016 # variables read by lab.sh; the host command is expanded there
# CRC on (RFC 5044 §7.1.1 C) with stock siw: softrnic --crc as initiator sets C = 1 and siw's
# Reply echoes it; softrnic --crc as responder answers siw's C = 0 Request with C = 1, and siw
# (which runs CRC exactly when the Reply has C = 1) uses it too. Every FPDU's CRC must be good.
# Both ways with one guest (g1): softrnic initiator -> siw responder (host rping -c), then
# siw initiator -> softrnic responder (guest rping -c); see siw-variants/host-rping.sh and
# siw-variants/guest-rping.sh (the guest side). The check decodes the capture with
# softrnic decode (0 errors, the negotiated session below) and compares opcode counts with tshark.
SCENARIO_SIW_PATCH=""
SCENARIO_HOST_CMD='"$LAB_ROOT/siw-variants/host-rping.sh" --client-opts "--crc" --server-opts "--crc"'
EXPECT_HOST_INITIATOR="rev=2,crc=on,p2p=off"
EXPECT_SIW_INITIATOR="rev=2,crc=on,p2p=off"
# shellcheck source=../../siw-variants/rping-scenario.sh
. "$LAB_ROOT/siw-variants/rping-scenario.sh"
