#!/bin/bash
# shellcheck disable=SC2153 # LAB_ADDR come from the guest's /init
# g1: rping server; g2: rping client (waits for g1's "rping.ready" flag). Also the guests of
# siw-variant-siw, on a siw variant image: the host names the variant in the flag "variant", and
# with MPA revision 1 siw's own rping cannot finish (see that scenario.sh).
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
        variant=$(cat "$LAB_FLAGS/variant" 2>/dev/null || echo unknown)
        if [[ $rc -ne 0 && $variant =~ ^(mpa-rev1|t404)$ ]] && grep -q "post send error" rping-server.log; then
            echo "expected for MPA revision 1 ($variant): siw's rping server has no RDMA Read credit"
            rc=0
        fi
        exit "$rc"
        ;;
    g2)
        lab_wait rping.ready 120
        rc=0
        lab_step rping-client timeout 90 rping -c -V -C 3 -a "$LAB_PEER_IP" -p "$PORT" || rc=$?
        echo "rping -c exit status $rc"
        variant=$(cat "$LAB_FLAGS/variant" 2>/dev/null || echo unknown)
        [[ ! $variant =~ ^(mpa-rev1|t404)$ ]] || rc=0 # the server ends the run (see scenario.sh)
        exit "$rc"
        ;;
esac
