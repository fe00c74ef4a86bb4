# shellcheck shell=bash disable=SC2034 # variables used by the scripts that source this file
# The runs of perftest-xdp-to-siw, read by the shared guest script (as /lab/scenario/runs.sh)
# and host.sh: one line per run, "TAG TOOL PORT SIZE ITERS" (see perftest-softrnic-to-siw).
PT_SIZES="2 65536"
PT_ITERS=10
PT_LIMIT=90 # seconds one run may take

pt_runs() {
    local tool size port=18800
    for tool in send_bw send_lat write_bw write_lat read_bw read_lat; do
        for size in $PT_SIZES; do
            echo "$tool-$size $tool $port $size $PT_ITERS"
            port=$((port + 1))
        done
    done
}
