#!/usr/bin/env bash
# The lab and the scripts as code: shellcheck over every shell script, ruff over the Python
# helpers, the helpers' tests (tests/interop/tools/test_*.py), and a check that their
# recorded decoder outputs (tests/interop/tools/testdata) still match what the decoder prints.
#
#   scripts/lint-lab.sh [--softrnic BIN]
#
# Installs what is missing when it can: shellcheck from Debian (root), ruff (pinned) into a
# virtualenv under target/. A tool it cannot get is reported as SKIPPED with the reason.
set -euo pipefail
cd "$(dirname "$0")/.."
RUFF_VERSION=0.17.6
softrnic=${SOFTRNIC:-}
[ "${1:-}" = "--softrnic" ] && softrnic=$2
fail=0

mapfile -t shells < <(git ls-files | while read -r f; do
    case "$f" in
        *.sh) echo "$f" ;;
        *) [ -f "$f" ] && head -c 64 "$f" | grep -qE '^#!.*(ba)?sh' && echo "$f" ;;
    esac
done)

echo "--- shellcheck (${#shells[@]} scripts)"
if ! command -v shellcheck >/dev/null && [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q shellcheck >/dev/null 2>&1 ||
        { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q shellcheck >/dev/null; } || true
fi
if command -v shellcheck >/dev/null; then
    shellcheck "${shells[@]}" && echo "shellcheck: clean" || fail=1
else
    echo "SKIPPED: shellcheck is not installed and cannot be (needs root and apt-get)"
fi

echo "--- ruff ${RUFF_VERSION}"
venv=target/lint-venv
ruff=$venv/bin/ruff
if [ ! -x "$ruff" ] || ! "$ruff" --version 2>/dev/null | grep -q "$RUFF_VERSION"; then
    { python3 -m venv "$venv" && "$venv/bin/pip" install -q "ruff==$RUFF_VERSION"; } >/dev/null 2>&1 || true
fi
if [ -x "$ruff" ]; then
    "$ruff" check tests/interop && echo "ruff: clean" || fail=1
else
    echo "SKIPPED: ruff could not be installed (python3 -m venv and pip from PyPI)"
fi

echo "--- lab helper tests"
python3 -m unittest discover -s tests/interop/tools -p 'test_*.py' || fail=1

echo "--- recorded decoder outputs"
if [ -z "$softrnic" ]; then
    cargo build -q --release -p softrnic
    softrnic=target/release/softrnic
fi
g=tests/data/golden
t=tests/interop/tools/testdata
check() {
    if diff -u "$1" <("${@:2}") >/dev/null; then
        echo "ok: $1"
    else
        echo "FAIL: $1 no longer matches \`${*:2}\` (the lab's parsers read that output;"
        echo "      update the recording and the parsers together)"
        fail=1
    fi
}
check "$t/siw-rping-crc.summary.txt" "$softrnic" decode --summary "$g/siw-rping-crc.pcap"
check "$t/siw-rping-crc.counts.txt" "$softrnic" decode --counts "$g/siw-rping-crc.pcap"
check "$t/sctp-multihomed-failover.summary.txt" "$softrnic" decode --summary "$g/lab-kernel-sctp-multihomed-failover.pcap"

exit "$fail"
