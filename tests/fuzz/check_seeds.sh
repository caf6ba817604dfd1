#!/usr/bin/env bash
# Usage: check_seeds.sh MEMLENS CORPUS_DIR. Fails unless every seed capture (seed-*) of the
# corpus is one this memlens reads whole: after a format change, run make_corpus.sh.
set -euo pipefail
memlens=$1 dir=$2 n=0
for seed in "$dir"/seed-*; do
  if ! MEMLENS_INDEX=0 "$memlens" summary --json "$seed" 2>/dev/null |
       python3 -c 'import json, sys; sys.exit(not json.load(sys.stdin)["capture"]["complete"])'; then
    echo "$seed is not a whole capture of this memlens's format: run tests/fuzz/make_corpus.sh" >&2
    MEMLENS_INDEX=0 "$memlens" summary "$seed" 2>&1 | head -5 >&2
    exit 1
  fi
  n=$((n + 1))
done
[ "$n" -gt 0 ] || { echo "no seed captures in $dir" >&2; exit 1; }
echo "$n seed captures are current"
