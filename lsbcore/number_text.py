"""Numbers as text for tables, captions and reports: a few significant digits, thousands
separated, scientific notation only for very small or very large magnitudes, and a missing
value as a dash, never ``None``, ``nan`` or ``0.0000000000000006``.

The dashboard's tables and the experiment's HTML report share it, so a value reads the same in
both. ``floor`` is for quantities whose tiny values are rounding noise (a TV distance computed
in float64 is exact only to about 1e-15): below it the text says ``< floor`` instead of
printing the noise as if it meant something.
"""

from __future__ import annotations

import math
from numbers import Integral, Real

__all__ = ["MISSING", "number_text"]

MISSING = "—"  # an em dash: no value (not measured, not defined)
_LARGE = 1e15  # from here on scientific: thousands separators stop being readable


def _scientific(value: float, digits: int) -> str:
    """``6e-16``, ``1.23e+20`` -> ``1.23e20``: the mantissa without trailing zeros."""
    mantissa, exponent = f"{value:.{digits - 1}e}".split("e")
    if "." in mantissa:
        mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}e{int(exponent)}"


def number_text(value, digits: int = 3, floor: float | None = None, missing: str = MISSING) -> str:
    """``value`` with ``digits`` significant digits, as text.

    ``None`` and NaN give ``missing``; integers keep every digit (``1,235``); infinities give
    ``∞``. A non-zero magnitude below ``floor`` gives ``< floor`` (``< 1e-12``). Magnitudes in
    ``[1e-3, 10^digits)`` use plain decimals (``0.0661``, ``2.2``), larger ones are rounded to
    ``digits`` significant digits and thousands-separated (``32,000``), smaller or huge ones are
    scientific (``6e-16``, ``1.8e15``).
    """
    if isinstance(digits, bool) or not isinstance(digits, int) or not 1 <= digits <= 15:
        raise ValueError(f"digits must be an integer in 1..15, got {digits!r}.")
    if value is None:
        return missing
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, Integral):
        return f"{int(value):,}"
    if not isinstance(value, Real):
        return str(value)
    x = float(value)
    if math.isnan(x):
        return missing
    if math.isinf(x):
        return "∞" if x > 0 else "−∞"
    if x == 0:
        return "0"
    if floor is not None and abs(x) < floor:
        return f"< {_scientific(floor, 1)}" if floor < 1e-3 else f"< {floor:g}"
    rounded = float(f"{x:.{digits}g}")  # first rounded, so 999.7 is 1,000 and not 1e+03
    size = abs(rounded)
    if size >= _LARGE or size < 1e-3:
        return _scientific(x, digits)
    if size >= 10**digits:
        return f"{rounded:,.0f}"
    return f"{rounded:.{digits}g}"
