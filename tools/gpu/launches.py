"""The device kernels' launches, recorded in Triton's CPU interpreter:
``python -m tools.gpu.launches --out FILE [--dry] -- ARGS``, where ``ARGS`` are pytest's
(``tests/test_device_balanced.py ...``) or ``bench-gpu`` followed by the GPU benchmark's
(``bench-gpu --tiny``; its ``--out`` is set to a scratch file).

A launch is kept as Triton specialises it when it compiles: each kernel's name, each argument's
kind (a tensor's dtype and whether its address is a multiple of 16; an integer's value, whose
being 1 or a multiple of 16 matters; a float), the constexprs and the compile options. Repeats
are written once. ``cache`` replays them as compilations for the GPU (``JITFunction.warmup``),
where Triton's own specialisation decides what is compiled.

``--dry`` records without running the kernels (the benchmark at its full sizes, which the
interpreter could not run in hours): the results are left unwritten, so only launches that do
not depend on an earlier launch's results are recorded faithfully; the benchmark's timed calls
are cut to one step each.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from pathlib import Path

import torch

from lsbcore import interrupt, out_path

ALIGNMENT = 16  # bytes: Triton's divisibility hint for pointers and integers


def argument(value) -> dict | None:
    """How a launch argument is specialised, as JSON."""
    if isinstance(value, torch.Tensor):
        dtype = str(value.dtype).removeprefix("torch.")
        return {"tensor": dtype, "aligned": value.data_ptr() % ALIGNMENT == 0}
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": value}
    if isinstance(value, float):
        return {"float": value}
    if value is None:
        return None
    raise TypeError(f"a launch argument of type {type(value).__name__} cannot be recorded.")


def constant(value):
    """A constexpr or option as JSON (Triton's constexpr wrapper unwrapped)."""
    value = getattr(value, "value", value)
    if isinstance(value, bool | int | float | str) or value is None:
        return value
    raise TypeError(f"a constexpr of type {type(value).__name__} cannot be recorded.")


def launch_record(function, args, kwargs) -> dict:
    fn = function.fn
    return {
        "kernel": f"{fn.__module__}:{fn.__qualname__}",
        "args": [argument(a) for a in args],
        "kwargs": {k: constant(v) for k, v in sorted(kwargs.items())},
    }


@contextlib.contextmanager
def recording(path: Path, run: bool = True):
    """Within it, every launch of an interpreted kernel is appended to ``path`` (once per
    distinct record); with ``run=False`` the kernels are not run."""
    from triton.runtime import interpreter

    seen: set[str] = set()
    original = interpreter.InterpretedFunction.run

    def run_and_record(self, *args, grid, warmup, **kwargs):
        line = json.dumps(launch_record(self, args, kwargs), sort_keys=True)
        if line not in seen:
            seen.add(line)
            with path.open("a") as file:
                file.write(line + "\n")
        if run:
            return original(self, *args, grid=grid, warmup=warmup, **kwargs)
        return None

    interpreter.InterpretedFunction.run = run_and_record
    try:
        yield seen
    finally:
        interpreter.InterpretedFunction.run = original


def read(paths) -> list[dict]:
    """The distinct records of the files ``paths``, in order."""
    lines: dict[str, None] = {}
    for path in paths:
        for line in Path(path).read_text().splitlines():
            if line.strip():
                lines.setdefault(line, None)
    return [json.loads(line) for line in lines]


def _one_call(advance, device, seconds):
    """The benchmark's timing, cut to one call of one step (a dry run)."""
    advance(1)
    return 0.0, 1, 0.0


def record_bench(args: list[str], scratch: Path) -> int:
    """The GPU benchmark (``bench-gpu ARGS``) on the CPU with the device kernels, its timed
    calls cut to one step each and its photo to two sweeps."""
    import importlib

    from lsbcore.studies.benchmarks import gpu

    gpu.rate = _one_call
    importlib.import_module("lsbcore.segmentation.segment").MAX_SWEEPS = 2
    return gpu.main(["--device", "cpu", "--backend", "device", *args, "--out", str(scratch)])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out",
        type=out_path.output_file,
        required=True,
        help="writes the launches here, one JSON line each (appended)",
    )
    parser.add_argument("--dry", action="store_true", help="record without running the kernels")
    parser.add_argument("rest", nargs=argparse.REMAINDER, help="-- pytest's ARGS or bench-gpu ARGS")
    args = parser.parse_args(argv)
    rest = args.rest[1:] if args.rest[:1] == ["--"] else args.rest
    if not rest:
        parser.error("give pytest's arguments or `bench-gpu ...` after --.")
    if os.environ.setdefault("TRITON_INTERPRET", "1") != "1":  # before the kernels are defined
        parser.error("launches are recorded in Triton's interpreter: leave TRITON_INTERPRET=1.")
    with recording(args.out, run=not args.dry) as seen:
        if rest[0] == "bench-gpu":
            scratch = args.out.with_name(args.out.name + ".figures")
            status = record_bench(rest[1:], scratch)
            scratch.unlink(missing_ok=True)
        else:
            import pytest

            status = pytest.main(rest)
    print(f"{len(seen)} distinct launches recorded in {args.out}", file=sys.stderr)
    return int(status)


if __name__ == "__main__":
    raise SystemExit(interrupt.run_command(main, "python -m tools.gpu.launches"))
