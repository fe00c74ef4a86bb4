# shellcheck shell=bash disable=SC2034,SC2016,SC2154 # variables read by lab.sh; the host command is expanded there
# RFC 5043 over the kernel's SCTP inside a guest, both ends softrnic's ksctp:// carrier on the
# guest's loopback, with two of the stack's own tests (built on the host, run in g1 with
# SOFTRNIC_REQUIRE_KERNEL_SCTP=1 so that they cannot pass without a kernel SCTP):
# `rnic_ksctp::rfc5043_every_operation_over_kernel_sctp` sets up the DDP Stream Session with
# private data and runs Send, RDMA Write, RDMA Read, an atomic and Send with Invalidate with
# every byte checked, then a graceful disconnect;
# `progress_threads::kernel_sctp_associations_are_placed_on_further_progress_threads` spreads
# six associations over two progress threads on both sides and runs Write/Send/Read on each.
# The host's build has no kernel SCTP to run them on; this is where they run.
SCENARIO_GUESTS=1
SCENARIO_DIRECTION="softrnic on kernel SCTP <-> softrnic on kernel SCTP (g1 loopback)"
SCENARIO_TIMEOUT=300
SCENARIO_HOST_CMD=''

# The stack's tests this scenario runs in the guest: binary and test name.
KSCTP_TESTS=(
    "rnic_ksctp rfc5043_every_operation_over_kernel_sctp"
    "progress_threads kernel_sctp_associations_are_placed_on_further_progress_threads"
)

# Builds the test binaries (cargo's own target directory; the CI run has built them already)
# and puts them, with the list above (ksctp-tests.txt), in the guests' share.
scenario_requires() {
    local repo bins t exe tests=()
    repo=$(cd "$LAB_ROOT/../.." && pwd)
    command -v cargo >/dev/null || { echo "no cargo to build the stack's tests"; return 1; }
    for t in "${KSCTP_TESTS[@]}"; do tests+=(--test "${t%% *}"); done
    bins=$(cd "$repo" && cargo test -q --no-run -p softrnic-stack "${tests[@]}" \
        --message-format json 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"]:
        print(m["target"]["name"], m["executable"])
')
    mkdir -p "$results/lib"
    for t in "${KSCTP_TESTS[@]}"; do
        t=${t%% *}
        exe=$(awk -v t="$t" '$1 == t { print $2 }' <<<"$bins")
        [[ -x $exe ]] || { echo "cannot build the stack's $t test"; return 1; }
        install -m 0755 "$exe" "$results/lib/$t"
    done
    printf '%s\n' "${KSCTP_TESTS[@]}" >"$results/lib/ksctp-tests.txt"
}

scenario_check() {
    local t bin name out
    for t in "${KSCTP_TESTS[@]}"; do
        read -r bin name <<<"$t"
        out=$LAB_RESULTS/out/g1/$bin.txt
        grep -q "^test $name \.\.\. ok\$" "$out" ||
            { echo "FAIL: $name did not pass in the guest (out/g1/$bin.txt)"; return 1; }
        grep -q '^test result: ok\. 1 passed; 0 failed' "$out" ||
            { echo "FAIL: no 'test result: ok. 1 passed' in out/g1/$bin.txt"; return 1; }
        echo "ok: $name passed in the guest"
    done
}
