#!/bin/bash
# g1: softrnic against itself and siw against itself on the guest's own address, one run at a
# time, then a plain TCP stream; see scenario.sh.
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=../../guest/lab-guest.sh
. /lab/lib/lab-guest.sh
S=/lab/lib/softrnic
export RUST_LOG=${RUST_LOG:-warn}
cd "$LAB_OUT" || exit 1
A=${LAB_ADDR:?}
: >perf-results.txt
: >perf-missing.txt
rc=0

# shellcheck disable=SC2317 # avg_bw and median_lat are called through run's PICK
# avg_bw FILE: the average bandwidth (MB/s, 2^20 bytes) of a bandwidth tool's result row.
avg_bw() { awk '$1 ~ /^[0-9]+$/ && NF >= 5 { v = $4 } END { if (v != "") print v }' "$1"; }
# shellcheck disable=SC2317
# median_lat FILE: t_typical (µs) of a latency tool's result row.
median_lat() { awk '$1 ~ /^[0-9]+$/ && NF >= 8 { v = $5 } END { if (v != "") print v }' "$1"; }

# run NAME PORT PICK SERVER... -- CLIENT...: the server in the background, the client once it
# listens; NAME's number (PICK of the client's output) goes to perf-results.txt.
run() {
    local name=$1 port=$2 pick=$3 server=() client=() pid r=0 s=0 v attempt
    shift 3
    while [[ $1 != -- ]]; do server+=("$1"); shift; done
    shift
    client=("$@")
    for attempt in 1 2; do
        glog "$name (attempt $attempt): ${server[*]} / ${client[*]}"
        timeout 120 "${server[@]}" </dev/null >"$name.server.txt" 2>&1 &
        pid=$!
        lab_wait_listen "$port" 30 || true
        r=0
        lab_step "$name" timeout 90 "${client[@]}" </dev/null >"$name.client.txt" 2>&1 || r=$?
        s=0
        wait "$pid" || s=$?
        cat "$name.client.txt"
        v=$("$pick" "$name.client.txt")
        if [[ $r -eq 0 && $s -eq 0 && -n $v ]]; then
            echo "$name $v" >>perf-results.txt
            return 0
        fi
        glog "$name: client $r, server $s, value '${v}'"
        cat "$name.server.txt"
        sleep 2
    done
    rc=1
}

BW=(-D 4)
LAT=(-n 500 -s 2)
for mode in softrnic softrnic_manual; do
    extra=()
    [[ $mode == softrnic_manual ]] && extra=(--manual-progress)
    run "${mode}_write_bw_64k" 18515 avg_bw "$S" write-bw -p 18515 "${BW[@]}" -s 65536 "${extra[@]}" -- \
        "$S" write-bw "$A" -p 18515 "${BW[@]}" -s 65536 "${extra[@]}"
    run "${mode}_write_bw_4k" 18516 avg_bw "$S" write-bw -p 18516 "${BW[@]}" -s 4096 "${extra[@]}" -- \
        "$S" write-bw "$A" -p 18516 "${BW[@]}" -s 4096 "${extra[@]}"
    run "${mode}_write_lat_2" 18517 median_lat "$S" write-lat -p 18517 "${LAT[@]}" "${extra[@]}" -- \
        "$S" write-lat "$A" -p 18517 "${LAT[@]}" "${extra[@]}"
    run "${mode}_send_lat_2" 18522 median_lat "$S" send-lat -p 18522 "${LAT[@]}" "${extra[@]}" -- \
        "$S" send-lat "$A" -p 18522 "${LAT[@]}" "${extra[@]}"
done
I=(-R -F -d siw0)
run siw_write_bw_64k 18518 avg_bw ib_write_bw "${I[@]}" -p 18518 "${BW[@]}" -s 65536 -- \
    ib_write_bw "${I[@]}" -p 18518 "${BW[@]}" -s 65536 "$A"
run siw_write_bw_4k 18519 avg_bw ib_write_bw "${I[@]}" -p 18519 "${BW[@]}" -s 4096 -- \
    ib_write_bw "${I[@]}" -p 18519 "${BW[@]}" -s 4096 "$A"
