#!/usr/bin/env bash
# Host side of siw-send-invalidate: ship the guest program through the share, start the
# invalidate_peer example on 10.99.0.1:7180 for the four cases and tell the guest when it
# listens. Exit status: the example's (0 when every check passed).
set -euo pipefail
# shellcheck source=../../lib/common.sh
. "$LAB_ROOT/lib/common.sh"
install -m 0755 "$LAB_CACHE/tools/inval-peer" "$LAB_RESULTS/lib/inval-peer"
if [[ -n ${SOFTRNIC_LAB_INVALIDATE_PEER:-} ]]; then bin=$SOFTRNIC_LAB_INVALIDATE_PEER; else
    bin=$(dirname "$LAB_SOFTRNIC")/examples/invalidate_peer; fi
"$bin" --listen "$LAB_HOST_IP:7180" --cases window2,fastreg,window1,region --timeout 60 \
    >target.log 2>&1 &
pid=$!
for _ in $(seq 100); do
    grep -q '^listening on' target.log && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
done
echo ready >"$LAB_FLAGS/target.ready"
rc=0
wait "$pid" || rc=$?
cat target.log
echo "invalidate_peer: exit status $rc"
exit "$rc"
