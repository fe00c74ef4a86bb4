# shellcheck shell=bash disable=SC2034 # KSCTP_RC is read by the sourcing script
# The run loops of ksctp-guest-to-host, shared by host.sh and guest.sh (as
# /lab/scenario/runs.sh): every run of tests.txt, "NAME|TOOL OPTIONS", with the same options
# on server and client (rping's server gets -s, its client -c -a PEER).
#
# The sourcing script sets S (the softrnic binary), T (its --transport/--bind options) and
# these hooks: ksctp_log MSG (progress line), ksctp_listening PORT (returns once the server
# listens), ksctp_ready FLAG (raises the flag for the other side), ksctp_await FLAG (waits for
# the other side's flag; fails if it never comes). Results go to ksctp-results.txt, one line
# per run: PHASE NAME server|client EXIT-STATUS; KSCTP_RC becomes 1 when one failed.
KSCTP_RC=0
KSCTP_RUNS=()

# ksctp_load_runs FILE: the runs of FILE (comments and blank lines left out).
ksctp_load_runs() {
    local list line
    list=$(grep -v -e '^#' -e '^$' "$1")
    # (no process substitution: the guest has no /dev/fd)
    while IFS= read -r line; do KSCTP_RUNS+=("$line"); done <<<"$list"
    [[ ${#KSCTP_RUNS[@]} -gt 0 ]] || { echo "no runs in $1"; return 1; }
    : >ksctp-results.txt
}

# ksctp_cmd server|client RUN [PEER]: sets KSCTP_NAME, KSCTP_PORT (the server's port) and
# KSCTP_CMD (the command line) of RUN's server, or of its client to PEER.
ksctp_cmd() {
    local role=$1 run=$2 peer=${3:-} args tool
    KSCTP_NAME=${run%%|*}
    read -ra args <<<"${run#*|}"
    tool=${args[0]}
    if [[ $tool == rping ]]; then
        KSCTP_PORT=7174
        if [[ $role == server ]]; then KSCTP_CMD=("$S" rping -s)
        else KSCTP_CMD=("$S" rping -c -a "$peer"); fi
    else
        KSCTP_PORT=18515
        KSCTP_CMD=("$S" "$tool")
        [[ $role == server ]] || KSCTP_CMD+=("$peer")
    fi
    KSCTP_CMD+=("${args[@]:1}" "${T[@]}")
}

# ksctp_servers PHASE: each run's server in turn (output PHASE-NAME.txt), flag PHASE<N>.ready
# raised once it listens, then its exit awaited.
ksctp_servers() {
    local phase=$1 i=0 run pid r
    for run in "${KSCTP_RUNS[@]}"; do
        i=$((i + 1))
        ksctp_cmd server "$run"
        ksctp_log "${phase^^}$i $KSCTP_NAME: ${KSCTP_CMD[*]}"
        timeout 150 "${KSCTP_CMD[@]}" </dev/null >"$phase-$KSCTP_NAME.txt" 2>&1 &
        pid=$!
        ksctp_listening "$KSCTP_PORT" || true
        ksctp_ready "$phase$i.ready"
        r=0
        wait "$pid" || r=$?
        cat "$phase-$KSCTP_NAME.txt"
        echo "${phase^^} $KSCTP_NAME server $r" >>ksctp-results.txt
        [[ $r -eq 0 ]] || KSCTP_RC=1
    done
}

# ksctp_clients PHASE PEER: each run's client to PEER in turn (output PHASE-NAME.txt), once
# the other side's flag PHASE<N>.ready is up.
ksctp_clients() {
    local phase=$1 peer=$2 i=0 run r
    for run in "${KSCTP_RUNS[@]}"; do
        i=$((i + 1))
        ksctp_cmd client "$run" "$peer"
        ksctp_await "$phase$i.ready" ||
            { echo "${phase^^} $KSCTP_NAME client no-server" >>ksctp-results.txt; KSCTP_RC=1; continue; }
        ksctp_log "${phase^^}$i $KSCTP_NAME: ${KSCTP_CMD[*]}"
        r=0
        timeout 120 "${KSCTP_CMD[@]}" </dev/null >"$phase-$KSCTP_NAME.txt" 2>&1 || r=$?
        cat "$phase-$KSCTP_NAME.txt"
        echo "${phase^^} $KSCTP_NAME client $r" >>ksctp-results.txt
        [[ $r -eq 0 ]] || KSCTP_RC=1
    done
}
