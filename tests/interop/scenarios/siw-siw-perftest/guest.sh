#!/bin/bash
# g1 runs each perftest server, g2 the matching client, one tool at a time. Per tool and
# attempt: g1 raises "<tool>.<n>.ready" once its server listens; g2 runs the client and
# raises "<tool>.<n>.done" holding the client's exit status; g1 then raises
# "<tool>.<n>.verdict" = ok | retry | fail. One retry per tool (siw 6.1 accept race).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../../guest/lab-guest.sh
. /lab/lib/lab-guest.sh
TOOLS=("ib_send_bw 18515 4096" "ib_write_bw 18516 8192" "ib_read_bw 18517 8192")
ITER=20
LIMIT=60 # seconds per tool run; one takes a few seconds in a TCG guest

run_server() { # tool port size tag -> sets verdict
    local tool=$1 port=$2 size=$3 tag=$4 pid src=0 crc
    "$tool" -R -F -d siw0 -p "$port" -n "$ITER" -s "$size" >"$tag.server.log" 2>&1 &
    pid=$!
    lab_wait_listen "$port" 30 || true
    lab_signal "$tag.ready"
    lab_step "$tag-server" timeout "$LIMIT" tail --pid="$pid" -f /dev/null || kill -9 "$pid" 2>/dev/null || true
    wait "$pid" || src=$?
    cat "$tag.server.log"
    lab_wait "$tag.done" "$((LIMIT + 10))" || true
    crc=$(cat "$LAB_FLAGS/$tag.done" 2>/dev/null || echo none)
    glog "$tag: server exit status $src, client exit status $crc"
    [[ $src == 0 && $crc == 0 ]]
}

run_client() { # tool port size tag -> client exit status
    local tool=$1 port=$2 size=$3 tag=$4 crc=0
    lab_wait "$tag.ready" 90 || return 1
    lab_step "$tag-client" timeout "$LIMIT" "$tool" -R -F -d siw0 -p "$port" -n "$ITER" -s "$size" \
        "$LAB_PEER_IP" >"$tag.client.log" 2>&1 || crc=$?
    cat "$tag.client.log"
    lab_signal "$tag.done" "$crc"
}

for entry in "${TOOLS[@]}"; do
    read -r tool port size <<<"$entry"
    for attempt in 1 2; do
        tag=$tool.$attempt
        if [[ $LAB_NAME == g1 ]]; then
            if run_server "$tool" "$port" "$size" "$tag"; then
                verdict=ok
            elif [[ $attempt -eq 1 ]]; then
                verdict=retry
                echo "$tool attempt 1 failed: retried" >>retries.txt
            else
                verdict=fail
            fi
            lab_signal "$tag.verdict" "$verdict"
        else
            run_client "$tool" "$port" "$size" "$tag" || true
            lab_wait "$tag.verdict" "$((LIMIT * 2 + 40))" || exit 1
            verdict=$(cat "$LAB_FLAGS/$tag.verdict")
            [[ $verdict == retry ]] && echo "$tool attempt 1 failed: retried" >>retries.txt
        fi
        case $verdict in
            ok) break ;;
            fail) glog "$tool failed twice"; exit 1 ;;
        esac
    done
done
glog "all perftest tools passed"
