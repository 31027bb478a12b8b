#!/usr/bin/env bash
# What seeing refusals costs (docs/benchmarks.md, "Refusal reporting").
#
#   bash bench/desk.sh                 # release build of this tree, then measures
#   RUNS=20 bash bench/desk.sh
#   BASELINE=/path/to/oajail bash bench/desk.sh   # also: writes, against another build
#
# The read watch (--watch-reads) against the same binary without it, same
# run, alternating round by round, on:
#   1. oajail -- /bin/true (start-up);
#   2. tar x of 10,000 files in 600 directories (the guard's workload);
#   3. reading 10,000 files (cat of each: 10,000 opens for reading);
#   4. python3 -c 'import json, email.parser, http.client, asyncio, decimal'
#      (a start-up that opens a few hundred files).
# With BASELINE (an oajail built from another commit, e.g. main before the
# reporting), the same workloads without --watch-reads against it: what
# reporting writes costs on calls that are not refused.
# The workspace lives under /var/tmp (the jail's /tmp is private).
# Needs: python3, tar.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-15}
cargo build -q --release -p oajail
OAJAIL=$(pwd)/target/release/oajail
work=$(mktemp -d /var/tmp/oajail-desk-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/proj"
cat >"$work/policy.json" <<'JSON'
{"network": {"allowedDomains": [], "deniedDomains": []},
 "filesystem": {"denyRead": ["~/.ssh"], "allowWrite": ["."], "denyWrite": []}}
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
tar cf "$work/t10k.tar" -C "$work/src" pkg
cd "$work/proj"
export HOME="$work"
# Each round runs every variant once, in turn (a load change between
# rounds moves all of them); the summary gives each variant's median and
# the median of the per-round ratios to "plain".
measure() { # name, command
  python3 - "$1" "$2" "$runs" "$work/policy.json" "$OAJAIL" "${BASELINE:-}" <<'PY'
import shlex, statistics, subprocess, sys, time
name, cmd, runs, policy, oajail, baseline = sys.argv[1:7]
variants = {"plain": [oajail, "-s", policy], "watch-reads": [oajail, "-s", policy, "--watch-reads"]}
if baseline:
    variants["baseline"] = [baseline, "-s", policy]
argv = shlex.split(cmd)
times = {k: [] for k in variants}
for r in range(int(runs) + 2):
    for k, pre in variants.items():
        t = time.perf_counter()
        p = subprocess.run(pre + ["--"] + argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        dt = time.perf_counter() - t
        if p.returncode != 0:
            sys.exit(f"{name}: {k} failed ({p.returncode})")
        if r >= 2:  # two warm-up rounds
            times[k].append(dt)
ratio = lambda k: statistics.median(a / b for a, b in zip(times[k], times["plain"]))
line = f"{name:<8} plain {statistics.median(times['plain'])*1000:8.2f} ms"
for k in variants:
    if k != "plain":
        line += f" | {k} {statistics.median(times[k])*1000:8.2f} ms ({ratio(k):.3f}x, per-round range {min(a/b for a,b in zip(times[k], times['plain'])):.2f}-{max(a/b for a,b in zip(times[k], times['plain'])):.2f})"
print(line, flush=True)
PY
}
echo "machine: $(nproc) CPUs, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ), commit $(git -C "$OLDPWD" rev-parse --short HEAD 2>/dev/null || echo ?), $runs rounds"
measure true /bin/true
measure tarx "sh -c 'rm -rf pkg && tar xf $work/t10k.tar'"
measure read10k "sh -c 'find $work/src -type f -exec cat {} + >/dev/null'"
measure python "/usr/bin/python3 -c 'import json, email.parser, http.client, asyncio, decimal'"
