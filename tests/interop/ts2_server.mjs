// An MCP server written with the TypeScript SDK 2.x (`@modelcontextprotocol/server` 2.4.0),
// served with `serveStdio`, which lets the connection's opening exchange choose the era (a
// dual-era server). Its tool `roots` asks for the client's roots the 2026-07-28 way: it
// returns an `input_required` result with a `roots/list` input request, and on the retry
// answers the roots it got as JSON text (`[{uri, name}]`). Its tool `mixed` asks for roots and
// a form at once, and answers `{roots, confirm}` (`confirm`: the form's content).
// With TS2_SERVER_LEGACY=reject in its environment it is modern-only: `serveStdio` answers
// an `initialize` with `-32022` naming only the modern revisions.
import { McpServer, inputRequired, inputResponse } from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';

serveStdio(() => {
    const server = new McpServer({ name: 'ts2-roots-server', version: '1.0.0' }, { capabilities: { tools: {} } });
    server.registerTool('roots', { description: 'The client roots, asked with input_required' }, async (ctx) => {
        const got = inputResponse(ctx.mcpReq.inputResponses, 'roots');
        if (got.kind !== 'roots') {
            return inputRequired({ inputRequests: { roots: inputRequired.listRoots() } });
        }
        const roots = got.roots.map((r) => ({ uri: r.uri, name: r.name }));
        return { content: [{ type: 'text', text: JSON.stringify(roots) }] };
    });
    // Roots and a confirmation in one input_required result: the mixed case.
    server.registerTool('mixed', { description: 'The client roots and a confirmation, asked at once' }, async (ctx) => {
        const got = inputResponse(ctx.mcpReq.inputResponses, 'roots');
        const confirm = inputResponse(ctx.mcpReq.inputResponses, 'confirm');
        if (got.kind !== 'roots' || confirm.kind !== 'elicit') {
            return inputRequired({
                inputRequests: {
                    roots: inputRequired.listRoots(),
                    confirm: inputRequired.elicit({
                        message: 'Go ahead?',
                        requestedSchema: { type: 'object', properties: { ok: { type: 'boolean' } } }
                    })
                },
                requestState: 'ts2-mixed'
            });
        }
        const roots = got.roots.map((r) => ({ uri: r.uri, name: r.name }));
        return { content: [{ type: 'text', text: JSON.stringify({ roots, confirm: confirm.content }) }] };
    });
    return server;
}, { legacy: process.env.TS2_SERVER_LEGACY === 'reject' ? 'reject' : 'serve' });
