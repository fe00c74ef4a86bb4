#!/usr/bin/env bash
# MPI one-sided Put/Get/Accumulate latency and bandwidth (fabric/bench/mpi_osc_bench.c, OSU-style with
# MPI_Win_fence) between two ranks on this host, over the softrnic provider (Open MPI's MTL
# ofi on "softrnic;ofi_rxm") and over Open MPI's own TCP BTL, in one run, rounds alternating
# between the two; prints per size the best of the rounds for each and their ratio.
# One-sided operations go through Open MPI's "osc pt2pt" on both (as messages over the
# selected transport), so the two columns differ only in the transport.
# Usage: fabric/bench/mpi-osc-bench.sh LIB_DIR [ITERATIONS [ROUNDS]]
#   LIB_DIR: holds libsoftrnic.so (e.g. target/release). Defaults: 200 iterations, 2 rounds.
# Needs libfabric-dev (the provider is built here) and openmpi-bin/libopenmpi-dev.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
lib="$(cd "${1:?usage: mpi-osc-bench.sh LIB_DIR [ITERATIONS [ROUNDS]]}" && pwd)"
iters=${2:-200}
rounds=${3:-2}
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
bash "$here/../build.sh" "$lib" "$work/prov" >/dev/null
mpicc -O2 -Wall -Werror "$here/mpi_osc_bench.c" -o "$work/mpi_osc_bench"
export FI_PROVIDER_PATH="$work/prov" LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
common=(--allow-run-as-root --oversubscribe -np 2 --mca osc pt2pt)
# The transport's Open MPI options ("self,tcp" is one argument: the BTL list).
opts_of() {
    case "$1" in
        softrnic) echo '--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include softrnic;ofi_rxm --mca btl self' ;;
        tcp) echo '--mca pml ob1 --mca btl self,tcp --mca btl_tcp_if_include lo' ;;
    esac
}
for r in $(seq "$rounds"); do
    for t in softrnic tcp; do
        read -r -a opts <<<"$(opts_of "$t")"
        out=$(mpirun "${common[@]}" "${opts[@]}" "$work/mpi_osc_bench" "$iters")
        grep -qx verified <<<"$out" || { echo "$t round $r: data not verified" >&2; exit 1; }
        grep -v '^verified$' <<<"$out" | while read -r line; do echo "$t $line"; done >>"$work/all"
    done
done
# Best per (transport, measurement, size): least µs for latency, most MB/s for bandwidth.
printf '%-8s %8s %14s %14s %8s\n' "test" "bytes" "softrnic" "tcp" "ratio"
awk '
    { k = $2 " " $3; v = $4 + 0
      lat = ($2 ~ /_lat$/)
      if (!((k, $1) in best) || (lat ? v < best[k, $1] : v > best[k, $1])) best[k, $1] = v
      if (!(k in seen)) { seen[k] = 1; order[n++] = k } }
    END {
      for (i = 0; i < n; i++) {
        split(order[i], p, " "); s = best[order[i], "softrnic"]; t = best[order[i], "tcp"]
        unit = (p[1] ~ /_lat$/) ? "us" : "MB/s"
        # ratio: how many times better softrnic is (tcp/softrnic for latency).
        ratio = (p[1] ~ /_lat$/) ? (s > 0 ? t / s : 0) : (t > 0 ? s / t : 0)
        printf "%-8s %8s %9.2f %-4s %9.2f %-4s %7.2fx\n", p[1], p[2], s, unit, t, unit, ratio
      } }' "$work/all"
