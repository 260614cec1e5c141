// A server whose answers are as large as a test asks, on 127.0.0.1, for the bounded-memory tests: it reads the
// request's body whole (counting it), then answers `/answer?status=S&bytes=N` with N bytes (`bytes=endless`: a
// chunked body that never ends, `chunked=1`: chunked framing for a finite one). The body is byte i = i % 251, so
// any stretch of it can be checked. `/sent` answers what the last answer put on the wire: its bytes and their
// SHA-256 (of a finished answer), and whether the client hung up before its end.
//
// It writes at most 125 MB a second, a gigabit link's pace. On loopback a server that writes faster than libcurl
// reads keeps the connection always readable, and Linux URLSession's one thread then stays on it: the upload's stop
// waits for the answer's end (see LinuxNotes.md), which is the platform's, not what these tests are for. At 512 MiB a
// second, a loaded CI machine's libcurl fell behind: an endless answer was stopped after 7 s, its process at 94 MiB.
//
// A rate in bytes a second may be given as the first argument: the tests under a sanitizer, whose client reads 5 to 20
// times slower on a loaded machine, give a tenth of it (a 100 Mbit link), for the same reason.
//
// Prints its port on the first line; exits when stdin closes.
import http from "node:http";
import crypto from "node:crypto";

const block = Buffer.alloc(1 << 20);
for (let i = 0; i < block.length; i++) block[i] = i % 251;
// 1 MiB is not a multiple of 251: each block starts where the pattern stands.
function piece(offset, length) {
  const start = offset % 251;
  return block.subarray(start, start + length);
}

// Bytes a millisecond.
const rate = Number(process.argv[2] ?? 125_000_000) / 1000;
let sent = { bytes: 0, sha256: null, hungUp: false, requestBytes: 0 };

const server = http.createServer((request, response) => {
  const url = new URL(request.url, "http://127.0.0.1");
  if (url.pathname === "/sent") {
    response.setHeader("Content-Type", "application/json");
    return response.end(JSON.stringify(sent));
  }
  let requestBytes = 0;
  request.on("data", (chunk) => (requestBytes += chunk.length));
  request.on("end", () => {
    const status = Number(url.searchParams.get("status") ?? "200");
    const endless = url.searchParams.get("bytes") === "endless";
    const total = endless ? Infinity : Number(url.searchParams.get("bytes") ?? "0");
    const current = { bytes: 0, sha256: null, hungUp: false, requestBytes };
    sent = current;
    const hash = crypto.createHash("sha256");
    response.statusCode = status;
    response.setHeader("Content-Type", "application/octet-stream");
    if (!endless && url.searchParams.get("chunked") !== "1") response.setHeader("Content-Length", String(total));
    response.on("close", () => {
      if (current.bytes < total) current.hungUp = true;
    });
    const started = Date.now();
    const write = () => {
      while (current.bytes < total) {
        if (response.destroyed) return;
        const ahead = current.bytes / rate - (Date.now() - started);
        if (ahead > 5) return setTimeout(write, ahead);
        const length = Math.min(block.length - 251, total - current.bytes);
        const chunk = piece(current.bytes, length);
        current.bytes += length;
        if (!endless) hash.update(chunk);
        if (!response.write(chunk)) return response.once("drain", write);
      }
      current.sha256 = hash.digest("hex");
      response.end();
    };
    write();
  });
});
server.listen(0, "127.0.0.1", () => console.log(server.address().port));
process.stdin.resume();
process.stdin.on("end", () => process.exit(0));
