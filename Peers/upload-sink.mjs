// An upload sink on 127.0.0.1 for bodies too large to hold: splits multipart/form-data as it streams in and
// answers with each part's length and SHA-256. Prints its port on the first line of stdout; exits when stdin closes.
// Answer: {transferEncoding, contentLength, bytes, parts: [{headers, bytes, sha256}]} or 400 with {error}.
import http from 'node:http';
import { createHash } from 'node:crypto';

function splitter(boundary) {
  const delimiter = Buffer.from(`\r\n--${boundary}`);
  const parts = [];
  let carry = Buffer.from('\r\n'); // the first delimiter has no CRLF before it
  let state = 'preamble';
  let part = null;
  let done = false;
  function feed(chunk) {
    let data = Buffer.concat([carry, chunk]);
    carry = Buffer.alloc(0);
    while (data.length > 0 && !done) {
      if (state === 'headers') {
        const end = data.indexOf('\r\n\r\n');
        if (end < 0) { carry = data; return; }
        part = { headers: data.subarray(0, end).toString('utf8'), bytes: 0, hash: createHash('sha256') };
        data = data.subarray(end + 4);
        state = 'body';
        continue;
      }
      if (state === 'after-delimiter') {
        if (data.length < 2) { carry = data; return; }
        if (data.subarray(0, 2).toString() === '--') { done = true; return; }
        if (data.subarray(0, 2).toString() !== '\r\n') throw new Error('bad delimiter line');
        data = data.subarray(2);
        state = 'headers';
        continue;
      }
      const at = data.indexOf(delimiter);
      const usable = at >= 0 ? at : Math.max(0, data.length - (delimiter.length - 1));
      if (state === 'body') { part.hash.update(data.subarray(0, usable)); part.bytes += usable; }
      if (at < 0) { carry = data.subarray(usable); return; }
      if (state === 'body') parts.push({ headers: part.headers, bytes: part.bytes, sha256: part.hash.digest('hex') });
      data = data.subarray(at + delimiter.length);
      state = 'after-delimiter';
    }
  }
  return { feed, parts, isDone: () => done };
}

const server = http.createServer(async (request, response) => {
  try {
    const boundary = /boundary="?([^";]+)"?/.exec(request.headers['content-type'] ?? '')?.[1];
    if (!boundary) throw new Error('no boundary');
    const split = splitter(boundary);
    let bytes = 0;
    for await (const chunk of request) { bytes += chunk.length; split.feed(chunk); }
    if (!split.isDone()) throw new Error('body ended before the close delimiter');
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end(JSON.stringify({
      transferEncoding: request.headers['transfer-encoding'] ?? null,
      contentLength: request.headers['content-length'] ?? null,
      bytes, parts: split.parts,
    }));
  } catch (error) {
    response.writeHead(400, { 'content-type': 'application/json' });
    response.end(JSON.stringify({ error: String((error && error.message) || error) }));
  }
});
server.on('checkContinue', (request, response) => server.emit('request', request, response));
server.listen(0, '127.0.0.1', () => process.stdout.write(`${server.address().port}\n`));
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
