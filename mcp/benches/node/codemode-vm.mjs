// Node baseline for the openagenda-mcp benchmark: the TS SDK
// (@modelcontextprotocol/sdk 1.32.2) with node:vm, as described in the
// project's reference notes. With EXEC_MODE=subprocess each execute spawns
// `node --max-old-space-size=64 --input-type=module` instead and kills it on
// timeout. The API is faked in-process (no HTTP), which favours Node.
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { z } from 'zod';
import vm from 'node:vm';
import { spawn } from 'node:child_process';

const FAKE = `const api = { get: async (p) => ({ path: p, data: [{ uid: 1, title: 'A' }, { uid: 2, title: 'B' }] }) };`;

async function inVm(code) {
  const logs = [];
  const api = { get: async (p) => ({ path: p, data: [{ uid: 1, title: 'A' }, { uid: 2, title: 'B' }] }) };
  const ctx = vm.createContext({ api, console: { log: (...a) => logs.push(a.join(' ')) } });
  const result = await vm.runInContext(`(async () => { ${code}\n})()`, ctx, { timeout: 1000 });
  return { result, logs };
}

function inSubprocess(code) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--max-old-space-size=64', '--input-type=module'], { stdio: ['pipe', 'pipe', 'inherit'] });
    let out = '';
    const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
    child.stdout.on('data', (d) => { out += d; });
    child.on('close', () => { clearTimeout(timer); try { resolve(JSON.parse(out)); } catch (e) { reject(e); } });
    const logs = 'const __logs = []; const console = { log: (...a) => __logs.push(a.join(" ")) };';
    child.stdin.end(`${FAKE}\n${logs}\nconst result = await (async () => { ${code}\n})();\nprocess.stdout.write(JSON.stringify({ result, logs: __logs }));`);
  });
}

const run = process.env.EXEC_MODE === 'subprocess' ? inSubprocess : inVm;
const s = new McpServer({ name: 'node-codemode-bench', version: '0' });
s.registerTool('execute', { description: 'run JS', inputSchema: { code: z.string() } }, async ({ code }) => {
  const out = await run(code);
  return { content: [{ type: 'text', text: JSON.stringify(out) }] };
});
await s.connect(new StdioServerTransport());
