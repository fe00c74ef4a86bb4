# shellcheck shell=bash disable=SC2034,SC2016 # variables read by lab.sh; the host command is expanded there
# siw <-> siw reference: rping over rdma_cm between two guests (g1 server, g2 client).
# Passes when both rping runs succeed and the capture holds the MPA Request/Reply exchange.
SCENARIO_GUESTS=2
SCENARIO_DIRECTION="siw(g2) -> siw(g1)"
SCENARIO_TIMEOUT=240
SCENARIO_HOST_CMD=""

scenario_check() {
    python3 "$LAB_TOOLS/mpa_lab.py" expect-pcap "$LAB_PCAP" --min-requests 1 --min-replies 1 \
        --request-from "$LAB_G2_IP"
}
