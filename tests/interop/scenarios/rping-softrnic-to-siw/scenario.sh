# shellcheck shell=bash disable=SC2034,SC2016 # variables read by lab.sh; the host command is expanded there
# `softrnic rping -c -V -C 10 --profile siw` on the host -> siw's `rping -s -V -S 65535` (g1,
# 10.99.0.2:7174), once per size (64, 4096, 65535), a fresh rping server per run. The siw
# profile holds softrnic's first FPDU 50 ms after siw's MPA Reply (siw 6.1 accept race, see
# tests/interop/README.md); IRD/ORD stay rping's 1/1. Passes when every softrnic client exits 0
# (echo validated with -V), every siw server exits 0, and the capture decodes with
# `softrnic decode` without errors and with tshark's RDMAP opcode counts.
SCENARIO_GUESTS=1
SCENARIO_DIRECTION="softrnic(host) -> siw(g1)"
SCENARIO_TIMEOUT=240
SCENARIO_HOST_CMD='bash "$LAB_SCENARIO_DIR/host.sh"'

# shellcheck source=../../tools/rping-check.sh
. "$LAB_ROOT/tools/rping-check.sh"

scenario_check() {
    rping_check 30 "3 runs x 10 pings"
}
