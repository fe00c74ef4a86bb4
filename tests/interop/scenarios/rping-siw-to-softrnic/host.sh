#!/usr/bin/env bash
# Host side of rping-siw-to-softrnic: one `softrnic rping -s -V` per size; raises
# rping.<size>.ready once listening, then waits for the guest's client.
set -euo pipefail
rc=0
for size in $RPING_SIZES; do
    log=server-$size.log
    "$LAB_SOFTRNIC" rping -s -V -v -a "$LAB_HOST_IP" -p 7174 --timeout 90 >"$log" 2>&1 &
    pid=$!
    for _ in $(seq 100); do ss -Hltn 'sport = :7174' | grep -q . && break; sleep 0.05; done
    echo "$size" >"$LAB_FLAGS/rping.$size.ready"
    src=0
    wait "$pid" || src=$?
    echo "softrnic rping -s (client size $size): exit status $src"
    tail -n 3 "$log"
    [[ $src -eq 0 ]] || rc=1
    # The guest's client must have validated the echo too.
    for _ in $(seq 300); do [[ -e $LAB_FLAGS/rping.$size.done ]] && break; sleep 0.1; done
    crc=$(cat "$LAB_FLAGS/rping.$size.done" 2>/dev/null || echo none)
    echo "siw rping -c -V -C 10 -S $size: exit status $crc"
    [[ $crc == 0 ]] || rc=1
done
exit "$rc"
