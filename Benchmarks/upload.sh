#!/usr/bin/env bash
# uploadLoopback: the same file uploaded to one byte-counting Node sink on 127.0.0.1 (Peers/count-sink.mjs, which
# answers `Expect: 100-continue` and does no work of its own) by every client, alternated, RUNS times each:
#   stream     URLSession.upload with .stream (the default)
#   file       URLSession.upload with .file (a temporary copy of the body first)
#   floor      URLSession with the file as a plain InputStream(fileAtPath:) body and its Content-Length: what
#              URLSession itself costs, with no multipart and no MultipartStream
#   floor-delegate  the same on a session with a delegate, as every MultipartStream upload has (for redirects,
#              challenges and completion): Linux URLSession then queues an operation per 64 KiB sent
#   ahc        AsyncHTTPClient with the README's recipe: bodyChunks(makeChunk:) filling ByteBuffers, known length
#   httpbody   swift-openapi-runtime's HTTPBody over bodyChunks(), sent by AsyncHTTPClient
#   ahc-file   AsyncHTTPClient sending the file itself in 1 MiB ByteBuffers: what the HTTP client itself costs
#   curl       curl -F with `Expect:` off
# Prints each client's median and the ratios; fails if .stream is over 1.10 times the floor, .file over 2 times
# .stream, or the AsyncHTTPClient recipe over 1.25 times curl -F. Not part of CI's smoke pass (it writes the file
# twice to disk). Usage: Benchmarks/upload.sh [BYTES] [RUNS]
set -euo pipefail
cd "$(dirname "$0")"
size=${1:-$((1 << 30))}
runs=${2:-5}
swift build -c release --product upload-check > /dev/null

workdir=$(mktemp -d)
exec 3> >(node ../Peers/count-sink.mjs > "$workdir/port")
trap 'exec 3>&-; rm -rf "$workdir"' EXIT
head -c "$size" /dev/urandom > "$workdir/large.bin"
while [[ ! -s "$workdir/port" ]]; do sleep 0.1; done
url="http://127.0.0.1:$(cat "$workdir/port")/"

seconds() { python3 -c 'import re,sys; print(re.search(r"in ([0-9.]+) s", sys.stdin.read()).group(1))'; }
for run in $(seq "$runs"); do
    for client in stream file floor floor-delegate async-http-client httpbody async-http-client-file; do
        .build/release/upload-check --file "$workdir/large.bin" --strategy "$client" --url "$url" \
            | tee /dev/stderr | seconds >> "$workdir/$client"
    done
    curl -s -o "$workdir/answer" -w '%{time_total}\n' -H 'Expect:' -F note=upload-check \
        -F "file=@$workdir/large.bin" "$url" >> "$workdir/curl"
    grep -q '"bytes"' "$workdir/answer" || { cat "$workdir/answer"; exit 1; }
    echo "curl -F: $size bytes in $(tail -1 "$workdir/curl") s" >&2
done

python3 - "$workdir" "$size" "$runs" <<'PY'
import pathlib, statistics, sys
workdir, size, runs = pathlib.Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
clients = ("curl", "async-http-client", "httpbody", "async-http-client-file", "floor", "floor-delegate", "stream",
           "file")
median = {c: statistics.median(map(float, (workdir / c).read_text().split())) for c in clients}
print(f"uploadLoopback, {size} bytes, medians of {runs} alternated runs:")
print(f"  {'client':24} {'seconds':>8} {'MB/s':>6} {'vs curl -F':>10}")
for client in clients:
    print(f"  {client:24} {median[client]:8.3f} {size / median[client] / 1e6:6.0f} {median[client] / median['curl']:10.2f}")
checks = [
    ("AsyncHTTPClient recipe / curl -F", median["async-http-client"] / median["curl"], 1.25),
    (".stream / URLSession floor", median["stream"] / median["floor"], 1.10),
    (".file / .stream", median["file"] / median["stream"], 2.0),
]
failed = 0
for name, ratio, bound in checks:
    verdict = "ok" if ratio <= bound else "FAIL"
    failed += verdict == "FAIL"
    print(f"{name:36} {ratio:5.2f}  <= {bound:4.2f}  {verdict}")
print(f"AsyncHTTPClient recipe / AsyncHTTPClient's own floor: {median['async-http-client'] / median['async-http-client-file']:.2f}")
print(f"URLSession floor with a delegate / without: {median['floor-delegate'] / median['floor']:.2f} (the platform's share)")
print(f".stream / URLSession floor with a delegate: {median['stream'] / median['floor-delegate']:.2f} (MultipartStream's share)")
sys.exit(1 if failed else 0)
PY
