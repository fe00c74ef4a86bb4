#!/usr/bin/env bash
# Regenerates the experiments' figures in docs/figures/ (failover.png, bandwidth.png,
# onesided-*.png) and their tables (failover.txt, bandwidth.txt, onesided.txt): the RNIC's QP
# engine over DDP over SCTP (and over MPA/TCP for onesided) in the simulator, at full scale
# (two paths of 1 Gbit/s and 500 Mbit/s for the failover run, 1 Gbit/s links for the
# others). Deterministic: the same seed gives the same figures. Takes a few minutes on two
# cores; SCALE=0.1 runs ten times faster.
set -euo pipefail
cd "$(dirname "$0")/.."
SCALE=${SCALE:-1}
SEED=${SEED:-1}
OUT=docs/figures
mkdir -p "$OUT"
cargo build --release -p softrnic
BIN=${CARGO_TARGET_DIR:-target}/release/softrnic
# The tables are kept without the wall-clock line, so that they change only with the results.
for experiment in failover bandwidth onesided; do
    "$BIN" sim "$experiment" --scale "$SCALE" --seed "$SEED" --out "$OUT" \
        | tee /dev/stderr | grep -v 'wall-clock' >"$OUT/$experiment.txt"
done
