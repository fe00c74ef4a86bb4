#!/bin/bash
# g1: the stack's kernel SCTP tests on the kernel's SCTP (loopback); see scenario.sh.
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=../../guest/lab-guest.sh
. /lab/lib/lab-guest.sh
modprobe sctp || { glog "no sctp module"; exit 1; }
cd "$LAB_OUT" || exit 1
export RUST_LOG=${RUST_LOG:-warn} SOFTRNIC_REQUIRE_KERNEL_SCTP=1
rc=0
# Each line of the list: a test binary and the test to run.
while read -r bin name; do
    "/lab/lib/$bin" --exact "$name" --test-threads=1 >"$bin.txt" 2>&1 </dev/null || rc=1
    cat "$bin.txt"
done </lab/lib/ksctp-tests.txt
exit "$rc"
