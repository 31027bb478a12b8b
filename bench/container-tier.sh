#!/usr/bin/env bash
# Start-up of the container tier against the full jail, on the same host in
# the same run (docs/benchmarks.md, "Container tier"). The container tier is
# forced with bench/nouserns.c (clone(CLONE_NEWUSER) refused, as in
# Docker's default profile), whose own cost is measured too. ROUNDS rounds
# of hyperfine over the three commands (RUNS runs each); the ratio is taken
# per round, so a load change between rounds moves both of its sides.
# Usage: bash bench/container-tier.sh   (release build)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-10}
RUNS=${RUNS:-20}
cargo build --release --locked -p oajail --bin oajail >/dev/null
bin=$PWD/target/release/oajail
work=$(mktemp -d /var/tmp/oajail-bench-ct.XXXXXX)
trap 'rm -rf "$work"' EXIT
gcc -O2 -o "$work/nouserns" bench/nouserns.c
mkdir -p "$work/home" "$work/project"
python3 - "$work/weak.json" <<'PY'
import json, sys
policy = json.load(open("examples/policies/default.json"))
policy["enableWeakerNestedSandbox"] = True
json.dump(policy, open(sys.argv[1], "w"))
PY
cd "$work/project"
export HOME=$work/home
python3 - "$bin" "$work" "$ROUNDS" "$RUNS" <<'PY'
import json, statistics, subprocess, sys
bin, work, rounds, runs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
cmds = {
    "full jail": f"{bin} -s {work}/weak.json -- /bin/true",
    "container tier": f"{work}/nouserns {bin} -s {work}/weak.json -- /bin/true",
    "nouserns alone": f"{work}/nouserns /bin/true",
}
load = lambda: open("/proc/loadavg").read().split()[:3]
print("load before:", *load())
med = {n: [] for n in cmds}
cpu = {n: [] for n in cmds}
for _ in range(rounds):
    out = f"{work}/round.json"
    args = ["hyperfine", "-N", "-w", "3", "-r", str(runs), "--export-json", out]
    for name, cmd in cmds.items():
        args += ["-n", name, cmd]
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for r in json.load(open(out))["results"]:
        med[r["command"]].append(r["median"] * 1000)
        cpu[r["command"]].append((r["user"] + r["system"]) * 1000)
print("load after:", *load())
for n in cmds:
    m = med[n]
    print(f"{n}: median of round medians {statistics.median(m):.1f} ms "
          f"(range {min(m):.1f}-{max(m):.1f}), user+sys {statistics.median(cpu[n]):.1f} ms")
ratios = [(t - s) / f for f, t, s in zip(med["full jail"], med["container tier"], med["nouserns alone"])]
print(f"container tier (less the stub) / full jail, per round: median {statistics.median(ratios):.2f} "
      f"(range {min(ratios):.2f}-{max(ratios):.2f})")
PY
# CPU time of every process of a run (pid 1 and the command included,
# which hyperfine's user+sys leaves out when oajail does not reap pid 1).
if command -v perf >/dev/null; then
  for cmd in "$bin -s $work/weak.json -- /bin/true" \
             "$work/nouserns $bin -s $work/weak.json -- /bin/true" \
             "$work/nouserns /bin/true"; do
    perf stat -r "$((ROUNDS * RUNS))" -e task-clock -- $cmd 2>&1 >/dev/null \
      | awk -v c="$cmd" '/task-clock/ {print "cpu " $1 " ms: " c} /elapsed/ {print "  elapsed " $1 " s " $2 " " $3}'
  done
fi
