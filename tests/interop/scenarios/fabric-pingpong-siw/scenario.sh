# shellcheck shell=bash disable=SC2034,SC2016 # variables read by lab.sh; the host command is expanded there
# libfabric's fi_pingpong (1.17, Debian's libfabric-bin) over FI_EP_MSG between the softrnic
# provider on the host (fabric/softrnic_fi.c, loaded through FI_PROVIDER_PATH, on the
# libsoftrnic.so beside the lab's softrnic binary) and libfabric's own verbs provider on
# Linux siw in g1 (`-p verbs`, rdma_cm), both ways, one fresh pair of processes per size
# (64, 4096, 65536 bytes; -I 50, -c: every received message checked):
#   a) softrnic client (host) -> verbs server (g1), control port 47600+i;
#   b) verbs client (g1) -> softrnic server (host), control port 47610+i.
# Both providers exchange CM data in the verbs provider's layout (a length octet, then the
# data, in the MPA private data after RFC 6581's IRD/ORD words); fi_pingpong's own address
# exchange runs over its TCP control connection. Passes when every client and server exits 0
# and prints its result line, g1's `fi_info -p verbs` lists siw0, and the capture decodes with
# `softrnic decode` without errors, tshark agreeing, with at least 2 x 3 x 50 x 2 Sends, and
# each of the 6 MPA Requests and 6 Replies carries private data of 5 octets: RFC 6581's
# IRD/ORD and the length octet 0 of an empty CM data (fi_pingpong sends none).
SCENARIO_GUESTS=1
SCENARIO_DIRECTION="softrnic provider(host) <-> libfabric verbs on siw(g1), both ways"
SCENARIO_TIMEOUT=420
PP_SIZES="64 4096 65536"
PP_ITERS=50
SCENARIO_HOST_CMD='PP_SIZES="'$PP_SIZES'" PP_ITERS='$PP_ITERS' bash "$LAB_SCENARIO_DIR/host.sh"'

scenario_requires() {
    command -v fi_pingpong >/dev/null || { echo "no fi_pingpong on the host (libfabric-bin)"; return 1; }
    lab_fabric_requires
}

scenario_check() {
    "$LAB_TOOLS/decode-crosscheck.sh" "$LAB_PCAP" || return 1
    # The CM data on the wire: fi_pingpong connects and accepts without CM data, so both
    # providers' MPA private data is RFC 6581's IRD/ORD (4 octets) and the verbs layout's
    # length octet 0, in the Requests softrnic and siw sent and in their Replies.
    python3 - mpa.jsonl <<'PY' || return 1
import json, sys
frames = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
req = [f for f in frames if f["kind"] == "request"]
rep = [f for f in frames if f["kind"] == "reply"]
bad = [f for f in req + rep if f["pd_len"] != 5 or not f["hex"].endswith("00")]
if len(req) != 6 or len(rep) != 6 or bad:
    print(f"FAIL: expected 6 MPA Requests and 6 Replies with private data [IRD/ORD, 00]: "
          f"{len(req)} / {len(rep)}, not so: {bad}")
    sys.exit(1)
print("ok: 6 MPA Requests and 6 Replies, each with private data IRD/ORD + CM data length octet 00")
PY
    local n want
    want=$((2 * 3 * PP_ITERS * 2))
    n=$("$LAB_SOFTRNIC" decode --counts "$LAB_PCAP" | awk '$1 == "0x03" { print $3 }')
    if [[ ${n:-0} -lt $want ]]; then echo "FAIL: expected at least $want RDMAP Sends, found ${n:-0}"; return 1; fi
    echo "ok: $n RDMAP Sends (2 directions x 3 sizes x $PP_ITERS round trips, plus fi_pingpong's own)"
}
