# shellcheck shell=bash disable=SC2034,SC2016 # variables read by lab.sh; the host command is expanded there
# RFC 6581 peer-to-peer mode with the zero-length RDMA Write RTR: siw built with peer_to_peer = true
# and rtr_type = Write (siw-variants/p2p-write.patch); softrnic --p2p --rtr write the other way.
# (siw never sends or accepts a Send RTR: siw_cm.c knows only Read and Write.)
# Both ways with one guest (g1): softrnic initiator -> siw responder (host rping -c), then
# siw initiator -> softrnic responder (guest rping -c); see siw-variants/host-rping.sh and
# siw-variants/guest-rping.sh (the guest side). The check decodes the capture with
# softrnic decode (0 errors, the negotiated session below) and compares opcode counts with tshark.
SCENARIO_SIW_PATCH=p2p-write
SCENARIO_HOST_CMD='"$LAB_ROOT/siw-variants/host-rping.sh" --client-opts "--p2p --rtr write" --server-opts "--p2p"'
EXPECT_HOST_INITIATOR="rev=2,crc=off,p2p=write"
EXPECT_SIW_INITIATOR="rev=2,crc=off,p2p=write"
# shellcheck source=../../siw-variants/rping-scenario.sh
. "$LAB_ROOT/siw-variants/rping-scenario.sh"
