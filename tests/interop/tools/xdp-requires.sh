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

# tshark's MPA dissector has no stream reassembly: it finds FPDUs only where a TCP segment
# begins with one. softrnic's own TCP (smoltcp) fills full segments with whole FPDUs (the EMSS
# is a full segment's payload), but a segment cut short by the peer's window shifts every
# later FPDU off the segment starts, and tshark then reads payload as headers. So the AF_XDP
# captures are checked by `softrnic decode` alone (0 errors) and the scenario's own counts;
# tools/decode-crosscheck.sh says so instead of comparing with tshark.
export LAB_TSHARK_NOT_APPLICABLE="softrnic's own TCP does not keep FPDUs aligned with segments after a window-limited segment; tshark's MPA dissector needs them aligned"
