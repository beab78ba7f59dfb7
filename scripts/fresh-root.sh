#!/usr/bin/env bash
# Runs a command in a clean clone of this repository's HEAD on a fresh, minimal Debian 12
# root (debootstrap --variant=minbase bookworm), with a read-only ../shared beside the
# clone, as a new user's machine would have it. This is how CI finds an install step that
# only a long-lived machine remembers.
#
# usage: scripts/fresh-root.sh [-k] [--] COMMAND...
#   -k        keep the root afterwards (its path is printed), to look inside
#   COMMAND   run as root in the clone (/work/main inside the root), e.g. scripts/test.sh
#
# What is tested is the committed HEAD: uncommitted changes are not in the clone.
# The base system is made once (about a minute) and cached as a tarball under
# ${FRESH_ROOT_CACHE:-/var/tmp/fresh-debian} (the cache ../shared/tools/fresh-debian.sh
# uses too); every run unpacks a new copy of it and removes it afterwards.
#
# Exit status: COMMAND's; 125 when the root could not be made for a reason outside the
# project (not root, no debootstrap, the Debian archive unreachable, mounting refused,
# too little disk), with one line on stderr saying which. A COMMAND that exits 125 itself
# is reported as 1, so that 125 always means "no fresh root".
set -euo pipefail

keep=0
while [ $# -gt 0 ]; do
  case "$1" in
    -k) keep=1; shift ;;
    --) shift; break ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    -*) echo "fresh-root: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || { echo "fresh-root: no command given (see --help)" >&2; exit 2; }

unavailable() { echo "fresh-root: cannot make a fresh Debian 12 root: $*" >&2; exit 125; }
say() { echo "fresh-root: $*" >&2; }

[ "$(id -u)" = 0 ] || unavailable "not running as root"
repo=$(cd "$(dirname "$0")/.." && pwd)
# The repository this script came from is trusted whoever owns it (a CI checkout).
g() { git -c safe.directory='*' "$@"; }
shared=${BULKHEAD_SHARED:-$(cd "$repo/.." && pwd)/shared}
[ -d "$shared/models" ] || { echo "fresh-root: the shared test data folder '$shared' is missing (set BULKHEAD_SHARED)" >&2; exit 1; }
commit=$(g -C "$repo" rev-parse HEAD)
[ -z "$(g -C "$repo" status --porcelain --untracked-files=no)" ] ||
  say "note: uncommitted changes are not tested; the clone is of HEAD ${commit:0:7}"
cache=${FRESH_ROOT_CACHE:-/var/tmp/fresh-debian}
mkdir -p "$cache" || unavailable "cannot create the cache folder $cache"
# A root holds ~2 GB of packages and the build trees of the test command ~5 GB.
need_kib=$((8 * 1024 * 1024))
free_kib=$(df -Pk /var/tmp | awk 'NR==2{print $4}')
[ "${free_kib:-0}" -ge $need_kib ] || unavailable "only $((free_kib / 1024)) MiB free under /var/tmp (8 GiB needed)"

base=$cache/bookworm-minbase.tar
if [ ! -s "$base" ]; then
  if ! command -v debootstrap >/dev/null; then
    say "installing debootstrap on this machine"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap; } >/dev/null 2>&1 ||
      unavailable "debootstrap is not installed and apt-get could not install it"
  fi
  # The Debian mirror this machine's apt uses.
  mirror=$(sed -n 's/^URIs: *\([^ ]*debian\)$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n1)
  [ -n "$mirror" ] || mirror=$(awk '$1=="deb"{print $2; exit}' /etc/apt/sources.list 2>/dev/null)
  [ -n "$mirror" ] || mirror=http://deb.debian.org/debian
  tmp=$(mktemp -d "$cache/make.XXXX")
  say "making a minimal Debian 12 root from $mirror (once; cached in $cache)"
  if ! debootstrap --variant=minbase bookworm "$tmp/root" "$mirror" >"$cache/debootstrap.log" 2>&1; then
    rm -rf --one-file-system "$tmp"
    unavailable "debootstrap from $mirror failed: $(tail -n1 "$cache/debootstrap.log")"
  fi
  tar -C "$tmp/root" -cf "$base.part" . && mv "$base.part" "$base"
  rm -rf --one-file-system "$tmp"
fi

root=$(mktemp -d /var/tmp/fresh-root.XXXX)
mounted=()
cleanup() {
  # End whatever still runs inside the root (a command interrupted mid-way).
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/root" 2>/dev/null)" = "$root" ] && kill -9 "${p#/proc/}" 2>/dev/null
  done
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[$i]}" 2>/dev/null || true; done
  if [ $keep = 1 ]; then
    say "root kept at $root (mounts removed)"
  elif grep -q " $root/" /proc/self/mounts; then
    say "something is still mounted under $root; left in place"
  else
    rm -rf --one-file-system "$root"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

tar -C "$root" -xf "$base" || unavailable "cannot unpack $base into $root"
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
for m in proc sys dev dev/pts; do
  mkdir -p "$root/$m"
  if [ $m = proc ]; then
    mount -t proc proc "$root/proc" || unavailable "mounting /proc in the root was refused"
  else
    mount --rbind "/$m" "$root/$m" || unavailable "bind-mounting /$m into the root was refused"
  fi
  mounted+=("$root/$m")
done

# The package lists: the first thing any install step needs, and the test of whether the
# Debian archive can be reached from here.
chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin apt-get update -qq >/dev/null 2>"$root/apt-update.err" ||
  unavailable "apt-get update in the root failed (is the Debian archive reachable?): $(grep -v '^\s*$' "$root/apt-update.err" | tail -n1)"

mkdir -p "$root/work/main" "$root/work/shared"
g clone -q --no-checkout -u "git -c safe.directory='*' upload-pack" "$repo" "$root/work/main"
git -C "$root/work/main" checkout -q --detach "$commit"
# ../shared read-only even for root: a bind mount remounted read-only (a copy made
# read-only by permissions where bind mounts are refused).
if mount --bind "$shared" "$root/work/shared" 2>/dev/null; then
  mounted+=("$root/work/shared")
  mount -o remount,bind,ro "$root/work/shared" || unavailable "cannot make the bind mount of $shared read-only"
else
  cp -a "$shared/." "$root/work/shared/"
  chmod -R a-w "$root/work/shared"
fi

say "running '$*' in a clean clone of ${commit:0:7} on a fresh Debian 12 root"
set +e
chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  LANG=C.UTF-8 CI=true TERM=dumb /bin/bash -c 'cd /work/main && "$@"' bash "$@"
rc=$?
set -e
if [ $rc = 125 ]; then
  say "'$*' exited 125, reported as 1 (125 means no fresh root)"
  rc=1
fi
say "'$*' exited $rc"
exit $rc
