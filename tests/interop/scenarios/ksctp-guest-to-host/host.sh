#!/bin/bash
# Host side of ksctp-guest-to-host: softrnic over its own SCTP (raw IPv4); see scenario.sh.
set -uo pipefail
S=${LAB_SOFTRNIC:?}
T=(--transport sctp --bind "$LAB_HOST_IP")
rc=0
i=0
: >ksctp-results.txt
runs=()
list=$(grep -v -e '^#' -e '^$' "$LAB_SCENARIO_DIR/tests.txt")
# (no process substitution: the guest has no /dev/fd)
while IFS= read -r line; do runs+=("$line"); done <<<"$list"
[[ ${#runs[@]} -gt 0 ]] || { echo "no runs in tests.txt"; exit 1; }
# A: the guest's servers, our clients.
for run in "${runs[@]}"; do
    i=$((i + 1))
    name=${run%%|*}
    read -ra args <<<"${run#*|}"
    tool=${args[0]}
    opts=("${args[@]:1}")
    if [[ $tool == rping ]]; then client=("$S" rping -c -a "$LAB_G1_IP" "${opts[@]}" "${T[@]}")
    else client=("$S" "$tool" "$LAB_G1_IP" "${opts[@]}" "${T[@]}"); fi
    "$LAB_TOOLS/wait-flag" "a$i.ready" 240 || { echo "A $name client no-server" >>ksctp-results.txt; rc=1; continue; }
    echo "== A$i $name: ${client[*]}"
    r=0
    timeout 120 "${client[@]}" </dev/null >"a-$name.txt" 2>&1 || r=$?
    cat "a-$name.txt"
    echo "A $name client $r" >>ksctp-results.txt
    [[ $r -eq 0 ]] || rc=1
done
# B: our servers, the guest's clients.
i=0
for run in "${runs[@]}"; do
    i=$((i + 1))
    name=${run%%|*}
    read -ra args <<<"${run#*|}"
    tool=${args[0]}
    opts=("${args[@]:1}")
    if [[ $tool == rping ]]; then server=("$S" rping -s "${opts[@]}" "${T[@]}")
    else server=("$S" "$tool" "${opts[@]}" "${T[@]}"); fi
    echo "== B$i $name: ${server[*]}"
    timeout 150 "${server[@]}" </dev/null >"b-$name.txt" 2>&1 &
    pid=$!
    sleep 1
    touch "$LAB_FLAGS/b$i.ready"
    r=0
    wait "$pid" || r=$?
    cat "b-$name.txt"
    echo "B $name server $r" >>ksctp-results.txt
    [[ $r -eq 0 ]] || rc=1
done
cat ksctp-results.txt
exit "$rc"
