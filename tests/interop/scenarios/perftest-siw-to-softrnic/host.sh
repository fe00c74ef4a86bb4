#!/usr/bin/env bash
# Host side of perftest-siw-to-softrnic: one `softrnic <tool> -R` server per line of runs.sh;
# raises <tag>.ready once it listens, then waits for its exit and for the guest's client
# (flag <tag>.done). Exit 1 when a run expected "ok" failed on either side; runs expected
# "blocked" are written to expected.txt with what happened.
set -euo pipefail
# shellcheck source=../../tools/perftest-check.sh
. "$LAB_TOOLS/perftest-check.sh"
# shellcheck source-path=SCRIPTDIR source=runs.sh
. "$LAB_SCENARIO_DIR/runs.sh"
rc=0
: >expected.txt
while read -r tag tool port size iters expect opts; do
    log=$tag.log
    # shellcheck disable=SC2086 # the options are words
    timeout "$(($(pt_limit "$expect") + 20))" "$LAB_SOFTRNIC" "${tool//_/-}" -R -p "$port" \
        -n "$iters" -s "$size" $opts >"$log" 2>&1 &
    pt_serve "$tag" "$port" "$!" "$log"
    src=$PT_SRC crc=$PT_CRC
    echo "== $tag${opts:+ ($opts)}: softrnic ${tool//_/-} server exit status $src, siw ib_$tool client exit status $crc (expected $expect)"
    grep -E '^ [0-9]' "$log" || true
    if [[ $expect == ok ]]; then
        [[ $src == 0 && $crc == 0 ]] || { echo "FAIL: $tag"; tail -n 5 "$log"; rc=1; }
    else
        echo "note: $tag expected to block (RFC 5044 §7.1.2, see lib/perftest-runs.sh): server $src, client $crc$([[ $src == 0 && $crc == 0 ]] && echo ' - it passed after all')" | tee -a expected.txt
    fi
done <<<"$(pt_runs)"
exit "$rc"
