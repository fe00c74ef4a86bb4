#!/usr/bin/env bash
# Host side of fabric-rma-siw: builds the softrnic provider (against the libsoftrnic.so beside
# $LAB_SOFTRNIC, or in $SOFTRNIC_LAB_FI_LIB_DIR) and fabric/tests/fi_rma_peer.c, puts the
# program in the share for g1 (flag rma.built), then
#   a) waits for g1's verbs target (rma.a.ready) and runs the softrnic initiator against it
#      (exit status -> rma.a.done);
#   b) runs the softrnic target, raises rma.b.ready once it listens, and waits for it and for
#      g1's initiator (rma.b.done).
set -euo pipefail
lib=${SOFTRNIC_LAB_FI_LIB_DIR:-$(dirname "$LAB_SOFTRNIC")}
repo=$(cd "$LAB_SCENARIO_DIR/../../../.." && pwd)
bash "$repo/fabric/build.sh" "$lib" "$PWD/fi" >/dev/null
"${CC:-cc}" -std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -Wall -Wextra -Werror -O2 \
    "$repo/fabric/tests/fi_rma_peer.c" -o "$LAB_RESULTS/lib/fi_rma_peer" -lfabric
echo ok >"$LAB_FLAGS/rma.built"
# The siw peer loses a first message that arrives right after its MPA Reply: hold it 50 ms
# (the siw profile's hold).
export FI_PROVIDER_PATH=$PWD/fi FI_LOG_LEVEL=warn FI_SOFTRNIC_FIRST_FPDU_DELAY_MS=50
rc=0
"$LAB_TOOLS/wait-flag" rma.a.ready 120 || exit 1
crc=0
timeout 120 "$LAB_RESULTS/lib/fi_rma_peer" -p softrnic -P 47700 -n "$RMA_ITERS" "$LAB_G1_IP" \
    >initiator-a.log 2>&1 || crc=$?
cat initiator-a.log
echo "a) softrnic initiator -> verbs target on siw: exit status $crc"
echo "$crc" >"$LAB_FLAGS/rma.a.done"
[[ $crc -eq 0 ]] || rc=1
timeout 150 "$LAB_RESULTS/lib/fi_rma_peer" -p softrnic -P 47701 -n "$RMA_ITERS" >target-b.log 2>&1 &
pid=$!
for _ in $(seq 100); do ss -Hltn "sport = :47701" | grep -q . && break; sleep 0.05; done
echo ok >"$LAB_FLAGS/rma.b.ready"
src=0
wait "$pid" || src=$?
cat target-b.log
echo "b) softrnic target <- verbs initiator on siw: exit status $src"
[[ $src -eq 0 ]] || rc=1
for _ in $(seq 300); do [[ -e $LAB_FLAGS/rma.b.done ]] && break; sleep 0.1; done
crc=$(cat "$LAB_FLAGS/rma.b.done" 2>/dev/null || echo none)
echo "b) verbs initiator on siw: exit status $crc"
[[ $crc == 0 ]] || rc=1
grep -q '^rma verified$' initiator-a.log || rc=1
grep -q '^rma verified$' target-b.log || rc=1
exit "$rc"
