# shellcheck shell=bash
# The runs of perftest-siw-to-xdp, read by the shared guest script (as /lab/scenario/runs.sh)
# and host.sh: one line per run, "TAG TOOL PORT SIZE ITERS EXPECT" (see
# perftest-siw-to-softrnic: ib_write_lat with softrnic as server is expected to block, RFC
# 5044 §7.1.2, and is left out here).
PT_SIZES="2 65536"
PT_ITERS=10

pt_runs() {
    local tool size port=18900
    for tool in send_bw send_lat write_bw read_bw read_lat; do
        for size in $PT_SIZES; do
            echo "$tool-$size $tool $port $size $PT_ITERS ok"
            port=$((port + 1))
        done
    done
}

# pt_limit EXPECT: seconds one run may take.
pt_limit() { echo 90; }
