# shellcheck shell=bash
# `softrnic conform` against siw[p2p-read] (g1) both ways, checked against conform/expect/p2p-read.json:
# see lib/conform-scenario.sh.
# shellcheck source=../../lib/conform-scenario.sh
source "$LAB_ROOT/lib/conform-scenario.sh"
conform_scenario p2p-read
