"""One link value read from text: a number within bounds, or true/false. The sidebar's reader
(``app.config``) and the views' (``app.view_links``) both use these, so a bad value gets the
same sentence wherever it is typed. No Streamlit here."""

from __future__ import annotations

import math

from app.text import quote

TRUE = ("1", "true", "yes", "on")
FALSE = ("0", "false", "no", "off")


def number(raw, label: str, low: float, high: float, whole: bool, warnings: list[str]):
    """``raw`` as a finite number in ``[low, high]`` (clamped, rounded when ``whole``), or None
    when it is not a number or NaN; each repair adds a sentence to ``warnings``."""
    try:
        value = float(raw)
    except (TypeError, ValueError, OverflowError):
        warnings.append(f"{label}: {quote(raw)} is not a number; using the default.")
        return None
    if math.isnan(value):
        warnings.append(f"{label}: NaN is not allowed; using the default.")
        return None
    if value < low or value > high:
        clamped = min(max(value, low), high)
        shown = f"{value:g}".replace("inf", "∞")  # -inf keeps its sign: "-∞"
        warnings.append(f"{label}: {shown} is outside [{low:g}, {high:g}]; using {clamped:g}.")
        value = clamped
    if whole:
        if value != int(value):
            warnings.append(f"{label}: {value:g} is not a whole number; using {round(value)}.")
        return int(round(value))
    return float(value)


def truth(raw) -> bool | None:
    """``raw`` as true or false, None when it is neither."""
    text = str(raw).strip().lower()
    if text in TRUE:
        return True
    if text in FALSE:
        return False
    return None
