// Prints "ok <file>" or "FAIL <file> <issues>" per settings file, using srt's own schema.
import { SandboxRuntimeConfigSchema } from '@anthropic-ai/sandbox-runtime/dist/sandbox/sandbox-config.js';
import fs from 'node:fs';
for (const f of process.argv.slice(2)) {
  const r = SandboxRuntimeConfigSchema.safeParse(JSON.parse(fs.readFileSync(f, 'utf8')));
  console.log(r.success ? `ok   ${f}` : `FAIL ${f} ${JSON.stringify(r.error.issues)}`);
}
