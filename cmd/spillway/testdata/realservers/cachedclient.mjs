// An MCP client on the TypeScript SDK that calls a tool with a list it
// holds from before: "v1" (@modelcontextprotocol/sdk, 2025-11-25) lists
// the tools through one server, then connects the same Client (which
// keeps the output schemas it listed) to another and calls; "v2pin"
// (@modelcontextprotocol/client pinned to 2026-07-28, the stateless era)
// lists, then calls through a new Client given the listed tool's
// definition, as a client reusing a cached list (ttlMs) does. Both SDKs
// check the structuredContent of the result against the outputSchema they
// hold, and throw when it does not match.
//
// It prints {"tools": [NAMES]} (or {"error": MESSAGE}) once listed, then
// waits for one line on stdin, {"url": URL, "token": TOKEN}, calls TOOL
// there and prints {"result": RESULT} or {"error": MESSAGE}. A line
// {"url": ""} ends it without a call.
//
// Usage: node cachedclient.mjs v1|v2pin URL TOKEN TOOL
import readline from 'node:readline';
import { need } from './npm.mjs';

const [sdk, url, token, tool] = process.argv.slice(2);

let Client, StreamableHTTPClientTransport;
if (sdk === 'v1') {
  ({ Client } = need('@modelcontextprotocol/sdk/client/index.js'));
  ({ StreamableHTTPClientTransport } = need('@modelcontextprotocol/sdk/client/streamableHttp.js'));
} else if (sdk === 'v2pin') {
  ({ Client, StreamableHTTPClientTransport } = need('@modelcontextprotocol/client'));
} else {
  throw new Error(`sdk ${sdk}: want v1 or v2pin`);
}

const options = sdk === 'v2pin' ? { versionNegotiation: { mode: { pin: '2026-07-28' } } } : {};
const newClient = () => new Client({ name: `spillway-cached-${sdk}`, version: '1.0.0' }, options);
const transportTo = (u, tok) =>
  new StreamableHTTPClientTransport(new URL(u), { requestInit: { headers: tok ? { Authorization: `Bearer ${tok}` } : {} } });
function describe(e) {
  const code = e?.code !== undefined ? ` (code ${e.code})` : '';
  return `${e?.message ?? e}${code}`;
}
const print = v => new Promise(resolve => process.stdout.write(JSON.stringify(v) + '\n', resolve));
// Generous: a deadlock guard, not a timing check.
const opts = { timeout: 600000 };

let client = newClient();
let def;
try {
  await client.connect(transportTo(url, token), opts);
  const { tools } = await client.listTools(undefined, opts);
  def = tools.find(t => t.name === tool);
  await print({ tools: tools.map(t => t.name) });
} catch (e) {
  await print({ error: describe(e) });
  process.exit(0);
}

const lines = readline.createInterface({ input: process.stdin });
const next = JSON.parse((await lines[Symbol.asyncIterator]().next()).value ?? '{"url":""}');
await client.close().catch(() => {});
if (!next.url) process.exit(0);

try {
  let result;
  if (sdk === 'v1') {
    await client.connect(transportTo(next.url, next.token), opts); // the listed schemas stay
    result = await client.callTool({ name: tool, arguments: {} }, undefined, opts);
  } else {
    client = newClient();
    await client.connect(transportTo(next.url, next.token), opts);
    result = await client.callTool({ name: tool, arguments: {} }, { ...opts, toolDefinition: def });
  }
  await print({ result });
} catch (e) {
  await print({ error: describe(e) });
}
await client.close().catch(() => {});
process.exit(0);
