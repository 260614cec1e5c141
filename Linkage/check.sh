#!/usr/bin/env bash
# The linkage check: `form-only` (the MultipartForm product alone) and `form-with-transport` (MultipartStream), one
# program. Each writes a form with a file part (its own executable) through bodyChunks(); Node parses every body, and
# checks that form-only links neither FoundationNetworking nor libcurl, built with --static-swift-stdlib and without,
# while form-with-transport links both (else the check proves nothing). Prints each binary's size and ldd lines.
# form-with-transport is also tried with --static-swift-stdlib: a static FoundationNetworking needs libcurl's
# development library (-lcurl), which the machine need not have; the result is reported, not required.
set -euo pipefail
cd "$(dirname "$0")"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run() {
    local label=$1 bin=$2 program=$3
    "$bin/$program" "$work/$label.multipart" > "$work/$label.json"
    ldd "$bin/$program" > "$work/$label.ldd" 2>&1 || true
    cp "$bin/$program" "$work/$label.bin"
}
swift build -c release 2>&1 | tail -1
bin=$(swift build -c release --show-bin-path)
run form-only "$bin" form-only
run form-with-transport "$bin" form-with-transport
if swift build -c release --scratch-path .build-static --static-swift-stdlib --product form-only \
    > "$work/static-form.log" 2>&1
then
    run form-only-static \
        "$(swift build -c release --scratch-path .build-static --static-swift-stdlib --show-bin-path)" form-only
else
    grep -E "error:" "$work/static-form.log" | head -5
    echo "form-only does not build with --static-swift-stdlib"
fi
if swift build -c release --scratch-path .build-static --static-swift-stdlib --product form-with-transport \
    > "$work/static-transport.log" 2>&1
then
    run form-with-transport-static \
        "$(swift build -c release --scratch-path .build-static --static-swift-stdlib --show-bin-path)" \
        form-with-transport
else
    echo "form-with-transport with --static-swift-stdlib: does not link ($(grep -c "undefined reference to .curl_" \
        "$work/static-transport.log") undefined libcurl symbols: a static FoundationNetworking needs -lcurl)"
fi
node check.mjs "$work"
