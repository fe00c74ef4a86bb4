# shellcheck shell=bash
# Sourced by the AF_XDP scenarios' scenario.sh: their shared precondition.
scenario_requires() {
    local err
    err=$("$LAB_SOFTRNIC" rping -c -a 10.0.0.1 --transport xdp --device lab-noxdp0 --bind 10.0.0.2 --timeout 1 2>&1 >/dev/null || true)
    if [[ $err == *"no AF_XDP support"* ]]; then
        echo "$LAB_SOFTRNIC is built without the xdp feature (scripts/install-xdp-deps.sh, then cargo build --features xdp)"
        return 1
    fi
    command -v ethtool >/dev/null || { echo "no ethtool"; return 1; }
}
