"""The live run's pace: a steady rate in steps per second, and the time left.

The worker records ``(time, step)`` after every turn (under a speed cap, at every refresh
interval's start, where its steps are due). The rate is the slope over the last ``WINDOW_S``
seconds, shown rounded to two significant figures: turns, redraws and other sessions make
half-second rates jump by a third, while a few seconds' slope holds still. It is measured from
the first turn on: a lecture's room sees the real rate within the first second. Burn-in learns and
is slower than mixing, so a phase change starts a new window, from the turn that crossed it (the
rate goes on, never back to "starting"). A window spanning less than ``MIN_SPAN_S`` gives no
slope once a rate has been measured: two samples a few milliseconds apart (a late turn catching
up on its due steps) read 15,000 steps/s in a run capped at 100; the last rate holds until the
window is wide enough. The time left divides the steps left in the phase by
that rate, and adds the mixing steps at the last measured mixing rate once there is one.
"""

from __future__ import annotations

import math
import threading
from collections import deque

WINDOW_S = 3.0  # the rate is the slope over this many seconds
MIN_SPAN_S = 0.5  # a narrower window's slope is timing noise (but the first rate is shown)


class Pace:
    """Steps per wall-clock second over the last ``window_s`` seconds of the current phase.

    Written by the worker thread, read by the page's: a lock keeps the samples consistent.
    """

    def __init__(self, window_s: float = WINDOW_S, min_span_s: float = MIN_SPAN_S):
        self.window_s = window_s
        self.min_span_s = min_span_s
        self._samples: deque[tuple[float, int]] = deque()
        self._phase: str | None = None
        self._last_rate: dict[str, float] = {}  # phase -> the rate it last had
        self._last = math.nan  # the rate last measured, in any phase
        self._lock = threading.Lock()

    def restart(self) -> None:
        """Forget the samples (after a pause: the time paused is no sampling time)."""
        with self._lock:
            self._samples.clear()

    def measured(self) -> bool:
        """Whether a rate has been measured yet (after the first turn that took steps)."""
        with self._lock:
            return not math.isnan(self._last)

    def add(self, now: float, steps: int, phase: str) -> None:
        """Record that the run stood at ``steps`` at time ``now`` (seconds) in ``phase``."""
        with self._lock:
            if phase != self._phase:
                # the turn that crossed into ``phase`` starts its window: a rate at once
                crossing = self._samples[-1] if self._samples else None
                self._samples.clear()
                if crossing is not None and crossing[1] < steps:
                    self._samples.append(crossing)
                self._phase = phase
            self._samples.append((now, steps))
            while len(self._samples) > 2 and now - self._samples[1][0] >= self.window_s:
                self._samples.popleft()  # keep the window covered: its first sample is older
            rate = self._slope()
            if not math.isnan(rate):
                self._last_rate[phase] = self._last = rate

    def _slope(self) -> float:
        if len(self._samples) < 2:
            return math.nan
        (t0, n0), (t1, n1) = self._samples[0], self._samples[-1]
        if not (t1 > t0 and n1 > n0):
            return math.nan
        if t1 - t0 < self.min_span_s and not math.isnan(self._last):
            return math.nan  # too narrow to trust: the last rate stands
        return (n1 - n0) / (t1 - t0)

    def rate(self) -> float:
        """Steps per second now: the window's slope, or, until the window has one (just
        resumed, a new phase, or narrower than ``min_span_s``), the rate last measured; NaN
        before any."""
        with self._lock:
            rate = self._slope()
            return self._last if math.isnan(rate) else rate

    def last_rate(self, phase: str) -> float:
        """The rate ``phase`` had when last measured (NaN if never)."""
        with self._lock:
            return self._last_rate.get(phase, math.nan)


def seconds_left(
    step: int, burn_in: int, total: int, rate: float, mixing_rate: float = math.nan
) -> tuple[float, float]:
    """(seconds left in the current phase, seconds left in the run), NaN where unknown.

    ``rate`` is the current phase's; in burn-in the run's figure needs ``mixing_rate`` too.
    """
    if not rate > 0:
        return math.nan, math.nan
    if step < burn_in:
        phase = (burn_in - step) / rate
        mixing = (total - burn_in) / mixing_rate if mixing_rate > 0 else math.nan
        return phase, phase + mixing if total > burn_in else phase
    left = max(0, total - step) / rate
    return left, left


def steady(value: float) -> str:
    """A rate as the page shows it: two significant figures, thousands separated."""
    if not math.isfinite(value) or value <= 0:
        return "0"
    if value < 10:
        return f"{value:.1f}"
    unit = 10 ** (math.floor(math.log10(value)) - 1)  # the second significant figure's
    return f"{round(value / unit) * unit:,.0f}"


def duration(seconds: float) -> str:
    """``seconds`` as a reader wants it: "under a second", "about 12 s", "about 3 min"."""
    if seconds < 1:
        return "under a second"
    if seconds < 60:
        return f"about {seconds:.0f} s"
    if seconds < 3600:
        return f"about {seconds / 60:.0f} min"
    return f"about {seconds / 3600:.1f} h"


def speed_text(
    pace: Pace,
    step: int,
    burn_in: int,
    total: int,
    running: bool = True,
    finished: bool = False,
    stops_when_settled: bool = False,
) -> str:
    """The status line's speed: "finished", "paused", or the rate and the time left.

    ``stops_when_settled``: the run pauses once its marginals settle (images), so the time
    left is an upper bound.
    """
    if finished:
        return "finished"
    if not running:
        return "paused"
    rate = pace.rate()
    if step == 0 or math.isnan(rate):  # before the first step only: then a measured rate
        return "starting"
    phase_left, run_left = seconds_left(step, burn_in, total, rate, pace.last_rate("mixing"))
    text = f"{steady(rate)} steps/s · "
    if step < burn_in:
        text += f"burn-in: {duration(phase_left)} left"
        if math.isfinite(run_left):
            text += f", the run {duration(run_left)}"
    else:
        text += f"{duration(run_left)} left"
    if stops_when_settled:
        text += " at most (it stops earlier once settled)"
    return text
