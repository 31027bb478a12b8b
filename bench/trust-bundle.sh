#!/usr/bin/env bash
# Start-up cost of TLS termination's trust bundle (docs/benchmarks.md,
# "Proxy": start-up with the trust bundle).
#
#   bash bench/trust-bundle.sh          # builds the release binary, then measures
#   RUNS=50 bash bench/trust-bundle.sh
#
# `oajail -c true` with the same policy without and with `tlsTerminate: {}`
# (a per-run CA: made in memory, the host's roots read, the bundle written by
# pid 1 into its read-only tmpfs), alternating run by run; prints the median
# of each and their ratio. Needs: python3.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p oajail >/dev/null
OAJAIL=$(pwd)/target/release/oajail
work=$(mktemp -d /var/tmp/oajail-trust-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
cat >"$work/off.json" <<'JSON'
{"network": {"allowedDomains": ["example.com"], "deniedDomains": []},
 "filesystem": {"denyRead": [], "allowWrite": [], "denyWrite": []}}
JSON
cat >"$work/on.json" <<'JSON'
{"network": {"allowedDomains": ["example.com"], "deniedDomains": [], "tlsTerminate": {}},
 "filesystem": {"denyRead": [], "allowWrite": [], "denyWrite": []}}
JSON
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$OAJAIL" "$work" "${RUNS:-25}" <<'PY'
import statistics, subprocess, sys, time
oajail, work, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
times = {"off": [], "on": []}
for _ in range(runs):
    for kind in ("off", "on"):
        t = time.perf_counter()
        subprocess.run([oajail, "-s", f"{work}/{kind}.json", "-c", "true"], check=True, cwd=work)
        times[kind].append((time.perf_counter() - t) * 1000)
for kind, v in times.items():
    print(f"{kind}: median {statistics.median(v):.1f} ms over {len(v)} runs")
print(f"on/off: {statistics.median(times['on']) / statistics.median(times['off']):.2f}x")
PY
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
