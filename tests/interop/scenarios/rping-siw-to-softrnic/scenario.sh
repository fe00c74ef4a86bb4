# shellcheck shell=bash disable=SC2034,SC2016 # variables read by lab.sh; the host command is expanded there
# siw's rping client (g1) -> `softrnic rping -s -V` on the host end (10.99.0.1:7174), once per
# size: `rping -c -V -C 10 -S SIZE` with SIZE 64, 4096 and 65535 (rping's largest: it refuses
# 65536), one softrnic server run per size, in one guest session. Passes when every siw client
# and every softrnic server exits 0 (siw validated the echo with -V), and the capture decodes
# with `softrnic decode` without errors and with the RDMAP opcode counts tshark sees: per run
# 10 RDMA Read Requests, 20 Sends each way, and Read Responses / Writes.
SCENARIO_GUESTS=1
SCENARIO_DIRECTION="siw(g1) -> softrnic(host)"
SCENARIO_TIMEOUT=240
RPING_SIZES="64 4096 65535"
SCENARIO_HOST_CMD='RPING_SIZES="'$RPING_SIZES'" bash "$LAB_SCENARIO_DIR/host.sh"'

scenario_check() {
    "$LAB_TOOLS/decode-crosscheck.sh" "$LAB_PCAP" || return 1
    local n
    n=$("$LAB_SOFTRNIC" decode --counts "$LAB_PCAP" | awk '$1 == "0x01" { print $3 }')
    # 3 runs x 10 pings, one RDMA Read Request each (RFC 5040 §4.4).
    if [[ ${n:-0} -ne 30 ]]; then echo "FAIL: expected 30 RDMA Read Requests, found ${n:-0}"; return 1; fi
    echo "ok: 30 RDMA Read Requests (3 runs x 10 pings)"
}
