#!/usr/bin/env bash
# Resumable uploads with the `multipart` command (-C -) against SwiftNIO's NIOResumableUpload (resumable-server, in
# this package), through Peers/fault-proxy.py, which resets chosen connections after chosen byte counts. Checks:
#   cuts     a form through three cuts (after 40, 90 and 60 MiB of a connection): one body completed, byte-equal to
#            --output-body of the same form, and at most body + 3 x 16 MiB sent in all
#   large    1 GiB through five cuts, in flat memory (peak RSS under MAX_RSS_MIB, 128 by default), at most
#            body + 5 x 16 MiB sent
#   plain    -C - against the same handler without NIOResumableUpload: the whole form, once
#   changed  a file part changed between attempts: the command fails naming it (exit 3) and no body completes
#   kill     `kill -9` of the command at about half of 1 GiB, then the same command again: it resumes (saying where),
#            the body is --output-body's, at most 16 MiB went twice, and no state is left
#   sigint   the same with Ctrl-C (SIGINT): exit 130, the message says how to resume
#   rerun    a file changed between two runs (the same size, other bytes; another size): a new upload, a clear message,
#            the right body
#   stall    a proxy that stops forwarding without closing: noticed within --speed-time + 1 s, resumed, byte-exact;
#            without -C -, the command fails as curl's --speed-limit does
#   twice    two runs of the same command at once: one fails saying another is sending it, the body is exact
#   abandon  --abandon after an interrupted run deletes the upload on the server and its state
#   pipe     2 GiB from a pipe (-F backup=@-) through three cuts: byte-exact, no temporary file, peak RSS under
#            PIPE_RSS_MIB (80: 64 and the 16 MiB ring of two 8 MiB appends), the first body byte on the wire within
#            1 s, at most one append (8 MiB) sent twice per cut; the same pipe to a server without the draft: spooled
#            once, the spool gone afterwards and after Ctrl-C; and the time from a pipe over the time from a file,
#            medians of five alternated runs (printed, and checked against PIPE_RATIO, 2)
# Prints the time, bytes sent and resent of each. Needs `swift build` (the command) and
# `swift build -c release --product resumable-server` here; MULTIPART_RELEASE names a release build of the command
# for the pipe's timing. Usage: Benchmarks/resumable-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
multipart=${MULTIPART:-.build/debug/multipart}
# The pipe's timing compares optimised code: the release build where there is one.
release=${MULTIPART_RELEASE:-$multipart}
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
# The command keeps the state of -C - where it does by default, under a temporary state directory.
export HOME="$work/home" XDG_STATE_HOME="$work/xdg"
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
rm -f "$path"

# The saved uploads are the state directory's own KEY.json; servers/origins.json, beside them, is what -C - found each
# server to speak, and stays.
state_files() { find "$XDG_STATE_HOME/multipart" -maxdepth 1 -name '*.json' 2> /dev/null | wc -l; }

# Waits until the server's next body (the first after the last one when the command was started) has at least
# BYTES, for at most 20 s.
wait_for_body() { # BYTES
    local next="$work/bodies/body-$((${last_body:-0} + 1))"
    for _ in $(seq 2000); do
        [ -f "$next" ] && [ "$(stat -c %s "$next")" -ge "$1" ] && return 0
        sleep 0.01
    done
    return 1
}

# Runs the command in the background with stderr to FILE; sets `command_pid`, and `last_body` to the server's last
# body so far (0 for none).
run_in_background() { # ERR-FILE ARGS...
    local err=$1
    shift
    # Bodies on disk, and completed ones, which the checks remove.
    last_body=$( (find "$work/bodies" -name 'body-*'; bodies "$server_port" | grep -o 'body-[0-9]*') \
        | sed 's/.*body-//' | sort -n | tail -1)
    "$multipart" "$@" 2> "$err" &
    command_pid=$!
}

