# shellcheck shell=bash disable=SC2034,SC2016,SC2154 # variables read by lab.sh; the host command is expanded there
# RFC 5043 over the kernel's SCTP inside a guest, both ends softrnic's ksctp:// carrier on the
# guest's loopback: the stack's own test `rnic_ksctp::rfc5043_every_operation_over_kernel_sctp`
# (built on the host, run in g1 with SOFTRNIC_REQUIRE_KERNEL_SCTP=1 so that it cannot pass
# without a kernel SCTP) sets up the DDP Stream Session with private data and runs Send, RDMA
# Write, RDMA Read, an atomic and Send with Invalidate with every byte checked, then a graceful
# disconnect. The host's build has no kernel SCTP to run it on; this is where it runs.
SCENARIO_GUESTS=1
SCENARIO_DIRECTION="softrnic on kernel SCTP <-> softrnic on kernel SCTP (g1 loopback)"
SCENARIO_TIMEOUT=300
SCENARIO_HOST_CMD=''

# Builds the test binary (cargo's own target directory; the CI run has built it already) and
# puts it in the guests' share.
scenario_requires() {
    local repo exe
    repo=$(cd "$LAB_ROOT/../.." && pwd)
    command -v cargo >/dev/null || { echo "no cargo to build the stack's rnic_ksctp test"; return 1; }
    exe=$(cd "$repo" && cargo test -q --no-run -p softrnic-stack --test rnic_ksctp \
        --message-format json 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "rnic_ksctp":
        print(m["executable"])
')
    [[ -x $exe ]] || { echo "cannot build the stack's rnic_ksctp test"; return 1; }
    mkdir -p "$results/lib"
    install -m 0755 "$exe" "$results/lib/rnic_ksctp"
}

scenario_check() {
    local out=$LAB_RESULTS/out/g1/rnic_ksctp.txt
    grep -q '^test rfc5043_every_operation_over_kernel_sctp \.\.\. ok$' "$out" ||
        { echo "FAIL: the test did not pass in the guest (out/g1/rnic_ksctp.txt)"; return 1; }
    grep -q '^test result: ok\. 1 passed; 0 failed' "$out" ||
        { echo "FAIL: no 'test result: ok. 1 passed' in out/g1/rnic_ksctp.txt"; return 1; }
}
