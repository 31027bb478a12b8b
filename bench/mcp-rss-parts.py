"""Where openagenda-mcp's resident set is: anonymous against file-backed.

usage: python3 bench/mcp-rss-parts.py DIR

Starts DIR/openagenda-mcp bare (stdio pipes, `OA_CODE_EGRESS_AUTHORITY=none`),
sends `initialize`, waits 1.5 s and prints VmRSS split into RssAnon and
RssFile (and the largest mappings); then 40 executes of `return 1+1` and 40
searches, and the same again. Read every binary compared into the page
cache first (`cat DIR/* > /dev/null`): the kernel maps code in windows
around each fault only from pages already cached, so RssFile depends on
the cache. docs/benchmarks.md ("Hostile scripts (issue 32)") quotes it.
"""
import json
import subprocess
import sys
import time

D = sys.argv[1]
env = {"PATH": "/usr/bin:/bin", "HOME": "/", "OA_CODE_EGRESS_AUTHORITY": "none", "OA_API_KEY": "k"}
p = subprocess.Popen([f"{D}/openagenda-mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                     stderr=subprocess.DEVNULL, env=env, cwd="/")


def call(i, method, params):
    p.stdin.write((json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}) + "\n").encode())
    p.stdin.flush()
    p.stdout.readline()


def show(tag):
    st = {l.split(":")[0]: l.split(":")[1].strip() for l in open(f"/proc/{p.pid}/status")}
    rows, name = [], None
    for line in open(f"/proc/{p.pid}/smaps"):
        first = line.split()[0]
        if "-" in first and ":" not in first:
            name = line.split(None, 5)[-1].strip() if len(line.split()) > 5 else "[anon]"
        elif line.startswith("Rss:"):
            rows.append((int(line.split()[1]), name))
    rows.sort(reverse=True)
    print(tag, "VmRSS", st["VmRSS"], "RssAnon", st["RssAnon"], "RssFile", st["RssFile"], "Threads", st["Threads"])
    for kib, what in rows[:6]:
        print(f"    {kib:6} kB  {what}")


call(1, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "m", "version": "0"}})
time.sleep(1.5)
show("after initialize:")
for i in range(40):
    call(10 + i, "tools/call", {"name": "execute", "arguments": {"code": "return 1+1"}})
for i in range(40):
    call(100 + i, "tools/call", {"name": "search_docs", "arguments": {"query": "upcoming events in a city"}})
time.sleep(1)
show("after 80 calls:")
p.stdin.close()
p.wait()