# interrupt: SIGNAL at about half the body, then the same command again; checks the resume.
interrupt() { # NAME SIGNAL EXPECTED-STATUS
    local name=$1 signal=$2 expected=$3
    start "$work/proxy" python3 Peers/fault-proxy.py "$server_port"
    proxy_fd=$fd
    local args=(-S -C - --retry 3 --retry-delay 0.25 "${fields[@]}" -o "$work/answer.json"
        "http://127.0.0.1:$port/upload")
    set +e
    run_in_background "$work/$name-1.err" "${args[@]}"
    wait_for_body $((length / 2))
    kill "-$signal" "$command_pid"
    wait "$command_pid"
    local status=$?
    local saved
    saved=$(state_files)
    started=$(date +%s.%N)
    "$multipart" "${args[@]}" 2> "$work/$name-2.err"
    local second=$?
    set -e
    seconds=$(python3 -c "import time; print(f'{time.time() - $started:.2f}')")
    stop_proxy "$proxy_fd" "$work/proxy"
    forwarded=$(json "$stats" '["forwarded"]')
    path=$(json "$(cat "$work/answer.json")" '["path"]')
    resumed=$(grep -o 'resuming the saved upload at byte [0-9]*' "$work/$name-2.err" | grep -o '[0-9]*$' || true)
    echo "$name: $length-byte form, $signal at half, resumed at ${resumed:-?} in $seconds s, $forwarded bytes sent" \
        "($((forwarded - length)) resent)"
    [ "$status" = "$expected" ] && [ "$saved" = 1 ] && check "$name: exit $expected, state saved" ok \
        || check "$name: exit $expected, state saved" "exit $status, $saved state files: $(cat "$work/$name-1.err")"
    [ "$second" = 0 ] && [ -n "$resumed" ] && cmp -s "$path" "$work/expected.multipart" \
        && check "$name: the second run resumes, the body is --output-body's" ok \
        || check "$name: the second run resumes, the body is --output-body's" "exit $second: $(cat "$work/$name-2.err")"
    [ "$forwarded" -le $((length + (16 << 20))) ] && check "$name: at most 16 MiB sent twice" ok \
        || check "$name: at most 16 MiB sent twice" "$forwarded bytes for a $length-byte form"
    [ "$(state_files)" = 0 ] && check "$name: no state left" ok || check "$name: no state left" "$(state_files) files"
    rm -f "$path"
}

# kill and sigint: 1 GiB, stopped at half, run again.
interrupt kill KILL 137
interrupt sigint INT 130
if grep -q "Run the same command again to resume it" "$work/sigint-1.err" && grep -q -- "--abandon" "$work/sigint-1.err"
then check "sigint: the message says how to resume" ok
else check "sigint: the message says how to resume" "$(cat "$work/sigint-1.err")"; fi
rm -f "$work/backup.bin"

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

# rerun: a file changed between two runs of the same command.
head -c $((256 << 20)) /dev/urandom > "$work/photos.bin"
fields=(--boundary ResumableCheck -F "photos=@$work/photos.bin")
for change in same-size other-size; do
    set +e
    run_in_background "$work/rerun-1.err" -sS -C - "${fields[@]}" -o "$work/answer.json" \
        "http://127.0.0.1:$server_port/upload"
    wait_for_body $((64 << 20))
    kill -INT "$command_pid"
    wait "$command_pid"
    if [ "$change" = same-size ]; then
        printf 'changed!' | dd of="$work/photos.bin" bs=1 seek=1000 conv=notrunc 2> /dev/null
        touch -d '+10 seconds' "$work/photos.bin"
    else
        printf 'more' >> "$work/photos.bin"
    fi
    "$multipart" -s "${fields[@]}" --output-body "$work/expected.multipart"
    "$multipart" -S -C - "${fields[@]}" -o "$work/answer.json" "http://127.0.0.1:$server_port/upload" \
        2> "$work/rerun-2.err"
    status=$?
    set -e
    path=$(json "$(cat "$work/answer.json")" '["path"]')
    if [ "$status" = 0 ] && cmp -s "$path" "$work/expected.multipart" \
        && grep -q "changed since the saved upload" "$work/rerun-2.err"; then
        check "rerun ($change): a new upload, said so, the right body" ok
    else
        check "rerun ($change): a new upload, said so, the right body" "exit $status: $(cat "$work/rerun-2.err")"
    fi
    rm -f "$path"
