#!/usr/bin/env bash
# The alert rules are valid (`promtool check rules`) and behave as their unit tests say
# (`promtool test rules`: input series -> expected alerts with labels and annotations).
. "$(dirname "$0")/lib.sh"
need promtool prometheus
cd "$RDMAD_SOURCE_DIR/deploy/prometheus"
promtool check rules rdmad-alerts.yml || fail "promtool check rules"
promtool check config prometheus.yml || fail "promtool check config (example scrape config)"
promtool test rules tests/rdmad-alerts.test.yml || fail "promtool test rules"
# Every alert links its runbook, and the runbook (docs/operations.md, "Responding to alerts") has
# a row for it.
alerts=$(sed -n 's/^ *- alert: *//p' rdmad-alerts.yml)
[ -n "$alerts" ] || fail "no alerts in rdmad-alerts.yml"
urls=$(grep -c 'runbook_url: "file:///usr/share/doc/rdmad/operations.md#responding-to-alerts"' rdmad-alerts.yml)
[ "$urls" -eq "$(echo "$alerts" | wc -l)" ] || fail "$urls runbook_url annotations for $(echo "$alerts" | wc -l) alerts"
for a in $alerts; do
  grep -q "^| \`$a\` (" "$RDMAD_SOURCE_DIR/docs/operations.md" || fail "docs/operations.md has no row for alert $a"
done
echo PASS
