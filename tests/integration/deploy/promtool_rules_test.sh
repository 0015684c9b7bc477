#!/usr/bin/env bash
# The alert rules are valid (`promtool check rules`) and behave as their unit tests say
# (`promtool test rules`: input series -> expected alerts with labels and annotations).
. "$(dirname "$0")/lib.sh"
need promtool prometheus
cd "$RDMAD_SOURCE_DIR/deploy/prometheus"
promtool check rules rdmad-alerts.yml || fail "promtool check rules"
promtool check config prometheus.yml || fail "promtool check config (example scrape config)"
promtool test rules tests/rdmad-alerts.test.yml || fail "promtool test rules"
echo PASS
