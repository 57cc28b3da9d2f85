// A session-era MCP client on the TypeScript SDK v1 (@modelcontextprotocol/sdk,
// protocol 2025-11-25), as a host with a model and a user runs it: it
// declares sampling, elicitation and roots, answers the server's requests
// with text naming NAME, and runs the steps a user of a tool server takes.
// It prints one JSON object:
//
//   {"protocolVersion": V, "server": NAME, "tools": [NAMES],
//    "steps": [{"step": STEP, "result": RESULT} | {"step": STEP, "error": MESSAGE}],
//    "asked": [METHODS]}
//
// asked lists the server-to-client requests the client answered, in order.
//
// Usage:
//   node eraclient.mjs NAME http URL TOKEN
//   node eraclient.mjs NAME stdio ARGV_JSON
import { need } from './npm.mjs';

const { Client } = need('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = need('@modelcontextprotocol/sdk/client/streamableHttp.js');
const { StdioClientTransport } = need('@modelcontextprotocol/sdk/client/stdio.js');
const { CreateMessageRequestSchema, ElicitRequestSchema, ListRootsRequestSchema } = need('@modelcontextprotocol/sdk/types.js');

const [name, mode, target, token] = process.argv.slice(2);
let transport;
if (mode === 'http') {
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  transport = new StreamableHTTPClientTransport(new URL(target), { requestInit: { headers } });
} else {
  const argv = JSON.parse(target);
  transport = new StdioClientTransport({ command: argv[0], args: argv.slice(1) });
}

const asked = [];
const client = new Client({ name, version: '1.0.0' }, { capabilities: { sampling: {}, elicitation: {}, roots: { listChanged: true } } });
client.setRequestHandler(CreateMessageRequestSchema, async req => {
  asked.push(req.method);
  const said = req.params.messages[0]?.content?.text ?? '';
  return { role: 'assistant', model: 'test-model', content: { type: 'text', text: `${name} heard ${said}` } };
});
client.setRequestHandler(ElicitRequestSchema, async req => {
  asked.push(req.method);
  return { action: 'accept', content: { name } };
});
client.setRequestHandler(ListRootsRequestSchema, async req => {
  asked.push(req.method);
  return { roots: [{ uri: `file:///${name}`, name }] };
});

// Generous: a deadlock guard, not a timing check.
const opts = { timeout: 120000 };
const out = { steps: [], asked };
try {
  await client.connect(transport, opts);
  out.protocolVersion = transport.protocolVersion ?? client._negotiatedProtocolVersion ?? null;
  out.server = client.getServerVersion()?.name;
  out.tools = (await client.listTools(undefined, opts)).tools.map(t => t.name);
} catch (e) {
  out.error = `${e?.message ?? e}`;
  process.stdout.write(JSON.stringify(out) + '\n');
  process.exit(0);
}

const steps = [
  ['tools/call echo', () => client.callTool({ name: 'echo', arguments: { text: name } }, undefined, opts)],
  ['tools/call sample', () => client.callTool({ name: 'sample', arguments: { text: name } }, undefined, opts)],
  ['tools/call elicit', () => client.callTool({ name: 'elicit', arguments: {} }, undefined, opts)],
  ['tools/call roots', () => client.callTool({ name: 'roots', arguments: {} }, undefined, opts)],
  ['tools/call big', () => client.callTool({ name: 'big', arguments: {} }, undefined, opts)],
  ['resources/read', () => client.readResource({ uri: 'era://hello' }, opts)],
  ['prompts/get', () => client.getPrompt({ name: 'greet', arguments: { name } }, opts)],
  ['ping', () => client.ping(opts)],
];
for (const [step, run] of steps) {
  try {
    out.steps.push({ step, result: await run() });
  } catch (e) {
    out.steps.push({ step, error: `${e?.message ?? e}` });
  }
}
await client.close().catch(() => {});
process.stdout.write(JSON.stringify(out) + '\n');
process.exit(0);
