# Helpers for the guest scripts that run rdmad on rxe (sourced; needs $build and $dir).
# Every wait polls with a deadline; nothing sleeps to let something happen.
run_dir=/tmp/rdmad
socket=$run_dir/run/rdmad.sock
metrics_url=http://127.0.0.1:9464/metrics

say() { echo "guest $guest: $*"; }

# Polls `cmd...` every 50 ms until it succeeds or `secs` pass.
wait_until() {
  local secs=$1
  shift
  local end=$((SECONDS + secs))
  while ((SECONDS < end)); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  "$@"
}

# The shared PSK: guest 0 writes 32 random bytes into the shared directory, every guest copies it
# to its own /tmp with mode 0600 (root owns it there: the daemon refuses anything else).
install_key() {
  mkdir -p "$run_dir/run"
  chmod 700 "$run_dir"
  if [ "$guest" = 0 ]; then
    head -c 32 /dev/urandom >"$dir/peer.key.tmp" && mv "$dir/peer.key.tmp" "$dir/peer.key" || return 1
  fi
  wait_until 60 test -s "$dir/peer.key" || { say "no peer key in $dir"; return 1; }
  install -m 0600 "$dir/peer.key" "$run_dir/peer.key"
}

# write_config NODE_ID [extra TOML]: two rdma_core NICs (rxe0, rxe1), the peer channel on rail 0;
# guest 0 dials guest 1.
write_config() {
  local me=$1 extra=$2
  {
    cat <<EOF
[daemon]
runtime_dir = "$run_dir/run"
socket_path = "$socket"
log_level = "debug"
nic_poll_interval_ms = 1000
[metrics]
listen = "127.0.0.1:9464"
[peer]
enabled = true
node_id = "$me"
listen = "10.1.0.$((guest + 1)):18515"
key_file = "$run_dir/peer.key"
keepalive_interval_ms = 2000
keepalive_misses = 5
reconnect_min_ms = 100
reconnect_max_ms = 1000
[flow]
chunk_bytes = 65536
rejoin_backoff_min_ms = 100
rejoin_backoff_max_ms = 1000
[[nic]]
name = "rail0"
backend = "rdma_core"
device = "rxe0"
[[nic]]
name = "rail1"
backend = "rdma_core"
device = "rxe1"
EOF
    if [ "$guest" = 0 ]; then
      printf '[[peers]]\nnode_id = "vm1"\naddress = "10.1.0.2:18515"\n'
    fi
    printf '%s\n' "$extra"
  } >"$run_dir/rdmad.toml"
}

start_daemon() {
  "$build/daemon/rdmad" --config "$run_dir/rdmad.toml" >"$run_dir/rdmad.log" 2>&1 &
  daemon_pid=$!
  if ! wait_until 60 grep -q '\] ready' "$run_dir/rdmad.log"; then
    say "rdmad did not start"
    cat "$run_dir/rdmad.log"
    return 1
  fi
}

stop_daemon() {
  [ -n "$daemon_pid" ] || return 0
  kill -TERM "$daemon_pid"
  wait "$daemon_pid"
  local rc=$?
  daemon_pid=
  [ $rc = 0 ] || say "rdmad exited with $rc"
  return $rc
}

# metric 'NAME' 'LABEL="value"': the value of the first series of NAME whose labels contain the
# given one (empty when none).
metric() {
  curl -s "$metrics_url" | awk -v name="$1" -v label="$2" '
    index($0, name "{") == 1 && (label == "" || index($0, label) > 0) { print $NF; exit }
    $1 == name && label == "" { print $2; exit }'
}

# metric_at_least NAME LABEL MIN
metric_at_least() {
  local v
  v=$(metric "$1" "$2")
  [ -n "$v" ] && awk -v v="$v" -v m="$3" 'BEGIN { exit !(v + 0 >= m + 0) }'
}

port_active() { ibv_devinfo -d "$1" | grep -q PORT_ACTIVE; }

dump_log() {
  say "----- rdmad log (last 150 lines) -----"
  tail -n 150 "$run_dir/rdmad.log"
}
