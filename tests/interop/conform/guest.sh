#!/bin/bash
# shellcheck disable=SC2153 # LAB_ADDR, LAB_HOST_IP, LAB_FLAGS come from the guest's /init
# g1 side of the conform-siw* scenarios (SCENARIO_GUEST_SCRIPT=conform/guest.sh): siw's stock
# rping as the application behind every case of `softrnic conform`.
#   1. peer as responder: a persistent rping server, `rping -s -P -p 7174` (flag siw.ready),
#      until the host's flag conform.responder.done;
#   2. peer as initiator: after the host's flag conform.listening, one `rping -c -C 1 -p 7175`
#      after the other (each under `timeout`, since rping -c may hang once the runner has
#      closed or refused), until the host's flag conform.done.
# Exit: 0 when both phases ran (the verdicts come from the host's reports).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../guest/lab-guest.sh
. /lab/lib/lab-guest.sh
rping -s -P -a "$LAB_ADDR" -p 7174 >rping-server.log 2>&1 &
pid=$!
lab_wait_listen 7174 30
lab_signal siw.ready
rc=0
lab_wait conform.responder.done 900 || rc=1
kill "$pid" 2>/dev/null || true
# Bounded: after a kernel crash (see check.sh) rping may never end, and `wait` would hang.
for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$pid" 2>/dev/null && glog "rping -s did not end" || wait "$pid" 2>/dev/null || true
tail -n 40 rping-server.log

if [[ $rc -eq 0 ]] && lab_wait conform.listening 60; then
    n=0
    t0=$(cut -d' ' -f1 /proc/uptime)
    while [[ ! -e $LAB_FLAGS/conform.done && ! -e $LAB_FLAGS/host.exit ]]; do
        n=$((n + 1))
        c=0
        timeout 20 rping -c -C 1 -a "$LAB_HOST_IP" -p 7175 >>rping-client.log 2>&1 || c=$?
        echo "rping -c run $n: exit status $c" >>rping-client.log
        sleep 0.3
    done
    t1=$(cut -d' ' -f1 /proc/uptime)
    echo "conform-initiator $n $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')" >>"$LAB_OUT/steps.txt"
    glog "$n rping -c runs"
    tail -n 60 rping-client.log
else
    rc=1
fi
exit "$rc"
