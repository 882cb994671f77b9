"""At most one large build at a time in this server process: a photo-sized download, or the
decode of an uploaded photo.

A photo-sized download holds a few hundred megabytes while it is built (``photo_downloads``
says how much), and so does the decode of a large upload (a progressive 8,900 px JPEG: about
260 MB for a moment, however small the working lattice). The server is shared, so the builds
of several visitors take turns: eight photo pages uploaded at once peak at one decode over what
they hold, not eight. A build waits up to ``WAIT_S`` seconds for its turn and is then refused
with a sentence, so nothing waits forever. After each turn the memory it freed is handed back
to the system (``freed_memory``): otherwise each session's threads keep it in reserve.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from app import freed_memory

WAIT_S = 20.0  # a 4096 px overlay takes a few seconds; a longer queue is refused
BUSY = "another large photo is being decoded or built on this server; try again in a moment"

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
        freed_memory.release()
