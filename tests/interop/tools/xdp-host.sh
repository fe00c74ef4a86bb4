# shellcheck shell=bash
# Sourced by the host side of the AF_XDP scenarios (inside the lab namespace): a veth pair on
# the lab bridge whose far end vx0 softrnic takes with AF_XDP (its own stack is 10.99.0.11
# there; the kernel has no address on it), removed on exit, and xdp_run, which retries a
# softrnic command once the AF_XDP queue a previous run released is free again.
XDP_ADDR=10.99.0.11
# shellcheck disable=SC2034 # used by the scripts that source this file
XDP="--transport xdp --device vx0 --bind $XDP_ADDR"
ip link add vx0 type veth peer name vxb || exit 1
trap 'ip link del vx0 2>/dev/null' EXIT
ip link set vxb master br0
# Full checksums in every frame (softrnic's stack checks them; no offloads, as on the bridge).
for d in vx0 vxb; do ethtool -K "$d" tx off sg off tso off gso off gro off >/dev/null 2>&1 || true; done
ip link set vxb up
ip link set vx0 up

# xdp_run LOG softrnic-args...: runs softrnic with its output in LOG; a queue still busy
# (EBUSY right after the previous socket closed) is retried twice.
xdp_run() {
    local log=$1 i rc=0
    shift
    for i in 1 2 3; do
        "$LAB_SOFTRNIC" "$@" >"$log" 2>&1 && return 0
        rc=$?
        grep -q "busy" "$log" || return "$rc"
        echo "(AF_XDP queue busy, retry $i)"
        sleep 0.5
    done
    return "$rc"
}
