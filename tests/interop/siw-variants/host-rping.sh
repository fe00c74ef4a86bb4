#!/usr/bin/env bash
# Host side of the MPA-variant scenarios (scenarios/mpa-*/, scenarios/profile-*/), run by
# lab.sh inside the lab namespace. Two rping runs against guest g1, one each way:
#   1. softrnic initiator -> siw responder: waits for g1's flag siw.ready, then
#      `softrnic rping -c -V -C COUNT -a $LAB_G1_IP -p 7174 CLIENT_OPTS`;
#   2. siw initiator -> softrnic responder: `softrnic rping -s -V -C COUNT -a $LAB_HOST_IP
#      -p 7175 SERVER_OPTS`, raises the flag softrnic.ready once it listens and waits for
#      g1's `rping -c` to finish with it.
# Usage: host-rping.sh [--count N] [--client-opts 'OPTS'] [--server-opts 'OPTS'] [--siw-server-no-read]
#   --siw-server-no-read  run 1 is expected to end after softrnic's first Send: in MPA revision 1
#                         siw reports IRD = ORD = 0 for the connection request (siw_cm.c sets
#                         them only from RFC 6581 enhanced data), rdma_cm limits the server's
#                         initiator depth to that, and siw's rping server cannot post its RDMA
#                         Read ("post send error"). The flag siw.server.may.fail tells the guest.
# The client gets --first-fpdu-delay-ms 50 (siw 6.1's accept race: an FPDU arriving right after
# siw's MPA Reply is never processed; see RECIPE.md) unless CLIENT_OPTS hold --profile siw,
# which sets that delay itself (or --first-fpdu-delay-ms).
# Exit: 0 when both runs succeeded (run 1 may fail as above); else the first failure's status.
set -uo pipefail
count=5
client_opts=""
server_opts=""
no_read=0
while [[ $# -gt 0 ]]; do
    case $1 in
        --count) count=$2; shift ;;
        --client-opts) client_opts=$2; shift ;;
        --server-opts) server_opts=$2; shift ;;
        --siw-server-no-read) no_read=1 ;;
        *) echo "host-rping.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
: "${LAB_SOFTRNIC:?}" "${LAB_FLAGS:?}" "${LAB_TOOLS:?}" "${LAB_G1_IP:?}" "${LAB_HOST_IP:?}"
log() { echo "[host-rping $(date +%T)] $*"; }
flag() { printf 'host\n' >"$LAB_FLAGS/$1.tmp" && mv "$LAB_FLAGS/$1.tmp" "$LAB_FLAGS/$1"; }

if ! "$LAB_SOFTRNIC" rping --help >/dev/null 2>&1; then
    log "FAIL: $LAB_SOFTRNIC has no rping subcommand"
    flag softrnic.ready # let the guest go on (its rping -c then fails fast)
    exit 3
fi
rc=0
[[ $no_read -eq 0 ]] || flag siw.server.may.fail
# ---- 1. softrnic initiator -> siw responder
"$LAB_TOOLS/wait-flag" siw.ready 150 || { flag softrnic.ready; exit 4; }
case " $client_opts " in
    *" --profile siw "* | *--first-fpdu-delay-ms*) ;;
    *) client_opts+=" --first-fpdu-delay-ms 50" ;;
esac
log "softrnic rping -c (initiator) $client_opts"
# shellcheck disable=SC2086 # options are words
timeout 90 "$LAB_SOFTRNIC" rping -c -V -C "$count" -a "$LAB_G1_IP" -p 7174 $client_opts \
    >softrnic-client.log 2>&1
c=$?
cat softrnic-client.log
log "softrnic rping -c exit status $c"
if [[ $c -ne 0 && $no_read -eq 1 ]]; then
    log "expected: siw's rping server cannot RDMA Read in MPA revision 1 (--siw-server-no-read)"
    c=0
fi
[[ $c -eq 0 ]] || rc=$c
flag softrnic.client.done

# ---- 2. siw initiator -> softrnic responder
log "softrnic rping -s (responder) $server_opts"
# shellcheck disable=SC2086
timeout 100 "$LAB_SOFTRNIC" rping -s -V -C "$count" -a "$LAB_HOST_IP" -p 7175 $server_opts \
    >softrnic-server.log 2>&1 &
pid=$!
"$LAB_TOOLS/wait-listen" 7175 "$pid" 10 || true
flag softrnic.ready
s=0
wait "$pid" || s=$?
cat softrnic-server.log
log "softrnic rping -s exit status $s"
[[ $s -eq 0 || $rc -ne 0 ]] || rc=$s
exit "$rc"
