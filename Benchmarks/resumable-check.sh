#!/usr/bin/env bash
# Resumable uploads with the `multipart` command (-C -) against SwiftNIO's NIOResumableUpload (resumable-server, in
# this package), through Peers/fault-proxy.py, which resets chosen connections after chosen byte counts. Checks:
#   cuts     a form through three cuts (after 40, 90 and 60 MiB of a connection): one body completed, byte-equal to
#            --output-body of the same form, and at most body + 3 x 16 MiB sent in all
#   large    1 GiB through five cuts, in flat memory (peak RSS under MAX_RSS_MIB, 128 by default), at most
#            body + 5 x 16 MiB sent
#   plain    -C - against the same handler without NIOResumableUpload: the whole form, once
#   changed  a file part changed between attempts: the command fails naming it (exit 3) and no body completes
# Prints the time, bytes sent and resent of each. Needs `swift build` (the command) and
# `swift build -c release --product resumable-server` here. Usage: Benchmarks/resumable-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
multipart=${MULTIPART:-.build/debug/multipart}
server=Benchmarks/.build/release/resumable-server
max_rss=${MAX_RSS_MIB:-128}
work=$(mktemp -d)
pids=()
cleanup() {
    for fd in "${fds[@]:-}"; do [ -n "$fd" ] && eval "exec $fd>&-" 2>/dev/null || true; done
    sleep 0.2
    rm -rf "$work"
}
fds=()
trap cleanup EXIT
passed=0
failed=0
check() { # NAME CONDITION-MESSAGE: counts a result
    if [ "$2" = ok ]; then passed=$((passed + 1)); echo "ok   $1"; else failed=$((failed + 1)); echo "FAIL $1: $2"; fi
}

# Starts a program that prints its port on its first line and exits when its standard input closes; sets `port`
# and `fd` (close it to stop the program).
start() { # OUTPUT COMMAND...
    local output=$1
    shift
    exec {fd}> >("$@" > "$output" 2> "$output.err")
    fds+=("$fd")
    for _ in $(seq 100); do [ -s "$output" ] && break; sleep 0.05; done
    port=$(head -1 "$output")
}

# Stops the proxy on `fd` and sets `stats` to its JSON line: {"forwarded", "connections", "cuts"}. Not in a
# subshell, which would close only its own copy of the pipe.
stop_proxy() { # FD OUTPUT
    eval "exec $1>&-"
    for _ in $(seq 100); do [ "$(wc -l < "$2")" -ge 2 ] && break; sleep 0.05; done
    stats=$(sed -n 2p "$2")
}

json() { python3 -c "import json,sys; print(json.loads(sys.argv[1])$2)" "$1"; }

# Peak resident memory (MiB) of the command it runs, whose exit status it keeps in `status`.
rss_of() {
    python3 - "$@" <<'EOF'
import resource, subprocess, sys
status = subprocess.run(sys.argv[1:]).returncode
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024, status)
EOF
}

mkdir -p "$work/bodies" "$work/plain"
start "$work/server" "$server" "$work/bodies"
server_port=$port
server_fd=$fd
start "$work/plain-server" "$server" "$work/plain" --plain
plain_port=$port

bodies() { curl -s "http://127.0.0.1:$1/bodies"; }

# cuts: 256 MiB through three cuts.
head -c $((256 << 20)) /dev/urandom > "$work/video.bin"
fields=(--boundary ResumableCheck -F note=resumable -F "video=@$work/video.bin")
"$multipart" -s "${fields[@]}" --output-body "$work/expected.multipart"
length=$(stat -c %s "$work/expected.multipart")
start "$work/proxy" python3 Peers/fault-proxy.py "$server_port" 40M 90M 60M
proxy_fd=$fd
started=$(date +%s.%N)
"$multipart" -sS -C - --retry 8 "${fields[@]}" "http://127.0.0.1:$port/upload" > "$work/answer.json"
seconds=$(python3 -c "import time; print(f'{time.time() - $started:.2f}')")
stop_proxy "$proxy_fd" "$work/proxy"
forwarded=$(json "$stats" '["forwarded"]')
completed=$(bodies "$server_port")
count=$(json "$completed" '.__len__()')
path=$(json "$(cat "$work/answer.json")" '["path"]')
echo "cuts: $length-byte form, 3 cuts, $seconds s, $forwarded bytes sent ($((forwarded - length)) resent)"
[ "$count" = 1 ] && check "cuts: one body completed" ok || check "cuts: one body completed" "$count bodies: $completed"
if cmp -s "$path" "$work/expected.multipart"; then check "cuts: the body is --output-body's" ok
else check "cuts: the body is --output-body's" "$path differs"; fi
[ "$forwarded" -le $((length + 3 * (16 << 20))) ] && check "cuts: at most body + 3 x 16 MiB sent" ok \
    || check "cuts: at most body + 3 x 16 MiB sent" "$forwarded bytes for a $length-byte form"
