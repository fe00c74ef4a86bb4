# shellcheck shell=bash disable=SC2034 # settings read by lib/perftest-runs.sh
# The runs of perftest-siw-to-softrnic, read by guest.sh (as /lab/scenario/runs.sh) and
# host.sh: the perftest scenarios' one list (lib/perftest-runs.sh) with these settings.
PT_FIRST_PORT=18600
PT_WRITE_LAT=blocked
PT_OPTIONS=yes
# shellcheck source=../../lib/perftest-runs.sh
. "${LAB_ROOT:-/lab}/lib/perftest-runs.sh"
