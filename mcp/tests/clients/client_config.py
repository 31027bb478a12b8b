"""Launch openagenda-mcp from an `mcpServers` entry exactly as an MCP client does.

usage: client_config.py CONFIG.json SERVER_NAME CWD

Reads the client configuration file, takes the entry SERVER_NAME and starts
its `command` with its `args` through the Python SDK's `stdio_client`: no
shell, working directory CWD, and a minimal environment (HOME and
PATH=/usr/bin:/bin, as clients started from a desktop session have) plus the
entry's `env`. Checks that the server booted under its wrapper, runs
`search_docs` and `execute` (one API call to the mock named in the entry's
env) and prints one JSON line; exits non-zero on the first failed check.
"""
import asyncio
import json
import os
import sys

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client


def check(cond, what):
    if not cond:
        print(f"FAIL: {what}", file=sys.stderr)
        sys.exit(1)


async def main():
    config_path, name, cwd = sys.argv[1:4]
    with open(config_path) as f:
        entry = json.load(f)["mcpServers"][name]
    env = {"HOME": os.environ.get("HOME", "/"), "PATH": "/usr/bin:/bin"}
    env.update(entry.get("env", {}))
    params = StdioServerParameters(
        command=entry["command"], args=entry.get("args", []), env=env, cwd=cwd
    )
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = {t.name: t for t in (await session.list_tools()).tools}
            check(sorted(tools) == ["execute", "search_docs"], f"tools {sorted(tools)}")
            desc = tools["execute"].description
            check("bounded by oajail" in desc, f"not under its wrapper: {desc}")
            docs = await session.call_tool("search_docs", {"query": "events of an agenda"})
            check(not docs.is_error, f"search_docs {docs}")
            r = await session.call_tool("execute", {"code": "return 1+1"})
            check(r.structured_content["result"] == 2, f"execute {r}")
            # The call goes through the wrapper's terminated tunnel and its
            # read rules; whether the key arrives is the Rust side's check.
            code = "const a = await oa.agendas.get({ path: { agendaUid: 1 } }); return [a.error, a.data && a.data.uid];"
            r = await session.call_tool("execute", {"code": code})
            check(r.structured_content["result"] == [None, 1], f"api call {r.structured_content}")
    print(json.dumps({"cwd": cwd, "ok": True}))


asyncio.run(main())