[ "$(json "$stats" '["cuts"]')" = 3 ] && check "cuts: the proxy cut three times" ok \
    || check "cuts: the proxy cut three times" "$stats"
rm -f "$path"

# large: 1 GiB through five cuts, in flat memory.
head -c $((1 << 30)) /dev/urandom > "$work/backup.bin"
rm -f "$work/video.bin"
fields=(--boundary ResumableCheck -F "backup=@$work/backup.bin")
"$multipart" -s "${fields[@]}" --output-body "$work/expected.multipart"
length=$(stat -c %s "$work/expected.multipart")
start "$work/proxy" python3 Peers/fault-proxy.py "$server_port" 150M 150M 150M 150M 150M
proxy_fd=$fd
started=$(date +%s.%N)
read -r rss status < <(rss_of "$multipart" -sS -C - --retry 8 --retry-delay 0.25 "${fields[@]}" \
    -o "$work/answer.json" "http://127.0.0.1:$port/upload")
seconds=$(python3 -c "import time; print(f'{time.time() - $started:.2f}')")
stop_proxy "$proxy_fd" "$work/proxy"
forwarded=$(json "$stats" '["forwarded"]')
echo "large: $length-byte form, 5 cuts, $seconds s, $forwarded bytes sent ($((forwarded - length)) resent), peak RSS $rss MiB"
path=$(json "$(cat "$work/answer.json")" '["path"]')
[ "$status" = 0 ] && cmp -s "$path" "$work/expected.multipart" && check "large: 1 GiB through 5 cuts, whole" ok \
    || check "large: 1 GiB through 5 cuts, whole" "exit $status, $(cat "$work/answer.json")"
[ "$rss" -le "$max_rss" ] && check "large: peak RSS $rss MiB <= $max_rss" ok \
    || check "large: peak RSS $rss MiB <= $max_rss" "over"
[ "$forwarded" -le $((length + 5 * (16 << 20))) ] && check "large: at most body + 5 x 16 MiB sent" ok \
    || check "large: at most body + 5 x 16 MiB sent" "$forwarded bytes for a $length-byte form"
[ "$(json "$stats" '["cuts"]')" = 5 ] && check "large: the proxy cut five times" ok \
    || check "large: the proxy cut five times" "$stats"
rm -f "$path" "$work/backup.bin"

# plain: a server that knows nothing of the draft gets the whole form once.
head -c $((32 << 20)) /dev/urandom > "$work/log.bin"
fields=(--boundary ResumableCheck -F "log=@$work/log.bin")
"$multipart" -s "${fields[@]}" --output-body "$work/expected.multipart"
"$multipart" -sS -C - --retry 3 "${fields[@]}" "http://127.0.0.1:$plain_port/upload" > "$work/answer.json"
completed=$(bodies "$plain_port")
path=$(json "$(cat "$work/answer.json")" '["path"]')
[ "$(json "$completed" '.__len__()')" = 1 ] && cmp -s "$path" "$work/expected.multipart" \
    && check "plain: the whole form, once" ok || check "plain: the whole form, once" "$completed"

# changed: the file part changes while the upload waits to resume.
before=$(json "$(bodies "$server_port")" '.__len__()')
start "$work/proxy" python3 Peers/fault-proxy.py "$server_port" 8M
proxy_fd=$fd
set +e
"$multipart" -sS -C - --retry 3 --retry-delay 2 -F "log=@$work/log.bin" "http://127.0.0.1:$port/upload" \
    > /dev/null 2> "$work/changed.err" &
command_pid=$!
for _ in $(seq 200); do grep -q "cut connection" "$work/proxy.err" && break; sleep 0.02; done
printf 'more' >> "$work/log.bin"
wait "$command_pid"
status=$?
set -e
stop_proxy "$proxy_fd" "$work/proxy"
after=$(json "$(bodies "$server_port")" '.__len__()')
if [ "$status" = 3 ] && grep -q "log.bin" "$work/changed.err" && [ "$after" = "$before" ]; then
    check "changed: the command fails naming the file, no body completes" ok
else
    check "changed: the command fails naming the file, no body completes" \
        "exit $status, $after bodies (was $before): $(cat "$work/changed.err")"
fi

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
