#!/usr/bin/env bash
# decode-crosscheck.sh CAPTURE: for scenario checks. `$LAB_SOFTRNIC decode --counts` must decode
# the capture with zero errors, and its RDMAP per-opcode counts must equal what tshark counts
# (tshark with out-of-order TCP reassembly, rpcordma/smb_direct heuristics off, as
# scripts/tshark-crosscheck.sh does). Prints one line per opcode; exit 1 on any difference or
# decode error. Without tshark only the decode is checked (and a note says so).
set -euo pipefail
cap=${1:?usage: decode-crosscheck.sh CAPTURE}
bin=${LAB_SOFTRNIC:?LAB_SOFTRNIC is not set (run from lab.sh)}
fail=0
ours=$("$bin" decode --counts "$cap") || { echo "FAIL: softrnic decode reported errors on $cap"; fail=1; }
"$bin" decode --summary "$cap" | sed -n '/^total:/p'
if ! command -v tshark >/dev/null 2>&1; then
    echo "note: no tshark, opcode counts not cross-checked"
    echo "$ours"
    exit "$fail"
fi
theirs=$(tshark -r "$cap" -o tcp.reassemble_out_of_order:TRUE \
    --disable-protocol rpcordma --disable-protocol smb_direct \
    -Y iwarp_ddp_rdmap -T fields -e iwarp_rdma.opcode 2>/dev/null | tr ',' '\n' |
    awk 'NF { n[tolower($1)]++ } END { for (k in n) print k, n[k] }')
printf '%-6s %-20s %8s %8s\n' opcode name tshark softrnic
for op in $( { echo "$ours" | awk 'NF {print $1}'; echo "$theirs" | awk 'NF {print $1}'; } | sort -u); do
    t=$(echo "$theirs" | awk -v o="$op" '$1 == o { print $2 }'); t=${t:-0}
    s=$(echo "$ours" | awk -v o="$op" '$1 == o { print $3 }'); s=${s:-0}
    name=$(echo "$ours" | awk -v o="$op" '$1 == o { print $2 }')
    r=ok
    if [[ $t != "$s" ]]; then r=MISMATCH; fail=1; fi
    printf '%-6s %-20s %8s %8s  %s\n' "$op" "${name:--}" "$t" "$s" "$r"
done
if [[ $fail -ne 0 ]]; then echo "FAIL: softrnic decode and tshark disagree (or decode errors)"; fi
exit "$fail"
