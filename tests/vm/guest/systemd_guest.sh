#!/bin/bash
# Runs in the systemd guest (tests/vm/systemd_guest_test.sh), from the unit rdmad-vm-test.service,
# as root, after boot: the project's .debs are installed; the host's root is at /host (read-only),
# the share with the host command at /mnt. Checks rdmad under a real systemd, one phase each:
# socket activation, Type=notify, reload, the hardened unit with a soft NIC, Prometheus on the host
# scraping the guest, journald's priorities and fields, a restart that keeps a client's
# registration, a restart in the middle of a transfer that keeps the flow, and the watchdog
# killing and restarting a stalled daemon. Prints "report: ..." lines (shown on a pass too),
# writes RDMAD-VM-EXIT=<code> to the console and powers off.
# Every wait polls with a deadline; nothing sleeps to let something happen.
# Usage (by the unit): systemd_guest.sh GUEST_INDEX BUILD_DIR
exec >/dev/ttyS0 2>&1
guest=$1
build=$2
boot_s=$(cut -d' ' -f1 /proc/uptime)
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
addr=10.200.0.1
metrics=$addr:9842
t_start=$SECONDS

. "$(dirname "$0")/daemon_lib.sh"  # wait_until
say() { echo "systemd-guest: $*"; }
report() { echo "report: $*"; }
finish() {
  echo "RDMAD-VM-EXIT=$1"
  sync
  systemctl poweroff -ff
  sleep 30
}

# GET /metrics from the daemon, with bash's /dev/tcp (no curl in the root).
scrape() {
  local body
  exec 3<>"/dev/tcp/${metrics%:*}/${metrics#*:}" || return 1
  printf 'GET /metrics HTTP/1.0\r\nHost: %s\r\n\r\n' "$metrics" >&3
  body=$(cat <&3)
  exec 3<&-
  printf '%s\n' "$body"
}
# The value of one series (the whole line up to the value, e.g. 'rdmad_config_reloads_total{result="ok"}').
metric() { scrape | grep -F "$1 " | grep -v '^#' | head -1 | awk '{print $NF}'; }
metric_is() { [ "$(metric "$1")" = "$2" ]; }

prop() { systemctl show -p "$2" --value "$1"; }
prop_is() { [ "$(prop "$1" "$2")" = "$3" ]; }
# The property's value (a space-separated list) names $3 among others.
prop_lists() { case " $(prop "$1" "$2") " in *" $3 "*) return 0 ;; *) return 1 ;; esac; }
journal_has() { journalctl -u rdmad --no-pager -o cat | grep -q -- "$1"; }

diagnose() {
  say "----- systemctl status rdmad.socket rdmad.service -----"
  systemctl --no-pager status rdmad.socket rdmad.service
  say "----- journalctl -u rdmad (last 60) -----"
  journalctl --no-pager -u rdmad -u rdmad.socket -n 60
}

phase_network() {
  ip link set lo up && ip link set eth1 up && ip addr add "$addr/24" dev eth1 || return 1
  cat >/etc/rdmad/rdmad.toml <<EOF
# tests/vm/guest/systemd_guest.sh: the packaged defaults, metrics on the tap NIC, one soft NIC.
[daemon]
log_level = "info"
[metrics]
listen = "$metrics"
[[nic]]
name = "rail0"
backend = "soft"
address = "$addr"
EOF
  rdmad --check-config /etc/rdmad/rdmad.toml
}

