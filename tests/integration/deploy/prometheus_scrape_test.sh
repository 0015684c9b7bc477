#!/usr/bin/env bash
# A real Prometheus server (Debian's `prometheus`) on loopback scrapes a running rdmad:
# rdmad_build_info and rdmad_start_time_seconds come back through /api/v1/query with the values
# the daemon serves, the alert rules load, and `promtool check metrics` finds nothing to report
# on rdmad's /metrics.
. "$(dirname "$0")/lib.sh"
need prometheus prometheus
need promtool prometheus
need curl curl

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

start_rdmad "$work"
pids+=("$RDMAD_PID")
metrics=$(curl -fsS "http://127.0.0.1:$RDMAD_PORT/metrics") || fail "GET /metrics"
# The daemon runs its embedded soft NIC (no [[nic]] in the test's file), so the per-NIC families
# are linted too. One finding is by design: DCQCN rates are in bits per second, as link rates
# are (docs/operations.md, "Metric names"); promtool's linter knows only bytes. Anything else fails.
grep -q '^rdmad_dcqcn_rate_bits_per_second_bucket' <<<"$metrics" || fail "no DCQCN rate histogram: no NIC? daemon log: $(cat "$work/rdmad.log")"
lint=$(echo "$metrics" | promtool check metrics 2>&1 || true)
lint=$(echo "$lint" | grep -v '^rdmad_dcqcn_rate_bits_per_second use base unit "bytes" instead of "bits"$' || true)
[ -z "$lint" ] || fail "promtool check metrics reported: $lint"

cp "$RDMAD_SOURCE_DIR/deploy/prometheus/rdmad-alerts.yml" "$work/"
cat >"$work/prometheus.yml" <<YAML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [rdmad-alerts.yml]
scrape_configs:
  - job_name: rdmad
    static_configs:
      - targets: ['127.0.0.1:$RDMAD_PORT']
YAML
# Prometheus takes a fixed listen address: a port that was free a moment ago. A lost race
# (another process took it) shows as Prometheus exiting, and is retried with a new port.
for attempt in 1 2 3; do
  prom_port=$(free_port)
  prometheus --config.file="$work/prometheus.yml" --web.listen-address="127.0.0.1:$prom_port" \
    --storage.tsdb.path="$work/data-$attempt" --log.level=warn >"$work/prometheus.log" 2>&1 &
  prom_pid=$!
  api="http://127.0.0.1:$prom_port/api/v1"
  if poll 20 curl -fsS -o /dev/null "http://127.0.0.1:$prom_port/-/ready"; then break; fi
  kill "$prom_pid" 2>/dev/null || true; wait "$prom_pid" 2>/dev/null || true
  prom_pid=""
done
[ -n "$prom_pid" ] || fail "prometheus did not become ready: $(cat "$work/prometheus.log")"
pids+=("$prom_pid")

# query EXPR: prints the value of the single sample EXPR returns (nothing if none).
query() {
  curl -fsS -G "$api/query" --data-urlencode "query=$1" | python3 -c '
import json, sys
r = json.load(sys.stdin)["data"]["result"]
if len(r) == 1: print(r[0]["value"][1])'
}
scraped() { [ -n "$(query 'rdmad_build_info')" ]; }
poll 30 scraped || fail "no rdmad_build_info in Prometheus after 30 s: $(cat "$work/prometheus.log")"

[ "$(query 'up{job="rdmad"}')" = 1 ] || fail "up{job=rdmad} is not 1"
[ "$(query 'rdmad_build_info')" = 1 ] || fail "rdmad_build_info is not 1"
version=$("$RDMAD" --version | sed -n 's/^rdmad \([^ ]*\) .*/\1/p')
[ "$(query "rdmad_build_info{version=\"$version\"}")" = 1 ] || fail "no rdmad_build_info{version=$version}"
served=$(echo "$metrics" | sed -n 's/^rdmad_start_time_seconds \(.*\)$/\1/p')
got=$(query 'rdmad_start_time_seconds')
python3 -c "import sys; sys.exit(abs(float('$got') - float('$served')) > 1e-3)" ||
  fail "rdmad_start_time_seconds: Prometheus has '$got', the daemon serves '$served'"

rules=$(curl -fsS "$api/rules" | python3 -c '
import json, sys
groups = json.load(sys.stdin)["data"]["groups"]
print(" ".join(sorted(r["name"] for g in groups for r in g["rules"])))')
for alert in $(sed -n 's/^ *- alert: *//p' "$RDMAD_SOURCE_DIR/deploy/prometheus/rdmad-alerts.yml"); do
  [[ " $rules " == *" $alert "* ]] || fail "rule $alert not loaded by Prometheus (loaded: $rules)"
done
echo PASS
