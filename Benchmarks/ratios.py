"""Prints the benchmark ratios from a directory of p90 exports and checks them against thresholds.json.

Usage: python3 ratios.py EXPORT_DIR [--check]
A check whose benchmarks were not run is listed as not run; with --check, a check below its "min" or above its
"max" makes the exit status 1.
"""
import json
import pathlib
import sys

export = pathlib.Path(sys.argv[1])
check = "--check" in sys.argv
results = {}
for path in export.glob("*.p90.json"):
    benchmark = path.name.split(".")[1]
    results[benchmark] = json.loads(path.read_text())

config = json.loads((pathlib.Path(__file__).parent / "thresholds.json").read_text())
failed = passed = 0
rows = []
for item in config["checks"]:
    metric, of = item["metric"], item["of"]
    other = item.get("over") or item.get("minus")
    if of not in results or (other and other not in results):
        rows.append((item["name"], "not run", "", ""))
        continue
    value = results[of][metric]
    if "over" in item:
        value = value / results[other][metric]
    elif "minus" in item:
        value = value - results[other][metric]
    value *= item.get("scale", 1)
    bound = ""
    verdict = ""
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
print(f"{'check'.ljust(width)}  {'p90 value':>10}  {'threshold':>10}  result")
for name, value, bound, verdict in rows:
    print(f"{name.ljust(width)}  {value:>10}  {bound:>10}  {verdict}")
print(f"{passed} passed, {failed} failed")
sys.exit(1 if check and failed else 0)
