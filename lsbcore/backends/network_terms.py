"""LSB 2's balancing function at every site of a state, the sites side by side (compiled, CPU).

``g(t) = (h(u) + t h(-u)) / 2`` with ``u = t / (1 + t) - 1/2`` and ``h = softplus(z)``, ``z``
the network's pre-softplus output, piecewise linear in ``u`` (``learning_kernels.
network_pieces``, ``NetworkBalancing.pieces``). On ``g`` itself rather than ``log g``: a
state's values are two vector ``exp`` and two written-out ``log1p`` a site
(``vector_math``), where ``kernels.log_g`` takes about eight scalar library calls. The frozen
steps of FLSB 2 and LSB 2 on an RBM (``rbm_kernels``) and their learning steps
(``rbm_learning_kernels``) read it. A gradient's sums per piece (``piece_sums``) serve the
learning steps on RBMs, factor graphs and lattices alike.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from lsbcore.backends.vector_math import _log1p_unit, _vector_exp

#: ``g`` is computed as itself while the network's ``z`` stays at or above this on the whole
#: input range: every ``h`` is then at least ``e^-600``, far inside float64's range, and
#: ``g(t)``, ``t`` within ``e^+-600``, keeps full relative precision (``network_is_linear``)
NETWORK_FLOOR = -600.0
#: ... and at or below this (``h <= z``: no state's sum of ``g`` can overflow)
NETWORK_CEILING = 1e250
#: Up to this many pieces the sums per piece are a pass over the sites per piece, the sites side
#: by side; beyond, a scatter (a site at a time, each sum waiting on the last: 1.7x slower at 5)
MASKED_PIECES = 16


# error_model="numpy": a division without numba's zero check (every denominator here is at
# least 1), which would keep the compiler from running the sites side by side
@njit(cache=True, nogil=True, fastmath={"contract"}, error_model="numpy")
def _network_terms(t, breakpoints, slope, intercept, rows, pieces, powers, slopes=True):
    """LSB 2's two softplus terms at every site, the sites side by side (the piece lookups,
    a written-out ``exp`` and ``log1p``): into ``rows [9, n]`` the input ``u``, then ``h`` and
    ``dh / dz`` of the two inputs ``z(u)`` and ``z(-u)`` (rows 5-8), their pieces into
    ``pieces [2, n]``. As ``NetworkBalancing.log_h``: ``softplus(z) = max(z, 0) +
    log1p(e^-|z|)``, ``z`` itself (slope 1) above 20, ``e^z`` (slope ``e^z``) below -30.
    Without ``slopes`` rows 7-8 are left alone (a frozen step needs ``h`` only)."""
    u = rows[0]
    for k in range(t.shape[0]):
        u[k] = t[k] / (1.0 + t[k]) - 0.5
    network_terms_at(u, breakpoints, slope, intercept, rows, pieces, powers, slopes)


@njit(cache=True, nogil=True, fastmath={"contract"}, error_model="numpy")
def network_terms_at(u, breakpoints, slope, intercept, rows, pieces, powers, slopes=True):
    """``_network_terms`` from the inputs ``u = t / (1 + t) - 1/2`` themselves (``[n]``; rows
    1-8 and ``pieces`` written, row 0 left alone)."""
    n = u.shape[0]
    z1, z2, y1, y2 = rows[1], rows[2], rows[3], rows[4]
    k1, k2 = pieces[0], pieces[1]
    for k in range(n):
        k1[k], k2[k] = 0, 0
    for c in range(breakpoints.shape[0]):  # pieces count the breakpoints below, as pieces()
        cut = breakpoints[c]
        for k in range(n):
            k1[k] += u[k] > cut
            k2[k] += -u[k] > cut
    minus1, minus2 = rows[5], rows[6]  # -|z|, before h takes these rows
    for k in range(n):
        z1[k] = slope[k1[k]] * u[k] + intercept[k1[k]]
        z2[k] = -slope[k2[k]] * u[k] + intercept[k2[k]]
        minus1[k], minus2[k] = -abs(z1[k]), -abs(z2[k])
    _vector_exp(minus1, y1, powers)  # e^-|z|
    _vector_exp(minus2, y2, powers)
    for side in range(2):
        z, y = rows[1 + side], rows[3 + side]
        h, dh = rows[5 + side], rows[7 + side]
        for k in range(n):  # h and dh in two loops: one would run a site at a time, 2x slower
            soft = max(z[k], 0.0) + _log1p_unit(y[k])
            h[k] = y[k] if z[k] < -30.0 else (z[k] if z[k] > 20.0 else soft)
        if not slopes:
            continue
        for k in range(n):
            sig = (1.0 if z[k] >= 0.0 else y[k]) / (1.0 + y[k])
            dh[k] = y[k] if z[k] < -30.0 else (1.0 if z[k] > 20.0 else sig)


# reassoc: the sums per piece run the sites side by side (in another order than one by one)
@njit(cache=True, nogil=True, fastmath={"contract", "reassoc"}, error_model="numpy")
def piece_sums(a1, a2, u, pieces, by_icpt, by_slope):
    """Adds each piece's share of a gradient into ``by_icpt`` and ``by_slope`` (``[P]``): the
    sites' weights ``a1 [n]`` on the piece of ``u`` and ``a2`` on that of ``-u`` (``pieces
    [2, n]``) for the intercepts, times their input (``u``, ``-u``) for the slopes."""
    k1, k2 = pieces[0], pieces[1]
    n = u.shape[0]
    if by_icpt.shape[0] > MASKED_PIECES:
        for k in range(n):  # a scatter, one site at a time
            by_icpt[k1[k]] += a1[k]
            by_slope[k1[k]] += a1[k] * u[k]
            by_icpt[k2[k]] += a2[k]
            by_slope[k2[k]] -= a2[k] * u[k]
        return
    for p in range(by_icpt.shape[0]):  # a pass per piece, the sites side by side
        icpt, slope = 0.0, 0.0
        for k in range(n):
            w1 = a1[k] if k1[k] == p else 0.0
            w2 = a2[k] if k2[k] == p else 0.0
            icpt += w1 + w2
            slope += (w1 - w2) * u[k]
        by_icpt[p] += icpt
        by_slope[p] += slope


@njit(cache=True, nogil=True)
def network_is_linear(breakpoints, slope, intercept):
    """Whether ``network_g`` is exact for this network: its ``z`` within ``[NETWORK_FLOOR,
    NETWORK_CEILING]`` on ``u`` in ``[-1/2, 1/2]`` (a linear piece's extremes are at its
    interval's ends)."""
    p = slope.shape[0]
    for k in range(p):
        left = -0.5 if k == 0 else breakpoints[k - 1]
        right = 0.5 if k == p - 1 else breakpoints[k]
        for u in (left, right):
            z = slope[k] * u + intercept[k]
            if not (NETWORK_FLOOR <= z <= NETWORK_CEILING):
                return False
    return True


@njit(cache=True, nogil=True)
def network_scratch(n):
    """Work arrays of ``network_g`` for states of ``n`` sites: ``rows``, ``pieces``,
    ``powers``."""
    return (np.empty((9, n)), np.empty((2, n), dtype=np.int64),
            np.empty((2, n), dtype=np.int64))  # fmt: skip


@njit(cache=True, nogil=True, error_model="numpy")
def network_g(t, breakpoints, slope, intercept, g, scratch):
    """``g(t_k)`` at every site into ``g [n]`` (``t_k = e^(s_k)``); ``scratch``:
    ``network_scratch``. Exact where ``network_is_linear``."""
    rows, pieces, powers = scratch
    _network_terms(t, breakpoints, slope, intercept, rows, pieces, powers, False)
    h1, h2 = rows[5], rows[6]
    for k in range(t.shape[0]):
        g[k] = 0.5 * (h1[k] + t[k] * h2[k])
