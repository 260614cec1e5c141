// An upload target on 127.0.0.1 for the tests: parses each request body with Response.formData() (undici) and
// answers with what it saw. Prints its port on the first line of stdout; exits when stdin closes.
//   /upload           parse and answer {method, transferEncoding, contentLength, contentType, expect,
//                     authorization, cookie, proxyAuthorization, userAgent, tag (X-Tag), bytes, parts: [{name, fileName, contentType, body (base64)}]};
//                     400 with {error} when the body does not parse
//   /flaky/N          reads the body, then answers 503 to the first N requests with the same query, then as
//                     /upload (the query tells tests apart)
//   /silent           reads the body and never answers
//   /auth             401 (Basic realm="uploads") until the request carries Authorization: Basic dTpw (u:p)
//   /redirect/CODE    answers CODE with Location: /upload, or the path given as ?to=; with ?early, before
//                     reading the body, closing the connection as /early does
//   /elsewhere/CODE   answers CODE with Location: http://localhost:PORT/upload (or the path given as ?to=),
//                     another origin than 127.0.0.1
//   /headers          answers 200 with what /upload answers, whatever the method and body
//   /raw-headers      answers {requestLine, headers: [[name, value]...]}: every header as it came, in order
//   /slow             reads the body slowly (64 KiB per 50 ms, or per ?ms=N), then as /upload
//   /cut/CODE         reads the body, sends CODE's headers with Content-Length: 1000 and 10 bytes of it, then
//                     resets the connection
//   /echo             answers {contentType, body (base64)}: the raw request body, for byte comparisons
//   /status/CODE      answers CODE with a short text body
//   /length-required  411 to a body without Content-Length (chunked), as S3-style servers do; else as /upload
//   /early            answers 200 at once, without reading the body, and closes its side of the connection
//   /early/CODE       answers CODE in the same way
//   /early-drain      answers 200 at once, then reads the whole body and discards it (a lingering close, as nginx
//                     does), so that the client hands out every byte before its task ends
//   /log              the list of requests seen so far: [{path, query, method, bytes, contentLength,
//                     transferEncoding, port, authorization, cookie, proxyAuthorization}]
//   /heads            the path of every request whose head arrived (other than /log, /heads and /connections),
//                     logged before its body is read, so that a request whose body never came counts too
//   /connections      how many connections are open, the asking one aside, `port` being the client's, so that a test can count connections
// It never answers `Expect: 100-continue`, as many servers and proxies do not.
import http from 'node:http';
import { formDataParts } from './formdata-parts.mjs';

const log = [];
// The path of every request whose head arrived, before its body is read: a request that never finished counts.
const heads = [];
const flakyAnswers = new Map();

// Answers before reading the body, then shuts down its side of the connection and reads no more, keeping the socket
// until the server stops. Closing the socket itself with bytes unread would reset the connection, and a client still
// sending could meet the reset before it read the answer (it did, under load).
function answerUnread(request, status, headers, body) {
  request.pause();
  const lines = Object.entries({ ...headers, 'content-length': Buffer.byteLength(body), connection: 'close' })
    .map(([name, value]) => `${name}: ${value}\r\n`).join('');
  request.socket.end(`HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\n${lines}\r\n${body}`);
}

async function readBody(request, pause) {
  const chunks = [];
  for await (const chunk of request) {
    chunks.push(chunk);
    if (pause > 0) {
      request.pause();
      await new Promise((resolve) => setTimeout(resolve, pause));
      request.resume();
    }
  }
  return Buffer.concat(chunks);
}

async function describe(request, body) {
  const seen = {
    method: request.method,
    transferEncoding: request.headers['transfer-encoding'] ?? null,
    contentLength: request.headers['content-length'] ?? null,
    contentType: request.headers['content-type'] ?? null,
    expect: request.headers['expect'] ?? null,
    authorization: request.headers['authorization'] ?? null,
    cookie: request.headers['cookie'] ?? null,
    proxyAuthorization: request.headers['proxy-authorization'] ?? null,
    userAgent: request.headers['user-agent'] ?? null,
    tag: request.headers['x-tag'] ?? null,
    bytes: body.length,
  };
  try {
    seen.parts = await formDataParts(body, seen.contentType);
  } catch (error) {
    seen.error = String((error && error.message) || error);
  }
  return seen;
}

const server = http.createServer((request, response) => {
  // A client that aborts its upload (as a failing body stream makes it) must not bring the server down.
  handle(request, response).catch(() => response.destroy());
});

