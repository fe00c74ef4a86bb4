#!/usr/bin/env bash
# SCTP throughput, softrnic vs usrsctp, single path over loopback with RFC 6951 UDP
# encapsulation, in one run: same message size, duration and socket buffers; one
# association, one stream, one direction; the receiver's byte count decides.
#
#   scripts/sctp-bench.sh [-l LEN] [-t SECS] [-r RUNS]
#
# Needs libusrsctp-dev (installed with apt-get when missing and allowed; otherwise the
# usrsctp column prints SKIPPED). Builds softrnic in release mode.
set -euo pipefail
LEN=1400
SECS=5
RUNS=1
while getopts "l:t:r:" o; do
    case $o in
    l) LEN=$OPTARG ;;
    t) SECS=$OPTARG ;;
    r) RUNS=$OPTARG ;;
    *) echo "usage: $0 [-l LEN] [-t SECS] [-r RUNS]" >&2; exit 2 ;;
    esac
done
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"; jobs -p | xargs -r kill 2>/dev/null || true' EXIT

cargo build --release -q -p softrnic --manifest-path "$ROOT/Cargo.toml"
SOFTRNIC="$ROOT/target/release/softrnic"

USRSCTP=""
if [ ! -f /usr/include/usrsctp.h ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        apt-get install -y -q libusrsctp-dev >/dev/null 2>&1 || true
    fi
fi
if [ -f /usr/include/usrsctp.h ] &&
    cc -O2 -o "$WORK/usrsctp_perf" "$ROOT/sctp-io/bench/usrsctp_perf.c" -lusrsctp -lpthread 2>"$WORK/cc.log"; then
    USRSCTP="$WORK/usrsctp_perf"
fi

T="/usr/bin/time"
[ -x "$T" ] || T=""
timed() { # timed OUT CMD...: runs CMD, appends "user sys" CPU seconds to OUT
    local out=$1
    shift
    if [ -n "$T" ]; then "$T" -f "%U %S" -a -o "$out" "$@"; else "$@"; fi
}
cpu_of() { awk '{u += $1; s += $2} END {printf "%.3f", u + s}' "$1" 2>/dev/null || echo 0; }

# Prints "bytes secs cpu_seconds" (receiver bytes, client-measured time, CPU of both ends).
softrnic_run() {
    local port=$1 udp=$2
    : >"$WORK/cpu"
    timed "$WORK/cpu" "$SOFTRNIC" sctp-perf -s --udp-encap --udp-port "$udp" -p "$port" -i 0 >"$WORK/s.out" 2>&1 &
    local spid=$!
    sleep 0.3
    timed "$WORK/cpu" "$SOFTRNIC" sctp-perf -c 127.0.0.1 --udp-encap --udp-port "$udp" \
        --udp-local-port $((udp + 1)) -p "$port" -l "$LEN" -t "$SECS" -i 0 >"$WORK/c.out" 2>&1 || true
    wait "$spid" || true
    python3 - "$WORK/c.out" "$LEN" "$(cpu_of "$WORK/cpu")" <<'PY'
import re, sys
for l in open(sys.argv[1]):
    m = re.match(r"\[\s*1\]\s+0\.00-(\S+)\s+sec.*receiver \((\d+) messages", l)
    if m:
        print(int(m.group(2)) * int(sys.argv[2]), float(m.group(1)), sys.argv[3])
        break
else:
    print(0, 1, sys.argv[3])
PY
}

usrsctp_run() {
    local port=$1 udp=$2
    : >"$WORK/ucpu"
    timed "$WORK/ucpu" "$USRSCTP" -s -U "$udp" -u $((udp + 1)) -p "$port" >"$WORK/us.out" 2>&1 &
    local spid=$!
    sleep 0.3
    timed "$WORK/ucpu" "$USRSCTP" -c 127.0.0.1 -U $((udp + 1)) -u "$udp" -p "$port" -l "$LEN" -t "$SECS" >"$WORK/uc.out" 2>&1 || true
    for _ in $(seq 1 100); do kill -0 "$spid" 2>/dev/null || break; sleep 0.1; done
    kill "$spid" 2>/dev/null || true
    wait "$spid" 2>/dev/null || true
    local r
    r=$(sed -n 's/.*usrsctp-result bytes=\([0-9]*\) secs=\([0-9.]*\).*/\1 \2/p' "$WORK/us.out" | head -1)
    echo "${r:-0 1} $(cpu_of "$WORK/ucpu")"
}

echo "SCTP over UDP (RFC 6951), loopback, 1 association, 1 stream, ${LEN}-byte messages, ${SECS} s, $RUNS run(s)"
echo "Mbit/s: receiver bytes over the transfer time; MB/CPU-s: bytes per CPU second of both"
echo "processes together (robust when the machine is shared)."
printf "%-5s %14s %14s %8s   %14s %14s %8s\n" run "softrnic Mb/s" "usrsctp Mb/s" ratio "softrnic MB/cs" "usrsctp MB/cs" ratio
python3 -c "open('$WORK/all','w')"
for r in $(seq 1 "$RUNS"); do
    read -r sb ss sc < <(softrnic_run $((5900 + r)) $((19900 + 10 * r)))
    if [ -n "$USRSCTP" ]; then
        read -r ub us uc < <(usrsctp_run $((5950 + r)) $((19950 + 10 * r)))
    else
        ub=0; us=1; uc=0
    fi
    echo "$sb $ss $sc $ub $us $uc" >>"$WORK/all"
    python3 - "$r" "$sb" "$ss" "$sc" "$ub" "$us" "$uc" "$USRSCTP" <<'PY'
import sys
r, sb, ss, sc, ub, us, uc, have = sys.argv[1], *map(float, sys.argv[2:8]), sys.argv[8]
s = sb * 8 / ss / 1e6
se = sb / 1e6 / sc if sc > 0 else 0
if have:
    u = ub * 8 / us / 1e6
    ue = ub / 1e6 / uc if uc > 0 else 0
    print(f"{r:<5} {s:14.1f} {u:14.1f} {s/u if u else 0:7.2f}x   {se:14.1f} {ue:14.1f} {se/ue if ue else 0:7.2f}x")
else:
    print(f"{r:<5} {s:14.1f} {'SKIPPED':>14} {'n/a':>8}   {se:14.1f} {'SKIPPED':>14} {'n/a':>8}")
PY
done
if [ "$RUNS" -gt 1 ]; then
    python3 - "$WORK/all" "$USRSCTP" <<'PY'
import sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
n = len(rows)
S = sum(r[0] for r in rows) * 8 / sum(r[1] for r in rows) / 1e6
SE = sum(r[0] for r in rows) / 1e6 / max(sum(r[2] for r in rows), 1e-9)
if sys.argv[2]:
    U = sum(r[3] for r in rows) * 8 / sum(r[4] for r in rows) / 1e6
    UE = sum(r[3] for r in rows) / 1e6 / max(sum(r[5] for r in rows), 1e-9)
    print(f"{'all':<5} {S:14.1f} {U:14.1f} {S/U if U else 0:7.2f}x   {SE:14.1f} {UE:14.1f} {SE/UE if UE else 0:7.2f}x")
else:
    print(f"{'all':<5} {S:14.1f} {'SKIPPED':>14} {'n/a':>8}   {SE:14.1f} {'SKIPPED':>14} {'n/a':>8}")
PY
fi
[ -n "$USRSCTP" ] || echo "usrsctp: SKIPPED (libusrsctp-dev not installed and not installable)"
