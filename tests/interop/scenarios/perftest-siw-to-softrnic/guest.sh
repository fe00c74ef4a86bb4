#!/bin/bash
# shellcheck disable=SC2153 # LAB_HOST_IP come from the guest's /init
# g1: siw's perftest clients (ib_<tool> -R) against softrnic's servers on the host, one run per
# line of runs.sh. The host raises <tag>.ready once its server listens; the client's exit
# status goes to flag <tag>.done. A run expected "ok" that fails fails the guest.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../../guest/lab-guest.sh
. /lab/lib/lab-guest.sh
# shellcheck source-path=SCRIPTDIR source=runs.sh
. /lab/scenario/runs.sh
rc=0
while read -r tag tool port size iters expect opts; do
    lab_wait "$tag.ready" 120 || { rc=1; break; }
    crc=0
    # shellcheck disable=SC2086 # the options are words
    lab_step "$tag" timeout "$(pt_limit "$expect")" "ib_$tool" -R -F -d siw0 -p "$port" \
        -n "$iters" -s "$size" $opts "$LAB_HOST_IP" >"$tag.log" 2>&1 || crc=$?
    tail -n 3 "$tag.log" | cut -c1-120
    lab_signal "$tag.done" "$crc"
    if [[ $expect == ok && $crc -ne 0 ]]; then
        glog "FAIL: ib_$tool -s $size exit status $crc"
        rc=1
    fi
done <<<"$(pt_runs)"
lab_wait host.exit 120 || true
exit "$rc"
