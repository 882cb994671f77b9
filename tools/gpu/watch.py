"""Run a module with Triton's compilations logged: ``python -m tools.gpu.watch LOG MODULE
[ARGS]`` runs ``python -m MODULE ARGS`` and appends one JSON line to ``LOG`` per kernel Triton
compiles or loads from its cache (its name, whether the cache had it, the seconds), flushed as
it happens: how much of a GPU window went to compiling, and which kernels the cache built ahead
missed."""

from __future__ import annotations

import json
import os
import runpy
import sys
import time


def listen(log: str) -> None:
    """Install the logging listener (Triton 3.x's ``knobs.compilation.listener``)."""
    from triton import knobs

    def listener(*, src, metadata, metadata_group, times, cache_hit):
        name = getattr(getattr(src, "fn", None), "__name__", None) or str(metadata.get("name"))
        record = {
            "kernel": name,
            "cache_hit": bool(cache_hit),
            "at": time.time(),
            "hash": metadata.get("hash"),
            "seconds": _seconds(times),
        }
        with open(log, "a") as file:
            file.write(json.dumps(record) + "\n")
            file.flush()
            os.fsync(file.fileno())

    knobs.compilation.listener = listener


def _seconds(times) -> float | None:
    """The compile's seconds from Triton's timer record (its fields differ between versions)."""
    total = getattr(times, "total", None) or getattr(times, "total_time_us", None)
    if total is None and hasattr(times, "_asdict"):
        total = sum(v for v in times._asdict().values() if isinstance(v, int | float))
    if total is None:
        return None
    return round(total / 1e6, 3) if total > 1000 else round(float(total), 3)


def main(argv: list[str]) -> None:
    if len(argv) < 2:
        raise SystemExit("usage: python -m tools.gpu.watch LOG MODULE [ARGS]")
    log, module, *args = argv
    if os.environ.get("TRITON_INTERPRET") != "1":  # the interpreter compiles nothing
        listen(log)
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
