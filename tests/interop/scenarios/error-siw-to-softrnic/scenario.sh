# shellcheck shell=bash disable=SC2034,SC2016 # variables read by lab.sh; the host command is expanded there
# siw's rping server (g1) does an RDMA Read / RDMA Write that softrnic must refuse: softrnic's
# rping client advertises an unregistered STag or a buffer whose access runs past the end
# (`softrnic rping -c --profile siw --inject bad-stag|out-of-bounds --inject-at read|write`),
# one connection per case. softrnic must send the Terminate RFC 5040 §4.8 (Read Request:
# RDMAP Remote Protection Error) / RFC 5041 §7.2 (Write: DDP Tagged Buffer Error) prescribe,
# with code Invalid STag or Base or bounds violation, leave its memory (region and a guard
# area after it) untouched, and exit 4. Passes when all four do, siw takes each Terminate with
# the cause sent and its rping server sees the operation end (guest.sh), and the capture shows
# the four Terminates from the host with those causes, decoded without errors and with tshark's
# opcode counts.
SCENARIO_GUESTS=1
SCENARIO_DIRECTION="siw(g1) errors -> softrnic(host)"
SCENARIO_TIMEOUT=240
SCENARIO_HOST_CMD='bash "$LAB_SCENARIO_DIR/host.sh"'

scenario_check() {
    "$LAB_TOOLS/decode-crosscheck.sh" "$LAB_PCAP" || return 1
    local frames bad=0 want
    frames=$("$LAB_SOFTRNIC" decode "$LAB_PCAP" | grep ' I>R  Terminate ' || true)
    echo "$frames" | cut -c1-220
    # Case order of host.sh: read bad-stag, read out-of-bounds, write bad-stag, write out-of-bounds.
    for want in 'RDMAP Remote Protection Error: Invalid STag' \
        'RDMAP Remote Protection Error: Base or bounds violation' \
        'DDP Tagged Buffer Error: Invalid STag' \
        'DDP Tagged Buffer Error: Base or bounds violation'; do
        if grep -qF "$want" <<<"$frames"; then echo "ok: host sent Terminate: $want"; else
            echo "FAIL: no Terminate from the host with cause: $want"; bad=1; fi
    done
    for f in out/g1/rping-server-*.log; do
        [[ -e $f ]] || continue
        echo "siw $(basename "$f"): $(grep -v '^$' "$f" | tail -n 3 | tr '\n' '|')"
    done
    return "$bad"
}
