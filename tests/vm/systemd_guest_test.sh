#!/usr/bin/env bash
# rdmad under a real systemd: the project's .debs (CPack) installed in a debootstrap'ed Debian 12
# root with systemd (cached in $RDMAD_TEST_CACHE, default /var/cache/rdmad-test, built here on first
# use), booted in a qemu TCG guest with systemd as PID 1 (rdmad_vm.py --sysroot: the cached root
# under an overlay whose upper layer is this run's, so every run starts from the same tree). A
# unit in the guest runs tests/vm/guest/systemd_guest.sh after boot (socket activation, notify,
# reload, journald, the hardened unit with a soft NIC, the watchdog killing a stalled daemon),
# while Prometheus on the host scrapes the guest over a tap device (tests/vm/host/prometheus_scrape.sh).
# Needs root (chroot, overlay mount, network namespace). The first run downloads ~90 MB from
# $RDMAD_DEBIAN_MIRROR (default http://deb.debian.org/debian); it skips, with the reason, only if
# that fails (or qemu/the kernel cannot be had: rdmad_vm.py's own skips).
# Usage: systemd_guest_test.sh BUILD_DIR [--timeout S]
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../integration/deploy/lib.sh"  # fail, skip, need, debootstrap_cached
build=$(cd "$1" && pwd)
shift
timeout=300
[ "${1:-}" = --timeout ] && timeout=$2
[ "$(id -u)" = 0 ] || skip "needs root (chroot, overlay mount, network namespace)"
need debootstrap debootstrap
need cpack cmake
need prometheus prometheus
need qemu-system-x86_64 qemu-system-x86
cache=${RDMAD_TEST_CACHE:-/var/cache/rdmad-test}
mirror=${RDMAD_DEBIAN_MIRROR:-http://deb.debian.org/debian}
root=$cache/bookworm-systemd-root
# minbase plus what PID 1, the unit's hardening, the daemon's libraries (the .deb's Depends) and
# the test script need. A change here rebuilds the cached root.
include=systemd,systemd-sysv,iproute2,procps,libibverbs1,ibverbs-providers,libssl3,libfmt9,libspdlog1.10
include=$include,libprometheus-cpp-core1.0,libprometheus-cpp-pull1.0,libtomlplusplus3
# DPDK's runtime, which rdmad links where it is built with the dpdk backend (dpkg-shlibdeps' list).
include=$include,librte-eal23,librte-ethdev23,librte-mbuf23,librte-mempool23,librte-ring23
t0=$(date +%s)

work=$(mktemp -d "$build/vm/systemd-guest.XXXXXX")
merged=$work/root
cleanup() {
  umount "$merged/proc" 2>/dev/null || true
  umount "$merged" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

(cd "$build" && cpack -G DEB -B "$work/pkg" >"$work/cpack.log" 2>&1) || fail "cpack: $(tail -20 "$work/cpack.log")"
debs=$(ls "$work"/pkg/*.deb)
t_pack=$(date +%s)

mkdir -p "$cache"
exec 9>"$cache/systemd-root.lock"
flock 9  # one builder of the cached root; runs only read it (through their overlay)
debootstrap_cached "$root" "$mirror" "$work/debootstrap.log" --include="$include"
t_root=$(date +%s)

# This run's tree: the cached root, read-only, under an upper layer of our own.
mkdir -p "$work/upper" "$work/ovl" "$merged"
mount -t overlay overlay -o "lowerdir=$root,upperdir=$work/upper,workdir=$work/ovl" "$merged" ||
  fail "cannot mount an overlay on $root"
in_root() { chroot "$merged" "$@"; }
mount -t proc proc "$merged/proc"
mkdir -p "$merged/tmp/debs"
cp $debs "$merged/tmp/debs/"
# --force-depends never: a dependency missing from the cached root fails here, with dpkg's words.
in_root sh -c 'dpkg -i /tmp/debs/*.deb' >"$work/dpkg.log" 2>&1 || fail "dpkg -i in the guest root: $(cat "$work/dpkg.log")"
rm -rf "$merged/tmp/debs"
umount "$merged/proc"

# The test unit: after boot, the guest script (found on the kernel command line, rdmad.cmd=), its
# output on the serial console; it powers the guest off itself.
cat >"$merged/usr/local/sbin/rdmad-vm-test" <<'SH'
#!/bin/bash
# The words of rdmad.cmd= (rdmad_vm.py joins them with %20): the script on the host's root, its args.
read -ra w <<<"$(sed -n 's/.* rdmad\.cmd=\([^ ]*\).*/\1/p' /proc/cmdline | sed 's/%20/ /g')"
exec /bin/bash "/host${w[0]}" 0 "${w[@]:1}"  # guest index 0, as boot.sh passes it
SH
chmod 755 "$merged/usr/local/sbin/rdmad-vm-test"
cat >"$merged/etc/systemd/system/rdmad-vm-test.service" <<'UNIT'
[Unit]
Description=rdmad systemd guest test (tests/vm/guest/systemd_guest.sh)
After=multi-user.target
[Service]
Type=simple
ExecStart=/usr/local/sbin/rdmad-vm-test
[Install]
WantedBy=multi-user.target
UNIT
ln -sf ../rdmad-vm-test.service "$merged/etc/systemd/system/multi-user.target.wants/rdmad-vm-test.service"
# What a test guest does not need at boot (each costs seconds under TCG): gettys, time sync, apt's timers.
for u in serial-getty@ttyS0.service getty@tty1.service console-getty.service systemd-timesyncd.service \
         apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer dpkg-db-backup.timer \
         e2scrub_reap.service systemd-pstore.service getty-static.service kmod-static-nodes.service; do
  ln -sf /dev/null "$merged/etc/systemd/system/$u"
done
# The packaged unit enables rdmad.service at install; the test starts it through its socket.
rm -f "$merged/etc/systemd/system/multi-user.target.wants/rdmad.service"
echo rdmad-guest >"$merged/etc/hostname"
t_install=$(date +%s)
echo "timing: cpack $((t_pack - t0)) s, root $((t_root - t_pack)) s, install $((t_install - t_root)) s"

ns=rdmad-sysd
host_cmd="bash $here/host/prometheus_scrape.sh 10.200.0.1:9842"
set +e
python3 "$here/rdmad_vm.py" run --cache "$build/vm" --sysroot "$merged" --rails 1 --tap "$ns" \
  --host-cmd "$host_cmd" --timeout "$timeout" "$here/guest/systemd_guest.sh" "$build"
rc=$?
set -e
t_end=$(date +%s)
echo "timing: guest run $((t_end - t_install)) s, whole test $((t_end - t0)) s"
exit $rc
