# shellcheck shell=bash disable=SC2034,SC2016 # variables read by lab.sh; the host command is expanded there
# The conform-siw* scenarios, one definition: `softrnic conform` against siw[VARIANT] (g1) both
# ways — its catalogue with siw's persistent rping server as responder, then with siw's rping
# client as initiator (one connection per case); see conform/host.sh and conform/guest.sh. The
# check (conform/check.sh) compares both JSON reports with conform/expect/VARIANT.json: every
# case's verdict, and the reason of every non-PASS.
#
# A scenario.sh sources this file and calls `conform_scenario VARIANT`, VARIANT being `stock`
# or the name of a siw-variants/ patch.

conform_scenario() {
    CONFORM_VARIANT=${1:?usage: conform_scenario stock|VARIANT}
    SCENARIO_GUESTS=1
    SCENARIO_GUEST_SCRIPT=conform/guest.sh
    if [[ $CONFORM_VARIANT == stock ]]; then
        SCENARIO_SIW_PATCH=""
    else
        SCENARIO_SIW_PATCH=$CONFORM_VARIANT
    fi
    SCENARIO_DIRECTION="softrnic conform <-> siw[$CONFORM_VARIANT](g1)"
    SCENARIO_TIMEOUT=720
    SCENARIO_HOST_CMD='"$LAB_ROOT/conform/host.sh"'
}

scenario_check() {
    "$LAB_ROOT/conform/check.sh" "$CONFORM_VARIANT"
}
