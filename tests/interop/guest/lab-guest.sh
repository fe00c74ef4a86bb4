# shellcheck shell=bash
# Helpers for scenario scripts running inside a lab guest (sourced from /lab/lib/lab-guest.sh).
# The guest's /init exports LAB_NAME LAB_INDEX LAB_IP LAB_ADDR LAB_HOST_IP LAB_PEERS
# LAB_PEER_IP LAB_OUT LAB_FLAGS LAB_SCENARIO LAB_SHARE LAB_TIMEOUT.
# Flags are files in /lab/flags, a 9p directory shared by both guests and the host; lab.sh
# writes host.started when the host-side command has started and host.exit (its exit
# status) when it has finished.

glog() { printf '[%s %s] %s\n' "$LAB_NAME" "$(cut -d' ' -f1 /proc/uptime)" "$*"; }

# lab_signal NAME [TEXT]: raise flag NAME for the other guest and the host.
lab_signal() {
    mkdir -p "$LAB_FLAGS"
    printf '%s\n' "${2:-$LAB_NAME}" >"$LAB_FLAGS/$1.tmp" && mv "$LAB_FLAGS/$1.tmp" "$LAB_FLAGS/$1"
    glog "signal $1"
}

# lab_wait NAME [SECONDS]: wait for flag NAME; non-zero on timeout.
lab_wait() {
    local name=$1 limit=${2:-120} i=0
    glog "waiting for $name (up to ${limit}s)"
    while [[ ! -e $LAB_FLAGS/$name ]]; do
        sleep 0.2
        i=$((i + 1))
        if [[ $i -ge $((limit * 5)) ]]; then
            glog "timed out waiting for $name"
            return 1
        fi
    done
    glog "got $name"
}

# lab_wait_listen PORT [SECONDS]: wait until something listens on TCP PORT (rdma_cm
# listeners on siw are kernel TCP sockets, so ss shows them).
lab_wait_listen() {
    local port=$1 limit=${2:-30} i=0
    while ! ss -Hltn "sport = :$port" | grep -q .; do
        sleep 0.1
        i=$((i + 1))
        if [[ $i -ge $((limit * 10)) ]]; then
            glog "nothing listens on port $port after ${limit}s"
            return 1
        fi
    done
    glog "port $port is listening"
}

# lab_step NAME CMD...: run one step, log it, and record "NAME rc SECONDS" in steps.txt.
lab_step() {
    local name=$1 rc t0 t1
    shift
    glog "step $name: $*"
    t0=$(cut -d' ' -f1 /proc/uptime)
    set +e
    "$@"
    rc=$?
    set -e
    t1=$(cut -d' ' -f1 /proc/uptime)
    echo "$name $rc $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')" >>"$LAB_OUT/steps.txt"
    glog "step $name: rc=$rc"
    return "$rc"
}
