// An MCP server written with the official TypeScript SDK's low-level `Server`, for the interop
// tests. Its tools ask the client for roots and files the way any SDK server would:
//   client         what the client declared in `initialize` (capabilities, clientInfo)
//   roots          the SDK's own `listRoots()`
//   request        any request through the SDK's generic `request()` API, e.g. `files/read`
//                  (with `timeoutMs`, the SDK gives up after that long and cancels it)
//   notifications  the `notifications/files/changed` received so far, waiting for `atLeast`
// Every tool answers with one text item holding JSON: `{result}` or `{error: {code, message,
// data}}`, so the test sees exactly what came back through the SDK.
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import {
  CallToolRequestSchema,
  ListToolsRequestSchema,
  ResultSchema,
} from "@modelcontextprotocol/sdk/types.js";

const server = new Server(
  { name: "ts-files-server", version: "1.0.0" },
  { capabilities: { tools: {} } },
);

const changes = [];
const waiters = [];
server.fallbackNotificationHandler = async (notification) => {
  if (notification.method === "notifications/files/changed") {
    changes.push(notification.params);
    for (const wake of waiters.splice(0)) wake();
  }
};

const tools = [
  { name: "client", description: "What the client declared" },
  { name: "roots", description: "The client's roots, through listRoots()" },
  { name: "request", description: "Send one request to the client" },
  { name: "notifications", description: "File changes received so far" },
];

server.setRequestHandler(ListToolsRequestSchema, async () => ({
  tools: tools.map((t) => ({ ...t, inputSchema: { type: "object" } })),
}));

async function outcome(promise) {
  try {
    return { result: await promise };
  } catch (e) {
    return { error: { code: e.code, message: e.message, data: e.data } };
  }
}

async function waitForChanges(atLeast, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  while (changes.length < atLeast && Date.now() < deadline) {
    await new Promise((resolve) => {
      waiters.push(resolve);
      setTimeout(resolve, deadline - Date.now());
    });
  }
  return { result: changes.slice() };
}

server.setRequestHandler(CallToolRequestSchema, async (request) => {
  const args = request.params.arguments ?? {};
  let answer;
  switch (request.params.name) {
    case "client":
      answer = {
        result: {
          capabilities: server.getClientCapabilities(),
          clientInfo: server.getClientVersion(),
        },
      };
      break;
    case "roots":
      answer = await outcome(server.listRoots());
      break;
    case "request":
      answer = await outcome(
        server.request(
          { method: args.method, params: args.params },
          ResultSchema,
          args.timeoutMs === undefined ? undefined : { timeout: args.timeoutMs },
        ),
      );
      break;
    case "notifications":
      answer = await waitForChanges(args.atLeast ?? 0, args.timeoutMs ?? 0);
      break;
    default:
      return { content: [{ type: "text", text: "no such tool" }], isError: true };
  }
  return { content: [{ type: "text", text: JSON.stringify(answer) }] };
});

await server.connect(new StdioServerTransport());
