"""The experiment's output folder: written whole or not at all.

A run writes into a staging folder beside ``--out`` (same file system, so renaming is atomic)
and renames it into place only when every file is complete. Until then ``--out`` keeps
whatever it held; an interrupted or failed run removes its staging folder and leaves nothing
behind. A non-empty ``--out`` is replaced only when asked (``--force``).

Before sampling, ``room_problem`` estimates the memory and the disk space a run needs, from
measured sizes, so that a run that cannot finish is refused in a sentence at the start instead
of failing after the sampling.
"""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

from lsbcore import out_path

__all__ = [
    "OutputError",
    "available_memory",
    "discard",
    "estimate_bytes",
    "prepare",
    "publish",
    "room_problem",
]

# Measured on the 2-core machine (a 256x256 lattice, 16 chains): a sampler's state costs
# about 100 bytes per site per chain (states, log-ratios, g-caches, tables); 128 for margin.
STATE_BYTES_PER_SITE = 128
# A recorded step keeps 3 float32 values per chain, and the buffer may double while growing.
TRACE_BYTES_PER_VALUE = 24
# A worker process: interpreter, torch and numba before any sampler.
WORKER_BYTES = 400 * 2**20
# One traces.csv row (sampler, step, evaluations, phase, chain and five numbers).
CSV_BYTES_PER_ROW = 90
# Refuse when a run would need more than this share of the memory available now.
MEMORY_SHARE = 0.8


class OutputError(ValueError):
    """The output folder cannot be used; the message says why, in a sentence."""


def prepare(out: Path, force: bool) -> Path:
    """Check ``out`` and create this run's staging folder beside it; returns the staging path.

    Refuses what ``out_path.check_folder`` refuses (a file at ``out``, a symbolic link, which
    ``publish`` would replace, a name too long, a place where nothing can be written) and a
    non-empty folder unless ``force``.
    """
    out = Path(out)
    try:
        out_path.check_folder(out, "--out")
    except out_path.OutPathError as err:
        raise OutputError(str(err)) from None
    if out.is_dir() and any(out.iterdir()) and not force:
        raise OutputError(
            f"--out {str(out)!r} is not empty; pass --force to replace it (the previous "
            "results stay until the new ones are complete)"
        )
    staging = out.parent / f".{out.name}.partial-{os.getpid()}"
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        if staging.exists():
            shutil.rmtree(staging)
        staging.mkdir()
        (staging / ".probe").write_bytes(b"x")
        (staging / ".probe").unlink()
    except OSError as err:
        discard(staging)
        raise OutputError(
            f"--out {str(out)!r}: cannot write there ({err.strerror or err})"
        ) from None
    return staging


def publish(staging: Path, out: Path) -> None:
    """Rename the complete staging folder to ``out``, replacing what was there.

    Signals are held off between the two renames, so ``out`` is always either the previous
    results or the new ones.
    """
    out = Path(out)
    old = out.parent / f".{out.name}.old-{os.getpid()}"
    held = {signal.SIGINT, signal.SIGTERM}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        if out.exists():
            os.rename(out, old)
        os.rename(staging, out)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
    shutil.rmtree(old, ignore_errors=True)


def discard(staging: Path) -> None:
    """Remove a staging folder (nothing of an unfinished run is left behind)."""
    shutil.rmtree(staging, ignore_errors=True)


def estimate_bytes(
    sites: int, chains: int, samplers: int, records: int, csv_rows: int, workers: int
) -> tuple[int, int]:
    """(memory, disk) a run needs: sampler states, traces and worker processes; traces.csv."""
    state = STATE_BYTES_PER_SITE * sites * chains * samplers
    traces = TRACE_BYTES_PER_VALUE * records * chains * samplers
    memory = state + traces + WORKER_BYTES * max(workers, 1)
    return memory, CSV_BYTES_PER_ROW * csv_rows


def available_memory() -> int | None:
    """Bytes of memory available now (``MemAvailable``), or None where it cannot be read."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def room_problem(memory: int, disk: int, where: Path, available: int | None) -> str | None:
    """A sentence when the run would not fit in memory or on disk, else None."""
    if available is not None and memory > MEMORY_SHARE * available:
        return (
            f"this run needs about {memory / 2**30:.1f} GiB of memory and "
            f"{available / 2**30:.1f} GiB are available; use fewer chains or samplers, a "
            "smaller --size, or --thin"
        )
    free = shutil.disk_usage(where).free
    if disk > free:
        return (
            f"traces.csv would take about {disk / 2**30:.1f} GiB and {str(where)!r} has "
            f"{free / 2**30:.1f} GiB free; use --csv-thin, fewer steps or chains"
        )
    return None
