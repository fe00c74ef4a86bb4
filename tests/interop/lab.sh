#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2317 # (cleanup/on_signal run from traps)
# Run one interop scenario: one or two siw guests on a bridge inside a private network
# namespace, an optional host-side command in that namespace, a capture of the bridge.
#
# Usage: lab.sh [options] SCENARIO
#   SCENARIO            a name under tests/interop/scenarios/ or a directory holding
#                       scenario.sh (host side) and guest.sh (runs inside each guest)
# Options:
#   --results DIR       where results go (default: $SOFTRNIC_LAB_RESULTS/<scenario>, or
#                       /tmp/softrnic-lab/results/<scenario>-<date>); emptied first
#   --host-cmd CMD      host-side command, run with bash inside the namespace, replacing the
#                       scenario's default; '' for none. The environment variable
#                       SOFTRNIC_LAB_HOST_CMD_<SCENARIO> (name upper-cased, '-' -> '_', e.g.
#                       SOFTRNIC_LAB_HOST_CMD_SIW_INITIATOR_TO_HOST) does the same, so it also
#                       works through run-suite.sh
#   --timeout SECONDS   limit for the whole scenario (default: the scenario's, else 300)
#   --image DIR         guest image (default: $SOFTRNIC_LAB_CACHE/current, built if missing;
#                       a scenario with SCENARIO_SIW_PATCH=NAME gets the image of the siw variant
#                       siw-variants/NAME.patch instead, built by build-guest.sh when missing,
#                       without moving `current`)
#   --accel tcg|kvm     guest acceleration (default: $SOFTRNIC_LAB_ACCEL or tcg; see README)
#   --cleanup-stale     remove namespaces left by lab runs that no longer exist, then exit
#
# Network (all inside the namespace softrnic-lab-<pid>, nothing on the host's interfaces):
#   bridge br0 10.99.0.1/24 (the host end), tap1 -> guest g1 10.99.0.2, tap2 -> g2 10.99.0.3
#   with SCENARIO_BRIDGES=2 also br1 10.99.1.1/24, tap1b -> g1 eth1 10.99.1.2, tap2b -> g2
#   eth1 10.99.1.3 (multihoming); br1 is captured to capture-br1.pcap and both bridges are
#   merged (mergecap) into capture-all.pcap. tools/lab-path takes a path down or up.
# The host-side command sees LAB_NETNS LAB_HOST_IP LAB_G1_IP LAB_G2_IP LAB_GUEST_IPS
# LAB_RESULTS LAB_HOST_OUT LAB_FLAGS LAB_TOOLS LAB_SCENARIO_DIR LAB_SOFTRNIC (the softrnic
# binary: $SOFTRNIC_LAB_BIN, else the repository's target/release/softrnic, built with cargo when
# missing) and runs in LAB_HOST_OUT.
# Results: result.txt, capture.pcap (capture-headers.pcap with SCENARIO_CAPTURE_SNAPLEN),
# capture.txt + rdmap-opcodes.txt (with tshark), mpa.jsonl, host.log, check.log, g<N>-console.log,
# out/g<N>/ (guest.log, rc, steps.txt, boot.txt, dmesg.txt), flags/.
# Exit: 0 pass, 1 fail, 2 usage, 77 this machine cannot run the lab (prints SKIPPED: reason).
set -euo pipefail
# shellcheck source=lib/common.sh
source "$(dirname "$0")/lib/common.sh"

NS_PREFIX=softrnic-lab-
HOST_IP=10.99.0.1
GUEST_IPS=(10.99.0.2 10.99.0.3)
# Second bridge (SCENARIO_BRIDGES=2): a second path for multihoming.
HOST_IP1=10.99.1.1
GUEST_IPS1=(10.99.1.2 10.99.1.3)

usage() { sed -n '2,/^set -euo/p' "$0" | sed '/^# shellcheck/d; $d; s/^# \{0,1\}//'; }

