# shellcheck shell=bash disable=SC2034,SC2016 # variables read by lab.sh; the host command is expanded there
# libfabric's fabtests (1.17) between the softrnic provider on the host and libfabric's verbs
# provider on Linux siw in g1, both ways, one test per line of tests.txt: fi_cm_data (CM
# data of 1 to 32 bytes in connect, accept and reject, checked byte by byte at the other end:
# the verbs provider's CM data layout on both sides), fi_msg, fi_msg_bw, and fi_rma_bw with
# 4 KiB RDMA Write, RDMA Read and Write with remote CQ data (RFC 7306 Immediate Data at the
# softrnic end). For each test: a) the verbs server in g1 (flag ft.a<N>.ready), the softrnic
# client on the host (exit status -> ft.a<N>.done); b) the softrnic server on the host
# (ft.b<N>.ready), the verbs client in g1 (ft.b<N>.done).
# fabtests are not packaged by Debian: SOFTRNIC_LAB_FABTESTS names a directory built by
# fabric/fabtests.sh from a libfabric 1.17 source tree (the same binaries run on the host and,
# through the share, in the guest: both are Debian bookworm with libfabric1 1.17); without it
# the scenario is SKIPPED. Passes when every test exits 0 on both sides both ways (rows listed in
# known-failures.txt: XFAIL, a race explained there, which such a row wins at times), and the
# capture decodes with `softrnic decode` without errors, tshark agreeing, and holds RDMA
# Writes, RDMA Read Requests and Read Responses.
SCENARIO_GUESTS=1
SCENARIO_DIRECTION="fabtests: softrnic provider(host) <-> libfabric verbs on siw(g1), both ways"
SCENARIO_TIMEOUT=600
SCENARIO_HOST_CMD='FABTESTS_DIR="'${SOFTRNIC_LAB_FABTESTS:-}'" bash "$LAB_SCENARIO_DIR/host.sh"'

scenario_requires() {
    [[ -n ${SOFTRNIC_LAB_FABTESTS:-} ]] || { echo "SOFTRNIC_LAB_FABTESTS is not set (fabtests built by fabric/fabtests.sh)"; return 1; }
    [[ -x $SOFTRNIC_LAB_FABTESTS/fi_rma_bw ]] || { echo "no fabtests in $SOFTRNIC_LAB_FABTESTS"; return 1; }
    lab_fabric_requires
}

scenario_check() {
    "$LAB_TOOLS/decode-crosscheck.sh" "$LAB_PCAP" || return 1
    local counts op n fail=0
    counts=$("$LAB_SOFTRNIC" decode --counts "$LAB_PCAP")
    for op in 0x00 0x01 0x02; do
        n=$(awk -v o="$op" '$1 == o { print $3 }' <<<"$counts")
        if [[ ${n:-0} -lt 1 ]]; then echo "FAIL: no RDMAP opcode $op in the capture"; fail=1; fi
    done
    [[ $fail -eq 0 ]] && echo "ok: RDMA Writes, Read Requests and Read Responses in the capture"
    return "$fail"
}
