#!/bin/bash
# shellcheck disable=SC2153 # LAB_ADDR come from the guest's /init
# g1: one siw `rping -s -V -S 65535` per case. softrnic's client advertises an invalid buffer,
# so siw's RDMA Read or Write is refused with a Terminate. Per case siw must have taken that
# Terminate (its kernel log line "siw: got TERMINATE. layer L, type T, code C", in siw's own
# reading of the control word: RDMAP Remote Protection shows as layer 1 type 0, DDP Tagged
# Buffer as layer 1 type 1; codes 0 Invalid STag, 1 Base or bounds), and rping must show the
# operation ended: for the Reads (cases 1, 2) "cq completion failed" or "wait for
# RDMA_READ_COMPLETE", since a Read cannot complete without its response; for the Writes (3, 4)
# that or a disconnect, since an RDMA Write has no response and siw completes it once sent,
# and siw's rping may already wait for the next advertisement when the Terminate arrives.
# rping's exit status is no evidence: its server returns 0 whenever the disconnect came first.
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
    lab_reap "$pid" 20
    src=$LAB_REAP_STATUS
    cut -c1-100 "rping-server-$i.log" | tail -n 4
    # The i-th Terminate siw took, and the cause this case must produce.
    want=(x "layer 1, type 0, code 0" "layer 1, type 0, code 1" "layer 1, type 1, code 0"
        "layer 1, type 1, code 1")
    lab_siw_terminate_is "$i" "${want[$i]}" || rc=1
    ended='cq completion failed|wait for RDMA_(READ|WRITE)_COMPLETE'
    if ((i > 2)); then ended="$ended|DISCONNECT EVENT"; fi
    if grep -qE "$ended" "rping-server-$i.log"; then
        glog "case $i: siw rping -s saw the operation end (exit status $src)"
    else
        glog "case $i: siw rping -s did not see the operation end (exit status $src)"
        rc=1
    fi
done
dmesg | grep -i siw | tail -n 20 || true
exit "$rc"
