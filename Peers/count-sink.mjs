// The upload benchmark's sink on 127.0.0.1: counts body bytes and does nothing else, answers
// `Expect: 100-continue` at once (so no client waits for it), and answers {bytes, contentLength, transferEncoding}.
// Every client of Benchmarks/upload.sh sends to the same one. Prints its port on the first line of stdout; exits
// when stdin closes.
import http from 'node:http';

const server = http.createServer((request, response) => {
  let bytes = 0;
  request.on('data', (chunk) => { bytes += chunk.length; });
  request.on('end', () => {
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end(JSON.stringify({
      bytes,
      contentLength: request.headers['content-length'] ?? null,
      transferEncoding: request.headers['transfer-encoding'] ?? null,
    }));
  });
});
// Node answers 100 Continue itself when no 'checkContinue' listener is set.
server.listen(0, '127.0.0.1', () => process.stdout.write(`${server.address().port}\n`));
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
