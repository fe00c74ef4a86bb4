#!/usr/bin/env bash
# Copies guest-rping.sh as guest.sh into every MPA-variant scenario (the guest sees only its
# own scenario directory, so each needs a real copy). --check: fail if a copy differs.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
rc=0
for d in "$here"/../scenarios/mpa-*/ "$here"/../scenarios/profile-*/; do
    [[ -r $d/scenario.sh ]] || continue
    if [[ ${1:-} == --check ]]; then
        cmp -s "$here/guest-rping.sh" "$d/guest.sh" || { echo "differs: $d/guest.sh"; rc=1; }
    else
        install -m 0755 "$here/guest-rping.sh" "$d/guest.sh"
    fi
done
exit "$rc"
