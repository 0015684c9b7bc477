#!/usr/bin/env bash
# The systemd units as installed: `systemd-analyze verify` is clean, the exposure score of
# `systemd-analyze security` is at most 3.0, and the sysusers.d file creates the account.
# Works offline (no systemd as PID 1 needed): everything runs against a temporary root.
# Usage: systemd_units_test.sh BUILD_DIR
. "$(dirname "$0")/lib.sh"
build=$1
need systemd-analyze systemd
need systemd-sysusers systemd

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
DESTDIR=$root cmake --install "$build" --component daemon --prefix /usr >/dev/null
units=$root/usr/lib/systemd/system
# --root resolves every dependency (sysinit.target, network-online.target, ...) and every Exec
# binary inside the root: give it the host's own units next to ours.
cp -an /lib/systemd/system/. "$units/"

out=$(cd "$root" && systemd-analyze verify --man=no --root="$root" "$units/rdmad.service" "$units/rdmad.socket" \
  "$units/rdmad-admin.socket" 2>&1) ||
  fail "systemd-analyze verify: $out"
[ -z "$out" ] || fail "systemd-analyze verify printed warnings: $out"

# verify really resolves ExecStart= inside the root: without the binary it must fail.
mv "$root/usr/sbin/rdmad" "$root/usr/sbin/rdmad.moved"
if (cd "$root" && systemd-analyze verify --man=no --root="$root" "$units/rdmad.service" >/dev/null 2>&1); then
  fail "verify passed without /usr/sbin/rdmad: it does not check the installed root"
fi
mv "$root/usr/sbin/rdmad.moved" "$root/usr/sbin/rdmad"

sec=$(cd "$root" && systemd-analyze security --offline=true --threshold=30 --root="$root" "$units/rdmad.service" 2>&1) ||
  fail "systemd-analyze security (threshold 3.0): $sec"
score=$(echo "$sec" | sed -n 's/.*Overall exposure level for rdmad.service: \([0-9.]*\).*/\1/p')
[ -n "$score" ] || fail "no exposure score in: $sec"
awk -v s="$score" 'BEGIN { exit !(s <= 3.0) }' || fail "exposure $score > 3.0"
echo "exposure score: $score"

# Settings the daemon's design depends on (the score alone would not catch their loss).
for line in Type=notify WatchdogSec=30s Restart=on-failure 'ExecReload=/bin/kill -HUP $MAINPID' \
    User=rdmad Group=rdmad 'CapabilityBoundingSet=CAP_IPC_LOCK CAP_NET_ADMIN' \
    'AmbientCapabilities=CAP_IPC_LOCK CAP_NET_ADMIN' LimitMEMLOCK=infinity LimitNOFILE=524288 DevicePolicy=closed \
    'DeviceAllow=char-infiniband_verbs rw' ProtectSystem=strict RuntimeDirectory=rdmad \
    'RestrictAddressFamilies=AF_UNIX AF_NETLINK AF_INET AF_INET6' ProtectProc=default 'ExecStart=/usr/sbin/rdmad --config /etc/rdmad/rdmad.toml' \
    FileDescriptorStoreMax=65536 RuntimeDirectoryPreserve=yes; do
  grep -qxF "$line" "$units/rdmad.service" || fail "rdmad.service lacks '$line'"
done
grep -q '^After=.*network-online.target' "$units/rdmad.service" || fail "not after network-online.target"
grep -q '^After=.*rdma-hw.target' "$units/rdmad.service" || fail "not after rdma-hw.target"
grep -qxF 'ListenSequentialPacket=/run/rdmad/rdmad.sock' "$units/rdmad.socket" || fail "socket path differs from the default config"
grep -qxF 'socket_path = "/run/rdmad/rdmad.sock"' "$root/etc/rdmad/rdmad.toml" || fail "default config socket path changed"
# The admin socket: where the daemon puts it by default (admin_socket_path = ""), 0600, its own directory.
for line in 'ListenSequentialPacket=/run/rdmad-admin/admin.sock' SocketMode=0600 DirectoryMode=0700 SocketUser=rdmad \
    FileDescriptorName=admin Service=rdmad.service; do
  grep -qxF "$line" "$units/rdmad-admin.socket" || fail "rdmad-admin.socket lacks '$line'"
done
grep -qxF 'admin_socket_path = ""' "$root/etc/rdmad/rdmad.toml" || fail "default config admin socket path changed"
grep -q '^Wants=.*rdmad-admin.socket' "$units/rdmad.service" || fail "rdmad.service does not want rdmad-admin.socket"

mkdir -p "$root/etc"
users=$(systemd-sysusers --root="$root" --dry-run "$root/usr/lib/sysusers.d/rdmad.conf" 2>&1) || fail "sysusers: $users"
grep -q "Creating user 'rdmad'" <<<"$users" || fail "sysusers.d does not create user rdmad: $users"
grep -q "Creating group 'rdmad'" <<<"$users" || fail "sysusers.d does not create group rdmad: $users"
# With the account created, tmpfiles.d gives /run/rdmad its owner and mode before the socket exists.
systemd-sysusers --root="$root" "$root/usr/lib/sysusers.d/rdmad.conf" >/dev/null 2>&1 || fail "systemd-sysusers --root"
uid=$(awk -F: '$1 == "rdmad" { print $3 }' "$root/etc/passwd")
out=$(systemd-tmpfiles --root="$root" --create "$root/usr/lib/tmpfiles.d/rdmad.conf" 2>&1) || fail "tmpfiles: $out"
[ "$(stat -c '%u %a' "$root/run/rdmad")" = "$uid 750" ] || fail "/run/rdmad is $(stat -c '%u %a' "$root/run/rdmad"), want $uid 750"
[ "$(stat -c '%u %a' "$root/run/rdmad-admin")" = "$uid 700" ] ||
  fail "/run/rdmad-admin is $(stat -c '%u %a' "$root/run/rdmad-admin"), want $uid 700"
echo PASS
