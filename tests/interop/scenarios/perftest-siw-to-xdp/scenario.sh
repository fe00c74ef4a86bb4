# shellcheck shell=bash disable=SC2034,SC2016 # variables read by lab.sh; the host command is expanded there
# siw's perftest clients (g1) -> softrnic's perftest-style servers on AF_XDP (softrnic's own
# TCP/IP on the veth vx0 on the lab bridge, 10.99.0.11; see tools/xdp-host.sh), perftest's -R
# protocol. Runs (runs.sh, lib/perftest-runs.sh): send_bw, send_lat, write_bw, read_bw, read_lat, sizes 2 and 65536
# B, -n 10, each on its own port. The guests know 10.99.0.11 as the host. Passes when every run
# exits 0 on both sides and the capture of the bridge holds two MPA connections per run from
# g1, decodes without errors (tshark cannot follow it: tools/xdp-requires.sh).
SCENARIO_GUESTS=1
SCENARIO_DIRECTION="siw(g1) -> softrnic(host, AF_XDP)"
SCENARIO_TIMEOUT=420
SCENARIO_GUEST_SCRIPT=scenarios/perftest-siw-to-softrnic/guest.sh
SCENARIO_GUEST_HOST_IP=10.99.0.11
SCENARIO_HOST_CMD='bash "$LAB_SCENARIO_DIR/host.sh"'

# shellcheck source=../../tools/xdp-requires.sh
. "$LAB_ROOT/tools/xdp-requires.sh"

# shellcheck source=../../tools/perftest-check.sh
. "$LAB_ROOT/tools/perftest-check.sh"

scenario_check() {
    pt_check "$LAB_G1_IP" || return 1
    echo "ok: $PT_RUN_COUNT runs against softrnic on AF_XDP passed on both sides"
}
