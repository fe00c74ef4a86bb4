#!/bin/bash
# shellcheck disable=SC2153 # LAB_HOST_IP comes from the guest's /init
# g1: one inval-peer run per case (window2, fastreg, window1, region: the host's order).
# Each must end with the connection closed by the host after the access it must refuse, and
# siw must have taken the host's Terminate, in siw's own low-bit-first reading of the control
# word (its kernel log line "siw: got TERMINATE. layer L, type T, code C"): the DDP Tagged
# Buffer "Invalid STag" of the refused Write as layer 1 type 1 code 0 (cases 1, 2), the
# RDMAP Remote Protection "STag cannot be Invalidated" (0x09) as layer 1 type 0 code 9
# (cases 3, 4).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../../guest/lab-guest.sh
. /lab/lib/lab-guest.sh
lab_wait target.ready 300 || exit 1
rc=0
want=(x "layer 1, type 1, code 0" "layer 1, type 1, code 0" "layer 1, type 0, code 9"
    "layer 1, type 0, code 9")
for i in 1 2 3 4; do
    lab_step "case-$i" timeout 120 /lab/lib/inval-peer -a "$LAB_HOST_IP" -p 7180 -t 60 \
        >"inval-peer-$i.log" 2>&1 || rc=1
    cat "inval-peer-$i.log"
    sleep 0.5
    lab_siw_terminate_is "$i" "${want[$i]}" || rc=1
done
dmesg | grep -i siw | tail -n 20 || true
exit "$rc"