# 1. Socket activation: systemd holds the SOCK_SEQPACKET socket; a client's connection starts the
#    service, which adopts the socket instead of binding its own.
phase_socket_activation() {
  systemctl start rdmad.socket rdmad-admin.socket || return 1
  [ "$(stat -c '%a %U' /run/rdmad-admin/admin.sock)" = "600 rdmad" ] ||
    { say "rdmad-admin.socket made no 0600 rdmad /run/rdmad-admin/admin.sock"; return 1; }
  [ "$(systemctl is-active rdmad.service)" != active ] || { say "rdmad.service active before any client"; return 1; }
  [ -S /run/rdmad/rdmad.sock ] || { say "rdmad.socket made no /run/rdmad/rdmad.sock"; return 1; }
  local t0=$SECONDS out
  # The first client's connection starts the service. Its hello waits for the daemon's start
  # (ExecStartPre's check, then start-up: ~3 s under TCG), longer than the library's 2 s default
  # but within rdmactl's 10 s (--connect-timeout): the first command is answered.
  out=$(rdmactl status 2>&1) || { say "the first client, which started the service, was not answered: $out"; return 1; }
  local first="answered in $((SECONDS - t0)) s"
  wait_until 30 prop_is rdmad.service ActiveState active || { say "rdmad.service not active after a client connected"; return 1; }
  # Both sockets trigger it: the client socket (this connection) and the admin socket.
  prop_lists rdmad.service TriggeredBy rdmad.socket || { say "rdmad.service not triggered by rdmad.socket"; return 1; }
  prop_lists rdmad.service TriggeredBy rdmad-admin.socket || { say "rdmad.service not triggered by rdmad-admin.socket"; return 1; }
  out=$(rdmactl status 2>&1) || { say "rdmactl status through the systemd socket failed: $out"; return 1; }
  echo "$out"
  journal_has 'serving clients socket=/run/rdmad/rdmad.sock activation=systemd' ||
    { say "the daemon did not adopt systemd's socket"; return 1; }
  journal_has 'serving admin requests socket=/run/rdmad-admin/admin.sock activation=systemd' ||
    { say "the daemon did not adopt systemd's admin socket"; return 1; }
  rdmactl registrations >/dev/null || { say "rdmactl registrations through the admin socket failed"; return 1; }
  ! journal_has 'passed socket ignored' || { say "the daemon ignored a passed socket"; return 1; }
  report "socket activation: a connection started rdmad.service, active in $((SECONDS - t0)) s; first client $first"
}

# 2. Type=notify: READY=1 made the unit active (running), with the daemon's STATUS= text.
phase_notify() {
  prop_is rdmad.service Type notify && prop_is rdmad.service ActiveState active &&
    prop_is rdmad.service SubState running || return 1
  local status
  status=$(prop rdmad.service StatusText)
  [[ $status == "serving metrics at http://$metrics"* ]] || { say "StatusText is '$status'"; return 1; }
  report "notify: active (running), status \"$status\""
}

# 3. systemctl reload: ExecReload checks the file, then SIGHUP; the daemon counts the reload.
phase_reload() {
  wait_until 20 metric_is 'rdmad_config_reloads_total{result="ok"}' 0 || return 1
  systemctl reload rdmad || return 1
  wait_until 20 metric_is 'rdmad_config_reloads_total{result="ok"}' 1 || return 1
  prop_is rdmad.service ActiveState active || return 1
  report "reload: counted (rdmad_config_reloads_total{result=\"ok\"} 1)"
}

# 4. The unit as shipped (user rdmad, two capabilities, the syscall filter) runs a soft NIC: its
#    datapath started (sockets with forced buffers, a thread), the NIC is listed, nothing was
#    refused by the filter.
phase_hardening() {
  prop_is rdmad.service User rdmad || return 1
  local pid caps
  pid=$(prop rdmad.service MainPID)
  [ "$(stat -c %U "/proc/$pid")" = rdmad ] || { say "rdmad runs as $(stat -c %U "/proc/$pid")"; return 1; }
  caps=$(grep CapEff "/proc/$pid/status" | awk '{print $2}')
  # CAP_NET_ADMIN (12) and CAP_IPC_LOCK (14), nothing else.
  [ "$caps" = 0000000000005000 ] || { say "CapEff $caps, expected 0000000000005000"; return 1; }
  [ "$(prop rdmad.service SystemCallFilter | wc -w)" -gt 10 ] || { say "no syscall filter on the unit"; return 1; }
  rdmactl nics | tee /dev/stderr | grep -q rail0 || { say "rdmactl nics does not list rail0"; return 1; }
  wait_until 10 metric_is 'rdmad_thread_stalled{thread="datapath:rail0"}' 0 || return 1
  if journalctl --no-pager -u rdmad -p err -o cat | grep -q .; then
    say "errors in the daemon's journal:"
    journalctl --no-pager -u rdmad -p err
    return 1
  fi
  # A call the filter refused with EPERM leaves no kernel record; one it killed for would (audit
  # type=1326 SECCOMP with comm="rdmad"). The daemon's own errors (above) cover the EPERMs.
  if journalctl --no-pager -k -o cat | grep -i 'seccomp' | grep -q 'comm="rdmad'; then
    say "the syscall filter stopped the daemon:"
    journalctl --no-pager -k -o cat | grep -i seccomp | grep 'comm="rdmad'
    return 1
  fi
  report "hardening: user rdmad, CapEff $caps, $(prop rdmad.service SystemCallFilter | wc -w) filter words, soft NIC rail0 up"
}

