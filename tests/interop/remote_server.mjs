// A remote MCP server written with the official TypeScript SDK, for fsbroker's `proxy --url`
// tests: Streamable HTTP (StreamableHTTPServerTransport with an event store, so streams are
// resumable), or with --legacy the HTTP+SSE transport of 2024-11-05 (SSEServerTransport).
//
//   node remote_server.mjs [--legacy] [--json] [--retry-ms N]
//
// Listens on 127.0.0.1, port 0. The first stdout line is {"port": N}; every later line is one
// event the tests wait for: {"event": "http", ...} per HTTP request (method, session,
// last-event-id, protocol version, authorization), "initialize", "delete", "replay",
// "closed-stream", "forgot", "notes-waiting". The MCP endpoint is /mcp (GET and POST; legacy: GET /mcp opens
// the stream, messages go to /messages).
//
// Tools:
// - ask {requests: [[method, params], ...], dropAfter?, via?}: sends each request to the
//   client in turn (on the tool call's own stream, or with via: "get" on the session's GET
//   stream) and returns the answers as JSON text: [{result} | {error: {code, message, data}}].
//   With dropAfter: k, the stream the requests go on is closed after the k-th answer (the
//   client must resume it with Last-Event-ID to get the rest). With timeoutMs: t, the SDK
//   gives up on each request after t ms and cancels it (notifications/cancelled).
// - notes {method, path?, timeoutMs?, announce?}: waits until a notification with that method
//   (and params.path) has arrived from the client, and returns those seen, as JSON text. With
//   announce: true, it first sends notifications/test/waiting on its own stream (the client
//   has the stream once that reaches it).
// - forget: the server forgets this session (later requests carrying its id get 404).
// - big {bytes}: returns a text of that many bytes.
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import * as z from 'zod/v4';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { SSEServerTransport } from '@modelcontextprotocol/sdk/server/sse.js';

const args = process.argv.slice(2);
const legacy = args.includes('--legacy');
const jsonResponses = args.includes('--json');
const retryAt = args.indexOf('--retry-ms');
const retryMs = retryAt >= 0 ? Number(args[retryAt + 1]) : undefined;

function emit(event) {
  process.stdout.write(JSON.stringify(event) + '\n');
}

// Event ids that sort in the order they were stored, per stream, so replays are exact.
class EventStore {
  constructor() {
    this.events = [];
    this.n = 0;
  }
  async storeEvent(streamId, message) {
    this.n += 1;
    const id = `${streamId}::${String(this.n).padStart(8, '0')}`;
    this.events.push({ id, streamId, message });
    return id;
  }
  async getStreamIdForEventId(id) {
    return this.events.find(e => e.id === id)?.streamId;
  }
  async replayEventsAfter(lastEventId, { send }) {
    const at = this.events.findIndex(e => e.id === lastEventId);
    if (at < 0) return '';
    const streamId = this.events[at].streamId;
    let replayed = 0;
    for (const e of this.events.slice(at + 1)) {
      if (e.streamId === streamId && Object.keys(e.message).length > 0) {
        await send(e.id, e.message);
        replayed += 1;
      }
    }
    emit({ event: 'replay', lastEventId, replayed });
    return streamId;
  }
}

const Anything = z.looseObject({});

function text(value) {
  return { content: [{ type: 'text', text: JSON.stringify(value) }] };
}

