#!/bin/bash
# shellcheck disable=SC2153 # LAB_ADDR come from the guest's /init
# g1: 1. one siw `rping -s -V` per size for softrnic's AF_XDP client; 2. siw's `rping -c -V`
# per size against softrnic's AF_XDP server at 10.99.0.11:7175 (the address softrnic's own
# stack takes on the host's veth, see host.sh).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../../guest/lab-guest.sh
. /lab/lib/lab-guest.sh
XDP_ADDR=10.99.0.11
rc=0
for size in 64 65535; do
    rping -s -V -v -S 65535 -a "$LAB_ADDR" -p 7174 >"rping-server-$size.log" 2>&1 &
    pid=$!
    lab_wait_listen 7174 30 || true
    lab_signal "rping.$size.ready"
    lab_wait "rping.$size.done" 120 || rc=1
    src=0
    lab_step "rping-s-$size" timeout 20 tail --pid="$pid" -f /dev/null || { kill -9 "$pid" 2>/dev/null || true; src=124; }
    [[ $src -eq 0 ]] && { wait "$pid" || src=$?; }
    tail -n 2 "rping-server-$size.log" | cut -c1-100
    glog "rping -s (softrnic AF_XDP client, size $size): exit status $src"
    [[ $src -eq 0 ]] || rc=1
done
for size in 64 65535; do
    lab_wait "xdp.$size.ready" 120 || { rc=1; break; }
    crc=0
    lab_step "rping-c-S$size" timeout 60 rping -c -V -v -C 10 -S "$size" -a "$XDP_ADDR" -p 7175 \
        >"rping-client-$size.log" 2>&1 || crc=$?
    tail -n 2 "rping-client-$size.log" | cut -c1-100
    lab_signal "xdp.$size.done" "$crc"
    [[ $crc -eq 0 ]] || rc=1
done
lab_wait host.exit 60 || true
exit "$rc"
