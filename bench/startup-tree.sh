#!/usr/bin/env bash
# Start-up against the size of the writable tree (docs/benchmarks.md,
# section "Guard": start-up does not depend on the tree).
#
#   bash bench/startup-tree.sh          # builds the release binary, then measures
#   RUNS=200 ENTRIES=1000000 bash bench/startup-tree.sh
#
# Two workspaces under /var/tmp: an empty one and one with ENTRIES entries
# (hard links of 2,000 seed files in 2,000 directories, with a .git
# repository and protected names at depth). `oajail -- /bin/true` with
# `allowWrite: ["."]` runs in each, alternating run by run; the script prints
# the median of each and the median of the per-pair ratios.
# Needs: python3.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p oajail >/dev/null
OAJAIL=$(pwd)/target/release/oajail
work=$(mktemp -d /var/tmp/oajail-startup-tree.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/home" "$work/empty" "$work/big"
cat >"$work/policy.json" <<'JSON'
{"network": {"allowedDomains": [], "deniedDomains": []},
 "filesystem": {"denyRead": [], "allowWrite": ["."], "denyWrite": []}}
JSON
python3 - "$work/big" "${ENTRIES:-1000000}" <<'PY'
import os, sys
base, entries = sys.argv[1], int(sys.argv[2])
dirs = 2000
per = max(1, entries // dirs - 2)
for d in range(dirs):
    p = f"{base}/node_modules/p{d}/lib"
    os.makedirs(p, exist_ok=True)
    open(f"{p}/seed.js", "w").write("module.exports = 1\n")
    for i in range(per):
        os.link(f"{p}/seed.js", f"{p}/f{i}.js")
for p in ["node_modules/p7/lib/a/b/c/d/.vscode", "node_modules/p9/.git/hooks"]:
    os.makedirs(f"{base}/{p}", exist_ok=True)
open(f"{base}/node_modules/p9/.git/HEAD", "w").write("ref: refs/heads/main\n")
PY
echo "entries in the big workspace: $(find "$work/big" | wc -l)"
echo "machine: $(nproc) cpu, kernel $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg), commit $(git rev-parse --short HEAD)"
export HOME="$work/home"
unset OAJAIL_SETTINGS
python3 - "$OAJAIL" "$work" "${RUNS:-100}" <<'PY'
import statistics, subprocess, sys, time
oajail, work, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
def once(cwd):
    t = time.perf_counter()
    subprocess.run([oajail, "-s", f"{work}/policy.json", "--", "/bin/true"], cwd=cwd, check=True)
    return time.perf_counter() - t
for _ in range(5):
    once(f"{work}/empty"); once(f"{work}/big")
empty, big = [], []
for _ in range(runs):
    empty.append(once(f"{work}/empty")); big.append(once(f"{work}/big"))
ratios = sorted(b / e for e, b in zip(empty, big))
med = statistics.median
print(f"empty workspace: median {med(empty)*1e3:.2f} ms; big workspace: median {med(big)*1e3:.2f} ms")
print(f"ratio big/empty: median {med(ratios):.3f} (middle half {ratios[len(ratios)//4]:.3f}-{ratios[3*len(ratios)//4]:.3f}), {runs} pairs")
PY
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
