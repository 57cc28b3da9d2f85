// An MCP client on the TypeScript SDK v1 that authenticates with OAuth as
// the MCP authorization spec says, without a human: Spillway answers its
// first request with 401 and a WWW-Authenticate naming the protected-resource
// metadata; the SDK reads it, discovers the authorization server there,
// obtains an access token with the client credentials grant (the
// interactive authorization code flow needs a browser) and retries. It
// lists the tools, calls one, and prints one JSON line:
//
//   {"tools": [NAMES], "result": RESULT, "urls": [EVERY URL IT FETCHED]}
//
// or {"error": MESSAGE}.
//
// Usage: node oauthclient.mjs MCP_URL ISSUER CLIENT_ID CLIENT_SECRET SCOPE TOOL ARGS_JSON
// (SCOPE is the client's configured scope: SDK 1.32's client credentials
// grant asks for it, not for the scope of the challenge.)
import { need } from './npm.mjs';

const { Client } = need('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = need('@modelcontextprotocol/sdk/client/streamableHttp.js');
const { ClientCredentialsProvider } = need('@modelcontextprotocol/sdk/client/auth-extensions.js');

const [url, issuer, clientId, clientSecret, scope, tool, args] = process.argv.slice(2);
const urls = [];
let names = [];
const fetchFn = async (u, init) => {
  const res = await fetch(u, init);
  urls.push(`${init?.method ?? 'GET'} ${u} ${res.status}`);
  return res;
};

try {
  const authProvider = new ClientCredentialsProvider({ clientId, clientSecret, scope, expectedIssuer: issuer });
  const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider, fetch: fetchFn });
  const client = new Client({ name: 'spillway-oauth-test', version: '1.0.0' });
  await client.connect(transport);
  const { tools } = await client.listTools();
  names = tools.map(t => t.name);
  const result = await client.callTool({ name: tool, arguments: JSON.parse(args) });
  console.log(JSON.stringify({ tools: names, result, urls }));
  await client.close();
} catch (e) {
  console.log(JSON.stringify({ error: String(e?.stack ?? e), tools: names, urls }));
}
process.exit(0); // an open GET stream would keep Node running
