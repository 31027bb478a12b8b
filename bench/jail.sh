#!/usr/bin/env bash
# Jail start-up benchmark (docs/benchmarks.md, section "Jail").
#
#   bash bench/jail.sh            # builds the release binary, then measures
#
# Measures, in the same hyperfine run, `oajail -- /bin/true` against
# bubblewrap's `bwrap --unshare-all --die-with-parent --ro-bind / / --dev /dev
# --proc /proc -- /bin/true`, then a policy with 1,000 denyRead entries.
# Runs from a small scratch project with a scratch HOME, so the numbers do not
# depend on what the caller's home or working directory contain.
# Needs: hyperfine, bwrap, python3 (apt-get install hyperfine bubblewrap).
set -euo pipefail
cd "$(dirname "$0")/.."
for tool in hyperfine bwrap python3; do
  command -v "$tool" >/dev/null || { echo "bench: $tool not installed" >&2; exit 1; }
done
cargo build --release -p oajail >/dev/null
OAJAIL=$(pwd)/target/release/oajail
work=$(mktemp -d /tmp/oajail-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/home" "$work/proj/src"
echo 'int main(void){return 0;}' >"$work/proj/src/main.c"
python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
policy = {
    "network": {"allowedDomains": [], "deniedDomains": []},
    "filesystem": {
        "denyRead": [f"{work}/home/secret{i}" for i in range(1000)],
        "allowWrite": ["."],
        "denyWrite": [],
    },
}
json.dump(policy, open(f"{work}/deny1000.json", "w"))
PY
cd "$work/proj"
export HOME="$work/home"
unset OAJAIL_SETTINGS
echo "machine: $(nproc) cpu, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), kernel $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
hyperfine -N -w 5 -r "${RUNS:-60}" --export-json "$work/true.json" \
  "$OAJAIL -- /bin/true" \
  "bwrap --unshare-all --die-with-parent --ro-bind / / --dev /dev --proc /proc -- /bin/true"
hyperfine -N -w 3 -r "${RUNS_DENY:-20}" --export-json "$work/deny.json" \
  "$OAJAIL -s $work/deny1000.json -- /bin/true"
python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
t = json.load(open(f"{work}/true.json"))["results"]
d = json.load(open(f"{work}/deny.json"))["results"][0]
med = [r["median"] * 1000 for r in t]
print(f"oajail median {med[0]:.1f} ms, bwrap median {med[1]:.1f} ms, ratio {med[0] / med[1]:.2f} (target <= 1.5)")
print(f"oajail min {t[0]['min'] * 1000:.1f} ms, bwrap min {t[1]['min'] * 1000:.1f} ms")
cpu = [(r["user"] + r["system"]) * 1000 for r in t]
print(f"cpu (user+sys, mean): oajail {cpu[0]:.1f} ms, bwrap {cpu[1]:.1f} ms")
print(f"1000 denyRead: median {d['median'] * 1000:.1f} ms (target < 50)")
PY
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