cleanup_stale() {
    local ns pid p
    for ns in $(ip netns list 2>/dev/null | awk '{ print $1 }' | grep "^${NS_PREFIX}[0-9]*$" || true); do
        pid=${ns#"$NS_PREFIX"}
        if kill -0 "$pid" 2>/dev/null; then continue; fi
        lab_log "removing stale namespace $ns (its lab.sh $pid is gone)"
        for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
        ip netns del "$ns" 2>/dev/null || true
    done
}

results=${SOFTRNIC_LAB_RESULTS_DIR:-}
host_cmd_set=0
host_cmd=""
timeout_s=""
image=${SOFTRNIC_LAB_IMAGE:-$LAB_CACHE/current}
image_given=${SOFTRNIC_LAB_IMAGE:+1}
accel=${SOFTRNIC_LAB_ACCEL:-tcg}
scenario=""
while [[ $# -gt 0 ]]; do
    case $1 in
        --results) results=$2; shift ;;
        --host-cmd) host_cmd=$2; host_cmd_set=1; shift ;;
        --timeout) timeout_s=$2; shift ;;
        --image) image=$2; image_given=1; shift ;;
        --accel) accel=$2; shift ;;
        --cleanup-stale) lab_is_root || lab_skip "needs root"; cleanup_stale; exit 0 ;;
        -h | --help) usage; exit 0 ;;
        -*) usage >&2; lab_log "unknown option $1"; exit 2 ;;
        *) [[ -z $scenario ]] || { usage >&2; exit 2; }; scenario=$1 ;;
    esac
    shift
done
[[ -n $scenario ]] || { usage >&2; exit 2; }
if [[ -d $scenario ]]; then
    SCENARIO_DIR=$(cd "$scenario" && pwd)
else
    SCENARIO_DIR=$LAB_ROOT/scenarios/$scenario
fi
[[ -r $SCENARIO_DIR/scenario.sh ]] || { lab_log "no scenario.sh in $SCENARIO_DIR"; exit 2; }
SCENARIO_NAME=$(basename "$SCENARIO_DIR")

# Scenario defaults, then the scenario's own settings.
SCENARIO_GUESTS=1
SCENARIO_BRIDGES=1
# The guest side: the scenario's guest.sh, or this script (relative to tests/interop/),
# shared by several scenarios.
SCENARIO_GUEST_SCRIPT=""
# The address the guests know as the host's (LAB_HOST_IP in the guest): the bridge's, unless
# the host side answers elsewhere (softrnic's own stack on an AF_XDP veth, 10.99.0.11).
SCENARIO_GUEST_HOST_IP=""
# off: no IPv6 in the guest kernel (ipv6.disable=1); stack: the IPv6 protocol exists for
# sockets but no interface has IPv6 (ipv6.disable_ipv6=1), which kernel SCTP's RFC 6951 UDP
# encapsulation needs (it opens a UDP socket per address family).
SCENARIO_GUEST_IPV6=off
SCENARIO_DIRECTION="?"
SCENARIO_TIMEOUT=300
SCENARIO_HOST_CMD=""
SCENARIO_SIW_PATCH=""   # NAME: run the guests on the siw variant siw-variants/NAME.patch
SCENARIO_GUEST_SOFTRNIC=0  # 1: the host's softrnic binary goes to the guests as /lab/lib/softrnic
# N: capture only the first N bytes of each frame (headers), in capture-headers.pcap, for a
# scenario that measures bulk traffic and does not decode it (a full capture of the two-guest
# siw comparison is about 900 MB); the decoding passes below skip such a capture.
SCENARIO_CAPTURE_SNAPLEN=""
# shellcheck source=/dev/null
source "$SCENARIO_DIR/scenario.sh"
guest_script=$SCENARIO_DIR/guest.sh
[[ -z $SCENARIO_GUEST_SCRIPT ]] || guest_script=$LAB_ROOT/$SCENARIO_GUEST_SCRIPT
[[ -r $guest_script ]] || { lab_log "no guest script $guest_script for $SCENARIO_NAME"; exit 2; }
env_name=SOFTRNIC_LAB_HOST_CMD_$(echo "$SCENARIO_NAME" | tr 'a-z-' 'A-Z_' | tr -cd 'A-Z0-9_')
if [[ $host_cmd_set -eq 0 && -n ${!env_name+x} ]]; then
    host_cmd=${!env_name}
    host_cmd_set=1
