"""Fair sharing of the machine between sessions: sampling takes turns.

Every running session samples on its own worker thread, a turn at a time. Left alone, eight
workers on two cores starve the server thread that redraws the pages (the red team measured
0.06-0.73 redraws a second with gaps of 11-33 s). Here a worker samples only while it holds one
of ``SLOTS`` turns (one core fewer than the machine has, at least one), and turns go round in
arrival order, so every running session samples in turn and a core stays free for the pages.
With many runs, a turn also leaves its slot idle for a while (``idle_share``) and pages redraw
less often (``refresh_interval``), so that the redraws fit in what is left. Measured with 8
browser pages on 2 cores: 2.1-2.6 redraws a second each, gaps of at most 1.5 s (README, "Limits
and safety"; since issue 29 a redraw re-sends only the open view). A turn lasts ``TURN_S``
while few runs share the server, so that a run alone samples at the engine's speed, and less
with many (``turn_seconds``), so that every running session still samples between two redraws
of its page.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from contextlib import contextmanager

SLOTS = max(1, (os.cpu_count() or 1) - 1)
REFRESH_S = 0.2  # a page redraws five times a second while its run runs...
SESSIONS_AT_FULL_RATE = 8  # ...while at most this many runs run; beyond, proportionally less
# With more runs than BUSY_ABOVE, a turn leaves its slot idle for this share of the time it
# took: sampling threads also need the interpreter between compiled calls, and pages need it
BUSY_ABOVE = 6
BUSY_IDLE_SHARE = 1.5
# A turn is one call of Comparison.step, whose cost is about 0.6 ms per sampler whatever its
# length (3 ms for the default run's five or six samplers) while a mixing step costs 15 us:
# a run alone takes 50 ms turns, so under a tenth goes to the calls (at 5 ms every turn was a
# single step: 1% of the engine's speed, issue 30). The turn is also how long the run's page
# may wait for its lock.
TURN_S = 0.05
MIN_TURN_S = 0.005  # with many runs: shorter turns, down to this


class Turns:
    """Round-robin turns on ``slots`` slots: ``with turns.turn(): ...`` waits its turn."""

    def __init__(self, slots: int = SLOTS):
        self.slots = slots
        self._cond = threading.Condition()
        self._queue: deque = deque()
        self._busy = 0

    @contextmanager
    def turn(self, idle_share: float = 0.0):
        """Wait for a turn; after the body, keep the slot idle for ``idle_share`` of the time
        the body took (the machine then samples at most ``1 / (1 + idle_share)`` of the time)."""
        ticket = object()
        with self._cond:
            self._queue.append(ticket)
            while self._queue[0] is not ticket or self._busy >= self.slots:
                self._cond.wait()
            self._queue.popleft()
            self._busy += 1
            self._cond.notify_all()  # the next in line may take another free slot
        started = time.perf_counter()
        try:
            yield
        finally:
            if idle_share > 0:
                time.sleep(idle_share * (time.perf_counter() - started))
            with self._cond:
                self._busy -= 1
                self._cond.notify_all()

    def waiting(self) -> int:
        """Workers waiting for a turn now."""
        with self._cond:
            return len(self._queue)


TURNS = Turns()


def idle_share(running: int) -> float:
    """How much of each turn's time its slot stays idle while ``running`` runs sample."""
    return BUSY_IDLE_SHARE if running > BUSY_ABOVE else 0.0


def refresh_interval(running: int) -> float:
    """Seconds between a page's redraws while ``running`` runs sample on this server."""
    return REFRESH_S * max(1.0, running / SESSIONS_AT_FULL_RATE)


def turn_seconds(running: int, slots: int = SLOTS) -> float:
    """How long one turn samples while ``running`` runs share ``slots`` slots: ``TURN_S``,
    or less when that would leave a session's page redrawing the same state (every running
    session gets two turns per redraw interval, idle share included, so that a redraw never
    falls between them; down to ``MIN_TURN_S``)."""
    rounds = max(1, running) / slots * (1.0 + idle_share(running))  # turns per slot per round
    return min(TURN_S, max(MIN_TURN_S, refresh_interval(running) / (2 * rounds)))
