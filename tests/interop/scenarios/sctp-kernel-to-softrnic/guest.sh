#!/bin/bash
# g1: kernel SCTP client towards the host's softrnic sctp-perf servers; see scenario.sh.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../../guest/lab-guest.sh
. /lab/lib/lab-guest.sh
peer=(python3 /lab/lib/sctp_peer.py client --proto sprf --connect "$LAB_HOST_IP" --bidir -n 262144 -l 1000 --verify --timeout 60)
modprobe sctp
rc=0
lab_wait h1.ready 120 && lab_step raw "${peer[@]}" --port 5001 --out raw.json || rc=1
lab_wait h2.ready 120 && lab_step udp "${peer[@]}" --port 5002 --udp --out udp.json || rc=1
cat /proc/net/sctp/snmp >sctp-snmp.txt 2>&1 || true
exit "$rc"
