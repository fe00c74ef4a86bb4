#!/usr/bin/env bash
# Host side of perftest-softrnic-to-siw: for each line of runs.sh, waits until siw's server
# listens (<tag>.ready), runs `softrnic <tool> -R --profile siw` against it, raises <tag>.host
# with the client's exit status and waits for the server's (<tag>.done). Exit 1 when a run
# failed on either side.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=runs.sh
. "$LAB_SCENARIO_DIR/runs.sh"
rc=0
while read -r tag tool port size iters expect opts; do
    "$LAB_TOOLS/wait-flag" "$tag.ready" 150 >/dev/null || { echo "FAIL: $tag: no server"; rc=1; break; }
    log=$tag.log
    crc=0
    # shellcheck disable=SC2086 # the options are words
    timeout "$(pt_limit "$expect")" "$LAB_SOFTRNIC" "${tool//_/-}" -R --profile siw -p "$port" -n "$iters" \
        -s "$size" $opts "$LAB_G1_IP" >"$log" 2>&1 || crc=$?
    echo "$crc" >"$LAB_FLAGS/$tag.host"
    for _ in $(seq 600); do [[ -e $LAB_FLAGS/$tag.done ]] && break; sleep 0.1; done
    src=$(cat "$LAB_FLAGS/$tag.done" 2>/dev/null || echo none)
    echo "== $tag${opts:+ ($opts)}: softrnic ${tool//_/-} client exit status $crc, siw ib_$tool server exit status $src"
    grep -E '^ [0-9]' "$log" || true
    [[ $crc == 0 && $src == 0 ]] || { echo "FAIL: $tag"; tail -n 5 "$log"; rc=1; }
done <<<"$(pt_runs)"
exit "$rc"
