"""JSON from a user's file with its numbers bounded while they are parsed.

Python's ``json`` turns a 5,000-digit integer into an ``int`` (slow, then an error further on),
``1e400`` into ``inf``, ``NaN``/``Infinity`` into floats, and a thousand nested brackets into
a ``RecursionError``; here each is refused with a sentence before any of that happens. Used
by the learned-function, pinned-run and map files.
``read_capped`` reads such a file with a size cap, so that a huge file or ``/dev/zero`` costs
at most the cap in memory.
"""

from __future__ import annotations

import json
import math
import sys

MAX_DIGITS = 20  # an integer in a file has at most this many digits


def loads(text: str, holder: str, error: type[Exception] = ValueError):
    """``json.loads(text)`` with bounded numbers; ``holder`` names what the file holds in the
    refusal of ``NaN``/``Infinity`` ("a learned function"); refusals raise ``error``."""

    def parse_int(digits: str) -> int:
        if len(digits.lstrip("-")) > MAX_DIGITS:  # before Python converts it
            raise error(f"a number in the file has more than {MAX_DIGITS} digits.")
        return int(digits)

    def parse_float(number: str) -> float:
        value = float(number)
        if not math.isfinite(value):
            raise error(f"the number {number[:20]} in the file is too large for a float.")
        return value

    def parse_constant(name: str):
        raise error(f"{name} is not a number {holder} may hold.")

    try:
        return json.loads(
            text, parse_int=parse_int, parse_float=parse_float, parse_constant=parse_constant
        )
    except RecursionError:  # "[[[[..." deeper than Python's stack: the limit, in words
        raise error(
            f"the file nests its lists or objects more than about {sys.getrecursionlimit():,} "
            "levels deep, too deep to read."
        ) from None


def read_capped(path, max_bytes: int) -> str:
    """The UTF-8 text of a user's file, read in one bounded call: a file larger than
    ``max_bytes`` (or ``/dev/zero``, which never ends) is refused with a ``ValueError`` after
    reading at most ``max_bytes + 1`` bytes. ``OSError`` when it cannot be read."""
    with open(path, "rb") as f:
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ValueError(f"it holds more than {max_bytes / 2**20:g} MB, the most this reads")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("it is not UTF-8 text") from None


def read_file(path, max_bytes: int, holder: str):
    """The JSON value in the file at ``path`` (``read_capped``, then ``loads``); every refusal
    is a ``ValueError`` sentence that names the file, ``holder`` what it holds ("a race
    file")."""
    name = getattr(path, "name", None) or str(path).rsplit("/", 1)[-1]
    try:
        text = read_capped(path, max_bytes)
    except OSError as err:
        raise ValueError(f"{name} cannot be read ({err.strerror or type(err).__name__}).") from None
    except ValueError as err:
        raise ValueError(f"{name} cannot be read: {err}.") from None
    try:
        return loads(text, holder)
    except json.JSONDecodeError as err:
        raise ValueError(f"{name} is not JSON (line {err.lineno}, column {err.colno}).") from None
    except ValueError as err:
        raise ValueError(f"{name} is not {holder}: {err}") from None
