#!/usr/bin/env bash
# Host side of error-softrnic-to-siw: one injecting softrnic rping server per case, with the
# exit status expected from siw 6.1: 3 (the expected Terminate) for the Writes, 5 (the expected
# error with Layer and Error Type exchanged, siw's bitfield layout) for the Read Requests.
set -euo pipefail
rc=0
i=0
for case in "write bad-stag 3" "write out-of-bounds 3" "read bad-stag 5" "read out-of-bounds 5"; do
    read -r at inject want <<<"$case"
    i=$((i + 1))
    log=server-$i-$at-$inject.log
    "$LAB_SOFTRNIC" rping -s -a "$LAB_HOST_IP" -p 7174 --timeout 60 \
        --inject "$inject" --inject-at "$at" >"$log" 2>&1 &
    pid=$!
    for _ in $(seq 100); do ss -Hltn 'sport = :7174' | grep -q . && break; sleep 0.05; done
    echo "$at $inject" >"$LAB_FLAGS/case.$i.ready"
    src=0
    wait "$pid" || src=$?
    cat "$log"
    echo "softrnic rping -s --inject $inject --inject-at $at: exit status $src ($want expected)"
    [[ $src -eq $want ]] || rc=1
    "$LAB_TOOLS/wait-flag" "case.$i.done" 60 >/dev/null || rc=1
done
exit "$rc"
