#!/usr/bin/env bash
# Host side of siw-accept-race: RACE_N rping clients without and RACE_N with the first-FPDU
# hold; writes race.txt. Exit 1 when any run with the hold failed.
set -euo pipefail
n=${RACE_N:-20}
"$LAB_TOOLS/wait-flag" rping.ready 120 >/dev/null || exit 1
run() { # label, extra args...
    local label=$1 ok=0 i rc
    shift
    for ((i = 1; i <= n; i++)); do
        rc=0
        "$LAB_SOFTRNIC" rping -c -V -C 1 -S 64 -a "$LAB_G1_IP" -p 7174 --timeout 5 "$@" \
            >"$label-$i.log" 2>&1 || rc=$?
        [[ $rc -eq 0 ]] && ok=$((ok + 1))
        echo "$label run $i: exit status $rc $( [[ $rc -eq 0 ]] || tail -n 1 "$label-$i.log")"
        sleep 0.2
    done
    echo "$label: $ok/$n completed" | tee -a race.txt
    [[ $ok -eq $n ]]
}
: >race.txt
run no-delay --first-fpdu-delay-ms 0 || true
run profile-siw --profile siw
