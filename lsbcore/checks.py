"""Numbers given to the library: Python and numpy scalars alike, booleans never.

``torch.distributions`` and numpy accept ``np.int64(3)`` where 3 is accepted, and refuse
``True`` where a count is meant; so does every public function here. Each check returns a
plain ``int`` or ``float`` and raises ``ValueError`` with a sentence naming the argument;
a boolean or a value of the wrong type raises ``ArgumentTypeError``, a ``TypeError`` that is
also a ``ValueError`` (so the app, which catches the library's refusals as ``ValueError``,
shows it too). Values are quoted shortened: a user's integer may have thousands of digits.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

__all__ = ["ArgumentTypeError", "integer", "real"]


class ArgumentTypeError(TypeError, ValueError):
    """A boolean, a string or another non-number where a number is meant."""


def _is_bool(value) -> bool:
    return isinstance(value, (bool, np.bool_))


def _shown(value, limit: int = 40) -> str:
    """``repr(value)`` shortened; an integer too long to print is described instead (its repr
    would cost time, or raise beyond Python's 4,300-digit limit)."""
    if isinstance(value, numbers.Integral) and abs(int(value)).bit_length() > 128:
        return f"an integer of about {int(abs(int(value)).bit_length() * math.log10(2))} digits"
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def integer(value, name: str, low: int | None = None, high: int | None = None) -> int:
    """``value`` as an ``int`` within ``[low, high]`` (either may be None)."""
    kind = "a non-negative integer" if (low, high) == (0, None) else "an integer"
    kind += "" if (low, high) == (0, None) else _range(low, high)
    if _is_bool(value) or not isinstance(value, numbers.Integral):
        raise ArgumentTypeError(f"{name} must be {kind}, got {_shown(value)}.")
    value = int(value)
    if (low is not None and value < low) or (high is not None and value > high):
        raise ValueError(f"{name} must be {kind}, got {_shown(value)}.")
    return value


def real(value, name: str, low: float | None = None, high: float | None = None) -> float:
    """``value`` as a finite ``float`` within ``[low, high]`` (either may be None)."""
    if _is_bool(value) or not isinstance(value, numbers.Real):
        raise ArgumentTypeError(
            f"{name} must be a real number{_range(low, high)}, got {_shown(value)}."
        )
    try:
        number = float(value)
    except OverflowError:  # an integer beyond float64's range
        number = math.inf
    if math.isnan(number):
        raise ValueError(f"{name} must be a real number{_range(low, high)}, got {_shown(value)}.")
    if not math.isfinite(number):
        raise ValueError(f"{name} must be finite, got {_shown(value)}.")
    if (low is not None and number < low) or (high is not None and number > high):
        raise ValueError(f"{name} must be a real number{_range(low, high)}, got {_shown(value)}.")
    return number


def _range(low, high) -> str:
    if low is not None and high is not None:
        return f" between {low} and {high}"
    if low is not None:
        return f" >= {low}"
    if high is not None:
        return f" <= {high}"
    return ""
