# shellcheck shell=bash
# `softrnic conform` against siw[crc-required] (g1) both ways, checked against conform/expect/crc-required.json:
# see lib/conform-scenario.sh.
# shellcheck source=../../lib/conform-scenario.sh
source "$LAB_ROOT/lib/conform-scenario.sh"
conform_scenario crc-required
