// The TypeScript MCP SDK 1.x client (@modelcontextprotocol/sdk, 2025 era) against a live operator.
// Usage: node ts_client_v1.mjs <url> <token> <tool> <json-arguments>
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token, tool, args] = process.argv.slice(2);
const client = new Client({ name: "operator-interop-v1", version: "1.0.0" });
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
await client.connect(transport);
const tools = (await client.listTools()).tools.map((t) => t.name);
const answer = await client.callTool({ name: tool, arguments: JSON.parse(args) });
if (answer.content.length !== 1 || answer.content[0].type !== "text") throw new Error("not one text block");
console.log(JSON.stringify({
  protocolVersion: transport.protocolVersion ?? null,
  tools,
  isError: answer.isError ?? false,
  result: JSON.parse(answer.content[0].text),
}));
await client.close();