done

# stall: the proxy stops forwarding after 100 MiB of a connection, without closing it.
start "$work/proxy" python3 Peers/fault-proxy.py "$server_port" stall:100M
proxy_fd=$fd
set +e
"$multipart" -sS -C - --retry 3 --retry-delay 0.1 --speed-time 2 "${fields[@]}" -o "$work/answer.json" \
    "http://127.0.0.1:$port/upload"
status=$?
set -e
stop_proxy "$proxy_fd" "$work/proxy"
path=$(json "$(cat "$work/answer.json")" '["path"]')
noticed=$(python3 - "$work/proxy.err" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
stalled = float(re.search(r"stalled connection \d+ after \d+ bytes at ([\d.]+)", text).group(1))
after = [float(t) for t in re.findall(r"connection \d+ at ([\d.]+)", text) if float(t) > stalled]
print(f"{after[0] - stalled:.2f}" if after else "never")
EOF
)
echo "stall: the next connection came $noticed s after the proxy stalled (--speed-time 2)"
[ "$status" = 0 ] && cmp -s "$path" "$work/expected.multipart" && check "stall: resumed, byte-exact" ok \
    || check "stall: resumed, byte-exact" "exit $status"
python3 -c "import sys; sys.exit(0 if '$noticed' != 'never' and float('$noticed') <= 3 else 1)" \
    && check "stall: noticed within --speed-time + 1 s" ok || check "stall: noticed within --speed-time + 1 s" "$noticed"
rm -f "$path"
start "$work/proxy" python3 Peers/fault-proxy.py "$server_port" stall:100M
proxy_fd=$fd
set +e
started=$(date +%s.%N)
"$multipart" -sS --speed-time 2 "${fields[@]}" -o /dev/null "http://127.0.0.1:$port/upload" 2> "$work/slow.err"
status=$?
set -e
seconds=$(python3 -c "import time; print(f'{time.time() - $started:.2f}')")
stop_proxy "$proxy_fd" "$work/proxy"
[ "$status" = 4 ] && grep -q "operation too slow" "$work/slow.err" \
    && check "stall: without -C -, exit 4 as --speed-limit ($seconds s)" ok \
    || check "stall: without -C -, exit 4 as --speed-limit" "exit $status in $seconds s: $(cat "$work/slow.err")"

# twice: two runs of the same command at once.
before=$(json "$(bodies "$server_port")" '.__len__()')
set +e
run_in_background "$work/twice-1.err" -sS -C - "${fields[@]}" -o "$work/answer-1.json" \
    "http://127.0.0.1:$server_port/upload"
first_pid=$command_pid
run_in_background "$work/twice-2.err" -sS -C - "${fields[@]}" -o "$work/answer-2.json" \
    "http://127.0.0.1:$server_port/upload"
wait "$first_pid"
first=$?
wait "$command_pid"
second=$?
set -e
after=$(json "$(bodies "$server_port")" '.__len__()')
if [ "$(echo "$first $second" | tr ' ' '\n' | sort | tr '\n' ' ')" = "0 3 " ] && [ "$after" = $((before + 1)) ] \
    && cat "$work"/twice-*.err | grep -q "another process is sending this upload"; then
    winner=$([ "$first" = 0 ] && echo "$work/answer-1.json" || echo "$work/answer-2.json")
    cmp -s "$(json "$(cat "$winner")" '["path"]')" "$work/expected.multipart" \
        && check "twice: one fails clearly, one body, exact" ok || check "twice: one body, exact" "it differs"
else
    check "twice: one fails clearly, one body, exact" \
        "exits $first $second, $((after - before)) bodies: $(cat "$work"/twice-*.err)"
fi

# abandon: an interrupted run given up on purpose.
set +e
run_in_background "$work/abandon-1.err" -sS -C - "${fields[@]}" -o /dev/null "http://127.0.0.1:$server_port/upload"
wait_for_body $((64 << 20))
kill -INT "$command_pid"
wait "$command_pid"
upload_url=$(python3 -c "import glob, json, sys; print(json.load(open(glob.glob(sys.argv[1])[0]))['uploadURL'])" \
    "$XDG_STATE_HOME/multipart/*.json")
