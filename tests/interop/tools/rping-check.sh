# shellcheck shell=bash
# Sourced by the rping scenarios' scenario.sh. rping_check N WHAT: the capture decodes (and
# agrees with tshark where it applies: tools/decode-crosscheck.sh) and holds exactly N RDMA Read
# Requests — one per ping, since every rping ping reads the client's buffer (RFC 5040 §4.4);
# WHAT says which runs make up N.
rping_check() {
    local want=$1 what=$2 n
    "$LAB_TOOLS/decode-crosscheck.sh" "$LAB_PCAP" || return 1
    n=$("$LAB_SOFTRNIC" decode --counts "$LAB_PCAP" | awk '$1 == "0x01" { print $3 }')
    if [[ ${n:-0} -ne $want ]]; then echo "FAIL: expected $want RDMA Read Requests, found ${n:-0}"; return 1; fi
    echo "ok: $want RDMA Read Requests ($what)"
}
