#!/bin/bash
# shellcheck disable=SC2153 # LAB_HOST_IP, LAB_FLAGS come from the guest's /init
# g1 of conform-siw-perftest: perftest's -R tools as the application behind every case.
#   1. peer as responder: for case N, a fresh `ib_write_bw -R -F -d siw0 -p 18515` (flag
#      srv.N.ready once it listens), stopped when the host's case is over (flag srv.N.done: the
#      case may have left it waiting on purpose), until the host's flag responder.done;
#   2. peer as initiator: after the host's flag conform.listening, one
#      `ib_write_bw -R -F -d siw0 -p 18516 HOST` client after the other (each under `timeout`:
#      a client the runner left waiting on purpose never ends by itself), until the host's
#      flag conform.done.
# Exit: 0 (the verdicts come from the host's reports).
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=../../guest/lab-guest.sh
. /lab/lib/lab-guest.sh
n=0
over() { [[ -e $LAB_FLAGS/$1 || -e $LAB_FLAGS/responder.done || -e $LAB_FLAGS/host.exit ]]; }
while ! over responder.done; do
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

if lab_wait conform.listening 60; then
    n=0
    while [[ ! -e $LAB_FLAGS/conform.done && ! -e $LAB_FLAGS/host.exit ]]; do
        n=$((n + 1))
        c=0
        timeout 20 ib_write_bw -R -F -d siw0 -p 18516 "$LAB_HOST_IP" >>clients.log 2>&1 || c=$?
        echo "ib_write_bw client run $n: exit status $c" >>clients.log
        sleep 0.3
    done
    glog "$n ib_write_bw client runs"
    tail -n 40 clients.log
fi
exit 0
