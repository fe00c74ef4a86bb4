# shellcheck shell=bash disable=SC2034,SC2016 # variables read by lab.sh; the host command is expanded there
# softrnic's perftest-style clients on AF_XDP (softrnic's own TCP/IP on the veth vx0 on the
# lab bridge, 10.99.0.11; see tools/xdp-host.sh) -> siw's perftest servers (g1), perftest's
# -R protocol. Runs (runs.sh, lib/perftest-runs.sh): send/write/read bw and lat, sizes 2 and 65536 B, -n 10, each on
# its own port, against `softrnic <tool> -R --profile siw --transport xdp`. Passes when every
# run exits 0 on both sides and the capture of the bridge holds two MPA connections per run
# from the AF_XDP address, decodes without errors (tshark cannot follow it: tools/xdp-requires.sh).
SCENARIO_GUESTS=1
SCENARIO_DIRECTION="softrnic(host, AF_XDP) -> siw(g1)"
SCENARIO_TIMEOUT=420
SCENARIO_GUEST_SCRIPT=scenarios/perftest-softrnic-to-siw/guest.sh
SCENARIO_HOST_CMD='bash "$LAB_SCENARIO_DIR/host.sh"'

# shellcheck source=../../tools/xdp-requires.sh
. "$LAB_ROOT/tools/xdp-requires.sh"

# shellcheck source=../../tools/perftest-check.sh
. "$LAB_ROOT/tools/perftest-check.sh"

scenario_check() {
    pt_check 10.99.0.11 || return 1
    echo "ok: $PT_RUN_COUNT runs over AF_XDP passed on both sides"
}
