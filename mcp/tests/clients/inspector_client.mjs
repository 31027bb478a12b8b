// Independent-client check with the MCP Inspector v2 CLI
// (`npm install @modelcontextprotocol/inspector@2.12.0`, Node >= 22.19).
//
// usage: node inspector_client.mjs INSPECTOR_BIN SERVER_BIN
//
// Environment variables starting with OA_ (but not the harness's OA_MCP_*) are passed to the server with the
// inspector's `-e`. Checks: `--strict` tools/list (schema portability),
// search_docs, execute with two API calls to the mock named by OA_BASE_URL,
// and that a timeout makes the inspector exit 5 (isError). Prints one JSON
// summary line; throws (exit 1) on the first failed check.
import { spawnSync } from 'node:child_process';
import assert from 'node:assert/strict';

const [inspector, server] = process.argv.slice(2);
const envArgs = Object.entries(process.env)
  .filter(([k]) => k.startsWith('OA_') && !k.startsWith('OA_MCP_'))
  .flatMap(([k, v]) => ['-e', `${k}=${v}`]);

function run(extra, ...method) {
  const r = spawnSync(inspector, ['--cli', ...extra, ...envArgs, server, ...method], {
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

const list = run(['--strict'], '--method', 'tools/list');
assert.equal(list.status, 0, `--strict tools/list exited ${list.status}: ${list.stdout}${list.stderr}`);
const names = json(list).tools.map((t) => t.name).sort();
assert.deepEqual(names, ['execute', 'search_docs']);

const docs = json(run(['-q'], '--method', 'tools/call', '--tool-name', 'search_docs',
  '--tool-args-json', JSON.stringify({ query: 'my agendas' })));
assert.ok(docs.content[0].text.startsWith('How to call'));
assert.ok(docs.content[0].text.includes('### me.agendas.list'));

const code = [
  'const a = await oa.agendas.events.list({ path: { agendaUid: 1 } });',
  'const b = await oa.agendas.get({ path: { agendaUid: 1 } });',
  "console.log('n', a.data.data.length);",
  'return [a.data.data.length, b.data.title];',
].join('\n');
const exec = run(['-q'], '--method', 'tools/call', '--tool-name', 'execute', '--tool-args-json', JSON.stringify({ code }));
assert.equal(exec.status, 0, `execute exited ${exec.status}: ${exec.stdout}${exec.stderr}`);
const out = json(exec);
assert.deepEqual(out.structuredContent.result, [2, 'Agenda']);
assert.deepEqual(out.structuredContent.logs, [{ level: 'log', text: 'n 2' }]);

const slow = run(['-q'], '--method', 'tools/call', '--tool-name', 'execute',
  '--tool-args-json', JSON.stringify({ code: 'while (true) {}' }));
assert.equal(slow.status, 5, `a timeout must exit 5 (isError), got ${slow.status}`);

console.log(JSON.stringify({ client: 'mcp-inspector', ok: true }));
