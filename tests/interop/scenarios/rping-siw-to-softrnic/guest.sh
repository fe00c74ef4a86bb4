#!/bin/bash
# shellcheck disable=SC2153 # LAB_HOST_IP come from the guest's /init
# g1: siw's rping client against softrnic's rping server on the host, one run per size
# (the host raises rping.<size>.ready when its server listens). Each client's exit status
# goes to the flag rping.<size>.done; any non-zero status fails the guest.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../../guest/lab-guest.sh
. /lab/lib/lab-guest.sh
rc=0
for size in 64 4096 65535; do
    lab_wait "rping.$size.ready" 120 || { rc=1; break; }
    crc=0
    lab_step "rping-c-S$size" timeout 60 rping -c -V -v -C 10 -S "$size" -a "$LAB_HOST_IP" -p 7174 \
        >"rping-client-$size.log" 2>&1 || crc=$?
    tail -n 2 "rping-client-$size.log" | cut -c1-100
    lab_signal "rping.$size.done" "$crc"
    [[ $crc -eq 0 ]] || rc=1
done
lab_wait host.exit 60 || true
exit "$rc"