fi
[[ $host_cmd_set -eq 1 ]] || host_cmd=$SCENARIO_HOST_CMD
timeout_s=${timeout_s:-$SCENARIO_TIMEOUT}
[[ $SCENARIO_GUESTS =~ ^[12]$ ]] || lab_die "SCENARIO_GUESTS must be 1 or 2 (at most two guests at once)"
[[ $SCENARIO_BRIDGES =~ ^[12]$ ]] || lab_die "SCENARIO_BRIDGES must be 1 or 2"
[[ -z $SCENARIO_CAPTURE_SNAPLEN || $SCENARIO_CAPTURE_SNAPLEN =~ ^[1-9][0-9]*$ ]] ||
    lab_die "SCENARIO_CAPTURE_SNAPLEN must be a byte count"
case $SCENARIO_GUEST_IPV6 in
    off) guest_ipv6=ipv6.disable=1 ;;
    stack) guest_ipv6=ipv6.disable_ipv6=1 ;;
    *) lab_die "SCENARIO_GUEST_IPV6 must be off or stack" ;;
esac

# ---------------------------------------------------------------- preflight
lab_is_root || lab_skip "lab.sh needs root (network namespaces, bridge, tap devices)"
[[ -c /dev/net/tun ]] || lab_skip "no /dev/net/tun (tap devices are needed)"
command -v ip >/dev/null || lab_skip "no iproute2 'ip' command"
command -v qemu-system-x86_64 >/dev/null || lab_skip "no qemu-system-x86_64 (run build-guest.sh as root to install it)"
command -v tcpdump >/dev/null || lab_skip "no tcpdump (run build-guest.sh as root to install it)"
case $accel in
    tcg)
        # shellcheck disable=SC2054 # the commas belong to qemu option values
        accel_args=(-accel tcg,thread=multi -cpu max) ;;
    kvm) [[ -w /dev/kvm ]] || lab_skip "--accel kvm but /dev/kvm is not usable"
        accel_args=(-accel kvm -cpu host) ;;
    *) lab_die "--accel must be tcg or kvm" ;;
