# shellcheck shell=bash disable=SC2034,SC2016 # variables read by lab.sh; the host command is expanded there
# softrnic SCTP (host, `softrnic sctp-perf -c`) -> Linux kernel SCTP (g1, sctp_peer.py server),
# one association per run, data both ways (256 KiB each way in 1000-byte messages, verified by
# both receivers; sctp_peer.py --proto sprf speaks sctp-perf's test protocol):
#   1. raw IP (protocol 132): g1 10.99.0.2:5001;
#   2. RFC 6951 UDP encapsulation (port 9899 both ends): g1 10.99.0.2:5002.
# The guest raises flag g<N>.ready once its server listens; host.sh connects after it.
# The capture check is the same as sctp-kernel-to-softrnic's.
SCENARIO_GUESTS=1
SCENARIO_DIRECTION="softrnic(host) -> kernel SCTP(g1)"
SCENARIO_TIMEOUT=240
SCENARIO_HOST_CMD='bash "$LAB_SCENARIO_DIR/host.sh"'
SCENARIO_GUEST_IPV6=stack   # kernel SCTP over UDP needs the IPv6 protocol (lab.sh)

scenario_check() {
    python3 "$LAB_TOOLS/sctp_check.py" "$LAB_PCAP" --assocs 2 --established 2 --raw 1 --udp 1 \
        --bidir-bytes 262144 --no-abort
}
