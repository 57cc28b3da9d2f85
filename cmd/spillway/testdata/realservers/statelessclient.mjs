// An MCP client of either era against @modelcontextprotocol/server-everything
// over Streamable HTTP: "v1" is the TypeScript SDK v1 client (2025-11-25),
// "v2pin" the SDK v2 client pinned to 2026-07-28 (no fallback: a server it
// cannot speak to fails the connect). It declares sampling and elicitation
// and answers them with fixed content, then runs the steps below in order
// and prints one JSON line per step:
//
//   {"step": NAME, "result": RESULT, "error": MESSAGE, "size": N}
//
// RESULT is what the SDK returned, after its own schema checks; size is
// the length of its JSON. The first line is {"tools": [NAMES], "version":
// V} or {"error": MESSAGE} when the connection or the listing failed.
//
// Usage: node statelessclient.mjs v1|v2pin URL [TOKEN]
import { need } from './npm.mjs';

const [sdk, url, token] = process.argv.slice(2);

let Client, StreamableHTTPClientTransport, samplingMethod, elicitMethod;
if (sdk === 'v1') {
  ({ Client } = need('@modelcontextprotocol/sdk/client/index.js'));
  ({ StreamableHTTPClientTransport } = need('@modelcontextprotocol/sdk/client/streamableHttp.js'));
  const types = need('@modelcontextprotocol/sdk/types.js');
  samplingMethod = types.CreateMessageRequestSchema;
  elicitMethod = types.ElicitRequestSchema;
} else if (sdk === 'v2pin') {
  ({ Client, StreamableHTTPClientTransport } = need('@modelcontextprotocol/client'));
  samplingMethod = 'sampling/createMessage';
  elicitMethod = 'elicitation/create';
} else {
  throw new Error(`sdk ${sdk}: want v1 or v2pin`);
}

const options = { capabilities: { sampling: {}, elicitation: {} } };
if (sdk === 'v2pin') options.versionNegotiation = { mode: { pin: '2026-07-28' } };
const client = new Client({ name: `spillway-stateless-${sdk}`, version: '1.0.0' }, options);
client.setRequestHandler(samplingMethod, async () => ({
  model: 'fixed-model', role: 'assistant', content: { type: 'text', text: 'sampled by the test client' },
}));
client.setRequestHandler(elicitMethod, async () => ({ action: 'accept', content: { name: 'Ada Lovelace' } }));

// big is 300 KB that gzip cannot shrink (a fixed linear congruential
// sequence), as a data: URI for gzip-file-as-resource.
function big() {
  const b = Buffer.alloc(300 << 10);
  let x = 12345;
  for (let i = 0; i < b.length; i++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    b[i] = x >>> 24;
  }
  return 'data:application/octet-stream;base64,' + b.toString('base64');
}

const headers = token ? { Authorization: `Bearer ${token}` } : {};
const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
// Generous: a deadlock guard, not a timing check.
const opts = { timeout: 600000 };
const v1 = sdk === 'v1';
const call = (name, args) => (v1 ? client.callTool({ name, arguments: args }, undefined, opts) : client.callTool({ name, arguments: args }, opts));
const steps = [
  ['echo', () => call('echo', { message: 'across the eras' })],
  ['resources/read', () => client.readResource({ uri: 'demo://resource/static/document/architecture.md' }, opts)],
  ['prompts/get', () => client.getPrompt({ name: 'args-prompt', arguments: { city: 'Paris', state: 'France' } }, opts)],
  ['sampling', () => call('trigger-sampling-request', { prompt: 'say hi' })],
  ['elicitation', () => call('trigger-elicitation-request', {})],
  ['large', () => call('gzip-file-as-resource', { name: 'big.gz', data: big(), outputType: 'resource' })],
];

function describe(e) {
  const code = e?.code !== undefined ? ` (code ${e.code})` : '';
  return `${e?.message ?? e}${code}`;
}
const print = v => new Promise(resolve => process.stdout.write(JSON.stringify(v) + '\n', resolve));

try {
  await client.connect(transport, opts);
  const { tools } = await client.listTools(undefined, opts);
  await print({ tools: tools.map(t => t.name), version: client.getNegotiatedProtocolVersion?.() ?? transport.protocolVersion });
} catch (e) {
  await print({ error: describe(e) });
  process.exit(0);
}
for (const [step, run] of steps) {
  const report = { step };
  try {
    report.result = await run();
    report.size = JSON.stringify(report.result).length;
  } catch (e) {
    report.error = describe(e);
  }
  await print(report);
}
await client.close().catch(() => {});
process.exit(0);