"$multipart" -S -C - --abandon "${fields[@]}" "http://127.0.0.1:$server_port/upload" 2> "$work/abandon-2.err"
status=$?
set -e
gone=$(curl -s -o /dev/null -w '%{http_code}' -I -H 'Upload-Draft-Interop-Version: 6' "$upload_url")
if [ "$status" = 0 ] && grep -q "abandoned" "$work/abandon-2.err" && [ "$(state_files)" = 0 ] && [ "$gone" = 404 ]
then
    check "abandon: the upload is deleted on the server and here" ok
else
    check "abandon: the upload is deleted on the server and here" \
        "exit $status, HEAD $gone, $(state_files) state files: $(cat "$work/abandon-2.err")"
fi

# queue: uploads queued with --queue DIR and sent by --run, as the wire carried them (before NIOResumableUpload): the
# first upload finds what the server speaks (its OPTIONS, then POST and PATCH), and every later one, in that run and
# the next (another process), goes in a POST and a PATCH.
mkdir -p "$work/queued"
start "$work/queue-server" "$server" "$work/queued" --log "$work/queue-requests"
queue_fd=$fd
queue_port=$port
head -c $((1 << 20)) /dev/urandom > "$work/photo.bin"
for index in 1 2 3 4 5; do
    "$multipart" -sS --queue "$work/queue" -F "index=$index" -F "photo=@$work/photo.bin" \
        "http://127.0.0.1:$queue_port/upload" > /dev/null
done
"$multipart" -sS --queue "$work/queue" --run --parallel 1 2> "$work/queue-1.err"
first_run=$(wc -l < "$work/queue-requests")
for index in 6 7; do
    "$multipart" -sS --queue "$work/queue" -F "index=$index" -F "photo=@$work/photo.bin" \
        "http://127.0.0.1:$queue_port/upload" > /dev/null
done
"$multipart" -sS --queue "$work/queue" --run --parallel 1 2> "$work/queue-2.err"
methods=$(cut -d' ' -f1 "$work/queue-requests" | tr '\n' ' ')
probes=$(grep -c '^OPTIONS' "$work/queue-requests" || true)
expected=$(printf 'OPTIONS %.0s' $(seq "$probes"); printf 'POST PATCH %.0s' $(seq 7))
queued_bodies=$(json "$(bodies "$queue_port")" '.__len__()')
# Every form's length: one digit of index and a boundary of the same length each.
"$multipart" -s -F index=1 -F "photo=@$work/photo.bin" --output-body "$work/queued.multipart" > /dev/null
queued_length=$(stat -c %s "$work/queued.multipart")
queued_sizes=$(python3 -c 'import json, sys; print(*sorted({b["bytes"] for b in json.loads(sys.argv[1])}))' \
    "$(bodies "$queue_port")")
echo "queue: 7 uploads in 2 runs, $(wc -l < "$work/queue-requests") requests ($probes OPTIONS, all the first upload's; $first_run in the first run): $methods"
if [ "$probes" -ge 1 ] && [ "$methods" = "$expected" ] && [ "$queued_bodies" = 7 ] \
    && [ "$queued_sizes" = "$queued_length" ]; then
    check "queue: only the first upload asks; each goes in a POST and a PATCH" ok
else
    check "queue: only the first upload asks; each goes in a POST and a PATCH" \
        "$methods; $queued_bodies bodies of $queued_sizes bytes ($queued_length each): $(cat "$work"/queue-*.err)"
fi
eval "exec $queue_fd>&-"

