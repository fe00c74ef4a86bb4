# shellcheck shell=bash disable=SC2034,SC2016 # variables read by lab.sh; the host command is expanded there
# `softrnic conform --app write-bw-server` against stock siw (g1) with perftest's
# `ib_write_bw -R -F -d siw0 -p 18515` as the application behind every case, one case per run:
# perftest serves one test and its listener outlives it, so g1 starts a fresh server for each
# case and the host runs that case alone (`--case =ID`) once it listens (flags srv.N.ready,
# srv.N.done). The runner plays perftest's client side of the -R protocol (control connection,
# the version/cycle/cache/MTU/pingpong_dest exchanges, the test connection) with raw FPDUs and
# then runs the case on the test connection. Then the initiator cases with perftest's client:
# `softrnic conform --listen --app perftest-client`, g1 running `ib_write_bw -R HOST` once per
# case. Both reports are compared with conform/expect/perftest-stock.json (every case's
# verdict, and the reason of every non-PASS) by conform/check_conform.py.
SCENARIO_GUESTS=1
SCENARIO_DIRECTION="softrnic conform <-> siw[stock](g1) running ib_write_bw -R (server, client)"
SCENARIO_TIMEOUT=900
SCENARIO_HOST_CMD='bash "$LAB_SCENARIO_DIR/host.sh"'

scenario_check() {
    if grep -E "kernel BUG|Oops:|general protection fault" g1-console.log 2>/dev/null; then
        echo "FAIL: the guest kernel crashed during the run (g1-console.log)"
        return 1
    fi
    python3 "$LAB_ROOT/conform/check_conform.py" "$LAB_ROOT/conform/expect/perftest-stock.json" \
        --softrnic "$LAB_SOFTRNIC" --responder host/responder.json --initiator host/initiator.json
}
