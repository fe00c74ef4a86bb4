# shellcheck shell=bash disable=SC2034,SC2016 # variables read by lab.sh; the host command is expanded there
# Multihoming and failover of DDP over the kernel's SCTP (softrnic's ksctp://): g1 has eth0 on
# br0 (10.99.0.2) and eth1 on br1 (10.99.1.2); the host has 10.99.0.1 and 10.99.1.1. The host
# runs `softrnic write-bw -D 8` as server over its own SCTP bound to both addresses; g1's
# `softrnic write-bw -D 8` client runs over the kernel's SCTP, bound to both of its addresses
# (sctp_bindx) and connecting to both of the host's (sctp_connectx). 2 s after g1's client
# starts (flag g1.go), tools/lab-path takes g1's br0 path down (every frame lost both ways). Passes
# when both ends exit 0 (the test connection survived the failover, the result exchange ran
# on the remaining path) and both bridges' captures, merged, decode with 0 errors, with no
# ABORT and RDMA Writes (DATA) from g1 on the br1 path (10.99.1.2 -> 10.99.1.1).
SCENARIO_GUESTS=1
SCENARIO_BRIDGES=2
SCENARIO_DIRECTION="softrnic on kernel SCTP(g1, 2 addresses) -> softrnic on its own SCTP(host, 2 addresses)"
SCENARIO_TIMEOUT=300
SCENARIO_GUEST_SOFTRNIC=1
SCENARIO_HOST_CMD='bash "$LAB_SCENARIO_DIR/host.sh"'

scenario_check() {
    python3 "$LAB_TOOLS/sctp_check.py" "$LAB_PCAP_ALL" --assocs 2 --established 2 --raw 2 \
        --no-abort --data-path "$LAB_G1_IP1,$LAB_HOST_IP1"
}
