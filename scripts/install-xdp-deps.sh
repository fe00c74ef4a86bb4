#!/usr/bin/env bash
# Installs what building with the `xdp` feature needs (AF_XDP devices, xdp://): clang for
# softrnic's XDP program (stack/build.rs); xsk-rs
# builds libbpf and libxdp from source with clang, and bindgen reads their headers.
# The root tests of the AF_XDP and TAP devices also need nftables (a lossy veth) and tcpdump
# (their captures). Debian/Ubuntu; needs root. Prints what it installed, or that nothing
# was missing.
set -euo pipefail
pkgs=(clang libclang-dev llvm m4 libelf-dev zlib1g-dev libpcap-dev pkg-config make ethtool nftables tcpdump)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -eq 0 ]; then
    echo "install-xdp-deps: everything is installed"
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "install-xdp-deps: missing ${missing[*]}; run as root (or: sudo apt-get install ${missing[*]})" >&2
    exit 1
fi
echo "install-xdp-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null || true
apt-get install -y -q "${missing[@]}" >/dev/null
echo "install-xdp-deps: done"
