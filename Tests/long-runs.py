#!/usr/bin/env python3
"""Runs the long runs: the tests marked `.longRun` (outages of tens of seconds, kill storms, gigabytes in flat memory,
answers of a gigabyte), which `swift test` leaves out so that the suite runs in minutes. CI runs them in a step of
their own; so does this command, from anywhere:

    python3 Tests/long-runs.py [swift test options...]

It finds the marked tests and suites in the sources, runs `swift test` on them alone with MULTIPARTSTREAM_LONG_RUNS=1
(the options given are passed on), and fails unless the run passed and every one of them said it passed: a mark the
filter missed fails here rather than going untested.

Then the tests tagged `.measuredAlone` (long runs or not), each in a `swift test` of its own with
MULTIPARTSTREAM_ALONE=1: their bounds on wall time (a cancel returns within 0.5 s) or on the whole process (its memory,
its sockets) are measured where no other test loads the machine or shares the process. `swift test` checks them
loosely, beside every other suite.
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
# `@Test(...)` or `@Suite(...)` with `.tags(...)` among its arguments that names `.measuredAlone`, then as above.
ALONE = re.compile(MARK.pattern.replace(r"\.longRun\b", r"\.tags\([^()]*\.measuredAlone\b[^()]*\)"), re.S)


def marked(mark: re.Pattern = MARK) -> list[tuple[str, str]]:
    found = []
    for path in sorted((ROOT / "Tests").rglob("*.swift")):
        for match in mark.finditer(path.read_text()):
            found.append((match.group(1), match.group(2)))
    return found


def run(names: list[str], options: list[str], environment: dict[str, str]) -> tuple[int, list[str]]:
    """`swift test` of the tests and suites `names`; its status, and those of them that did not say they passed."""
    pattern = "|".join(rf"\b{name}\b" for name in names)
    command = ["swift", "test", *options, "--filter", pattern]
    process = subprocess.Popen(command, cwd=ROOT, env=environment, stdout=subprocess.PIPE, text=True)
    passed = set()
    for line in process.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        said = re.match(r"✔ (Test|Suite) (\w+)", line)
        if said:
            passed.add(said.group(2))
    return process.wait(), [name for name in names if name not in passed]


def main() -> int:
    tests = marked()
    if not tests:
        print("no test is marked .longRun", file=sys.stderr)
        return 1
    alone = [name for _, name in marked(ALONE)]
    names = [name for _, name in tests if name not in alone]
    print(f"{len(names)} long runs: {', '.join(names)}", flush=True)
    environment = dict(os.environ, MULTIPARTSTREAM_LONG_RUNS="1")
    status, missing = run(names, sys.argv[1:], environment)
    if missing:
        print(f"long runs that did not say they passed: {', '.join(missing)}", file=sys.stderr)
        return 1
    if status != 0:
        return status
    # One process a test, one after another: nothing else runs in the process, nor in this command meanwhile.
    print(f"{len(alone)} measured alone: {', '.join(alone)}", flush=True)
    environment = dict(environment, MULTIPARTSTREAM_ALONE="1")
    for name in alone:
        status, missing = run([name], [*sys.argv[1:], "--skip-build"], environment)
        if missing:
            print(f"measured alone, did not say it passed: {name}", file=sys.stderr)
            return 1
        if status != 0:
            return status
    return 0


if __name__ == "__main__":
    sys.exit(main())
