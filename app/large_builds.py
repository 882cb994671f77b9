"""At most one large download is built at a time in this server process.

A photo-sized download holds a few hundred megabytes while it is built (``photo_downloads``
says how much); the server is shared, so builds asked for by several visitors at once take
turns. A build waits up to ``WAIT_S`` seconds for its turn and is then refused with a
sentence, so nothing waits forever.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

WAIT_S = 20.0  # a 4096 px overlay takes a few seconds; a longer queue is refused
BUSY = "another download is being built on this server; try again in a moment"

_TURN = threading.Lock()


class BuildBusy(RuntimeError):
    """Another large build held the turn for longer than the wait."""


@contextmanager
def one_at_a_time(wait_s: float | None = None) -> Iterator[None]:
    """Hold the server's one turn for a large build, waiting at most ``wait_s`` seconds
    (``WAIT_S`` when None)."""
    if not _TURN.acquire(timeout=WAIT_S if wait_s is None else wait_s):
        raise BuildBusy(BUSY)
    try:
        yield
    finally:
        _TURN.release()
