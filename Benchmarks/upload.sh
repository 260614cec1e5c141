#!/usr/bin/env bash
# uploadLoopback1GiB: the same 1 GiB file uploaded to a Node sink on 127.0.0.1 by URLSession with .stream, with
# .file, and by `curl -F`; prints the times and the ratios. Not part of CI's smoke pass (it writes 2 GiB to disk).
# Usage: Benchmarks/upload.sh [BYTES]
set -euo pipefail
cd "$(dirname "$0")"
size=${1:-$((1 << 30))}
swift build -c release --product upload-check > /dev/null

seconds() { python3 -c 'import re,sys; print(re.search(r"in ([0-9.]+) s", sys.stdin.read()).group(1))'; }
stream=$(.build/release/upload-check --size "$size" --strategy stream | tee /dev/stderr | seconds)
file=$(.build/release/upload-check --size "$size" --strategy file | tee /dev/stderr | seconds)

# curl -F of the same bytes, to the same sink.
workdir=$(mktemp -d)
exec 3> >(node ../Peers/upload-sink.mjs > "$workdir/port")
trap 'exec 3>&-; rm -rf "$workdir"' EXIT
head -c "$size" /dev/urandom > "$workdir/large.bin"
while [[ ! -s "$workdir/port" ]]; do sleep 0.1; done
curl_time=$(curl -s -o "$workdir/answer" -w '%{time_total}' -F note=upload-check -F "file=@$workdir/large.bin" \
    "http://127.0.0.1:$(cat "$workdir/port")/")
grep -q '"parts"' "$workdir/answer" || { cat "$workdir/answer"; exit 1; }
echo "curl -F: $size bytes in $curl_time s"

python3 - "$stream" "$file" "$curl_time" <<'PY'
import sys
stream, file, curl = map(float, sys.argv[1:])
print(f"uploadLoopback: .stream {stream:.2f} s, .file {file:.2f} s, curl -F {curl:.2f} s")
print(f".file / .stream = {file / stream:.2f} (target >= 2), .stream / curl = {stream / curl:.2f} (target <= 1.5)")
PY
