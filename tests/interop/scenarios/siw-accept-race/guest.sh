#!/bin/bash
# shellcheck disable=SC2153 # LAB_ADDR come from the guest's /init
# g1: siw's persistent rping server for the host's repeated clients, until the host is done.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../../guest/lab-guest.sh
. /lab/lib/lab-guest.sh
rping -s -P -V -S 65535 -a "$LAB_ADDR" -p 7174 >rping-server.log 2>&1 &
pid=$!
lab_wait_listen 7174 30
lab_signal rping.ready
rc=0
lab_wait host.exit 570 || rc=1
kill "$pid" 2>/dev/null || true
wait "$pid" 2>/dev/null || true
tail -n 20 rping-server.log
exit "$rc"
