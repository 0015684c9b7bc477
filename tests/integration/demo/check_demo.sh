#!/usr/bin/env bash
# Runs scripts/demo on 64 MiB with the binaries of BUILD_DIR and checks that it exits 0, that the
# transfer's last line is the verification line and that the per-NIC split names both of node-a's NICs.
#   check_demo.sh DEMO_SCRIPT BUILD_DIR
set -uo pipefail
demo=${1:?demo script}
build=${2:?build directory}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$demo" --bytes 64M --no-build --build-dir "$build" 2>&1 | tee "$out"
status=${PIPESTATUS[0]}
if [ "$status" -ne 0 ]; then
  echo "check_demo: scripts/demo exited with $status" >&2
  exit 1
fi
last=$(grep '^transfer: ' "$out" | grep -v '^transfer: .*%' | tail -n 1)
if [ "$last" != "transfer: verified 67108864 bytes byte-exact" ]; then
  echo "check_demo: the transfer did not end with the verification line (last: '$last')" >&2
  exit 1
fi
for nic in node-a0 node-a1; do
  if ! grep -q "^demo:   $nic " "$out"; then
    echo "check_demo: no per-NIC split line for $nic" >&2
    exit 1
  fi
done
echo "check_demo: ok"
