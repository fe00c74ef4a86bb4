# shellcheck shell=bash
# The honest comparison with siw, shared by siw-softrnic-same-guest (one guest) and
# siw-softrnic-two-guests (server in g1, client in g2): how a number is read from a tool's
# output, the plain TCP stream that is the floor, and the ratio table. In the guest as
# /lab/lib/siw-compare.sh (lab.sh puts it there). Results are "NAME VALUE" lines:
# softrnic_KEY (progress thread), softrnic_manual_KEY (--manual-progress) and siw_KEY for KEY in
# write_bw_64k write_bw_4k (MB/s) write_lat_2 send_lat_2 (µs, median), tcp_stream_64k, and
# icmp_half_rtt (µs, median): half an ICMP echo round trip, answered by the kernel alone, a
# reference for latency on the same path (not a strict floor: the echoes, 10 ms apart, find
# the vCPU idle, which a busy-polling ping-pong does not).
#
# Every measurement but the ICMP one runs in CMP_ROUNDS rounds, one after the other (round 1
# of everything, then round 2, ...: a slow stretch of the host falls on all tools alike); a
# NAME has one line per round that produced a number. The table gives each NAME's median over
# its rounds with the lowest and highest beside it, and the ratios of the medians: single runs
# on the emulated vCPUs spread too widely (softrnic's 64 KiB bandwidth has gone from 50 to 87
# MB/s between two runs in one guest) for one run to decide a ratio.

# The names every comparison must have produced a number for. Not siw's latency runs: siw's
# ib_write_lat against itself may block (the guest scripts say why), and siw's rdma_cm has
# failed a run of ib_send_lat with ENOSPC; a siw latency run that fails twice is listed in
# perf-missing.txt and its row says n/a, the other rows stand.
CMP_NAMES="tcp_stream_64k icmp_half_rtt softrnic_write_bw_64k softrnic_write_bw_4k softrnic_write_lat_2
softrnic_send_lat_2 softrnic_manual_write_bw_64k softrnic_manual_write_bw_4k
softrnic_manual_write_lat_2 softrnic_manual_send_lat_2 siw_write_bw_64k siw_write_bw_4k"

# cmp_begin WRITER: in the guest, before the runs: the log filter of softrnic's tools, the
# working directory (the guest's out/ directory) and empty results; CMP_S is softrnic's binary.
# WRITER is the guest that writes the results (g1 alone, g2 of two).
# shellcheck disable=SC2034 # read by the guest scripts
CMP_S=/lab/lib/softrnic
# shellcheck disable=SC2034 # read by the guest scripts
CMP_ROUNDS=3
cmp_begin() {
    CMP_WRITER=$1
    export RUST_LOG=${RUST_LOG:-warn}
    cd "$LAB_OUT" || exit 1
    : >perf-results.txt
    : >perf-missing.txt
}

# cmp_may_fail NAME TOOL RUN-ARGS...: `run NAME RUN-ARGS...` (the guest script's run, which
# returns non-zero when the run failed twice) for a siw latency run, which may fail for siw's own
# reasons: its failure is listed in perf-missing.txt (a row with no round's number says n/a)
# and leaves the guest script's rc as it was, so the other rows stand.
cmp_may_fail() {
    local name=$1 tool=$2 rc_before=$rc
    shift 2
    run "$name" "$@" && return 0
    # shellcheck disable=SC2153 # CMP_ROUND: the round the guest script's loop is in
    [[ $LAB_NAME == "$CMP_WRITER" ]] &&
        echo "$name: $tool siw <-> siw did not complete (twice) in round $CMP_ROUND" >>perf-missing.txt
    rc=$rc_before
}

# shellcheck disable=SC2317 # avg_bw, median_lat and tcp_rate are called through a PICK variable
# avg_bw FILE: the average bandwidth (MB/s, 2^20 bytes) of a bandwidth tool's result row.
avg_bw() { awk '$1 ~ /^[0-9]+$/ && NF >= 5 { v = $4 } END { if (v != "") print v }' "$1"; }
# shellcheck disable=SC2317
# median_lat FILE: t_typical (µs) of a latency tool's result row.
median_lat() { awk '$1 ~ /^[0-9]+$/ && NF >= 8 { v = $5 } END { if (v != "") print v }' "$1"; }
# shellcheck disable=SC2317
# tcp_rate FILE: the TCP stream server's last line, when it is a number.
tcp_rate() { local v; v=$(tail -n 1 "$1"); [[ $v =~ ^[0-9.]+$ ]] && echo "$v"; }

