#!/usr/bin/env bash
# Every metric name the dashboard and alert rules may use (deploy/metrics.txt) is in a live scrape
# of a daemon that has each kind of subsystem: a hardware port from a sysfs fixture (its CC
# series), a soft NIC (port counters, DCQCN histograms), the client socket and flows ([peer]).
# Only the names are checked, not the values: a series that appears later (a histogram with no
# observation yet still exposes _count) must already be there. Then label_contract.py checks that
# every label an alert annotation or a dashboard legend names is on the series it reads.
. "$(dirname "$0")/lib.sh"
need curl curl

use_work_dir

# The peer channel needs credentials: a pre-shared key of this test's own.
head -c 32 /dev/urandom | base64 >"$work/peer.key"
chmod 600 "$work/peer.key"

RDMAD_DAEMON_KEYS="sysfs_root = \"$RDMAD_SOURCE_DIR/tests/data/sysfs/roce-vendor-ecn\"" start_rdmad "$work" "$(cat <<TOML
[peer]
enabled = true
node_id = "contract"
listen = "127.0.0.1:0"
key_file = "$work/peer.key"
[[nic]]
name = "rail0"
backend = "rdma_core"
device = "mlx5_0"
roce_priority = 5
[[nic]]
name = "soft0"
backend = "soft"
address = "127.0.0.1"
udp_port = 0
TOML
)"
port=$RDMAD_PORT

# One client request, so the per-request counters have a series.
rdmactl="$(dirname "$RDMAD")/../tools/rdmactl/rdmactl"
"$rdmactl" --socket "$RDMAD_SOCK" status >/dev/null || fail "rdmactl status against the daemon failed"

missing_names() {
  local body
  body=$(curl -fsS "http://127.0.0.1:$port/metrics") || return 1
  missing=()
  while read -r name; do
    [[ -z "$name" || "$name" == \#* ]] && continue
    # A histogram or summary shows as NAME_bucket / NAME_count; a counter as NAME (ending _total).
    grep -qE "^${name}(_bucket|_count)?[{ ]" <<<"$body" || missing+=("$name")
  done <"$RDMAD_SOURCE_DIR/deploy/metrics.txt"
  [ ${#missing[@]} -eq 0 ]
}
# Some series come from timers (DCQCN samples every second): give them a few seconds.
poll 10 missing_names || fail "deploy/metrics.txt names missing from a live scrape: ${missing[*]}"
echo "PASS: $(grep -cvE '^(#|$)' "$RDMAD_SOURCE_DIR/deploy/metrics.txt") contract names in a live scrape"

# And the labels the alert annotations and dashboard legends name are on those series.
curl -fsS "http://127.0.0.1:$port/metrics" >"$work/scrape.txt" || fail "scrape failed"
python3 "$(dirname "$0")/label_contract.py" "$work/scrape.txt" "$RDMAD_SOURCE_DIR/deploy/prometheus/rdmad-alerts.yml" \
  "$RDMAD_SOURCE_DIR/deploy/grafana/rdmad.json" || fail "alert or dashboard labels missing from the series"