# 5. Prometheus on the host scrapes the guest (tests/vm/host/prometheus_scrape.sh writes its
#    findings into the share when it has seen the target up).
phase_prometheus() {
  [ -d /mnt ] && mountpoint -q /mnt || { say "no share with the host at /mnt"; return 1; }
  touch /mnt/guest-serving
  wait_until 90 test -e /mnt/prometheus-done || { say "the host's Prometheus reported nothing"; return 1; }
  cat /mnt/prometheus-done
  grep -q '^ok' /mnt/prometheus-done || return 1
  report "prometheus: $(head -1 /mnt/prometheus-done)"
}

# 6. journald: each line carries its priority (<N> on stderr, JOURNAL_STREAM) and journald's
#    fields; the daemon's warnings and errors are found by priority (checked again in the watchdog
#    phase, which makes a warning and an error).
phase_journal() {
  local json
  json=$(journalctl -o json -u rdmad --no-pager)
  echo "$json" | grep -F '"MESSAGE":"[daemon] ready"' | grep -q '"PRIORITY":"6"' ||
    { say "no 'ready' at priority 6 (info) in journalctl -o json"; echo "$json" | tail -3; return 1; }
  for field in _SYSTEMD_UNIT SYSLOG_IDENTIFIER _PID _COMM _TRANSPORT; do
    echo "$json" | grep -F '[daemon] ready' | grep -q "\"$field\":" || { say "no $field in the journal entries"; return 1; }
  done
  echo "$json" | grep -F '[daemon] ready' | grep -q '"_SYSTEMD_UNIT":"rdmad.service"' || return 1
  # Native journal entries: the component and every key=value of the line as RDMAD_* fields.
  echo "$json" | grep -F '[daemon] ready' | grep -q '"RDMAD_COMPONENT":"daemon"' ||
    { say "no RDMAD_COMPONENT in the journal entries"; return 1; }
  echo "$json" | grep -F '[verbs] nic port' | grep -q '"RDMAD_NIC":"rail0"' ||
    { say "no RDMAD_NIC=rail0 field on the nic port line"; echo "$json" | grep -F 'nic port' | tail -1; return 1; }
  journalctl -u rdmad --no-pager -o cat RDMAD_NIC=rail0 | grep -q 'nic port' ||
    { say "journalctl RDMAD_NIC=rail0 finds no line"; return 1; }
  report "journal: PRIORITY per line, fields _SYSTEMD_UNIT _PID _COMM SYSLOG_IDENTIFIER _TRANSPORT, RDMAD_COMPONENT, RDMAD_NIC=rail0 (journalctl RDMAD_NIC=rail0 finds its lines)"
}

