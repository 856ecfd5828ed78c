// Anchor (d): a minimal stateless MCP server built only with the TypeScript SDK, one trivial tool.
//
//     node bench/anchor_ts_server.mjs --port 9004
//
// The pattern of the SDK's own stateless example (examples/server/simpleStatelessStreamableHttp):
// a fresh McpServer and StreamableHTTPServerTransport({sessionIdGenerator: undefined}) per request,
// both closed when the response closes — on node's http module (no express), so the figure is the
// SDK's cost and node's, nothing else. The SDK is the one pinned for the interop tests
// (tests/interop/package.json); `npm install` there first.

import http from "node:http";

const SDK = new URL("../tests/interop/node_modules/@modelcontextprotocol/sdk/dist/esm/", import.meta.url);
const ZOD = new URL("../tests/interop/node_modules/zod/v4/index.js", import.meta.url);
const { McpServer } = await import(new URL("server/mcp.js", SDK).href);
const { StreamableHTTPServerTransport } = await import(new URL("server/streamableHttp.js", SDK).href);
const z = await import(ZOD.href);

function portFromArgs() {
  const at = process.argv.indexOf("--port");
  const port = at > 0 ? Number(process.argv[at + 1]) : NaN;
  if (!Number.isInteger(port) || port <= 0) {
    console.error("usage: node bench/anchor_ts_server.mjs --port N");
    process.exit(2);
  }
  return port;
}

function makeServer() {
  const server = new McpServer({ name: "anchor-ts", version: "1.0.0" });
  server.registerTool(
    "echo",
    { description: "Return the text, as indented JSON.", inputSchema: { text: z.string().optional() } },
    async ({ text }) => ({
      content: [{ type: "text", text: JSON.stringify({ ok: true, text: text ?? "" }, null, 2) }],
    }),
  );
  return server;
}

function readJson(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    req.on("data", (chunk) => chunks.push(chunk));
    req.on("end", () => {
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString("utf8")));
      } catch (error) {
        reject(error);
      }
    });
    req.on("error", reject);
  });
}

function fail(res, status, message) {
  if (res.headersSent) return;
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32603, message }, id: null }));
}

const httpServer = http.createServer(async (req, res) => {
  if (req.method !== "POST" || !req.url.startsWith("/mcp")) {
    fail(res, 405, "Method not allowed.");
    return;
  }
  const server = makeServer();
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
  res.on("close", () => {
    transport.close();
    server.close();
  });
  try {
    const body = await readJson(req);
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
  } catch (error) {
    fail(res, 500, String(error));
  }
});
// Keep-alive connections stay open between the load generator's requests.
httpServer.keepAliveTimeout = 60_000;
httpServer.listen(portFromArgs(), "127.0.0.1");
process.on("SIGTERM", () => process.exit(0));
