#!/usr/bin/env bash
# uploadLoopback: the same file uploaded to one byte-counting Node sink on 127.0.0.1 (Peers/count-sink.mjs, which
# answers `Expect: 100-continue` and does no work of its own) by four clients, alternated, RUNS times each:
#   stream  URLSession.upload with .stream (the default)
#   file    URLSession.upload with .file (a temporary copy of the body first)
#   floor   URLSession with the file as a plain InputStream(fileAtPath:) body and its Content-Length: what
#           URLSession itself costs, with no multipart and no MultipartStream
#   curl    curl -F with `Expect:` off
# Prints each client's median and the ratios; fails if .stream is slower than 1.15 times the floor.
# Not part of CI's smoke pass (it writes the file twice to disk). Usage: Benchmarks/upload.sh [BYTES] [RUNS]
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
    for client in stream file floor; do
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
median = {c: statistics.median(map(float, (workdir / c).read_text().split())) for c in ("stream", "file", "floor", "curl")}
print(f"uploadLoopback, {size} bytes, medians of {runs} alternated runs:")
for client in median:
    print(f"  {client:6} {median[client]:.3f} s  ({size / median[client] / 1e6:.0f} MB/s)")
ratio = median["stream"] / median["floor"]
print(f".stream / floor = {ratio:.2f} (target <= 1.15), .file / .stream = {median['file'] / median['stream']:.2f}, "
      f".stream / curl = {median['stream'] / median['curl']:.2f}")
sys.exit(0 if ratio <= 1.15 else 1)
PY
