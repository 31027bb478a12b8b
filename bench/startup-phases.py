#!/usr/bin/env python3
"""Where `oajail -- /bin/true` spends its start-up, from kernel tracepoints
(docs/benchmarks.md, section "Start-up against bwrap").

    python3 bench/startup-phases.py RUNS OAJAIL_BIN

Runs `OAJAIL_BIN -- /bin/true` RUNS times, then bubblewrap (the command of
bench/jail-ab.py) RUNS times, under `perf record` of a few scheduler and
system-call tracepoints, and prints for each step the median time since the
`execve` of the run, with the 10th and 90th percentiles. The binary is not
instrumented: the steps are the system calls that mark them (the Landlock
version probe is the negotiation, the first message on the channel is the
spec, the second the go-ahead, `landlock_restrict_self` is pid 1's
lock-down …). "pid 1 first on a cpu" comes from `sched_switch`: the gap
after the clone is time pid 1 spent runnable but not running.

Run it as root, from a scratch project with a scratch HOME as bench/jail.sh
does. Needs perf (Debian: linux-perf) and bwrap.
"""
import os
import re
import statistics
import subprocess
import sys
import tempfile

BWRAP = "bwrap --unshare-all --die-with-parent --ro-bind / / --dev /dev --proc /proc -- /bin/true"
EVENTS = [
    "sched:sched_process_exec", "sched:sched_process_exit", "sched:sched_process_fork",
    "sched:sched_switch", "syscalls:sys_enter_landlock_create_ruleset",
    "syscalls:sys_enter_sendmsg", "syscalls:sys_enter_landlock_restrict_self",
    "syscalls:sys_enter_exit_group",
]
LINE = re.compile(r"\s*(\S+)\s+(\d+)/(\d+)\s+([\d.]+):\s+(\S+):\s*(.*)")
STEPS = [
    ("negotiation (landlock version probe)", "neg"),
    ("pid 1 cloned", "clone"),
    ("pid 1 first on a cpu", "p1_runs"),
    ("spec sent to pid 1", "spec"),
    ("go-ahead sent", "go"),
    ("pid 1 lock-down (landlock_restrict_self)", "restrict"),
    ("command execve", "cmd_exec"),
    ("command exit", "cmd_exit"),
    ("pid 1 exit", "p1_exit"),
    ("supervisor exit", "exit"),
]


def record(cmd: str, runs: int) -> list[str]:
    fd, data = tempfile.mkstemp(suffix=".perf")
    os.close(fd)
    events = sum((["-e", e] for e in EVENTS), [])
    loop = f"for i in $(seq {runs}); do {cmd} >/dev/null 2>&1; done"
    subprocess.run(["perf", "record", "-q", "-a", "-o", data, *events, "--", "bash", "-c", loop],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    out = subprocess.run(["perf", "script", "-i", data, "-F", "comm,pid,tid,time,event,trace"],
                         check=True, capture_output=True, text=True).stdout
    os.unlink(data)
    return out.splitlines()


def split_runs(lines: list[str], binary: str) -> list[list[tuple]]:
    """One list of (us, comm, pid, event, rest) per exec of `binary`."""
    runs, cur = [], None
    for line in lines:
        m = LINE.match(line)
        if not m:
            continue
        comm, pid, _tid, t, ev, rest = m.groups()
        rec = (float(t) * 1e6, comm, int(pid), ev, rest)
        if ev == "sched:sched_process_exec" and f"filename={binary} " in rest + " ":
            cur = [rec]
            runs.append(cur)
        elif cur is not None:
            cur.append(rec)
    return runs


def steps(run: list[tuple]) -> dict[str, float]:
    t0, _, sup, _, _ = run[0]
    out, sends, pid1 = {}, 0, None
    for t, comm, pid, ev, rest in run[1:]:
        d = t - t0
        if pid == sup and ev.endswith("landlock_create_ruleset"):
            out.setdefault("neg", d)
        elif ev == "sched:sched_process_fork" and pid == sup and pid1 is None:
            pid1 = int(re.search(r"child_pid=(\d+)", rest).group(1))
            out["clone"] = d
        elif ev == "sched:sched_switch" and pid1 and f"next_pid={pid1} " in rest + " ":
            out.setdefault("p1_runs", d)
        elif ev.endswith("sys_enter_sendmsg") and pid == sup:
            sends += 1
            out.setdefault("spec" if sends == 1 else "go", d)
        elif ev.endswith("landlock_restrict_self") and pid == pid1:
            out.setdefault("restrict", d)
        elif ev == "sched:sched_process_exec" and pid not in (sup, pid1):
            out.setdefault("cmd_exec", d)
        elif ev == "sched:sched_process_exit" and re.search(r"group_dead=(1|true)", rest):
            key = "p1_exit" if pid == pid1 else "exit" if pid == sup else "cmd_exit"
            out.setdefault(key, d)
        elif ev.endswith("exit_group") and pid == sup:
            out.setdefault("exit", d)
    return out


def pct(v: list[float], p: float) -> float:
    v = sorted(v)
    return v[min(len(v) - 1, int(p * len(v)))]


def main() -> None:
    runs, binary = int(sys.argv[1]), sys.argv[2]
    table = [steps(r) for r in split_runs(record(f"{binary} -- /bin/true", runs), binary)]
    print(f"{len(table)} runs of {binary} -- /bin/true; us since its execve: median (p10-p90)")
    for name, key in STEPS:
        v = [s[key] for s in table if key in s]
        if v:
            print(f"  {name:42s} {statistics.median(v):7.0f}  ({pct(v, .1):.0f}-{pct(v, .9):.0f})")
    bw = split_runs(record(BWRAP, runs), "/usr/bin/bwrap")
    ends = [next((t for t, _, pid, ev, _ in r if ev.endswith("exit_group") and pid == r[0][2]), None)
            for r in bw]
    totals = [e - r[0][0] for e, r in zip(ends, bw) if e is not None]
    if totals:
        print(f"bwrap, same loop: execve to exit_group {statistics.median(totals):.0f} us "
              f"({pct(totals, .1):.0f}-{pct(totals, .9):.0f}), {len(totals)} runs")


if __name__ == "__main__":
    main()
