#!/bin/bash
# Host side of ksctp-guest-to-host: softrnic over its own SCTP (raw IPv4); see scenario.sh and
# runs.sh.
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=runs.sh
. "$LAB_SCENARIO_DIR/runs.sh"
S=${LAB_SOFTRNIC:?}
T=(--transport sctp --bind "$LAB_HOST_IP")
ksctp_log() { echo "== $1"; }
ksctp_listening() { sleep 1; }
ksctp_ready() { touch "$LAB_FLAGS/$1"; }
ksctp_await() { "$LAB_TOOLS/wait-flag" "$1" 240; }
ksctp_load_runs "$LAB_SCENARIO_DIR/tests.txt" || exit 1
# A: the guest's servers, our clients.
ksctp_clients a "$LAB_G1_IP"
# B: our servers, the guest's clients.
ksctp_servers b
cat ksctp-results.txt
exit "$KSCTP_RC"
