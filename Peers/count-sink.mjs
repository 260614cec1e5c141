// The upload benchmark's sink on 127.0.0.1: counts body bytes and does nothing else, answers
// `Expect: 100-continue` at once (so no client waits for it), and answers {bytes, contentLength, transferEncoding}.
// Every client of Benchmarks/upload.sh sends to the same one. Prints its port on the first line of stdout; exits
// when stdin closes.
import http from 'node:http';

// Also {firstChunk, seconds}: the first chunk's size and the time from its arrival to the last byte's, so that a
// test can measure the rate at which the body arrived.
const server = http.createServer((request, response) => {
  let bytes = 0;
  let firstChunk = 0;
  let first = null;
  request.on('data', (chunk) => {
    if (first === null) {
      first = process.hrtime.bigint();
      firstChunk = chunk.length;
    }
    bytes += chunk.length;
  });
  request.on('end', () => {
    const seconds = first === null ? 0 : Number(process.hrtime.bigint() - first) / 1e9;
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end(JSON.stringify({
      bytes,
      firstChunk,
      seconds,
      contentLength: request.headers['content-length'] ?? null,
      transferEncoding: request.headers['transfer-encoding'] ?? null,
    }));
  });
});
// Node answers 100 Continue itself when no 'checkContinue' listener is set.
server.listen(0, '127.0.0.1', () => process.stdout.write(`${server.address().port}\n`));
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
