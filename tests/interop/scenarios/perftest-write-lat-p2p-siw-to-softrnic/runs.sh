# shellcheck shell=bash
# The runs of perftest-write-lat-p2p-siw-to-softrnic, read by guest.sh (as
# /lab/scenario/runs.sh) and host.sh: one line per run, "TAG PORT SIZE ITERS", each run on its
# own port. siw's `ib_write_lat -R` client (built with peer_to_peer = true, RTR Write) against
# `softrnic write-lat -R --p2p`: the RTR the initiator sends after the MPA Reply (RFC 6581 §3)
# opens the stream for the responder, whose perftest server writes first.
PT_SIZES="2 64 4096 65536 1048576"
PT_ITERS=5

pt_runs() {
    local size port=18700
    for size in $PT_SIZES; do
        echo "write_lat-$size $port $size $PT_ITERS"
        port=$((port + 1))
    done
}

# Seconds one run may take (read by guest.sh and host.sh).
# shellcheck disable=SC2034
PT_LIMIT=90
