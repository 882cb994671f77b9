"""The libraries the page imports after its first draw: pandas (Streamlit's tables) imported
once while no page run draws, and the sampling worker's diagnostics (arviz-stats, scipy's t and
FFT) loaded ahead of its first use.

Why a gate: plotly (every figure) reads ``sys.modules["pandas"]`` without importing it, so a page
run drawing while another thread is half-way through importing pandas fails with "partially
initialized module 'pandas' has no attribute 'Series'". Page runs overlap: Streamlit starts a
browser's next run before the stopped one has ended, and visitors draw side by side. So a page
run draws inside ``drawing()``; the import (``ensure``, on the thread that needs pandas, or
``in_background`` after a server's first page) waits until no run draws, and new runs wait for
it (about 0.6 s, once per server). Not imported with the first page, which would wait for them
(``tests/test_first_page.py``). No figure reads the other libraries from ``sys.modules``.
"""

from __future__ import annotations

import importlib
import logging
import threading
from contextlib import contextmanager

log = logging.getLogger(__name__)

GATED = ("pandas",)  # what plotly reads from sys.modules, half-imported or not
PRELOADED = ("arviz_stats.base", "scipy.stats", "scipy.fft")  # the worker's, on first use
# the import waits at most this long for page runs still drawing (a large build would otherwise
# hold every other visitor's page at the gate), and a page run at most this long for the import
DRAWING_WAIT_S = 5.0
IMPORT_WAIT_S = 60.0

_cond = threading.Condition()
_gate = {"drawing": 0, "importing": False, "done": False}
_depth = threading.local()  # how deep this thread is in drawing(): a fragment inside the page


@contextmanager
def drawing():
    """Count this thread as a page run drawing (re-entrant): it waits for an import under way
    first, and none begins until it ends."""
    depth = getattr(_depth, "n", 0)
    if depth == 0:
        _enter()
    _depth.n = depth + 1
    try:
        yield
    finally:
        _depth.n = depth
        if depth == 0:
            _leave()


def ensure() -> None:
    """Import ``GATED`` unless done (a failure is logged, not raised); from a page run it stops
    counting as drawing while it waits (the import waits for every drawing run)."""
    if _gate["done"]:
        return
    inside = getattr(_depth, "n", 0) > 0
    if inside:
        _leave()
    try:
        _import()
    finally:
        if inside:
            _enter()


def import_all() -> None:
    """``ensure``, then ``PRELOADED`` (with the gate open: no page run waits for them)."""
    ensure()
    _import_each(PRELOADED)


def in_background() -> threading.Thread | None:
    """Import ``GATED``, then ``PRELOADED`` with the gate open, on a daemon thread (after a
    server's first page), unless done or under way."""
    with _cond:
        if _gate["done"] or _gate["importing"]:
            return None
    thread = threading.Thread(target=import_all, name="late-imports", daemon=True)
    thread.start()
    return thread


def _enter() -> None:
    with _cond:
        if not _cond.wait_for(lambda: not _gate["importing"], timeout=IMPORT_WAIT_S):
            log.warning("a page run drew while the later libraries were still being imported")
        _gate["drawing"] += 1


def _leave() -> None:
    with _cond:
        _gate["drawing"] -= 1
        _cond.notify_all()


def _import() -> None:
    """Import them once no page run draws (or wait for the thread already importing them)."""
    with _cond:
        if _gate["importing"]:
            _cond.wait_for(lambda: not _gate["importing"], timeout=None)
        if _gate["done"]:
            return
        _gate["importing"] = True
        if not _cond.wait_for(lambda: _gate["drawing"] == 0, timeout=DRAWING_WAIT_S):
            log.warning("importing the later libraries while %d page runs draw", _gate["drawing"])
    try:
        _import_each(GATED)
    finally:
        with _cond:
            _gate["importing"], _gate["done"] = False, True
            _cond.notify_all()


def _import_each(names) -> None:
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:  # the view or worker that needs it imports it and says why
            log.exception("importing %s failed", name)
