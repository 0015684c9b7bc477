#!/usr/bin/env bash
# The committed seed files of a fuzz corpus are what its generator writes now: runs GENERATOR into
# a temporary directory and compares every file it writes with CORPUS_DIR/<same name>. Fails when
# an encoder changed (a wire format, a protocol version) and the seeds were not regenerated, or a
# seed is missing. Files libFuzzer added (named by their SHA-1) are not the generator's and are
# not compared. Usage: check_seeds.sh GENERATOR CORPUS_DIR
set -euo pipefail
gen=$1
corpus=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$gen" "$work"
count=0
stale=()
for f in "$work"/*; do
  name=$(basename "$f")
  count=$((count + 1))
  if ! cmp -s "$f" "$corpus/$name"; then
    stale+=("$name")
  fi
done
if ((count == 0)); then
  echo "FAIL: $gen wrote no seeds"
  exit 1
fi
if ((${#stale[@]} > 0)); then
  echo "FAIL: ${#stale[@]} of $count seeds in $corpus differ from what $(basename "$gen") writes now (or are missing): ${stale[*]}"
  echo "regenerate them: $(basename "$gen") $corpus (see the corpus README)"
  exit 1
fi
echo "PASS: $count seeds in $corpus are current"
