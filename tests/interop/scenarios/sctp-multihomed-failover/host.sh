#!/bin/bash
# Host side of sctp-multihomed-failover: a multihomed sctp-perf client; g1's br0 path fails 2 s in.
set -uo pipefail
S=${LAB_SOFTRNIC:?}
"$S" sctp-perf --help >/dev/null 2>&1 || { echo "FAIL: $S has no sctp-perf command"; exit 1; }
"$LAB_TOOLS/wait-flag" g1.ready 150 || exit 1
"$LAB_TOOLS/lab-path" down 1 0 2 &
fail_pid=$!
rc=0
# Quick failure detection (RFC 9260 §16 protocol parameters lowered for the demo).
args=(-c "$LAB_G1_IP,$LAB_G1_IP1" -B "$LAB_HOST_IP,$LAB_HOST_IP1" -p 5003 -t 8 -l 1000 --verify -i 1
    --rto-min 200 --rto-max 1000 --rto-initial 500 --hb-interval 500 --path-max-retrans 2)
echo "== sctp-perf ${args[*]}"
"$S" sctp-perf "${args[@]}" >failover.txt 2>&1 || { echo "FAIL: sctp-perf exit status $?"; rc=1; }
wait "$fail_pid" || rc=1
cat failover.txt
exit "$rc"
