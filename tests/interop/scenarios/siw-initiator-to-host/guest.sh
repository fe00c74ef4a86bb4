#!/bin/bash
# shellcheck disable=SC2153 # LAB_HOST_IP come from the guest's /init
# g1: rping client towards the host end of the lab network. The outcome of rping depends on
# the host side (the default stand-in rejects the connection), so rping's exit status is only
# logged; the host command and the capture check decide the verdict.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../../guest/lab-guest.sh
. /lab/lib/lab-guest.sh
lab_wait host.started 60
rc=0
lab_step rping-client timeout 30 rping -c -v -C 1 -a "$LAB_HOST_IP" -p 7174 || rc=$?
echo "rping -c exit status $rc (not part of the verdict)"
# Give the host side a moment to finish with the connection before powering off.
lab_wait host.exit 30 || true
