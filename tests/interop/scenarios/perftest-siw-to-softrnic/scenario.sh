# shellcheck shell=bash disable=SC2034,SC2016 # variables read by lab.sh; the host command is expanded there
# siw's perftest clients (g1) -> softrnic's perftest-style servers on the host end (10.99.0.1),
# both speaking perftest's -R protocol (rdma_cm: a control connection carrying the
# pingpong_dest / report exchanges as Sends, then the test connection). Runs (runs.sh, lib/perftest-runs.sh):
# ib_send_bw, ib_send_lat, ib_write_bw, ib_read_bw, ib_read_lat -R -n 10 with sizes 2, 64,
# 4096, 65536 and 1048576 B against `softrnic <tool> -R` with the same options, one run per
# tool and size, each on its own port; plus one ib_write_lat -R -s 2, expected to block
# (softrnic, the MPA responder, may not send first: RFC 5044 §7.1.2; see lib/perftest-runs.sh) and
# reported as such; plus runs with perftest options given to both ends (pt_option_runs):
# -D 2 for every tool, --output=bandwidth|message_rate|latency, -H, -C -U, -l 5, and -b for
# write_bw, read_bw and send_bw (also with -D 2), -q 2/-q 4, and -q 2 -b for write_bw,
# read_bw and send_bw. Passes when every other run exits 0 on both
# sides, and the capture holds
# two MPA connections per run, decodes with `softrnic decode` without errors and with the
# RDMAP opcode counts tshark sees, including Sends, Writes, Read Requests and Read Responses.
SCENARIO_GUESTS=1
SCENARIO_DIRECTION="siw(g1) -> softrnic(host)"
SCENARIO_TIMEOUT=1200
SCENARIO_HOST_CMD='bash "$LAB_SCENARIO_DIR/host.sh"'

# shellcheck source=../../tools/perftest-check.sh
. "$LAB_ROOT/tools/perftest-check.sh"

scenario_check() {
    pt_check "$LAB_G1_IP" || return 1
    cat "$LAB_RESULTS/host/expected.txt" 2>/dev/null || true
    echo "ok: $PT_RUN_COUNT runs, every expected-ok run passed on both sides"
}