# cmp_tcp_stream DIR: writes DIR/tcp_stream.py, a plain TCP stream of 64 KiB writes for 4 s;
# `python3 tcp_stream.py server ADDR PORT` prints MB/s (2^20) as received, `... client ADDR
# PORT` sends.
cmp_tcp_stream() {
    cat >"$1/tcp_stream.py" <<'PY'
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
}

# cmp_icmp_floor ADDR: 200 ICMP echoes to ADDR 10 ms apart; appends "icmp_half_rtt US" (half
# the median round trip) to perf-results.txt. Non-zero when no echo came back.
cmp_icmp_floor() {
    local v
    ping -n -c 200 -i 0.01 "$1" >icmp.txt 2>&1
    v=$(sed -n 's/.* time=\([0-9.]*\) ms.*/\1/p' icmp.txt | sort -g |
        awk '{ a[NR] = $1 } END { if (NR) printf "%.1f", 1000 * a[int((NR + 1) / 2)] / 2 }')
    [[ -n $v ]] || { tail -n 3 icmp.txt; return 1; }
    echo "icmp_half_rtt $v" >>perf-results.txt
}

# cmp_table RESULTS TITLE: the ratio table (Markdown) of a results file: per NAME the median
# of its rounds and, with more than one round, "(lowest-highest)"; ratios of the medians.
cmp_table() {
    python3 - "$1" "$2" <<'PY'
import sys
# The guest's python3-minimal has no statistics module.
def median(v):
    v = sorted(v)
    h = len(v) // 2
    return v[h] if len(v) % 2 else (v[h - 1] + v[h]) / 2
runs = {}
for line in open(sys.argv[1]):
    k, v = line.split()
    runs.setdefault(k, []).append(float(v))
r = {k: median(v) for k, v in runs.items()}
rounds = max((len(v) for v in runs.values()), default=0)
def ratio(a, b):
    return "%.2fx" % (r[a] / r[b]) if a in r and b in r and r[b] else "n/a"
def val(k):
    if k not in r:
        return "n/a"
    v = runs[k]
    return "%.1f" % r[k] + (" (%.1f-%.1f)" % (min(v), max(v)) if len(v) > 1 else "")
print("| Measurement (%s) | softrnic (progress thread) | softrnic (manual progress) | siw | thread / siw | manual / siw |" % sys.argv[2])
print("|---|---|---|---|---|---|")
for label, key in [("RDMA Write 64 KiB, MB/s", "write_bw_64k"), ("RDMA Write 4 KiB, MB/s", "write_bw_4k"),
                   ("RDMA Write 2 B latency, us (median)", "write_lat_2"),
                   ("Send 2 B latency, us (median)", "send_lat_2")]:
    t, m, s = "softrnic_" + key, "softrnic_manual_" + key, "siw_" + key
    print("| %s | %s | %s | %s | %s | %s |" % (label, val(t), val(m), val(s), ratio(t, s), ratio(m, s)))
print("| TCP stream 64 KiB writes (floor), MB/s | %s | | | %s of it | %s of it |" % (
    val("tcp_stream_64k"), ratio("softrnic_write_bw_64k", "tcp_stream_64k"),
    ratio("softrnic_manual_write_bw_64k", "tcp_stream_64k")))
print("| ICMP echo, half round trip (latency floor), us (median) | %s | | | %s of it | %s of it |" % (
    val("icmp_half_rtt"), ratio("softrnic_write_lat_2", "icmp_half_rtt"),
    ratio("softrnic_manual_write_lat_2", "icmp_half_rtt")))
print("Each cell: the median of %d rounds (lowest-highest); ratios of the medians." % rounds)
print("siw 64 KiB bandwidth / TCP stream: %s" % ratio("siw_write_bw_64k", "tcp_stream_64k"))
print("siw 2 B Write / Send latency / ICMP floor: %s / %s" % (
    ratio("siw_write_lat_2", "icmp_half_rtt"), ratio("siw_send_lat_2", "icmp_half_rtt")))
PY
}

# cmp_check RESULTS TABLE: the host-side check: every name of CMP_NAMES has a number from each
# round (icmp_half_rtt: one); prints the table. Non-zero when a number is missing.
cmp_check() {
    local res=$1 name n want
    [[ -s $res ]] || { echo "FAIL: no $res"; return 1; }
    for name in $CMP_NAMES; do
        want=$CMP_ROUNDS
        [[ $name == icmp_half_rtt ]] && want=1
        n=$(grep -Ec "^$name [0-9.]+$" "$res")
        [[ $n -ge $want ]] || { echo "FAIL: $n of $want numbers for $name in $(basename "$res")"; return 1; }
    done
    cat "$2"
}
