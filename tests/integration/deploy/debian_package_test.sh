#!/usr/bin/env bash
# The .deb packages in a fresh Debian 12 root: build them with CPack, install them with dpkg in a
# debootstrap'ed bookworm root (cached in $RDMAD_TEST_CACHE, default /var/cache/rdmad-test),
# check the conffile, the account, `rdmad --check-config /etc/rdmad/rdmad.toml`, start the
# daemon there as user rdmad and scrape it, then purge. Needs root (chroot, dpkg --root).
# The first run downloads ~70 MB from $RDMAD_DEBIAN_MIRROR (default http://deb.debian.org/debian);
# it skips, with the reason, if that fails.
# Usage: debian_package_test.sh BUILD_DIR
. "$(dirname "$0")/lib.sh"
build=$1
[ "$(id -u)" = 0 ] || skip "needs root (chroot, dpkg in a Debian root)"
need debootstrap debootstrap
need cpack cmake
need curl curl
cache=${RDMAD_TEST_CACHE:-/var/cache/rdmad-test}
mirror=${RDMAD_DEBIAN_MIRROR:-http://deb.debian.org/debian}
root=$cache/bookworm-root
t0=$(date +%s)

work=$(mktemp -d)
daemon_pid=""
mounted=""
cleanup() {
  [ -z "$daemon_pid" ] || { kill "$daemon_pid" 2>/dev/null || true; wait "$daemon_pid" 2>/dev/null || true; }
  if [ -n "$mounted" ]; then umount "$root/proc" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

(cd "$build" && cpack -G DEB -B "$work/pkg" >"$work/cpack.log" 2>&1) || fail "cpack: $(cat "$work/cpack.log")"
deb=$(ls "$work"/pkg/rdmad_*.deb)
debs=$(ls "$work"/pkg/rdmad*.deb)
t_pack=$(date +%s)

mkdir -p "$cache"
exec 9>"$cache/lock"
flock 9  # one user of the cached root at a time
if [ ! -e "$root/.rdmad-complete" ]; then
  rm -rf "$root.tmp"
  if ! debootstrap --variant=minbase bookworm "$root.tmp" "$mirror" >"$work/debootstrap.log" 2>&1; then
    rm -rf "$root.tmp"
    skip "debootstrap bookworm from $mirror failed (no mirror reachable?): $(tail -3 "$work/debootstrap.log")"
  fi
  rm -rf "$root"
  mv "$root.tmp" "$root"
  touch "$root/.rdmad-complete"
fi
t_root=$(date +%s)
in_root() { chroot "$root" "$@"; }
if mount -t proc proc "$root/proc" 2>/dev/null; then mounted=1; fi

# A previous run that failed half-way may have left the packages installed.
in_root dpkg --purge rdmad-dev rdmad >/dev/null 2>&1 || true
cp $debs "$root/tmp/"
names=$(for d in $debs; do echo "/tmp/$(basename "$d")"; done)
if ! in_root dpkg -i $names >"$work/dpkg.log" 2>&1; then
  # Dependencies missing from the cached root: fetch them once (they stay in the cache).
  cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
  if ! { in_root apt-get update -qq && DEBIAN_FRONTEND=noninteractive in_root apt-get install -y -qq -f; } \
      >"$work/apt.log" 2>&1; then
    in_root dpkg --purge rdmad-dev rdmad >/dev/null 2>&1 || true
    skip "dependencies of the package could not be installed from $mirror: $(tail -3 "$work/apt.log")"
  fi
fi
in_root dpkg-query -W -f='${Status}\n' rdmad | grep -qx "install ok installed" || fail "rdmad not installed: $(cat "$work/dpkg.log")"
t_install=$(date +%s)

in_root dpkg-query -W -f='${Conffiles}\n' rdmad | grep -q '^ /etc/rdmad/rdmad.toml ' || fail "/etc/rdmad/rdmad.toml is not a conffile"
in_root getent passwd rdmad >/dev/null || fail "postinst did not create user rdmad"
[ -f "$root/usr/lib/systemd/system/rdmad.service" ] || fail "no rdmad.service"
[ -f "$root/usr/share/man/man8/rdmad.8" ] || fail "no man page"
check=$(in_root /usr/sbin/rdmad --check-config /etc/rdmad/rdmad.toml 2>&1) || fail "rdmad --check-config /etc/rdmad/rdmad.toml: $check"
echo "$check"
cmp -s "$root/etc/rdmad/rdmad.toml" <("$RDMAD" --print-default-config) || fail "packaged config differs from --print-default-config"

# Run the packaged daemon as systemd would: user rdmad, /run/rdmad created for it. Only the
# metrics port differs from the packaged file (port 0: the host's network is shared).
sed 's/^listen = .*/listen = "127.0.0.1:0"/' "$root/etc/rdmad/rdmad.toml" >"$root/tmp/rdmad-test.toml"
mkdir -p "$root/run/rdmad"
in_root chown rdmad:rdmad /run/rdmad
chroot --userspec=rdmad:rdmad "$root" /usr/sbin/rdmad --config /tmp/rdmad-test.toml >"$work/rdmad.log" 2>&1 &
daemon_pid=$!
poll 10 grep -q 'serving metrics url=http://127.0.0.1:' "$work/rdmad.log" || fail "packaged rdmad did not start: $(cat "$work/rdmad.log")"
port=$(sed -n 's|.*serving metrics url=http://127.0.0.1:\([0-9]*\)/metrics.*|\1|p' "$work/rdmad.log" | head -1)
body=$(curl -fsS "http://127.0.0.1:$port/metrics") || fail "scrape of the packaged daemon"
version=$("$RDMAD" --version | sed -n 's/^rdmad \([^ ]*\) .*/\1/p')
echo "$body" | grep -q "^rdmad_build_info{.*version=\"$version\"} 1$" || fail "no rdmad_build_info version $version in: $body"
kill -TERM "$daemon_pid"
wait "$daemon_pid" && rc=0 || rc=$?
daemon_pid=""
[ "$rc" = 0 ] || fail "packaged rdmad exited $rc on SIGTERM: $(cat "$work/rdmad.log")"

# -dev: the pkg-config file resolves inside wherever the package lands.
if [ -f "$root/usr/lib/pkgconfig/rdmad.pc" ] && command -v pkg-config >/dev/null; then
  read -r lib < <(PKG_CONFIG_PATH="$root/usr/lib/pkgconfig" pkg-config --libs rdmad)
  [ -f "$lib" ] || fail "pkg-config --libs rdmad gives '$lib', not a file"
fi

in_root dpkg --purge rdmad-dev rdmad >/dev/null || fail "dpkg --purge"
[ ! -e "$root/etc/rdmad/rdmad.toml" ] || fail "purge left /etc/rdmad/rdmad.toml"
t_end=$(date +%s)
echo "timing: cpack $((t_pack - t0)) s, root $((t_root - t_pack)) s, install $((t_install - t_root)) s, checks $((t_end - t_install)) s"
echo PASS
