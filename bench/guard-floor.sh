#!/usr/bin/env bash
# The guard's floor (docs/benchmarks.md, "The floor of notifying every write").
#
#   bash bench/guard-floor.sh [ROUNDS]     # default 7; needs gcc, tar, python3
#
# Extracts one tarball of 10,000 files in 600 directories (100 B - 8 KiB) on
# a tmpfs, alternating, per round:
#   plain         tar x, no jail, no filter
#   floor         tar x under bench/notify-floor.c: the guard's calls notified
#                 and answered CONTINUE at once, synchronous wake-up on
#   jail-noguard  oajail (release test-layers build) with OAJAIL_TEST_DISABLE=guard
#   jail-guard    the same jail with its guard
# and prints each round and the medians. floor/plain is what any design that
# sends every write-like call to a supervisor pays before deciding anything.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-7}
cargo build -q --release -p oajail --features test-layers --target-dir target/test-layers
oajail=$(pwd)/target/test-layers/release/oajail
work=$(mktemp -d /var/tmp/oajail-floor.XXXXXX)
trap 'umount -q "$work/fs" 2>/dev/null || true; rm -rf "$work"' EXIT
gcc -O2 -o "$work/floor" bench/notify-floor.c
python3 - "$work/src/pkg" <<'PY'
import os, random, sys
random.seed(1)
root = sys.argv[1]
for d in range(600):
    os.makedirs(f"{root}/d{d}", exist_ok=True)
for i in range(10000):
    with open(f"{root}/d{i % 600}/f{i}.js", "wb") as f:
        f.write(b"x" * random.randint(100, 8000))
PY
tar cf "$work/files.tar" -C "$work/src" pkg && rm -rf "$work/src"
mkdir -p "$work/fs" && mount -t tmpfs -o size=1g none "$work/fs"
mkdir -p "$work/fs/home"
echo '{"network": {"allowedDomains": [], "deniedDomains": []},
 "filesystem": {"denyRead": [], "allowWrite": ["."], "denyWrite": []}}' >"$work/fs/policy.json"
ms() { echo $(( ($2 - $1) / 1000000 )); }
for r in $(seq "$rounds"); do
  cd "$work/fs" && rm -rf a b c d && mkdir a b c d
  t0=$(date +%s%N); (cd a && tar xf "$work/files.tar")
  t1=$(date +%s%N); (cd b && SYNC=1 "$work/floor" tar xf "$work/files.tar" 2>/dev/null)
  t2=$(date +%s%N); (cd c && HOME=$work/fs/home OAJAIL_TEST_DISABLE=guard "$oajail" -s ../policy.json -- tar xf "$work/files.tar" 2>/dev/null)
  t3=$(date +%s%N); (cd d && HOME=$work/fs/home "$oajail" -s ../policy.json -- tar xf "$work/files.tar")
  t4=$(date +%s%N)
  echo "round $r: plain $(ms "$t0" "$t1") floor $(ms "$t1" "$t2") jail-noguard $(ms "$t2" "$t3") jail-guard $(ms "$t3" "$t4") ms"
done | tee "$work/rounds"
python3 - "$work/rounds" <<'PY'
import statistics, sys
cols = {}
for line in open(sys.argv[1]):
    parts = line.split(":")[1].split()
    for name, value in zip(parts[0::2], parts[1::2]):
        cols.setdefault(name, []).append(int(value))
med = {k: statistics.median(v) for k, v in cols.items()}
print("medians (ms):", ", ".join(f"{k} {v:.0f}" for k, v in med.items()))
print(f"floor/plain {med['floor'] / med['plain']:.2f}x, "
      f"jail-guard/jail-noguard {med['jail-guard'] / med['jail-noguard']:.2f}x")
PY
