# shellcheck shell=bash disable=SC2034 # the variables are used by the sourcing scripts
# Shared helpers for the softrnic interop lab scripts (sourced, not executed).

LAB_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LAB_CACHE=${SOFTRNIC_LAB_CACHE:-/var/cache/softrnic-lab}
# Exit code meaning "this machine cannot run the lab" (reported as SKIPPED).
LAB_EXIT_SKIP=77
# Keep Python from writing __pycache__ into the repository (tools/ is imported by checks).
export PYTHONDONTWRITEBYTECODE=1

lab_log() { printf '[%s %s] %s\n' "$(basename "$0")" "$(date +%H:%M:%S)" "$*" >&2; }
lab_die() { lab_log "ERROR: $*"; exit 1; }
lab_skip() { printf 'SKIPPED: %s\n' "$*"; exit "$LAB_EXIT_SKIP"; }

# Debian codename of this machine (bookworm, ...).
lab_codename() {
    local c=""
    if [[ -r /etc/os-release ]]; then
        # shellcheck disable=SC1091
        c=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
    fi
    [[ -n $c ]] || c=$(lsb_release -cs 2>/dev/null || true)
    [[ -n $c ]] || lab_die "cannot tell the Debian codename of this machine (/etc/os-release)"
    echo "$c"
}

# The Debian mirror URI the machine's apt uses for the main archive of suite $1
# (deb822 *.sources first, then one-line sources.list files). Never hard-coded.
lab_mirror() {
    local suite=$1 f uri
    for f in /etc/apt/sources.list.d/*.sources; do
        [[ -r $f ]] || continue
        uri=$(awk -v suite="$suite" '
            function flush() {
                if (types ~ /(^| )deb( |$)/ && (" " suites " ") ~ (" " suite " ") && uri != "") { print uri; found = 1; exit }
                types = ""; suites = ""; uri = ""
            }
            /^[ \t]*#/ { next }
            /^[ \t]*$/ { flush(); next }
            /^Types:/  { sub(/^Types:[ \t]*/, ""); types = $0 }
            /^Suites:/ { sub(/^Suites:[ \t]*/, ""); suites = $0 }
            /^URIs:/   { sub(/^URIs:[ \t]*/, ""); split($0, u, /[ \t]+/); uri = u[1] }
            END { if (!found) flush() }' "$f")
        if [[ -n $uri ]]; then echo "${uri%/}"; return 0; fi
    done
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [[ -r $f ]] || continue
        uri=$(awk -v suite="$suite" '
            /^[ \t]*deb[ \t]/ {
                i = 2; if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
                if ($(i + 1) == suite) { print $i; exit }
            }' "$f")
        if [[ -n $uri ]]; then echo "${uri%/}"; return 0; fi
    done
    return 1
}

# Signed-By keyring of the deb822 stanza serving suite $1 (empty if none is named).
lab_mirror_keyring() {
    local suite=$1 f
    for f in /etc/apt/sources.list.d/*.sources; do
        [[ -r $f ]] || continue
        awk -v suite="$suite" '
            function flush() {
                if ((" " suites " ") ~ (" " suite " ") && key != "") { print key; exit }
                suites = ""; key = ""
            }
            /^[ \t]*#/ { next }
            /^[ \t]*$/ { flush(); next }
            /^Suites:/ { sub(/^Suites:[ \t]*/, ""); suites = $0 }
            /^Signed-By:/ { sub(/^Signed-By:[ \t]*/, ""); key = $0 }
            END { flush() }' "$f"
    done | head -n1
}

# Candidate version of a Debian package in the local apt lists ("" when unknown).
lab_candidate() {
    apt-cache policy "$1" 2>/dev/null | awk '/^  Candidate:/ { if ($2 != "(none)") print $2; exit }'
}

# One apt-cache call for several packages: prints "C pkg candidate" and "V pkg version" (one
# line per version apt knows) so callers need not run apt-cache once per package (~1 s each).
lab_policy() {
    apt-cache policy "$@" 2>/dev/null | awk '
        /^[^ ].*:$/ { pkg = substr($0, 1, length($0) - 1); t = 0; next }
        /^  Candidate:/ { if ($2 != "(none)") print "C", pkg, $2; next }
        /^  Version table:/ { t = 1; next }
        t && /^     [^ ]/ { print "V", pkg, $1; next }
        t && /^ \*\*\* / { print "V", pkg, $2 }'
}

# Installed version of a Debian package ("" when not installed).
lab_installed() {
    dpkg-query -W -f='${db:Status-Abbrev} ${Version}\n' "$1" 2>/dev/null | awk '/^ii/ { print $2 }'
}

lab_is_root() { [[ $(id -u) -eq 0 ]]; }

lab_apt_updated=0
lab_apt_update() {
    [[ $lab_apt_updated -eq 1 ]] && return 0
    lab_log "apt-get update"
    apt-get update -qq >&2 || lab_die "apt-get update failed"
    lab_apt_updated=1
}

