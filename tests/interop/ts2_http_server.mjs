// A remote MCP server written with the TypeScript SDK 2.x (`@modelcontextprotocol/server`
// 2.4.0), serving revision 2026-07-28's Streamable HTTP only (`createMcpHandler` with
// `legacy: 'reject'`), on node:http at 127.0.0.1, port 0, endpoint /mcp. The first stdout
// line is {"port": N}; then one {"event": "http", method, rpc, id, params} line per POST
// (`params`: its Mcp-Param-* headers, lower-case names). It ends when its stdin closes.
//
// Tools:
// - region {region, query}: `region` carries `x-mcp-header: Region`, so the SDK refuses a
//   call without a matching `Mcp-Param-Region` header (400, -32020); answers
//   {region, query} as JSON text.
// - roots: asks for the client's roots the 2026-07-28 way (an `input_required` result with
//   a `roots/list` input request) and answers the roots it got as JSON text ([{uri, name}]).
import http from 'node:http';
import { McpServer, createMcpHandler, fromJsonSchema, inputRequired, inputResponse } from '@modelcontextprotocol/server';

function emit(event) {
    process.stdout.write(JSON.stringify(event) + '\n');
}

const factory = () => {
    const server = new McpServer({ name: 'ts2-http-server', version: '1.0.0' }, { capabilities: { tools: {} } });
    server.registerTool(
        'region',
        {
            description: 'Answers the region and query it got',
            inputSchema: fromJsonSchema({
                type: 'object',
                properties: {
                    region: { type: 'string', 'x-mcp-header': 'Region' },
                    query: { type: 'string' }
                },
                required: ['region', 'query']
            })
        },
        async (args) => ({ content: [{ type: 'text', text: JSON.stringify({ region: args.region, query: args.query }) }] })
    );
    server.registerTool('roots', { description: 'The client roots, asked with input_required' }, async (ctx) => {
        const got = inputResponse(ctx.mcpReq.inputResponses, 'roots');
        if (got.kind !== 'roots') {
            return inputRequired({ inputRequests: { roots: inputRequired.listRoots() } });
        }
        const roots = got.roots.map((r) => ({ uri: r.uri, name: r.name }));
        return { content: [{ type: 'text', text: JSON.stringify(roots) }] };
    });
    return server;
};

const handler = createMcpHandler(factory, { legacy: 'reject' });

// node:http in front of the handler's web-standard face: the request becomes a `Request`,
// the `Response` is streamed back as it comes.
const listener = http.createServer(async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const body = Buffer.concat(chunks);
    if (req.method === 'POST') {
        let msg = null;
        try {
            msg = JSON.parse(body.toString('utf8'));
        } catch {}
        const params = {};
        for (const [k, v] of Object.entries(req.headers)) {
            if (k.startsWith('mcp-param-')) params[k] = v;
        }
        emit({ event: 'http', method: 'POST', rpc: msg?.method ?? null, id: msg?.id ?? null, params });
    }
    const headers = new Headers();
    for (const [k, v] of Object.entries(req.headers)) {
        if (Array.isArray(v)) v.forEach((x) => headers.append(k, x));
        else if (v !== undefined) headers.set(k, v);
    }
    const abort = new AbortController();
    res.on('close', () => abort.abort());
    const request = new Request(`http://${req.headers.host}${req.url}`, {
        method: req.method,
        headers,
        body: req.method === 'GET' || req.method === 'HEAD' ? undefined : body,
        signal: abort.signal
    });
    let response;
    try {
        response = await handler.fetch(request);
    } catch (e) {
        res.writeHead(500).end(String(e));
        return;
    }
    res.writeHead(response.status, Object.fromEntries(response.headers.entries()));
    if (!response.body) {
        res.end();
        return;
    }
    try {
        for await (const chunk of response.body) res.write(chunk);
    } catch {}
    res.end();
});

listener.listen(0, '127.0.0.1', () => emit({ port: listener.address().port }));
process.stdin.resume();
process.stdin.on('end', () => process.exit(0));
