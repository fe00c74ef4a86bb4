# shellcheck shell=bash disable=SC2034,SC2016 # variables read by lab.sh; the host command is expanded there
# The host end of the lab namespace as MPA initiator towards siw `rping -s` in the guest.
# The default host side is a small MPA initiator stand-in (raw bytes from mpa_lab.py connect):
# two connections, each sending an MPA Request rev 2, H=1, IRD/ORD 16/16 — the first without,
# the second with the CRC bit — and checking siw's Reply: key "MPA ID Rep Frame", rev 2
# echoed, R=0, M=0, C echoing the request (siw grants CRC when asked), H=1 and IRD/ORD 16/16
# (what siw 6.1 answers, see tests/data/golden/siw-mpa-setup.pcap). It sends nothing after
# the Reply (siw 6.1 accept race, RECIPE.md) and closes. Later softrnic's initiator takes its
# place (lab.sh --host-cmd '...'); the capture check below stays valid for any host side.
SCENARIO_GUESTS=1
SCENARIO_DIRECTION="host -> siw(g1)"
SCENARIO_TIMEOUT=180
SCENARIO_HOST_CMD='"$LAB_TOOLS/wait-flag" rping.ready 150 && python3 "$LAB_TOOLS/mpa_lab.py" connect --host "$LAB_G1_IP" --port 7174 --count 2 --crc 0,1 --rev 2 --ird 16 --ord 16 --expect-ird 16 --expect-ord 16 --timeout 120 --out mpa-exchange.json'

scenario_check() {
    python3 "$LAB_TOOLS/mpa_lab.py" expect-pcap "$LAB_PCAP" --min-requests 1 --min-replies 1 || return 1
    # Every Reply from siw must be a well-formed rev 2 accept (RFC 5044 §7.1, RFC 6581 §7).
    python3 - "$LAB_PCAP" "$LAB_G1_IP" <<'PY'
import sys
sys.path.insert(0, __import__("os").environ["LAB_TOOLS"])
import mpa_lab
frames = mpa_lab.mpa_frames(sys.argv[1])
reqs = {(f["src"], f["dst"]): f for f in frames if f["kind"] == "request"}
bad = 0
for rep in (f for f in frames if f["kind"] == "reply" and f["src"].startswith(sys.argv[2] + ":")):
    req = reqs.get((rep["dst"], rep["src"]))
    if req is None:
        print("FAIL " + rep["hex"] + ": no MPA Request in the capture for this Reply")
        bad += 1
        continue
    problems = []
    if rep["R"] or rep["M"] or rep["reserved_flags"]:
        problems.append("R/M/reserved flag set")
    if rep["rev"] != req["rev"]:
        problems.append(f"rev {rep['rev']} != request rev {req['rev']}")
    if rep["C"] != req["C"]:
        problems.append(f"C={rep['C']} does not echo the request's C={req['C']}")
    print(("FAIL " if problems else "ok   ") + rep["hex"] + (": " + "; ".join(problems) if problems else ""))
    bad += bool(problems)
sys.exit(1 if bad else 0)
PY
}
