# shellcheck shell=bash disable=SC2034,SC2016 # variables read by lab.sh; the host command is expanded there
# The honest comparison with siw: softrnic and Linux siw in the same guest (the same emulated
# CPU, one vCPU), each against itself over the guest's local TCP (server and client on the
# guest's own address), one after the other:
#   RDMA Write bandwidth, 64 KiB and 4 KiB messages (write-bw / ib_write_bw -R -D 4),
#   2-byte RDMA Write and Send latency (write-lat, send-lat / ib_write_lat, ib_send_lat -R
#   -n 500, the median; siw's ib_write_lat against itself may block and siw's rdma_cm may
#   refuse ib_send_lat, see guest.sh: then it is listed in out/g1/perf-missing.txt and its
#   row says n/a),
#   and a plain TCP stream of 64 KiB writes (python3 sockets) as the floor.
# softrnic runs with its progress thread (the default) and with --manual-progress. Every run
# but the ICMP one is made in CMP_ROUNDS (3) rounds (siw-compare.sh). g1 writes
# out/g1/perf-results.txt ("NAME VALUE", one line per round) and out/g1/perf-table.txt (the
# medians and the ratios of the medians); the check passes when every measurement but siw's
# latency produced a number in every round (the ratios are reported, not judged).
SCENARIO_GUESTS=1
SCENARIO_DIRECTION="softrnic <-> softrnic and siw <-> siw, each on g1's local TCP"
SCENARIO_TIMEOUT=1500
SCENARIO_GUEST_SOFTRNIC=1
SCENARIO_HOST_CMD=''

# shellcheck source=../../lib/siw-compare.sh
source "$LAB_ROOT/lib/siw-compare.sh"

scenario_check() {
    cmp_check "$LAB_RESULTS/out/g1/perf-results.txt" "$LAB_RESULTS/out/g1/perf-table.txt"
}
