#!/usr/bin/env bash
# decode-crosscheck.sh CAPTURE: for scenario checks. `$LAB_SOFTRNIC decode` must decode the
# capture with zero errors, and its RDMAP per-opcode counts must equal what tshark counts
# (scripts/tshark-crosscheck.sh with this binary). Without tshark only the decode is checked
# (the cross-check prints SKIPPED); with LAB_TSHARK_NOT_APPLICABLE set (the AF_XDP scenarios,
# tools/xdp-requires.sh) only the decode is checked and the reason is printed. Exit 1 on any
# difference or decode error.
set -euo pipefail
cap=${1:?usage: decode-crosscheck.sh CAPTURE}
bin=${LAB_SOFTRNIC:?LAB_SOFTRNIC is not set (run from lab.sh)}
repo=$(cd "$(dirname "$0")/../../.." && pwd)
fail=0
"$bin" decode --counts "$cap" >/dev/null || { echo "FAIL: softrnic decode reported errors on $cap"; fail=1; }
"$bin" decode --summary "$cap" | sed -n '/^total:/p'
if [[ -n ${LAB_TSHARK_NOT_APPLICABLE:-} ]]; then
    echo "tshark cross-check not applicable: $LAB_TSHARK_NOT_APPLICABLE"
else
    SOFTRNIC_BIN=$bin bash "$repo/scripts/tshark-crosscheck.sh" "$cap" || fail=1
fi
if [[ $fail -ne 0 ]]; then echo "FAIL: softrnic decode and tshark disagree (or decode errors)"; fi
exit "$fail"
