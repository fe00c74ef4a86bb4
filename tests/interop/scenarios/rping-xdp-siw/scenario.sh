# shellcheck shell=bash disable=SC2034,SC2016 # variables read by lab.sh; the host command is expanded there
# softrnic on AF_XDP (its own TCP/IP, kernel bypass) <-> siw, both ways. The host side adds a
# veth pair to the lab bridge: vxb is a bridge port, vx0 belongs to softrnic (an XSK socket in
# copy mode; softrnic's stack is 10.99.0.11 there, the kernel has no address on it).
#   1. siw `rping -s -V` (g1, 10.99.0.2:7174) <- `softrnic rping -c -V -C 10 --profile siw
#      --transport xdp`, sizes 64 and 65535;
#   2. siw `rping -c -V -C 10` (g1) -> `softrnic rping -s -V --transport xdp` on
#      10.99.0.11:7175, sizes 64 and 65535.
# Passes when every client and server exits 0 (echo validated with -V on both sides) and the
# capture of the bridge decodes with `softrnic decode` without errors (tshark cannot follow it:
# tools/xdp-requires.sh) and holds 40 RDMA Read Requests (4 runs x 10 pings).
SCENARIO_GUESTS=1
SCENARIO_DIRECTION="softrnic(host, AF_XDP) <-> siw(g1), both ways"
SCENARIO_TIMEOUT=300
SCENARIO_HOST_CMD='bash "$LAB_SCENARIO_DIR/host.sh"'

# shellcheck source=../../tools/xdp-requires.sh
. "$LAB_ROOT/tools/xdp-requires.sh"

# shellcheck source=../../tools/rping-check.sh
. "$LAB_ROOT/tools/rping-check.sh"

scenario_check() {
    rping_check 40 "4 runs x 10 pings, both directions over AF_XDP"
}
