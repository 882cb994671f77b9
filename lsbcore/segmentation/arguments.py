"""Argument checks shared by the segmentation entry points.

Each raises ValueError with a sentence that names the argument and what it accepts, as
``torch.distributions`` does, so that the app can show the message as it is.
"""

from __future__ import annotations

import math
import numbers
import operator

import numpy as np


def real_number(value: object, name: str, *, minimum: float | None = None, positive=False):
    """``value`` as a finite float; numpy scalars are accepted, booleans refused."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a real number, got {value!r}.")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{name} must be finite, got {value!r}.")
    if positive and number <= 0:
        raise ValueError(f"{name} must be > 0, got {value!r}.")
    if minimum is not None and number < minimum:
        raise ValueError(f"{name} must be >= {minimum:g}, got {value!r}.")
    return number


def whole_number(value: object, name: str, *, minimum: int) -> int:
    """``value`` as an int >= ``minimum``; numpy integers are accepted, booleans refused."""
    number = None
    if not isinstance(value, bool | np.bool_):
        try:
            number = operator.index(value)
        except TypeError:
            number = None
    if number is None or number < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}.")
    return number


def real_array(value: object, name: str) -> np.ndarray:
    """``value`` as a float64 array of finite numbers (booleans and complex refused)."""
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError) as err:  # ragged nested lists
        raise ValueError(f"{name} must be a numeric array, got {type(value).__name__}.") from err
    if arr.dtype == bool or not (
        np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)
    ):
        raise ValueError(f"{name} must hold real numbers, got dtype {arr.dtype}.")
    arr = arr.astype(np.float64)
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} must contain only finite values (no NaN or inf).")
    return arr
