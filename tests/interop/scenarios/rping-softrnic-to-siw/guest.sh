#!/bin/bash
# shellcheck disable=SC2153 # LAB_ADDR come from the guest's /init
# g1: one siw `rping -s -V -S 65535` per size; raises rping.<size>.ready once it listens and
# waits for the host's client (flag rping.<size>.done) and for the server to exit.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../../guest/lab-guest.sh
. /lab/lib/lab-guest.sh
rc=0
for size in 64 4096 65535; do
    rping -s -V -v -S 65535 -a "$LAB_ADDR" -p 7174 >"rping-server-$size.log" 2>&1 &
    pid=$!
    lab_wait_listen 7174 30 || true
    lab_signal "rping.$size.ready"
    lab_wait "rping.$size.done" 120 || rc=1
    src=0
    lab_step "rping-s-$size" timeout 20 tail --pid="$pid" -f /dev/null || { kill -9 "$pid" 2>/dev/null || true; src=124; }
    [[ $src -eq 0 ]] && { wait "$pid" || src=$?; }
    tail -n 2 "rping-server-$size.log" | cut -c1-100
    glog "rping -s (client size $size): exit status $src"
    [[ $src -eq 0 ]] || rc=1
done
exit "$rc"
