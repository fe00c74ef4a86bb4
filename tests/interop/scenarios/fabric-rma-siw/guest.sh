#!/bin/bash
# shellcheck disable=SC2153 # LAB_HOST_IP comes from the guest's /init
# g1 of fabric-rma-siw: libfabric's verbs provider on siw0 running the host-built
# /lab/lib/fi_rma_peer (after flag rma.built): a) the verbs target for the host's softrnic
# initiator (rma.a.ready once it listens), b) the verbs initiator against the host's softrnic
# target (after rma.b.ready; exit status -> rma.b.done).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../../guest/lab-guest.sh
. /lab/lib/lab-guest.sh
P=/lab/lib/fi_rma_peer
iters=10 # RMA_ITERS of scenario.sh
rc=0
if ! lab_wait rma.built 180; then
    lab_signal rma.a.ready
    lab_signal rma.b.done 127
    exit 1
fi
"$P" -p verbs -P 47700 -n "$iters" >target-a.log 2>&1 &
pid=$!
lab_wait_listen 47700 30 || true
lab_signal rma.a.ready
lab_wait rma.a.done 150 || rc=1
lab_reap "$pid" 30 rma-target-a
cat target-a.log
glog "a) verbs target: exit status $LAB_REAP_STATUS"
[[ $LAB_REAP_STATUS -eq 0 ]] && grep -q '^rma verified$' target-a.log || rc=1
lab_wait rma.b.ready 120 || rc=1
crc=0
lab_step rma-initiator-b timeout 120 "$P" -p verbs -P 47701 -n "$iters" "$LAB_HOST_IP" >initiator-b.log 2>&1 || crc=$?
cat initiator-b.log
if ! grep -q '^rma verified$' initiator-b.log && [[ $crc -eq 0 ]]; then crc=1; fi
lab_signal rma.b.done "$crc"
[[ $crc -eq 0 ]] || rc=1
lab_wait host.exit 60 || true
exit "$rc"
