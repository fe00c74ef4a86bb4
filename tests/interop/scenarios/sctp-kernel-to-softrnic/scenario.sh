# shellcheck shell=bash disable=SC2034,SC2016 # variables read by lab.sh; the host command is expanded there
# Linux kernel SCTP (g1, client) -> softrnic SCTP (host, `softrnic sctp-perf -s`), one
# association per run, data both ways (256 KiB each way in 1000-byte messages, verified by both
# receivers, sctp-perf's in-band test protocol spoken by sctp_peer.py --proto sprf in the guest):
#   1. raw IP (protocol 132): host 10.99.0.1:5001;
#   2. RFC 6951 UDP encapsulation (port 9899 both ends): host 10.99.0.1:5002.
# host.sh starts each server and raises flag h<N>.ready; the guest connects after it.
# The capture check decodes the bridge with `softrnic decode` (0 errors: every CRC32c, chunk
# and verification tag right), two complete associations (one raw, one UDP), both directions
# carrying all the data.
SCENARIO_GUESTS=1
SCENARIO_DIRECTION="kernel SCTP(g1) -> softrnic(host)"
SCENARIO_TIMEOUT=240
SCENARIO_HOST_CMD='bash "$LAB_SCENARIO_DIR/host.sh"'
SCENARIO_GUEST_IPV6=stack   # kernel SCTP over UDP needs the IPv6 protocol (lab.sh)

scenario_check() {
    python3 "$LAB_TOOLS/sctp_check.py" "$LAB_PCAP" --assocs 2 --established 2 --raw 1 --udp 1 \
        --bidir-bytes 262144 --no-abort
}
