#!/usr/bin/env bash
# Host side of perftest-siw-to-xdp: the AF_XDP veth (tools/xdp-host.sh), then one
# `softrnic <tool> -R` server over AF_XDP per line of runs.sh; raises <tag>.ready once it
# listens, then waits for its exit and for the guest's client (<tag>.done). Exit 1 when a run
# failed on either side.
set -uo pipefail
# shellcheck source=../../tools/xdp-host.sh
. "$LAB_TOOLS/xdp-host.sh"
# shellcheck source=../../tools/perftest-check.sh
. "$LAB_TOOLS/perftest-check.sh"
# shellcheck source-path=SCRIPTDIR source=runs.sh
. "$LAB_SCENARIO_DIR/runs.sh"
rc=0
while read -r tag tool port size iters _expect; do
    log=$tag.log
    # shellcheck disable=SC2086 # options are words
    xdp_run "$log" "${tool//_/-}" -R -p "$port" -n "$iters" -s "$size" $XDP &
    pt_serve "$tag" "$port" "$!" "$log"
    src=$PT_SRC crc=$PT_CRC
    echo "== $tag: softrnic ${tool//_/-} (AF_XDP) server exit status $src, siw ib_$tool client exit status $crc"
    grep -E '^ [0-9]' "$log" || true
    [[ $src == 0 && $crc == 0 ]] || { echo "FAIL: $tag"; tail -n 5 "$log"; rc=1; }
    sleep 0.3
done <<<"$(pt_runs)"
exit "$rc"
