#!/usr/bin/env bash
# The failover experiment on real interfaces: two network namespaces joined by two veth pairs
# (path 1 and path 2, each rate-limited with tbf, path 2 the slower), `softrnic sctp-perf` over
# raw IPv4 between them, and the paths taken down on a schedule: path 1 down at 1/8 of the run
# and up at 7/24, path 2 down at 11/24 and up at 5/8 (for 120 s: 15-35 s and 55-75 s). One run
# per mode: plain multihoming (--cmt off), CMT-PF (--cmt pf) and CMT without PF (--cmt nopf).
# While a mode runs, prints the receiver's throughput each second, the sender's path events
# (DOWN, POTENTIALLY-FAILED, UP, primary changes) and the links going down and up, as they
# happen; at the end, the receiver's throughput per second for each mode side by side, the
# averages and the longest run of seconds without data (the table as CSV with --csv). Both
# ends use RTO.Max = 8 s (--rto-max), as `softrnic sim failover` does: a failed path is probed
# on its RTO, doubled per unanswered heartbeat up to RTO.Max, so RTO.Max bounds how late a
# path that is back is used again (RFC 9260 section 8.3, RFC 7829). Every byte is
# verified by the receiver; a mode whose server does not end with "result: OK" and
# "verify: 0 errors" is reported and makes the script exit 1.
#
# Needs root (namespaces, veth, raw IPv4 sockets) and iproute2 with tc (tbf).
#
#   scripts/failover-veth.sh                       # 120 s per mode, 100 and 50 Mbit/s
#   scripts/failover-veth.sh --secs 24 --csv out.csv --softrnic target/debug/softrnic
set -euo pipefail
cd "$(dirname "$0")/.."

secs=120
rate1=100mbit
rate2=50mbit
modes="off pf nopf"
rto_max=8000
csv=""
logs=""
bin=""
usage() {
    sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'
    echo
    echo "options: --secs N (run length, default 120), --rate1 R / --rate2 R (tc rates, default"
    echo "100mbit / 50mbit), --modes 'off pf nopf', --rto-max MS (both ends, default 8000),"
    echo "--csv FILE, --logs DIR (keeps both tools' output per mode), --softrnic PATH (default:"
    echo "a release build, made if missing)"
}
while [ $# -gt 0 ]; do
    case "$1" in
        --secs) secs="$2"; shift 2 ;;
        --rate1) rate1="$2"; shift 2 ;;
        --rate2) rate2="$2"; shift 2 ;;
        --modes) modes="$2"; shift 2 ;;
        --rto-max) rto_max="$2"; shift 2 ;;
        --csv) csv="$2"; shift 2 ;;
        --logs) logs="$2"; shift 2 ;;
        --softrnic) bin="$2"; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "unknown option $1" >&2; usage >&2; exit 2 ;;
    esac
done
case "$secs" in
    ''|*[!0-9]*) echo "--secs takes a whole number of seconds" >&2; exit 2 ;;
esac
case "$rto_max" in
    ''|*[!0-9]*) echo "--rto-max takes milliseconds (a whole number)" >&2; exit 2 ;;
esac
if [ "$rto_max" -lt 1000 ]; then
    echo "--rto-max must be at least RTO.Initial, 1000 ms" >&2
    exit 2
fi
if [ "$secs" -lt 8 ]; then
    echo "--secs must be at least 8 (the schedule has four steps)" >&2
    exit 2
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "needs root: network namespaces, veth pairs and raw IPv4 sockets" >&2
    exit 2
fi
for t in ip tc; do
    command -v "$t" >/dev/null || { echo "needs $t (iproute2)" >&2; exit 2; }
done
if [ -z "$bin" ]; then
    bin=target/release/softrnic
    [ -x "$bin" ] || cargo build --release -p softrnic
fi

na=sfo-a$$
nb=sfo-b$$
work=$(mktemp -d)
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
    ip netns del "$na" 2>/dev/null || true
    ip netns del "$nb" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

setup() {
    ip netns add "$na"
    ip netns add "$nb"
    for i in 0 1; do
        ip link add "fa$i" netns "$na" type veth peer name "fb$i" netns "$nb"
        ip -n "$na" addr add "10.97.$i.1/24" dev "fa$i"
        ip -n "$nb" addr add "10.97.$i.2/24" dev "fb$i"
        ip -n "$na" link set "fa$i" up
        ip -n "$nb" link set "fb$i" up
    done
    ip -n "$na" link set lo up
    ip -n "$nb" link set lo up
    # Data flows a -> b: each path's rate is its egress rate on a (and the same back).
    tc -n "$na" qdisc add dev fa0 root tbf rate "$rate1" burst 64kb latency 20ms
    tc -n "$na" qdisc add dev fa1 root tbf rate "$rate2" burst 64kb latency 20ms
    tc -n "$nb" qdisc add dev fb0 root tbf rate "$rate1" burst 64kb latency 20ms
    tc -n "$nb" qdisc add dev fb1 root tbf rate "$rate2" burst 64kb latency 20ms
}

# The schedule, in whole seconds of the run.
d1=$((secs / 8)); u1=$((secs * 7 / 24)); d2=$((secs * 11 / 24)); u2=$((secs * 5 / 8))

