#!/usr/bin/env bash
# Builds tools/inval_peer.c (the guest side of scenario siw-send-invalidate) on the host:
# the guest has rdma-core but no compiler, and the host runs the same Debian release, so the
# program links dynamically against the libibverbs.so.1 and librdmacm.so.1 the guest has.
# Installs gcc, libibverbs-dev and librdmacm-dev with apt when they are missing (root).
#   build-inval-peer.sh OUTPUT
set -euo pipefail
# shellcheck source=../lib/common.sh
. "$(dirname "$0")/../lib/common.sh"
out=${1:?usage: build-inval-peer.sh OUTPUT}
lab_apt_install gcc libibverbs-dev librdmacm-dev || lab_die "cannot install gcc libibverbs-dev librdmacm-dev"
gcc -O2 -Wall -Wextra -Werror -o "$out" "$LAB_ROOT/tools/inval_peer.c" -lrdmacm -libverbs
