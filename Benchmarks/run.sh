#!/usr/bin/env bash
# Runs the benchmarks and prints their ratios to the baselines measured in the same run (thresholds.json).
# Usage: Benchmarks/run.sh          the whole suite (several minutes; fixtures go to $TMPDIR/MultipartStreamBenchmarks)
#        Benchmarks/run.sh --smoke  three iterations of the threshold-checked benchmarks; fails on a regression
set -euo pipefail
cd "$(dirname "$0")"

export_dir=$(mktemp -d)
trap 'rm -rf "$export_dir"' EXIT
arguments=(--format histogramSamples --path "$export_dir" --no-progress)
if [[ "${1:-}" == "--smoke" ]]; then
    export MULTIPART_BENCHMARK_SMOKE=1
    arguments+=(--filter 'drainFilePart1GiB|drainManySmallFields|mallocsPerRead|firstReadAt.*')
fi
swift package --allow-writing-to-package-directory benchmark "${arguments[@]}" > "$export_dir/benchmark.log" 2>&1 || {
    cat "$export_dir/benchmark.log"
    exit 1
}
python3 ratios.py "$export_dir" --check
