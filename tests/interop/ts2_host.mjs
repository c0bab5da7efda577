// A host written with the TypeScript SDK 2.x client (`@modelcontextprotocol/client` 2.4.0),
// for the era tests. Usage: node ts2_host.mjs MODE COMMAND [ARGS...]. MODE is the client's
// version negotiation: `legacy` (the SDK's default: `initialize`, never a probe), `auto`
// (probes `server/discover` first, on a short-lived sibling process spawned from the same
// command, and falls back to `initialize`), `modern` (pinned to 2026-07-28: the probe must
// offer it, no fallback) or `prior` (a cached modern verdict, `connect({prior})`: no probe and
// no `initialize`; the first request already carries the 2026-07-28 `_meta`). It launches
// COMMAND over stdio (the proxy, which launches the server), lists the tools, calls each tool
// of HOST_CALLS in turn, and prints one JSON line:
//   {protocolVersion, serverInfo, tools: [names], calls: [{tool, result} | {tool, error}],
//    hostRootsCalls, hostElicitations: [the forms' params], stderr: the command's stderr}
// or {connectError, hostRootsCalls, hostElicitations, stderr} when the connection failed.
// The environment sets the calls and the answers:
//   HOST_CALLS  a JSON list of [TOOL, ARGS] (default [["roots", {}]]); a tool's answer is its
//               first text item, read as JSON when it is JSON
//   HOST_FORM   the content the host's form handler accepts with, as JSON (default {"ok": true})
// The host's roots handler answers a root no broker offers and counts its calls, so a test
// can tell whose roots a server got; its form handler accepts every form with HOST_FORM.
import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';

const [mode, command, ...args] = process.argv.slice(2);
const calls = JSON.parse(process.env.HOST_CALLS ?? '[["roots", {}]]');
const form = JSON.parse(process.env.HOST_FORM ?? '{"ok": true}');
const negotiation = { legacy: 'legacy', auto: 'auto', modern: { pin: '2026-07-28' }, prior: 'legacy' }[mode];
// The verdict a host would have cached from an earlier `server/discover` of the 2.x server.
const prior = {
    kind: 'modern',
    discover: {
        supportedVersions: ['2026-07-28'],
        capabilities: { tools: {} },
        resultType: 'complete',
        _meta: { 'io.modelcontextprotocol/serverInfo': { name: 'ts2-roots-server', version: '1.0.0' } }
    }
};
if (negotiation === undefined) throw new Error(`unknown mode ${mode}`);

const client = new Client(
    { name: 'ts2-host', version: '1.0.0' },
    {
        capabilities: { roots: { listChanged: false }, elicitation: { form: {} } },
        versionNegotiation: { mode: negotiation }
    }
);

let hostRootsCalls = 0;
const hostElicitations = [];
client.setRequestHandler('roots/list', async () => {
    hostRootsCalls += 1;
    return { roots: [{ uri: 'file:///host-own-root', name: 'host-own' }] };
});
client.setRequestHandler('elicitation/create', async (request) => {
    hostElicitations.push(request.params);
    return { action: 'accept', content: form };
});

// The command inherits the whole environment (the SDK passes only a safe few by default), so
// a test can set the proxy's log level; its stderr (the proxy's log) is kept for the report.
const transport = new StdioClientTransport({ command, args, env: { ...process.env }, stderr: 'pipe' });
let stderr = '';
const stderrEnded = new Promise((resolve) => {
    if (!transport.stderr) return resolve();
    transport.stderr.on('data', (chunk) => {
        stderr += chunk.toString();
    });
    transport.stderr.on('end', resolve);
    transport.stderr.on('close', resolve);
});

const say = (report) => process.stdout.write(JSON.stringify(report) + '\n');
const failure = (e) => ({ code: e?.code, message: String(e?.message ?? e), data: e?.data });

// The report waits for the command's stderr to end, so the proxy's log is complete; a
// connection that failed before the command was started (a probe runs on a sibling
// process) has nothing to wait for.
async function closed() {
    await client.close().catch(() => {});
    if (transport.pid !== null) await stderrEnded;
}

try {
    await client.connect(transport, mode === 'prior' ? { prior } : {});
} catch (e) {
    await closed();
    say({ connectError: failure(e), hostRootsCalls, hostElicitations, stderr });
    process.exit(0);
}

const report = {
    protocolVersion: client.getNegotiatedProtocolVersion(),
    serverInfo: client.getServerVersion(),
    tools: [],
    calls: []
};
try {
    report.tools = (await client.listTools()).tools.map((t) => t.name);
} catch (e) {
    report.tools = { error: failure(e) };
}
for (const [tool, toolArgs] of calls) {
    try {
        const r = await client.callTool({ name: tool, arguments: toolArgs ?? {} });
        const text = r.content?.[0]?.text;
        let result;
        try {
            result = JSON.parse(text);
        } catch {
            result = text;
        }
        report.calls.push(r.isError ? { tool, error: { message: text } } : { tool, result });
    } catch (e) {
        report.calls.push({ tool, error: failure(e) });
    }
}
await closed();
say({ ...report, hostRootsCalls, hostElicitations, stderr });
process.exit(0);
