"""A sweep's progress on stderr: cells done, failed, running and queued, and the time left.

On a terminal one line is redrawn in place, at most twice a second; into a file or a pipe (a
batch job's log) a plain line is written every ``log_every_s`` seconds instead, so a log stays
readable. The time left is the pending cells over the mean rate of this run so far.
"""

from __future__ import annotations

import sys
import time

from lsbcore.studies.sweep.driver import SweepState

__all__ = ["Progress", "format_duration", "progress_line"]

BAR_WIDTH = 24


def format_duration(seconds: float) -> str:
    """``42 s``, ``3 min 05 s``, ``2 h 07 min``, ``3 d 04 h``."""
    if seconds != seconds or seconds < 0:  # NaN or negative: nothing to say yet
        return "?"
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    if s < 86400:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    return f"{s // 86400} d {s % 86400 // 3600:02d} h"


def progress_line(state: SweepState, now: float | None = None, bar: bool = True) -> str:
    """One line: the bar, counts, rate and time left (from this run's mean rate)."""
    now = time.monotonic() if now is None else now
    todo = max(1, state.total - state.skipped)
    through = state.done + state.failed
    elapsed = now - state.started
    if through and elapsed > 0:
        eta = format_duration(state.pending * elapsed / through)
    else:
        eta = "?"
    parts = []
    if bar:
        filled = int(BAR_WIDTH * through / todo)
        parts.append("[" + "#" * filled + "." * (BAR_WIDTH - filled) + "]")
    parts.append(f"{through:,}/{todo:,} cells")
    parts.append(
        f"done {state.done:,}, failed {state.failed:,}, "
        f"running {state.running:,}, queued {state.queued:,}"
    )
    if state.skipped:
        parts.append(f"({state.skipped:,} from earlier runs)")
    parts.append(f"ETA {eta}")
    return " ".join(parts)


class Progress:
    """What ``run_sweep`` reports to: ``update(state)`` per cell, ``close(state)`` at the end."""

    def __init__(self, stream=None, interval_s: float = 0.5, log_every_s: float = 10.0):
        self.stream = stream if stream is not None else sys.stderr
        isatty = getattr(self.stream, "isatty", None)
        self.tty = bool(isatty and isatty())
        self.interval_s = interval_s if self.tty else log_every_s
        self.last = -float("inf")
        self.width = 0

    def update(self, state: SweepState) -> None:
        now = time.monotonic()
        if now - self.last < self.interval_s:
            return
        self.last = now
        self._draw(progress_line(state, now, bar=self.tty))

    def close(self, state: SweepState) -> None:
        self._draw(progress_line(state, bar=self.tty))
        if self.tty:
            self.stream.write("\n")
        self.stream.flush()

    def _draw(self, line: str) -> None:
        if self.tty:
            pad = " " * max(0, self.width - len(line))
            self.stream.write("\r" + line + pad)
            self.width = len(line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()
