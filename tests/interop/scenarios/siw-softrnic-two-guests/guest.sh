#!/bin/bash
# g1 runs each server, g2 the matching client, one run at a time; see scenario.sh. Per run,
# round and attempt (TAG = NAME.rROUND.ATTEMPT): g1 raises TAG.ready once its server listens;
# g2 runs the client and raises TAG.client; g1 waits for its server to exit and raises
# TAG.server holding the server's exit status and, when the number is read on the server's
# side, the number; g2 then decides and raises TAG.verdict = ok | retry | fail. Two attempts
# per run.
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=../../guest/lab-guest.sh
. /lab/lib/lab-guest.sh
# shellcheck source-path=SCRIPTDIR source=../../lib/siw-compare.sh
. /lab/lib/siw-compare.sh
cmp_begin g2
S=$CMP_S
if [[ $LAB_NAME == g1 ]]; then SRV=$LAB_ADDR; else SRV=$LAB_PEER_IP; fi
rc=0

# run NAME PORT PICK SIDE SERVER... -- CLIENT...: one measurement; NAME's number is PICK of the
# SIDE's output (client or server), written by g2 to perf-results.txt.
run() {
    local name=$1 port=$2 pick=$3 side=$4 server=() client=() pid tag attempt r s v verdict
    shift 4
    while [[ $1 != -- ]]; do server+=("$1"); shift; done
    shift
    client=("$@")
    for attempt in 1 2; do
        tag=$name.r$CMP_ROUND.$attempt
        if [[ $LAB_NAME == g1 ]]; then
            glog "$tag: ${server[*]}"
            timeout 150 "${server[@]}" </dev/null >"$tag.server.txt" 2>&1 &
            pid=$!
            lab_wait_listen "$port" 30 || true
            lab_signal "$tag.ready"
            lab_wait "$tag.client" 200 || true
            lab_reap "$pid" 30 "$tag-server"
            v=""
            [[ $side == server ]] && v=$("$pick" "$tag.server.txt")
            lab_signal "$tag.server" "$LAB_REAP_STATUS $v"
            tail -n 4 "$tag.server.txt"
            lab_wait "$tag.verdict" 60 || return 1
            verdict=$(cat "$LAB_FLAGS/$tag.verdict")
        else
            lab_wait "$tag.ready" 120 || { rc=1; return 1; }
            r=0
            lab_step "$tag" timeout 120 "${client[@]}" </dev/null >"$tag.client.txt" 2>&1 || r=$?
            lab_signal "$tag.client" "$r"
            cat "$tag.client.txt"
            lab_wait "$tag.server" 60 || true
            read -r s v <"$LAB_FLAGS/$tag.server" 2>/dev/null || s=none
            [[ $side == client ]] && v=$("$pick" "$tag.client.txt")
            if [[ $r -eq 0 && $s == 0 && -n ${v:-} ]]; then
                echo "$name $v" >>perf-results.txt
                verdict=ok
            elif [[ $attempt -eq 1 ]]; then
                verdict=retry
            else
                verdict=fail
            fi
            glog "$tag: client $r, server ${s:-none}, value '${v:-}': $verdict"
            lab_signal "$tag.verdict" "$verdict"
        fi
        [[ $verdict == ok ]] && return 0
        sleep 2
    done
    [[ $LAB_NAME == g2 ]] && rc=1
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
        run "${mode}_write_bw_64k" 18515 avg_bw client "$S" write-bw -p 18515 "${BW[@]}" -s 65536 "${extra[@]}" -- \
            "$S" write-bw "$SRV" -p 18515 "${BW[@]}" -s 65536 "${extra[@]}"
        run "${mode}_write_bw_4k" 18516 avg_bw client "$S" write-bw -p 18516 "${BW[@]}" -s 4096 "${extra[@]}" -- \
            "$S" write-bw "$SRV" -p 18516 "${BW[@]}" -s 4096 "${extra[@]}"
        run "${mode}_write_lat_2" 18517 median_lat client "$S" write-lat -p 18517 "${LAT[@]}" "${extra[@]}" -- \
            "$S" write-lat "$SRV" -p 18517 "${LAT[@]}" "${extra[@]}"
        run "${mode}_send_lat_2" 18522 median_lat client "$S" send-lat -p 18522 "${LAT[@]}" "${extra[@]}" -- \
            "$S" send-lat "$SRV" -p 18522 "${LAT[@]}" "${extra[@]}"
    done
    run siw_write_bw_64k 18518 avg_bw client ib_write_bw "${I[@]}" -p 18518 "${BW[@]}" -s 65536 -- \
        ib_write_bw "${I[@]}" -p 18518 "${BW[@]}" -s 65536 "$SRV"
    run siw_write_bw_4k 18519 avg_bw client ib_write_bw "${I[@]}" -p 18519 "${BW[@]}" -s 4096 -- \
        ib_write_bw "${I[@]}" -p 18519 "${BW[@]}" -s 4096 "$SRV"
    # siw's latency runs may fail (cmp_may_fail): its rdma_cm has refused a connection with ENOSPC.
    cmp_may_fail siw_send_lat_2 ib_send_lat 18523 median_lat client ib_send_lat "${I[@]}" -p 18523 "${LAT[@]}" -- \
        ib_send_lat "${I[@]}" -p 18523 "${LAT[@]}" "$SRV"
    # perftest's write_lat server writes first; whether siw's responder may do so before its
    # initiator's first FPDU (RFC 5044 §7.1.2) decides whether this run can work.
    cmp_may_fail siw_write_lat_2 ib_write_lat 18520 median_lat client ib_write_lat "${I[@]}" -p 18520 "${LAT[@]}" -- \
        ib_write_lat "${I[@]}" -p 18520 "${LAT[@]}" "$SRV"

    # The floor: a plain TCP stream of 64 KiB writes for 4 s, g2 to g1, MB/s (2^20) at g1.
    run tcp_stream_64k 18521 tcp_rate server python3 tcp_stream.py server "$SRV" 18521 -- \
        python3 tcp_stream.py client "$SRV" 18521
done
# The latency floor: ICMP echoes g2 -> g1, answered by g1's kernel.
if [[ $LAB_NAME == g2 ]]; then
    cmp_icmp_floor "$SRV" || rc=1
    cat perf-results.txt
    cmp_table perf-results.txt "two guests, one vCPU each" >perf-table.txt
    cat perf-missing.txt >>perf-table.txt
    cat perf-table.txt
fi
exit "$rc"
