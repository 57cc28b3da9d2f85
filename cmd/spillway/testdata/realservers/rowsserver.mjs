// A tool server on the TypeScript SDK v1 whose one tool, report, returns
// 300 rows as structuredContent and declares the outputSchema found in a
// file, read again at every tools/list: a test changes it between two
// listings (what one tenant and another are shown). The schema the tests
// write refuses members it does not name (additionalProperties: false)
// and wants 50 rows or more (minItems: 50): a value cut to a few rows, or
// carrying a member the client was not shown, fails the client's check.
//
// Usage:
//   node rowsserver.mjs stdio SCHEMA_FILE
//   node rowsserver.mjs http SCHEMA_FILE   prints "listening http://127.0.0.1:PORT/mcp"
//
// Over HTTP it answers in JSON-response mode, stateless (jsonhttp.mjs).
import fs from 'node:fs';
import { serveJSON } from './jsonhttp.mjs';
import { need } from './npm.mjs';

const { Server } = need('@modelcontextprotocol/sdk/server/index.js');
const { ListToolsRequestSchema, CallToolRequestSchema } = need('@modelcontextprotocol/sdk/types.js');

const [mode, schemaFile] = process.argv.slice(2);

// row is the i-th row: every field a function of i alone.
function row(i) {
  return { id: i, name: `item-${String(i).padStart(4, '0')}`, note: `row ${i} of the report, kept whole by the client's own check` };
}

function newServer() {
  const s = new Server({ name: 'spillway-rowsserver', version: '1.0.0' }, { capabilities: { tools: {} } });
  s.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [{
      name: 'report',
      description: 'The report: 300 rows.',
      inputSchema: { type: 'object', properties: {} },
      outputSchema: JSON.parse(fs.readFileSync(schemaFile, 'utf8')),
    }],
  }));
  s.setRequestHandler(CallToolRequestSchema, async req => {
    if (req.params.name !== 'report') {
      return { isError: true, content: [{ type: 'text', text: `unknown tool ${req.params.name}` }] };
    }
    const rows = Array.from({ length: 300 }, (_, i) => row(i));
    return { content: [{ type: 'text', text: '300 rows' }], structuredContent: { rows } };
  });
  return s;
}

if (mode === 'stdio') {
  const { StdioServerTransport } = need('@modelcontextprotocol/sdk/server/stdio.js');
  await newServer().connect(new StdioServerTransport());
} else if (mode === 'http') {
  serveJSON(newServer, 0);
} else {
  throw new Error(`mode ${mode}: want stdio or http`);
}