async function handle(request, response) {
  const path = new URL(request.url, 'http://localhost').pathname;
  if (path === '/connections') {
    // Open connections other than the one asking.
    server.getConnections((error, count) => {
      response.writeHead(200, { 'content-type': 'application/json', connection: 'close' });
      response.end(JSON.stringify(error ? -1 : count - 1));
    });
    return;
  }
  if (path === '/log') {
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end(JSON.stringify(log));
    return;
  }
  if (path === '/heads') {
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end(JSON.stringify(heads));
    return;
  }
  heads.push(path);
  const query = new URL(request.url, 'http://localhost').searchParams;
  if (path.startsWith('/redirect/') && query.has('early')) {
    answerUnread(request, Number(path.slice('/redirect/'.length)), { location: query.get('to') ?? '/upload' }, '');
    return;
  }
  if (path === '/early-drain') {
    response.writeHead(200, { 'content-type': 'text/plain' });
    response.end('thanks, but I did not read it\n');
    request.resume();
    return;
  }
  if (path === '/early') {
    answerUnread(request, 200, { 'content-type': 'text/plain' }, 'thanks, but I did not read it\n');
    return;
  }
  if (path.startsWith('/early/')) {
    answerUnread(request, Number(path.slice('/early/'.length)), { 'content-type': 'text/plain' }, 'not read\n');
    return;
  }
  if (path === '/length-required' && request.headers['content-length'] === undefined) {
    response.writeHead(411, { 'content-type': 'text/plain', connection: 'close' });
    response.end('length required\n');
    return;
  }
  const pause = path === '/slow' ? Number(new URL(request.url, 'http://localhost').searchParams.get('ms') ?? 50) : 0;
  const body = await readBody(request, pause);
  log.push({
    path, query: new URL(request.url, 'http://localhost').search, method: request.method, bytes: body.length,
    contentLength: request.headers['content-length'] ?? null,
    transferEncoding: request.headers['transfer-encoding'] ?? null,
    port: request.socket.remotePort,
    authorization: request.headers['authorization'] ?? null,
    cookie: request.headers['cookie'] ?? null,
    proxyAuthorization: request.headers['proxy-authorization'] ?? null,
  });
  if (path === '/silent') {
    return;
  }
  if (path.startsWith('/flaky/')) {
    const key = request.url;
    const count = flakyAnswers.get(key) ?? 0;
    flakyAnswers.set(key, count + 1);
    if (count < Number(path.slice('/flaky/'.length))) {
      response.writeHead(503, { 'content-type': 'text/plain' });
      response.end('try again\n');
      return;
    }
  }
  if (path.startsWith('/cut/')) {
    response.writeHead(Number(path.slice('/cut/'.length)), { 'content-type': 'text/plain', 'content-length': 1000 });
    response.write('0123456789');
    setTimeout(() => response.socket.resetAndDestroy(), 50);
  } else if (path === '/echo') {
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end(JSON.stringify({ contentType: request.headers['content-type'] ?? null, body: body.toString('base64') }));
  } else if (path.startsWith('/status/')) {
    response.writeHead(Number(path.slice('/status/'.length)), { 'content-type': 'text/plain' });
    response.end('the server says no\nsecond line\n');
  } else if (path === '/raw-headers') {
    response.writeHead(200, { 'content-type': 'application/json' });
    const pairs = [];
    for (let index = 0; index < request.rawHeaders.length; index += 2) {
      pairs.push([request.rawHeaders[index], request.rawHeaders[index + 1]]);
    }
    response.end(JSON.stringify({ requestLine: `${request.method} ${request.url} HTTP/${request.httpVersion}`, headers: pairs }));
  } else if (path === '/headers') {
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end(JSON.stringify(await describe(request, body)));
  } else if (path.startsWith('/elsewhere/')) {
    const location = `http://localhost:${server.address().port}${query.get('to') ?? '/upload'}`;
    response.writeHead(Number(path.slice('/elsewhere/'.length)), { location });
    response.end();
  } else if (path.startsWith('/redirect/')) {
    response.writeHead(Number(path.slice('/redirect/'.length)), { location: query.get('to') ?? '/upload' });
    response.end();
  } else if (path === '/auth' && request.headers['authorization'] !== 'Basic dTpw') {
    response.writeHead(401, { 'www-authenticate': 'Basic realm="uploads"', 'content-type': 'text/plain' });
    response.end('credentials needed');
  } else {
    const seen = await describe(request, body);
    response.writeHead(seen.error ? 400 : 200, { 'content-type': 'application/json' });
    response.end(JSON.stringify(seen));
  }
}

// Like many servers and proxies, never answer `Expect: 100-continue`: a client that sends it waits for nothing.
server.on('checkContinue', (request, response) => handle(request, response).catch(() => response.destroy()));

server.listen(0, '127.0.0.1', () => process.stdout.write(`${server.address().port}\n`));
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
