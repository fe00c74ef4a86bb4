# shellcheck shell=bash disable=SC2034,SC2016 # variables read by lab.sh; the host command is expanded there
# Multihoming (RFC 9260 §6.4, §8.2) and failover against Linux kernel SCTP: g1 has eth0 on br0
# (10.99.0.2) and eth1 on br1 (10.99.1.2); the host has 10.99.0.1 and 10.99.1.1. g1 runs a
# kernel SCTP server bound to the wildcard address (so its INIT ACK lists both addresses);
# the host's `softrnic sctp-perf -c 10.99.0.2,10.99.1.2 -B 10.99.0.1,10.99.1.1` sends for 8 s
# over raw IP. 2 s in, tools/lab-path takes g1's br0 path down (tap1: every frame lost both
# ways). Passes when
#   - sctp-perf exits 0 and reports the path event (`path 10.99.0.2: DOWN` or
#     `POTENTIALLY-FAILED`), the association surviving;
#   - the guest (sctp_peer.py --proto sprf: sctp-perf's test protocol) verified every message
#     and reported no error back in its REPORT;
#   - both bridges' captures, merged, decode with 0 errors and show DATA from the host on the
#     br1 path (10.99.1.1 -> 10.99.1.2) after the failure.
SCENARIO_GUESTS=1
SCENARIO_BRIDGES=2
SCENARIO_DIRECTION="softrnic(host, 2 addresses) -> kernel SCTP(g1, 2 addresses)"
SCENARIO_TIMEOUT=240
SCENARIO_HOST_CMD='bash "$LAB_SCENARIO_DIR/host.sh"'
SCENARIO_GUEST_IPV6=stack   # kernel SCTP over UDP needs the IPv6 protocol (lab.sh)

scenario_check() {
    local rc=0
    grep -E "^path $LAB_G1_IP: (DOWN|POTENTIALLY-FAILED)" "$LAB_RESULTS/host/failover.txt" ||
        { echo "FAIL: sctp-perf reported no path event for $LAB_G1_IP"; rc=1; }
    python3 "$LAB_TOOLS/sctp_check.py" "$LAB_PCAP_ALL" --assocs 1 --established 1 --raw 1 \
        --no-abort --data-path "$LAB_HOST_IP1,$LAB_G1_IP1" || rc=1
    return "$rc"
}
