"""Where a run of .ci/run spent its time.

    times.py stamp LOG      copies its input to its output, and to LOG each line with the
                            seconds since it started
    times.py report DIR S   prints each step's time (DIR/steps.tsv) and the run's, S seconds,
                            then each test binary that ran for over 30 s (the stamped logs
                            DIR/*.log, their binaries named by the build's messages DIR/*.jsonl)

A binary's time runs from cargo's line that starts it to the line that starts the next one (or
to the log's end), so that a binary whose harness prints no summary is timed too.
"""

import json
import re
import sys
import time
from pathlib import Path

LONG_BINARY_SECONDS = 30
STARTS = re.compile(r"^\s*(?:Running (?P<what>.+?) \((?P<binary>[^)]+)\)|Doc-tests (?P<crate>\S+))\s*$")


def stamp(log: Path) -> None:
    started = time.monotonic()
    with log.open("w") as out:
        for line in sys.stdin:
            sys.stdout.write(line)
            sys.stdout.flush()
            out.write(f"{time.monotonic() - started:.1f}\t{line}")
            out.flush()


def minutes(seconds: float) -> str:
    whole = round(seconds)
    return f"{whole // 60:3d}:{whole % 60:02d}"


def binaries(directory: Path) -> dict[str, str]:
    """The test binaries the build's messages name, by their path under the workspace, each
    with its source file under the workspace."""
    workspace = Path.cwd()
    named = {}
    for messages in sorted(directory.glob("*.jsonl")):
        for line in messages.read_text().splitlines():
            try:
                message = json.loads(line)
            except json.JSONDecodeError:
                continue
            executable = message.get("executable")
            if message.get("reason") != "compiler-artifact" or not executable:
                continue
            source = Path(message["target"]["src_path"])
            try:
                source = source.relative_to(workspace)
            except ValueError:
                pass
            kind = "unit tests" if message["target"]["kind"] != ["test"] else None
            label = f"{source} ({kind})" if kind else str(source)
            named[str(Path(executable).relative_to(workspace))] = label
    return named


def test_binaries(directory: Path) -> list[tuple[float, str]]:
    named = binaries(directory)
    timed = []
    for log in sorted(directory.glob("*.log")):
        suffix = "" if log.stem == "tests" else f" [{log.stem}]"
        current, since, last = None, 0.0, 0.0
        for line in log.read_text(errors="replace").splitlines():
            stamp_text, _, text = line.partition("\t")
            try:
                last = float(stamp_text)
            except ValueError:
                continue
            start = STARTS.match(text)
            if not start:
                continue
            if current:
                timed.append((last - since, current + suffix))
            if start["crate"]:
                current = f"doctests of {start['crate']}"
            else:
                current = named.get(start["binary"], start["what"])
            since = last
        if current:
            timed.append((last - since, current + suffix))
    return timed


def report(directory: Path, total: float) -> None:
    print("\n== where the time of .ci/run went ==")
    steps = directory / "steps.tsv"
    for line in steps.read_text().splitlines() if steps.exists() else []:
        seconds, status, name = line.split("\t", 2)
        note = "" if status == "ok" else f"  ({status})"
        print(f"{minutes(float(seconds))}  {name}{note}")
    print(f"{minutes(total)}  in all, from start to end")
    long = sorted((t for t in test_binaries(directory) if t[0] > LONG_BINARY_SECONDS), reverse=True)
    print(f"\n== test binaries that ran for over {LONG_BINARY_SECONDS} s ==")
    for seconds, name in long:
        print(f"{minutes(seconds)}  {name}")
    if not long:
        print("  none")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "stamp":
        stamp(Path(sys.argv[2]))
    elif len(sys.argv) == 4 and sys.argv[1] == "report":
        report(Path(sys.argv[2]), float(sys.argv[3]))
    else:
        sys.exit(__doc__)
