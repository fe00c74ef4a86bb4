#!/bin/bash
# shellcheck disable=SC2153 # LAB_ADDR come from the guest's /init
# g1: persistent rping server (-P) on 7174 until the host side has finished. The host side
# sends MPA Requests and closes after the Reply, so rping's own connections fail by design;
# the verdict comes from the host command and the capture check.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../../guest/lab-guest.sh
. /lab/lib/lab-guest.sh
rping -s -P -v -C 1 -a "$LAB_ADDR" -p 7174 >rping-server.log 2>&1 &
pid=$!
lab_wait_listen 7174 30
lab_signal rping.ready
rc=0
lab_wait host.exit 150 || rc=1
sleep 0.5
kill "$pid" 2>/dev/null || true
wait "$pid" 2>/dev/null || true
cat rping-server.log
exit "$rc"
