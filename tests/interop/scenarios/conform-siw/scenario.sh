# shellcheck shell=bash disable=SC2034,SC2016 # variables read by lab.sh; the host command is expanded there
# `softrnic conform` against siw[stock] (g1) both ways: its catalogue with siw's persistent rping
# server as responder, then with siw's rping client as initiator (one connection per case); see
# conform/host.sh and conform/guest.sh. The check (conform/check.sh) compares both JSON reports
# with conform/expect/stock.json: every case's verdict, and the reason of every non-PASS.
SCENARIO_GUESTS=1
SCENARIO_GUEST_SCRIPT=conform/guest.sh
SCENARIO_DIRECTION="softrnic conform <-> siw[${SCENARIO_SIW_PATCH:-stock}](g1)"
SCENARIO_TIMEOUT=720
SCENARIO_HOST_CMD='"$LAB_ROOT/conform/host.sh"'

scenario_check() {
    "$LAB_ROOT/conform/check.sh" stock
}
