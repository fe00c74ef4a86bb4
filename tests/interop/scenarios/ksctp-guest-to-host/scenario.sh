# shellcheck shell=bash disable=SC2034,SC2016 # variables read by lab.sh; the host command is expanded there
# DDP over the kernel's SCTP (softrnic's ksctp://) against DDP over softrnic's own SCTP: g1 runs
# the host's softrnic binary with --transport ksctp (Linux 6.1 SCTP sockets), the host runs
# softrnic with --transport sctp (its own SCTP on raw IPv4). Every run of tests.txt (rping -V:
# Send, RDMA Read and RDMA Write with the echo verified; the perftest-style send/write/read
# bandwidth and latency tools) goes both ways:
#   A. g1's softrnic server on kernel SCTP (10.99.0.2) <- the host's softrnic client;
#   B. the host's softrnic server (10.99.0.1) <- g1's softrnic client on kernel SCTP.
# The guest raises a<N>.ready once its server N listens; the host raises b<N>.ready once its own
# does. Passes when every server and client exits 0 (results in out/g1/ksctp-results.txt and
# host/ksctp-results.txt), and the capture decodes with 0 errors (`softrnic decode`), every
# association established over raw IP and none aborted.
SCENARIO_GUESTS=1
SCENARIO_DIRECTION="softrnic on kernel SCTP(g1) <-> softrnic on its own SCTP(host), both ways"
SCENARIO_TIMEOUT=900
SCENARIO_GUEST_SOFTRNIC=1
SCENARIO_HOST_CMD='bash "$LAB_SCENARIO_DIR/host.sh"'

scenario_check() {
    local runs
    runs=$(grep -cv -e '^#' -e '^$' "$LAB_SCENARIO_DIR/tests.txt")
    # Each run is one association per direction (the perftest-style tools open two: the
    # control connection and the test connection).
    python3 "$LAB_TOOLS/sctp_check.py" "$LAB_PCAP" --assocs "$((2 * runs))" \
        --established "$((2 * runs))" --raw "$((2 * runs))" --no-abort
}
