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

# lab_reap PID SECONDS [STEP]: waits up to SECONDS for the background process PID (a child of
# this shell) to exit, as lab step STEP when one is named, and kills it if it does not. Sets
# LAB_REAP_STATUS to its exit status, 124 when it was killed. (A variable, not output: a
# command substitution runs in a subshell, which cannot wait for this shell's child.)
lab_reap() {
    local pid=$1 secs=$2 step=${3:-}
    LAB_REAP_STATUS=0
    if [[ -n $step ]]; then
        lab_step "$step" timeout "$secs" tail --pid="$pid" -f /dev/null || LAB_REAP_STATUS=124
    else
        timeout "$secs" tail --pid="$pid" -f /dev/null || LAB_REAP_STATUS=124
    fi
    if [[ $LAB_REAP_STATUS -eq 124 ]]; then
        kill -9 "$pid" 2>/dev/null || true
    else
        wait "$pid" || LAB_REAP_STATUS=$?
    fi
}

# lab_rping_servers WHO SIZE...: one siw `rping -s -V -v -S 65535` on port 7174 per size, for
# the host's client WHO: raises rping.<size>.ready once it listens, waits for the client's
# rping.<size>.done and for the server to exit. Non-zero when any server failed.
lab_rping_servers() {
    local who=$1 size pid src rc=0
    shift
    for size in "$@"; do
        rping -s -V -v -S 65535 -a "${LAB_ADDR:?set by guest/init}" -p 7174 >"rping-server-$size.log" 2>&1 &
        pid=$!
        lab_wait_listen 7174 30 || true
        lab_signal "rping.$size.ready"
        lab_wait "rping.$size.done" 120 || rc=1
        lab_reap "$pid" 20 "rping-s-$size"
        src=$LAB_REAP_STATUS
        tail -n 2 "rping-server-$size.log" | cut -c1-100
        glog "rping -s ($who, size $size): exit status $src"
        [[ $src -eq 0 ]] || rc=1
    done
    return "$rc"
}

# lab_siw_terminate_is N CAUSE: the N-th Terminate siw took (its dmesg line "siw: got
# TERMINATE") carries CAUSE ("layer L, type T, code C"). Logs what it found; non-zero when the
# N-th Terminate is missing or carries another cause.
lab_siw_terminate_is() {
    local n=$1 want=$2 term
    term=$(dmesg | grep 'siw: got TERMINATE' | sed -n "${n}p" || true)
    if [[ $term == *"$want"* ]]; then
        glog "case $n: siw took the Terminate ($want)"
        return 0
    fi
    glog "case $n: siw's Terminate number $n is '${term:-missing}', expected $want"
    return 1
}

# lab_eth1_up: make sure the second NIC (eth1, bridge br1, scenarios with SCENARIO_BRIDGES=2)
# carries its address, and export LAB_IP1 LAB_ADDR1 LAB_HOST_IP1 (guest/init does this from
# lab.ip1= / lab.host1=; images built before that get it done here). Non-zero without eth1.
lab_eth1_up() {
    local arg i=0
    # shellcheck disable=SC2013 # the command line is a list of words
    for arg in $(cat /proc/cmdline); do
        case $arg in
            lab.ip1=*) LAB_IP1=${arg#lab.ip1=} ;;
            lab.host1=*) LAB_HOST_IP1=${arg#lab.host1=} ;;
        esac
    done
    [[ -n ${LAB_IP1:-} ]] || { glog "no lab.ip1= on the kernel command line"; return 1; }
    LAB_ADDR1=${LAB_IP1%/*}
    export LAB_IP1 LAB_ADDR1 LAB_HOST_IP1
    while ! ip link show eth1 >/dev/null 2>&1; do
        sleep 0.1
        i=$((i + 1))
        [[ $i -lt 50 ]] || { glog "no eth1"; return 1; }
    done
    ip -4 addr show dev eth1 | grep -q "inet $LAB_ADDR1/" || ip addr add "$LAB_IP1" dev eth1
    ip link set eth1 up
    glog "eth1 $LAB_IP1 (host $LAB_HOST_IP1)"
}
