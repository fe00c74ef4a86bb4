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
lab_rping_servers "softrnic AF_XDP client" 64 65535 || rc=1
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
