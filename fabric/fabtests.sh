#!/usr/bin/env bash
# Builds a selection of libfabric's fabtests (the MSG and RMA tests that apply to a MSG
# provider) from a libfabric 1.17 source tree, without autotools: a config.h with what
# configure would find on Linux, the common sources once, then each test.
# Usage: fabric/fabtests.sh LIBFABRIC_SRC OUT_DIR   (LIBFABRIC_SRC holds fabtests/)
# Nothing is downloaded; OUT_DIR gets fi_msg, fi_msg_pingpong, fi_msg_bw, fi_rma_bw,
# fi_eq_test, fi_cq_test, fi_mr_test, fi_dom_test, fi_getinfo_test, fi_cm_data.
set -euo pipefail
src="$(cd "${1:?usage: fabtests.sh LIBFABRIC_SRC OUT_DIR}" && pwd)/fabtests"
out="${2:?usage: fabtests.sh LIBFABRIC_SRC OUT_DIR}"
[ -f "$src/common/shared.c" ] || { echo "no fabtests sources in $src" >&2; exit 1; }
mkdir -p "$out/obj"
out="$(cd "$out" && pwd)"
cat > "$out/obj/config.h" <<'H'
#define HAVE_CLOCK_GETTIME 1
#define HAVE_EPOLL 1
#define HAVE___INT128 1
#define ENABLE_DEBUG 0
#define PACKAGE_VERSION "1.17.0"
H
cc_() { "${CC:-cc}" -O2 -w -DHAVE_CONFIG_H -D_GNU_SOURCE -I "$out/obj" -I "$src/include" \
    -I "$src/include/unix" -I "$src/common" "$@"; }
common=()
for f in common/shared.c common/hmem.c common/hmem_cuda.c common/hmem_rocr.c \
    common/hmem_ze.c common/hmem_neuron.c benchmarks/benchmark_shared.c unit/common.c; do
    o="$out/obj/$(echo "$f" | tr / _).o"
    cc_ -c "$src/$f" -o "$o"
    common+=("$o")
done
build() { cc_ "$src/$2" "${common[@]}" -o "$out/$1" -lfabric -ldl -lpthread -lm; }
build fi_msg functional/msg.c
build fi_cm_data functional/cm_data.c
build fi_msg_pingpong benchmarks/msg_pingpong.c
build fi_msg_bw benchmarks/msg_bw.c
build fi_rma_bw benchmarks/rma_bw.c
build fi_eq_test unit/eq_test.c
build fi_cq_test unit/cq_test.c
build fi_mr_test unit/mr_test.c
build fi_dom_test unit/dom_test.c
build fi_getinfo_test unit/getinfo_test.c
echo "$out"
