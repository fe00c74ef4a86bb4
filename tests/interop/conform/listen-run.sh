#!/usr/bin/env bash
# The initiator phase of a conform scenario, run by a host.sh inside the lab namespace:
#   listen-run.sh PORT APP [EXTRA CONFORM OPTIONS...]
# runs `softrnic conform --listen $LAB_HOST_IP:PORT --app APP --accept-timeout 30` (the guest
# connects once per case) -> initiator.{json,xml,txt,pcap}, raising the flag
# conform.listening once it listens and conform.done when it is over.
# Exit: softrnic conform's exit status (0 or 1: the verdicts are judged by check_conform.py).
set -uo pipefail
port=${1:?usage: listen-run.sh PORT APP [OPTIONS...]}
app=${2:?usage: listen-run.sh PORT APP [OPTIONS...]}
shift 2
: "${LAB_SOFTRNIC:?}" "${LAB_FLAGS:?}" "${LAB_TOOLS:?}" "${LAB_HOST_IP:?}"
flag() { printf 'host\n' >"$LAB_FLAGS/$1.tmp" && mv "$LAB_FLAGS/$1.tmp" "$LAB_FLAGS/$1"; }
t0=$SECONDS
echo "[conform-host $(date +%T)] softrnic conform --listen $LAB_HOST_IP:$port --app $app $*"
timeout 300 "$LAB_SOFTRNIC" conform --listen "$LAB_HOST_IP:$port" --app "$app" \
    --accept-timeout 30 --json initiator.json --junit initiator.xml --pcap initiator.pcap \
    "$@" >initiator.txt 2>initiator.err &
pid=$!
"$LAB_TOOLS/wait-listen" "$port" "$pid" 10 || true
flag conform.listening
i=0
wait "$pid" || i=$?
flag conform.done
cat initiator.txt
echo "[conform-host $(date +%T)] initiator run: exit status $i, $((SECONDS - t0)) s"
exit "$i"
