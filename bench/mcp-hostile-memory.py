"""The jailed openagenda-mcp's memory and tasks under hostile executes.

usage: sudo python3 bench/mcp-hostile-memory.py DIR [--pod IMAGE MEMORY] [PHASE...]

DIR holds openagenda-mcp, openagenda-mcp-worker and oajail (a release
build). The server is started as MCP clients start it
(`openagenda-mcp --jail`: its own policy, with the memory and task bounds
of `oajail.limits`), and fed, phase by phase, four executes at once of each
hostile kind (or 2,000 searches and an execute):

- bomb:   an allocation loop to the worker's heap cap (memory_limit);
- nest:   a result nested 120 deep (480 KB of JSON);
- recs:   a result of 40,000 small records (about 800 KB, a 29 MiB tree);
- flood:  five API calls with 1 MB arguments each (the API host is not
          reachable from here: the calls fail, the arguments are held);
- big:    one API call with a 1.2 MB argument (request_limit);
- search: 2,000 search_docs in a burst, then an execute of 1+1;
- mixed:  two allocation loops and two 40,000-record results at once
          (the server holds results while workers grow: what a memory
          limit must survive without killing the server);
- steady: not hostile: four callers sending small executes back to back
          for 20 s (the CPU and memory a busy pod needs).

With `--pod IMAGE MEMORY` (and the ConfigMap's OA_SANDBOX_MEMORY_MB and
OA_MAX_CONCURRENCY from the environment, when set) the server runs as the Kubernetes example's pod
does (examples/kubernetes/openagenda-mcp): in IMAGE under rootful podman
with the pod's security settings (uid 1000, the oajail seccomp profile,
unmasked /proc, no capabilities) and a memory limit of MEMORY (a pod's
`limits.memory`, no swap). It then also prints the container's memory
use and peak, its CPU time, and whether the kernel's OOM killer acted in
it, which is what sizes the pod's requests and limits.

After each phase it prints the answers' codes, the serving process's peak
resident set (VmHWM) and virtual size (VmPeak), the jail's memory cgroup
peak (as root: v1 memory.max_usage_in_bytes or v2 memory.peak) and the
peak number of tasks in the jail. docs/mcp.md, "Memory and tasks of the
jailed server", and docs/benchmarks.md quote its output.
"""
import glob
import json
import os
import subprocess
import sys
import threading
import time

D = os.path.realpath(sys.argv[1])
ARGS = sys.argv[2:]
POD = None
if ARGS[:1] == ["--pod"]:
    POD, ARGS = (ARGS[1], ARGS[2]), ARGS[3:]
PHASES = ARGS or ["bomb", "nest", "recs", "flood", "big", "search"]
SERVER = "/opt/oajail/bin/openagenda-mcp" if POD else f"{D}/openagenda-mcp"
POD_NAME = f"oa-mcp-pod-bench-{os.getpid()}"
REPO = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))

BOMB = "let a = []; while (true) a.push(new Array(1e6).fill(1));"
NEST = ("const leaf = () => { let v = [0]; for (let i = 0; i < 118; i++) v = [v]; return v; };"
        " const out = []; for (let i = 0; i < 2000; i++) out.push(leaf()); out")
RECS = "const out = []; for (let i = 0; i < 40000; i++) out.push({uid: i, t: 'x'}); out"
FLOOD = ("const big = 'x'.repeat(1000000); const calls = [];"
         " for (let i = 0; i < 5; i++) calls.push(oa.agendas.get({ path: { agendaUid: 1 }, body: { big } }));"
         " await Promise.all(calls)")
BIG = "await oa.agendas.get({ path: { agendaUid: 1 }, body: 'x'.repeat(1200000) })"
CODES = {"bomb": BOMB, "nest": NEST, "recs": RECS, "flood": FLOOD, "big": BIG}


