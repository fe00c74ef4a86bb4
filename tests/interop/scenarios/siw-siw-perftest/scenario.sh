# shellcheck shell=bash disable=SC2034,SC2016 # variables read by lab.sh; the host command is expanded there
# siw <-> siw reference: perftest over rdma_cm (-R) between two guests, g1 server, g2 client:
# ib_send_bw, ib_write_bw, ib_read_bw, each with a small iteration count. Passes when every
# tool succeeds on both ends and the capture holds the MPA exchanges (perftest opens one
# rdma_cm connection per tool plus, for ib_read_bw, one with IRD/ORD 128/128).
# siw 6.1 accept race (RECIPE.md): a tool whose first Send is lost hangs; guest.sh then
# retries that tool once and records it in out/g2/retries.txt (reported, not hidden).
SCENARIO_GUESTS=2
SCENARIO_DIRECTION="siw(g2) -> siw(g1)"
SCENARIO_TIMEOUT=300
SCENARIO_HOST_CMD=""

scenario_check() {
    python3 "$LAB_TOOLS/mpa_lab.py" expect-pcap "$LAB_PCAP" --min-requests 3 --min-replies 3 \
        --request-from "$LAB_G2_IP" || return 1
    # The tools must have produced the RDMAP traffic they are named after (decoded by tshark).
    if [[ -s rdmap-opcodes.txt ]]; then
        cat rdmap-opcodes.txt
        for op in send write read_request read_response; do
            grep -q "^$op [1-9]" rdmap-opcodes.txt || { echo "FAIL: no RDMAP $op message in the capture"; return 1; }
        done
    else
        echo "note: no tshark, RDMAP opcodes not checked"
    fi
    if [[ -s out/g2/retries.txt ]]; then
        echo "note: retried after the siw 6.1 accept race: $(tr '\n' ' ' <out/g2/retries.txt)"
    fi
    return 0
}
