#!/bin/bash
# g1: softrnic over the kernel's SCTP (--transport ksctp); see scenario.sh.
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=../../guest/lab-guest.sh
. /lab/lib/lab-guest.sh
S=/lab/lib/softrnic
# The kernel SCTP carrier says what it does in the logs (notifications, setup, closes).
export RUST_LOG=${RUST_LOG:-warn,stack::transport::ksctp=debug}
modprobe sctp || { glog "no sctp module"; exit 1; }
cd "$LAB_OUT" || exit 1
T=(--transport ksctp --bind "$LAB_ADDR")
# wait_sctp_listen PORT: until an SCTP endpoint has local port PORT (/proc/net/sctp/eps:
# LPORT is the 6th column), at most 20 s.
wait_sctp_listen() {
    local i
    for ((i = 0; i < 200; i++)); do
        awk -v p="$1" '$6 == p { f = 1 } END { exit !f }' /proc/net/sctp/eps 2>/dev/null && return 0
        sleep 0.1
    done
    glog "no SCTP endpoint on port $1"
    top -b -n 1 | head -15 >>top.txt 2>&1 || true
    return 1
}
rc=0
: >ksctp-results.txt
runs=()
list=$(grep -v -e '^#' -e '^$' /lab/scenario/tests.txt)
# (no process substitution: the guest has no /dev/fd)
while IFS= read -r line; do runs+=("$line"); done <<<"$list"
[[ ${#runs[@]} -gt 0 ]] || { echo "no runs in tests.txt"; exit 1; }
# A: our servers on kernel SCTP, the host's clients.
i=0
for run in "${runs[@]}"; do
    i=$((i + 1))
    name=${run%%|*}
    read -ra args <<<"${run#*|}"
    tool=${args[0]}
    opts=("${args[@]:1}")
    if [[ $tool == rping ]]; then server=("$S" rping -s "${opts[@]}" "${T[@]}"); port=7174
    else server=("$S" "$tool" "${opts[@]}" "${T[@]}"); port=18515; fi
    glog "A$i $name: ${server[*]}"
    timeout 150 "${server[@]}" </dev/null >"a-$name.txt" 2>&1 &
    pid=$!
    wait_sctp_listen "$port" || true
    lab_signal "a$i.ready"
    r=0
    wait "$pid" || r=$?
    cat "a-$name.txt"
    echo "A $name server $r" >>ksctp-results.txt
    [[ $r -eq 0 ]] || rc=1
done
# B: the host's servers, our clients on kernel SCTP.
i=0
for run in "${runs[@]}"; do
    i=$((i + 1))
    name=${run%%|*}
    read -ra args <<<"${run#*|}"
    tool=${args[0]}
    opts=("${args[@]:1}")
    if [[ $tool == rping ]]; then client=("$S" rping -c -a "$LAB_HOST_IP" "${opts[@]}" "${T[@]}")
    else client=("$S" "$tool" "$LAB_HOST_IP" "${opts[@]}" "${T[@]}"); fi
    lab_wait "b$i.ready" 300 || { echo "B $name client no-server" >>ksctp-results.txt; rc=1; continue; }
    glog "B$i $name: ${client[*]}"
    r=0
    timeout 120 "${client[@]}" </dev/null >"b-$name.txt" 2>&1 || r=$?
    cat "b-$name.txt"
    echo "B $name client $r" >>ksctp-results.txt
    [[ $r -eq 0 ]] || rc=1
done
cat ksctp-results.txt
cat /proc/net/sctp/snmp >sctp-snmp.txt 2>&1 || true
exit "$rc"
