// An HTTPS endpoint whose certificate no platform root vouches for (self-signed), for the
// test that `fsbroker proxy --url` verifies certificates.
//
//   node remote_tls.mjs CERT.pem KEY.pem
//
// Prints {"port": N} first, then {"event": "http"} for every request that got past TLS.
import https from 'node:https';
import fs from 'node:fs';

const [cert, key] = process.argv.slice(2);
const server = https.createServer(
  { cert: fs.readFileSync(cert), key: fs.readFileSync(key) },
  (req, res) => {
    process.stdout.write(JSON.stringify({ event: 'http', method: req.method }) + '\n');
    res.writeHead(404).end();
  },
);
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(JSON.stringify({ port: server.address().port }) + '\n');
});
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
