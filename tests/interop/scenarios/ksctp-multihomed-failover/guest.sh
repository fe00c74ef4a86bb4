#!/bin/bash
# g1: a multihomed write-bw client over the kernel's SCTP (--transport ksctp); see scenario.sh.
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=../../guest/lab-guest.sh
. /lab/lib/lab-guest.sh
S=/lab/lib/softrnic
# The kernel SCTP carrier says what it does in the logs (notifications, setup, closes).
export RUST_LOG=${RUST_LOG:-warn,stack::transport::ksctp=debug}
modprobe sctp || { glog "no sctp module"; exit 1; }
lab_eth1_up || exit 1
cd "$LAB_OUT" || exit 1
# Quick failure detection (RFC 9260 §8.2, §16 protocol parameters lowered for the test).
sysctl -qw net.sctp.rto_min=200 net.sctp.rto_max=1000 net.sctp.rto_initial=500 \
    net.sctp.path_max_retrans=2 net.sctp.hb_interval=500
rc=0
lab_wait h1.ready 120 || exit 1
lab_signal g1.go
lab_step failover timeout 120 "$S" write-bw "${LAB_HOST_IP:?},$LAB_HOST_IP1" -s 65536 -D 8 \
    --transport ksctp --bind "${LAB_ADDR:?},$LAB_ADDR1" </dev/null >failover.txt 2>&1 || rc=1
cat failover.txt
cat /proc/net/sctp/snmp >sctp-snmp.txt 2>&1 || true
exit "$rc"
