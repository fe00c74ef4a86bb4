# shellcheck shell=bash disable=SC2034,SC2016 # variables read by lab.sh; the host command is expanded there
# softrnic --profile chelsio (rev 2, CRC required, P2P with the Read RTR, IRD/ORD 32) against siw
# built for P2P with the Read RTR (siw-variants/p2p-read.patch), as a Chelsio peer would run it.
# Both ways with one guest (g1): softrnic initiator -> siw responder (host rping -c), then
# siw initiator -> softrnic responder (guest rping -c); see siw-variants/host-rping.sh and
# siw-variants/guest-rping.sh (the guest side). The check decodes the capture with
# softrnic decode (0 errors, the negotiated session below) and compares opcode counts with tshark.
SCENARIO_SIW_PATCH=p2p-read
SCENARIO_HOST_CMD='"$LAB_ROOT/siw-variants/host-rping.sh" --client-opts "--profile chelsio" --server-opts "--profile chelsio"'
EXPECT_HOST_INITIATOR="rev=2,crc=on,p2p=read"
EXPECT_SIW_INITIATOR="rev=2,crc=on,p2p=read"
# shellcheck source=../../siw-variants/rping-scenario.sh
. "$LAB_ROOT/siw-variants/rping-scenario.sh"
