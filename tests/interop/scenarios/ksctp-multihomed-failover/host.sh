#!/bin/bash
# Host side of ksctp-multihomed-failover: a multihomed write-bw server on softrnic's own SCTP;
# g1's br0 path fails 2 s after g1's client starts.
set -uo pipefail
S=${LAB_SOFTRNIC:?}
rc=0
args=(write-bw -s 65536 -D 8 --transport sctp --bind "$LAB_HOST_IP,$LAB_HOST_IP1")
echo "== ${args[*]}"
timeout 120 "$S" "${args[@]}" </dev/null >failover.txt 2>&1 &
pid=$!
sleep 1
touch "$LAB_FLAGS/h1.ready"
# The path fails 2 s after g1's client starts (the 8 s run is then under way).
{ "$LAB_TOOLS/wait-flag" g1.go 240 && "$LAB_TOOLS/lab-path" down 1 0 2; } &
fail_pid=$!
wait "$pid" || { echo "FAIL: write-bw server exit status $?"; rc=1; }
wait "$fail_pid" || rc=1
cat failover.txt
exit "$rc"
