#!/bin/bash
# g1: siw's perftest servers (ib_<tool> -R) for softrnic's clients on the host, one run per
# line of runs.sh: raises <tag>.ready once the server listens, <tag>.done with its exit
# status, then waits for the host's client (<tag>.host) before the next run.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../../guest/lab-guest.sh
. /lab/lib/lab-guest.sh
# shellcheck source-path=SCRIPTDIR source=runs.sh
. /lab/scenario/runs.sh
rc=0
while read -r tag tool port size iters expect opts; do
    # shellcheck disable=SC2086 # the options are words
    "ib_$tool" -R -F -d siw0 -p "$port" -n "$iters" -s "$size" $opts >"$tag.log" 2>&1 &
    pid=$!
    lab_wait_listen "$port" 30 || true
    lab_signal "$tag.ready" "$port"
    src=0
    lab_step "$tag" timeout "$(pt_limit "$expect")" tail --pid="$pid" -f /dev/null || kill -9 "$pid" 2>/dev/null || true
    wait "$pid" || src=$?
    tail -n 3 "$tag.log" | cut -c1-120
    lab_signal "$tag.done" "$src"
    if [[ $src -ne 0 ]]; then
        glog "FAIL: ib_$tool -s $size server exit status $src"
        rc=1
    fi
    lab_wait "$tag.host" 60 || { rc=1; break; }
done <<<"$(pt_runs)"
lab_wait host.exit 60 || true
exit "$rc"
