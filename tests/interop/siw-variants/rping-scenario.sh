# shellcheck shell=bash disable=SC2034 # variables read by lab.sh
# The part the rping scenarios against a siw build (mpa-*, profile-*) share, sourced by their
# scenario.sh after it has set SCENARIO_SIW_PATCH (empty: stock siw), SCENARIO_HOST_CMD and
# the sessions each direction must negotiate, EXPECT_HOST_INITIATOR and EXPECT_SIW_INITIATOR
# ("rev=N,crc=on|off,p2p=off|read|write"). Both ways with one guest (g1): softrnic initiator
# -> siw responder (host rping -c), then siw initiator -> softrnic responder (guest rping -c);
# see host-rping.sh and guest-rping.sh. The check decodes the capture with softrnic decode
# (0 errors, the negotiated sessions) and compares opcode counts with tshark
# (check_session.py).
SCENARIO_GUESTS=1
SCENARIO_GUEST_SCRIPT=siw-variants/guest-rping.sh
SCENARIO_DIRECTION="softrnic <-> siw[${SCENARIO_SIW_PATCH:-stock}](g1), both ways"
SCENARIO_TIMEOUT=240

scenario_check() {
    python3 "$LAB_ROOT/siw-variants/check_session.py" "$LAB_PCAP" --softrnic "$LAB_SOFTRNIC" \
        --expect "$LAB_HOST_IP:$EXPECT_HOST_INITIATOR" --expect "$LAB_G1_IP:$EXPECT_SIW_INITIATOR"
}
