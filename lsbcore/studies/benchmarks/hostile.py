"""Hostile files benchmark: ``python -m lsbcore.studies.benchmarks.hostile [--json] [--only NAME]``.

Builds the hostile-file corpus (``lsbcore.studies.benchmarks.hostile_files``: the red team's
files of issue 47 and one or more per reader) in a temporary folder and hands each file to its
reader in a fresh Python process, so that no file's memory hides another's. Printed per file:
the reader, whether it refused the file (or read it as what it holds), the seconds to that
answer and how far the process's peak resident memory rose above what it held before the call
(the peak reset after the file was built and the reader's modules imported); then the largest
of each. The
issue's target: every file answered within 2 s and 100 MB.
"""

from __future__ import annotations

import argparse
import importlib
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lsbcore import interrupt
from lsbcore.studies.benchmarks.hostile_files import BY_NAME, CORPUS, outcome

TARGET_SECONDS, TARGET_MB = 2.0, 100.0
MODULE = "lsbcore.studies.benchmarks.hostile"  # run as the child, whatever __name__ is


def _import_reader(reader: str) -> None:
    """Import the module that ``reader`` ("package.module.function ...") lives in, so that its
    import is not counted in the call."""
    parts = reader.split(" ")[0].split(".")
    for end in range(len(parts), 0, -1):
        try:
            importlib.import_module(".".join(parts[:end]))
            return
        except ImportError:
            continue


def _status_kib(field: str) -> int | None:
    """A ``/proc/self/status`` field in KiB (Linux), ``None`` elsewhere."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def _reset_peak() -> int:
    """Reset the process's peak resident memory to what it holds now (Linux: writing 5 to
    ``clear_refs``), so that building the file leaves no peak that hides the reader's; the
    resident memory now, in KiB. Elsewhere the peak so far (``ru_maxrss``)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return _status_kib("VmRSS") or 0
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _peak() -> int:
    """The process's peak resident memory since ``_reset_peak``, in KiB."""
    return _status_kib("VmHWM") or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def measure_one(name: str, folder: Path) -> dict:
    """Build the file ``name`` in ``folder`` and time its reader, in this process."""
    case = BY_NAME[name]
    path = case.build(folder / case.name)
    _import_reader(case.reader)
    before = _reset_peak()
    start = time.perf_counter()
    refused, sentence = outcome(case, path)
    seconds = time.perf_counter() - start
    after = _peak()
    return {
        "file": case.name,
        "reader": case.reader,
        "refused": refused,
        "as_expected": refused == case.refused and case.expect in sentence,
        "seconds": round(seconds, 4),
        "rss_growth_mb": round((after - before) / 1024, 1),
        "sentence": sentence,
    }


def measure(name: str) -> dict:
    """``measure_one`` in a fresh Python process (its own peak memory)."""
    with tempfile.TemporaryDirectory() as folder:
        done = subprocess.run(
            [sys.executable, "-m", MODULE, "--one", name, "--folder", folder],
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"{name}: the measuring process failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--only", action="append", choices=sorted(BY_NAME), metavar="NAME",
                        help="measure only this file (repeatable)")  # fmt: skip
    parser.add_argument("--one", choices=sorted(BY_NAME), help=argparse.SUPPRESS)
    parser.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:  # the child process: one file, one JSON line
        print(json.dumps(measure_one(args.one, args.folder)))
        return 0
    names = args.only or [case.name for case in CORPUS]
    rows = [measure(name) for name in names]
    worst = {
        "max_seconds": max(row["seconds"] for row in rows),
        "max_rss_growth_mb": max(row["rss_growth_mb"] for row in rows),
        "all_as_expected": all(row["as_expected"] for row in rows),
    }
    if args.json:
        print(json.dumps({"rows": rows, **worst}, indent=2))
        return 0 if worst["all_as_expected"] else 1
    print(f"{'file':32} {'answer':8} {'seconds':>8} {'RSS MB':>7}  reader")
    for row in rows:
        answer = ("refused" if row["refused"] else "read") + ("" if row["as_expected"] else "!")
        print(f"{row['file']:32} {answer:8} {row['seconds']:8.3f} {row['rss_growth_mb']:7.1f}  "
              f"{row['reader']}")  # fmt: skip
    print(
        f"largest: {worst['max_seconds']:.2f} s, {worst['max_rss_growth_mb']:.1f} MB "
        f"(target: {TARGET_SECONDS:g} s and {TARGET_MB:g} MB each)"
    )
    if not worst["all_as_expected"]:
        print("a file marked ! was not answered as the corpus expects", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(interrupt.run_command(main, "python -m lsbcore.studies.benchmarks.hostile"))
