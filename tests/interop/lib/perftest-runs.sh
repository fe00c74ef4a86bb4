# shellcheck shell=bash
# The runs of the perftest scenarios (perftest-softrnic-to-siw, perftest-siw-to-softrnic and
# their AF_XDP twins), one list: a scenario's runs.sh sets what differs and sources this file,
# on the host as $LAB_ROOT/lib/perftest-runs.sh and in the guest as /lab/lib/perftest-runs.sh
# (lab.sh puts it there). pt_runs prints one line per run:
#
#   TAG TOOL PORT SIZE ITERS EXPECT [OPTIONS...]
#
# TOOL is perftest's name without "ib_" (softrnic's subcommand is the same with '-' for '_');
# every run uses its own port, counted from PT_FIRST_PORT. The basic runs are every tool at
# every size of PT_SIZES (TAG is TOOL-SIZE); with PT_OPTIONS=yes the runs with perftest options
# given to both ends follow (TAG is TOOL-oPORT). EXPECT is "ok", or "blocked" for ib_write_lat
# with softrnic as server (PT_WRITE_LAT=blocked): perftest's write_lat server writes first, but
# softrnic is the MPA responder of the test connection and sends nothing before the initiator's
# first FPDU (RFC 5044 §7.1.2), which siw's ib_write_lat client never sends first; that run is
# made once (smallest size, short limit) and reported, and the option runs leave ib_write_lat
# out. PT_WRITE_LAT=none leaves ib_write_lat out altogether.
#
# Settings (a runs.sh sets the first three): PT_FIRST_PORT, PT_WRITE_LAT (ok|blocked|none),
# PT_OPTIONS (yes|no), PT_SIZES, PT_ITERS.
: "${PT_SIZES:=2 64 4096 65536 1048576}" "${PT_ITERS:=10}" "${PT_OPTIONS:=no}"
PT_TOOLS="send_bw send_lat write_bw write_lat read_bw read_lat"

pt_runs() {
    local tool size port=${PT_FIRST_PORT:?} expect
    for tool in $PT_TOOLS; do
        expect=ok
        if [[ $tool == write_lat ]]; then
            case ${PT_WRITE_LAT:?} in
                none) continue ;;
                blocked) expect=blocked ;;
            esac
        fi
        for size in $PT_SIZES; do
            echo "$tool-$size $tool $port $size $PT_ITERS $expect"
            port=$((port + 1))
            [[ $expect == blocked ]] && break
        done
    done
    [[ $PT_OPTIONS == yes ]] && pt_option_runs "$port"
    return 0
}

# pt_option_runs PORT: the runs with perftest options, from PORT on.
pt_option_runs() {
    local port=$1 tool size opts
    while read -r tool size opts; do
        [[ $tool == write_lat && $PT_WRITE_LAT != ok ]] && continue
        echo "$tool-o$port $tool $port $size $PT_ITERS ok $opts"
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
send_bw 4096 -q 2 -b
RUNS
}

# pt_limit EXPECT: seconds one run may take.
pt_limit() { if [[ $1 == blocked ]]; then echo 20; else echo 90; fi; }
