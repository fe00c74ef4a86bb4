#!/bin/bash
# g1: the stack's rnic_ksctp test on the kernel's SCTP (loopback); see scenario.sh.
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=../../guest/lab-guest.sh
. /lab/lib/lab-guest.sh
modprobe sctp || { glog "no sctp module"; exit 1; }
cd "$LAB_OUT" || exit 1
export RUST_LOG=${RUST_LOG:-warn} SOFTRNIC_REQUIRE_KERNEL_SCTP=1
/lab/lib/rnic_ksctp --exact rfc5043_every_operation_over_kernel_sctp --test-threads=1 \
    >rnic_ksctp.txt 2>&1
rc=$?
cat rnic_ksctp.txt
exit "$rc"
