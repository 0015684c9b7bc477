#!/usr/bin/env bash
# Socket activation as shipped: the socket type comes from the installed rdmad.socket, and
# systemd's own activator (systemd-socket-activate, the same code path as a .socket unit) creates
# it, starts rdmad on the first connection and passes the descriptor. Then:
#   1. with the unit's socket type, rdmactl reaches the activated daemon, which served the passed
#      sockets (activation=systemd: the client socket and the admin socket, as rdmad.socket and
#      rdmad-admin.socket pass them), not ones of its own;
#   2. with a stream socket (what ListenStream= makes), rdmad warns that it ignores the passed
#      socket, refuses to start, and leaves the live socket in place (it used to delete it and bind
#      its own, and systemd's clients got "Protocol wrong type for socket").
# Usage: socket_activation_test.sh BUILD_DIR
. "$(dirname "$0")/lib.sh"
build=$1
need systemd-socket-activate systemd
rdmactl="$(dirname "$RDMAD")/../tools/rdmactl/rdmactl"
use_work_dir

DESTDIR=$work/root cmake --install "$build" --component daemon --prefix /usr >/dev/null
unit=$work/root/usr/lib/systemd/system/rdmad.socket
admin_unit=$work/root/usr/lib/systemd/system/rdmad-admin.socket
grep -qxF "$(grep '^Listen' "$unit" | sed 's/=.*//')=/run/rdmad-admin/admin.sock" "$admin_unit" ||
  fail "rdmad-admin.socket's socket type or path differs from rdmad.socket's: $(cat "$admin_unit")"
listen=$(sed -n 's/^\(Listen[A-Za-z]*\)=.*/\1/p' "$unit")
case "$listen" in
  ListenSequentialPacket) flag=--seqpacket ;;
  ListenStream) flag= ;;
  *) fail "rdmad.socket has no Listen*= line I know: '$listen'" ;;
esac

# write_config DIR: a config serving DIR/rdmad.sock, no NICs, metrics on an ephemeral port.
write_config() {
  mkdir -p "$1/run"
  cat >"$1/rdmad.toml" <<TOML
[daemon]
runtime_dir = "$1/run"
socket_path = "$1/rdmad.sock"
[metrics]
listen = "127.0.0.1:0"
TOML
}

# 1. The unit's socket type works end to end.
a=$work/a
write_config "$a"
# The admin socket where the daemon and rdmactl expect it by default: beside the client socket's
# directory, not in it.
admin="$a-admin/admin.sock"
mkdir -p "$a-admin"
systemd-socket-activate $flag -l "$a/rdmad.sock" -l "$admin" --fdname=clients:admin \
  "$RDMAD" --config "$a/rdmad.toml" >"$a/rdmad.log" 2>&1 &
RDMAD_PID=$!
poll 10 test -S "$a/rdmad.sock" || fail "systemd-socket-activate made no socket: $(cat "$a/rdmad.log")"
out=$("$rdmactl" --socket "$a/rdmad.sock" --admin-socket "$admin" status 2>&1) ||
  fail "rdmactl status through the $listen socket failed: $out; daemon log: $(cat "$a/rdmad.log")"
poll 10 grep -q 'serving clients .*activation=systemd' "$a/rdmad.log" ||
  fail "rdmad did not serve the passed socket: $(cat "$a/rdmad.log")"
out=$("$rdmactl" --socket "$a/rdmad.sock" --admin-socket "$admin" registrations 2>&1) ||
  fail "rdmactl registrations through the passed admin socket failed: $out; daemon log: $(cat "$a/rdmad.log")"
grep -qE "serving admin requests socket=\"?$admin\"? activation=systemd" "$a/rdmad.log" ||
  fail "rdmad did not serve the passed admin socket: $(cat "$a/rdmad.log")"
! grep -q 'passed socket ignored' "$a/rdmad.log" || fail "rdmad ignored a passed socket: $(cat "$a/rdmad.log")"
kill "$RDMAD_PID"
wait "$RDMAD_PID" || true
RDMAD_PID=
echo "ok: $listen sockets (client and admin) activate rdmad and rdmactl is served on both"

# 2. A stream socket is refused loudly and left alone.
b=$work/b
write_config "$b"
systemd-socket-activate -l "$b/rdmad.sock" "$RDMAD" --config "$b/rdmad.toml" >"$b/rdmad.log" 2>&1 &
RDMAD_PID=$!
poll 10 test -S "$b/rdmad.sock" || fail "systemd-socket-activate made no socket: $(cat "$b/rdmad.log")"
inode=$(stat -c %i "$b/rdmad.sock")
python3 - "$b/rdmad.sock" <<'PY' || fail "could not connect to the stream socket"
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
PY
exited() { ! kill -0 "$RDMAD_PID" 2>/dev/null; }
poll 10 exited || fail "rdmad still runs on a stream socket: $(cat "$b/rdmad.log")"
rc=0
wait "$RDMAD_PID" || rc=$?
RDMAD_PID=
[ "$rc" -ne 0 ] || fail "rdmad started on a stream socket: $(cat "$b/rdmad.log")"
grep -q 'passed socket ignored.*stream socket' "$b/rdmad.log" || fail "no warning about the stream socket: $(cat "$b/rdmad.log")"
grep -q 'ListenSequentialPacket=' "$b/rdmad.log" || fail "the error does not say what the unit needs: $(cat "$b/rdmad.log")"
[ "$(stat -c %i "$b/rdmad.sock" 2>/dev/null)" = "$inode" ] || fail "rdmad deleted or replaced the stream socket"
echo "ok: a stream socket is refused (exit $rc) and left in place"
echo PASS
