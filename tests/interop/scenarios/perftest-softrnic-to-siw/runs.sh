# shellcheck shell=bash disable=SC2034 # variables used by the scripts that source this file
# The runs of perftest-softrnic-to-siw, read by guest.sh (as /lab/scenario/runs.sh) and host.sh:
# one line per run, "TAG TOOL PORT SIZE ITERS [OPTIONS...]". TOOL is perftest's name without
# "ib_" (softrnic's subcommand is the same with '-' for '_'); every run uses its own port.
# OPTIONS are perftest options given to both ends (pt_option_runs).
PT_SIZES="2 64 4096 65536 1048576"
PT_ITERS=10
PT_LIMIT=90 # seconds one run may take

pt_runs() {
    local tool size port=18700
    for tool in send_bw send_lat write_bw write_lat read_bw read_lat; do
        for size in $PT_SIZES; do
            echo "$tool-$size $tool $port $size $PT_ITERS"
            port=$((port + 1))
        done
    done
    pt_option_runs "$port"
}

# pt_option_runs PORT: the runs with perftest options, from PORT on (TAG is TOOL-oPORT).
pt_option_runs() {
    local port=$1 tool size opts
    while read -r tool size opts; do
        echo "$tool-o$port $tool $port $size $PT_ITERS $opts"
        port=$((port + 1))
    done <<'RUNS'
write_bw 65536 -D 2
send_bw 4096 -D 2
read_bw 65536 -D 2
send_lat 64 -D 2
read_lat 64 -D 2
write_lat 64 -D 2
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
write_lat 64 -H
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
