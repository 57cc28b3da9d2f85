// An MCP client on the TypeScript SDK, v1 (@modelcontextprotocol/sdk) or v2
// (@modelcontextprotocol/client; "v2pin" is v2 pinned to the stateless era,
// 2026-07-28, where v1 and v2 speak 2025-11-25), as an agent's host runs it: it connects,
// lists the tools (the SDK keeps their outputSchemas and validates each
// structuredContent against them), calls tools and prints one JSON line per
// call:
//
//   {"name": TOOL, "result": RESULT, "error": MESSAGE, "wireBytes": N, "message": RAW}
//
// RESULT is the result as the SDK returned it, after its own checks; error is
// set instead when the call threw (a schema check failed, the connection
// closed, a JSON-RPC error). wireBytes is the size of the response as it
// arrived: the body of the POST that carried the call (Streamable HTTP), or
// the longest line the child wrote during the call (stdio); -1 when unknown.
// RAW is the JSON-RPC response message as it arrived, byte for byte (the
// SDKs drop what their schemas do not name), when it is under 1 MiB.
// The first line is {"tools": [NAMES]}, or {"error": MESSAGE} when the
// connection or the listing failed. After the last call the client stays
// connected until its stdin ends, so that the links of a `spillway serve
// --stdio` it started can still be fetched.
//
// Usage:
//   node client.mjs v1|v2|v2pin http URL [TOKEN] CALLS
//   node client.mjs v1|v2|v2pin stdio ARGV_JSON ENV_JSON CALLS
// CALLS is a JSON array of {"name": TOOL, "arguments": {...}}.
import { need } from './npm.mjs';

const [sdk, mode, ...rest] = process.argv.slice(2);
const calls = JSON.parse(rest.at(-1));

let Client, StreamableHTTPClientTransport, StdioClientTransport;
if (sdk === 'v1') {
  ({ Client } = need('@modelcontextprotocol/sdk/client/index.js'));
  ({ StreamableHTTPClientTransport } = need('@modelcontextprotocol/sdk/client/streamableHttp.js'));
  ({ StdioClientTransport } = need('@modelcontextprotocol/sdk/client/stdio.js'));
} else if (sdk === 'v2' || sdk === 'v2pin') {
  ({ Client, StreamableHTTPClientTransport } = need('@modelcontextprotocol/client'));
  ({ StdioClientTransport } = need('@modelcontextprotocol/client/stdio'));
} else {
  throw new Error(`sdk ${sdk}: want v1, v2 or v2pin`);
}

// call is the record of the call in flight: the bytes of its response
// (wire), the messages that arrived meanwhile when small, and the HTTP
// bodies still being read (pending).
let call = null;
const keepUnder = 1 << 20;

// response picks the response among raw messages.
function response(raws) {
  for (const m of raws) {
    try {
      const v = JSON.parse(m);
      if (v.id !== undefined && (v.result !== undefined || v.error !== undefined)) return m;
    } catch {}
  }
  return undefined;
}

// countingFetch passes the body of each POST that carries a tools/call
// through a counter, on its way to the SDK.
async function countingFetch(url, init) {
  const res = await fetch(url, init);
  const rec = call;
  if (!rec || init?.method !== 'POST' || !res.body || !String(init.body).includes('"tools/call"')) {
    return res;
  }
  const chunks = [];
  let done;
  rec.pending.push(new Promise(resolve => (done = resolve)));
  const counter = new TransformStream({
    transform(chunk, ctl) {
      rec.wire += chunk.byteLength;
      if (rec.wire < keepUnder) chunks.push(chunk);
      ctl.enqueue(chunk);
    },
    flush() {
      done();
      if (rec.wire >= keepUnder) return;
      const body = Buffer.concat(chunks).toString('utf8');
      if (!(res.headers.get('content-type') ?? '').includes('text/event-stream')) {
        rec.messages.push(body);
        return;
      }
      // Each SSE event's data lines, joined, are one message.
      for (const ev of body.split(/\r?\n\r?\n/)) {
        const data = ev.split(/\r?\n/).filter(l => l.startsWith('data:')).map(l => l.slice(5).replace(/^ /, ''));
        if (data.length) rec.messages.push(data.join('\n'));
      }
    },
  });
  return new Response(res.body.pipeThrough(counter), { status: res.status, statusText: res.statusText, headers: res.headers });
}

let transport;
if (mode === 'http') {
  const [url, token] = rest.length > 2 ? rest : [rest[0], ''];
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers }, fetch: countingFetch });
} else if (mode === 'stdio') {
  const argv = JSON.parse(rest[0]);
  transport = new StdioClientTransport({ command: argv[0], args: argv.slice(1), env: JSON.parse(rest[1]) });
} else {
  throw new Error(`mode ${mode}: want http or stdio`);
}

// watchLines records, for stdio, the longest line the child writes while a
// call is counted. The SDK's own listener reads the same chunks.
function watchLines(t) {
  const out = t._process?.stdout;
  if (!out) return;
  let line = 0;
  let parts = [];
  out.on('data', chunk => {
    const rec = call;
    let from = 0;
    for (let nl = chunk.indexOf(10); nl >= 0; nl = chunk.indexOf(10, from)) {
      line += nl - from;
      if (rec) {
        rec.wire = Math.max(rec.wire, line);
        if (line < keepUnder) rec.messages.push(Buffer.concat([...parts, chunk.subarray(from, nl)]).toString('utf8'));
      }
      line = 0;
      parts = [];
      from = nl + 1;
    }
    line += chunk.length - from;
    if (line < keepUnder) parts.push(chunk.subarray(from));
    if (rec) rec.wire = Math.max(rec.wire, line);
  });
}

function describe(e) {
  const code = e?.code !== undefined ? ` (code ${e.code})` : '';
  return `${e?.message ?? e}${code}`;
}

// v2pin speaks only the stateless era (2026-07-28): no fallback.
const clientOptions = sdk === 'v2pin' ? { versionNegotiation: { mode: { pin: '2026-07-28' } } } : undefined;
const client = new Client({ name: `spillway-realservers-${sdk}`, version: '1.0.0' }, clientOptions);
// Generous: a deadlock guard, not a timing check.
const opts = { timeout: 600000 };
try {
  await client.connect(transport, opts);
  if (mode === 'stdio') watchLines(transport);
  const { tools } = await client.listTools(undefined, opts);
  process.stdout.write(JSON.stringify({ tools: tools.map(t => t.name) }) + '\n');
} catch (e) {
  process.stdout.write(JSON.stringify({ error: describe(e) }) + '\n');
  process.exit(0);
}

for (const c of calls) {
  const rec = { wire: mode === 'stdio' && !transport._process ? -1 : 0, messages: [], pending: [] };
  call = rec;
  const report = { name: c.name };
  try {
    const params = { name: c.name, arguments: c.arguments ?? {} };
    // v1 takes a result schema before the options; v2 does not.
    report.result = await (sdk === 'v1' ? client.callTool(params, undefined, opts) : client.callTool(params, opts));
  } catch (e) {
    report.error = describe(e);
  }
  call = null;
  // The SDK may settle before the counter sees the end of the body; a body
  // it cancelled never ends (the guard).
  await Promise.race([Promise.all(rec.pending), new Promise(resolve => setTimeout(resolve, 10000).unref())]);
  report.wireBytes = rec.wire;
  report.message = response(rec.messages);
  await new Promise(resolve => process.stdout.write(JSON.stringify(report) + '\n', resolve));
}
process.stdin.resume();
await new Promise(resolve => process.stdin.on('end', resolve));
await client.close().catch(() => {});
process.exit(0);
