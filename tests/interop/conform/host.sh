#!/usr/bin/env bash
# Host side of the conform-siw* scenarios, run by lab.sh inside the lab namespace: the
# catalogue of `softrnic conform` against siw's rping in guest g1, both ways.
#   1. siw as responder: after g1's flag siw.ready,
#      `softrnic conform $LAB_G1_IP:7174 --app rping-server --first-fpdu-delay-ms 50`
#      (siw 6.1's accept race, see the lab README's Known quirks) -> responder.{json,xml,txt,pcap};
#      then the flag conform.responder.done;
#   2. siw as initiator: `softrnic conform --listen $LAB_HOST_IP:7175 --app rping-client`,
#      the flag conform.listening once it listens (g1 then runs rping -c once per case) ->
#      initiator.{json,xml,txt,pcap}; then the flag conform.done.
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
: "${LAB_SOFTRNIC:?}" "${LAB_FLAGS:?}" "${LAB_TOOLS:?}" "${LAB_G1_IP:?}" "${LAB_HOST_IP:?}"
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

t0=$SECONDS
log "softrnic conform --listen $LAB_HOST_IP:7175 (siw initiates) $opts"
# shellcheck disable=SC2086
timeout 300 "$LAB_SOFTRNIC" conform --listen "$LAB_HOST_IP:7175" --app rping-client \
    --accept-timeout 20 --json initiator.json --junit initiator.xml --pcap initiator.pcap \
    $opts >initiator.txt 2>initiator.err &
pid=$!
"$LAB_TOOLS/wait-listen" 7175 "$pid" 10 || true
flag conform.listening
i=0
wait "$pid" || i=$?
flag conform.done
cat initiator.txt
log "initiator run: exit status $i, $((SECONDS - t0)) s"
[[ $i -le 1 || $rc -ne 0 ]] || rc=$i
exit "$rc"
