#!/usr/bin/env bash
# The .deb packages in a fresh Debian 12 root: build them with CPack (rdmad, librdmad0,
# librdmad-dev), install them with dpkg in a debootstrap'ed bookworm root (cached in
# $RDMAD_TEST_CACHE, default /var/cache/rdmad-test), check the conffile, the account,
# `rdmad --check-config /etc/rdmad/rdmad.toml`, start the daemon there as user rdmad and scrape
# it; build examples/register_host.c from C against the installed librdmad-dev, once with
# pkg-config and once with CMake's find_package(rdmad), and run both in the root against the
# packaged daemon; then purge. Needs root (chroot, dpkg --root).
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
debs=$(ls "$work"/pkg/*.deb)
# Lintian clean: every tag an error or warning fails the test (the overrides the packages ship
# say why). The -dbgsym .ddebs are left out: CMake 3.25's CPack lists their files in md5sums by
# build-tree paths.
need lintian lintian
lint_rc=0
lint=$(lintian --fail-on error,warning $debs 2>&1) || lint_rc=$?
lint=$(echo "$lint" | grep -v 'running with root privileges' || true)
[ "$lint_rc" = 0 ] && [ -z "$lint" ] || fail "lintian (exit $lint_rc): $lint"
ls "$work"/pkg/rdmad-dbgsym_*.ddeb "$work"/pkg/librdmad0-dbgsym_*.ddeb >/dev/null || fail "no -dbgsym packages"
t_pack=$(date +%s)

mkdir -p "$cache"
exec 9>"$cache/lock"
flock 9  # one user of the cached root at a time
debootstrap_cached "$root" "$mirror" "$work/debootstrap.log"
t_root=$(date +%s)
in_root() { chroot "$root" "$@"; }
if mount -t proc proc "$root/proc" 2>/dev/null; then mounted=1; fi

# A previous run that failed half-way may have left the packages installed.
in_root dpkg --purge librdmad-dev librdmad0 rdmad rdmad-dev >/dev/null 2>&1 || true
cp $debs "$root/tmp/"
names=$(for d in $debs; do echo "/tmp/$(basename "$d")"; done)
if ! in_root dpkg -i $names >"$work/dpkg.log" 2>&1; then
  # Dependencies missing from the cached root: fetch them once (they stay in the cache).
  cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
  if ! { in_root apt-get update -qq && DEBIAN_FRONTEND=noninteractive in_root apt-get install -y -qq -f; } \
      >"$work/apt.log" 2>&1; then
    in_root dpkg --purge librdmad-dev librdmad0 rdmad rdmad-dev >/dev/null 2>&1 || true
    skip "dependencies of the package could not be installed from $mirror: $(tail -3 "$work/apt.log")"
  fi
fi
for p in rdmad librdmad0 librdmad-dev; do
  grep -qx "install ok installed" <<<"$(in_root dpkg-query -W -f='${Status}\n' "$p")" || fail "$p not installed: $(cat "$work/dpkg.log")"
done
# The library package alone is what an application needs at run time; the headers do not pull
# in the daemon.
grep -q '^librdmad0 (= ' <<<"$(in_root dpkg-query -W -f='${Depends}\n' librdmad-dev)" || fail "librdmad-dev does not depend on librdmad0"
if grep -q 'rdmad (' <<<"$(in_root dpkg-query -W -f='${Depends}\n' librdmad-dev librdmad0)"; then
  fail "the library packages depend on the daemon"
fi
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
libdir=/usr/lib/$multiarch
[ -f "$root$libdir/librdmad.so.0" ] || fail "no $libdir/librdmad.so.0 in librdmad0"
# The NCCL net plugin, where NCCL's dlopen("libnccl-net-rdmad.so") finds it, with its tables.
[ -f "$root$libdir/libnccl-net-rdmad.so" ] || fail "no $libdir/libnccl-net-rdmad.so in librdmad0"
for v in 8 9 10; do
  grep -q " ncclNetPlugin_v$v\$" <<<"$(nm -D --defined-only "$root$libdir/libnccl-net-rdmad.so")" || fail "the plugin exports no ncclNetPlugin_v$v"
done
for h in protocol.h admin.h flow_ring.h; do
  [ ! -e "$root/usr/include/rdmad/$h" ] || fail "internal header rdmad/$h installed as public"
done
t_install=$(date +%s)

grep -q '^ /etc/rdmad/rdmad.toml ' <<<"$(in_root dpkg-query -W -f='${Conffiles}\n' rdmad)" || fail "/etc/rdmad/rdmad.toml is not a conffile"
in_root getent passwd rdmad >/dev/null || fail "postinst did not create user rdmad"
[ -f "$root/usr/lib/systemd/system/rdmad.service" ] || fail "no rdmad.service"
[ -x "$root/usr/sbin/rdmad-supervise" ] || fail "no /usr/sbin/rdmad-supervise"
for page in man8/rdmad.8.gz man8/rdmad-supervise.8.gz man1/rdmactl.1.gz man5/rdmad.toml.5.gz man3/librdmad.3.gz; do
  [ -f "$root/usr/share/man/$page" ] || fail "no man page $page"
done
check=$(in_root /usr/sbin/rdmad --check-config /etc/rdmad/rdmad.toml 2>&1) || fail "rdmad --check-config /etc/rdmad/rdmad.toml: $check"
echo "$check"
cmp -s "$root/etc/rdmad/rdmad.toml" <("$RDMAD" --print-default-config) || fail "packaged config differs from --print-default-config"

# Run the packaged daemon as systemd would: user rdmad, /run/rdmad and /run/rdmad-admin (the admin
# socket's directory) created for it as tmpfiles.d does. Only the
# metrics port differs from the packaged file (port 0: the host's network is shared), plus one
# soft NIC for the example's registration.
sed 's/^listen = .*/listen = "127.0.0.1:0"/' "$root/etc/rdmad/rdmad.toml" >"$root/tmp/rdmad-test.toml"
printf '[[nic]]\nname = "rail0"\nbackend = "soft"\naddress = "127.0.0.1"\nudp_port = 0\n' >>"$root/tmp/rdmad-test.toml"
mkdir -p "$root/run/rdmad" "$root/run/rdmad-admin"
in_root chown rdmad:rdmad /run/rdmad /run/rdmad-admin
chmod 0700 "$root/run/rdmad-admin"
chroot --userspec=rdmad:rdmad "$root" /usr/sbin/rdmad --config /tmp/rdmad-test.toml >"$work/rdmad.log" 2>&1 &
daemon_pid=$!
poll 10 grep -q 'serving metrics url=http://127.0.0.1:' "$work/rdmad.log" || fail "packaged rdmad did not start: $(cat "$work/rdmad.log")"
port=$(sed -n 's|.*serving metrics url=http://127.0.0.1:\([0-9]*\)/metrics.*|\1|p;T;q' "$work/rdmad.log")
body=$(curl -fsS "http://127.0.0.1:$port/metrics") || fail "scrape of the packaged daemon"
version=$("$RDMAD" --version | sed -n 's/^rdmad \([^ ]*\) .*/\1/p')
grep -q "^rdmad_build_info{.*version=\"$version\"} 1$" <<<"$body" || fail "no rdmad_build_info version $version in: $body"

# An application developer's two ways in, from C, against the installed librdmad-dev (compiled
# by the host's gcc with the root's headers, .pc, CMake files and library; run inside the root).
example=$RDMAD_SOURCE_DIR/client/examples/register_host.c
need_pc=$(command -v pkg-config || true)
[ -n "$need_pc" ] || fail "pkg-config is not installed (scripts/setup-deps installs it)"
flags=$(PKG_CONFIG_LIBDIR="$root$libdir/pkgconfig" pkg-config --cflags --libs rdmad) || fail "pkg-config rdmad"
gcc -std=c11 -Wall -Werror "$example" $flags -o "$root/tmp/register_host_pc" 2>"$work/gcc.log" ||
  fail "C build with pkg-config ($flags): $(cat "$work/gcc.log")"
mkdir -p "$work/cmake-app"
cat >"$work/cmake-app/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.16)
project(register_host C)
find_package(rdmad 0.1 REQUIRED)
add_executable(register_host $example)
target_link_libraries(register_host PRIVATE rdmad::rdmad)
CMAKE
cmake -S "$work/cmake-app" -B "$work/cmake-app/build" -DCMAKE_PREFIX_PATH="$root/usr" >"$work/cmake-app.log" 2>&1 &&
  cmake --build "$work/cmake-app/build" >>"$work/cmake-app.log" 2>&1 ||
  fail "C build with find_package(rdmad): $(cat "$work/cmake-app.log")"
cp "$work/cmake-app/build/register_host" "$root/tmp/register_host_cmake"
for app in register_host_pc register_host_cmake; do
  out=$(in_root /tmp/$app /run/rdmad/rdmad.sock 2>&1) || fail "$app in the root: $out; daemon: $(cat "$work/rdmad.log")"
  echo "$app: $out"
done
kill -TERM "$daemon_pid"
wait "$daemon_pid" && rc=0 || rc=$?
daemon_pid=""
[ "$rc" = 0 ] || fail "packaged rdmad exited $rc on SIGTERM: $(cat "$work/rdmad.log")"

in_root dpkg --purge librdmad-dev librdmad0 rdmad >/dev/null || fail "dpkg --purge"
[ ! -e "$root/etc/rdmad/rdmad.toml" ] || fail "purge left /etc/rdmad/rdmad.toml"
[ ! -e "$root$libdir/librdmad.so.0" ] || fail "purge left librdmad.so.0"
t_end=$(date +%s)
echo "timing: cpack $((t_pack - t0)) s, root $((t_root - t_pack)) s, install $((t_install - t_root)) s, checks $((t_end - t_install)) s"
echo PASS