esac
if [[ -n $SCENARIO_SIW_PATCH && -z ${image_given:-} ]]; then
    variant_patch=$SCENARIO_SIW_PATCH
    [[ $variant_patch == */* ]] || variant_patch=$LAB_ROOT/siw-variants/$variant_patch.patch
    [[ -r $variant_patch ]] || lab_die "SCENARIO_SIW_PATCH=$SCENARIO_SIW_PATCH: no $variant_patch"
    rc=0
    image=$(SOFTRNIC_LAB_SIW_PATCH=$variant_patch "$LAB_ROOT/build-guest.sh" --quiet) || rc=$?
    [[ $rc -eq $LAB_EXIT_SKIP ]] && lab_skip "the siw variant image cannot be built on this machine"
    [[ $rc -eq 0 ]] || lab_die "build-guest.sh failed for the siw variant $variant_patch"
    lab_log "siw variant $(basename "$variant_patch" .patch): image $image"
fi
if [[ ! -r $image/vmlinuz || ! -r $image/initrd.img ]]; then
    if [[ $image == "$LAB_CACHE/current" ]]; then
        lab_log "no guest image yet: running build-guest.sh"
        rc=0
        "$LAB_ROOT/build-guest.sh" --quiet >/dev/null || rc=$?
        [[ $rc -eq $LAB_EXIT_SKIP ]] && lab_skip "the guest image cannot be built on this machine"
        [[ $rc -eq 0 ]] || lab_die "build-guest.sh failed"
    fi
    [[ -r $image/vmlinuz && -r $image/initrd.img ]] || lab_die "no guest image in $image"
fi
image=$(cd "$image" && pwd -P)

if [[ -z $results ]]; then
    if [[ -n ${SOFTRNIC_LAB_RESULTS:-} ]]; then
        results=$SOFTRNIC_LAB_RESULTS/$SCENARIO_NAME
    else
        results=/tmp/softrnic-lab/results/$SCENARIO_NAME-$(date +%Y%m%d-%H%M%S)
    fi
fi
case $(realpath -m "$results") in
    / | /tmp | /var | /root | /home | /work | "$LAB_ROOT"* | "$LAB_CACHE") lab_die "refusing results dir $results" ;;
esac
rm -rf "$results"
mkdir -p "$results"/{out,flags,lib,host}
results=$(cd "$results" && pwd -P)
cp -r "$SCENARIO_DIR" "$results/scenario"
install -m 0755 "$guest_script" "$results/scenario/guest.sh"
cp "$LAB_ROOT/guest/lab-guest.sh" "$results/lib/lab-guest.sh"
cp "$LAB_ROOT/tools/sctp_peer.py" "$results/lib/sctp_peer.py"
cp "$LAB_ROOT/lib/perftest-runs.sh" "$LAB_ROOT/lib/siw-compare.sh" "$results/lib/"

NS=$NS_PREFIX$$
PGIDS=()          # process groups this run started (each child runs under setsid)
cleaned=0
cleanup() {
    [[ $cleaned -eq 1 ]] && return 0
    cleaned=1
    local pg p i
    for pg in "${PGIDS[@]}"; do kill -TERM -- "-$pg" 2>/dev/null || true; done
    for i in 1 2 3 4 5 6 7 8 9 10; do
        p=0
        for pg in "${PGIDS[@]}"; do kill -0 -- "-$pg" 2>/dev/null && p=1; done
        [[ $p -eq 0 ]] && break
        sleep 0.3
    done
    for pg in "${PGIDS[@]}"; do kill -KILL -- "-$pg" 2>/dev/null || true; done
    if ip netns list 2>/dev/null | grep -q "^$NS\b"; then
        # Anything else still in the namespace was started by this run.
        for p in $(ip netns pids "$NS" 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
        for i in 1 2; do ip -n "$NS" link del "tap$i" 2>/dev/null || true; done
        for i in 1 2; do ip -n "$NS" link del "tap${i}b" 2>/dev/null || true; done
        ip -n "$NS" link del br0 2>/dev/null || true
        ip -n "$NS" link del br1 2>/dev/null || true
        ip netns del "$NS" 2>/dev/null || lab_log "could not delete namespace $NS"
    fi
}
on_signal() {
    lab_log "interrupted: cleaning up"
    echo "result: FAIL" >"$results/result.txt"
    echo "reason: interrupted by signal" >>"$results/result.txt"
    cleanup
    exit "$1"
}
trap cleanup EXIT
trap 'lab_log "unexpected failure at line $LINENO: $BASH_COMMAND"' ERR
trap 'on_signal 130' INT
trap 'on_signal 143' TERM
trap 'on_signal 129' HUP

# Start "$@" in the namespace, in its own process group; its pid (= pgid) goes to $started.
started=0
spawn() {
    local log=$1
    shift
    setsid ip netns exec "$NS" "$@" >"$log" 2>&1 </dev/null &
    started=$!
    PGIDS+=("$started")
}

t_start=$(date +%s.%N)
lab_log "scenario $SCENARIO_NAME ($SCENARIO_DIRECTION), $SCENARIO_GUESTS guest(s), results in $results"

# ---------------------------------------------------------------- network
cleanup_stale
ip netns add "$NS" || lab_skip "cannot create a network namespace (ip netns add failed)"
ip netns exec "$NS" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 || true
ip -n "$NS" link set lo up
ip -n "$NS" link add br0 address 52:54:00:99:00:01 type bridge
ip -n "$NS" link set br0 type bridge stp_state 0 forward_delay 0 2>/dev/null || true
ip -n "$NS" addr add "$HOST_IP/24" dev br0
ip -n "$NS" link set br0 up
# No offloads on the host end: the capture then shows MTU-sized frames with real checksums,
# as a wire would (the guests' virtio NICs are set up the same way below).
ip netns exec "$NS" ethtool -K br0 tx off sg off tso off gso off gro off >/dev/null 2>&1 ||
    lab_log "ethtool -K br0 failed: the capture may show offloaded (merged) segments"
for ((i = 1; i <= SCENARIO_GUESTS; i++)); do
    ip -n "$NS" tuntap add dev "tap$i" mode tap || lab_skip "cannot create tap devices (/dev/net/tun)"
    ip -n "$NS" link set "tap$i" master br0
    ip -n "$NS" link set "tap$i" up
done
if [[ $SCENARIO_BRIDGES -eq 2 ]]; then
    ip -n "$NS" link add br1 address 52:54:00:99:01:01 type bridge
    ip -n "$NS" link set br1 type bridge stp_state 0 forward_delay 0 2>/dev/null || true
    ip -n "$NS" addr add "$HOST_IP1/24" dev br1
    ip -n "$NS" link set br1 up
    ip netns exec "$NS" ethtool -K br1 tx off sg off tso off gso off gro off >/dev/null 2>&1 || true
    for ((i = 1; i <= SCENARIO_GUESTS; i++)); do
        ip -n "$NS" tuntap add dev "tap${i}b" mode tap || lab_skip "cannot create tap devices (/dev/net/tun)"
        ip -n "$NS" link set "tap${i}b" master br1
        ip -n "$NS" link set "tap${i}b" up
    done
fi

# ---------------------------------------------------------------- capture
# --immediate-mode: without it libpcap hands packets over in blocks, and the block pending
# when tcpdump is stopped (the last few hundred ms of a run) never reaches the file.
capture=$results/capture.pcap
[[ -z $SCENARIO_CAPTURE_SNAPLEN ]] || capture=$results/capture-headers.pcap
spawn "$results/tcpdump.log" tcpdump -i br0 -U --immediate-mode -s "${SCENARIO_CAPTURE_SNAPLEN:-0}" -Z root -w "$capture" 'not ether proto 0x86dd'
tcpdump_pid=$started
for _ in $(seq 50); do
    grep -q 'listening on' "$results/tcpdump.log" 2>/dev/null && break
    sleep 0.1
done
grep -q 'listening on' "$results/tcpdump.log" || lab_die "tcpdump did not start: $(cat "$results/tcpdump.log")"
tcpdump1_pid=""
if [[ $SCENARIO_BRIDGES -eq 2 ]]; then
    [[ -z $SCENARIO_CAPTURE_SNAPLEN ]] || lab_die "SCENARIO_CAPTURE_SNAPLEN is for one bridge"
    spawn "$results/tcpdump-br1.log" tcpdump -i br1 -U --immediate-mode -s 0 -Z root -w "$results/capture-br1.pcap" 'not ether proto 0x86dd'
    tcpdump1_pid=$started
    for _ in $(seq 50); do
        grep -q 'listening on' "$results/tcpdump-br1.log" 2>/dev/null && break
        sleep 0.1
    done
    grep -q 'listening on' "$results/tcpdump-br1.log" || lab_die "tcpdump on br1 did not start: $(cat "$results/tcpdump-br1.log")"
fi

# ---------------------------------------------------------------- host-side command
if [[ -z ${LAB_SOFTRNIC:-} ]]; then LAB_SOFTRNIC=$(lab_softrnic); fi
# A scenario's own preconditions (e.g. a softrnic subcommand): SKIPPED when they fail.
if declare -F scenario_requires >/dev/null; then
    why=$(LAB_SOFTRNIC=$LAB_SOFTRNIC scenario_requires 2>&1) || lab_skip "$SCENARIO_NAME: ${why:-a requirement is missing}"
fi
if [[ $SCENARIO_GUEST_SOFTRNIC -eq 1 ]]; then
    # The guests run the host's release build (the same Debian release): over the 9p share.
    [[ -x ${LAB_SOFTRNIC:-} ]] || lab_skip "$SCENARIO_NAME: no softrnic binary for the guests"
    install -m 0755 "$LAB_SOFTRNIC" "$results/lib/softrnic"
fi
export LAB_NETNS=$NS LAB_HOST_IP=$HOST_IP LAB_G1_IP=${GUEST_IPS[0]} LAB_G2_IP=${GUEST_IPS[1]}
export LAB_GUEST_IPS="${GUEST_IPS[*]:0:SCENARIO_GUESTS}" LAB_RESULTS=$results
export LAB_HOST_OUT=$results/host LAB_FLAGS=$results/flags LAB_TOOLS=$LAB_ROOT/tools
export LAB_SCENARIO_DIR=$SCENARIO_DIR LAB_ROOT LAB_SOFTRNIC
export LAB_BRIDGES=$SCENARIO_BRIDGES LAB_HOST_IP1=$HOST_IP1 LAB_G1_IP1=${GUEST_IPS1[0]} LAB_G2_IP1=${GUEST_IPS1[1]}
host_pid=""
if [[ -n $host_cmd ]]; then
    lab_log "host command: $host_cmd"
    printf '%s\n' "$host_cmd" >"$results/host-cmd.txt"
    # shellcheck disable=SC2016 # expanded by the inner bash
    spawn "$results/host.log" bash -c 'cd "$LAB_HOST_OUT"; touch "$LAB_FLAGS/host.started"; set +e; bash -c "$1"; rc=$?; echo "$rc" >"$LAB_FLAGS/host.exit"; exit "$rc"' host-cmd "$host_cmd"
    host_pid=$started
fi

# ---------------------------------------------------------------- guests
guest_timeout=$((timeout_s > 60 ? timeout_s - 20 : timeout_s))
nic_opts=csum=off,guest_csum=off,gso=off,host_tso4=off,host_tso6=off,host_ecn=off,host_ufo=off
nic_opts=$nic_opts,guest_tso4=off,guest_tso6=off,guest_ecn=off,guest_ufo=off
qemu_pids=()
for ((i = 1; i <= SCENARIO_GUESTS; i++)); do
    ip=${GUEST_IPS[$((i - 1))]}
    peers=$(printf '%s\n' "${GUEST_IPS[@]:0:SCENARIO_GUESTS}" | grep -vx "$ip" | paste -sd, - || true)
    append="console=ttyS0,115200 panic=-1 $guest_ipv6 quiet loglevel=4 lab.name=g$i lab.index=$i"
    append+=" lab.ip=$ip/24 lab.host=${SCENARIO_GUEST_HOST_IP:-$HOST_IP} lab.peers=${peers:-none} lab.timeout=$guest_timeout"
    nic2=()
    if [[ $SCENARIO_BRIDGES -eq 2 ]]; then
        append+=" lab.ip1=${GUEST_IPS1[$((i - 1))]}/24 lab.host1=$HOST_IP1"
        nic2=(-netdev "tap,id=n1,ifname=tap${i}b,script=no,downscript=no"
            -device "virtio-net-pci,netdev=n1,mac=52:54:00:99:01:0$((i + 1)),$nic_opts")
    fi
    spawn "$results/g$i-qemu.log" timeout -k 5 "$timeout_s" qemu-system-x86_64 \
        -name "softrnic-lab-g$i" "${accel_args[@]}" -smp 1 -m 1536 \
        -nodefaults -no-user-config -display none -no-reboot \
        -kernel "$image/vmlinuz" -initrd "$image/initrd.img" -append "$append" \
        -serial "file:$results/g$i-console.log" \
        -netdev "tap,id=n0,ifname=tap$i,script=no,downscript=no" \
        -device "virtio-net-pci,netdev=n0,mac=52:54:00:99:00:0$((i + 1)),$nic_opts" \
        "${nic2[@]}" \
        -virtfs "local,path=$results,mount_tag=lab,security_model=none,id=lab" \
        -device virtio-rng-pci
    qemu_pids+=("$started")
    lab_log "guest g$i ($ip) started"
done

# ---------------------------------------------------------------- wait
reasons=()
for ((i = 1; i <= SCENARIO_GUESTS; i++)); do
    rc=0
    wait "${qemu_pids[$((i - 1))]}" || rc=$?
    [[ $rc -eq 124 ]] && reasons+=("g$i: timed out after ${timeout_s}s")
    [[ $rc -ne 0 && $rc -ne 124 ]] && reasons+=("g$i: qemu exit status $rc (see g$i-qemu.log)")
done
lab_log "guests finished ($(awk -v a="$t_start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }') s)"
if [[ -n $host_pid ]]; then
    for _ in $(seq 100); do kill -0 "$host_pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$host_pid" 2>/dev/null; then
        reasons+=("host command still running 10 s after the guests finished: killed")
        kill -TERM -- "-$host_pid" 2>/dev/null || true
    fi
    rc=0
    wait "$host_pid" || rc=$?
    [[ $rc -ne 0 ]] && reasons+=("host command exit status $rc (see host.log)")
fi
sleep 0.3
kill -INT -- "-$tcpdump_pid" 2>/dev/null || true
wait "$tcpdump_pid" 2>/dev/null || true
if [[ -n $tcpdump1_pid ]]; then
    kill -INT -- "-$tcpdump1_pid" 2>/dev/null || true
    wait "$tcpdump1_pid" 2>/dev/null || true
    # Both paths of a multihomed association in one file, in time order.
    if command -v mergecap >/dev/null; then
        mergecap -F pcap -w "$results/capture-all.pcap" "$results/capture.pcap" "$results/capture-br1.pcap" ||
            lab_log "mergecap failed"
    fi
fi

# ---------------------------------------------------------------- verdict
for ((i = 1; i <= SCENARIO_GUESTS; i++)); do
    gout=$results/out/g$i
    if [[ -r $gout/rc ]]; then
        grc=$(cat "$gout/rc")
    else
        grc=$(sed -n "s/.*LAB-RESULT g$i rc=\([0-9]*\).*/\1/p" "$results/g$i-console.log" 2>/dev/null | tail -n1)
    fi
    if [[ -z $grc ]]; then
        reasons+=("g$i: no result (see g$i-console.log)")
    elif [[ $grc -ne 0 ]]; then
        case $grc in
            124) reasons+=("g$i: guest setup failed (siw/rdma modules, see g$i-console.log)") ;;
            125) reasons+=("g$i: 9p share not mounted") ;;
            *) reasons+=("g$i: guest.sh exit status $grc (see out/g$i/guest.log)") ;;
        esac
    fi
