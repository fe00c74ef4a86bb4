#!/bin/bash
# Host side of sctp-kernel-to-softrnic: two softrnic sctp-perf servers in turn (raw IP, then UDP);
# the guest client sends the test parameters (sctp-perf's PARAMS message).
set -uo pipefail
S=${LAB_SOFTRNIC:?}
"$S" sctp-perf --help >/dev/null 2>&1 || { echo "FAIL: $S has no sctp-perf command"; exit 1; }
rc=0
run() { # run N NAME ARGS...: server N, flag hN.ready once it is up
    local n=$1 name=$2 pid
    shift 2
    echo "== run $n ($name): sctp-perf -s $*"
    "$S" sctp-perf -s "$@" >"$name.txt" 2>&1 &
    pid=$!
    sleep 1
    touch "$LAB_FLAGS/h$n.ready"
    wait "$pid" || { echo "FAIL: sctp-perf ($name) exit status $?"; rc=1; }
    cat "$name.txt"
}
run 1 raw -B "$LAB_HOST_IP" -p 5001
run 2 udp -B "$LAB_HOST_IP" -p 5002 --udp-encap --udp-port 9899
exit "$rc"
