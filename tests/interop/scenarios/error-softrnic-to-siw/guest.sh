#!/bin/bash
# shellcheck disable=SC2153 # LAB_HOST_IP come from the guest's /init
# g1: siw's rping client, once per injection case (host flag case.<n>.ready). The host's
# invalid RDMA operation makes siw terminate the connection, so rping fails by design; its
# exit status and output are logged, the verdict is the host's and the capture's.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../../guest/lab-guest.sh
. /lab/lib/lab-guest.sh
for i in 1 2 3 4; do
    lab_wait "case.$i.ready" 120 || exit 1
    crc=0
    lab_step "rping-c-case$i" timeout 30 rping -c -V -C 3 -S 4096 -a "$LAB_HOST_IP" -p 7174 \
        >"rping-client-$i.log" 2>&1 || crc=$?
    cut -c1-100 "rping-client-$i.log" | tail -n 4
    glog "case $i ($(cat "$LAB_FLAGS/case.$i.ready")): siw rping -c exit status $crc (failure expected)"
    lab_signal "case.$i.done" "$crc"
done
dmesg | grep -i siw | tail -n 20 || true
lab_wait host.exit 60 || true
