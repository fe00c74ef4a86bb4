#!/usr/bin/env bash
# Host side of rping-softrnic-to-siw: for each size, wait for the guest's rping server and run
# softrnic's rping client against it; report each exit status in rping.<size>.done.
set -euo pipefail
rc=0
for size in 64 4096 65535; do
    "$LAB_TOOLS/wait-flag" "rping.$size.ready" 120 || exit 1
    src=0
    "$LAB_SOFTRNIC" rping -c -V -v -C 10 -S "$size" -a "$LAB_G1_IP" -p 7174 --profile siw \
        --timeout 30 >"client-$size.log" 2>&1 || src=$?
    echo "softrnic rping -c -V -C 10 -S $size --profile siw: exit status $src"
    tail -n 2 "client-$size.log" | cut -c1-120
    echo "$src" >"$LAB_FLAGS/rping.$size.done"
    [[ $src -eq 0 ]] || rc=1
done
exit "$rc"
