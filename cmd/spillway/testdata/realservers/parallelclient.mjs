// The TypeScript SDK v2 client pinned to 2026-07-28, declaring sampling and
// elicitation as that client does, runs CALLS tool calls of
// @modelcontextprotocol/server-everything at once, as an agent running
// tools in parallel does: SAMPLING of them trigger-sampling-request (the
// server asks the client, which answers with fixed content), the rest
// echo. It prints one JSON line:
//
//   {"ok": N, "errors": [MESSAGE, ...]}
//
// N counts the calls whose result is what the tool returns; a call that
// failed or returned something else adds its message. A connect failure
// prints {"error": MESSAGE}.
//
// Usage: node parallelclient.mjs URL TOKEN CALLS SAMPLING
import { need } from './npm.mjs';

const [url, token, calls, sampling] = process.argv.slice(2);
const { Client, StreamableHTTPClientTransport } = need('@modelcontextprotocol/client');

const client = new Client({ name: 'spillway-parallel', version: '1.0.0' },
  { capabilities: { sampling: {}, elicitation: {} }, versionNegotiation: { mode: { pin: '2026-07-28' } } });
client.setRequestHandler('sampling/createMessage', async () => ({
  model: 'fixed-model', role: 'assistant', content: { type: 'text', text: 'sampled by the test client' },
}));
client.setRequestHandler('elicitation/create', async () => ({ action: 'decline' }));

const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${token}` } } });
// Generous: a deadlock guard, not a timing check.
const opts = { timeout: 600000 };
const print = v => new Promise(resolve => process.stdout.write(JSON.stringify(v) + '\n', resolve));
const describe = e => `${e?.message ?? e}${e?.code !== undefined ? ` (code ${e.code})` : ''}`;

try {
  await client.connect(transport, opts);
} catch (e) {
  await print({ error: describe(e) });
  process.exit(0);
}

const one = async i => {
  const asks = i < Number(sampling);
  const r = asks
    ? await client.callTool({ name: 'trigger-sampling-request', arguments: { prompt: `call ${i}` } }, opts)
    : await client.callTool({ name: 'echo', arguments: { message: `call ${i}` } }, opts);
  const text = JSON.stringify(r.content ?? []);
  const want = asks ? 'sampled by the test client' : `call ${i}`;
  if (r.isError || !text.includes(want)) throw new Error(`call ${i} returned ${text.slice(0, 300)}`);
};
const settled = await Promise.allSettled(Array.from({ length: Number(calls) }, (_, i) => one(i)));
await print({
  ok: settled.filter(s => s.status === 'fulfilled').length,
  errors: settled.filter(s => s.status === 'rejected').map(s => describe(s.reason)),
});
await client.close().catch(() => {});
process.exit(0);
