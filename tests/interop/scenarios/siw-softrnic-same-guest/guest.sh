#!/bin/bash
# g1: softrnic against itself and siw against itself on the guest's own address, one run at a
# time, then a plain TCP stream; see scenario.sh.
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=../../guest/lab-guest.sh
. /lab/lib/lab-guest.sh
# shellcheck source-path=SCRIPTDIR source=../../lib/siw-compare.sh
. /lab/lib/siw-compare.sh
cmp_begin g1
S=$CMP_S
A=${LAB_ADDR:?}
rc=0

# run NAME PORT PICK SERVER... -- CLIENT...: the server in the background, the client once it
# listens; NAME's number (PICK of the client's output) goes to perf-results.txt. Outputs are
# NAME.rROUND.{server,client}.txt. Two attempts; non-zero (and rc=1) when both failed.
run() {
    local name=$1 port=$2 pick=$3 server=() client=() pid r=0 s=0 v attempt out
    shift 3
    while [[ $1 != -- ]]; do server+=("$1"); shift; done
    shift
    client=("$@")
    out=$name.r$CMP_ROUND
    for attempt in 1 2; do
        glog "$out (attempt $attempt): ${server[*]} / ${client[*]}"
        timeout 120 "${server[@]}" </dev/null >"$out.server.txt" 2>&1 &
        pid=$!
        lab_wait_listen "$port" 30 || true
        r=0
        lab_step "$out" timeout 90 "${client[@]}" </dev/null >"$out.client.txt" 2>&1 || r=$?
        s=0
        wait "$pid" || s=$?
        cat "$out.client.txt"
        v=$("$pick" "$out.client.txt")
        if [[ $r -eq 0 && $s -eq 0 && -n $v ]]; then
            echo "$name $v" >>perf-results.txt
            return 0
        fi
        glog "$out: client $r, server $s, value '${v}'"
        cat "$out.server.txt"
        sleep 2
    done
    rc=1
    return 1
}

BW=(-D 4)
LAT=(-n 500 -s 2)
I=(-R -F -d siw0)
cmp_tcp_stream .
# CMP_ROUNDS rounds of every run (siw-compare.sh says why).
for CMP_ROUND in $(seq 1 "$CMP_ROUNDS"); do
    for mode in softrnic softrnic_manual; do
        # The client's and server's outputs end with where progress was made (who sent,
        # who placed, how often the progress thread slept).
        extra=(--progress-stats)
        [[ $mode == softrnic_manual ]] && extra+=(--manual-progress)
        run "${mode}_write_bw_64k" 18515 avg_bw "$S" write-bw -p 18515 "${BW[@]}" -s 65536 "${extra[@]}" -- \
            "$S" write-bw "$A" -p 18515 "${BW[@]}" -s 65536 "${extra[@]}"
        run "${mode}_write_bw_4k" 18516 avg_bw "$S" write-bw -p 18516 "${BW[@]}" -s 4096 "${extra[@]}" -- \
            "$S" write-bw "$A" -p 18516 "${BW[@]}" -s 4096 "${extra[@]}"
        run "${mode}_write_lat_2" 18517 median_lat "$S" write-lat -p 18517 "${LAT[@]}" "${extra[@]}" -- \
            "$S" write-lat "$A" -p 18517 "${LAT[@]}" "${extra[@]}"
        run "${mode}_send_lat_2" 18522 median_lat "$S" send-lat -p 18522 "${LAT[@]}" "${extra[@]}" -- \
            "$S" send-lat "$A" -p 18522 "${LAT[@]}" "${extra[@]}"
    done
    run siw_write_bw_64k 18518 avg_bw ib_write_bw "${I[@]}" -p 18518 "${BW[@]}" -s 65536 -- \
        ib_write_bw "${I[@]}" -p 18518 "${BW[@]}" -s 65536 "$A"
    run siw_write_bw_4k 18519 avg_bw ib_write_bw "${I[@]}" -p 18519 "${BW[@]}" -s 4096 -- \
        ib_write_bw "${I[@]}" -p 18519 "${BW[@]}" -s 4096 "$A"
    # siw's latency runs may fail (cmp_may_fail): its rdma_cm has refused a connection with ENOSPC.
    cmp_may_fail siw_send_lat_2 ib_send_lat 18523 median_lat ib_send_lat "${I[@]}" -p 18523 "${LAT[@]}" -- \
        ib_send_lat "${I[@]}" -p 18523 "${LAT[@]}" "$A"
    # perftest's write_lat server writes first; whether siw's responder may do so before its
    # initiator's first FPDU (RFC 5044 §7.1.2) decides whether this run can work.
    cmp_may_fail siw_write_lat_2 ib_write_lat 18520 median_lat ib_write_lat "${I[@]}" -p 18520 "${LAT[@]}" -- \
        ib_write_lat "${I[@]}" -p 18520 "${LAT[@]}" "$A"

    # The floor: a plain TCP stream of 64 KiB writes for 4 s, MB/s (2^20) at the receiver.
    tcp=tcp_stream_64k.r$CMP_ROUND
    python3 tcp_stream.py server "$A" 18521 >"$tcp.server.txt" 2>&1 &
    pid=$!
    lab_wait_listen 18521 30 || true
    lab_step "$tcp" python3 tcp_stream.py client "$A" 18521 || rc=1
    wait "$pid" || rc=1
    v=$(tcp_rate "$tcp.server.txt")
    if [[ -n $v ]]; then echo "tcp_stream_64k $v" >>perf-results.txt; else cat "$tcp.server.txt"; rc=1; fi
done
# The latency floor: ICMP echoes to the guest's own address, answered by its kernel.
cmp_icmp_floor "$A" || rc=1

cat perf-results.txt
cmp_table perf-results.txt "one guest, one vCPU" >perf-table.txt
cat perf-missing.txt >>perf-table.txt
cat perf-table.txt
exit "$rc"
