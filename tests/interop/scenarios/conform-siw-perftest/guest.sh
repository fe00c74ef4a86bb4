#!/bin/bash
# g1 of conform-siw-perftest: for case N, a fresh `ib_write_bw -R -F -d siw0 -p 18515` (flag
# srv.N.ready once it listens), stopped when the host's case is over (flag srv.N.done: the case
# may have left it waiting on purpose), until the host's flag conform.done. Exit: 0 (the
# verdicts come from the host's report).
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=../../guest/lab-guest.sh
. /lab/lib/lab-guest.sh
n=0
over() { [[ -e $LAB_FLAGS/$1 || -e $LAB_FLAGS/conform.done || -e $LAB_FLAGS/host.exit ]]; }
while ! over conform.done; do
    n=$((n + 1))
    ib_write_bw -R -F -d siw0 -p 18515 >"server-$n.log" 2>&1 &
    pid=$!
    lab_wait_listen 18515 30 || true
    lab_signal "srv.$n.ready"
    while ! over "srv.$n.done"; do sleep 0.1; done
    kill "$pid" 2>/dev/null
    lab_reap "$pid" 10
    echo "ib_write_bw $n: exit status $LAB_REAP_STATUS" >>servers.txt
done
glog "$n ib_write_bw servers"
exit 0
