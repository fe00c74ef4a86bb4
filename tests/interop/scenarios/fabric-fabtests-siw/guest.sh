#!/bin/bash
# shellcheck disable=SC2153 # LAB_HOST_IP comes from the guest's /init
# g1 of fabric-fabtests-siw: the host's fabtests (/lab/lib/fabtests, after flag ft.ready)
# with libfabric's verbs provider on siw0; for test N of tests.txt: a) the server for the
# host's softrnic client (ft.a<N>.ready once it listens; its exit status -> ft.a<N>.server),
# b) the client against the host's softrnic server (after ft.b<N>.ready; -> ft.b<N>.done).
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=../../guest/lab-guest.sh
. /lab/lib/lab-guest.sh
lab_wait ft.ready 120 || exit 1
bin=/lab/lib/fabtests
rc=0
n=0
while read -r name args; do
    [[ -n $name ]] || continue
    port=$((9300 + 2 * n))
    # shellcheck disable=SC2086 # ARGS are words
    "$bin/$name" -p verbs $args -B "$port" >"a$n-server.log" 2>&1 &
    pid=$!
    lab_wait_listen "$port" 30 || true
    lab_signal "ft.a$n.ready"
    lab_wait "ft.a$n.done" 180 || rc=1
    src=0
    timeout 30 tail --pid="$pid" -f /dev/null || { kill -9 "$pid" 2>/dev/null || true; src=124; }
    [[ $src -eq 0 ]] && { wait "$pid" || src=$?; }
    glog "a) verbs server $name $args: exit status $src"
    [[ $src -eq 0 ]] || tail -n 4 "a$n-server.log"
    lab_signal "ft.a$n.server" "$src"
    lab_wait "ft.b$n.ready" 180 || { rc=1; break; }
    crc=0
    # shellcheck disable=SC2086
    lab_step "ft-b$n-$name" timeout 150 "$bin/$name" -p verbs $args -P "$((port + 1))" "$LAB_HOST_IP" \
        >"b$n-client.log" 2>&1 || crc=$?
    [[ $crc -eq 0 ]] || tail -n 4 "b$n-client.log"
    lab_signal "ft.b$n.done" "$crc"
    n=$((n + 1))
done <"$bin/tests.txt"
lab_wait host.exit 60 || true
# The tests' exit statuses went to the host, which judges them (known-failures.txt);
# this side fails only when the two sides lost step.
exit "$rc"
