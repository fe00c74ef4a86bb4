#!/usr/bin/env bash
# Host side of conform-siw-perftest:
#   1. siw as responder: for each responder case N of the catalogue, once g1's fresh
#      ib_write_bw server listens (flag srv.N.ready),
#      `softrnic conform $LAB_G1_IP:18515 --app write-bw-server --case =ID --first-fpdu-delay-ms 50`
#      (siw 6.1's accept race, see the lab README's Known quirks) -> case-N.{json,txt,pcap},
#      then the flag srv.N.done; at the end the flag responder.done and the merged report
#      responder.json;
#   2. siw as initiator: `softrnic conform --listen $LAB_HOST_IP:18516 --app perftest-client`
#      (conform/listen-run.sh: the flag conform.listening once it listens, g1 then runs one
#      ib_write_bw -R client per case -> initiator.{json,xml,txt,pcap}; then the flag
#      conform.done).
# Exit: 0 when every case produced its report (conform exits 0 or 1: the verdicts are judged
# against the expectation file), else the first other status.
set -uo pipefail
: "${LAB_SOFTRNIC:?}" "${LAB_FLAGS:?}" "${LAB_TOOLS:?}" "${LAB_G1_IP:?}" "${LAB_HOST_IP:?}" "${LAB_ROOT:?}"
flag() { printf 'host\n' >"$LAB_FLAGS/$1.tmp" && mv "$LAB_FLAGS/$1.tmp" "$LAB_FLAGS/$1"; }
rc=0
n=0
t0=$SECONDS
for id in $("$LAB_SOFTRNIC" conform --list | awk '$2 == "responder" { print $1 }'); do
    n=$((n + 1))
    "$LAB_TOOLS/wait-flag" "srv.$n.ready" 120 || { echo "no ib_write_bw server for case $n ($id)"; rc=4; break; }
    timeout 120 "$LAB_SOFTRNIC" conform "$LAB_G1_IP:18515" --app write-bw-server --case "=$id" \
        --first-fpdu-delay-ms 50 --json "case-$n.json" --pcap "case-$n.pcap" \
        >"case-$n.txt" 2>"case-$n.err"
    r=$?
    flag "srv.$n.done"
    if [[ $r -gt 1 ]]; then
        echo "case $n ($id): softrnic conform exit status $r"
        cat "case-$n.err"
        [[ $rc -ne 0 ]] || rc=$r
    fi
done
flag responder.done
python3 - responder.json case-*.json <<'PY'
import json
import sys

out, files = sys.argv[1], sys.argv[2:]
results = []
for f in sorted(files, key=lambda f: int(f.split("-")[1].split(".")[0])):
    results += json.load(open(f)).get("results", [])
count = {v: sum(1 for r in results if r.get("verdict") == v) for v in ("PASS", "FAIL", "DEVIATION", "N/A")}
summary = {"cases": len(results), "pass": count["PASS"], "fail": count["FAIL"],
           "deviation": count["DEVIATION"], "not_applicable": count["N/A"]}
json.dump({"results": results, "summary": summary}, open(out, "w"), indent=1)
for r in results:
    print("%-28s %-9s %s" % (r.get("id"), r.get("verdict"), r.get("reason", "")))
print("%d cases: %d PASS, %d FAIL, %d DEVIATION, %d N/A" % (
    len(results), count["PASS"], count["FAIL"], count["DEVIATION"], count["N/A"]))
PY
echo "[conform-host] responder: $n cases, $((SECONDS - t0)) s"

i=0
"$LAB_ROOT/conform/listen-run.sh" 18516 perftest-client || i=$?
[[ $i -le 1 || $rc -ne 0 ]] || rc=$i
exit "$rc"