done
# The decoding passes need whole frames (a headers-only capture has none to decode).
if [[ -z $SCENARIO_CAPTURE_SNAPLEN ]]; then
    python3 "$LAB_ROOT/tools/mpa_lab.py" pcap "$results/capture.pcap" >"$results/mpa.jsonl" 2>&1 || true
    if command -v tshark >/dev/null; then
        # ecatf off: EtherCAT-over-TCP claims port 34980, which can be an MPA client's port.
        tshark_args=(-r "$results/capture.pcap" --disable-protocol rpcordma --disable-protocol smb_direct
            --disable-protocol ecatf)
        tshark "${tshark_args[@]}" >"$results/capture.txt" 2>&1 || true
        # RDMAP opcode counts (RFC 5040 §4.3: 0 Write, 1 Read Request, 2 Read Response, 3 Send, ...)
        tshark "${tshark_args[@]}" -T fields -e iwarp_rdma.opcode 2>/dev/null | tr ',' '\n' |
            awk 'BEGIN { n["0x00"] = "write"; n["0x01"] = "read_request"; n["0x02"] = "read_response"
                         n["0x03"] = "send"; n["0x04"] = "send_invalidate"; n["0x05"] = "send_se"
                         n["0x06"] = "send_se_invalidate"; n["0x07"] = "terminate" }
                 NF { c[($1 in n) ? n[$1] : $1]++ }
                 END { for (k in c) print k, c[k] }' | sort >"$results/rdmap-opcodes.txt" || true
    fi
