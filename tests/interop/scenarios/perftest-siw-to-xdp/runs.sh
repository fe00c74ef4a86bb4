# shellcheck shell=bash disable=SC2034 # settings read by lib/perftest-runs.sh
# The runs of perftest-siw-to-xdp, read by the shared guest script (as /lab/scenario/runs.sh) and
# host.sh: the perftest scenarios' one list (lib/perftest-runs.sh) with these settings.
PT_FIRST_PORT=18900
PT_WRITE_LAT=none
PT_OPTIONS=no
PT_SIZES="2 65536"
# shellcheck source=../../lib/perftest-runs.sh
. "${LAB_ROOT:-/lab}/lib/perftest-runs.sh"
