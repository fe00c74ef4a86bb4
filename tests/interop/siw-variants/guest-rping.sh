#!/bin/bash
# shellcheck disable=SC2153 # LAB_ADDR, LAB_HOST_IP come from the guest's /init
# g1 side of the MPA-variant scenarios (scenarios/mpa-*/ and scenarios/profile-*/ name it with
# SCENARIO_GUEST_SCRIPT; lab.sh installs it as the run's guest.sh).
#   1. siw responder: `rping -s -V -C 5 -p 7174` for softrnic's client (flag siw.ready);
#   2. siw initiator: after the host's flag softrnic.ready, `rping -c -V -C 5` to the host's
#      softrnic server on 7175.
# Exit: 0 when both siw rping runs succeeded.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../guest/lab-guest.sh
. /lab/lib/lab-guest.sh
COUNT=5
rping -s -V -C "$COUNT" -a "$LAB_ADDR" -p 7174 >rping-server.log 2>&1 &
pid=$!
lab_wait_listen 7174 30
lab_signal siw.ready
# The server ends after one client; stop waiting once the host's client has finished.
lab_step siw-server timeout 100 bash -c "while kill -0 $pid 2>/dev/null && [[ ! -e $LAB_FLAGS/softrnic.client.done ]]; do sleep 0.2; done; sleep 2"
kill "$pid" 2>/dev/null || true
rc1=0
wait "$pid" || rc1=$?
cat rping-server.log
echo "rping -s exit status $rc1"
if [[ $rc1 -ne 0 && -e $LAB_FLAGS/siw.server.may.fail ]] && grep -q "post send error" rping-server.log; then
    echo "expected: no RDMA Read for siw's rping server in MPA revision 1 (see host-rping.sh)"
    rc1=0
fi

lab_wait softrnic.ready 120
rc2=0
lab_step siw-client timeout 90 rping -c -V -C "$COUNT" -a "$LAB_HOST_IP" -p 7175 || rc2=$?
echo "rping -c exit status $rc2"
[[ $rc1 -eq 0 ]] || exit "$rc1"
exit "$rc2"