fi
if declare -F scenario_check >/dev/null; then
    rc=0
    (cd "$results" && LAB_PCAP=$capture LAB_PCAP_BR1=$results/capture-br1.pcap \
        LAB_PCAP_ALL=$results/capture-all.pcap scenario_check) >"$results/check.log" 2>&1 || rc=$?
    [[ $rc -ne 0 ]] && reasons+=("scenario check failed: $(grep -E 'FAIL|ERROR' "$results/check.log" | tail -n1 || true) (see check.log)")
fi
# The guests' copy of the host's binary: the binary is the run's, not a result.
rm -f "$results/lib/softrnic"
t_end=$(date +%s.%N)
secs=$(awk -v a="$t_start" -v b="$t_end" 'BEGIN { printf "%.0f", b - a }')
verdict=PASS
[[ ${#reasons[@]} -eq 0 ]] || verdict=FAIL
{
    echo "scenario: $SCENARIO_NAME"
    echo "direction: $SCENARIO_DIRECTION"
    echo "result: $verdict"
    echo "seconds: $secs"
    echo "image: $image"
    echo "siw variant: ${SCENARIO_SIW_PATCH:-stock}"
    echo "host command: ${host_cmd:-none}"
    [[ -z $SCENARIO_CAPTURE_SNAPLEN ]] || echo "capture: headers only, $SCENARIO_CAPTURE_SNAPLEN bytes per frame"
    for r in "${reasons[@]}"; do echo "reason: $r"; done
} >"$results/result.txt"
for r in "${reasons[@]}"; do lab_log "FAIL: $r"; done
echo "RESULT $SCENARIO_NAME $verdict ${secs}s $results"
if [[ $verdict == PASS ]]; then exit 0; else exit 1; fi
