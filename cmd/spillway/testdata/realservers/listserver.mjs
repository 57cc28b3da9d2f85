// A tool server on the TypeScript SDK v1 over Streamable HTTP in JSON-response
// mode (stateless: a fresh server per POST), returning the many-item results
// real servers produce:
//
//   list_rows   a FastMCP-shaped list: a Python tool returning list[Row] gives
//               one text item per row (the row as JSON, indent 2), the rows
//               again as structuredContent {"result": [...]}, and an
//               outputSchema that wraps them the way pydantic writes it.
//   read_pages  a PDF reader's shape: one text item of about 3 KB per page,
//               no outputSchema, no structuredContent.
//
// The data is a formula of the index: the same every run.
//
// Usage: node listserver.mjs [port]   (0 or none: a free one); prints
// "listening http://127.0.0.1:PORT/mcp" once it listens.
import { serveJSON } from './jsonhttp.mjs';
import { need } from './npm.mjs';

const { Server } = need('@modelcontextprotocol/sdk/server/index.js');
const { ListToolsRequestSchema, CallToolRequestSchema } = need('@modelcontextprotocol/sdk/types.js');

const cities = ['Lisbon', 'Oslo', 'Nairobi', 'Osaka', 'Quito', 'Tallinn', 'Perth', 'Montreal', 'Dakar', 'Hanoi', 'Bergen'];
const words = ('the of and to in is that for it as with was on be by this are from at or an which have not ' +
  'pressure valve flow spillway reservoir gate level turbine inflow outflow measured basin crest discharge ' +
  'season report table figure section annex rainfall sediment channel structure design capacity').split(' ');

// row is the i-th row: every field a function of i alone.
function row(i) {
  const h = Math.imul(i + 1, 2654435761) >>> 0;
  return {
    id: i,
    name: `user-${String(i).padStart(5, '0')}`,
    email: `user${i}@example.test`,
    city: cities[h % cities.length],
    score: (h % 100000) / 100,
    active: h % 3 !== 0,
    joined: new Date(Date.UTC(2020, 0, 1) + (h % 1500) * 86400000).toISOString().slice(0, 10),
  };
}

// page is the text of page n of total, about 3 KB of words from a formula.
function page(n, total) {
  const out = [`Page ${n} of ${total}`, ''];
  let h = (n * 2246822519) >>> 0;
  let line = [];
  let size = 0;
  while (size < 3000) {
    h = (Math.imul(h, 1103515245) + 12345) >>> 0;
    const w = words[(h >>> 8) % words.length];
    line.push(w);
    size += w.length + 1;
    if (line.length === 12) {
      out.push(line.join(' ') + '.');
      line = [];
    }
  }
  if (line.length) out.push(line.join(' ') + '.');
  return out.join('\n');
}

// rowSchema is what pydantic writes for the Row model FastMCP's list[Row] uses.
const rowSchema = {
  properties: {
    id: { title: 'Id', type: 'integer' },
    name: { title: 'Name', type: 'string' },
    email: { title: 'Email', type: 'string' },
    city: { title: 'City', type: 'string' },
    score: { title: 'Score', type: 'number' },
    active: { title: 'Active', type: 'boolean' },
    joined: { title: 'Joined', type: 'string' },
  },
  required: ['id', 'name', 'email', 'city', 'score', 'active', 'joined'],
  title: 'Row',
  type: 'object',
};

const tools = [
  {
    name: 'list_rows',
    description: 'List the rows of the table (a FastMCP tool returning list[Row]).',
    inputSchema: {
      properties: { count: { default: 50000, title: 'Count', type: 'integer' } },
      title: 'list_rowsArguments',
      type: 'object',
    },
    outputSchema: {
      $defs: { Row: rowSchema },
      properties: { result: { items: { $ref: '#/$defs/Row' }, title: 'Result', type: 'array' } },
      required: ['result'],
      title: 'list_rowsOutput',
      type: 'object',
    },
  },
  {
    name: 'read_pages',
    description: 'Read a document, one text item per page (as a PDF reader does).',
    inputSchema: {
      type: 'object',
      properties: { count: { type: 'integer', default: 120 } },
    },
  },
];

function call(name, args) {
  if (name === 'list_rows') {
    const rows = Array.from({ length: args.count ?? 50000 }, (_, i) => row(i));
    return {
      content: rows.map(r => ({ type: 'text', text: JSON.stringify(r, null, 2) })),
      structuredContent: { result: rows },
    };
  }
  if (name === 'read_pages') {
    const total = args.count ?? 120;
    return { content: Array.from({ length: total }, (_, i) => ({ type: 'text', text: page(i + 1, total) })) };
  }
  return { isError: true, content: [{ type: 'text', text: `unknown tool ${name}` }] };
}

function newServer() {
  const s = new Server({ name: 'spillway-listserver', version: '1.0.0' }, { capabilities: { tools: {} } });
  s.setRequestHandler(ListToolsRequestSchema, async () => ({ tools }));
  s.setRequestHandler(CallToolRequestSchema, async req => call(req.params.name, req.params.arguments ?? {}));
  return s;
}

serveJSON(newServer, Number(process.argv[2] ?? 0));
