# shellcheck shell=bash disable=SC2034,SC2016 # variables read by lab.sh; the host command is expanded there
# Kernel SCTP against kernel SCTP, guest to guest: validates the SCTP lab plumbing (guest peer
# tools/sctp_peer.py, the second bridge, tools/lab-path, the capture checks) without softrnic
# in the data path. Three associations, g2 (client) -> g1 (server), each carrying 256 KiB each
# way with the msgseq pattern verified by the receiver:
#   1. raw IP (protocol 132) on br0;
#   2. RFC 6951 UDP encapsulation, port 9899 both ends;
#   3. raw IP, multihomed (both guests on br0 and br1), 2 MB each way at 500 kB/s; 1 s after
#      the transfer starts the host takes g1's br0 path down (tools/lab-path): the association
#      must carry on over br1.
# The capture check decodes both bridges with `softrnic decode` (0 errors) and requires DATA on
# the br1 path of association 3.
SCENARIO_GUESTS=2
SCENARIO_BRIDGES=2
SCENARIO_DIRECTION="kernel SCTP g2 -> kernel SCTP g1"
SCENARIO_TIMEOUT=300
SCENARIO_HOST_CMD='"$LAB_TOOLS/wait-flag" mh.started 250 && "$LAB_TOOLS/lab-path" down 1 0 1'
SCENARIO_GUEST_IPV6=stack   # kernel SCTP over UDP needs the IPv6 protocol (lab.sh)

scenario_check() {
    python3 "$LAB_TOOLS/sctp_check.py" "$LAB_PCAP_ALL" --assocs 3 --established 3 --raw 2 --udp 1 \
        --bidir-bytes 262144 --no-abort --data-path "$LAB_G2_IP1,$LAB_G1_IP1"
}
