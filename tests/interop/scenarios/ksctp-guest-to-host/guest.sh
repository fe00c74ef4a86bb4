#!/bin/bash
# shellcheck disable=SC2153 # LAB_HOST_IP comes from the guest's /init
# g1: softrnic over the kernel's SCTP (--transport ksctp); see scenario.sh and runs.sh.
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=../../guest/lab-guest.sh
. /lab/lib/lab-guest.sh
# shellcheck source-path=SCRIPTDIR source=runs.sh
. /lab/scenario/runs.sh
S=/lab/lib/softrnic
# The kernel SCTP carrier says what it does in the logs (notifications, setup, closes).
export RUST_LOG=${RUST_LOG:-warn,stack::transport::ksctp=debug}
modprobe sctp || { glog "no sctp module"; exit 1; }
cd "$LAB_OUT" || exit 1
T=(--transport ksctp --bind "$LAB_ADDR")
# wait_sctp_listen PORT: until an SCTP endpoint has local port PORT (/proc/net/sctp/eps:
# LPORT is the 6th column), at most 20 s.
wait_sctp_listen() {
    local i
    for ((i = 0; i < 200; i++)); do
        awk -v p="$1" '$6 == p { f = 1 } END { exit !f }' /proc/net/sctp/eps 2>/dev/null && return 0
        sleep 0.1
    done
    glog "no SCTP endpoint on port $1"
    top -b -n 1 | head -15 >>top.txt 2>&1 || true
    return 1
}
ksctp_log() { glog "$1"; }
ksctp_listening() { wait_sctp_listen "$1"; }
ksctp_ready() { lab_signal "$1"; }
ksctp_await() { lab_wait "$1" 300; }
ksctp_load_runs /lab/scenario/tests.txt || exit 1
# A: our servers on kernel SCTP, the host's clients.
ksctp_servers a
# B: the host's servers, our clients on kernel SCTP.
ksctp_clients b "$LAB_HOST_IP"
cat ksctp-results.txt
cat /proc/net/sctp/snmp >sctp-snmp.txt 2>&1 || true
exit "$KSCTP_RC"
