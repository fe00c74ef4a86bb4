# shellcheck shell=bash disable=SC2034,SC2016 # variables read by lab.sh; the host command is expanded there
# softrnic as rping server on the host makes one RDMA operation on siw's advertised buffer
# invalid, siw's rping client (g1) connects once per case:
#   write bad-stag, write out-of-bounds, read bad-stag, read out-of-bounds
# (`softrnic rping -s --inject bad-stag|out-of-bounds --inject-at write|read`; the bad STag is
# one siw never advertised, the out-of-bounds access starts at the buffer's last byte).
# siw must answer with a Terminate: DDP Tagged Buffer Error Invalid STag / Base or bounds
# violation for the Writes (RFC 5041 §7.2), RDMAP Remote Protection Error with the same codes
# for the Read Requests (RFC 5040 §4.8). softrnic decodes and judges it and exits 3 ("expected
# Terminate received").
# Finding (siw 6.1 on x86): siw's Terminate Control is laid out by C bitfields from the low bits,
# so Layer and Error Type are exchanged and M/D/R sit in reserved bits: the Write Terminates
# read right (layer 1 type 1 is its own exchange) but the Read Request ones arrive as layer 1
# type 0 ("DDP Local Catastrophic" / undefined) instead of RDMAP Remote Protection; softrnic says
# so and exits 5. Passes when the Writes give 3 and the Reads 5, and the capture holds 4
# Terminates from siw and decodes without errors, with tshark's opcode counts. The check prints
# each Terminate Control word as sent (RFC form for M=D=1: "11 00 c0 00"; siw: "11 00 03 00").
SCENARIO_GUESTS=1
SCENARIO_DIRECTION="softrnic(host) errors -> siw(g1)"
SCENARIO_TIMEOUT=240
SCENARIO_HOST_CMD='bash "$LAB_SCENARIO_DIR/host.sh"'

scenario_check() {
    "$LAB_TOOLS/decode-crosscheck.sh" "$LAB_PCAP" || return 1
    local n
    n=$("$LAB_SOFTRNIC" decode --counts "$LAB_PCAP" | awk '$1 == "0x07" { print $3 }')
    if [[ ${n:-0} -lt 4 ]]; then echo "FAIL: expected 4 Terminates, found ${n:-0}"; return 1; fi
    "$LAB_SOFTRNIC" decode "$LAB_PCAP" | grep 'Terminate ' | cut -c1-200
    # The Terminate Control word (ULPDU octets 18..21, after the 18-octet untagged DDP header).
    "$LAB_SOFTRNIC" decode --hex "$LAB_PCAP" | awk '
        / Terminate / { want = 1; next }
        want && $1 == "0010" { printf "siw Terminate Control on the wire: %s %s %s %s\n", $4, $5, $6, $7; want = 0 }'
    echo "ok: $n Terminates in the capture"
}
