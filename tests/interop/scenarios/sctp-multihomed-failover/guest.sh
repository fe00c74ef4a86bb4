#!/bin/bash
# g1: multihomed kernel SCTP server (wildcard bind: eth0 and eth1 announced); see scenario.sh.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../../guest/lab-guest.sh
. /lab/lib/lab-guest.sh
modprobe sctp
lab_eth1_up
# Quick failure detection on the guest's side too (RFC 9260 §8.2, §16 protocol parameters).
sysctl -qw net.sctp.rto_min=200 net.sctp.rto_max=1000 net.sctp.rto_initial=500 \
    net.sctp.path_max_retrans=2 net.sctp.hb_interval=500
rc=0
lab_step failover python3 /lab/lib/sctp_peer.py server --proto sprf --port 5003 --recv -n 0 --timeout 60 \
    --ready "$LAB_FLAGS/g1.ready" --out failover.json || rc=1
cat /proc/net/sctp/snmp >sctp-snmp.txt 2>&1 || true
exit "$rc"
