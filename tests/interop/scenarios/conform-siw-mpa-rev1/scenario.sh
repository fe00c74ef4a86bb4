# shellcheck shell=bash
# `softrnic conform` against siw[mpa-rev1] (g1) both ways, checked against conform/expect/mpa-rev1.json:
# see lib/conform-scenario.sh.
# shellcheck source=../../lib/conform-scenario.sh
source "$LAB_ROOT/lib/conform-scenario.sh"
conform_scenario mpa-rev1
