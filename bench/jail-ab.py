#!/usr/bin/env python3
"""Interleaved start-up comparison (docs/benchmarks.md, section "Jail").

    python3 bench/jail-ab.py ROUNDS RUNS OAJAIL_BIN [OAJAIL_BIN...]

Each round runs hyperfine once over every given oajail binary (`-- /bin/true`)
and bubblewrap (`--unshare-all --die-with-parent --ro-bind / / --dev /dev --proc
/proc -- /bin/true`), RUNS runs each. The ratio of each binary to bwrap is taken
per round, so a load change between rounds moves both sides of a ratio; the
script prints the median (and range) of those per-round ratios. Run it from a
scratch project with a scratch HOME, as bench/jail.sh does, so the numbers do
not depend on the caller's files. Needs hyperfine and bwrap.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile

BWRAP = "bwrap --unshare-all --die-with-parent --ro-bind / / --dev /dev --proc /proc -- /bin/true"


def main() -> None:
    rounds, runs, bins = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
    cmds = [f"{b} -- /bin/true" for b in bins] + [BWRAP]
    medians = {c: [] for c in cmds}
    for _ in range(rounds):
        fd, out = tempfile.mkstemp(suffix=".json")
        os.close(fd)
        subprocess.run(
            ["hyperfine", "-N", "-w", "3", "-r", str(runs), "--export-json", out, *cmds],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        with open(out) as f:
            for res in json.load(f)["results"]:
                medians[res["command"]].append(res["median"] * 1000)
        os.unlink(out)
    with open("/proc/loadavg") as f:
        print("load after:", f.read().strip())
    for c in cmds:
        print(f"{statistics.median(medians[c]):6.2f} ms  median of {rounds} round medians  {c.split(' ')[0]}")
    for b, c in zip(bins, cmds):
        ratios = [x / y for x, y in zip(medians[c], medians[BWRAP])]
        print(f"ratio to bwrap {b}: median {statistics.median(ratios):.3f}, range {min(ratios):.3f}-{max(ratios):.3f}")


if __name__ == "__main__":
    main()
