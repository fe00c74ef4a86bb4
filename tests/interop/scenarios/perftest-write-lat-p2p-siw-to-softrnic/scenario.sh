# shellcheck shell=bash disable=SC2034,SC2016 # variables read by lab.sh; the host command is expanded there
# siw's `ib_write_lat -R` client -> softrnic's write-lat server, made possible by RFC 6581
# peer-to-peer mode. perftest's write_lat server writes first, but softrnic as MPA responder
# sends nothing before the initiator's first FPDU (RFC 5044 §7.1.2), and stock siw's client
# never sends first (perftest-siw-to-softrnic records that run as blocked). Here siw is built
# with peer_to_peer = true and rtr_type Write (siw-variants/p2p-write.patch): its initiator
# sends the zero-length RDMA Write RTR after the Reply, which unlocks the responder.
# Runs (runs.sh): ib_write_lat -R -F -d siw0 -n 5 -s SIZE (2, 64, 4096, 65536, 1048576) on g1
# against `softrnic write-lat -R --p2p` with the same options, one run per size on its own
# port. Passes when every run exits 0 on both sides and reports its latency line on both,
# every connection siw initiated decodes (`softrnic decode`) as rev 2, no CRC, P2P with the
# Write RTR, with 0 errors, and the opcode counts equal tshark's (decode-crosscheck.sh).
SCENARIO_GUESTS=1
SCENARIO_SIW_PATCH=p2p-write
SCENARIO_DIRECTION="siw[${SCENARIO_SIW_PATCH}](g1) -> softrnic(host)"
SCENARIO_TIMEOUT=420
SCENARIO_HOST_CMD='bash "$LAB_SCENARIO_DIR/host.sh"'
EXPECT_SIW_INITIATOR="rev=2,crc=off,p2p=write"

scenario_check() {
    # shellcheck source-path=SCRIPTDIR source=runs.sh
    . "$LAB_SCENARIO_DIR/runs.sh"
    local runs tag
    runs=$(pt_runs | wc -l)
    python3 "$LAB_TOOLS/mpa_lab.py" expect-pcap "$LAB_PCAP" --min-requests "$((2 * runs))" \
        --min-replies "$((2 * runs))" --request-from "$LAB_G1_IP" || return 1
    python3 "$LAB_ROOT/siw-variants/check_session.py" "$LAB_PCAP" --softrnic "$LAB_SOFTRNIC" \
        --expect "$LAB_G1_IP:$EXPECT_SIW_INITIATOR" || return 1
    "$LAB_TOOLS/decode-crosscheck.sh" "$LAB_PCAP" || return 1
    # Every run reported its latency line on the siw side too.
    for tag in $(pt_runs | awk '{ print $1 }'); do
        grep -Eq '^ *[0-9]+ +[0-9]+ +[0-9.]+' "$LAB_RESULTS/out/g1/$tag.log" 2>/dev/null ||
            { echo "FAIL: no result line in out/g1/$tag.log"; return 1; }
    done
    echo "ok: $runs ib_write_lat runs (P2P Write RTR) against softrnic's write-lat server"
}
