#!/usr/bin/env bash
# Host side of the systemd guest test (rdmad_vm.py --host-cmd, inside the tap namespace): a real
# Prometheus scrapes the guest's rdmad at TARGET (host:port) once the guest says it serves
# ($RDMAD_VM_OUT/guest-serving), and the findings go to $RDMAD_VM_OUT/prometheus-done ("ok ..."
# on the first line when the target is up and rdmad's series are stored). Polls with deadlines.
# Usage: prometheus_scrape.sh TARGET
set -euo pipefail
target=$1
out=${RDMAD_VM_OUT:?}
work=$(mktemp -d)
prom=""
trap '[ -z "$prom" ] || kill "$prom" 2>/dev/null || true; rm -rf "$work"' EXIT
done_file() { printf '%s\n' "$@" >"$out/prometheus-done.tmp" && mv "$out/prometheus-done.tmp" "$out/prometheus-done"; }
end=$((SECONDS + 240))
until [ -e "$out/guest-serving" ]; do
  [ $SECONDS -lt $end ] || { echo "the guest never served"; exit 1; }
  sleep 0.2
done
cat >"$work/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  scrape_timeout: 900ms
scrape_configs:
  - job_name: rdmad
    static_configs:
      - targets: ["$target"]
YML
port=19090
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/data" \
  --web.listen-address="127.0.0.1:$port" >"$work/prometheus.log" 2>&1 &
prom=$!
t0=$SECONDS
query() { curl -fsS "http://127.0.0.1:$port/api/v1/query" --data-urlencode "query=$1"; }
end=$((SECONDS + 120))
up="" info=""
while [ $SECONDS -lt $end ]; do
  up=$(query 'up{job="rdmad"}' 2>/dev/null || true)
  info=$(query 'rdmad_thread_stalled{job="rdmad"}' 2>/dev/null || true)
  if [[ $up == *'"value":['*',"1"]'* ]] && [[ $info == *'datapath:rail0'* ]]; then
    done_file "ok: up{job=\"rdmad\"} 1 for $target after $((SECONDS - t0)) s, rdmad_thread_stalled stored" "$up" "$info"
    echo "PASS: $(head -1 "$out/prometheus-done")"
    exit 0
  fi
  sleep 0.5
done
done_file "failed: no successful scrape of $target in 120 s" "$up" "$info" "$(tail -20 "$work/prometheus.log")"
cat "$out/prometheus-done"
exit 1
