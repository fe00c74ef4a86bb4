#!/usr/bin/env bash
# Runs the fabtests that apply to a MSG provider against softrnic and prints a pass table.
# Usage: fabric/run-fabtests.sh FABTESTS_BIN_DIR PROVIDER_DIR
#   FABTESTS_BIN_DIR: what fabric/fabtests.sh built; PROVIDER_DIR: holds libsoftrnic-fi.so.
# Two-process tests run a server and a client (127.0.0.1) on a fresh port each. Exits
# non-zero when any test fails.
set -uo pipefail
bin="$(cd "${1:?usage: run-fabtests.sh FABTESTS_BIN_DIR PROVIDER_DIR}" && pwd)"
FI_PROVIDER_PATH="$(cd "${2:?usage: run-fabtests.sh FABTESTS_BIN_DIR PROVIDER_DIR}" && pwd)"
export FI_PROVIDER_PATH
limit=${FABTESTS_TIMEOUT:-120}
port=$(( 20000 + RANDOM % 20000 ))
fails=0
row() { printf '%-52s %s\n' "$1" "$2"; }
single() { # name args...
    local name=$1; shift
    if out=$(timeout "$limit" "$bin/$name" -p softrnic "$@" 2>&1) &&
        ! grep -q "FAIL" <<<"$out"; then
        row "$name $*" PASS
    else
        row "$name $*" FAIL; fails=$((fails + 1)); printf '%s\n' "$out" | tail -5 | sed 's/^/    /'
    fi
}
pair() { # name args...
    local name=$1; shift
    port=$((port + 1))
    local sout; sout=$(mktemp)
    timeout "$limit" "$bin/$name" -p softrnic -B "$port" "$@" >"$sout" 2>&1 &
    local spid=$!
    sleep 1
    local cout crc src
    cout=$(timeout "$limit" "$bin/$name" -p softrnic -P "$port" "$@" 127.0.0.1 2>&1); crc=$?
    wait "$spid"; src=$?
    local perf; perf=$(grep -E '^[0-9]+[kmg]? +[0-9]' <<<"$cout" | tail -1 | awk '{print $1" B: "$5" MB/s, "$6" us/xfer"}')
    if [ "$crc" -eq 0 ] && [ "$src" -eq 0 ]; then
        row "$name $*" "PASS${perf:+ ($perf)}"
    else
        row "$name $*" "FAIL (client $crc, server $src)"; fails=$((fails + 1))
        { printf '%s\n' "$cout" | tail -3; tail -3 "$sout"; } | sed 's/^/    /'
    fi
    rm -f "$sout"
}
pair_oob() { # name args...: -b (out-of-band sync over a socket) with -s 127.0.0.1 on both
    # ends. fabtests 1.17 gives a -b client without -s an fi_info with no destination
    # (ft_read_addr_opts), so fi_connect has no peer: -FI_EINVAL from any MSG provider.
    local name=$1; shift
    port=$((port + 2))
    local sout; sout=$(mktemp)
    timeout "$limit" "$bin/$name" -p softrnic -s 127.0.0.1 -B "$port" -b="$((port + 1))" "$@" \
        >"$sout" 2>&1 &
    local spid=$!
    sleep 1
    local cout crc src
    cout=$(timeout "$limit" "$bin/$name" -p softrnic -s 127.0.0.1 -P "$port" \
        -b="$((port + 1))" "$@" 127.0.0.1 2>&1); crc=$?
    wait "$spid"; src=$?
    if [ "$crc" -eq 0 ] && [ "$src" -eq 0 ]; then
        row "$name -b $*" PASS
    else
        row "$name -b $*" "FAIL (client $crc, server $src)"; fails=$((fails + 1))
        { printf '%s\n' "$cout" | tail -3; tail -3 "$sout"; } | sed 's/^/    /'
    fi
    rm -f "$sout"
}
printf '%-52s %s\n' "fabtest (provider softrnic)" "result"
single fi_getinfo_test -e msg
single fi_eq_test
single fi_cq_test
single fi_mr_test
single fi_dom_test
pair fi_msg -e msg
pair fi_cm_data
pair fi_msg_pingpong -e msg -I 200 -S 4096
pair fi_msg_bw -e msg -I 200 -S 65536
pair fi_rma_bw -e msg -o write -I 200 -S 65536
pair fi_rma_bw -e msg -o read -I 200 -S 65536
pair fi_rma_bw -e msg -o writedata -I 200 -S 65536
pair_oob fi_msg -e msg
pair_oob fi_msg_pingpong -e msg -I 200 -S 4096
pair_oob fi_rma_bw -e msg -o write -I 200 -S 65536
echo "failed: $fails"
[ "$fails" -eq 0 ]