class Client:
    def __init__(self):
        home = "/var/tmp/mcp-hostile-memory-home"
        os.makedirs(home, exist_ok=True)
        env = {"PATH": "/usr/bin:/bin", "HOME": home, "OA_API_KEY": "oa_pk_bench"}
        self.p = subprocess.Popen(pod_command() if POD else [SERVER, "--jail"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd="/")
        self.lock = threading.Lock()
        self.next = 0
        self.answers = {}
        threading.Thread(target=self.read, daemon=True).start()

    def read(self):
        for line in self.p.stdout:
            try:
                v = json.loads(line)
            except ValueError:
                continue
            if "id" in v:
                self.answers[v["id"]] = v

    def send(self, method, params):
        with self.lock:
            self.next += 1
            msg = {"jsonrpc": "2.0", "id": self.next, "method": method, "params": params}
            self.p.stdin.write((json.dumps(msg) + "\n").encode())
            self.p.stdin.flush()
            return self.next

    def wait(self, ids, limit=180):
        end = time.time() + limit
        while time.time() < end and not all(i in self.answers for i in ids):
            time.sleep(0.002)

    def code(self, i):
        r = self.answers.get(i, {}).get("result")
        if r is None:
            return "no answer"
        return (r.get("structuredContent") or {}).get("error", {}).get("code", "ok")


def pod_command():
    """podman run with the Deployment's security settings (as mcp/tests/k8s.rs)."""
    image, memory = POD
    profile = f"{REPO}/examples/containers/oajail-seccomp.json"
    return ["podman", "run", "-i", "--rm", "--name", POD_NAME, "--network", "host", "--user", "1000:1000",
            "--ulimit", "nofile=8192:8192", "--ulimit", "nproc=8192:8192", "--runtime", "runc",
            "--security-opt", f"seccomp={profile}", "--security-opt", "unmask=ALL",
            "--security-opt", "no-new-privileges", "--cap-drop", "ALL",
            "--memory", memory, "--memory-swap", memory, "-v", f"{D}:/opt/oajail/bin:ro",
            "-e", "OA_API_KEY=oa_pk_bench", *pod_settings(), image, SERVER, "--jail"]


def pod_settings():
    """The ConfigMap's limits, when given in this environment (OA_SANDBOX_MEMORY_MB, OA_MAX_CONCURRENCY)."""
    out = []
    for k in ("OA_SANDBOX_MEMORY_MB", "OA_MAX_CONCURRENCY"):
        if os.environ.get(k):
            out += ["-e", f"{k}={os.environ[k]}"]
    return out


def pod_top():
    for _ in range(100):
        r = subprocess.run(["podman", "inspect", "-f", "{{.State.Pid}}", POD_NAME], capture_output=True, text=True)
        if r.returncode == 0 and r.stdout.strip() not in ("", "0"):
            return int(r.stdout)
        time.sleep(0.1)
    raise SystemExit("the pod's container did not start")


def pod_cgroup(pid, controller):
    for line in open(f"/proc/{pid}/cgroup"):
        _, controllers, path = line.strip().split(":", 2)
        if controller in controllers.split(","):
            return f"/sys/fs/cgroup/{controller}{path}"
    raise SystemExit(f"no {controller} cgroup for {pid}")


def pod_figures(top):
    """The container's memory now and at its peak, its CPU time, OOM kills (cgroup v1)."""
    try:
        mem, cpu = pod_cgroup(top, "memory"), pod_cgroup(top, "cpuacct")
    except OSError:
        return {"pod_gone": True}
    oom = dict(l.split() for l in open(f"{mem}/memory.oom_control"))
    stat = dict(l.split() for l in open(f"{mem}/memory.stat"))
    return {"pod_memory_kib": int(open(f"{mem}/memory.usage_in_bytes").read()) >> 10,
            "pod_anon_kib": int(stat["total_rss"]) >> 10, "pod_file_kib": int(stat["total_cache"]) >> 10,
            "pod_memory_peak_kib": int(open(f"{mem}/memory.max_usage_in_bytes").read()) >> 10,
            "pod_cpu_s": round(int(open(f"{cpu}/cpuacct.usage").read()) / 1e9, 3),
            "pod_oom_kills": int(oom.get("oom_kill", 0))}


def steady(c, seconds=20, callers=4):
    """Back-to-back small executes from `callers` at once; the answers' codes and the rate."""
    codes, end = {}, time.time() + seconds

    def caller():
        while time.time() < end:
            i = c.send("tools/call", {"name": "execute", "arguments": {
                "code": "const a = []; for (let i = 0; i < 200; i++) a.push({uid: i}); return a.length"}})
            c.wait([i], 60)
            codes[c.code(i)] = codes.get(c.code(i), 0) + 1

    threads = [threading.Thread(target=caller) for _ in range(callers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return codes


def tree(pid):
    out, todo = [pid], [pid]
    while todo:
        q = todo.pop()
        for t in glob.glob(f"/proc/{q}/task/*/children"):
            try:
                kids = [int(c) for c in open(t).read().split()]
            except OSError:
                continue
            out += kids
            todo += kids
    return out


def status(pid, key):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith(key):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def serving(top):
    for q in tree(top):
        try:
            if os.readlink(f"/proc/{q}/exe") == SERVER and b"__execute" not in open(f"/proc/{q}/cmdline", "rb").read():
                return q
        except OSError:
            pass
    return None


def cgroup_peak(pid):
    for line in open(f"/proc/{pid}/cgroup"):
        _, controllers, path = line.strip().split(":", 2)
        if "memory" in controllers.split(","):
            f = f"/sys/fs/cgroup/memory{path}/memory.max_usage_in_bytes"
        elif controllers == "":
            f = f"/sys/fs/cgroup{'/unified' if os.path.isdir('/sys/fs/cgroup/unified') else ''}{path}/memory.peak"
        else:
            continue
        try:
            return int(open(f).read()) >> 10
        except OSError:
            continue
    return None


def main():
    c = Client()
    c.wait([c.send("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                  "clientInfo": {"name": "bench", "version": "0"}})], 30)
    time.sleep(1.0)
    top = pod_top() if POD else c.p.pid
    sp = serving(top)
    pid1 = sp and int(open(f"/proc/{sp}/stat").read().rsplit(")", 1)[1].split()[1])
    limits = {l.split("  ")[0]: l.split()[-3] for l in open(f"/proc/{sp}/limits") if l.startswith("Max ")}
    peak_tasks = [0]
    done = [False]

    def sample():
        while not done[0]:
            n = 0
            for q in tree(pid1):
                try:
                    n += len(os.listdir(f"/proc/{q}/task"))
                except OSError:
                    pass
            peak_tasks[0] = max(peak_tasks[0], n)
            time.sleep(0.02)

    threading.Thread(target=sample, daemon=True).start()
    pod = (lambda: pod_figures(top)) if POD else (lambda: {})
    print(json.dumps({**pod(), "server": sp, "limits": {k: limits[k] for k in ("Max address space", "Max processes")},
                      "idle_rss_kib": status(sp, "VmRSS:"), "idle_vsz_kib": status(sp, "VmSize:"),
                      "pool_worker_rss_kib": [status(q, "VmRSS:") for q in tree(sp) if q != sp],
                      "pid1_rss_kib": status(pid1, "VmRSS:")}))
    for phase in PHASES:
        if phase == "steady":
            before, begin = pod(), time.time()
            codes = steady(c)
            after, wall = pod(), time.time() - begin
            rate = sum(codes.values()) / wall
            cpu = after and round((after["pod_cpu_s"] - before["pod_cpu_s"]) / wall, 3)
            print(json.dumps({"phase": phase, "answers": codes, "executes_per_s": round(rate, 1),
                              "pod_cpu_cores": cpu, **after, "server_vmhwm_kib": status(sp, "VmHWM:"),
                              "server_alive": os.path.exists(f"/proc/{sp}")}))
            continue
        if phase == "search":
            ids = [c.send("tools/call", {"name": "search_docs", "arguments": {"query": f"events in city {i}"}})
                   for i in range(2000)]
            ids.append(c.send("tools/call", {"name": "execute", "arguments": {"code": "1+1"}}))
        else:
            codes = [BOMB, RECS, BOMB, RECS] if phase == "mixed" else [CODES[phase]] * 4
            ids = [c.send("tools/call", {"name": "execute", "arguments": {"code": k}}) for k in codes]
        c.wait(ids)
        codes = {}
        for i in ids:
            codes[c.code(i)] = codes.get(c.code(i), 0) + 1
        print(json.dumps({"phase": phase, "answers": codes, "server_vmhwm_kib": status(sp, "VmHWM:"),
                          "server_vmpeak_kib": status(sp, "VmPeak:"), "jail_cgroup_peak_kib": cgroup_peak(sp),
                          "jail_tasks_peak": peak_tasks[0], **pod(),
                          "server_alive": os.path.exists(f"/proc/{sp}")}))
    done[0] = True
    c.p.stdin.close()
    c.p.wait(timeout=15)


main()
