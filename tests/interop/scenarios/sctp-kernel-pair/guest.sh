#!/bin/bash
# g1: kernel SCTP server, g2: client; see scenario.sh.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../../guest/lab-guest.sh
. /lab/lib/lab-guest.sh
peer=(python3 /lab/lib/sctp_peer.py)
common=(--bidir -n 262144 -l 1000 --verify --timeout 60)
modprobe sctp
lab_eth1_up
rc=0
if [[ $LAB_NAME == g1 ]]; then
    lab_step raw "${peer[@]}" server --port 5001 "${common[@]}" --ready "$LAB_FLAGS/s1.ready" --out raw.json || rc=1
    lab_step udp "${peer[@]}" server --port 5002 --udp "${common[@]}" --ready "$LAB_FLAGS/s2.ready" --out udp.json || rc=1
    sysctl -qw net.sctp.udp_port=0 net.sctp.encap_port=0
    # Quick failure detection for the multihomed run (RFC 9260 §8.2 path errors, §15 tunables).
    sysctl -qw net.sctp.rto_min=200 net.sctp.rto_max=1000 net.sctp.rto_initial=500 \
        net.sctp.path_max_retrans=2 net.sctp.hb_interval=500
    lab_step multihomed "${peer[@]}" server --port 5003 --bidir -n 2000000 -l 1000 --rate 500000 --verify --timeout 90 \
        --ready "$LAB_FLAGS/s3.ready" --out multihomed.json || rc=1
else
    lab_wait s1.ready 120 && lab_step raw "${peer[@]}" client --connect "$LAB_PEER_IP" --port 5001 "${common[@]}" --out raw.json || rc=1
    lab_wait s2.ready 120 && lab_step udp "${peer[@]}" client --connect "$LAB_PEER_IP" --port 5002 --udp "${common[@]}" --out udp.json || rc=1
    sysctl -qw net.sctp.udp_port=0 net.sctp.encap_port=0
    sysctl -qw net.sctp.rto_min=200 net.sctp.rto_max=1000 net.sctp.rto_initial=500 \
        net.sctp.path_max_retrans=2 net.sctp.hb_interval=500
    lab_wait s3.ready 120 || rc=1
    # mh.started (association up) tells the host to fail g1's br0 path 1 s later.
    lab_step multihomed "${peer[@]}" client --connect "$LAB_PEER_IP" --port 5003 --bidir -n 2000000 -l 1000 --rate 500000 --verify --timeout 90 \
        --started "$LAB_FLAGS/mh.started" --out multihomed.json || rc=1
fi
cat /proc/net/sctp/snmp >sctp-snmp.txt 2>&1 || true
exit "$rc"
