"""Prints the benchmark ratios from a directory of sample exports and checks them against thresholds.json.

Usage: python3 ratios.py EXPORT_DIR [--check]
EXPORT_DIR holds the `histogramSamples` export of a run: one file of raw samples per benchmark and metric. Every
figure is the median of its samples. A check whose benchmarks were not run is listed as not run; with --check, a
check below its "min" or above its "max" makes the exit status 1.
"""
import json
import pathlib
import statistics
import sys

export = pathlib.Path(sys.argv[1])
check = "--check" in sys.argv
medians = {}
for path in export.glob("*.histogram.samples.tsv"):
    # BASELINE.TARGET.BENCHMARK.METRIC.histogram.samples.tsv; benchmark and metric names hold no dots.
    benchmark, metric = path.name.split(".")[-5:-3]
    lines = path.read_text().split("\n")
    samples = [int(line) for line in lines[1:] if line.strip()]
    if samples:
        medians.setdefault(benchmark, {})[metric] = statistics.median(samples)

config = json.loads((pathlib.Path(__file__).parent / "thresholds.json").read_text())
failed = passed = 0
rows = []
for item in config["checks"]:
    metric, of = item["metric"], item["of"]
    other = item.get("over") or item.get("minus")
    if metric not in medians.get(of, {}) or (other and metric not in medians.get(other, {})):
        rows.append((item["name"], "not run", "", ""))
        continue
    value = medians[of][metric]
    if "over" in item:
        value = value / medians[other][metric]
    elif "minus" in item:
        value = value - medians[other][metric]
    value *= item.get("scale", 1)
    bound = verdict = ""
    if "min" in item:
        bound = f">= {item['min']}"
        verdict = "ok" if value >= item["min"] else "FAIL"
    if "max" in item:
        bound = f"<= {item['max']}"
        verdict = "ok" if value <= item["max"] else "FAIL"
    if verdict == "FAIL":
        failed += 1
    elif verdict == "ok":
        passed += 1
    rows.append((item["name"], f"{value:.2f}", bound, verdict))

width = max(len(row[0]) for row in rows)
print(f"{'check'.ljust(width)}  {'median':>10}  {'threshold':>10}  result")
for name, value, bound, verdict in rows:
    print(f"{name.ljust(width)}  {value:>10}  {bound:>10}  {verdict}")
print(f"{passed} passed, {failed} failed")
sys.exit(1 if check and failed else 0)
