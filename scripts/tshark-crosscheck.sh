#!/usr/bin/env bash
# Cross-checks `softrnic decode` against tshark on the captures named (default: every iWARP
# capture under tests/data/golden): per-opcode RDMAP frame counts must agree exactly, and
# softrnic must decode each capture without error. $SOFTRNIC_BIN names the softrnic binary to
# use (default: build the debug one). Installs tshark from Debian's packages when
# missing and running as root; prints SKIPPED with the reason when it cannot.
set -euo pipefail
# Captures to check: the arguments (made absolute before changing directory), or every iWARP
# golden capture.
caps=()
for c in "$@"; do caps+=("$(realpath "$c")"); done
cd "$(dirname "$0")/.."
if [ "${#caps[@]}" -eq 0 ]; then caps=(tests/data/golden/siw-*.pcap tests/data/golden/lab-*.pcap); fi

if ! command -v tshark >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "installing tshark from Debian's packages"
        export DEBIAN_FRONTEND=noninteractive
        echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections || true
        if ! { apt-get update -qq && apt-get install -y -qq tshark; } >/dev/null 2>&1; then
            echo "SKIPPED tshark cross-check: tshark could not be installed"
            exit 0
        fi
    else
        echo "SKIPPED tshark cross-check: tshark is not installed and this is not root with apt-get"
        exit 0
    fi
fi

# The decoder: $SOFTRNIC_BIN (e.g. the lab's release build), else a fresh debug build.
bin=${SOFTRNIC_BIN:-}
if [ -z "$bin" ]; then
    cargo build -q -p softrnic
    bin=target/debug/softrnic
fi
fail=0
printf '%-28s %-6s %-20s %8s %8s  %s\n' capture opcode name tshark softrnic result
for cap in "${caps[@]}"; do
    label=$(basename "$cap")
    # Lab results are <scenario>/capture.pcap: name them by their scenario.
    [ "$label" = capture.pcap ] && label=$(basename "$(dirname "$cap")")
    ours=$("$bin" decode --counts "$cap") || { echo "$cap: softrnic decode reported errors"; fail=1; }
    # Only the RDMAP opcode lines ("0xNN name count"); SCTP chunk lines start with "sctp".
    ours=$(echo "$ours" | grep '^0x' || true)
    # Out-of-order reassembly on: bridge captures can record a segment after the ACK that
    # covers it; without it tshark takes such a segment (e.g. an MPA Reply) for a spurious
    # retransmission, never hands it to its MPA dissector and so skips the whole connection.
    # Heuristic dissectors first: MPA is found by a heuristic, and an ephemeral client port
    # of an MPA connection can be the registered port of another protocol (seen in lab
    # captures: 34980 EtherCAT, 48049 CBSP), which then takes the whole connection and none
    # of its FPDUs is counted. EtherCAT-over-TCP (ecatf) stays off for older tsharks.
    theirs=$(tshark -r "$cap" -o tcp.try_heuristic_first:TRUE -o tcp.reassemble_out_of_order:TRUE \
        --disable-protocol rpcordma --disable-protocol smb_direct --disable-protocol ecatf \
        -Y iwarp_ddp_rdmap -T fields -e iwarp_rdma.opcode 2>/dev/null | tr ',' '\n' |
        awk 'NF { n[tolower($1)]++ } END { for (k in n) print k, n[k] }')
    opcodes=$( { echo "$ours" | awk '{print $1}'; echo "$theirs" | awk '{print $1}'; } | sort -u)
    for op in $opcodes; do
        t=$(echo "$theirs" | awk -v o="$op" '$1 == o { print $2 }'); t=${t:-0}
        s=$(echo "$ours" | awk -v o="$op" '$1 == o { print $3 }'); s=${s:-0}
        name=$(echo "$ours" | awk -v o="$op" '$1 == o { print $2 }')
        if [ "$t" = "$s" ]; then r=ok; else r=MISMATCH; fail=1; fi
        printf '%-28s %-6s %-20s %8s %8s  %s\n' "$label" "$op" "${name:--}" "$t" "$s" "$r"
    done
done
if [ "$fail" -ne 0 ]; then
    echo "tshark cross-check FAILED"
    exit 1
fi
echo "tshark cross-check: all opcode counts agree"
