#!/bin/bash
# g1: one siw `rping -s -V -S 65535` per case. softrnic's client advertises an invalid buffer,
# so siw's RDMA Read or Write is refused with a Terminate; rping must report that the operation
# failed: "cq completion failed" or "wait for RDMA_READ_COMPLETE / RDMA_WRITE_COMPLETE" (its exit
# status is no evidence: rping's server returns 0 whenever the disconnect event came first).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../../guest/lab-guest.sh
. /lab/lib/lab-guest.sh
rc=0
for i in 1 2 3 4; do
    rping -s -V -v -S 65535 -a "$LAB_ADDR" -p 7174 >"rping-server-$i.log" 2>&1 &
    pid=$!
    lab_wait_listen 7174 30 || true
    lab_signal "case.$i.ready"
    lab_wait "case.$i.done" 120 || rc=1
    src=0
    if timeout 20 tail --pid="$pid" -f /dev/null; then wait "$pid" || src=$?; else
        kill -9 "$pid" 2>/dev/null || true; src=124; fi
    cut -c1-100 "rping-server-$i.log" | tail -n 4
    if grep -qE 'cq completion failed|wait for RDMA_(READ|WRITE)_COMPLETE' "rping-server-$i.log"; then
        glog "case $i: siw rping -s reported the failed RDMA operation (exit status $src)"
    else
        glog "case $i: siw rping -s did not report a failed RDMA operation (exit status $src)"
        rc=1
    fi
done
dmesg | grep -i siw | tail -n 20 || true
exit "$rc"
