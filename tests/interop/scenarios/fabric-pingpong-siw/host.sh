#!/usr/bin/env bash
# Host side of fabric-pingpong-siw: builds the softrnic provider against the libsoftrnic.so
# beside $LAB_SOFTRNIC (or in $SOFTRNIC_LAB_FI_LIB_DIR), then
#   a) per size i: waits for g1's verbs server (flag pp.a<i>.ready) and runs
#      `fi_pingpong -p softrnic` as its client (exit status -> pp.a<i>.done);
#   b) per size i: runs `fi_pingpong -p softrnic` as server, raises pp.b<i>.ready once its
#      control port listens, and waits for it and for g1's client (pp.b<i>.done).
set -euo pipefail
lib=${SOFTRNIC_LAB_FI_LIB_DIR:-$(dirname "$LAB_SOFTRNIC")}
repo=$(cd "$LAB_SCENARIO_DIR/../../../.." && pwd)
bash "$repo/fabric/build.sh" "$lib" "$PWD/fi" >/dev/null
# The siw peer loses a first message that arrives right after its MPA Reply: hold it 50 ms
# (the siw profile's hold).
export FI_PROVIDER_PATH=$PWD/fi FI_LOG_LEVEL=warn FI_SOFTRNIC_FIRST_FPDU_DELAY_MS=50
fi_info -p softrnic -t FI_EP_MSG | sed -n "1,6p"
rc=0
i=0
for size in $PP_SIZES; do
    "$LAB_TOOLS/wait-flag" "pp.a$i.ready" 120 || exit 1
    crc=0
    timeout 120 fi_pingpong -p softrnic -e msg -c -I "$PP_ITERS" -S "$size" -P $((47600 + i)) \
        "$LAB_G1_IP" >"client-a$i.log" 2>&1 || crc=$?
    echo "a) softrnic fi_pingpong client -S $size -> verbs on siw: exit status $crc"
    tail -n 2 "client-a$i.log"
    echo "$crc" >"$LAB_FLAGS/pp.a$i.done"
    [[ $crc -eq 0 ]] || rc=1
    i=$((i + 1))
done
i=0
for size in $PP_SIZES; do
    port=$((47610 + i))
    timeout 150 fi_pingpong -p softrnic -e msg -c -I "$PP_ITERS" -S "$size" -B "$port" \
        >"server-b$i.log" 2>&1 &
    pid=$!
    for _ in $(seq 100); do ss -Hltn "sport = :$port" | grep -q . && break; sleep 0.05; done
    echo "$size" >"$LAB_FLAGS/pp.b$i.ready"
    src=0
    wait "$pid" || src=$?
    echo "b) softrnic fi_pingpong server -S $size <- verbs on siw: exit status $src"
    tail -n 2 "server-b$i.log"
    [[ $src -eq 0 ]] || rc=1
    for _ in $(seq 300); do [[ -e $LAB_FLAGS/pp.b$i.done ]] && break; sleep 0.1; done
    crc=$(cat "$LAB_FLAGS/pp.b$i.done" 2>/dev/null || echo none)
    echo "b) verbs fi_pingpong client on siw -S $size: exit status $crc"
    [[ $crc == 0 ]] || rc=1
    i=$((i + 1))
done
exit "$rc"