# A receiver interval line, "[  1]   A-B   sec   X MBytes   R Mbits/sec", as second s (B) and
# rate r in Mbit/s; the caller's awk action follows.
# shellcheck disable=SC2016  # an awk program, expanded by awk
interval='/^\[ *1\] +[0-9.]+-[0-9.]+ +sec/ && !/receiver|sender/ {
    split($3, iv, "-"); r = $(NF-1); if ($NF ~ /^Gbits/) r *= 1000; s = int(iv[2] + 0.5)'

# live_rates MODE / live_events MODE: the receiver's interval lines and the sender's path
# events from stdin, printed as they come (a shell loop: mawk reads a pipe in blocks).
live_rates() {
    local line re='^\[ *1\] +[0-9.]+-([0-9.]+) +sec .* ([0-9.]+) ([MG])bits/sec'
    while IFS= read -r line; do
        [[ $line =~ $re && $line != *receiver* && $line != *sender* ]] || continue
        printf '%-5s %4.0f s %9s %sbit/s\n' "$1" "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}" "${BASH_REMATCH[3]}"
    done
}
live_events() {
    local line
    while IFS= read -r line; do
        [[ $line == *"path "*": "* || $line == *"primary -> "* ]] && printf '%-5s sender: %s\n' "$1" "$line"
    done
    return 0
}

run_mode() {
    local mode=$1 out=$work/$1.txt
    # Live: the receiver's rate each second, the sender's path events, the links' changes.
    ip netns exec "$nb" "$bin" sctp-perf -s -B 10.97.0.2,10.97.1.2 -p 5001 -i 1 \
        --rto-max "$rto_max" 2>&1 | tee "$out" | live_rates "$mode" &
    local srv=$!
    sleep 0.5
    {
        ip netns exec "$na" "$bin" sctp-perf -c 10.97.0.2,10.97.1.2 -B 10.97.0.1,10.97.1.1 \
            -p 5001 -t "$secs" -i 0 --verify --cmt "$mode" --rto-max "$rto_max" 2>&1
        echo $? >"$work/$mode.client.rc"
    } | tee "$work/$mode.client.txt" | live_events "$mode" &
    local cli=$!
    (
        link() { ip -n "$na" link set "$1" "$2"; printf '%-5s %4d s link %s %s\n' "$mode" "$3" "$1" "$2"; }
        sleep "$d1"; link fa0 down "$d1"
        sleep $((u1 - d1)); link fa0 up "$u1"
        sleep $((d2 - u1)); link fa1 down "$d2"
        sleep $((u2 - d2)); link fa1 up "$u2"
    ) &
    local sched=$!
    wait "$cli" || true
    wait "$sched" || true
    wait "$srv" || true
    ip -n "$na" link set fa0 up
    ip -n "$na" link set fa1 up
    local rc
    rc=$(cat "$work/$mode.client.rc" 2>/dev/null || echo "unknown")
    [ "$rc" = 0 ] || echo "mode $mode: the client exited with $rc (see below)" >&2
    awk "$interval"'; printf "%d %.1f\n", s, r }' "$out" >"$work/$mode.rates"
    if ! grep -q "result: OK" "$out" || ! grep -q "verify: 0 errors" "$out"; then
        failed=1
        echo "mode $mode: the server did not report success:" >&2
        tail -5 "$out" >&2
        tail -5 "$work/$mode.client.txt" >&2
    fi
}

failed=0
setup
echo "two paths: $rate1 (path 1, fa0) and $rate2 (path 2, fa1); ${secs} s per mode;" \
    "path 1 down ${d1}-${u1} s, path 2 down ${d2}-${u2} s; RTO.Max ${rto_max} ms"
for m in $modes; do
    echo "running --cmt $m ..." >&2
    run_mode "$m"
done

# Side by side: one row per second, one column per mode.
header="second"
for m in $modes; do header="$header,$m"; done
{
    echo "$header"
    for s in $(seq 1 "$secs"); do
        row="$s"
        for m in $modes; do
            v=$(awk -v s="$s" '$1 == s { print $2; exit }' "$work/$m.rates")
            row="$row,${v:-0}"
        done
        echo "$row"
    done
} >"$work/table.csv"
[ -n "$csv" ] && cp "$work/table.csv" "$csv"
if [ -n "$logs" ]; then
    mkdir -p "$logs"
    cp "$work"/*.txt "$logs"/
fi
printf '%-8s' "second"
for m in $modes; do printf '%14s' "$m Mbit/s"; done
echo
tail -n +2 "$work/table.csv" | while IFS=, read -r -a f; do
    printf '%-8s' "${f[0]}"
    for v in "${f[@]:1}"; do printf '%14s' "$v"; done
    echo
done
for m in $modes; do
    awk -v m="$m" '{ n++; sum += $2; if ($2 < 0.05) { z++; if (z > best) best = z } else z = 0 }
        END { printf "%-5s average %.1f Mbit/s, longest run without data %d s\n", m, sum / (n ? n : 1), best }' \
        "$work/$m.rates"
done
exit "$failed"
