#!/usr/bin/env bash
# Host side of error-siw-to-softrnic: per case, wait for the guest's rping server, run an
# injecting softrnic rping client; each must exit 4 (expected Terminate sent, memory untouched).
set -euo pipefail
rc=0
i=0
for case in "read bad-stag" "read out-of-bounds" "write bad-stag" "write out-of-bounds"; do
    read -r at inject <<<"$case"
    i=$((i + 1))
    "$LAB_TOOLS/wait-flag" "case.$i.ready" 120 >/dev/null || exit 1
    src=0
    "$LAB_SOFTRNIC" rping -c -V -C 3 -S 4096 -a "$LAB_G1_IP" -p 7174 --profile siw --timeout 30 \
        --inject "$inject" --inject-at "$at" >"client-$i-$at-$inject.log" 2>&1 || src=$?
    cat "client-$i-$at-$inject.log"
    echo "softrnic rping -c --inject $inject --inject-at $at: exit status $src (4 expected)"
    [[ $src -eq 4 ]] || rc=1
    echo "$src" >"$LAB_FLAGS/case.$i.done"
done
exit "$rc"
