"""Independent-client check of the Streamable HTTP transport with the official
Python MCP SDK (`pip install mcp`).

usage:
  python_http_client.py auto|legacy URL TOKEN
      a bearer token given as a header (the SDK's default dual-era mode
      "auto" negotiates 2026-07-28; "legacy" forces the 2025-11-25 handshake
      and its session);
  python_http_client.py discover URL ISSUER CLIENT_ID CLIENT_SECRET
      the SDK's own OAuth flow (ClientCredentialsOAuthProvider): the 401's
      resource_metadata, RFC 9728 metadata, the issuer's RFC 8414 metadata,
      a client_credentials token for the resource, then the retried calls.

Checks tools/list, search_docs, execute (two API calls to the mock) and a
timeout. Prints one JSON summary line; exits non-zero on the first failed
check.
"""
import asyncio
import json
import sys

import httpx2
from mcp import Client
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.streamable_http import streamable_http_client


def check(cond, what):
    if not cond:
        print(f"FAIL: {what}", file=sys.stderr)
        sys.exit(1)


class Memory:
    """TokenStorage in memory."""

    def __init__(self):
        self.tokens = None
        self.client = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client

    async def set_client_info(self, info):
        self.client = info


async def exercise(c, mode):
    version = c.protocol_version
    want = "2025-11-25" if mode == "legacy" else "2026-07-28"
    check(version == want, f"negotiated {version}, expected {want}")
    tools = {t.name: t for t in (await c.list_tools()).tools}
    check(sorted(tools) == ["execute", "search_docs"], f"tools {sorted(tools)}")
    if version < "2026":
        await c.send_ping()
    docs = await c.call_tool("search_docs", {"query": "upcoming events in Paris"})
    check(not docs.is_error and "oa.agendas.events.list" in docs.content[0].text, "search_docs")
    code = (
        "const a = await oa.agendas.events.list({ path: { agendaUid: 1 } });\n"
        "const b = await oa.agendas.get({ path: { agendaUid: 1 } });\n"
        "console.log('n', a.data.data.length);\n"
        "return [a.data.data.length, b.data.title];"
    )
    r = await c.call_tool("execute", {"code": code})
    check(not r.is_error, f"execute failed: {r}")
    check(r.structured_content["result"] == [2, "Agenda"], f"result {r.structured_content}")
    t = await c.call_tool("execute", {"code": "while (true) {}"})
    check(t.is_error and t.structured_content["error"]["code"] == "timeout", f"timeout {t}")
    return version


async def main():
    mode, url = sys.argv[1], sys.argv[2]
    if mode == "discover":
        issuer, client_id, secret = sys.argv[3:6]
        provider = ClientCredentialsOAuthProvider(
            server_url=url, storage=Memory(), client_id=client_id,
            client_secret=secret, issuer=issuer)
        http = httpx2.AsyncClient(auth=provider, timeout=httpx2.Timeout(30, read=120))
        client_mode = "auto"
    else:
        token = sys.argv[3]
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"},
                                  timeout=httpx2.Timeout(30, read=120))
        client_mode = mode
    async with http:
        async with Client(streamable_http_client(url, http_client=http), mode=client_mode) as c:
            version = await exercise(c, client_mode)
    print(json.dumps({"mode": mode, "protocolVersion": version, "ok": True}))


asyncio.run(main())
