// The TypeScript MCP SDK 2.x client (@modelcontextprotocol/client) against a live operator.
// Usage: node ts_client_v2.mjs <url> <token> <auto|legacy> <tool> <json-arguments>
// Prints one JSON line: {protocolVersion, tools, result} — result is the decoded text block.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

const [url, token, mode, tool, args] = process.argv.slice(2);
const client = new Client({ name: "operator-interop-v2", version: "1.0.0" }, { versionNegotiation: { mode } });
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
await client.connect(transport);
const tools = (await client.listTools()).tools.map((t) => t.name);
const answer = await client.callTool({ name: tool, arguments: JSON.parse(args) });
if (answer.content.length !== 1 || answer.content[0].type !== "text") throw new Error("not one text block");
console.log(JSON.stringify({
  protocolVersion: client.getNegotiatedProtocolVersion?.() ?? null,
  tools,
  isError: answer.isError ?? false,
  result: JSON.parse(answer.content[0].text),
}));
await client.close();
