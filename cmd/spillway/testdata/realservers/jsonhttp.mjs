// Serves a TypeScript SDK v1 server over Streamable HTTP in JSON-response
// mode, stateless: a fresh server (newServer()) per POST to /mcp, bodies
// up to 1 MiB. It prints "listening http://127.0.0.1:PORT/mcp" once it
// listens on port (0: a free one).
import http from 'node:http';
import { need } from './npm.mjs';

const { StreamableHTTPServerTransport } = need('@modelcontextprotocol/sdk/server/streamableHttp.js');

export function serveJSON(newServer, port) {
  const httpServer = http.createServer(async (req, res) => {
    if (req.url !== '/mcp' || req.method !== 'POST') {
      res.writeHead(405, { Allow: 'POST' }).end();
      return;
    }
    const chunks = [];
    let size = 0;
    for await (const c of req) {
      size += c.length;
      if (size > 1 << 20) {
        res.writeHead(413).end();
        return;
      }
      chunks.push(c);
    }
    let body;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
      res.writeHead(400).end();
      return;
    }
    const server = newServer();
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.on('close', () => {
      transport.close();
      server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
  });
  httpServer.listen(port, '127.0.0.1', () => {
    console.log(`listening http://127.0.0.1:${httpServer.address().port}/mcp`);
  });
}
