"""Which mode a chain is in, read from its magnetisation with hysteresis, and how often it
changes: the measure of mixing between the two halves of a bimodal posterior.

A state is in mode +1 once ``m / n > threshold``, in mode -1 once ``m / n < -threshold``, and
keeps its mode while ``|m / n| <= threshold`` (hysteresis: a chain wandering near ``m = 0`` does
not count as switching back and forth). Before its first crossing a chain has no mode (0).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lsbcore.checks import real

DEFAULT_THRESHOLD = 0.5


def mode_path(magnetisation, threshold: float = DEFAULT_THRESHOLD) -> np.ndarray:
    """The mode ``[T, B]`` (int8: +1, -1, or 0 before the first crossing) of a magnetisation
    series ``m / n`` of shape ``[T, B]`` (or ``[T]``: one chain)."""
    threshold = real(threshold, "threshold", 0.0, 1.0)
    m = np.asarray(magnetisation, dtype=np.float64)
    if m.ndim == 1:
        m = m[:, None]
    if m.ndim != 2:
        raise ValueError(f"the magnetisation must have shape [T, B] or [T], got {m.shape}.")
    crossed = np.where(m > threshold, 1, np.where(m < -threshold, -1, 0))  # [T, B]
    # forward fill: every time takes the sign of the last crossing at or before it
    t = np.arange(len(m))[:, None]
    last = np.maximum.accumulate(np.where(crossed != 0, t, -1), axis=0)
    filled = np.take_along_axis(crossed, np.maximum(last, 0), axis=0)
    return np.where(last >= 0, filled, 0).astype(np.int8)


@dataclass(frozen=True)
class ModeSummary:
    """Per chain ``[B]``: the fraction of times in mode +1 and in mode -1 (the rest had no
    mode yet) and the number of switches between them."""

    fraction_plus: np.ndarray
    fraction_minus: np.ndarray
    switches: np.ndarray

    def as_rows(self) -> list[dict]:
        return [
            {"fraction +1": float(p), "fraction -1": float(q), "switches": int(s)}
            for p, q, s in zip(self.fraction_plus, self.fraction_minus, self.switches, strict=True)
        ]


def mode_summary(magnetisation, threshold: float = DEFAULT_THRESHOLD) -> ModeSummary:
    """Time in each mode and switches counted along ``magnetisation`` (``[T, B]`` or ``[T]``)."""
    path = mode_path(magnetisation, threshold)
    if len(path) == 0:
        zero = np.zeros(path.shape[1])
        return ModeSummary(zero, zero, zero.astype(np.int64))
    changed = (path[1:] != path[:-1]) & (path[:-1] != 0)  # 0 -> +-1 is the first entry
    return ModeSummary(
        fraction_plus=(path == 1).mean(0),
        fraction_minus=(path == -1).mean(0),
        switches=changed.sum(0).astype(np.int64),
    )
