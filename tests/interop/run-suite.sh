#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2317 # (on_signal runs from a trap)
# Run the whole interop suite: build (or reuse) the guest image, then every scenario, one at a
# time (at most two guests run at once), and print a table: scenario, direction, result, time.
#
# Usage: run-suite.sh [--results DIR] [--only NAME[,NAME...]] [--accel tcg|kvm]
#   --results DIR  results directory (default ${SOFTRNIC_LAB_RESULTS:-/tmp/softrnic-lab/results}/suite-<date>)
#   --only LIST    run only these scenarios (names under tests/interop/scenarios/)
# Exit: 0 all passed, or the machine cannot run the lab (prints "SKIPPED: <reason>");
#       1 a scenario or the image build failed; 130 interrupted.
set -euo pipefail
# shellcheck source=lib/common.sh
source "$(dirname "$0")/lib/common.sh"

ORDER=(siw-siw-rping siw-initiator-to-host host-initiator-to-siw siw-siw-perftest)
results=""
only=""
lab_args=()
while [[ $# -gt 0 ]]; do
    case $1 in
        --results) results=$2; shift ;;
        --only) only=$2; shift ;;
        --accel) lab_args+=(--accel "$2"); shift ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '/^# shellcheck/d; $d; s/^# \{0,1\}//'; exit 0 ;;
        *) lab_log "unknown argument $1"; exit 2 ;;
    esac
    shift
done

skip() { echo "SKIPPED: $*"; exit 0; }

# ---------------------------------------------------------------- can this machine run it?
lab_is_root || skip "the interop lab needs root (network namespaces, tap devices, apt-get)"
[[ -c /dev/net/tun ]] || skip "no /dev/net/tun on this machine (tap devices are needed)"
command -v ip >/dev/null || skip "no iproute2 'ip' command"
if ! command -v apt-get >/dev/null && [[ ! -r $LAB_CACHE/current/initrd.img ]]; then
    skip "no apt-get to build the guest from Debian packages and no cached image in $LAB_CACHE"
fi
if ! ip netns add "softrnic-lab-probe-$$" 2>/dev/null; then
    skip "cannot create network namespaces here (ip netns add failed)"
fi
ip netns del "softrnic-lab-probe-$$" 2>/dev/null || true

scenarios=()
if [[ -n $only ]]; then
    IFS=, read -r -a scenarios <<<"$only"
else
    scenarios=("${ORDER[@]}")
    for d in "$LAB_ROOT"/scenarios/*/; do
        n=$(basename "$d")
        [[ " ${ORDER[*]} " == *" $n "* ]] || scenarios+=("$n")
    done
fi
for n in "${scenarios[@]}"; do
    [[ -r $LAB_ROOT/scenarios/$n/scenario.sh ]] || { lab_log "no scenario named $n"; exit 2; }
done

results=${results:-${SOFTRNIC_LAB_RESULTS:-/tmp/softrnic-lab/results}/suite-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$results"
results=$(cd "$results" && pwd -P)

rows=()
add_row() { rows+=("$(printf '%-24s %-22s %-8s %s' "$1" "$2" "$3" "$4")"); }
print_table() {
    echo
    printf '%-24s %-22s %-8s %s\n' scenario direction result time
    printf '%-24s %-22s %-8s %s\n' -------- --------- ------ ----
    printf '%s\n' "${rows[@]}"
    echo
    echo "results: $results"
}
# Children run in the background so that a signal to this script can be passed on as TERM
# (lab.sh and build-guest.sh clean up on TERM; background jobs do not see Ctrl-C's INT).
interrupted=0
child=""
on_signal() {
    interrupted=1
    [[ -n $child ]] && kill -TERM "$child" 2>/dev/null
    return 0
}
trap on_signal INT TERM HUP
run_child() { # log cmd... -> exit status of cmd (waits through signals for its cleanup)
    local log=$1 rc=0
    shift
    "$@" >"$log" 2>&1 &
    child=$!
    while true; do
        rc=0
        wait "$child" || rc=$?
        kill -0 "$child" 2>/dev/null || break
    done
    child=""
    return "$rc"
}

# ---------------------------------------------------------------- image
t0=$(date +%s)
rc=0
run_child "$results/build-guest.log" "$LAB_ROOT/build-guest.sh" || rc=$?
build_secs=$(($(date +%s) - t0))
[[ $interrupted -eq 1 ]] && { lab_log "interrupted"; exit 130; }
if [[ $rc -eq $LAB_EXIT_SKIP ]]; then
    skip "$(sed -n 's/^SKIPPED: //p' "$results/build-guest.log" | tail -n1)"
elif [[ $rc -ne 0 ]]; then
    tail -n 20 "$results/build-guest.log" >&2
    add_row build-guest - FAIL "${build_secs}s"
    print_table
    echo "0 passed, 1 failed"
    exit 1
fi
cached=built
grep -q 'up to date' "$results/build-guest.log" && cached=cached
add_row build-guest "($cached)" PASS "${build_secs}s"
"$LAB_ROOT/lab.sh" --cleanup-stale >/dev/null 2>&1 || true
# Build the host-side softrnic once for all scenarios (lab.sh reads LAB_SOFTRNIC).
LAB_SOFTRNIC=$(lab_softrnic)
export LAB_SOFTRNIC

# ---------------------------------------------------------------- scenarios
passed=0
failed=0
skipped=0
for n in "${scenarios[@]}"; do
    dir=$results/$n
    lab_log "running $n"
    t0=$(date +%s)
    rc=0
    run_child "$results/$n.log" "$LAB_ROOT/lab.sh" "${lab_args[@]}" --results "$dir" "$n" || rc=$?
    secs=$(($(date +%s) - t0))
    direction=$(sed -n 's/^direction: //p' "$dir/result.txt" 2>/dev/null || true)
    if [[ $rc -eq 130 || $rc -eq 143 || $interrupted -eq 1 ]]; then
        add_row "$n" "${direction:--}" ABORTED "${secs}s"
        print_table
        lab_log "interrupted"
        exit 130
    elif [[ $rc -eq 0 ]]; then
        result=PASS
        passed=$((passed + 1))
    elif [[ $rc -eq $LAB_EXIT_SKIP ]]; then
        result=SKIPPED
        skipped=$((skipped + 1))
        lab_log "$n: $(grep '^SKIPPED' "$results/$n.log" | tail -n1)"
    else
        result=FAIL
        failed=$((failed + 1))
        grep '^reason:' "$dir/result.txt" 2>/dev/null | sed "s/^/  $n: /" >&2 || tail -n 5 "$results/$n.log" >&2
    fi
    add_row "$n" "${direction:--}" "$result" "${secs}s"
done

print_table
if [[ $passed -eq 0 && $failed -eq 0 && $skipped -gt 0 ]]; then
    echo "SKIPPED: every scenario was skipped (see $results/*.log)"
    exit 0
fi
echo "$passed passed, $failed failed, $skipped skipped"
[[ $failed -eq 0 ]] || exit 1
exit 0
