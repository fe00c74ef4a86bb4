# shellcheck shell=bash disable=SC2034,SC2016 # variables read by lab.sh; the host command is expanded there
# The honest comparison with siw between two guests (one emulated vCPU each, the lab bridge
# between them): the servers run in g1, the clients in g2, one run at a time, softrnic against
# softrnic and siw against siw:
#   RDMA Write bandwidth, 64 KiB and 4 KiB messages (write-bw / ib_write_bw -R -D 4),
#   2-byte RDMA Write and Send latency (write-lat, send-lat / ib_write_lat, ib_send_lat -R
#   -n 500, the median; when siw's ib_write_lat or ib_send_lat does not complete it is
#   listed in out/g2/perf-missing.txt and its row says n/a),
#   and a plain TCP stream of 64 KiB writes (python3 sockets, g2 to g1) as the floor.
# softrnic runs with its progress thread (the default) and with --manual-progress. Every run
# but the ICMP one is made in CMP_ROUNDS (3) rounds (siw-compare.sh). g2 writes
# out/g2/perf-results.txt ("NAME VALUE", one line per round) and out/g2/perf-table.txt (the
# medians and the ratios of the medians); the check passes when every measurement but siw's
# latency produced a number in every round (the ratios are reported, not judged).
SCENARIO_GUESTS=2
SCENARIO_DIRECTION="softrnic(g2) -> softrnic(g1) and siw(g2) -> siw(g1)"
SCENARIO_TIMEOUT=2400
SCENARIO_GUEST_SOFTRNIC=1
# Headers only: the runs move about 2.7 GB over the bridge, and nothing here decodes them.
SCENARIO_CAPTURE_SNAPLEN=128
SCENARIO_HOST_CMD=''

# shellcheck source=../../lib/siw-compare.sh
source "$LAB_ROOT/lib/siw-compare.sh"

scenario_check() {
    cmp_check "$LAB_RESULTS/out/g2/perf-results.txt" "$LAB_RESULTS/out/g2/perf-table.txt"
}