# 7. `systemctl restart rdmad` keeps a connected client's registration (systemd's fd store,
#    FileDescriptorStoreMax= in the unit, and the state file in the preserved runtime directory):
#    the client (tests/vm/vm_session_client.cc) registers 4 MiB, the daemon restarts under systemd,
#    and the client's next call takes its session back: same handle, not lost, memory intact.
#    A transfer across the restart is phase 8's; both sides of a flow restarting are the
#    integration test's (tests/integration/flow/restart_test.cc, under rdmad-supervise).
phase_restart_keeps_registrations() {
  local client=/host$build/tests/vm/vm_session_client flag=/tmp/restart-flag out=/tmp/session-client.out
  rm -f "$flag"
  "$client" /run/rdmad/rdmad.sock "$flag" >"$out" 2>&1 &
  local pid=$!
  wait_until 30 grep -q "session registered" "$out" || { say "the client did not register: $(cat "$out")"; return 1; }
  local before t0 t1 rc
  before=$(prop rdmad.service MainPID)
  t0=$(date +%s%N)
  systemctl restart rdmad || { say "systemctl restart rdmad failed"; return 1; }
  t1=$(date +%s%N)
  [ "$(prop rdmad.service MainPID)" != "$before" ] || { say "the restart did not start a new process"; return 1; }
  journal_has "sessions restored sessions=1 handles=1 of=1" ||
    { say "the restarted daemon did not restore the session"; journalctl -u rdmad --no-pager -o cat | tail -5; return 1; }
  touch "$flag"
  wait "$pid" && rc=0 || rc=$?
  cat "$out"
  [ "$rc" = 0 ] || { say "the client's session did not survive systemctl restart"; return 1; }
  report "restart keeps registrations: systemctl restart rdmad in $(( (t1 - t0) / 1000000 )) ms; $(grep -o 'handle=.*' "$out" | tail -1)"
}

# 8. `systemctl restart rdmad` mid-way through a transfer loop: rdmad.service (node a) gets a peer
#    channel, a second rdmad (node b, as root, its own socket and runtime directory) runs beside
#    it, and one client of both (tests/vm/vm_restart_client.cc) WRITEs 8 MiB from a to b, pass
#    after pass, through one flow. The test restarts rdmad.service while it writes; the client
#    retries what failed on the same flow and remote (the library rebinds the flow to the new
#    daemon), finishes byte-exact, and a's registration keeps its handle.
phase_restart_mid_transfer() {
  local key=/etc/rdmad/peer.key bdir=/run/rdmad-b mark=/tmp/restart-mark out=/tmp/restart-client.out
  local client=/host$build/tests/vm/vm_restart_client
  cp /etc/rdmad/rdmad.toml /tmp/rdmad.toml.before
  mkdir -p "$bdir/run"
  head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$bdir/peer.key"
  chmod 0600 "$bdir/peer.key"
  install -m 0600 -o rdmad -g rdmad "$bdir/peer.key" "$key"
  cat >>/etc/rdmad/rdmad.toml <<EOF
[peer]
enabled = true
node_id = "a"
listen = "$addr:18515"
key_file = "$key"
EOF
  cat >"$bdir/rdmad.toml" <<EOF
# tests/vm/guest/systemd_guest.sh: node b, beside rdmad.service, dialling it.
[daemon]
runtime_dir = "$bdir/run"
socket_path = "$bdir/run/rdmad.sock"
[metrics]
listen = "127.0.0.1:9843"
[peer]
enabled = true
node_id = "b"
listen = "$addr:18516"
key_file = "$bdir/peer.key"
reconnect_min_ms = 50
reconnect_max_ms = 200
[[peers]]
node_id = "a"
address = "$addr:18515"
[[nic]]
name = "b0"
backend = "soft"
address = "$addr"
udp_port = 4795
EOF
  # (b runs as root with a root-owned key; --check-config judges files as the service's user, rdmad.)
  rdmad --check-config /etc/rdmad/rdmad.toml >/dev/null || { say "node a's config does not check"; return 1; }
  systemctl restart rdmad || { say "rdmad.service did not start with a peer channel"; return 1; }
  rdmad --config "$bdir/rdmad.toml" >"$bdir/log" 2>&1 &
  local bpid=$!
  wait_until 60 test -S "$bdir/run/rdmad.sock" || { say "node b did not start: $(tail -5 "$bdir/log")"; return 1; }
  wait_until 60 bash -c "rdmactl peers 2>/dev/null | grep -w b | grep -qw ready" ||
    { say "node a never connected to node b: $(rdmactl peers 2>&1; tail -5 "$bdir/log")"; kill "$bpid"; return 1; }
  rm -f "$mark"
  "$client" /run/rdmad/rdmad.sock "$bdir/run/rdmad.sock" "$mark" >"$out" 2>&1 &
  local cpid=$! t0 t1 rc=0
  wait_until 60 test -e "$mark" || { say "the client never began its loop: $(cat "$out")"; kill "$bpid" "$cpid"; return 1; }
  t0=$(date +%s%N)
  systemctl restart rdmad || { say "systemctl restart rdmad failed"; rc=1; }
  t1=$(date +%s%N)
  wait "$cpid" || rc=1
  cat "$out"
  kill "$bpid"
  wait "$bpid"
  cp /tmp/rdmad.toml.before /etc/rdmad/rdmad.toml
  [ "$rc" = 0 ] || { say "the transfer did not survive systemctl restart rdmad"; tail -20 "$bdir/log"; return 1; }
  report "restart mid-transfer: systemctl restart rdmad took $(( (t1 - t0) / 1000000 )) ms; $(grep -o 'first failure.*' "$out" | head -1)"
}

