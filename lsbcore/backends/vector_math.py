"""Elementary functions written out for the compiled kernels, so that the compiler runs many
elements side by side: numba calls libm's scalar ``exp`` and ``log1p`` in a loop (no vector ones
here: no SVML), about 5x slower on a state's few hundred sites (BENCHMARKS.md, "numba's missing
vector ``exp``, measured")."""

from __future__ import annotations

import math

import numpy as np
from numba import njit

# exp's argument reduced by ln 2 split in two (fdlibm's parts): r = v - q ln 2 exactly enough
_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
# below this e^v is 0 in float64 (subnormals end near -745); the argument is clamped there
_EXP_FLOOR = -1400.0
_SQRT2_M1 = 0.41421356237309503  # sqrt 2 - 1


@njit(cache=True, nogil=True, fastmath={"contract"})
def _vector_exp(v, out, powers):
    """``out = e^v`` elementwise, written out so that the compiler runs the elements side by
    side: numba's ``math.exp`` is a scalar library call (no vector one here: no SVML), 5x
    slower (BENCHMARKS.md). ``out`` must not be ``v``: the compiler's vector loop checks that
    its arrays do not overlap and runs one element at a time where they do (5x slower again).
    ``e^v = 2^q e^r``, ``q = round(v / ln 2)``, ``|r| <= ln 2 / 2``, ``e^r`` by its Taylor
    polynomial to degree 13 (the remainder below 5e-18), ``2^q`` as two normal powers of two
    from their bit patterns (``powers [2, n]`` scratch), so that results down to the
    subnormals come out right. Within about one unit in the last place of libm's for
    ``v <= 709``."""
    n = v.shape[0]
    for k in range(n):
        a = max(v[k], _EXP_FLOOR)
        q = math.floor(a * _LOG2E + 0.5)
        r = (a - q * _LN2_HI) - q * _LN2_LO
        p = 1.0 / 6227020800.0
        p = p * r + 1.0 / 479001600.0
        p = p * r + 1.0 / 39916800.0
        p = p * r + 1.0 / 3628800.0
        p = p * r + 1.0 / 362880.0
        p = p * r + 1.0 / 40320.0
        p = p * r + 1.0 / 5040.0
        p = p * r + 1.0 / 720.0
        p = p * r + 1.0 / 120.0
        p = p * r + 1.0 / 24.0
        p = p * r + 1.0 / 6.0
        p = p * r + 0.5
        p = p * r + 1.0
        out[k] = p * r + 1.0
        half = math.floor(0.5 * q)
        powers[0, k] = (np.int64(half) + 1023) << 52
        powers[1, k] = (np.int64(q - half) + 1023) << 52
    first, second = powers[0].view(np.float64), powers[1].view(np.float64)
    for k in range(n):
        out[k] = out[k] * first[k] * second[k]


@njit(cache=True, nogil=True, inline="always")
def _atanh_series(s2):
    """``sum_q s^(2q) / (2q + 1)`` for ``q <= 10``, written out (a loop here would keep the
    compiler from running the sites side by side): ``log(1 + a) = 2 s`` times it with
    ``s = a / (2 + a)``. For ``|s| <= 3 - 2 sqrt 2`` (0.1716) the remainder is below 2e-18."""
    p = 1.0 / 21.0
    p = p * s2 + 1.0 / 19.0
    p = p * s2 + 1.0 / 17.0
    p = p * s2 + 1.0 / 15.0
    p = p * s2 + 1.0 / 13.0
    p = p * s2 + 1.0 / 11.0
    p = p * s2 + 1.0 / 9.0
    p = p * s2 + 1.0 / 7.0
    p = p * s2 + 1.0 / 5.0
    p = p * s2 + 1.0 / 3.0
    return p * s2 + 1.0


@njit(cache=True, nogil=True, inline="always")
def _log1p_unit(y):
    """``log1p(y)`` for ``y`` in ``[0, 1]``, without a branch: up to ``sqrt 2 - 1``
    ``2 atanh(y / (2 + y))``, above it ``ln 2 + log1p((y - 1) / 2)``, so the series' argument
    stays within 0.1716 (eleven terms). Within 3 units in the last place of ``np.log1p``."""
    c = 1.0 if y > _SQRT2_M1 else 0.0
    s = (y - c) / (y + 2.0 + c)
    return c * _LN2_HI + (2.0 * s * _atanh_series(s * s) + c * _LN2_LO)
