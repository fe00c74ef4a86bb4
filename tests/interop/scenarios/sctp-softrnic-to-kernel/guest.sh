#!/bin/bash
# g1: kernel SCTP servers for the host's softrnic sctp-perf client; see scenario.sh.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../../guest/lab-guest.sh
. /lab/lib/lab-guest.sh
peer=(python3 /lab/lib/sctp_peer.py server --proto sprf --bidir -n 0 --timeout 90)
modprobe sctp
rc=0
lab_step raw "${peer[@]}" --port 5001 --ready "$LAB_FLAGS/g1.ready" --out raw.json || rc=1
lab_step udp "${peer[@]}" --port 5002 --udp --ready "$LAB_FLAGS/g2.ready" --out udp.json || rc=1
cat /proc/net/sctp/snmp >sctp-snmp.txt 2>&1 || true
exit "$rc"
