# shellcheck shell=bash disable=SC2034,SC2016 # variables read by lab.sh; the host command is expanded there
# siw 6.1's accept race, measured: softrnic as initiator against siw's persistent rping server
# (g1, `rping -s -P -V -S 65535`), RACE_N connections (default 20) with the first FPDU sent at
# once after the MPA Reply (`--first-fpdu-delay-ms 0`), then RACE_N with `--profile siw`
# (first FPDU held 50 ms). Each connection is `softrnic rping -c -V -C 1 --timeout 5`; a run
# that times out is one whose first Send siw never processed. siw_accept() (siw_cm.c) sends the
# Reply while the socket's data_ready callback is still the CM's, and that callback ignores
# data once the endpoint is in RDMA mode; the FPDU then sits in the socket until another
# segment arrives, which rping never sends. The counts go to host/race.txt; the scenario
# passes when every run with the mitigation succeeded (failures without it are the finding,
# not a test failure).
SCENARIO_GUESTS=1
SCENARIO_DIRECTION="softrnic(host) -> siw(g1), accept race"
SCENARIO_TIMEOUT=600
SCENARIO_HOST_CMD='RACE_N=${RACE_N:-20} bash "$LAB_SCENARIO_DIR/host.sh"'

scenario_check() {
    cat host/race.txt 2>/dev/null || { echo "FAIL: no host/race.txt"; return 1; }
    "$LAB_TOOLS/decode-crosscheck.sh" "$LAB_PCAP" || return 1
}
