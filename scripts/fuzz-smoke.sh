#!/usr/bin/env bash
# Short fuzzing run of every cargo-fuzz target (the parsers of untrusted wire input).
# Needs a nightly toolchain and cargo-fuzz; installs cargo-fuzz from crates.io when missing.
# Prints SKIPPED with the reason when a prerequisite cannot be had.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET=${FUZZ_SECONDS:-20}

if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    if ! rustup toolchain install nightly --profile minimal >/dev/null 2>&1; then
        echo "SKIPPED fuzz smoke run: no nightly toolchain and it cannot be installed here"
        exit 0
    fi
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "installing cargo-fuzz from crates.io"
    if ! cargo install --locked cargo-fuzz >/dev/null 2>&1; then
        echo "SKIPPED fuzz smoke run: cargo-fuzz could not be installed"
        exit 0
    fi
fi
targets=$(cargo +nightly fuzz list --fuzz-dir fuzz)
for t in $targets; do
    echo "fuzz target $t for ${SECONDS_PER_TARGET}s"
    log=$(mktemp)
    if ! cargo +nightly fuzz run --fuzz-dir fuzz "$t" -- \
        -max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb=2048 -print_final_stats=1 >"$log" 2>&1; then
        tail -40 "$log"
        echo "fuzz target $t FAILED (crash artifacts under fuzz/artifacts/$t)"
        exit 1
    fi
    grep -E '^stat::number_of_executed_units' "$log" || true
    rm -f "$log"
done
echo "fuzz smoke run: $(echo "$targets" | wc -w) targets, no crash"
