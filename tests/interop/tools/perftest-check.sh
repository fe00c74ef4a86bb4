# shellcheck shell=bash
# Sourced by the perftest scenarios' scenario.sh. pt_check FROM checks their capture: two MPA
# connections (control + test) per line of the scenario's runs.sh, requested from FROM; 0
# decode errors and tshark's opcode counts (tools/decode-crosscheck.sh); Sends, Writes, Read
# Requests and Read Responses all present. Sets PT_RUN_COUNT.
pt_check() {
    local from=$1 counts op
    # shellcheck source=/dev/null
    . "$LAB_SCENARIO_DIR/runs.sh"
    PT_RUN_COUNT=$(pt_runs | wc -l)
    python3 "$LAB_TOOLS/mpa_lab.py" expect-pcap "$LAB_PCAP" --min-requests "$((2 * PT_RUN_COUNT))" \
        --min-replies "$((2 * PT_RUN_COUNT))" --request-from "$from" || return 1
    "$LAB_TOOLS/decode-crosscheck.sh" "$LAB_PCAP" || return 1
    counts=$("$LAB_SOFTRNIC" decode --counts "$LAB_PCAP")
    for op in 0x00 0x01 0x02 0x03; do
        echo "$counts" | awk -v o="$op" '$1 == o && $3 > 0 { f = 1 } END { exit !f }' ||
            { echo "FAIL: no RDMAP opcode $op in the capture"; return 1; }
    done
}
