#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Build (or find in the cache) the softrnic interop lab guest: a stock Debian kernel plus one
# zstd cpio initramfs holding a minbase Debian root with rdma-core & co and siw.ko built out of
# tree for exactly that kernel. Everything comes from Debian packages, fetched from the mirror
# the machine's apt is configured with. Output lives outside the repository:
#   $SOFTRNIC_LAB_CACHE (default /var/cache/softrnic-lab)
#     debs/                 downloaded kernel, headers and source packages
#     kernel/<pkg>_<ver>/   extracted kernel package (vmlinuz + modules, depmod'ed)
#     siw/<key>/siw.ko      siw built for that kernel
#     rootfs/<key>/         debootstrap result (keyed on suite, mirror, package versions)
#     images/<key>/         vmlinuz, initrd.img, manifest.txt  (keyed on all of the above
#                           plus this script and guest/init)
#     current -> images/<key>
# A run whose inputs are unchanged only checks host packages and versions (a second or so).
#
# Usage: build-guest.sh [--force] [--quiet] [--prune]
#   --force   rebuild the image (not the kernel/siw/rootfs stages) even when cached
#   --prune   afterwards delete every cache entry the current image does not use
# Environment:
#   SOFTRNIC_LAB_CACHE       cache directory (default /var/cache/softrnic-lab)
#   SOFTRNIC_LAB_KERNEL_PKG  guest kernel package (default: what linux-image-amd64 depends on)
#   SOFTRNIC_LAB_SIW_PATCH   optional patch applied to drivers/infiniband/sw/siw before building
#                            (e.g. to change siw's compile-time MPA settings); part of the key.
#                            Such a "variant" image (variant key: the patch's file name without
#                            .patch, e.g. siw-variants/mpa-rev1.patch -> mpa-rev1) leaves the
#                            `current` link alone; pruning keeps the newest image of every variant
# Exit: 0 ready (prints the image directory), 77 the machine cannot build it (SKIPPED), 1 error.
set -euo pipefail
# shellcheck source=lib/common.sh
source "$(dirname "$0")/lib/common.sh"

force=0
quiet=0
prune=0
while [[ $# -gt 0 ]]; do
    case $1 in
        --force) force=1 ;;
        --quiet) quiet=1 ;;
        --prune) prune=1 ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '/^# shellcheck/d; $d; s/^# \{0,1\}//'; exit 0 ;;
        *) lab_die "unknown argument: $1" ;;
    esac
    shift
done

# Guest userspace (debootstrap --include). Kept sorted; part of the cache key.
GUEST_PACKAGES=(
    ethtool ibverbs-providers ibverbs-utils iproute2 iputils-ping kmod libfabric-bin libfabric1
    lksctp-tools netcat-openbsd perftest procps python3-minimal rdma-core rdmacm-utils tcpdump
)
# Kernel modules put into the initramfs (with their dependencies, resolved by modprobe).
GUEST_MODULES=(
    virtio_pci virtio_net virtio_rng 9pnet_virtio 9p sctp rdma_ucm ib_uverbs iw_cm rdma_cm
    crc32c_intel crc32c_generic sch_netem af_packet
)
# Host packages needed to build the image and to run the lab.
HOST_BUILD_PACKAGES=(debootstrap cpio zstd kmod xz-utils make gcc-12 binutils)
HOST_RUN_PACKAGES=(iproute2 tcpdump tshark ethtool)

start=$(date +%s)

# ---------------------------------------------------------------- preflight
if ! command -v apt-cache >/dev/null || ! command -v dpkg-deb >/dev/null; then
    lab_skip "no Debian apt/dpkg on this machine: the guest is built from Debian packages"
fi
missing_host=()
for p in "${HOST_BUILD_PACKAGES[@]}" "${HOST_RUN_PACKAGES[@]}"; do
    [[ -n $(lab_installed "$p") ]] || missing_host+=("$p")
