#!/bin/bash
# shellcheck disable=SC2153 # LAB_ADDR come from the guest's /init
# g1: one siw `rping -s -V -S 65535` per size; raises rping.<size>.ready once it listens and
# waits for the host's client (flag rping.<size>.done) and for the server to exit.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../../guest/lab-guest.sh
. /lab/lib/lab-guest.sh
rc=0
lab_rping_servers "softrnic client" 64 4096 65535 || rc=1
exit "$rc"
