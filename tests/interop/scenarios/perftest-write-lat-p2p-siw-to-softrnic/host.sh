#!/usr/bin/env bash
# Host side of perftest-write-lat-p2p-siw-to-softrnic: one `softrnic write-lat -R --p2p`
# server per line of runs.sh; raises <tag>.ready once it listens, then waits for its exit and
# for the guest's client (flag <tag>.done). Exit 1 when a run failed on either side or the
# server did not report its result line.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=runs.sh
. "$LAB_SCENARIO_DIR/runs.sh"
rc=0
while read -r tag port size iters; do
    log=$tag.log
    timeout "$((PT_LIMIT + 20))" "$LAB_SOFTRNIC" write-lat -R --p2p -p "$port" \
        -n "$iters" -s "$size" >"$log" 2>&1 &
    pid=$!
    for _ in $(seq 100); do grep -q "Waiting for client" "$log" && break; sleep 0.05; done
    echo "$port" >"$LAB_FLAGS/$tag.ready"
    src=0
    wait "$pid" || src=$?
    for _ in $(seq 600); do [[ -e $LAB_FLAGS/$tag.done ]] && break; sleep 0.1; done
    crc=$(cat "$LAB_FLAGS/$tag.done" 2>/dev/null || echo none)
    echo "== $tag: softrnic write-lat server exit status $src, siw ib_write_lat client exit status $crc"
    grep -E '^ MPA ' "$log" || true
    grep -E "^ $size +$iters " "$log" || { echo "FAIL: $tag: no result line from softrnic"; rc=1; }
    [[ $src == 0 && $crc == 0 ]] || { echo "FAIL: $tag"; tail -n 5 "$log"; rc=1; }
done <<<"$(pt_runs)"
exit "$rc"
