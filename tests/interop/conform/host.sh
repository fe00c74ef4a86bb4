#!/usr/bin/env bash
# Host side of the conform-siw* scenarios, run by lab.sh inside the lab namespace: the
# catalogue of `softrnic conform` against siw's rping in guest g1, both ways.
#   1. siw as responder: after g1's flag siw.ready,
#      `softrnic conform $LAB_G1_IP:7174 --app rping-server --first-fpdu-delay-ms 50`
#      (siw 6.1's accept race, see the lab README's Known quirks) -> responder.{json,xml,txt,pcap};
#      then the flag conform.responder.done;
#   2. siw as initiator: `softrnic conform --listen $LAB_HOST_IP:7175 --app rping-client`
#      (listen-run.sh: the flag conform.listening once it listens, g1 then runs rping -c once
#      per case -> initiator.{json,xml,txt,pcap}; then the flag conform.done).
# Usage: host.sh [--opts 'EXTRA CONFORM OPTIONS']
# Exit: 0 when both runs produced their report (conform exits 0 or 1: the verdicts are judged
# by check.py against the expectation file), else the first other status.
set -uo pipefail
opts=""
while [[ $# -gt 0 ]]; do
    case $1 in
        --opts) opts=$2; shift ;;
        *) echo "host.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
: "${LAB_SOFTRNIC:?}" "${LAB_FLAGS:?}" "${LAB_TOOLS:?}" "${LAB_G1_IP:?}" "${LAB_HOST_IP:?}" "${LAB_ROOT:?}"
log() { echo "[conform-host $(date +%T)] $*"; }
flag() { printf 'host\n' >"$LAB_FLAGS/$1.tmp" && mv "$LAB_FLAGS/$1.tmp" "$LAB_FLAGS/$1"; }
rc=0
"$LAB_TOOLS/wait-flag" siw.ready 150 || { flag conform.responder.done; exit 4; }

t0=$SECONDS
log "softrnic conform $LAB_G1_IP:7174 (siw responds) $opts"
# shellcheck disable=SC2086 # options are words
timeout 300 "$LAB_SOFTRNIC" conform "$LAB_G1_IP:7174" --app rping-server \
    --first-fpdu-delay-ms 50 --json responder.json --junit responder.xml --pcap responder.pcap \
    $opts >responder.txt 2>responder.err
r=$?
cat responder.txt
log "responder run: exit status $r, $((SECONDS - t0)) s"
[[ $r -le 1 ]] || rc=$r
flag conform.responder.done

i=0
# shellcheck disable=SC2086 # options are words
"$LAB_ROOT/conform/listen-run.sh" 7175 rping-client $opts || i=$?
[[ $i -le 1 || $rc -ne 0 ]] || rc=$i
exit "$rc"
