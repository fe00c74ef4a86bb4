# shellcheck shell=bash disable=SC2034,SC2016 # variables read by lab.sh; the host command is expanded there
# RMA between the softrnic libfabric provider on the host and libfabric's own verbs provider on
# Linux siw in g1, both ways: fabric/tests/fi_rma_peer.c (built on the host against
# libfabric, run in the guest from the share) — each side registers a buffer and sends its
# address and key in the CM data of connect and accept; the initiator fi_write()s a pattern
# into the target's buffer, fi_read()s the target's pattern back and checks every byte, and
# asks the target (a Send) to check every byte it wrote; 64, 4096 and 65536 octets, RMA_ITERS
# times each:
#   a) softrnic initiator (host) -> verbs target on siw (g1), port 47700;
#   b) verbs initiator on siw (g1) -> softrnic target (host), port 47701.
# Passes when all four processes print "rma verified" and exit 0, and the capture decodes with
# `softrnic decode` without errors, tshark agreeing, with at least 2 x 3 x RMA_ITERS RDMA
# Write segments and Read Requests (the decoder counts DDP segments).
SCENARIO_GUESTS=1
SCENARIO_DIRECTION="softrnic provider(host) <-> libfabric verbs on siw(g1), RMA both ways"
SCENARIO_TIMEOUT=420
RMA_ITERS=10
SCENARIO_HOST_CMD='RMA_ITERS='$RMA_ITERS' bash "$LAB_SCENARIO_DIR/host.sh"'

scenario_requires() { lab_fabric_requires; }

scenario_check() {
    "$LAB_TOOLS/decode-crosscheck.sh" "$LAB_PCAP" || return 1
    local want op n counts
    want=$((2 * 3 * RMA_ITERS))
    counts=$("$LAB_SOFTRNIC" decode --counts "$LAB_PCAP")
    for op in 0x00 0x01; do
        n=$(awk -v op="$op" '$1 == op { print $3 }' <<<"$counts")
        if [[ ${n:-0} -lt $want ]]; then
            echo "FAIL: expected at least $want RDMAP segments of opcode $op (Write, Read Request), found ${n:-0}"
            return 1
        fi
        echo "ok: $n RDMAP segments of opcode $op"
    done
}
