#!/usr/bin/env bash
# Host side of perftest-xdp-to-siw: the AF_XDP veth (tools/xdp-host.sh), then for each line
# of runs.sh: wait for siw's server (<tag>.ready), run `softrnic <tool> -R --profile siw` over
# AF_XDP against it, raise <tag>.host with the client's exit status and wait for the
# server's (<tag>.done). Exit 1 when a run failed on either side.
set -uo pipefail
# shellcheck source=../../tools/xdp-host.sh
. "$LAB_TOOLS/xdp-host.sh"
# shellcheck source-path=SCRIPTDIR source=runs.sh
. "$LAB_SCENARIO_DIR/runs.sh"
rc=0
while read -r tag tool port size iters _expect; do
    "$LAB_TOOLS/wait-flag" "$tag.ready" 150 >/dev/null || { echo "FAIL: $tag: no server"; rc=1; break; }
    log=$tag.log
    crc=0
    # shellcheck disable=SC2086 # options are words
    xdp_run "$log" "${tool//_/-}" -R --profile siw -p "$port" -n "$iters" -s "$size" \
        "$LAB_G1_IP" $XDP || crc=$?
    echo "$crc" >"$LAB_FLAGS/$tag.host"
    for _ in $(seq 600); do [[ -e $LAB_FLAGS/$tag.done ]] && break; sleep 0.1; done
    src=$(cat "$LAB_FLAGS/$tag.done" 2>/dev/null || echo none)
    echo "== $tag: softrnic ${tool//_/-} (AF_XDP) client exit status $crc, siw ib_$tool server exit status $src"
    grep -E '^ [0-9]' "$log" || true
    [[ $crc == 0 && $src == 0 ]] || { echo "FAIL: $tag"; tail -n 5 "$log"; rc=1; }
    sleep 0.3
done <<<"$(pt_runs)"
exit "$rc"
