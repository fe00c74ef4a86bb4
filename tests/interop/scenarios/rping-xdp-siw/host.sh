#!/usr/bin/env bash
# Host side of rping-xdp-siw (runs in the lab namespace): a veth pair on the lab bridge whose
# far end vx0 softrnic takes with AF_XDP; softrnic's rping client, then its server, over it.
set -uo pipefail
# shellcheck source=../../tools/xdp-host.sh
. "$LAB_TOOLS/xdp-host.sh"
rc=0
for size in 64 65535; do
    "$LAB_TOOLS/wait-flag" "rping.$size.ready" 120 || exit 1
    src=0
    # shellcheck disable=SC2086 # options are words
    xdp_run "client-$size.log" rping -c -V -v -C 10 -S "$size" -a "$LAB_G1_IP" -p 7174 \
        --profile siw --timeout 30 $XDP || src=$?
    echo "softrnic rping -c -V -C 10 -S $size --profile siw $XDP: exit status $src"
    grep -v "ping data" "client-$size.log" | tail -n 2 | cut -c1-120
    echo "$src" >"$LAB_FLAGS/rping.$size.done"
    [[ $src -eq 0 ]] || rc=1
    sleep 0.5
done
for size in 64 65535; do
    log=server-$size.log
    # shellcheck disable=SC2086
    xdp_run "$log" rping -s -V -v -p 7175 --timeout 90 $XDP &
    pid=$!
    # softrnic's own stack listens: the kernel's socket table does not show it.
    for _ in $(seq 50); do grep -q "listening\|waiting" "$log" 2>/dev/null && break; sleep 0.1; done
    sleep 0.5
    echo "$size" >"$LAB_FLAGS/xdp.$size.ready"
    src=0
    wait "$pid" || src=$?
    echo "softrnic rping -s $XDP (client size $size): exit status $src"
    grep -v "ping data" "$log" | tail -n 3 | cut -c1-120
    [[ $src -eq 0 ]] || rc=1
    for _ in $(seq 300); do [[ -e $LAB_FLAGS/xdp.$size.done ]] && break; sleep 0.1; done
    crc=$(cat "$LAB_FLAGS/xdp.$size.done" 2>/dev/null || echo none)
    echo "siw rping -c -V -C 10 -S $size: exit status $crc"
    [[ $crc == 0 ]] || rc=1
    sleep 0.5
done
exit "$rc"
