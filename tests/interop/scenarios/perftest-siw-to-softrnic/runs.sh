# shellcheck shell=bash
# The runs of perftest-siw-to-softrnic, read by guest.sh (as /lab/scenario/runs.sh) and host.sh:
# one line per run, "TAG TOOL PORT SIZE ITERS EXPECT [OPTIONS...]". TOOL is perftest's name
# without "ib_" (softrnic's subcommand is the same with '-' for '_'); every run uses its own
# port. OPTIONS are perftest options given to both ends (pt_option_runs).
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
    pt_option_runs "$port"
}

# pt_option_runs PORT: the runs with perftest options, from PORT on (TAG is TOOL-oPORT);
# ib_write_lat is left out (it blocks against a softrnic server, above).
pt_option_runs() {
    local port=$1 tool size opts
    while read -r tool size opts; do
        echo "$tool-o$port $tool $port $size $PT_ITERS ok $opts"
        port=$((port + 1))
    done <<'RUNS'
write_bw 65536 -D 2
send_bw 4096 -D 2
read_bw 65536 -D 2
send_lat 64 -D 2
read_lat 64 -D 2
write_bw 65536 --output=bandwidth
send_bw 4096 --output=message_rate
send_lat 64 --output=latency
read_lat 64 -H
send_lat 2 -C -U
write_bw 4096 -l 5
send_bw 4096 -l 5
write_bw 65536 -b
read_bw 65536 -b
send_bw 4096 -b
send_bw 4096 -b -D 2
write_bw 65536 -q 2
write_bw 4096 -q 4
read_bw 65536 -q 2
read_bw 4096 -q 4
send_bw 4096 -q 2
send_bw 65536 -q 4
write_bw 65536 -q 2 -b
read_bw 65536 -q 2 -b
RUNS
}

# pt_limit EXPECT: seconds one run may take.
pt_limit() { if [[ $1 == blocked ]]; then echo 20; else echo 90; fi; }
