"""Numbers given to the library: Python and numpy scalars alike, booleans never.

``torch.distributions`` and numpy accept ``np.int64(3)`` where 3 is accepted, and refuse
``True`` where a count is meant; so does every public function here. Each check returns a
plain ``int`` or ``float`` and raises ``ValueError`` with a sentence naming the argument.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

__all__ = ["integer", "real"]


def _is_bool(value) -> bool:
    return isinstance(value, (bool, np.bool_))


def integer(value, name: str, low: int | None = None, high: int | None = None) -> int:
    """``value`` as an ``int`` within ``[low, high]`` (either may be None)."""
    kind = "a non-negative integer" if (low, high) == (0, None) else "an integer"
    kind += "" if (low, high) == (0, None) else _range(low, high)
    if _is_bool(value) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be {kind}, got {value!r}.")
    value = int(value)
    if (low is not None and value < low) or (high is not None and value > high):
        raise ValueError(f"{name} must be {kind}, got {value!r}.")
    return value


def real(value, name: str, low: float | None = None, high: float | None = None) -> float:
    """``value`` as a finite ``float`` within ``[low, high]`` (either may be None)."""
    if _is_bool(value) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a real number{_range(low, high)}, got {value!r}.")
    value = float(value)
    if math.isnan(value):
        raise ValueError(f"{name} must be a real number{_range(low, high)}, got {value!r}.")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}.")
    if (low is not None and value < low) or (high is not None and value > high):
        raise ValueError(f"{name} must be a real number{_range(low, high)}, got {value!r}.")
    return value


def _range(low, high) -> str:
    if low is not None and high is not None:
        return f" between {low} and {high}"
    if low is not None:
        return f" >= {low}"
    if high is not None:
        return f" <= {high}"
    return ""
