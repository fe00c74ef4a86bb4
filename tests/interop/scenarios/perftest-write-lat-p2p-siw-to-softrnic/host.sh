#!/usr/bin/env bash
# Host side of perftest-write-lat-p2p-siw-to-softrnic: one `softrnic write-lat -R --p2p`
# server per line of runs.sh; raises <tag>.ready once it listens, then waits for its exit and
# for the guest's client (flag <tag>.done). Exit 1 when a run failed on either side or the
# server did not report its result line.
set -euo pipefail
# shellcheck source=../../tools/perftest-check.sh
. "$LAB_TOOLS/perftest-check.sh"
# shellcheck source-path=SCRIPTDIR source=runs.sh
. "$LAB_SCENARIO_DIR/runs.sh"
rc=0
while read -r tag port size iters; do
    log=$tag.log
    timeout "$((PT_LIMIT + 20))" "$LAB_SOFTRNIC" write-lat -R --p2p -p "$port" \
        -n "$iters" -s "$size" >"$log" 2>&1 &
    pt_serve "$tag" "$port" "$!" "$log"
    src=$PT_SRC crc=$PT_CRC
    echo "== $tag: softrnic write-lat server exit status $src, siw ib_write_lat client exit status $crc"
    grep -E '^ MPA ' "$log" || true
    grep -E "^ $size +$iters " "$log" || { echo "FAIL: $tag: no result line from softrnic"; rc=1; }
    [[ $src == 0 && $crc == 0 ]] || { echo "FAIL: $tag"; tail -n 5 "$log"; rc=1; }
done <<<"$(pt_runs)"
exit "$rc"
