#!/usr/bin/env python3
"""Runs the long runs: the tests marked `.longRun` (outages of tens of seconds, kill storms, gigabytes in flat memory,
answers of a gigabyte), which `swift test` leaves out so that the suite runs in minutes. CI runs them in a step of
their own; so does this command, from anywhere:

    python3 Tests/long-runs.py [swift test options...]

It finds the marked tests and suites in the sources, runs `swift test` on them alone with MULTIPARTSTREAM_LONG_RUNS=1
(the options given are passed on), and fails unless the run passed and every one of them said it passed: a mark the
filter missed fails here rather than going untested.
"""
import os
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
# `@Test(...longRun...)` or `@Suite(...longRun...)` (arguments may nest one level of parentheses), then doc comments,
# other attributes or modifiers, then the function's or the type's name.
MARK = re.compile(
    r"@(Test|Suite)\((?:[^()]|\([^()]*\))*?\.longRun\b(?:[^()]|\([^()]*\))*\)\s*"
    r"(?:(?:///[^\n]*|@\w+(?:\([^()]*\))?|private|fileprivate|final|static|nonisolated)\s*)*"
    r"(?:func|struct|class|enum|actor)\s+(\w+)",
    re.S,
)


def marked() -> list[tuple[str, str]]:
    found = []
    for path in sorted((ROOT / "Tests").rglob("*.swift")):
        for match in MARK.finditer(path.read_text()):
            found.append((match.group(1), match.group(2)))
    return found


def main() -> int:
    tests = marked()
    if not tests:
        print("no test is marked .longRun", file=sys.stderr)
        return 1
    names = [name for _, name in tests]
    print(f"{len(names)} long runs: {', '.join(names)}", flush=True)
    pattern = "|".join(rf"\b{name}\b" for name in names)
    environment = dict(os.environ, MULTIPARTSTREAM_LONG_RUNS="1")
    command = ["swift", "test", *sys.argv[1:], "--filter", pattern]
    process = subprocess.Popen(command, cwd=ROOT, env=environment, stdout=subprocess.PIPE, text=True)
    passed = set()
    for line in process.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        said = re.match(r"✔ (Test|Suite) (\w+)", line)
        if said:
            passed.add(said.group(2))
    status = process.wait()
    missing = [name for name in names if name not in passed]
    if missing:
        print(f"long runs that did not say they passed: {', '.join(missing)}", file=sys.stderr)
        return 1
    return status


if __name__ == "__main__":
    sys.exit(main())
