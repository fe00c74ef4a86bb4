#!/bin/bash
# shellcheck disable=SC2153 # LAB_HOST_IP comes from the guest's /init
# g1 of fabric-pingpong-siw: libfabric's verbs provider on siw0. Lists it (fi_info -p verbs),
# then a) one `fi_pingpong -p verbs` server per size for the host's softrnic client (flag
# pp.a<i>.ready once its control port listens), b) one `fi_pingpong -p verbs` client per size
# against the host's softrnic server (after pp.b<i>.ready; exit status -> pp.b<i>.done).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../../guest/lab-guest.sh
. /lab/lib/lab-guest.sh
sizes="64 4096 65536"
iters=50
rc=0
if ! command -v fi_pingpong >/dev/null; then
    glog "no fi_pingpong in the guest image (libfabric-bin; rebuild with build-guest.sh)"
    for i in 0 1 2; do lab_signal "pp.a$i.ready"; lab_signal "pp.b$i.done" 127; done
    exit 1
fi
lab_step fi-info-verbs fi_info -p verbs -t FI_EP_MSG >fi_info-verbs.txt 2>&1 || rc=1
sed -n '1,6p' fi_info-verbs.txt
grep -q 'domain: siw0' fi_info-verbs.txt || { glog "fi_info -p verbs does not list siw0"; rc=1; }
i=0
for size in $sizes; do
    port=$((47600 + i))
    fi_pingpong -p verbs -e msg -c -I "$iters" -S "$size" -B "$port" >"server-a$i.log" 2>&1 &
    pid=$!
    lab_wait_listen "$port" 30 || true
    lab_signal "pp.a$i.ready"
    lab_wait "pp.a$i.done" 150 || rc=1
    lab_reap "$pid" 30 "pp-server-a$i-S$size"
    src=$LAB_REAP_STATUS
    tail -n 2 "server-a$i.log" | cut -c1-120
    glog "a) verbs fi_pingpong server -S $size: exit status $src"
    [[ $src -eq 0 ]] || rc=1
    i=$((i + 1))
done
i=0
for size in $sizes; do
    lab_wait "pp.b$i.ready" 120 || { rc=1; break; }
    crc=0
    lab_step "pp-client-b$i-S$size" timeout 120 fi_pingpong -p verbs -e msg -c -I "$iters" -S "$size" \
        -P $((47610 + i)) "$LAB_HOST_IP" >"client-b$i.log" 2>&1 || crc=$?
    tail -n 2 "client-b$i.log" | cut -c1-120
    lab_signal "pp.b$i.done" "$crc"
    [[ $crc -eq 0 ]] || rc=1
    i=$((i + 1))
done
lab_wait host.exit 60 || true
exit "$rc"
