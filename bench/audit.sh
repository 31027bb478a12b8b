#!/usr/bin/env bash
# Wall time of `oajail audit` over the whole catalogue for one policy, with
# the labs run serially (--jobs 1, the baseline) and in parallel (--jobs 4,
# --jobs 8), interleaved over ROUNDS rounds; prints every run and the
# medians. Usage: bench/audit.sh [POLICY] (default examples/policies/dev-shell.json);
# BIN=target/release/oajail to time another build (the probe and lab are
# taken from beside it).
set -euo pipefail
cd "$(dirname "$0")/.."
policy=${1:-examples/policies/dev-shell.json}
bin=${BIN:-target/debug/oajail}
rounds=${ROUNDS:-3}
declare -A times
for r in $(seq "$rounds"); do
  for jobs in 1 4 8; do
    start=$(date +%s.%N)
    "$bin" audit -s "$policy" --jobs "$jobs" --format json --out /dev/null 2>/var/tmp/oajail-bench-audit.err || true
    end=$(date +%s.%N)
    t=$(echo "$end - $start" | bc)
    times[$jobs]+="$t "
    printf 'round %s jobs %s: %.1f s (%s) load %s\n' "$r" "$jobs" "$t" "$(tail -1 /var/tmp/oajail-bench-audit.err)" "$(cut -d' ' -f1 /proc/loadavg)"
  done
done
for jobs in 1 4 8; do
  med=$(echo "${times[$jobs]}" | tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  printf 'median jobs %s: %.1f s\n' "$jobs" "$med"
done