# 9. The watchdog: with --enable-test-hooks and a short WatchdogSec= (a drop-in), a stalled
#    datapath stops the pings; systemd kills the daemon (SIGABRT) and restarts it.
phase_watchdog() {
  mkdir -p /etc/systemd/system/rdmad.service.d
  cat >/etc/systemd/system/rdmad.service.d/test-hooks.conf <<'EOF'
[Service]
ExecStart=
ExecStart=/usr/sbin/rdmad --config /etc/rdmad/rdmad.toml --enable-test-hooks
WatchdogSec=6s
EOF
  systemctl daemon-reload && systemctl restart rdmad || return 1
  wait_until 30 prop_is rdmad.service SubState running || return 1
  prop_is rdmad.service WatchdogUSec 6s || { say "WatchdogUSec is $(prop rdmad.service WatchdogUSec)"; return 1; }
  journal_has 'test hooks enabled' || { say "no warning about the test hooks"; return 1; }
  local restarts pid t0
  restarts=$(prop rdmad.service NRestarts)
  pid=$(prop rdmad.service MainPID)
  t0=$SECONDS
  rdmactl debug stall datapath:rail0 120 || return 1
  wait_until 60 journal_has 'thread stalled thread=datapath:rail0' || return 1
  wait_until 60 prop_is rdmad.service NRestarts $((restarts + 1)) || return 1
  local killed=$((SECONDS - t0))
  wait_until 60 prop_is rdmad.service SubState running || return 1
  [ "$(prop rdmad.service MainPID)" != "$pid" ] || { say "same MainPID after the restart"; return 1; }
  journalctl --no-pager -u rdmad -o cat | grep -q 'Watchdog timeout' || { say "no 'Watchdog timeout' in the journal"; return 1; }
  local json
  json=$(journalctl -o json -u rdmad --no-pager)
  echo "$json" | grep -F 'thread stalled thread=datapath:rail0' | grep -q '"PRIORITY":"3"' ||
    { say "the stall is not logged at priority 3 (err)"; return 1; }
  echo "$json" | grep -F 'test hooks enabled' | grep -q '"PRIORITY":"4"' ||
    { say "the test-hook warning is not at priority 4 (warning)"; return 1; }
  journalctl --no-pager -u rdmad -p err -o cat | grep -q 'thread stalled' ||
    { say "journalctl -p err does not show the stall"; return 1; }
  rdmactl status >/dev/null || { say "the restarted daemon does not serve"; return 1; }
  report "watchdog: stall to restart in ${killed} s (WatchdogSec=6s), NRestarts $restarts -> $((restarts + 1)), 'Watchdog timeout' in the journal"
}

say "up in ${boot_s} s (kernel start to the test unit), build $build"
report "boot: ${boot_s} s from kernel start to the test unit"
rc=0
for phase in network socket_activation notify reload hardening prometheus journal restart_keeps_registrations \
  restart_mid_transfer watchdog; do
  t=$SECONDS
  if ! "phase_$phase"; then
    say "FAIL: phase $phase"
    diagnose
    rc=1
    break
  fi
  say "phase $phase passed in $((SECONDS - t)) s"
done
report "phases: $((SECONDS - t_start)) s after boot"
finish $rc
