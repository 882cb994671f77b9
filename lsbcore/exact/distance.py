"""How far the chain's law is from the target after ``t`` steps: ``TV(pi, v P^t)``.

For any ``P`` that leaves ``pi`` invariant this is non-increasing in ``t`` (TV contracts under
a Markov kernel), and for an ergodic chain it tends to 0 like ``(1 - gap)^t``.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

#: Start laws ``start_distribution`` understands besides a state code or a vector.
STARTS = ("uniform", "least likely")
#: The usual threshold of the mixing time: the first step at which TV is at most 1/4.
MIXING_TV = 0.25


def start_distribution(start, pi: np.ndarray) -> np.ndarray:
    """The start law ``v``: ``"uniform"``, ``"least likely"`` (a point mass at the state of
    smallest ``pi``: the hardest point start), a state code ``k`` (a point mass) or a vector."""
    n_states = len(pi)
    if isinstance(start, str):
        if start == "uniform":
            return np.full(n_states, 1.0 / n_states)
        if start == "least likely":
            start = int(np.argmin(pi))
        else:
            raise ValueError(f"start must be one of {STARTS}, a state code or a vector.")
    if isinstance(start, (int, np.integer)) and not isinstance(start, bool):
        if not 0 <= start < n_states:
            raise ValueError(f"start state code must be in [0, {n_states}), got {start}.")
        v = np.zeros(n_states)
        v[start] = 1.0
        return v
    v = np.asarray(start, dtype=np.float64)
    if v.shape != (n_states,) or (v < 0).any() or not np.isclose(v.sum(), 1.0, atol=1e-12):
        raise ValueError(f"a start vector must be a distribution over {n_states} states.")
    return v


def tv_curve(p, pi: np.ndarray, start="uniform", steps: int = 100) -> np.ndarray:
    """``TV(pi, v P^t)`` for ``t = 0..steps``, ``[steps + 1]``; ``P`` dense or scipy sparse."""
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 0:
        raise ValueError(f"steps must be an integer >= 0, got {steps!r}.")
    v = start_distribution(start, pi)
    p_t = p.T.tocsr() if sparse.issparse(p) else p.T  # v P as P^T v: a row-major product
    out = np.empty(steps + 1)
    for t in range(steps + 1):
        out[t] = 0.5 * np.abs(v - pi).sum()
        v = p_t @ v
    return out


def mixing_time(curve: np.ndarray, threshold: float = MIXING_TV) -> int | None:
    """The first step ``t`` with ``curve[t] <= threshold`` (``tv_curve``'s answer; None when
    the curve never gets there). Unlike the relaxation time (the long-run rate), it counts the
    steps from this start: a single-site sampler needs at least as many as the sites its start
    differs in from where the target's mass is, whatever its gap."""
    below = np.flatnonzero(np.asarray(curve) <= threshold)
    return int(below[0]) if below.size else None
