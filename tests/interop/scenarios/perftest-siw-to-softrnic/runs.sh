# shellcheck shell=bash
# The runs of perftest-siw-to-softrnic, read by guest.sh (as /lab/scenario/runs.sh) and host.sh:
# one line per run, "TAG TOOL PORT SIZE ITERS EXPECT". TOOL is perftest's name without "ib_"
# (softrnic's subcommand is the same with '-' for '_'); every run uses its own port.
# EXPECT is "ok", or "blocked" for ib_write_lat with softrnic as server: perftest's write_lat
# server writes first, but softrnic is the MPA responder of the test connection and sends
# nothing before the initiator's first FPDU (RFC 5044 §7.1.2), which siw's ib_write_lat
# client never sends first. That run is made (one size, short limits) and reported.
PT_SIZES="2 64 4096 65536 1048576"
PT_ITERS=10

pt_runs() {
    local tool size port=18600 expect
    for tool in send_bw send_lat write_bw read_bw read_lat write_lat; do
        for size in $PT_SIZES; do
            expect=ok
            if [[ $tool == write_lat ]]; then
                expect=blocked
                [[ $size == 2 ]] || continue
            fi
            echo "$tool-$size $tool $port $size $PT_ITERS $expect"
            port=$((port + 1))
        done
    done
}

# pt_limit EXPECT: seconds one run may take.
pt_limit() { if [[ $1 == blocked ]]; then echo 20; else echo 90; fi; }
