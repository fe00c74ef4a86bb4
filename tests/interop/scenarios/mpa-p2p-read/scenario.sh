# shellcheck shell=bash disable=SC2034,SC2016 # variables read by lab.sh; the host command is expanded there
# RFC 6581 peer-to-peer mode with the zero-length RDMA Read RTR: siw built with peer_to_peer = true
# and rtr_type = Read (siw-variants/p2p-read.patch) offers only Read; softrnic --p2p accepts it and
# expects the Read RTR. softrnic --p2p --rtr read offers only Read and siw's responder picks it.
# Both ways with one guest (g1): softrnic initiator -> siw responder (host rping -c), then
# siw initiator -> softrnic responder (guest rping -c); see siw-variants/host-rping.sh and
# siw-variants/guest-rping.sh (the guest side). The check decodes the capture with
# softrnic decode (0 errors, the negotiated session below) and compares opcode counts with tshark.
SCENARIO_SIW_PATCH=p2p-read
SCENARIO_HOST_CMD='"$LAB_ROOT/siw-variants/host-rping.sh" --client-opts "--p2p --rtr read" --server-opts "--p2p"'
EXPECT_HOST_INITIATOR="rev=2,crc=off,p2p=read"
EXPECT_SIW_INITIATOR="rev=2,crc=off,p2p=read"
# shellcheck source=../../siw-variants/rping-scenario.sh
. "$LAB_ROOT/siw-variants/rping-scenario.sh"
