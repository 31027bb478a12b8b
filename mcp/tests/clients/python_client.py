"""Independent-client check with the official Python MCP SDK (`pip install mcp`).

usage: python_client.py auto|legacy COMMAND [ARGS...]

Runs the server through the SDK's stdio client, in the SDK's default dual-era
mode ("auto": probes server/discover, 2026-07-28) or forcing the 2025-11-25
handshake ("legacy"), and checks tools/list, search_docs, execute (with two
API calls to the mock named by OA_BASE_URL) and a timeout. Environment
variables starting with OA_ are passed to the server. Prints one JSON
summary line; exits non-zero on the first failed check.
"""
import asyncio
import json
import os
import sys

from mcp import Client, StdioServerParameters


def check(cond, what):
    if not cond:
        print(f"FAIL: {what}", file=sys.stderr)
        sys.exit(1)


async def main():
    mode, cmd = sys.argv[1], sys.argv[2:]
    # OA_MCP_* are the test harness's own settings, not the server's.
    env = {k: v for k, v in os.environ.items()
           if (k.startswith("OA_") and not k.startswith("OA_MCP_")) or k == "PATH"}
    params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=env)
    async with Client(params, mode=mode) as c:
        version = c.protocol_version
        want = "2026-07-28" if mode == "auto" else "2025-11-25"
        check(version == want, f"negotiated {version}, expected {want}")
        caps = c.server_capabilities.model_dump(exclude_none=True)
        check(set(caps) == {"tools"}, f"capabilities {caps}")
        tools = {t.name: t for t in (await c.list_tools()).tools}
        check(sorted(tools) == ["execute", "search_docs"], f"tools {sorted(tools)}")
        check(tools["search_docs"].annotations.read_only_hint is True, "search_docs read-only")
        if version < "2026":
            await c.send_ping()
        docs = await c.call_tool("search_docs", {"query": "upcoming events in Paris"})
        text = docs.content[0].text
        check(not docs.is_error and text.startswith("How to call"), "search_docs lead")
        check("oa.agendas.events.list" in text, "search_docs names the list operation")
        code = (
            "const a = await oa.agendas.events.list({ path: { agendaUid: 1 } });\n"
            "const b = await oa.agendas.get({ path: { agendaUid: 1 } });\n"
            "console.log('n', a.data.data.length);\n"
            "return [a.data.data.length, b.data.title];"
        )
        r = await c.call_tool("execute", {"code": code})
        check(not r.is_error, f"execute failed: {r}")
        check(r.structured_content["result"] == [2, "Agenda"], f"result {r.structured_content}")
        check(r.structured_content["logs"] == [{"level": "log", "text": "n 2"}], "logs")
        t = await c.call_tool("execute", {"code": "while (true) {}"})
        check(t.is_error and t.structured_content["error"]["code"] == "timeout", f"timeout {t}")
        print(json.dumps({"mode": mode, "protocolVersion": version, "ok": True}))


asyncio.run(main())
