#!/usr/bin/env bash
# Create-guard cost (docs/benchmarks.md, section "Create-guard").
#
#   bash bench/guard.sh        # builds the release test-layers binary, then measures
#
# Inside one jail, a Python loop creates 10,000 files (open O_CREAT, write,
# close) and 2,000 directories (mkdir) in a fresh directory; the loop times
# itself, so jail start-up is not counted. Two places: the jail's /tmp (tmpfs:
# every creating call still goes through pid 1, only the decision differs,
# and disk latency does not drown the round trip) and the workspace (a real
# disk, guarded). Each round runs the
# loop once with the guard and once without it (OAJAIL_TEST_DISABLE=guard,
# the test-layers ablation switch), alternating; the summary gives the median
# per round of each, and the added time per guarded call.
# Needs: python3.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p oajail --features test-layers --target-dir target/test-layers >/dev/null
OAJAIL=$(pwd)/target/test-layers/release/oajail
work=$(mktemp -d /var/tmp/oajail-guard-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/home" "$work/proj"
cat >"$work/policy.json" <<'JSON'
{"network": {"allowedDomains": [], "deniedDomains": []},
 "filesystem": {"denyRead": [], "allowWrite": ["."], "denyWrite": []}}
JSON
cat >"$work/load.py" <<'PY'
import os, sys, time
d = sys.argv[1]
os.mkdir(d)
t = time.perf_counter()
for i in range(10000):
    with open(f"{d}/f{i}", "w") as f:
        f.write("x")
t_files = time.perf_counter() - t
t = time.perf_counter()
for i in range(2000):
    os.mkdir(f"{d}/d{i}")
t_dirs = time.perf_counter() - t
print(f"{t_files:.6f} {t_dirs:.6f}")
PY
cd "$work/proj"
export HOME="$work/home"
unset OAJAIL_SETTINGS
echo "machine: $(nproc) cpu, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), kernel $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
rounds=${ROUNDS:-7}
for where in /tmp "$work/proj"; do
: >"$work/on.txt"
: >"$work/off.txt"
for r in $(seq 1 "$rounds"); do
  "$OAJAIL" -s "$work/policy.json" -- python3 "$work/load.py" "$where/on$r" >>"$work/on.txt"
  OAJAIL_TEST_DISABLE=guard "$OAJAIL" -s "$work/policy.json" -- python3 "$work/load.py" "$where/off$r" \
    >>"$work/off.txt" 2>/dev/null
  rm -rf "$work/proj/on$r" "$work/proj/off$r"
done
echo "== in $where"
python3 - "$work/on.txt" "$work/off.txt" <<'PY'
import statistics, sys
def load(p):
    rows = [tuple(map(float, l.split())) for l in open(p) if l.strip()]
    return [r[0] for r in rows], [r[1] for r in rows]
on_f, on_d = load(sys.argv[1])
off_f, off_d = load(sys.argv[2])
med = statistics.median
print(f"rounds: {len(on_f)}")
for what, n, on, off in [("10,000 files", 10000, on_f, off_f), ("2,000 dirs", 2000, on_d, off_d)]:
    a, b = med(on), med(off)
    print(f"{what}: guard {a*1e3:.1f} ms, no guard {b*1e3:.1f} ms, ratio {a/b:.2f}, "
          f"added {(a-b)/n*1e6:.1f} us per call "
          f"(guard {min(on)*1e3:.1f}-{max(on)*1e3:.1f} ms, no guard {min(off)*1e3:.1f}-{max(off)*1e3:.1f} ms)")
PY
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
