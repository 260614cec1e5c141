// An upload target on 127.0.0.1: parses each request body with Response.formData() (undici) and answers with
// what it saw. Prints its port on the first line of stdout; exits when stdin closes.
// Answer: {method, transferEncoding, contentLength, contentType, bytes, parts: [{name, fileName, contentType, body}]}
// or status 400 with {error, ...} when the body does not parse.
import http from 'node:http';

const server = http.createServer(async (request, response) => {
  const chunks = [];
  for await (const chunk of request) chunks.push(chunk);
  const body = Buffer.concat(chunks);
  const seen = {
    method: request.method,
    transferEncoding: request.headers['transfer-encoding'] ?? null,
    contentLength: request.headers['content-length'] ?? null,
    contentType: request.headers['content-type'] ?? null,
    bytes: body.length,
  };
  try {
    const form = await new Response(body, { headers: { 'content-type': seen.contentType } }).formData();
    seen.parts = [];
    for (const [name, value] of form) {
      if (typeof value === 'string') {
        seen.parts.push({ name, body: Buffer.from(value, 'utf8').toString('base64') });
      } else {
        const data = Buffer.from(await value.arrayBuffer()).toString('base64');
        seen.parts.push({ name, fileName: value.name, contentType: value.type, body: data });
      }
    }
    response.writeHead(200, { 'content-type': 'application/json' });
  } catch (error) {
    seen.error = String(error && error.message || error);
    response.writeHead(400, { 'content-type': 'application/json' });
  }
  response.end(JSON.stringify(seen));
});

server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${server.address().port}\n`);
});
process.stdin.on('end', () => server.close(() => process.exit(0)));
process.stdin.resume();
