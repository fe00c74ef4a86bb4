#!/usr/bin/env bash
# Builds the libfabric provider: OUT_DIR/libsoftrnic-fi.so from softrnic_fi.c against the
# installed libfabric headers. The provider loads libsoftrnic.so when libfabric loads it
# ($SOFTRNIC_LIB, else the library path, else LIB_DIR: the run path set here).
# Usage: fabric/build.sh LIB_DIR OUT_DIR   (e.g. target/release target/release/fi)
# Then: FI_PROVIDER_PATH=OUT_DIR fi_info -p softrnic
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
lib="$(cd "${1:?usage: build.sh LIB_DIR OUT_DIR}" && pwd)"
out="${2:?usage: build.sh LIB_DIR OUT_DIR}"
mkdir -p "$out"
"${CC:-cc}" -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Werror -O2 -fPIC -shared \
    -fvisibility=hidden -I "$here/../capi/include" "$here/softrnic_fi.c" \
    -o "$out/libsoftrnic-fi.so" "-Wl,-rpath,$lib" -lfabric -ldl -pthread
echo "$out/libsoftrnic-fi.so"
