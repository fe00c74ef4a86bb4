# shellcheck shell=bash disable=SC2034,SC2016 # variables read by lab.sh; the host command is expanded there
# siw's perftest clients (g1) -> softrnic's perftest-style servers on AF_XDP (softrnic's own
# TCP/IP on the veth vx0 on the lab bridge, 10.99.0.11; see tools/xdp-host.sh), perftest's -R
# protocol. Runs (runs.sh): send_bw, send_lat, write_bw, read_bw, read_lat, sizes 2 and 65536
# B, -n 10, each on its own port. The guests know 10.99.0.11 as the host. Passes when every run
# exits 0 on both sides and the capture of the bridge holds two MPA connections per run from
# g1, decodes without errors and with tshark's opcode counts.
SCENARIO_GUESTS=1
SCENARIO_DIRECTION="siw(g1) -> softrnic(host, AF_XDP)"
SCENARIO_TIMEOUT=420
SCENARIO_GUEST_SCRIPT=scenarios/perftest-siw-to-softrnic/guest.sh
SCENARIO_GUEST_HOST_IP=10.99.0.11
SCENARIO_HOST_CMD='bash "$LAB_SCENARIO_DIR/host.sh"'

# shellcheck source=../../tools/xdp-requires.sh
. "$LAB_ROOT/tools/xdp-requires.sh"

scenario_check() {
    # shellcheck source-path=SCRIPTDIR source=runs.sh
    . "$LAB_SCENARIO_DIR/runs.sh"
    local runs
    runs=$(pt_runs | wc -l)
    python3 "$LAB_TOOLS/mpa_lab.py" expect-pcap "$LAB_PCAP" --min-requests "$((2 * runs))" \
        --min-replies "$((2 * runs))" --request-from "$LAB_G1_IP" || return 1
    "$LAB_TOOLS/decode-crosscheck.sh" "$LAB_PCAP" || return 1
    local counts op
    counts=$("$LAB_SOFTRNIC" decode --counts "$LAB_PCAP")
    for op in 0x00 0x01 0x02 0x03; do
        echo "$counts" | awk -v o="$op" '$1 == o && $3 > 0 { f = 1 } END { exit !f }' ||
            { echo "FAIL: no RDMAP opcode $op in the capture"; return 1; }
    done
    echo "ok: $runs runs against softrnic on AF_XDP passed on both sides"
}
