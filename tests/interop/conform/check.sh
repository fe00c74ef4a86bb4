#!/usr/bin/env bash
# The check of the conform-siw* scenarios, run by lab.sh's scenario_check in the results
# directory: check.sh VARIANT (stock or a siw-variants/ patch name).
#   1. the guest kernel must not have crashed (a BUG or Oops on g1's console makes every later
#      case meaningless: the lab once saw iw_cm's BUG() in cm_close_handler this way);
#   2. both JSON reports must match conform/expect/VARIANT.json (check_conform.py: every case
#      of the catalogue with the expected verdict, and the expected reason for each non-PASS).
# Also prints each report's summary line and the run time of both phases.
set -uo pipefail
variant=${1:?usage: check.sh VARIANT}
: "${LAB_ROOT:?}" "${LAB_SOFTRNIC:?}"
rc=0
if grep -E "kernel BUG|Oops:|general protection fault" g1-console.log 2>/dev/null; then
    echo "FAIL: the guest kernel crashed during the run (g1-console.log); the verdicts after it are void"
    rc=1
fi
grep -h "run: exit status" host.log 2>/dev/null
python3 "$LAB_ROOT/conform/check_conform.py" "$LAB_ROOT/conform/expect/$variant.json" \
    --softrnic "$LAB_SOFTRNIC" --responder host/responder.json --initiator host/initiator.json || rc=1
exit "$rc"
