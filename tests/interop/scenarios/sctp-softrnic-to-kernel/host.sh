#!/bin/bash
# Host side of sctp-softrnic-to-kernel: softrnic sctp-perf clients (raw IP, then UDP).
set -uo pipefail
S=${LAB_SOFTRNIC:?}
"$S" sctp-perf --help >/dev/null 2>&1 || { echo "FAIL: $S has no sctp-perf command"; exit 1; }
opts=(--bidir -n 262144 -l 1000 --verify)
rc=0
run() { # run N NAME ARGS...: wait for the guest's server N, then connect
    local n=$1 name=$2
    shift 2
    "$LAB_TOOLS/wait-flag" "g$n.ready" 150 || { rc=1; return; }
    echo "== run $n ($name): sctp-perf -c $*"
    "$S" sctp-perf -c "$@" >"$name.txt" 2>&1 || { echo "FAIL: sctp-perf ($name) exit status $?"; rc=1; }
    cat "$name.txt"
}
run 1 raw "$LAB_G1_IP" -B "$LAB_HOST_IP" -p 5001 "${opts[@]}"
run 2 udp "$LAB_G1_IP" -B "$LAB_HOST_IP" -p 5002 --udp-encap --udp-port 9899 "${opts[@]}"
exit "$rc"
