# shellcheck shell=bash
# Sourced by the perftest scenarios' scenario.sh (pt_check) and by the host.sh of those where
# softrnic is the -R server (pt_serve). pt_check FROM checks their capture: two MPA
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

# pt_serve TAG PORT PID LOG: the host side of one run once softrnic's -R server (process PID,
# output in LOG) is started: raises the flag TAG.ready (holding PORT) once LOG says "Waiting
# for client" (or after 10 s), waits for the server to exit and for the guest's TAG.done. Sets
# PT_SRC (the server's exit status) and PT_CRC (the guest client's, from its flag; "none" when
# the flag never came).
# shellcheck disable=SC2034 # PT_SRC and PT_CRC are read by the caller
pt_serve() {
    local tag=$1 port=$2 pid=$3 log=$4
    for _ in $(seq 200); do grep -q "Waiting for client" "$log" 2>/dev/null && break; sleep 0.05; done
    echo "$port" >"$LAB_FLAGS/$tag.ready"
    PT_SRC=0
    wait "$pid" || PT_SRC=$?
    for _ in $(seq 600); do [[ -e $LAB_FLAGS/$tag.done ]] && break; sleep 0.1; done
    PT_CRC=$(cat "$LAB_FLAGS/$tag.done" 2>/dev/null || echo none)
}