# pipe: 2 GiB from a pipe, streamed with no temporary file as the appends go out.
rm -f "$work/backup.bin" "$work/log.bin"
head -c $((2 << 30)) /dev/urandom > "$work/pipe.bin"
fields=(--boundary ResumableCheck -F "backup=@-")
"$multipart" -s "${fields[@]}" --output-body "$work/expected.multipart" < "$work/pipe.bin"
length=$(stat -c %s "$work/expected.multipart")
mkdir -p "$work/tmp"
# The most files in the command's temporary directory at once, sampled every 50 ms until FILE exists.
count_temporary_files() { # STOP-FILE
    local most=0 now
    while [ ! -e "$1" ]; do
        now=$(find "$work/tmp" -mindepth 1 | wc -l)
        [ "$now" -gt "$most" ] && most=$now
        sleep 0.05
    done
    echo "$most"
}
# Runs the command with standard input from `cat FILE`, its temporary files in $work/tmp; prints the peak RSS (MiB)
# of the command and its exit status.
piped() { # FILE ARGS...
    local file=$1
    shift
    TMPDIR="$work/tmp" rss_of bash -c 'cat "$0" | "$@"' "$file" "$multipart" "$@"
}
max_pipe_rss=${PIPE_RSS_MIB:-80}
start "$work/proxy" python3 Peers/fault-proxy.py "$server_port" 5M 7M 3M
proxy_fd=$fd
rm -f "$work/pipe.done"
count_temporary_files "$work/pipe.done" > "$work/pipe.temporary" &
sampler=$!
started=$(date +%s.%N)
read -r rss status < <(piped "$work/pipe.bin" -sS -C - --retry 8 --retry-delay 0.25 "${fields[@]}" \
    -o "$work/answer.json" "http://127.0.0.1:$port/upload")
seconds=$(python3 -c "import time; print(f'{time.time() - $started:.2f}')")
touch "$work/pipe.done"
wait "$sampler"
stop_proxy "$proxy_fd" "$work/proxy"
forwarded=$(json "$stats" '["forwarded"]')
first_byte=$(python3 -c "print(f'{$(json "$stats" '["flowing"]') - $started:.2f}')")
temporary=$(cat "$work/pipe.temporary")
echo "pipe: $length-byte form from a pipe, 3 cuts, $seconds s, $forwarded bytes sent ($((forwarded - length))" \
    "resent), peak RSS $rss MiB, first body byte after $first_byte s, at most $temporary temporary files"
path=$(json "$(cat "$work/answer.json")" '["path"]')
[ "$status" = 0 ] && cmp -s "$path" "$work/expected.multipart" && check "pipe: 2 GiB through 3 cuts, whole" ok \
    || check "pipe: 2 GiB through 3 cuts, whole" "exit $status, $(cat "$work/answer.json")"
[ "$temporary" = 0 ] && check "pipe: no temporary file" ok || check "pipe: no temporary file" "$temporary files"
[ "$rss" -le "$max_pipe_rss" ] && check "pipe: peak RSS $rss MiB <= $max_pipe_rss" ok \
    || check "pipe: peak RSS $rss MiB <= $max_pipe_rss" "over"
python3 -c "import sys; sys.exit(0 if $first_byte <= 1.0 else 1)" && check "pipe: the first body byte within 1 s" ok \
    || check "pipe: the first body byte within 1 s" "after $first_byte s"
[ "$forwarded" -le $((length + 3 * ((8 << 20) + 4096))) ] && check "pipe: at most one append resent per cut" ok \
    || check "pipe: at most one append resent per cut" "$forwarded bytes for a $length-byte form"
[ "$(json "$stats" '["cuts"]')" = 3 ] && check "pipe: the proxy cut three times" ok \
    || check "pipe: the proxy cut three times" "$stats"
rm -f "$path"

# pipe, plain: the same pipe to a server without the draft is copied once, and the copy removed.
start "$work/proxy" python3 Peers/fault-proxy.py "$plain_port"
proxy_fd=$fd
rm -f "$work/pipe.done"
count_temporary_files "$work/pipe.done" > "$work/pipe.temporary" &
sampler=$!
started=$(date +%s.%N)
read -r rss status < <(piped "$work/pipe.bin" -sS -C - "${fields[@]}" -o "$work/answer.json" \
    "http://127.0.0.1:$port/upload")
