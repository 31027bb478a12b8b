// Independent-client check of the Streamable HTTP transport with the MCP
// Inspector v2 CLI (`npm install @modelcontextprotocol/inspector@2.12.0`,
// Node >= 22.19).
//
// usage: node inspector_http_client.mjs INSPECTOR_BIN URL TOKEN
//
// Checks: without the token the inspector fails (the server answers 401);
// with `--header "Authorization: Bearer …"`: `--strict` tools/list,
// search_docs, execute with two API calls to the mock, and a timeout that
// makes the inspector exit 5 (isError). Prints one JSON summary line;
// throws (exit 1) on the first failed check.
import { spawnSync } from 'node:child_process';
import assert from 'node:assert/strict';

const [inspector, url, token] = process.argv.slice(2);
const auth = ['--header', `Authorization: Bearer ${token}`];

function run(extra, ...method) {
  const r = spawnSync(inspector, ['--cli', url, '--transport', 'http', ...extra, ...method], {
    encoding: 'utf8',
    timeout: 60_000,
  });
  if (r.error) throw r.error;
  return r;
}

function json(r) {
  const start = r.stdout.indexOf('{');
  assert.ok(start >= 0, `no JSON in inspector output: ${r.stdout}\n${r.stderr}`);
  return JSON.parse(r.stdout.slice(start));
}

const anonymous = run([], '--method', 'tools/list');
assert.notEqual(anonymous.status, 0, 'tools/list without a token must fail');

const list = run(['--strict', ...auth], '--method', 'tools/list');
assert.equal(list.status, 0, `--strict tools/list exited ${list.status}: ${list.stdout}${list.stderr}`);
assert.deepEqual(json(list).tools.map((t) => t.name).sort(), ['execute', 'search_docs']);

const docs = json(run(['-q', ...auth], '--method', 'tools/call', '--tool-name', 'search_docs',
  '--tool-args-json', JSON.stringify({ query: 'my agendas' })));
assert.ok(docs.content[0].text.includes('### me.agendas.list'));

const code = [
  'const a = await oa.agendas.events.list({ path: { agendaUid: 1 } });',
  'const b = await oa.agendas.get({ path: { agendaUid: 1 } });',
  'return [a.data.data.length, b.data.title];',
].join('\n');
const exec = run(['-q', ...auth], '--method', 'tools/call', '--tool-name', 'execute',
  '--tool-args-json', JSON.stringify({ code }));
assert.equal(exec.status, 0, `execute exited ${exec.status}: ${exec.stdout}${exec.stderr}`);
assert.deepEqual(json(exec).structuredContent.result, [2, 'Agenda']);

const slow = run(['-q', ...auth], '--method', 'tools/call', '--tool-name', 'execute',
  '--tool-args-json', JSON.stringify({ code: 'while (true) {}' }));
assert.equal(slow.status, 5, `a timeout must exit 5 (isError), got ${slow.status}`);

console.log(JSON.stringify({ client: 'mcp-inspector', transport: 'http', ok: true }));