# Install Debian packages that are missing (installed-ness checked per package).
# Extra apt-get options may precede a literal "--".
lab_apt_install() {
    local opts=() pkgs=() missing=() p
    if [[ " $* " == *" -- "* ]]; then
        while [[ $1 != -- ]]; do opts+=("$1"); shift; done
        shift
    fi
    pkgs=("$@")
    for p in "${pkgs[@]}"; do
        [[ -n $(lab_installed "$p") ]] || missing+=("$p")
    done
    [[ ${#missing[@]} -eq 0 ]] && return 0
    if ! lab_is_root || ! command -v apt-get >/dev/null; then
        lab_log "missing host packages: ${missing[*]} (install them as root: apt-get install ${missing[*]})"
        return 1
    fi
    lab_log "installing host packages: ${missing[*]}"
    local p2
    for p2 in "${missing[@]}"; do
        if [[ -z $(lab_candidate "$p2") ]]; then lab_apt_update; break; fi
    done
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        "${opts[@]}" "${missing[@]}" >&2
}

# Make sure "<codename>-backports" is known to apt, using the configured mirror.
lab_ensure_backports() {
    local codename suite uri key f
    codename=$(lab_codename)
    suite="$codename-backports"
    if apt-cache policy 2>/dev/null | grep -q " $suite/"; then return 0; fi
    if grep -rqs "$suite" /etc/apt/sources.list /etc/apt/sources.list.d/; then
        lab_apt_update
        return 0
    fi
    uri=$(lab_mirror "$codename") || lab_die "no apt source for $codename found to derive $suite from"
    key=$(lab_mirror_keyring "$codename")
    f=/etc/apt/sources.list.d/softrnic-lab-backports.sources
    lab_log "adding $suite from the configured mirror $uri to $f"
    {
        echo "# Added by softrnic tests/interop/build-guest.sh (qemu-system-x86 from $suite)"
        echo "Types: deb"
        echo "URIs: $uri"
        echo "Suites: $suite"
        echo "Components: main"
        [[ -n $key ]] && echo "Signed-By: $key"
    } >"$f"
    lab_apt_updated=0
    lab_apt_update
}

# qemu-system-x86: from <codename>-backports when the machine already carries backports
# qemu packages (mixing them with the release's qemu 7.2 does not install), else the release.
lab_ensure_qemu() {
    command -v qemu-system-x86_64 >/dev/null && return 0
    lab_is_root || { lab_log "qemu-system-x86_64 is missing (run as root to install it)"; return 1; }
    local p v bpo=0
    for p in qemu-utils qemu-system-common qemu-block-extra qemu-system-data; do
        v=$(lab_installed "$p")
        [[ $v == *bpo* ]] && bpo=1
    done
    if [[ $bpo -eq 1 ]]; then
        lab_ensure_backports
        lab_apt_install -t "$(lab_codename)-backports" -- qemu-system-x86 seabios ipxe-qemu
    else
        lab_apt_install qemu-system-x86 seabios ipxe-qemu
    fi
    command -v qemu-system-x86_64 >/dev/null
}

# sha256 of stdin, short.
lab_hash() { sha256sum | cut -c1-16; }

# Seconds since the epoch with millisecond resolution.
lab_now() { date +%s.%N | cut -c1-14; }

# lab_fabric_requires: what the libfabric scenarios need on the host (a scenario_requires
# helper): libfabric's headers, a C compiler and libsoftrnic.so beside $LAB_SOFTRNIC (or in
# $SOFTRNIC_LAB_FI_LIB_DIR). Prints what is missing; non-zero then.
lab_fabric_requires() {
    local lib=${SOFTRNIC_LAB_FI_LIB_DIR:-$(dirname "$LAB_SOFTRNIC")}
    [[ -r /usr/include/rdma/providers/fi_prov.h ]] || { echo "no libfabric headers on the host (libfabric-dev)"; return 1; }
    command -v "${CC:-cc}" >/dev/null || { echo "no C compiler on the host"; return 1; }
    [[ -r $lib/libsoftrnic.so ]] || {
        echo "no libsoftrnic.so in $lib (cargo build --release -p softrnic-capi, or set SOFTRNIC_LAB_FI_LIB_DIR)"
        return 1
    }
}

# The softrnic binary for host-side commands: $SOFTRNIC_LAB_BIN, else the repository's release
# build, brought up to date with cargo (a no-op when nothing changed). Prints the path; prints
# nothing (and logs why) when there is no binary and cargo cannot build one.
lab_softrnic() {
    if [[ -n ${SOFTRNIC_LAB_BIN:-} ]]; then
        printf '%s\n' "$SOFTRNIC_LAB_BIN"
        return
    fi
    local repo bin
    repo=$(cd "$LAB_ROOT/../.." && pwd)
    bin=$repo/target/release/softrnic
    if command -v cargo >/dev/null 2>&1; then
        # With AF_XDP (the xdp feature) when its build dependencies are there or can be
        # installed (root); the AF_XDP scenarios are skipped otherwise.
        local features=()
        if bash "$repo/scripts/install-xdp-deps.sh" >&2; then features=(--features xdp); fi
        (cd "$repo" && cargo build --release --quiet -p softrnic "${features[@]}" >&2) ||
            lab_log "cargo build --release -p softrnic ${features[*]} failed"
        # libsoftrnic.so beside it, for the libfabric provider's scenarios (fabric-*).
        (cd "$repo" && cargo build --release --quiet -p softrnic-capi >&2) ||
            lab_log "cargo build --release -p softrnic-capi failed (fabric-* scenarios are skipped)"
    fi
    if [[ -x $bin ]]; then printf '%s\n' "$bin"; else lab_log "no softrnic binary at $bin"; fi
}