touch "$work/pipe.done"
wait "$sampler"
stop_proxy "$proxy_fd" "$work/proxy"
first_byte=$(python3 -c "print(f'{$(json "$stats" '["flowing"]') - $started:.2f}')")
temporary=$(cat "$work/pipe.temporary")
echo "pipe, plain: spooled ($temporary temporary file), first body byte after $first_byte s"
path=$(json "$(cat "$work/answer.json")" '["path"]')
[ "$status" = 0 ] && cmp -s "$path" "$work/expected.multipart" && [ "$temporary" = 1 ] \
    && [ -z "$(ls -A "$work/tmp")" ] && check "pipe, plain: spooled once, whole, the spool removed" ok \
    || check "pipe, plain: spooled once, whole, the spool removed" "exit $status, $temporary files, $(ls "$work/tmp")"
rm -f "$path"
# Ctrl-C while the pipe is copied or sent: the spool goes with it.
set +e
(cat "$work/pipe.bin" | TMPDIR="$work/tmp" "$multipart" -sS -C - "${fields[@]}" -o "$work/answer.json" \
    "http://127.0.0.1:$plain_port/upload" 2> "$work/pipe-sigint.err") &
for _ in $(seq 200); do [ -n "$(ls -A "$work/tmp")" ] && break; sleep 0.01; done
sleep 0.3
pkill -INT -f -- "-o $work/answer.json http://127.0.0.1:$plain_port/upload"
wait $!
set -e
sleep 0.2
[ -z "$(ls -A "$work/tmp")" ] && grep -q interrupted "$work/pipe-sigint.err" \
    && check "pipe, plain: Ctrl-C removes the spool" ok \
    || check "pipe, plain: Ctrl-C removes the spool" "$(ls "$work/tmp"): $(cat "$work/pipe-sigint.err")"

# pipe, time: the same bytes from a pipe and from a file, alternated, medians of five. Each run starts after a sync:
# the server writes each gigabyte to disk, and a run that starts behind the last one's writeback was measured at up
# to twice its neighbours' time (a CI run's file times 1.98, 1.37, 1.38 s). The line is 2: a pipe costs `cat`'s copy
# and the pipe's, which a file part does not, and on this machine's two cores that is 1.53 times a file's wall time
# and 1.57 its CPU (farm-bench, ten pairs), the same before and after the change that first failed 1.5; a pipe that
# were spooled would write and read the gigabyte once more.
head -c $((1 << 30)) "$work/pipe.bin" > "$work/file.bin"
rm -f "$work/pipe.bin"
timed() { # ARGS... (runs them, prints the seconds)
    local began
    sync
    began=$(date +%s.%N)
    "$@" > /dev/null || { echo "failed: $*" >&2; return 1; }
    python3 -c "import time; print(f'{time.time() - $began:.3f}')"
}
pipe_times=()
file_times=()
for _ in 1 2 3 4 5; do
    pipe_times+=("$(timed bash -c 'cat "$0" | "$1" -sS -C - --boundary PipeTime -F backup=@- -o /dev/null "$2"' \
        "$work/file.bin" "$release" "http://127.0.0.1:$server_port/upload")")
    file_times+=("$(timed "$release" -sS -C - --boundary PipeTime -F "backup=@$work/file.bin;filename=-" -o /dev/null \
        "http://127.0.0.1:$server_port/upload")")
    find "$work/bodies" -name 'body-*' -delete
done
ratio=$(python3 -c "import statistics, sys; p, f = sys.argv[1].split(), sys.argv[2].split(); print(f'{statistics.median(map(float, p)) / statistics.median(map(float, f)):.2f}')" \
    "${pipe_times[*]}" "${file_times[*]}")
echo "pipe, time: 1 GiB from a pipe ${pipe_times[*]} s, from a file ${file_times[*]} s: ${ratio}x"
python3 -c "import sys; sys.exit(0 if $ratio <= ${PIPE_RATIO:-2} else 1)" \
    && check "pipe, time: ${ratio}x a file's <= ${PIPE_RATIO:-2}" ok \
    || check "pipe, time: ${ratio}x a file's <= ${PIPE_RATIO:-2}" "slower"

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
