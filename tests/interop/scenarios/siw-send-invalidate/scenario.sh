# shellcheck shell=bash disable=SC2034,SC2016 # variables read by lab.sh; the host command is expanded there
# siw's Send with Invalidate against softrnic's STags (RFC 5040 §5.3, §7.2; RFC 5041 §7.2).
# The host side is the verbs example invalidate_peer (verbs/examples/invalidate_peer.rs), the
# guest side tools/inval_peer.c (librdmacm + libibverbs on siw, built on the host by
# tools/build-inval-peer.sh and shipped through the 9p share). One connection per case, siw
# the initiator: softrnic advertises an STag, siw posts IBV_WR_SEND_WITH_INV naming it.
# - window2 (a Type 2 window bound by a work request) and fastreg (a fast-registered STag):
#   softrnic's receive completion names the STag as invalidated, the STag is invalid, and
#   siw's following RDMA Write to it draws the DDP Tagged Buffer Terminate "Invalid STag"
#   and places nothing.
# - window1 (a Type 1 window) and region (a region registered as not invalidatable): the
#   Send with Invalidate draws the RDMAP Remote Protection Terminate "STag cannot be
#   Invalidated"; the STag stays valid.
# Passes when every VERDICT line of the host side is PASS, siw took each Terminate with the
# cause sent (guest.sh), and the capture shows, decoded without errors and with tshark's
# opcode counts, siw's four Send with Invalidate messages carrying the advertised STags and
# the host's four Terminates with those causes.
SCENARIO_GUESTS=1
SCENARIO_DIRECTION="siw(g1) Send with Invalidate -> softrnic(host)"
SCENARIO_TIMEOUT=300
SCENARIO_HOST_CMD='bash "$LAB_SCENARIO_DIR/host.sh"'

# The example binary next to the softrnic binary lab.sh uses (target/<profile>/examples/), or
# $SOFTRNIC_LAB_INVALIDATE_PEER.
inval_target_bin() {
    if [[ -n ${SOFTRNIC_LAB_INVALIDATE_PEER:-} ]]; then
        printf '%s\n' "$SOFTRNIC_LAB_INVALIDATE_PEER"
    else
        printf '%s\n' "$(dirname "$LAB_SOFTRNIC")/examples/invalidate_peer"
    fi
}

# Builds both programs before the guest boots (apt and cargo need the host's network, which
# the lab's namespace does not have): the guest program into the lab cache, the host program
# with cargo into the target directory of $LAB_SOFTRNIC. SKIPPED when either cannot be built.
scenario_requires() {
    local out=$LAB_CACHE/tools/inval-peer bin dir repo
    mkdir -p "$LAB_CACHE/tools"
    bash "$LAB_ROOT/tools/build-inval-peer.sh" "$out.tmp" >&2 || {
        echo "cannot build tools/inval_peer.c (gcc, libibverbs-dev, librdmacm-dev)"
        return 1
    }
    mv "$out.tmp" "$out"
    bin=$(inval_target_bin)
    [[ -n ${SOFTRNIC_LAB_INVALIDATE_PEER:-} ]] && { [[ -x $bin ]] || { echo "no $bin"; return 1; }; return 0; }
    dir=$(dirname "$(dirname "$LAB_SOFTRNIC")")
    repo=$(cd "$LAB_ROOT/../.." && pwd)
    local profile=() kind
    kind=$(basename "$(dirname "$LAB_SOFTRNIC")")
    [[ $kind == release ]] && profile=(--release)
    # Only into a cargo target directory (<dir>/release or <dir>/debug).
    if [[ $kind == release || $kind == debug ]] && command -v cargo >/dev/null 2>&1; then
        (cd "$repo" && CARGO_TARGET_DIR=$dir cargo build --quiet "${profile[@]}" -p softrnic-verbs \
            --example invalidate_peer >&2) || { echo "cargo build of the invalidate_peer example failed"; return 1; }
    fi
    [[ -x $bin ]] || { echo "no $bin (cargo builds it only when LAB_SOFTRNIC is in a cargo target directory)"; return 1; }
}

scenario_check() {
    "$LAB_TOOLS/decode-crosscheck.sh" "$LAB_PCAP" || return 1
    local bad=0 dec sinv terms stag want n
    dec=$("$LAB_SOFTRNIC" decode "$LAB_PCAP")
    sinv=$(grep ' I>R  Send with Invalidate ' <<<"$dec" || true)
    terms=$(grep ' R>I  Terminate ' <<<"$dec" || true)
    echo "$sinv" | cut -c1-200
    echo "$terms" | cut -c1-220
    # Every STag the host advertised must appear in the Invalidate STag field of a Send with
    # Invalidate siw sent.
    n=0
    while read -r stag; do
        n=$((n + 1))
        if grep -qi "invalidate STag $stag" <<<"$sinv"; then
            echo "ok: siw sent Send with Invalidate of $stag"
        else
            echo "FAIL: no Send with Invalidate of $stag from siw in the capture"
            bad=1
        fi
    done < <(sed -n 's/.*advertised STag \(0x[0-9a-f]*\) .*/\1/p' host.log)
    [[ $n -eq 4 ]] || { echo "FAIL: the host advertised $n STags, 4 expected"; bad=1; }
    for want in 'DDP Tagged Buffer Error: Invalid STag' 'STag cannot be Invalidated'; do
        n=$(grep -cF "$want" <<<"$terms" || true)
        if [[ $n -eq 2 ]]; then echo "ok: 2 Terminates from the host: $want"; else
            echo "FAIL: $n Terminates from the host with '$want', 2 expected"; bad=1; fi
    done
    grep '^VERDICT\|^SUMMARY' host.log || true
    if grep -q '^VERDICT .* FAIL ' host.log || ! grep -q '^SUMMARY [1-9][0-9]* passed, 0 failed' host.log; then
        echo "FAIL: the host side's verdicts"
        bad=1
    fi
    return "$bad"
}
