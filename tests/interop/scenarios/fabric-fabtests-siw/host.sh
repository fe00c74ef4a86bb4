#!/usr/bin/env bash
# Host side of fabric-fabtests-siw: builds the softrnic provider, copies the fabtests into
# the share (/lab/lib/fabtests in the guest) and raises ft.ready, then for test N of
# tests.txt: a) waits for g1's verbs server (ft.a<N>.ready), runs the softrnic client
# (-> ft.a<N>.done); b) runs the softrnic server, raises ft.b<N>.ready once it listens, waits
# for it and for g1's client (ft.b<N>.done). Prints one row per test and direction.
set -uo pipefail
lib=${SOFTRNIC_LAB_FI_LIB_DIR:-$(dirname "$LAB_SOFTRNIC")}
repo=$(cd "$LAB_SCENARIO_DIR/../../../.." && pwd)
bash "$repo/fabric/build.sh" "$lib" "$PWD/fi" >/dev/null || exit 1
# The siw peer loses a first message that arrives right after its MPA Reply: hold it 50 ms
# (the siw profile's hold).
export FI_PROVIDER_PATH=$PWD/fi FI_LOG_LEVEL=warn FI_SOFTRNIC_FIRST_FPDU_DELAY_MS=50
mkdir -p "$LAB_RESULTS/lib/fabtests"
for t in fi_cm_data fi_msg fi_msg_bw fi_rma_bw; do
    install -m 0755 "$FABTESTS_DIR/$t" "$LAB_RESULTS/lib/fabtests/$t" || exit 1
done
grep -v '^#' "$LAB_SCENARIO_DIR/tests.txt" >"$LAB_RESULTS/lib/fabtests/tests.txt"
echo ok >"$LAB_FLAGS/ft.ready"
rc=0
n=0
row() { printf '%-48s %-28s %s\n' "$1" "$2" "$3"; }
# verdict DIRECTION "NAME ARGS" LABEL FAILED(0|1) DETAIL LOG: prints the row, PASS/FAIL, or
# for a row listed in known-failures.txt XFAIL when it failed and "PASS (listed ...)" when the
# race went its way (sets rc on FAIL only), and on a failure the exit statuses and the log's
# last lines.
verdict() {
    local known=0 res
    grep -v '^#' "$LAB_SCENARIO_DIR/known-failures.txt" | grep -qxF "$1 $2" && known=1
    case "$known$4" in
        00) res=PASS ;;
        01) res=FAIL; rc=1 ;;
        10) res="PASS (listed in known-failures.txt: the race went its way)" ;;
        11) res=XFAIL ;;
    esac
    [[ $4 -eq 0 ]] || res="$res ($5)"
    row "$2" "$3" "$res"
    [[ $4 -eq 0 ]] || tail -n 4 "$6" | sed 's/^/    /'
}
while read -r name args; do
    [[ -n $name ]] || continue
    port=$((9300 + 2 * n))
    # a) verbs server in g1, softrnic client here.
    "$LAB_TOOLS/wait-flag" "ft.a$n.ready" 150 || exit 1
    crc=0
    # shellcheck disable=SC2086 # ARGS are words
    timeout 150 "$FABTESTS_DIR/$name" -p softrnic $args -P "$port" "$LAB_G1_IP" \
        >"a$n-client.log" 2>&1 || crc=$?
    echo "$crc" >"$LAB_FLAGS/ft.a$n.done"
    "$LAB_TOOLS/wait-flag" "ft.a$n.server" 90 || true
    src=$(cat "$LAB_FLAGS/ft.a$n.server" 2>/dev/null || echo none)
    failed=0
    [[ $crc -eq 0 && $src == 0 ]] || failed=1
    verdict a "$name $args" "softrnic -> verbs/siw" "$failed" "client $crc, server $src" \
        "a$n-client.log"
    # b) softrnic server here, verbs client in g1.
    port=$((port + 1))
    # shellcheck disable=SC2086
    timeout 150 "$FABTESTS_DIR/$name" -p softrnic $args -B "$port" >"b$n-server.log" 2>&1 &
    pid=$!
    for _ in $(seq 100); do ss -Hltn "sport = :$port" | grep -q . && break; sleep 0.05; done
    echo "$port" >"$LAB_FLAGS/ft.b$n.ready"
    src=0
    wait "$pid" || src=$?
    "$LAB_TOOLS/wait-flag" "ft.b$n.done" 200 || true
    crc=$(cat "$LAB_FLAGS/ft.b$n.done" 2>/dev/null || echo none)
    failed=0
    [[ $src -eq 0 && $crc == 0 ]] || failed=1
    verdict b "$name $args" "verbs/siw -> softrnic" "$failed" "server $src, client $crc" \
        "b$n-server.log"
    n=$((n + 1))
done < <(grep -v '^#' "$LAB_SCENARIO_DIR/tests.txt")
exit "$rc"
