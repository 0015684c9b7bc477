# Shared helpers of the deploy tests (sourced). A test exits 0 (pass), 1 (fail) or 77 (skipped,
# with the reason on stdout; ctest shows it through SKIP_RETURN_CODE).
set -euo pipefail
# With pipefail, `echo "$text" | grep -q X` fails now and then although X is there: grep exits at
# the first match, and a writer still writing gets SIGPIPE (about 1 in 600 for a 12 kB /metrics
# body). Match against a here-string (`grep -q X <<<"$text"`) or let sed quit (`sed -n '...p;T;q'`).

fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIPPED: $*"; exit 77; }
need() { command -v "$1" >/dev/null 2>&1 || skip "$1 not installed (Debian package $2)"; }

# free_port: a TCP port on 127.0.0.1 that was free a moment ago (bind port 0, read, close).
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# poll DEADLINE_S CMD...: runs CMD until it succeeds or the deadline passes.
poll() {
  local deadline=$(($(date +%s) + $1)); shift
  until "$@"; do
    [ "$(date +%s)" -lt "$deadline" ] || return 1
    sleep 0.1
  done
}

# use_work_dir: a temporary directory in $work, removed at exit, after stopping the daemon that
# start_rdmad started (if any).
use_work_dir() {
  work=$(mktemp -d)
  trap 'if [ -n "${RDMAD_PID:-}" ]; then kill "$RDMAD_PID" 2>/dev/null || true; wait "$RDMAD_PID" 2>/dev/null || true; fi; rm -rf "$work"' EXIT
}

# start_rdmad CONFIG_DIR [EXTRA_TOML] [RDMAD_BINARY]: starts rdmad on a config in CONFIG_DIR
# (runtime directory and socket under CONFIG_DIR/run, metrics on 127.0.0.1:0, then EXTRA_TOML:
# [[nic]] tables, [peer], ...), waits until it is ready, and sets RDMAD_PID, RDMAD_PORT (from
# the "serving metrics url=" line) and RDMAD_SOCK. More [daemon] keys: RDMAD_DAEMON_KEYS=... start_rdmad.
start_rdmad() {
  local dir=$1 extra=${2:-} bin=${3:-$RDMAD}
  mkdir -p "$dir/run"
  cat >"$dir/rdmad.toml" <<TOML
[daemon]
runtime_dir = "$dir/run"
socket_path = "$dir/run/rdmad.sock"
${RDMAD_DAEMON_KEYS:-}
[metrics]
listen = "127.0.0.1:0"
$extra
TOML
  "$bin" --config "$dir/rdmad.toml" >"$dir/rdmad.log" 2>&1 &
  RDMAD_PID=$!
  RDMAD_SOCK="$dir/run/rdmad.sock"
  poll 10 grep -q '\] ready' "$dir/rdmad.log" || fail "rdmad did not start: $(cat "$dir/rdmad.log")"
  RDMAD_PORT=$(sed -n 's|.*serving metrics url=http://127.0.0.1:\([0-9]*\)/metrics.*|\1|p;T;q' "$dir/rdmad.log")
}

# debootstrap_cached ROOT MIRROR LOG [debootstrap options...]: a Debian 12 (bookworm) root at ROOT,
# built once with `debootstrap --variant=minbase [options] bookworm` (ROOT/.rdmad-complete holds
# the options: a half-built root, or one built with other options, is redone); skips, with the
# reason, when the mirror cannot be reached. The caller holds the cache's lock.
debootstrap_cached() {
  local root=$1 mirror=$2 log=$3
  shift 3
  # Complete only when the marker exists: with no extra packages ($* empty) a missing marker
  # would read as the same empty list.
  [ ! -f "$root/.rdmad-complete" ] || [ "$(cat "$root/.rdmad-complete")" != "$*" ] || return 0
  rm -rf "$root.tmp"
  if ! debootstrap --variant=minbase "$@" bookworm "$root.tmp" "$mirror" >"$log" 2>&1; then
    rm -rf "$root.tmp"
    # A package the caller named that the mirror does not have is the test's error, not the network's.
    ! grep -q "Couldn't find these debs" "$log" || fail "debootstrap: $(grep "Couldn't find these debs" "$log")"
    skip "debootstrap bookworm from $mirror failed (no mirror reachable?): $(tail -3 "$log")"
  fi
  rm -rf "$root"
  mv "$root.tmp" "$root"
  echo "$*" >"$root/.rdmad-complete"
}
