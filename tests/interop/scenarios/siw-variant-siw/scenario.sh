# shellcheck shell=bash disable=SC2034,SC2016 # variables read by lab.sh
# siw <-> siw rping on a siw variant (tests/interop/siw-variants/NAME.patch, chosen with
# SOFTRNIC_LAB_SIW_VARIANT=NAME, default p2p-read): validates the variant image itself and shows
# what two such siw builds negotiate. g2 is the client (MPA initiator), g1 the server.
# Expected sessions per variant (siw_cm.c of Linux 6.1): mpa-rev1 and t404 -> rev 1 (the
# responder echoes the Request's revision); crc-required and t404 -> CRC on; p2p-read -> Read
# RTR; p2p-write and p2p-both -> Write RTR (a siw responder prefers Write).
# In revision 1 (mpa-rev1, t404) rping's server cannot RDMA Read: siw reports IRD = ORD = 0 for
# a revision-1 connection request (siw_cm.c fills them only from RFC 6581 enhanced data) and
# rdma_cm limits the server's initiator depth to that; the run then ends after the client's
# first Send with "post send error" on the server, which siw-siw-rping's guest.sh accepts for
# those variants.
SCENARIO_GUESTS=2
SCENARIO_GUEST_SCRIPT=scenarios/siw-siw-rping/guest.sh
SCENARIO_SIW_PATCH=${SOFTRNIC_LAB_SIW_VARIANT:-p2p-read}
SCENARIO_DIRECTION="siw[$SCENARIO_SIW_PATCH](g2) -> siw[$SCENARIO_SIW_PATCH](g1)"
SCENARIO_TIMEOUT=240
# The host side only tells the guests which variant they run (flag "variant").
SCENARIO_HOST_CMD='printf "%s\\n" "'$SCENARIO_SIW_PATCH'" >"$LAB_FLAGS/variant"'

scenario_check() {
    local want
    case $SCENARIO_SIW_PATCH in
        mpa-rev1) want="rev=1,crc=off,p2p=off" ;;
        crc-required) want="rev=2,crc=on,p2p=off" ;;
        p2p-read) want="rev=2,crc=off,p2p=read" ;;
        p2p-write | p2p-both) want="rev=2,crc=off,p2p=write" ;;
        t404) want="rev=1,crc=on,p2p=off" ;;
        *) want="" ;;
    esac
    python3 "$LAB_ROOT/siw-variants/check_session.py" "$LAB_PCAP" --softrnic "$LAB_SOFTRNIC" \
        --expect "$LAB_G2_IP:$want"
}
