#!/usr/bin/env bash
# Kernel-bypass benchmark: RDMA Write bandwidth (64 KiB) and 2-byte RDMA Write latency over
# softrnic's own TCP/IP on AF_XDP and on TAP against the kernel-TCP path, across one virtual
# link, at MTU 1500 and 9000, all in one run (ratios are what to read: absolute numbers on a
# shared machine are noise). Each figure is the median of --reps runs. Every tool of every
# path busy-polls for the same --busy-poll-us (the tools' default, 50, unless given), so
# the paths compare like with like.
#
#   scripts/device-bench.sh [--reps N] [--iters N] [--busy-poll-us N]
#                                                         (root; builds with --features xdp)
#
# Paths (network namespaces sbk and sbs joined by the veth pair xk/xs; a TAP device tp0):
#   kernel      softrnic on kernel TCP  <-> softrnic on kernel TCP       (veth)
#   xdp-kernel  softrnic on AF_XDP (xs) <-> softrnic on kernel TCP       (veth)
#   xdp-xdp     softrnic on AF_XDP (xs) <-> softrnic on AF_XDP (xk)      (veth)
#   tap-kernel  softrnic on TAP (tp0)   <-> softrnic on kernel TCP (tp0) (tap)
#   sctp-xdp    DDP over SCTP as raw IPv4 on AF_XDP at both ends         (veth)
set -euo pipefail
cd "$(dirname "$0")/.."
reps=3
iters=3000
busy=""
while [ $# -gt 0 ]; do
    case "$1" in
        --reps) reps="$2"; shift 2 ;;
        --iters) iters="$2"; shift 2 ;;
        --busy-poll-us) busy="--busy-poll-us $2"; shift 2 ;;
        -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
        *) echo "device-bench: unknown option $1" >&2; exit 2 ;;
    esac
done
if [ "$(id -u)" -ne 0 ]; then
    echo "device-bench: needs root (network namespaces, AF_XDP, TAP)" >&2
    exit 1
fi
bash scripts/install-xdp-deps.sh >/dev/null
cargo build --release -q -p softrnic --features xdp
B="${CARGO_TARGET_DIR:-$PWD/target}/release/softrnic"
K=sbk$$; S=sbs$$
cleanup() { ip netns del "$K" 2>/dev/null || true; ip netns del "$S" 2>/dev/null || true; }
trap cleanup EXIT
ip netns add "$K"; ip netns add "$S"
ip -n "$K" link set lo up; ip -n "$S" link set lo up
ip -n "$K" link add xk type veth peer name xs netns "$S"
ip -n "$K" addr add 10.214.0.1/24 dev xk
ip -n "$S" addr add 10.214.0.3/24 dev xs
ip -n "$K" tuntap add tp0 mode tap
ip -n "$K" addr add 10.215.0.1/24 dev tp0
# Kernel-sent frames on veth must carry full checksums: the device stack checks them.
ip netns exec "$K" ethtool -K xk tx off >/dev/null
ip netns exec "$S" ethtool -K xs tx off >/dev/null
for l in xk tp0; do ip -n "$K" link set "$l" up; done
ip -n "$S" link set xs up

# measure TOOL SERVER_NS "SERVER_ARGS" CLIENT_NS "CLIENT_ARGS" FIELD -> median of FIELD
measure() {
    local tool=$1 sns=$2 sargs=$3 cns=$4 cargs=$5 field=$6 vals=() i v sa ca
    # The option strings split into words (they hold no quoted spaces).
    read -ra sa <<<"$sargs"
    read -ra ca <<<"$cargs"
    for ((i = 0; i < reps; i++)); do
        ip netns exec "$sns" "$B" "$tool" "${sa[@]}" >/dev/null 2>&1 &
        local spid=$!
        sleep 0.5
        v=$(ip netns exec "$cns" timeout 120 "$B" "$tool" "${ca[@]}" 2>/dev/null |
            awk -v f="$field" 'h { print $f; exit } /#bytes/ { h = 1 }')
        wait "$spid" 2>/dev/null || true
        [ -n "$v" ] && vals+=("$v")
        sleep 0.3
    done
    if [ "${#vals[@]}" -eq 0 ]; then echo "-"; return; fi
    printf '%s\n' "${vals[@]}" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'
}

XK="--transport xdp --device xk --bind 10.214.0.11"
SK="--transport sctp --device xdp:xk --bind 10.214.0.11"
SS="--transport sctp --device xdp:xs --bind 10.214.0.2"
XS="--transport xdp --device xs --bind 10.214.0.2"
TP="--transport tap --device tp0 --bind 10.215.0.2"
BW="-s 65536 -n $iters $busy"
LAT="-s 2 -n $iters $busy"
printf '%-6s %-11s %12s %8s %14s %8s\n' MTU path "Write MB/s" "x kernel" "2B lat us" "x kernel"
for mtu in 1500 9000; do
    ip -n "$K" link set xk mtu "$mtu"; ip -n "$S" link set xs mtu "$mtu"; ip -n "$K" link set tp0 mtu "$mtu"
    kb=""; kl=""
    for path in kernel xdp-kernel xdp-xdp tap-kernel sctp-xdp; do
        case $path in
            kernel)     s=(K "" S "10.214.0.1") ;;
            xdp-kernel) s=(K "" S "10.214.0.1 $XS") ;;
            xdp-xdp)    s=(K "$XK" S "10.214.0.11 $XS") ;;
            tap-kernel) s=(K "" K "10.215.0.1 $TP") ;;
            sctp-xdp)   s=(K "$SK" S "10.214.0.11 $SS") ;;
        esac
        sns=${!s[0]}; cns=${!s[2]}
        bw=$(measure write-bw "$sns" "$BW ${s[1]}" "$cns" "${s[3]} $BW" 4)
        lat=$(measure write-lat "$sns" "$LAT ${s[1]}" "$cns" "${s[3]} $LAT" 5)
        if [ "$path" = kernel ]; then kb=$bw; kl=$lat; fi
        rb=$(awk -v a="$bw" -v b="$kb" 'BEGIN { if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2f", a / b }')
        rl=$(awk -v a="$lat" -v b="$kl" 'BEGIN { if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2f", a / b }')
        printf '%-6s %-11s %12s %8s %14s %8s\n' "$mtu" "$path" "$bw" "$rb" "$lat" "$rl"
    done
done
echo "(at MTU 9000 AF_XDP carries 9014-byte frames as chains of 4 KiB UMEM frames: multi-buffer AF_XDP)"
