#!/usr/bin/env bash
# Builds the libFuzzer target with AddressSanitizer and runs it for SECONDS (default 60) from the committed
# corpus. Usage: Fuzz/run.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
mkdir -p .build
swiftc -sanitize=fuzzer,address -parse-as-library -O -module-name MultipartFuzz -package-name MultipartFuzz \
    $(find Sources/MultipartForm -name "*.swift") Fuzz/FuzzMultipart.swift -o .build/fuzz-multipart
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp Fuzz/corpus/* "$work/"
# libFuzzer reports crashes itself; the Swift backtracer would only slow them (and hung once under ASan).
SWIFT_BACKTRACE=enable=no .build/fuzz-multipart "$work" -max_total_time="$seconds" -max_len=4096 -timeout=10 -print_final_stats=1 \
    2>&1 | tail -25
