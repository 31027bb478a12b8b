#!/usr/bin/env bash
# Start-up of the container tier against the full jail, on the same host in
# the same hyperfine run (docs/benchmarks.md, "Container tier"). The
# container tier is forced with bench/nouserns.c (clone(CLONE_NEWUSER)
# refused, as in Docker's default profile); its own cost is measured too.
# Usage: bash bench/container-tier.sh   (RUNS sets the run count; release build)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-60}
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
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
hyperfine -N -w 5 -r "$RUNS" \
  "$bin -s $work/weak.json -- /bin/true" \
  "$work/nouserns $bin -s $work/weak.json -- /bin/true" \
  "$work/nouserns /bin/true"
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