// One McpServer per session, as the SDK requires.
function makeServer(forget) {
  const server = new McpServer({ name: 'remote-test', version: '1.0.0' });
  const notes = [];
  const waiters = [];
  server.server.fallbackNotificationHandler = async n => {
    notes.push(n);
    for (const w of waiters.splice(0)) w();
  };

  server.registerTool(
    'ask',
    {
      description: 'send requests to the client',
      inputSchema: { requests: z.array(z.tuple([z.string(), z.any()])), dropAfter: z.number().optional(), via: z.string().optional(), timeoutMs: z.number().optional() },
    },
    async ({ requests, dropAfter, via, timeoutMs }, extra) => {
      const answers = [];
      for (const [method, params] of requests) {
        const request = params === null || params === undefined ? { method } : { method, params };
        try {
          const options = timeoutMs === undefined ? undefined : { timeout: timeoutMs };
          const result = via === 'get'
            ? await server.server.request(request, Anything, options)
            : await extra.sendRequest(request, Anything, options);
          answers.push({ result });
        } catch (e) {
          answers.push({ error: { code: e.code, message: e.message, data: e.data } });
        }
        if (dropAfter !== undefined && answers.length === dropAfter) {
          const close = via === 'get' ? extra.closeStandaloneSSEStream : extra.closeSSEStream;
          if (close) {
            close();
            emit({ event: 'closed-stream', via: via ?? 'post' });
          } else {
            emit({ event: 'cannot-close' });
          }
        }
      }
      return text(answers);
    },
  );

  server.registerTool(
    'notes',
    {
      description: 'wait for notifications from the client',
      inputSchema: {
        method: z.string(),
        path: z.string().optional(),
        timeoutMs: z.number().optional(),
        announce: z.boolean().optional(),
      },
    },
    async ({ method, path, timeoutMs, announce }, extra) => {
      const matching = () => notes.filter(n => n.method === method && (path === undefined || n.params?.path === path));
      emit({ event: 'notes-waiting', method });
      if (announce) await extra.sendNotification({ method: 'notifications/test/waiting', params: {} });
      const deadline = Date.now() + (timeoutMs ?? 10000);
      while (matching().length === 0 && Date.now() < deadline) {
        await new Promise(resolve => {
          waiters.push(resolve);
          setTimeout(resolve, deadline - Date.now());
        });
      }
      return text(matching());
    },
  );

  server.registerTool('forget', { description: 'forget this session' }, async extra => {
    forget(extra.sessionId);
    return text({ forgot: extra.sessionId ?? null });
  });

  server.registerTool(
    'big',
    { description: 'a large result', inputSchema: { bytes: z.number() } },
    async ({ bytes }) => text('x'.repeat(bytes)),
  );
  return server;
}

const sessions = new Map();

function forget(sessionId) {
  sessions.delete(sessionId);
  emit({ event: 'forgot', session: sessionId });
}

async function streamable(req, res, url) {
  if (url.pathname !== '/mcp') {
    res.writeHead(404).end();
    return;
  }
  const sid = req.headers['mcp-session-id'];
  if (sid !== undefined) {
    const transport = sessions.get(sid);
    if (!transport) {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32001, message: 'Session not found' } }));
      return;
    }
    await transport.handleRequest(req, res);
    return;
  }
  if (req.method !== 'POST') {
    res.writeHead(400).end('no session');
    return;
  }
  const transport = new StreamableHTTPServerTransport({
    sessionIdGenerator: () => randomUUID(),
    eventStore: new EventStore(),
    retryInterval: retryMs,
    enableJsonResponse: jsonResponses,
    onsessioninitialized: id => {
      sessions.set(id, transport);
      emit({ event: 'initialize', session: id });
    },
    onsessionclosed: id => {
      sessions.delete(id);
      emit({ event: 'delete', session: id });
    },
  });
  await makeServer(forget).connect(transport);
  await transport.handleRequest(req, res);
}

const legacySessions = new Map();

async function oldTransport(req, res, url) {
  if (req.method === 'GET' && url.pathname === '/mcp') {
    const transport = new SSEServerTransport('/messages', res);
    legacySessions.set(transport.sessionId, transport);
    res.on('close', () => legacySessions.delete(transport.sessionId));
    await makeServer(() => {}).connect(transport);
    emit({ event: 'legacy-stream', session: transport.sessionId });
    return;
  }
  if (req.method === 'POST' && url.pathname === '/messages') {
    const transport = legacySessions.get(url.searchParams.get('sessionId'));
    if (!transport) {
      res.writeHead(404).end('no such session');
      return;
    }
    await transport.handlePostMessage(req, res);
    return;
  }
  // What a server of the old transport says to a Streamable HTTP POST.
  res.writeHead(405, { allow: 'GET' }).end();
}

const httpServer = http.createServer((req, res) => {
  const url = new URL(req.url, 'http://127.0.0.1');
  emit({
    event: 'http',
    method: req.method,
    path: url.pathname,
    session: req.headers['mcp-session-id'] ?? null,
    lastEventId: req.headers['last-event-id'] ?? null,
    protocolVersion: req.headers['mcp-protocol-version'] ?? null,
    accept: req.headers['accept'] ?? null,
    authorization: req.headers['authorization'] ?? null,
    team: req.headers['x-team'] ?? null,
  });
  const handle = legacy ? oldTransport : streamable;
  handle(req, res, url).catch(e => {
    emit({ event: 'error', message: String(e) });
    if (!res.headersSent) res.writeHead(500).end();
  });
});

httpServer.listen(0, '127.0.0.1', () => {
  emit({ port: httpServer.address().port });
});

// The test ends the server by closing its stdin (or killing it).
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
