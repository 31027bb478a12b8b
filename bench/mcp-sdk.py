"""openagenda-mcp through the official Python MCP SDK, jailed and bare.

usage: python bench/mcp-sdk.py SERVER_BINARY [ROUNDS] [CALLS]

Launches the server the way an MCP client does (`stdio_client`, no shell,
minimal environment, cwd `/`), jailed with the documented entry
(`openagenda-mcp --jail`: oajail beside the binary, its own policy) and bare
(`OA_CODE_EGRESS_AUTHORITY=none`) as the same-run baseline, in interleaved
rounds (jailed, bare, jailed, bare, ...). Per round it measures:

- spawn to `initialize` reply (a fresh process each time);
- `execute {"code": "return 1+1"}` latency, CALLS calls, after 20 warm-up calls;
- `search_docs {"query": "upcoming events in a city"}` latency, CALLS calls;
- the server's resident set (VmRSS of the `openagenda-mcp` process serving,
  not its workers) idle one second after `initialize` (`rss_fresh_kib`) and
  again one idle second after all the calls (`rss_kib`).

Prints one JSON object with medians over the rounds of the per-round p50
and p99, and the ratios jailed/bare.
"""
import asyncio
import json
import os
import statistics
import sys
import time

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def server_pids(binary):
    real = os.path.realpath(binary)
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{pid}/exe") == real:
                out.append(int(pid))
        except OSError:
            pass
    return out


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


async def one_round(binary, jailed, calls):
    env = {"HOME": os.environ.get("HOME", "/"), "PATH": "/usr/bin:/bin"}
    args = []
    if jailed:
        args = ["--jail"]
    else:
        env["OA_CODE_EGRESS_AUTHORITY"] = "none"
    env["OA_API_KEY"] = "oa_pk_bench"
    before = set(server_pids(binary))
    params = StdioServerParameters(command=binary, args=args, env=env, cwd="/")
    t0 = time.perf_counter()
    async with stdio_client(params, errlog=open(os.devnull, "w")) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            spawn_ms = (time.perf_counter() - t0) * 1000
            await asyncio.sleep(1.0)
            new = [p for p in server_pids(binary) if p not in before]
            rss_fresh = max((rss_kib(p) for p in new), default=0)
            for _ in range(20):
                await session.call_tool("execute", {"code": "return 1+1"})
            ex = []
            for _ in range(calls):
                t = time.perf_counter()
                r = await session.call_tool("execute", {"code": "return 1+1"})
                ex.append((time.perf_counter() - t) * 1000)
                assert r.structured_content["result"] == 2, r
            se = []
            for _ in range(calls):
                t = time.perf_counter()
                r = await session.call_tool("search_docs", {"query": "upcoming events in a city"})
                se.append((time.perf_counter() - t) * 1000)
                assert not r.is_error, r
            await asyncio.sleep(1.0)
            new = [p for p in server_pids(binary) if p not in before]
            rss = max((rss_kib(p) for p in new), default=0)
    return {
        "spawn_ms": spawn_ms,
        "execute_p50": pct(ex, 50), "execute_p99": pct(ex, 99),
        "search_p50": pct(se, 50), "search_p99": pct(se, 99),
        "rss_fresh_kib": rss_fresh,
        "rss_kib": rss,
    }


async def main():
    binary = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    calls = int(sys.argv[3]) if len(sys.argv) > 3 else 300
    results = {"jailed": [], "bare": []}
    for _ in range(rounds):
        for mode in ("jailed", "bare"):
            results[mode].append(await one_round(binary, mode == "jailed", calls))
    summary = {}
    for mode, rs in results.items():
        summary[mode] = {k: round(statistics.median(r[k] for r in rs), 3) for k in rs[0]}
    summary["ratio_jailed_over_bare"] = {
        k: round(summary["jailed"][k] / summary["bare"][k], 2)
        for k in summary["jailed"] if summary["bare"][k]
    }
    summary["rounds"], summary["calls"] = rounds, calls
    summary["loadavg_end"] = open("/proc/loadavg").read().split()[:3]
    print(json.dumps(summary, indent=1))


asyncio.run(main())
