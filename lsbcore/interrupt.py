"""Ctrl-C (SIGINT) and SIGTERM in the commands: one way everywhere.

A command stops on either signal, says so in one sentence and exits 130 (SIGINT) or 143
(SIGTERM), 128 plus the signal's number as a shell reports it. Its output files are written
whole or not at all (``lsbcore.out_path``), so a stop leaves each as it was, and a command
that can resume (the sweep, ``lsbcore.rbm.train``) keeps its finished work and says how.

The handlers are installed explicitly: a process started in the background by a
non-interactive shell (``cmd &`` in a script) inherits SIGINT ignored, and Python then installs
no handler of its own, so without this such a command ran to its end and exited 0 when
signalled.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable
from contextlib import contextmanager

__all__ = [
    "StopRequest",
    "Stopped",
    "exit_status",
    "handled",
    "install",
    "restore",
    "run_command",
    "said",
]

SIGNALS = (signal.SIGINT, signal.SIGTERM)
NAMES = {signal.SIGINT: "Ctrl-C (SIGINT)", signal.SIGTERM: "SIGTERM"}


class Stopped(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C so that the same clean-up runs."""


class StopRequest(threading.Event):
    """Set by a signal; ``signum`` says which (None until one arrives)."""

    signum: int | None = None


_last: list[int] = []  # the last signal a handler received: it decides the exit status


def exit_status(signum: int | None = None) -> int:
    """128 plus ``signum``, or the last signal received (SIGINT when none was)."""
    signum = signum or (_last[-1] if _last else signal.SIGINT)
    return 128 + int(signum)


def said(signum: int | None = None) -> str:
    """How a message names the signal (the last one received by default)."""
    signum = signum or (_last[-1] if _last else signal.SIGINT)
    return NAMES.get(signum, f"signal {int(signum)}")


def install(stop: StopRequest | None = None, *, patient: bool = False, signals=SIGNALS):
    """Handle ``signals`` from now: each sets ``stop`` (when given) and raises
    ``KeyboardInterrupt`` (``Stopped`` for SIGTERM), even where SIGINT was inherited ignored.
    ``patient``: the first signal only sets ``stop``, for a command that stops at its next safe
    point (an epoch's end); a second raises at once. Returns what ``restore`` puts back (None
    off the main thread, where Python allows no handler)."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def handle(signum, frame):
        first = stop is None or not stop.is_set()
        _last.append(signum)
        if stop is not None and first:
            stop.signum = signum
            stop.set()
        if patient and first and stop is not None:
            return
        raise Stopped(signum) if signum == signal.SIGTERM else KeyboardInterrupt

    return {signum: signal.signal(signum, handle) for signum in signals}


def restore(previous) -> None:
    """Put back the handlers ``install`` replaced."""
    for signum, handler in (previous or {}).items():
        signal.signal(signum, handler)


@contextmanager
def handled(stop: StopRequest | None = None, *, patient: bool = False, signals=SIGNALS):
    """``install`` for the duration of the block, ``restore`` after."""
    previous = install(stop, patient=patient, signals=signals)
    try:
        yield stop
    finally:
        restore(previous)


def run_command(main: Callable[[list[str] | None], int], prog: str, argv=None) -> int:
    """``main(argv)`` with SIGINT and SIGTERM handled; a stop that the command does not handle
    itself ends it in one sentence with status 130 or 143 (never a traceback)."""
    with handled():
        try:
            return int(main(argv) or 0)
        except KeyboardInterrupt:
            sys.stdout.flush()
            print(
                f"\n{prog}: stopped by {said()}; no output file is left half-written (each is "
                "written whole or not at all).",
                file=sys.stderr,
            )
            return exit_status()