done
command -v qemu-system-x86_64 >/dev/null || missing_host+=(qemu-system-x86)
if ! lab_is_root; then
    msg="build-guest.sh needs root (debootstrap, apt-get install, the cache in $LAB_CACHE)"
    [[ ${#missing_host[@]} -eq 0 ]] || msg+="; missing host packages: ${missing_host[*]}"
    lab_skip "$msg"
fi
mkdir -p "$LAB_CACHE"
exec 9>"$LAB_CACHE/.build.lock"
if ! flock -n 9; then
    lab_log "another build holds $LAB_CACHE/.build.lock, waiting"
    flock 9
fi

apt_missing=()
for p in "${missing_host[@]}"; do [[ $p == qemu-system-x86 ]] || apt_missing+=("$p"); done
if [[ ${#apt_missing[@]} -gt 0 ]]; then
    lab_apt_install "${apt_missing[@]}" || lab_die "could not install host packages: ${apt_missing[*]}"
fi
lab_ensure_qemu || lab_die "could not install qemu-system-x86"

# ---------------------------------------------------------------- resolve versions
SUITE=$(lab_codename)
MIRROR=$(lab_mirror "$SUITE") || lab_die "no apt source for '$SUITE' in /etc/apt/sources.list{,.d}"

resolve_kernel() {
    KPKG=${SOFTRNIC_LAB_KERNEL_PKG:-}
    if [[ -z $KPKG ]]; then
        KPKG=$(apt-cache depends linux-image-amd64 2>/dev/null |
            awk '/Depends: linux-image-[0-9]/ { print $2; exit }')
    fi
    KVERS=""
    [[ -n $KPKG ]] && KVERS=$(lab_policy "$KPKG" | awk '$1 == "C" { print $3 }')
}
resolve_kernel
if [[ -z $KPKG || -z $KVERS ]]; then
    lab_apt_update
    resolve_kernel
fi
[[ -n $KPKG && -n $KVERS ]] || lab_die "cannot resolve the guest kernel package (linux-image-amd64)"
KREL=${KPKG#linux-image-}              # 6.1.0-56-amd64
KREL=${KREL%-unsigned}
KMM=$(echo "$KREL" | cut -d. -f1-2)    # 6.1
KABI=${KREL%-amd64}                    # 6.1.0-56
SRC_PKG=linux-source-$KMM
HDR_PKGS=("linux-headers-$KREL" "linux-headers-$KABI-common" "linux-kbuild-$KMM")
# The version of each headers package to build siw with: the kernel image's, or, when the
# archive no longer has that one (linux-kbuild is rebuilt with each upload of the kernel's
# source while the image may stay behind, e.g. kbuild 6.1.192-3 beside image 6.1.192-2),
# the newest of the same upstream version (the same kernel, packaged again).
declare -A HDR_VERSION=()
hdr_version() { # pkg -> version
    local versions
    versions=$(apt-cache madison "$1" 2>/dev/null | awk -F' *[|] *' '{ print $2 }')
    if grep -qxF "$KVERS" <<<"$versions"; then
        echo "$KVERS"
    else
        grep -F "${KVERS%-*}-" <<<"$versions" | grep "^${KVERS%-*}-[^-]*$" | sort -V | tail -n 1
    fi
}
for p in "${HDR_PKGS[@]}"; do
    HDR_VERSION[$p]=$(hdr_version "$p")
    [[ -n ${HDR_VERSION[$p]} ]] || lab_die "$p ${KVERS%-*} (the kernel of $KPKG $KVERS) is not available from apt"
done
declare -A PKG_VERSION=()
src_ok=0
while read -r kind p v; do
    case $kind in
        C) PKG_VERSION[$p]=$v ;;
        V) [[ $p == "$SRC_PKG" && $v == "$KVERS" ]] && src_ok=1 ;;
    esac
done < <(lab_policy "$SRC_PKG" "${GUEST_PACKAGES[@]}")
# The source and headers must be the very version of the kernel image.
[[ $src_ok -eq 1 ]] || lab_die "$SRC_PKG $KVERS (the version of $KPKG) is not available from apt"
for p in "${GUEST_PACKAGES[@]}"; do
    [[ -n ${PKG_VERSION[$p]:-} ]] || lab_die "guest package $p has no candidate version in apt"
done

gcc_version=$(gcc-12 -dumpfullversion 2>/dev/null || echo none)
siw_patch_hash=none
VARIANT=stock
if [[ -n ${SOFTRNIC_LAB_SIW_PATCH:-} ]]; then
    [[ -r $SOFTRNIC_LAB_SIW_PATCH ]] || lab_die "SOFTRNIC_LAB_SIW_PATCH=$SOFTRNIC_LAB_SIW_PATCH is not readable"
    siw_patch_hash=$(lab_hash <"$SOFTRNIC_LAB_SIW_PATCH")
    VARIANT=$(basename "$SOFTRNIC_LAB_SIW_PATCH" .patch)
fi
# Point `current` at our image, unless this is a siw variant (other scenarios use `current`).
set_current() { [[ $VARIANT != stock ]] || ln -sfn "images/$IMAGE_KEY" "$LAB_CACHE/current"; }
# The variant key of an image directory (images built before variants existed are stock).
image_variant() { cat "$1/variant" 2>/dev/null || echo stock; }

KERNEL_KEY="${KPKG}_${KVERS}"
SIW_KEY=$(printf '%s\n' "siw-v1" "$SRC_PKG=$KVERS" "${HDR_PKGS[@]}" "$KVERS" "$gcc_version" \
    "$siw_patch_hash" | lab_hash)
for p in "${HDR_PKGS[@]}"; do
    # A headers package of another packaging of the same kernel is part of the key (an image
    # built with the exact versions keeps its key).
    [[ ${HDR_VERSION[$p]} == "$KVERS" ]] || SIW_KEY=$(echo "$SIW_KEY $p=${HDR_VERSION[$p]}" | lab_hash)
done
ROOTFS_KEY=$(
    echo "rootfs-v1 $SUITE $MIRROR"
    for p in "${GUEST_PACKAGES[@]}"; do echo "$p=${PKG_VERSION[$p]}"; done
)
ROOTFS_KEY=$(echo "$ROOTFS_KEY" | lab_hash)
IMAGE_KEY=$(
    echo "$KERNEL_KEY $SIW_KEY $ROOTFS_KEY ${GUEST_MODULES[*]}"
    cat "$0" "$LAB_ROOT/guest/init"
)
IMAGE_KEY=$(echo "$IMAGE_KEY" | lab_hash)
IMAGE_DIR=$LAB_CACHE/images/$IMAGE_KEY

prune_cache() {
    local d keep
    [[ $prune -eq 1 ]] || return 0
    for d in images:"$IMAGE_KEY" kernel:"$KERNEL_KEY" siw:"$SIW_KEY" rootfs:"$ROOTFS_KEY"; do
        keep=${d#*:}
        d=$LAB_CACHE/${d%%:*}
        [[ -d $d ]] || continue
        while read -r old; do
            # Other variants' images and patched siw builds stay (see prune_images).
            [[ $d == "$LAB_CACHE/images" && $(image_variant "$old") != "$VARIANT" ]] && continue
            [[ $d == "$LAB_CACHE/siw" && -e $old/siw.patch && $siw_patch_hash == none ]] && continue
            rm -rf "$old" && echo "pruned $old" >&2
        done < <(find "$d" -mindepth 1 -maxdepth 1 ! -name "$keep")
    done
    find "$LAB_CACHE/debs" -maxdepth 1 -name '*.deb' ! -name "*_${KVERS//:/%3a}_*.deb" -print -delete 2>/dev/null |
        sed 's/^/pruned /' >&2
}

if [[ $force -eq 0 && -e $IMAGE_DIR/ready ]]; then
    set_current
    prune_cache
    [[ $quiet -eq 1 ]] || lab_log "guest image up to date ($KPKG $KVERS, key $IMAGE_KEY, $(($(date +%s) - start)) s)"
    echo "$IMAGE_DIR"
    exit 0
fi
lab_log "building guest image $IMAGE_KEY: $KPKG $KVERS, suite $SUITE, mirror $MIRROR"

WORK=$LAB_CACHE/build.$$
cleanup() {
    local m
    # Unmount anything debootstrap left mounted below the work directory, deepest first.
    if [[ -d $WORK ]]; then
        while read -r m; do
            umount -l "$m" 2>/dev/null || true
        done < <(awk -v w="$WORK" '$2 ~ "^"w { print $2 }' /proc/mounts | sort -r)
        rm -rf "$WORK"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
mkdir -p "$WORK" "$LAB_CACHE/debs"

# ---------------------------------------------------------------- downloads
deb_file() { # pkg version -> path of the .deb in the cache (downloading it when missing)
    local pkg=$1 ver=$2 f
    f=$(find "$LAB_CACHE/debs" -maxdepth 1 -name "${pkg}_${ver//:/%3a}_*.deb" -print -quit)
    if [[ -z $f ]]; then
        lab_log "downloading $pkg $ver"
        (cd "$LAB_CACHE/debs" && apt-get download -q "$pkg=$ver" 2>&1 | grep -v '^W: Download is performed unsandboxed' >&2) ||
            true
        f=$(find "$LAB_CACHE/debs" -maxdepth 1 -name "${pkg}_${ver//:/%3a}_*.deb" -print -quit)
        [[ -n $f ]] || lab_die "apt-get download $pkg=$ver failed"
    fi
    echo "$f"
}

# ---------------------------------------------------------------- stage: kernel
KERNEL_DIR=$LAB_CACHE/kernel/$KERNEL_KEY
if [[ ! -e $KERNEL_DIR/ready ]]; then
    t0=$(date +%s)
    rm -rf "$KERNEL_DIR"
    mkdir -p "$KERNEL_DIR.tmp"
    dpkg-deb -x "$(deb_file "$KPKG" "$KVERS")" "$KERNEL_DIR.tmp"
    [[ -d $KERNEL_DIR.tmp/lib/modules/$KREL ]] || lab_die "$KPKG has no /lib/modules/$KREL"
    depmod -b "$KERNEL_DIR.tmp" "$KREL"
    touch "$KERNEL_DIR.tmp/ready"
    mv "$KERNEL_DIR.tmp" "$KERNEL_DIR"
    lab_log "kernel $KREL extracted ($(($(date +%s) - t0)) s)"
fi
VMLINUZ=$KERNEL_DIR/boot/vmlinuz-$KREL
[[ -r $VMLINUZ ]] || lab_die "no $VMLINUZ in $KPKG"

# ---------------------------------------------------------------- stage: siw.ko
SIW_DIR=$LAB_CACHE/siw/$SIW_KEY
if [[ ! -e $SIW_DIR/ready ]]; then
    t0=$(date +%s)
    hdr=$WORK/headers
    mkdir -p "$hdr"
    for p in "${HDR_PKGS[@]}"; do
        [[ ${HDR_VERSION[$p]} == "$KVERS" ]] ||
            lab_log "$p $KVERS is not in the archive: using ${HDR_VERSION[$p]} (the same kernel)"
        dpkg-deb -x "$(deb_file "$p" "${HDR_VERSION[$p]}")" "$hdr"
    done
    # The headers package includes its -common half by absolute path; point it at our copy.
    sed -i "s#/usr/src/#$hdr/usr/src/#g" "$hdr/usr/src/linux-headers-$KREL/Makefile"
    lab_log "extracting drivers/infiniband/sw/siw from $SRC_PKG $KVERS"
    dpkg-deb --fsys-tarfile "$(deb_file "$SRC_PKG" "$KVERS")" |
        tar -xO "./usr/src/$SRC_PKG.tar.xz" |
        tar -xJ -C "$WORK" --wildcards "$SRC_PKG/drivers/infiniband/sw/siw/*"
    src=$WORK/$SRC_PKG/drivers/infiniband/sw/siw
    [[ -f $src/siw_main.c ]] || lab_die "siw sources not found in $SRC_PKG"
    if [[ -n ${SOFTRNIC_LAB_SIW_PATCH:-} ]]; then
        lab_log "applying $SOFTRNIC_LAB_SIW_PATCH"
        patch -d "$src" -p1 <"$SOFTRNIC_LAB_SIW_PATCH" >&2 || lab_die "siw patch does not apply"
    fi
    lab_log "building siw.ko for $KREL"
    make -s -C "$hdr/usr/src/linux-headers-$KREL" M="$src" CONFIG_RDMA_SIW=m modules >"$WORK/siw-build.log" 2>&1 ||
        { cat "$WORK/siw-build.log" >&2; lab_die "building siw.ko failed"; }
    vermagic=$(modinfo -F vermagic "$src/siw.ko")
    [[ $vermagic == "$KREL "* ]] || lab_die "siw.ko vermagic '$vermagic' does not match $KREL"
    rm -rf "$SIW_DIR"
    mkdir -p "$SIW_DIR.tmp"
    cp "$src/siw.ko" "$WORK/siw-build.log" "$SIW_DIR.tmp/"
    [[ -n ${SOFTRNIC_LAB_SIW_PATCH:-} ]] && cp "$SOFTRNIC_LAB_SIW_PATCH" "$SIW_DIR.tmp/siw.patch"
    touch "$SIW_DIR.tmp/ready"
    mv "$SIW_DIR.tmp" "$SIW_DIR"
    lab_log "siw.ko built ($(($(date +%s) - t0)) s)"
fi

# ---------------------------------------------------------------- stage: rootfs
ROOTFS_DIR=$LAB_CACHE/rootfs/$ROOTFS_KEY
if [[ ! -e $ROOTFS_DIR/.softrnic-ready ]]; then
    t0=$(date +%s)
    rm -rf "$ROOTFS_DIR" "$ROOTFS_DIR.tmp"
    mkdir -p "$(dirname "$ROOTFS_DIR")"
    include=$(IFS=,; echo "${GUEST_PACKAGES[*]}")
    lab_log "debootstrap --variant=minbase $SUITE from $MIRROR (about a minute)"
    # Build in the work dir so a failure's mounts/leftovers are cleaned by the trap.
    if ! debootstrap --variant=minbase --components=main --include="$include" \
        "$SUITE" "$WORK/rootfs" "$MIRROR" >"$WORK/debootstrap.log" 2>&1; then
        tail -n 30 "$WORK/debootstrap.log" >&2
        [[ -r $WORK/rootfs/debootstrap/debootstrap.log ]] && tail -n 30 "$WORK/rootfs/debootstrap/debootstrap.log" >&2
        lab_die "debootstrap failed"
    fi
    # shellcheck disable=SC2016 # a dpkg-query format, not a shell expansion
    chroot "$WORK/rootfs" dpkg-query -W -f='${Package} ${Version}\n' >"$WORK/rootfs/.softrnic-packages"
    chroot "$WORK/rootfs" apt-get clean
    mv "$WORK/rootfs" "$ROOTFS_DIR.tmp"
    touch "$ROOTFS_DIR.tmp/.softrnic-ready"
    mv "$ROOTFS_DIR.tmp" "$ROOTFS_DIR"
    lab_log "rootfs ready ($(($(date +%s) - t0)) s)"
fi

# ---------------------------------------------------------------- stage: image
t0=$(date +%s)
stage=$WORK/stage
lab_log "assembling the initramfs"
cp -a "$ROOTFS_DIR" "$stage"
rm -f "$stage/.softrnic-ready"
# Trim what a test guest never reads.
rm -rf "$stage"/usr/share/{doc,man,info,locale,lintian,linda,bug,groff} \
    "$stage"/var/lib/apt/lists/* "$stage"/var/cache/apt/* "$stage"/var/cache/debconf/*-old \
    "$stage"/var/log/* "$stage"/debootstrap
mkdir -p "$stage/usr/share/locale"
# Kernel modules: the closure of GUEST_MODULES plus siw's own dependencies, then siw.ko.
moddst=$stage/lib/modules/$KREL
rm -rf "$stage/lib/modules"
mkdir -p "$moddst/extra"
siw_deps=$(modinfo -F depends "$SIW_DIR/siw.ko" | tr , ' ')
# shellcheck disable=SC2086
for m in "${GUEST_MODULES[@]}" $siw_deps; do
    if ! out=$(modprobe -d "$KERNEL_DIR" -S "$KREL" --show-depends "$m" 2>&1); then
        lab_die "module $m not found in $KPKG: $out"
    fi
    while read -r kind path _; do
        [[ $kind == insmod ]] || continue
        rel=${path#"$KERNEL_DIR"}
        mkdir -p "$stage$(dirname "$rel")"
        cp -n "$path" "$stage$rel"
    done <<<"$out"
done
cp "$KERNEL_DIR/lib/modules/$KREL"/modules.{builtin,builtin.modinfo,order} "$moddst/" 2>/dev/null || true
cp "$SIW_DIR/siw.ko" "$moddst/extra/siw.ko"
depmod -b "$stage" "$KREL"
install -m 0755 "$LAB_ROOT/guest/init" "$stage/init"
echo softrnic-lab >"$stage/etc/hostname"
printf '127.0.0.1 localhost\n10.99.0.1 host\n10.99.0.2 g1\n10.99.0.3 g2\n' >"$stage/etc/hosts"
mkdir -p "$stage/lab" "$stage/etc/rdma" "$stage/dev"
[[ -e $stage/dev/console ]] || mknod -m 600 "$stage/dev/console" c 5 1
[[ -e $stage/dev/null ]] || mknod -m 666 "$stage/dev/null" c 1 3
mkdir -p "$IMAGE_DIR.tmp"
(cd "$stage" && find . -print0 | LC_ALL=C sort -z | cpio --null -o -H newc --quiet) |
    zstd -q -T0 -10 >"$IMAGE_DIR.tmp/initrd.img"
cp "$VMLINUZ" "$IMAGE_DIR.tmp/vmlinuz"
{
    echo "image_key: $IMAGE_KEY"
    echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "suite: $SUITE"
    echo "mirror: $MIRROR"
    echo "kernel: $KPKG $KVERS ($KREL)"
    hdr_list=$(for p in "${HDR_PKGS[@]}"; do printf '%s ' "$p ${HDR_VERSION[$p]}"; done)
    echo "siw: built out of tree from $SRC_PKG $KVERS with ${hdr_list% }, gcc $gcc_version, patch $siw_patch_hash"
    echo "siw variant: $VARIANT"
    echo "siw vermagic: $(modinfo -F vermagic "$SIW_DIR/siw.ko")"
    echo "modules: ${GUEST_MODULES[*]} $siw_deps siw"
    echo "initrd bytes: $(stat -c %s "$IMAGE_DIR.tmp/initrd.img")"
    echo "guest packages (requested):"
    for p in "${GUEST_PACKAGES[@]}"; do echo "  $p ${PKG_VERSION[$p]}"; done
    echo "guest packages (installed):"
    sed 's/^/  /' "$ROOTFS_DIR/.softrnic-packages"
} >"$IMAGE_DIR.tmp/manifest.txt"
echo "$VARIANT" >"$IMAGE_DIR.tmp/variant"
touch "$IMAGE_DIR.tmp/ready"
rm -rf "$IMAGE_DIR"
mv "$IMAGE_DIR.tmp" "$IMAGE_DIR"
set_current
# Keep the newest image of every variant key (older ones belong to superseded inputs) and the
# one `current` points to; --prune also drops the older current ones.
declare -A seen_variant=()
current_image=$(readlink -f "$LAB_CACHE/current" 2>/dev/null || true)
find "$LAB_CACHE/images" -mindepth 1 -maxdepth 1 -type d ! -name '*.tmp' -printf '%T@ %p\n' | sort -rn |
    cut -d' ' -f2- | while read -r old; do
        v=$(image_variant "$old")
        if [[ -z ${seen_variant[$v]:-} ]]; then seen_variant[$v]=1; continue; fi
        [[ $(readlink -f "$old") == "$current_image" ]] && continue
        rm -rf "$old"
    done
prune_cache
lab_log "initramfs $(du -h "$IMAGE_DIR/initrd.img" | cut -f1) ($(($(date +%s) - t0)) s); total $(($(date +%s) - start)) s"
echo "$IMAGE_DIR"
