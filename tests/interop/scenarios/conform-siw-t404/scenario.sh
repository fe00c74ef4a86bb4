# shellcheck shell=bash
# `softrnic conform` against siw[t404] (g1) both ways, checked against conform/expect/t404.json:
# see lib/conform-scenario.sh.
# shellcheck source=../../lib/conform-scenario.sh
source "$LAB_ROOT/lib/conform-scenario.sh"
conform_scenario t404
