// A host written with the official TypeScript SDK's `Client`, for the interop tests. It
// launches the command given as its arguments (the proxy, which launches the server) with the
// SDK's stdio transport, then takes orders from its own stdin, one JSON-RPC-shaped line each:
//   {"id", "method": TOOL, "params": ARGS}  calls the server's tool TOOL and answers
//                                           {"id", "result": <the tool's JSON answer>}
//   {"id", "method": "$elicitations"}       answers the elicitation requests received so far
//   {"id", "method": "$server"}             answers the server's name, version and protocol
// The environment sets the client's side:
//   HOST_CAPABILITIES  the client capabilities, as JSON (default `{}`)
//   HOST_ELICIT        the answer to any `elicitation/create`, as JSON (an ElicitResult)
//   HOST_ELICIT_LATE   when set, the user answers only once the request was cancelled
//                      (`notifications/cancelled`); the record then says `cancelled: true`
// End of input closes the client, and with it the proxy's stdin.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { createInterface } from "node:readline";

const [command, ...args] = process.argv.slice(2);
const capabilities = JSON.parse(process.env.HOST_CAPABILITIES ?? "{}");
const client = new Client({ name: "ts-host", version: "1.0.0" }, { capabilities });

const elicitations = [];
if (capabilities.elicitation) {
  client.setRequestHandler(ElicitRequestSchema, async (request, extra) => {
    const record = { ...request.params };
    elicitations.push(record);
    if (process.env.HOST_ELICIT_LATE) {
      await new Promise((resolve) => {
        if (extra.signal.aborted) resolve();
        extra.signal.addEventListener("abort", resolve);
      });
      record.cancelled = true;
    }
    return JSON.parse(process.env.HOST_ELICIT ?? '{"action":"decline"}');
  });
}
// A request the client has no handler for (an elicitation it did not declare, say) is still
// recorded, so a test can tell that it was never sent; the SDK then answers it with an error.
client.fallbackRequestHandler = async (request) => {
  if (request.method === "elicitation/create") elicitations.push(request.params);
  throw new Error(`unexpected request ${request.method}`);
};

const transport = new StdioClientTransport({ command, args, stderr: "inherit" });
await client.connect(transport);

const say = (message) => process.stdout.write(JSON.stringify(message) + "\n");

async function answer(order) {
  switch (order.method) {
    case "$elicitations":
      return elicitations;
    case "$server":
      return {
        serverInfo: client.getServerVersion(),
        capabilities: client.getServerCapabilities(),
      };
    default: {
      const r = await client.callTool({ name: order.method, arguments: order.params ?? {} });
      if (r.isError) throw new Error(JSON.stringify(r.content));
      return JSON.parse(r.content[0].text);
    }
  }
}

const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  if (!line.trim()) continue;
  const order = JSON.parse(line);
  try {
    say({ jsonrpc: "2.0", id: order.id, result: await answer(order) });
  } catch (e) {
    say({ jsonrpc: "2.0", id: order.id, error: { code: -32000, message: String(e) } });
  }
}
await client.close();
