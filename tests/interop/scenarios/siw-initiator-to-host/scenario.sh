# shellcheck shell=bash disable=SC2034,SC2016 # variables read by lab.sh; the host command is expanded there
# siw as MPA initiator towards the host end of the lab namespace (10.99.0.1:7174).
# The guest runs `rping -c` against the host. The default host side is a small MPA responder
# stand-in that records the MPA Request and rejects the connection; later softrnic's
# responder takes its place (lab.sh --host-cmd '...'). The check reads the MPA Request from
# the capture, so it holds whatever the host side is: siw 6.1's Request must be exactly
#   4d504120494420526571204672616d65 10 02 0004 0001 0001
# ("MPA ID Req Frame", H=1 only, rev 2, PD length 4, IRD=1, ORD=1; RFC 5044 §7.1, RFC 6581 §7).
SCENARIO_GUESTS=1
SCENARIO_DIRECTION="siw(g1) -> host"
SCENARIO_TIMEOUT=180
SIW_MPA_REQUEST=4d504120494420526571204672616d651002000400010001
SCENARIO_HOST_CMD='python3 "$LAB_TOOLS/mpa_lab.py" listen --bind "$LAB_HOST_IP" --port 7174 --timeout 120 --out mpa-request.json --expect-request-hex '$SIW_MPA_REQUEST

scenario_check() {
    python3 "$LAB_TOOLS/mpa_lab.py" expect-pcap "$LAB_PCAP" --min-requests 1 --min-replies 0 \
        --request-from "$LAB_G1_IP" --request-hex "$SIW_MPA_REQUEST"
}