run siw_send_lat_2 18523 median_lat ib_send_lat "${I[@]}" -p 18523 "${LAT[@]}" -- \
    ib_send_lat "${I[@]}" -p 18523 "${LAT[@]}" "$A"
# perftest's write_lat server writes first; whether siw's responder may do so before its
# initiator's first FPDU (RFC 5044 §7.1.2) decides whether this run can work: a failure is
# recorded in perf-missing.txt and the table says n/a, the other rows stand.
rc_before=$rc
run siw_write_lat_2 18520 median_lat ib_write_lat "${I[@]}" -p 18520 "${LAT[@]}" -- \
    ib_write_lat "${I[@]}" -p 18520 "${LAT[@]}" "$A"
if [[ $rc -ne $rc_before ]]; then
    echo "siw_write_lat_2: ib_write_lat siw <-> siw did not complete (twice)" >>perf-missing.txt
    rc=$rc_before
fi

# The floor: a plain TCP stream of 64 KiB writes for 4 s, MB/s (2^20) at the receiver.
cat >tcp_stream.py <<'PY'
import socket, sys, time
role, addr, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
if role == "server":
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((addr, port))
    ls.listen(1)
    c, _ = ls.accept()
    buf = bytearray(1 << 16)
    n, t0 = 0, None
    while True:
        k = c.recv_into(buf)
        if k == 0:
            break
        if t0 is None:
            t0 = time.monotonic()
        n += k
    print("%.2f" % (n / (time.monotonic() - t0) / 1048576))
else:
    s = socket.create_connection((addr, port))
    buf = bytes(1 << 16)
    end = time.monotonic() + 4
    while time.monotonic() < end:
        s.sendall(buf)
    s.close()
PY
python3 tcp_stream.py server "$A" 18521 >tcp.server.txt 2>&1 &
pid=$!
lab_wait_listen 18521 30 || true
lab_step tcp_stream_64k python3 tcp_stream.py client "$A" 18521 || rc=1
wait "$pid" || rc=1
v=$(tail -n 1 tcp.server.txt)
if [[ $v =~ ^[0-9.]+$ ]]; then echo "tcp_stream_64k $v" >>perf-results.txt; else cat tcp.server.txt; rc=1; fi

cat perf-results.txt
python3 - perf-results.txt >perf-table.txt <<'PY'
import sys
r = {}
for line in open(sys.argv[1]):
    k, v = line.split()
    r[k] = float(v)
def ratio(a, b):
    return "%.2fx" % (r[a] / r[b]) if a in r and b in r and r[b] else "n/a"
def val(k):
    return "%.1f" % r[k] if k in r else "n/a"
print("| Measurement (one guest, one vCPU) | softrnic (progress thread) | softrnic (manual progress) | siw | thread / siw | manual / siw |")
print("|---|---|---|---|---|---|")
for label, key in [("RDMA Write 64 KiB, MB/s", "write_bw_64k"), ("RDMA Write 4 KiB, MB/s", "write_bw_4k"),
                   ("RDMA Write 2 B latency, us (median)", "write_lat_2"),
                   ("Send 2 B latency, us (median)", "send_lat_2")]:
    t, m, s = "softrnic_" + key, "softrnic_manual_" + key, "siw_" + key
    print("| %s | %s | %s | %s | %s | %s |" % (label, val(t), val(m), val(s), ratio(t, s), ratio(m, s)))
print("| TCP stream 64 KiB writes (floor), MB/s | %s | | | %s of it | %s of it |" % (
    val("tcp_stream_64k"), ratio("softrnic_write_bw_64k", "tcp_stream_64k"),
    ratio("softrnic_manual_write_bw_64k", "tcp_stream_64k")))
print("siw 64 KiB bandwidth / TCP stream: %s" % ratio("siw_write_bw_64k", "tcp_stream_64k"))
PY
cat perf-missing.txt >>perf-table.txt
cat perf-table.txt
exit "$rc"
