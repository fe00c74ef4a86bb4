#!/bin/bash
# shellcheck disable=SC2153 # LAB_ADDR come from the guest's /init
# g1: rping server; g2: rping client (waits for g1's "rping.ready" flag).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../../guest/lab-guest.sh
. /lab/lib/lab-guest.sh
PORT=7174
case $LAB_NAME in
    g1)
        rping -s -V -C 3 -a "$LAB_ADDR" -p "$PORT" >rping-server.log 2>&1 &
        pid=$!
        lab_wait_listen "$PORT" 30
        lab_signal rping.ready
        lab_step rping-server timeout 90 tail --pid="$pid" -f /dev/null || kill "$pid" 2>/dev/null || true
        rc=0
        wait "$pid" || rc=$?
        cat rping-server.log
        echo "rping -s exit status $rc"
        exit "$rc"
        ;;
    g2)
        lab_wait rping.ready 120
        rc=0
        lab_step rping-client timeout 90 rping -c -V -C 3 -a "$LAB_PEER_IP" -p "$PORT" || rc=$?
        echo "rping -c exit status $rc"
        exit "$rc"
        ;;
esac
