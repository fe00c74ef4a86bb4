# shellcheck shell=bash disable=SC2034,SC2016 # variables read by lab.sh; the host command is expanded there
# siw's rping client (g1) -> `softrnic rping -s -V` on the host end (10.99.0.1:7174), once per
# size: `rping -c -V -C 10 -S SIZE` with SIZE 64, 4096 and 65535 (rping's largest: it refuses
# 65536), one softrnic server run per size, in one guest session. Passes when every siw client
# and every softrnic server exits 0 (siw validated the echo with -V), and the capture decodes
# with `softrnic decode` without errors and with the RDMAP opcode counts tshark sees: per run
# 10 RDMA Read Requests, 20 Sends each way, and Read Responses / Writes.
SCENARIO_GUESTS=1
SCENARIO_DIRECTION="siw(g1) -> softrnic(host)"
SCENARIO_TIMEOUT=240
RPING_SIZES="64 4096 65535"
SCENARIO_HOST_CMD='RPING_SIZES="'$RPING_SIZES'" bash "$LAB_SCENARIO_DIR/host.sh"'

# shellcheck source=../../tools/rping-check.sh
. "$LAB_ROOT/tools/rping-check.sh"

scenario_check() {
    rping_check 30 "3 runs x 10 pings"
}
